//! Notification point: CNP generation from ECN/TCD marks.
//!
//! Sans-IO: fed `(now, event)`, returns decisions; never reads a clock, a socket or a random
//! source it was not handed.
#![forbid(unsafe_code)]
