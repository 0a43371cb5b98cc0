//! quench's engine: everything that touches the outside world (wire formats, ports, workers,
//! clocks, configuration, CLI, reports). The algorithms live in the sans-IO crates `cp`, `rp`
//! and `np`; the engine feeds them `(now, event)` and turns their decisions into frames.
pub mod appliance;
pub mod cache;
pub mod cli;
#[cfg(test)]
mod config_tests;
pub mod host;
pub mod port;
pub mod recv;
pub mod replay;
pub mod send;
pub mod sim;
pub mod steps;
pub mod switch;
pub mod worker;
pub use quench_config::{bundled, file as config_file};
pub use quench_report as report;
pub use quench_wire as wire;
pub use quench_wire::{pcap, time};
