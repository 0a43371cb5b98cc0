//! The switch core and what it is built of: the forwarding database ([`fdb`]), the egress
//! queues ([`queue`]) and the congestion points
//! that plug into them ([`cp`], sampled per port ([`sampling`]) over depths shared between
//! workers ([`depth`])), all driven by [`core::SwitchCore`].
pub mod core;
pub mod cp;
pub mod depth;
pub mod fdb;
pub mod queue;
pub mod sampling;
