//! quench's engine: everything that touches the outside world (wire formats, ports, workers,
//! clocks, configuration, CLI, reports). The algorithms live in the sans-IO crates `cp`, `rp`
//! and `np`; the engine feeds them `(now, event)` and turns their decisions into frames.
pub mod appliance;
pub mod bundled;
pub mod cache;
pub mod cli;
pub mod config_file;
#[cfg(test)]
mod config_tests;
pub mod host;
pub mod pcap;
pub mod port;
pub mod recv;
pub mod replay;
pub mod report;
pub mod send;
pub mod sim;
pub mod steps;
pub mod switch;
pub mod time;
pub mod wire;
pub mod worker;
