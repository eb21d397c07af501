//! `serving`: the one hardened HTTP/1 server loop that ballot's balancer and replica both
//! run, with the defences HAProxy and nginx apply to every client connection:
//!
//! * [`serve`] ([`server`]): the accept loop. At most `max_connections` client connections
//!   are open at once (HAProxy's `maxconn`): at the cap the loop stops accepting and new
//!   connections wait in the kernel's listen backlog until a slot frees, as HAProxy does, so
//!   no file descriptor is spent on a client that cannot be served. A failed `accept` (out of
//!   file descriptors) backs off briefly and is logged once per burst; the connections
//!   already open keep being served.
//! * [`conn`]: one connection. A header read timeout (from the connection's start, or from
//!   the first byte of a later request, to the end of the request head: HAProxy's `timeout
//!   http-request`, Go's `ReadHeaderTimeout`) and an idle keep-alive timeout (between the end
//!   of a response and the first byte of the next request: HAProxy's `timeout
//!   http-keep-alive`, Go's `IdleTimeout`). On stop, connections with no request in flight
//!   (idle, or with a half-sent request) close at once; requests in flight finish. A
//!   request head is at most 32 KiB (431 past it).
//! * [`rlimit`]: raise the soft open-file limit to the hard one at start (as HAProxy and
//!   nginx do) and size the connection cap to what the limit allows.
//! * [`signals`]: SIGTERM/SIGINT as a stop future, SIGHUP handled before any slow start-up.
//! * [`logging`]: `tracing` to stderr, filtered by `RUST_LOG`, as text or JSON lines.
//! * [`alloc`]: jemalloc as the servers' allocator, with options per binary, so resident
//!   memory stays flat under steady load and returns to the system after a burst.
//!
//! Why not hyper's own `header_read_timeout`: in hyper 1 it is one timer that starts when a
//! connection opens *and* whenever it goes idle, so it cannot give a short header timeout
//! and a longer idle timeout at once (hyperium/hyper#3828, #1628). Both timers live here,
//! in the task that drives each connection ([`conn::Clock`]), and hyper's is left off.

pub mod alloc;
pub mod conn;
pub mod limits;
pub mod logging;
pub mod rlimit;
pub mod server;
pub mod signals;

pub use limits::Limits;
pub use server::{serve, Gate};
