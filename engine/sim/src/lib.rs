//! `quench sim`: a deterministic discrete-event simulator that runs the algorithm crates
//! (`cp`, `rp`, `np`) on simulated links in virtual time.
//!
//! Layers:
//! - [`world`]: nodes, ports, links, hosts and flows, and the event loop; the algorithms are
//!   reached only through [`cc`], which wraps the crates' state machines;
//! - [`topology`], [`traffic`], [`scenario`]: inputs (ns-3 HPCC topology / flow formats, workload
//!   CDFs, the TOML scenario);
//! - [`report`]: outputs (`fct.txt`, `summary.json`, SVG plots); [`series`]: the CSV time
//!   series, streamed to their files as the run samples them.
//!
//! Invariants: virtual time only ([`units::Instant`] nanoseconds); all randomness from one seed
//! split per component ([`rng`]); outputs depend only on inputs and seed, so the same run twice
//! writes byte-identical files.

pub mod cc;
pub mod config;
pub mod monitor;
pub mod ns3;
pub mod packet;
pub mod report;
pub mod rng;
pub mod run;
pub mod scenario;
pub mod series;
pub mod sweep;
pub mod topology;
pub mod traffic;
pub mod world;

pub use cc::CcKind;
pub use config::RunConfig;
pub use topology::Topology;
pub use traffic::FlowSpec;
pub use world::World;
#[cfg(test)]
mod repro_tests;
#[cfg(test)]
mod tests;
