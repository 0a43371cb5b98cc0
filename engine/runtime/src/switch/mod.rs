//! The software switch: MAC learning and forwarding between ports, with per-port egress
//! queues ([`queue`]) that the congestion points plug into.
pub mod config;
pub mod control;
#[cfg(test)]
mod cp_tests;
pub mod egress;
pub mod fastpath;
pub mod forward;
pub mod plan;
pub mod rings;
mod routing;
pub mod runtime;
#[cfg(test)]
mod scale_tests;
pub mod spsc;
pub mod stats;
pub use quench_node::switch::{core, cp, depth, fdb, queue, sampling};
