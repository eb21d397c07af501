//! `replica`: serves one ballot search replica over HTTP (see [`replica::cli`]).

#[global_allocator]
static ALLOC: serving::alloc::Jemalloc = serving::alloc::Jemalloc;

/// jemalloc's options (see [`serving::alloc`]): one arena and small thread caches, because
/// the replica's 64 search threads would each keep a cache of freed blocks (58 MB resident
/// with jemalloc's defaults, 21–23 MB with these); freed pages go back to the system after
/// about a second, purged by a background thread.
#[export_name = "_rjem_malloc_conf"]
static MALLOC_CONF: serving::alloc::MallocConf = serving::alloc::MallocConf::new(
    c"narenas:1,tcache_max:1024,tcache_nslots_small_max:16,tcache_nslots_large:1,dirty_decay_ms:1000,muzzy_decay_ms:0,background_thread:true",
);

fn main() -> std::process::ExitCode {
    replica::cli::main_from(std::env::args_os())
}
