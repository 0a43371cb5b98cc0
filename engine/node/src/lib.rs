//! quench's node cores, sans-IO: the switch core ([`switch`]: forwarding database, egress
//! queues, the congestion points QCN, RED/ECN and TCD, PFC accounting) and the host core
//! ([`host`]: each flow's reaction point, pacing on one timing wheel ([`wheel`]), validation of
//! the feedback it receives), fed `(now, event)` by every driver: the switch and sender
//! runtimes on real ports and the simulator on simulated links. [`flowgen`] generates the
//! flows that senders and the simulator start.
pub mod flowgen;
pub mod host;
pub mod switch;
pub mod wheel;
