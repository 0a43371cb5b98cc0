//! Congestion points: QCN CP, DCQCN RED/ECN marking, PFC accounting, TCD ternary detection.
//!
//! Sans-IO: fed `(now, event)`, returns decisions; never reads a clock, a socket or a random
//! source it was not handed.
#![forbid(unsafe_code)]
