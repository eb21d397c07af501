//! One module per `ballot` subcommand.

pub mod aggregate;
pub mod build_index;
pub mod data_cmds;
pub mod demo;
pub mod eval;
pub mod explain;
pub mod grid;
pub mod replay;
pub mod retrain;
pub mod scale;
pub mod simulate;
pub mod switch;
pub mod train;
