//! The software switch: MAC learning and forwarding between ports, with per-port egress
//! queues ([`queue`]) that the congestion points plug into.
pub mod config;
pub mod cp;
pub mod fdb;
pub mod forward;
pub mod pfc;
pub mod queue;
pub mod stats;
