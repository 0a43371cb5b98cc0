//! The software switch: MAC learning and forwarding between ports, with per-port egress
//! queues ([`queue`]) that the congestion points plug into.
pub mod config;
pub mod control;
pub mod core;
pub mod cp;
pub mod depth;
pub mod egress;
pub mod fastpath;
pub mod fdb;
pub mod forward;
pub mod queue;
pub mod rings;
mod routing;
pub mod sampling;
#[cfg(test)]
mod scale_tests;
pub mod spsc;
pub mod stats;
