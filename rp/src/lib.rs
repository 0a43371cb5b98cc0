//! Reaction points: QCN rate limiters, DCQCN, HPCC, DCTCP, TIMELY and HPCC-PINT rate control,
//! windows, and pacing release times.
//!
//! Sans-IO: fed `(now, event)`, returns decisions; never reads a clock, a socket or a random
//! source it was not handed.
//!
//! - [`qcn`]: the IEEE 802.1Qau reaction point of seed 000 lines 1-144, a bounded pool of rate
//!   limiters driven by CNMs (`on_cnm`), transmitted frames (`on_tx`) and timers (`on_timeout`).
//! - [`dcqcn`]: the DCQCN reaction point for one flow (QP), in the NVIDIA / ns-3 HPCC "mlx" event
//!   flow or the paper's variant with a byte counter beside the timer.
//! - [`hpcc`], [`dctcp`], [`timely`], [`pint`]: the ACK-driven reaction points of the HPCC ns-3
//!   simulator's `CC_MODE` 3, 8, 7 and 10 (`rdma-hw.cc`), fed each ACK's INT hops, ECN echo,
//!   send stamp or PINT code; [`int`] packs INT as ns-3 does; [`window`] is the bound on bytes
//!   in flight (`HAS_WIN`, `VAR_WIN`) that HPCC, DCTCP, PINT and the windowed DCQCN run with.
//! - [`pacer`]: the one pacer: turns a flow's (or a link's) current rate into the release time of
//!   its next frame, with a bound on the credit it may bank.
//!
//! Every state machine follows the same shape (docs/style.md, "Sans-IO cores"):
//! 1. build a validated profile once: `XxxParams { .. }.profile(line_rate)?`;
//! 2. feed inputs `on_*(now, ...)` in time order (`now` never goes backwards);
//! 3. ask `next_deadline()` and call `on_timeout(now)` when `now` reaches it (a call with nothing
//!    due does nothing); `on_timeout(now)` runs every timer due at or before `now`, in the order
//!    of their deadlines;
//! 4. read `rate()`, `target_rate()` and `snapshot()` whenever needed.
//!
//! Invariants (checked by the property tests): a limited flow's current rate stays within
//! [`rpg_min_rate`, line rate]; the QCN pool never holds more limiters than `rppp_max_rps`.
//!
//! ```
//! use rp::{CnmOutcome, DcqcnParams, DcqcnRp, Pacer, QcnParams, QcnRp};
//! use units::{Duration, FlowId, Instant, Rate};
//!
//! // QCN: one CNM with QntzFb 63 cuts a 10 Gb/s flow by 63/128.
//! let mut qcn = QcnRp::new(QcnParams::default().profile(Rate::from_gbps(10)).unwrap());
//! let out = qcn.on_cnm(Instant::ZERO, FlowId(1), 63).unwrap();
//! assert!(matches!(out, CnmOutcome::Decreased { new_limiter: true, .. }));
//! assert_eq!(qcn.rate(FlowId(1)).as_bps(), 5_078_125_000);
//!
//! // DCQCN (NVIDIA defaults): a CNP only marks; the decrease check 4 us later cuts.
//! let mut dcqcn = DcqcnRp::new(DcqcnParams::default().profile(Rate::from_gbps(100)).unwrap());
//! dcqcn.on_cnp(Instant::ZERO);
//! while let Some(t) = dcqcn.next_deadline().filter(|&t| t <= Instant::from_nanos(4_001)) {
//!     dcqcn.on_timeout(t);
//! }
//! assert!(dcqcn.rate() < Rate::from_gbps(100));
//!
//! // Pacing: release times for back-to-back 1500-octet frames at the flow's rate.
//! let mut pacer = Pacer::new();
//! let first = pacer.next_release(Instant::ZERO, 1500, Rate::from_gbps(10), Duration::ZERO);
//! let second = pacer.next_release(Instant::ZERO, 1500, Rate::from_gbps(10), Duration::ZERO);
//! assert_eq!(second - first, Duration::from_nanos(1200));
//! ```
#![forbid(unsafe_code)]

pub mod dcqcn;
pub mod dctcp;
pub mod hpcc;
pub mod int;
pub mod pacer;
pub mod params;
pub mod pint;
pub mod qcn;
pub mod timely;
pub mod window;

pub use dcqcn::{
    DcqcnParams, DcqcnProfile, DcqcnRp, DcqcnSnapshot, DcqcnState, UeReaction, Variant,
};
pub use dctcp::{DctcpParams, DctcpProfile, DctcpState};
pub use hpcc::{FlowPath, HpccParams, HpccProfile, HpccState, HpccUpdate};
pub use int::{IntHop, IntHops, Pint};
pub use pacer::{Pacer, Spacing};
pub use params::ParamError;
pub use pint::{PintParams, PintProfile, PintState};
pub use qcn::{
    CnmError, CnmOutcome, QcnCounters, QcnParams, QcnProfile, QcnRp, QcnSnapshot, TxOutcome,
};
pub use timely::{TimelyParams, TimelyProfile, TimelyState};
pub use window::Window;
