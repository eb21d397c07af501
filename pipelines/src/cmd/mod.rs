//! One module per `ballot` subcommand.

pub mod data_cmds;
pub mod demo;
pub mod eval;
