//! The header quench puts at the start of its own test traffic's payload.
//!
//! Layout (28 octets, network byte order; a multiple of 4 so a RoCEv2 SEND needs no pad):
//!
//! | octets | field | meaning |
//! |---|---|---|
//! | 0-3 | magic | 0x514E4348, ASCII "QNCH": tells quench traffic from anything else |
//! | 4 | version | 1; a receiver drops other versions (typed error) |
//! | 5-7 | clock | the sender's clock domain (`time::clock_id`, 24 bits); 0 = not said |
//! | 8-11 | flow id | sender's flow (`units::FlowId`) |
//! | 12-19 | sequence | per-flow: an epoch in the top 16 bits, the frame count (from 0) below |
//! | 20-27 | tx timestamp | sender's clock in ns when the frame was queued for transmit |
//!
//! The receiver computes one-way delay as its receive time minus the tx timestamp only when the
//! clock field equals its own clock id (both ends read one `CLOCK_MONOTONIC`: one host, its
//! network namespaces); otherwise it refuses the figure and says why. A reflector (`quench recv
//! --reflect`) sends the frame back with its addresses and UDP ports swapped and the header
//! untouched, so the sender measures the round trip against its own clock. Gaps come from the
//! sequence numbers. Bytes after the header are filler up to the frame size.
//!
//! The sequence number's epoch ([`SEQ_EPOCH_MASK`]) is the same for every frame of a flow:
//! `quench send` draws it at random, so the sequence number of a live frame is known only to
//! whoever sees the flow's frames (the one value a CNM's copy must echo, `host::validate`), and
//! the receiver counts frames within the epoch of the first one it sees. 48 bits of count last
//! 219 days at 14.9 Mpps.

use pnet_macros::packet;
use pnet_macros_support::types::{u24be, u32be, u64be};
use units::{FlowId, Instant};

use super::{check_range, view, view_mut, EmitError, Truncated};

/// "QNCH" in ASCII.
pub const MAGIC: u32 = 0x514E_4348;
/// The layout above.
pub const VERSION: u8 = 1;
/// Header length.
pub const LEN: usize = 28;
/// The sequence number's epoch bits (the top 16); the frame count is below them.
pub const SEQ_EPOCH_MASK: u64 = 0xffff << 48;
/// UDP port quench's IPv4 test traffic is sent to (an unassigned port in the dynamic range,
/// RFC 6335; configurable by the traffic generator).
pub const UDP_PORT: u16 = 50_101;

/// The identifying part of a test header (octets 0-19 of the layout above: magic, flow id,
/// sequence number), read from a copy that may be cut short: a CNM carries at most the first 64
/// octets of the frame it samples, which can end inside the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    pub magic: u32,
    pub flow: FlowId,
    pub seq: u64,
}

impl Prefix {
    /// Octets of the header that [`Prefix`] reads.
    pub const LEN: usize = 20;

    /// `None` when `buf` holds fewer than [`Prefix::LEN`] octets. The magic is returned, not
    /// checked: whether it must be [`MAGIC`] is the caller's rule.
    pub fn parse(buf: &[u8]) -> Option<Prefix> {
        let b = buf.get(..Self::LEN)?;
        let be32 = |at: usize| u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        let mut seq = [0u8; 8];
        seq.copy_from_slice(&b[12..20]);
        Some(Prefix {
            magic: be32(0),
            flow: FlowId(be32(8)),
            seq: u64::from_be_bytes(seq),
        })
    }
}

/// View over the test header.
#[packet]
pub struct TestHdr {
    pub magic: u32be,
    pub version: u8,
    pub clock: u24be,
    pub flow_id: u32be,
    pub seq: u64be,
    pub tx_ns: u64be,
    #[payload]
    pub filler: Vec<u8>,
}

/// Why a test header could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TestHdrError {
    /// Shorter than 28 octets.
    #[error(transparent)]
    Truncated(#[from] Truncated),
    /// Not quench traffic.
    #[error("test header magic {0:#010x} is not {MAGIC:#010x} (\"QNCH\")")]
    BadMagic(u32),
    /// A layout this build does not know.
    #[error("test header version {0}, expected {VERSION}")]
    BadVersion(u8),
}

/// What a test header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TestHdrRepr {
    /// The sender's clock domain, 24 bits (`crate::time::clock_id`); 0 = not said.
    pub clock: u32,
    /// Sender's flow.
    pub flow: FlowId,
    /// Per-flow sequence number.
    pub seq: u64,
    /// Transmit timestamp.
    pub tx: Instant,
}

impl TestHdrRepr {
    /// A header for frame `seq` of `flow` sent at `tx`, its clock domain not said.
    pub fn new(flow: FlowId, seq: u64, tx: Instant) -> Self {
        Self {
            clock: 0,
            flow,
            seq,
            tx,
        }
    }

    /// The same header stamped with clock domain `clock` (24 bits, see [`crate::time::clock_id`]).
    pub fn with_clock(self, clock: u32) -> Self {
        Self { clock, ..self }
    }

    /// Parses the header at the start of `buf`.
    pub fn parse(buf: &[u8]) -> Result<Self, TestHdrError> {
        let p = view("test header", buf, LEN, TestHdrPacket::new)?;
        let magic = p.get_magic();
        if magic != MAGIC {
            return Err(TestHdrError::BadMagic(magic));
        }
        let version = p.get_version();
        if version != VERSION {
            return Err(TestHdrError::BadVersion(version));
        }
        Ok(Self {
            clock: p.get_clock(),
            flow: FlowId(p.get_flow_id()),
            seq: p.get_seq(),
            tx: Instant::from_nanos(p.get_tx_ns()),
        })
    }

    /// Octets `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }

    /// Writes the header into `buf[..28]`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, EmitError> {
        check_range("test header", "clock", self.clock.into(), 0xFF_FFFF)?;
        let mut p = view_mut("test header", buf, LEN, MutableTestHdrPacket::new)?;
        p.set_magic(MAGIC);
        p.set_version(VERSION);
        p.set_clock(self.clock);
        p.set_flow_id(self.flow.0);
        p.set_seq(self.seq);
        p.set_tx_ns(self.tx.as_nanos());
        Ok(LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const BYTES: [u8; 28] = [
        b'Q', b'N', b'C', b'H', 1, 0, 0, 0, // magic, version, clock (not said)
        0, 0, 0, 7, // flow 7
        0, 0, 0, 0, 0, 0, 0x01, 0x00, // seq 256
        0, 0, 0, 0, 0x3B, 0x9A, 0xCA, 0x00, // tx 1 s
    ];

    fn repr() -> TestHdrRepr {
        TestHdrRepr::new(FlowId(7), 256, Instant::from_nanos(1_000_000_000))
    }

    #[test]
    fn fixture_both_ways() {
        assert_eq!(TestHdrRepr::parse(&BYTES), Ok(repr()));
        let mut out = [0u8; 28];
        assert_eq!(repr().emit(&mut out), Ok(28));
        assert_eq!(out, BYTES);
    }

    #[test]
    fn prefix_reads_a_cut_copy_and_needs_twenty_octets() {
        let want = Prefix {
            magic: MAGIC,
            flow: FlowId(7),
            seq: 256,
        };
        for n in Prefix::LEN..=BYTES.len() {
            assert_eq!(Prefix::parse(&BYTES[..n]), Some(want));
        }
        for n in 0..Prefix::LEN {
            assert_eq!(Prefix::parse(&BYTES[..n]), None);
        }
    }

    #[test]
    fn malformed() {
        for n in 0..28 {
            assert!(matches!(
                TestHdrRepr::parse(&BYTES[..n]),
                Err(TestHdrError::Truncated(_))
            ));
        }
        let mut b = BYTES;
        b[0] = b'X';
        assert_eq!(
            TestHdrRepr::parse(&b),
            Err(TestHdrError::BadMagic(0x584E_4348))
        );
        let mut b = BYTES;
        b[4] = 2;
        assert_eq!(TestHdrRepr::parse(&b), Err(TestHdrError::BadVersion(2)));
    }

    proptest! {
        #[test]
        fn round_trip(clock in 0u32..0x100_0000, flow: u32, seq: u64, tx: u64) {
            let r = TestHdrRepr { clock, flow: FlowId(flow), seq, tx: Instant::from_nanos(tx) };
            let mut out = [0u8; 28];
            r.emit(&mut out).unwrap();
            prop_assert_eq!(TestHdrRepr::parse(&out), Ok(r));
        }

        #[test]
        fn no_bytes_panic(mut bytes in proptest::collection::vec(any::<u8>(), 0..40), magic: bool) {
            if magic && bytes.len() >= 4 {
                bytes[..4].copy_from_slice(&MAGIC.to_be_bytes());
            }
            let _ = TestHdrRepr::parse(&bytes);
        }
    }
}
