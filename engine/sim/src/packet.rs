//! The simulator's packet: a small `Copy` struct, never bytes.
//!
//! A simulated packet carries only what the algorithms and the simulator need: the flow it
//! belongs to, its sequence number, its wire size, its priority, its ECN codepoint and, for
//! feedback and PFC frames, a small payload field. It is copied by value through queues and
//! events; nothing is allocated per packet.
//!
//! What follows from the rest is not carried (the packet is 24 octets: every hop writes it
//! into an event and a switch queue and reads it back long after, so its size is wheel and
//! queue storage that misses the caches): the destination host is the flow's receiver for
//! data and its sender for everything else ([`Pkt::towards_receiver`]), and a data packet's
//! payload is its size less the run's header octets (every data packet carries one header).

/// What a packet is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// Payload of a flow; `seq` is the offset of its first payload octet.
    Data,
    /// Receiver to sender: everything below `seq` arrived. `aux` bit 0: CNP flag (ns-3 "mlx"
    /// mode, where a congestion notification rides on the ACK).
    Ack,
    /// Receiver to sender: go back to `seq` (a gap was seen).
    Nack,
    /// RoCEv2 congestion notification packet (NP to RP).
    Cnp,
    /// 802.1Qau congestion notification message (CP to RP); `aux` is QntzFb.
    Cnm,
    /// 802.1Qbb PFC frame for priority `prio`; `aux` 1 = XOFF, 0 = XON. Hop by hop only.
    Pause,
}

/// A packet in flight or in a queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pkt {
    /// Index of the flow in the simulation (for CNM: the flow the sampled frame belonged to).
    pub flow: u32,
    /// Data: first payload octet. Ack / Nack: cumulative sequence number.
    pub seq: u64,
    /// Octets on the wire (data: the payload and one header).
    pub size: u32,
    pub kind: Kind,
    /// Priority 0..=7.
    pub prio: u8,
    /// ECN / TCD codepoint.
    pub ecn: units::Ecn,
    /// Local index of the port this packet entered the current switch by (PFC accounting).
    pub in_port: u16,
    /// Kind-specific: QntzFb for CNM, XOFF/XON for Pause, CNP flag for Ack.
    pub aux: u16,
    /// Switches passed on the flow's path (data from its sender, the rest from its receiver),
    /// which indexes the flow's cached route; [`Pkt::UNROUTED`]: routed by table at every hop.
    pub hop: u8,
}

impl Pkt {
    /// [`Pkt::hop`] of a packet that does not follow its flow's path from an end (a CNM, sent
    /// from a switch on the way).
    pub const UNROUTED: u8 = u8::MAX;

    /// Whether the packet goes to its flow's receiver (data) or back to its sender (ACK,
    /// NACK, CNP, CNM). A PFC frame goes one hop and is never routed.
    #[inline]
    pub fn towards_receiver(&self) -> bool {
        self.kind == Kind::Data
    }

    /// A PFC frame for priority `prio` with `quanta` (0: resume), `size` octets on the wire.
    pub fn pause(prio: u8, quanta: u16, size: u32) -> Pkt {
        Pkt {
            flow: 0,
            seq: 0,
            size,
            kind: Kind::Pause,
            prio,
            ecn: units::Ecn::NotEct,
            in_port: 0,
            aux: quanta,
            hop: Pkt::UNROUTED,
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn packets_stay_small() {
        // Events and switch queues carry packets by value: an `Arrive` event (the packet, its
        // port and the enum's tag) in 32 octets, half a cache line.
        assert!(std::mem::size_of::<super::Pkt>() <= 24);
    }
}
