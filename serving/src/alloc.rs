//! The servers' memory allocator: jemalloc, with options set per binary.
//!
//! Why not glibc's malloc: under the soak's steady load (`bench/soak.sh`), a replica's
//! resident memory crept from 34 to 44 MB over ten minutes while the bytes in use stayed at
//! 27 MB (glibc's `malloc_stats`): its heap fragments under the mix of long-lived cache
//! entries and short-lived request buffers, and neither one arena (`MALLOC_ARENA_MAX=1`), a
//! fixed mmap threshold nor a periodic `malloc_trim` stopped it. jemalloc held the same
//! replica flat. Its default options spend memory on a cache per thread, and the replica
//! runs 64 search threads: 58 MB flat. Small thread caches and one arena keep it at
//! 21–23 MB flat (docs/results.md, "Soak", has the commands).
//!
//! Each server binary declares the allocator and its options:
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOC: serving::alloc::Jemalloc = serving::alloc::Jemalloc;
//!
//! #[export_name = "_rjem_malloc_conf"]
//! static MALLOC_CONF: serving::alloc::MallocConf = serving::alloc::MallocConf::new(c"narenas:1");
//! ```
//!
//! The options are jemalloc's `malloc_conf` string, read once before `main`. An operator
//! overrides them with the `_RJEM_MALLOC_CONF` environment variable (the prefixed name of
//! jemalloc's `MALLOC_CONF` in this build); `_RJEM_MALLOC_CONF=stats_print:true` prints the
//! options in force, and the statistics, at exit.

use std::ffi::{c_char, CStr};

pub use tikv_jemallocator::Jemalloc;

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
