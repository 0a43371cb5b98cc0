//! The seam between the simulator and the algorithm crates.
//!
//! The simulator never implements an algorithm: a host's per-flow sender state, a receiver's
//! notification point and a switch port's congestion point are the `rp`, `np` and `cp` crates'
//! state machines, wrapped here in closed enums (static dispatch, no `dyn` on the per-packet
//! path). `None` is no congestion control at all: senders at line rate, ports that never mark.

use units::{Instant, Rate};

use super::packet::Pkt;
use super::rng::SimRng;

/// Which congestion control a run uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CcKind {
    None,
}

/// Per-flow sender state (reaction point and pacer).
#[derive(Clone, Debug)]
pub enum Sender {
    None { line: Rate },
}

impl Sender {
    pub fn new(kind: CcKind, line: Rate) -> Sender {
        match kind {
            CcKind::None => Sender::None { line },
        }
    }

    /// The rate the flow's packets are paced at now.
    pub fn rate(&self) -> Rate {
        match self {
            Sender::None { line } => *line,
        }
    }

    /// Release time of the next packet, given that a packet of `bytes` left at `now`.
    pub fn on_send(&mut self, now: Instant, bytes: u32) -> Instant {
        match self {
            Sender::None { line } => now + line.tx_time(bytes as u64),
        }
    }

    /// A congestion notification for this flow arrived (CNP, CNP-flagged ACK or CNM).
    pub fn on_feedback(&mut self, _now: Instant, _pkt: &Pkt) {
        match self {
            Sender::None { .. } => {}
        }
    }

    pub fn next_deadline(&self) -> Option<Instant> {
        match self {
            Sender::None { .. } => None,
        }
    }

    pub fn on_timeout(&mut self, _now: Instant) {
        match self {
            Sender::None { .. } => {}
        }
    }
}

/// Per-flow receiver state (notification point).
#[derive(Clone, Debug)]
pub enum Receiver {
    None,
}

impl Receiver {
    pub fn new(kind: CcKind) -> Receiver {
        match kind {
            CcKind::None => Receiver::None,
        }
    }

    /// A data packet with ECN codepoint `ecn` arrived: whether to notify the sender.
    pub fn on_data(&mut self, _now: Instant, _ecn: u8) -> bool {
        match self {
            Receiver::None => false,
        }
    }
}

/// What a congestion point asks the switch to do with a packet it saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpAction {
    /// New ECN codepoint for the packet (marking), if any.
    pub ecn: Option<u8>,
    /// Send a CNM with this QntzFb to the packet's source.
    pub cnm: Option<u16>,
}

/// Per egress (port, priority) congestion point.
#[derive(Clone, Debug)]
pub enum PortCp {
    None,
}

impl PortCp {
    pub fn new(kind: CcKind, _rate: Rate) -> PortCp {
        match kind {
            CcKind::None => PortCp::None,
        }
    }

    /// A data packet is being enqueued; `qlen` is the queue's octets before it.
    pub fn on_enqueue(
        &mut self,
        _now: Instant,
        _qlen: u64,
        _pkt: &Pkt,
        _rng: &mut SimRng,
    ) -> CpAction {
        match self {
            PortCp::None => CpAction::default(),
        }
    }

    /// A data packet is leaving; `qlen` is the queue's octets after it left.
    pub fn on_dequeue(
        &mut self,
        _now: Instant,
        _qlen: u64,
        _pkt: &Pkt,
        _rng: &mut SimRng,
    ) -> CpAction {
        match self {
            PortCp::None => CpAction::default(),
        }
    }
}
