//! One module per `quench` subcommand, each with a clap `Args` and `run(args)`.
pub mod frames;
pub mod replay;
pub mod report;
pub mod sim;
pub mod stats;
pub mod switch;
