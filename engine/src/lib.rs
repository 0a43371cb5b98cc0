//! quench's engine: everything that touches the outside world (wire formats, ports, workers,
//! clocks, configuration, CLI, reports). The algorithms live in the sans-IO crates `cp`, `rp`
//! and `np`; the engine feeds them `(now, event)` and turns their decisions into frames.
pub mod appliance;
pub mod cli;
#[cfg(test)]
mod config_tests;
pub mod recv;
pub mod replay;
pub mod send;
pub mod sim;
pub mod switch;
pub use quench_config::{bundled, file as config_file};
pub use quench_node::host;
pub use quench_port as port;
pub use quench_port::{cache, worker};
pub use quench_report as report;
pub use quench_wire as wire;
pub use quench_wire::{pcap, time};
