//! quench's runtimes on real ports, each a driver of the node cores (`quench-node`):
//! - [`switch`]: `quench switch`, pinned poll-mode workers forwarding between ports through the
//!   switch core, with the control socket and the kernel fast path;
//! - [`send`] and [`recv`]: `quench send` (the host core's flows as test frames) and `quench recv`
//!   (goodput, loss, latency, and the notification point's CNPs);
//! - [`appliance`]: `quench appliance`, a bump in the wire that paces every flow of unmodified
//!   hosts by its own reaction point;
//! - [`replay`]: one algorithm of `cp` / `rp` / `np` driven from an event file.
pub mod appliance;
pub mod recv;
pub mod replay;
pub mod send;
pub mod switch;
