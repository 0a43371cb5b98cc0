//! The host side of a node, shared by every driver that plays a host: `quench send` (its
//! worker, `send/worker.rs`), the simulator's hosts (`sim/world.rs`) and the appliance.
//!
//! - [`rp`]: the reaction points of a NIC and its flows (QCN's limiter pool per NIC, DCQCN's
//!   state per flow) behind one closed enum, fed meaning-level feedback (a CNM's QntzFb, a
//!   CNP, TCD's UE) and transmitted octets, asked for each flow's rate and the timers' deadlines;
//!   and the receive side's notification point (CE -> CNP).
//! - [`core`]: the host core, [`core::HostCore`]: the flows with their reaction points, the one
//!   scheduler (each flow's schedule is the one pacer, [`::rp::Pacer`], on a timing wheel), the
//!   PFC pause clock and the notification point, fed `(now, event)` and polled for transmits.
//!
//! - [`announce`]: when a receiver announces its address to the bridges.
//! - [`audit`]: how closely a run's transmissions kept the pacer's schedule, window by window.
//! - [`validate`]: whether feedback naming a flow can answer what the host sent (the rule
//!   every reaction-point driver applies before [`rp`] sees the feedback).
//!
//! Frame building and parsing stay in the drivers: nothing here but [`validate`] sees bytes
//! (docs/style.md, "Sans-IO cores"), and it only reads the frame a CNM encapsulates.
pub mod announce;
pub mod audit;
pub mod core;
pub mod rp;
pub mod validate;
