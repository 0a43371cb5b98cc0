//! `quench send`: flow generation, the frames of the host core's flows (host/core.rs: pacing
//! and reaction points), the pacing audit, the poll loop.
pub mod config;
pub mod run;
pub mod runtime;
pub mod worker;
pub use quench_node::host::audit;
pub use quench_node::{flowgen, wheel};
