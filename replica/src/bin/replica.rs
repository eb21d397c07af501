//! `replica`: serves one ballot search replica over HTTP (see [`replica::cli`]).

#[global_allocator]
static ALLOC: serving::alloc::Jemalloc = serving::alloc::Jemalloc;

/// jemalloc's options: [`serving::alloc::REPLICA_CONF`].
#[export_name = "_rjem_malloc_conf"]
static MALLOC_CONF: serving::alloc::MallocConf =
    serving::alloc::MallocConf::new(serving::alloc::REPLICA_CONF);

fn main() -> std::process::ExitCode {
    replica::cli::main_from(std::env::args_os())
}
