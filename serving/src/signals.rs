//! Signals of a server process: SIGTERM and SIGINT stop it, SIGHUP never kills it.
//!
//! The handlers are installed by [`Signals::install`], which a server calls first thing in
//! its runtime, before any slow start-up work (opening an index, loading a voting table):
//! a signal that arrives during that work is then queued instead of taking the default
//! action (SIGHUP's is to exit with status 129).

use tokio::signal::unix::{signal, Signal, SignalKind};

/// The installed handlers.
#[derive(Debug)]
pub struct Signals {
    term: Signal,
    int: Signal,
    hup: Signal,
}

impl Signals {
    /// Installs SIGTERM, SIGINT and SIGHUP handlers (inside a Tokio runtime).
    pub fn install() -> std::io::Result<Signals> {
        Ok(Signals {
            hup: signal(SignalKind::hangup())?,
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
        })
    }

    /// SIGHUP (a server reloads on it, or ignores it) and the stop signals.
    pub fn take_hup(self) -> (Signal, Stop) {
        (
            self.hup,
            Stop {
                term: self.term,
                int: self.int,
            },
        )
    }
}

/// SIGTERM and SIGINT, once SIGHUP went its own way.
#[derive(Debug)]
pub struct Stop {
    term: Signal,
    int: Signal,
}

impl Stop {
    /// Resolves on the next SIGTERM or SIGINT with its name.
    pub async fn recv(&mut self) -> &'static str {
        tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = self.int.recv() => "SIGINT",
        }
    }
}

/// Ignores SIGHUP until a handler is installed: for the moments before a runtime exists.
pub fn ignore_hangup() {
    // SAFETY: setting a signal's disposition to SIG_IGN runs no code of ours in a handler.
    unsafe {
        libc::signal(libc::SIGHUP, libc::SIG_IGN);
    }
}
