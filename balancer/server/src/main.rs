//! `balancer`: ballot's HTTP load balancer (see [`balancer_server::cli`]).

fn main() -> anyhow::Result<()> {
    balancer_server::cli::main_from(std::env::args_os())
}
