//! `tantivy-engine`: builds and serves a Tantivy index (see [`tantivy_engine::cli`]).

fn main() -> std::process::ExitCode {
    tantivy_engine::cli::main_from(std::env::args_os())
}
