//! `quench send`: flow generation, the frames of the host core's flows (host/core.rs: pacing
//! and reaction points), the pacing audit, the poll loop.
pub mod audit;
pub mod flowgen;
pub mod run;
pub mod wheel;
pub mod worker;
