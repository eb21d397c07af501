//! The servers' memory allocator: jemalloc, with options set per binary.
//!
//! Why not glibc's malloc: under the soak's steady load (`bench/soak.sh`), a replica's
//! resident memory crept up over ten minutes while the bytes in use stayed flat (glibc's
//! `malloc_stats`): its heap fragments under the mix of long-lived cache entries and
//! short-lived request buffers, and neither one arena (`MALLOC_ARENA_MAX=1`), a fixed mmap
//! threshold nor a periodic `malloc_trim` stopped it. jemalloc held the same replica flat.
//! Its default options spend memory on a cache per thread, and the replica runs 64 search
//! threads; small thread caches and one arena keep it flat and small (docs/results.md, "The
//! replicas' memory allocator", has the numbers and the commands).
//!
//! Each server binary declares the allocator and its options ([`REPLICA_CONF`],
//! [`BALANCER_CONF`]):
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOC: serving::alloc::Jemalloc = serving::alloc::Jemalloc;
//!
//! #[export_name = "_rjem_malloc_conf"]
//! static MALLOC_CONF: serving::alloc::MallocConf =
//!     serving::alloc::MallocConf::new(serving::alloc::REPLICA_CONF);
//! ```
//!
//! The options are jemalloc's `malloc_conf` string, read once before `main`. An operator
//! overrides them with the `_RJEM_MALLOC_CONF` environment variable ([`CONF_ENV`], the
//! prefixed name of jemalloc's `MALLOC_CONF` in this build);
//! `_RJEM_MALLOC_CONF=stats_print:true` prints the options in force, and the statistics, at
//! exit. A binary that runs a server as one of several commands (`ballot replica`) cannot
//! choose its options per command before `main`, so it re-executes itself with the server's
//! options in that variable ([`reexec_with_conf`]).

use std::ffi::{c_char, CStr};

pub use tikv_jemallocator::Jemalloc;

/// The replica's options: one arena and small thread caches, because its 64 search threads
/// would each keep a cache of freed blocks; freed pages go back to the system after about a
/// second, purged by a background thread.
pub const REPLICA_CONF: &CStr = c"narenas:1,tcache_max:1024,tcache_nslots_small_max:16,tcache_nslots_large:1,dirty_decay_ms:1000,muzzy_decay_ms:0,background_thread:true";

/// The balancer's options: jemalloc's defaults, except that freed pages go back to the
/// system after about a second, purged by a background thread, so the memory of a burst
/// (thousands of connections, a rejected table) does not stay resident.
pub const BALANCER_CONF: &CStr = c"dirty_decay_ms:1000,muzzy_decay_ms:0,background_thread:true";

/// The environment variable jemalloc reads its options from in this build.
pub const CONF_ENV: &str = "_RJEM_MALLOC_CONF";

/// Set in the environment of a process [`reexec_with_conf`] started, so it does not
/// re-execute again.
const REEXECUTED_ENV: &str = "SERVING_ALLOC_REEXECUTED";

/// Re-executes this process (same executable, same arguments) with `conf` in
/// [`CONF_ENV`], followed by whatever the operator had set there (so the operator's options
/// win, as with the server binaries). Returns `Ok(())` in the re-executed process; on
/// success in the first one it does not return.
pub fn reexec_with_conf(conf: &CStr) -> std::io::Result<()> {
    use std::os::unix::process::CommandExt;
    if std::env::var_os(REEXECUTED_ENV).is_some() {
        return Ok(());
    }
    let invalid = |what: &str| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{what} is not UTF-8"),
        )
    };
    let mut value = conf
        .to_str()
        .map_err(|_| invalid("the options"))?
        .to_owned();
    if let Some(extra) = std::env::var_os(CONF_ENV) {
        value.push(',');
        value.push_str(extra.to_str().ok_or_else(|| invalid(CONF_ENV))?);
    }
    let exe = std::env::current_exe()?;
    let mut args = std::env::args_os();
    let arg0 = args.next().unwrap_or_else(|| exe.clone().into_os_string());
    Err(std::process::Command::new(&exe)
        .arg0(arg0)
        .args(args)
        .env(CONF_ENV, value)
        .env(REEXECUTED_ENV, "1")
        .exec())
}

/// jemalloc's compile-time options: a pointer to a NUL-terminated `key:value,...` string,
/// exported as `_rjem_malloc_conf` by a binary (see the module header).
#[repr(transparent)]
pub struct MallocConf(*const c_char);

// SAFETY: the pointer is to a `'static` C string literal, never written.
unsafe impl Sync for MallocConf {}

impl MallocConf {
    /// Options `conf`, such as `c"narenas:1,tcache_max:1024"`.
    pub const fn new(conf: &'static CStr) -> Self {
        Self(conf.as_ptr())
    }
}
