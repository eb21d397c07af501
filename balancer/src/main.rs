//! `balancer`: ballot's HTTP load balancer (see [`balancer::cli`]).

fn main() -> anyhow::Result<()> {
    balancer::cli::main_from(std::env::args_os())
}
