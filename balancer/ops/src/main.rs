//! `balancer`: ballot's HTTP load balancer (see [`balancer_ops::cli`]).

#[global_allocator]
static ALLOC: serving::alloc::Jemalloc = serving::alloc::Jemalloc;

/// jemalloc's options: [`serving::alloc::BALANCER_CONF`].
#[export_name = "_rjem_malloc_conf"]
static MALLOC_CONF: serving::alloc::MallocConf =
    serving::alloc::MallocConf::new(serving::alloc::BALANCER_CONF);

fn main() -> anyhow::Result<()> {
    balancer_ops::cli::main_from(std::env::args_os())
}
