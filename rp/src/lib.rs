//! Reaction points: QCN rate limiters and DCQCN rate control, with pacing release times.
//!
//! Sans-IO: fed `(now, event)`, returns decisions; never reads a clock, a socket or a random
//! source it was not handed.
#![forbid(unsafe_code)]
