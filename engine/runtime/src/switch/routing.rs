//! Routing in the worker: what a received frame is (classification, once per header stack)
//! and where it goes, decided before any frame of its burst moves.
use quench_node::switch::fdb::{self, PortIdx};
use quench_node::switch::queue::Class;
use quench_wire::ethernet::{ethertype, walk};
use quench_wire::ipv4;

/// What classification found out about a frame.
pub(super) struct Meta {
    /// Destination and source addresses as forwarding-table keys ([`fdb::key`]).
    pub dst: u64,
    pub src: u64,
    pub class: Class,
    /// MAC control (PAUSE/PFC) is link-local: consumed, never forwarded.
    pub mac_control: bool,
    /// Where the payload after the final EtherType starts.
    pub payload_offset: usize,
    /// Where a whole IPv4 header starts; 0 when the frame has none (the congestion points read
    /// and rewrite its ECN field there, without walking the headers again).
    pub l3: u16,
}

/// Reads what the switch needs from a frame's L2 headers; `None` for a malformed frame.
#[inline]
pub(super) fn classify(frame: &[u8]) -> Option<Meta> {
    let l2 = walk(frame).ok()?;
    let (dst, src) = fdb::header_keys(frame.get(..12)?.try_into().ok()?);
    // CNMs travel back to the reaction point ahead of data, like the frames the switch
    // originates: strict priority (issue 4: "control frames strict priority").
    let class = if l2.ethertype == ethertype::CNM {
        Class::Control
    } else {
        Class::from_pcp(l2.priority())
    };
    Some(Meta {
        dst,
        src,
        class,
        mac_control: l2.ethertype == ethertype::MAC_CONTROL,
        payload_offset: l2.payload_offset,
        l3: if l2.ethertype == ethertype::IPV4
            && frame.len() >= l2.payload_offset + ipv4::HEADER_LEN
        {
            l2.payload_offset as u16
        } else {
            0
        },
    })
}

/// Where a received frame goes, decided before any frame of its burst moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Dest {
    /// Malformed, filtered (its egress is its ingress) or MAC control without PFC: freed, and
    /// counted as a receive drop.
    Drop,
    /// MAC control with PFC on: consumed by PFC; its PDU starts at this offset.
    MacControl(u16),
    /// Known unicast to this port.
    Port(PortIdx, Class),
    /// Group or unknown destination: to every other port.
    Flood(Class),
}

/// The L2 headers of the frame just routed, when routing a frame with the same headers next
/// would change nothing and give the same destination: classification reads nothing beyond
/// them, learning its source is a no-op (the FDB's learn memo covers it) and so the table, and
/// with it the lookup, is as it was. Frames of a flow arrive back to back, so most frames of a
/// burst are routed by comparing their first 32 octets, masked to the header length, with
/// these, instead of walking the headers and consulting the table (that was two thirds of the
/// first sweep on bench-dpdk).
pub(super) struct SameHeaders {
    words: [u128; 2],
    masks: [u128; 2],
}

impl SameHeaders {
    /// The octets `16 * w .. 16 * (w + 1)` of a frame, if it has them.
    #[inline]
    fn word(data: &[u8], w: usize) -> Option<u128> {
        let chunk = data.get(16 * w..)?.first_chunk::<16>()?;
        Some(u128::from_le_bytes(*chunk))
    }

    /// `data`'s first `len` octets; `None` if they do not fit in 32 octets (every header stack
    /// `walk` accepts fits) or the frame ends inside the words they occupy.
    pub(super) fn new(data: &[u8], len: usize) -> Option<SameHeaders> {
        if len > 32 {
            return None;
        }
        // Little-endian: octet k of a word is bits 8k..8k+8.
        let mask = |from: usize| match len.saturating_sub(from) {
            0 => 0,
            k if k >= 16 => u128::MAX,
            k => (1u128 << (8 * k)) - 1,
        };
        let masks = [mask(0), mask(16)];
        let second = if masks[1] == 0 {
            0
        } else {
            Self::word(data, 1)? & masks[1]
        };
        Some(SameHeaders {
            words: [Self::word(data, 0)? & masks[0], second],
            masks,
        })
    }

    /// Whether `data` starts with the same headers. Untagged headers (14 octets) take one
    /// 16-octet compare; the second word is read only for longer stacks.
    #[inline]
    pub(super) fn matches(&self, data: &[u8]) -> bool {
        let first = Self::word(data, 0).is_some_and(|w| w & self.masks[0] == self.words[0]);
        first
            && (self.masks[1] == 0
                || Self::word(data, 1).is_some_and(|w| w & self.masks[1] == self.words[1]))
    }
}

/// Consecutive frames of a burst with one destination.
#[derive(Clone, Copy)]
pub(super) struct Run {
    pub dest: Dest,
    pub frames: usize,
    pub bytes: u64,
}
