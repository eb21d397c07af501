//! `balancer`: ballot's HTTP load balancer (see [`balancer_server::cli`]).

#[global_allocator]
static ALLOC: serving::alloc::Jemalloc = serving::alloc::Jemalloc;

/// jemalloc's options (see [`serving::alloc`]): its defaults, except that freed pages go
/// back to the system after about a second, purged by a background thread, so the memory
/// of a burst (thousands of connections, a rejected table) does not stay resident.
#[export_name = "_rjem_malloc_conf"]
static MALLOC_CONF: serving::alloc::MallocConf =
    serving::alloc::MallocConf::new(c"dirty_decay_ms:1000,muzzy_decay_ms:0,background_thread:true");

fn main() -> anyhow::Result<()> {
    balancer_server::cli::main_from(std::env::args_os())
}
