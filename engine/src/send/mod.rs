//! `quench send`: flow generation, per-flow pacing on a timing wheel, reaction points.
pub mod flowgen;
pub mod pacer;
pub mod run;
pub mod wheel;
pub mod worker;
