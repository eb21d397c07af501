//! `replica`: serves one ballot search replica over HTTP (see [`replica::cli`]).

fn main() -> std::process::ExitCode {
    replica::cli::main_from(std::env::args_os())
}
