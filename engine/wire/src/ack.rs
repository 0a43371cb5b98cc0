//! The ACK a quench receiver sends for test traffic under the ACK-driven congestion controls
//! (HPCC, DCTCP, TIMELY): ns-3 HPCC's `qbbHeader` ACK (`RdmaHw::ReceiveUdp`: the next expected
//! sequence number, the CNP flag when the data packet was ECN-marked, the data packet's
//! `IntHeader` copied), carried as a UDP datagram from [`crate::testhdr::UDP_PORT`] back to the
//! data's source port.
//!
//! Layout (28 octets, network byte order, then the data frame's INT header when it had one):
//!
//! | octets | field | meaning |
//! |---|---|---|
//! | 0-3 | magic | 0x5141434B, ASCII "QACK" |
//! | 4 | version | 1; a reader refuses other versions (typed error) |
//! | 5 | flags | bit 0: ECN echo (the acknowledged frame arrived CE, ns-3's CNP flag) |
//! | 6-7 | reserved | 0 (kept as read) |
//! | 8-11 | flow id | the data's flow |
//! | 12-19 | sequence | the acknowledged frame's sequence number: every frame of the flow up to it |
//! | 20-27 | tx timestamp | the acknowledged frame's, echoed (TIMELY's RTT sample) |
//! | 28- | INT | the acknowledged frame's INT header ([`crate::int`]), as it arrived |
//!
//! The sequence number is the test header's, so the sender, which knows its frames' lengths,
//! turns it into the octets acknowledged; a frame lost on the way is acknowledged with the next
//! one (the sender does not retransmit test traffic).

use units::{FlowId, Instant};

use super::int::{IntError, IntRepr};
use super::{check_len, check_out, EmitError, Truncated};

/// "QACK" in ASCII.
pub const MAGIC: u32 = 0x5141_434B;
/// The layout above.
pub const VERSION: u8 = 1;
/// Octets before the INT header.
pub const LEN: usize = 28;
/// Flag bit: the acknowledged frame arrived with ECN CE.
pub const FLAG_ECE: u8 = 1;

/// What an ACK says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AckRepr {
    pub flags: u8,
    pub reserved: u16,
    pub flow: FlowId,
    pub seq: u64,
    pub tx: Instant,
    /// The acknowledged frame's INT header.
    pub int: Option<IntRepr>,
}

/// Why an ACK could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AckError {
    #[error(transparent)]
    Truncated(#[from] Truncated),
    #[error("ACK magic {0:#010x} is not {MAGIC:#010x} (\"QACK\")")]
    BadMagic(u32),
    #[error("ACK version {0}, expected {VERSION}")]
    BadVersion(u8),
    /// Octets after the fixed part that are not an INT header.
    #[error("ACK's INT header: {0}")]
    Int(#[from] IntError),
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn be64(b: &[u8], at: usize) -> u64 {
    u64::from(be32(b, at)) << 32 | u64::from(be32(b, at + 4))
}

impl AckRepr {
    /// The ECN echo.
    pub fn ece(&self) -> bool {
        self.flags & FLAG_ECE != 0
    }

    /// Parses the ACK at the start of `buf` (a UDP payload: octets after the ACK and its INT
    /// header, padding, are ignored; octets after the fixed part must be an INT header or zero).
    pub fn parse(buf: &[u8]) -> Result<AckRepr, AckError> {
        check_len("ACK", buf, LEN)?;
        let magic = be32(buf, 0);
        if magic != MAGIC {
            return Err(AckError::BadMagic(magic));
        }
        if buf[4] != VERSION {
            return Err(AckError::BadVersion(buf[4]));
        }
        let rest = &buf[LEN..];
        let int = if rest.iter().all(|&b| b == 0) {
            None
        } else {
            Some(IntRepr::parse(rest)?)
        };
        Ok(AckRepr {
            flags: buf[5],
            reserved: u16::from_be_bytes([buf[6], buf[7]]),
            flow: FlowId(be32(buf, 8)),
            seq: be64(buf, 12),
            tx: Instant::from_nanos(be64(buf, 20)),
            int,
        })
    }

    /// Octets `emit` writes.
    pub fn buffer_len(&self) -> usize {
        LEN + self.int.map_or(0, |i| i.buffer_len())
    }

    /// Writes the ACK into `buf[..buffer_len()]`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, EmitError> {
        let len = self.buffer_len();
        check_out("ACK", buf, len)?;
        buf[..4].copy_from_slice(&MAGIC.to_be_bytes());
        buf[4] = VERSION;
        buf[5] = self.flags;
        buf[6..8].copy_from_slice(&self.reserved.to_be_bytes());
        buf[8..12].copy_from_slice(&self.flow.0.to_be_bytes());
        buf[12..20].copy_from_slice(&self.seq.to_be_bytes());
        buf[20..28].copy_from_slice(&self.tx.as_nanos().to_be_bytes());
        if let Some(i) = &self.int {
            i.emit(&mut buf[LEN..])?;
        }
        Ok(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::int::{IntData, Mode, HOPS_LEN};
    use proptest::prelude::*;

    #[test]
    fn fixture_both_ways_with_and_without_int() {
        let a = AckRepr {
            flags: FLAG_ECE,
            reserved: 0,
            flow: FlowId(7),
            seq: 256,
            tx: Instant::from_nanos(1_000_000_000),
            int: None,
        };
        let bytes: [u8; 28] = [
            b'Q', b'A', b'C', b'K', 1, 1, 0, 0, // magic, version, ECE, reserved
            0, 0, 0, 7, // flow 7
            0, 0, 0, 0, 0, 0, 1, 0, // seq 256
            0, 0, 0, 0, 0x3B, 0x9A, 0xCA, 0x00, // tx 1 s
        ];
        let mut out = [0u8; 28];
        assert_eq!(a.emit(&mut out), Ok(28));
        assert_eq!(out, bytes);
        assert_eq!(AckRepr::parse(&bytes), Ok(a));
        assert!(a.ece());
        // Zero padding after it is no INT header.
        let mut padded = [0u8; 40];
        padded[..28].copy_from_slice(&bytes);
        assert_eq!(AckRepr::parse(&padded), Ok(a));
        let with = AckRepr {
            int: Some(IntRepr {
                nhop: 1,
                data: IntData::Hops([9, 0, 0, 0, 0]),
            }),
            ..a
        };
        let mut out = [0u8; LEN + HOPS_LEN];
        assert_eq!(with.emit(&mut out), Ok(LEN + HOPS_LEN));
        assert_eq!(AckRepr::parse(&out), Ok(with));
    }

    #[test]
    fn malformed() {
        let mut b = [0u8; LEN + 8];
        let a = AckRepr::parse(&[0; LEN]);
        assert_eq!(a, Err(AckError::BadMagic(0)));
        // A PINT header needs 10 octets: 8 are too few to write it.
        let pint = AckRepr {
            flags: 0,
            reserved: 0,
            flow: FlowId(1),
            seq: 1,
            tx: Instant::ZERO,
            int: Some(IntRepr::empty(Mode::Pint)),
        };
        assert!(pint.emit(&mut b).is_err());
        for n in 0..LEN {
            assert!(matches!(
                AckRepr::parse(&b[..n]),
                Err(AckError::Truncated(_))
            ));
        }
        b[..4].copy_from_slice(&MAGIC.to_be_bytes());
        b[4] = 2;
        assert_eq!(AckRepr::parse(&b), Err(AckError::BadVersion(2)));
        b[4] = VERSION;
        b[LEN] = 1;
        assert!(matches!(AckRepr::parse(&b), Err(AckError::Int(_))));
    }

    proptest! {
        #[test]
        fn round_trip(flags: u8, reserved: u16, flow: u32, seq: u64, tx: u64, nhop: u16,
                      w: [u64; 5], int in 0u8..3) {
            let int = match int {
                0 => None,
                1 => Some(IntRepr { nhop, data: IntData::Hops(w) }),
                _ => Some(IntRepr { nhop, data: IntData::Pint(w[0] as u16) }),
            };
            let a = AckRepr { flags, reserved, flow: FlowId(flow), seq, tx: Instant::from_nanos(tx), int };
            let mut out = [0u8; LEN + HOPS_LEN];
            let n = a.emit(&mut out).unwrap();
            prop_assert_eq!(AckRepr::parse(&out[..n]), Ok(a));
        }

        #[test]
        fn no_bytes_panic(mut bytes in proptest::collection::vec(any::<u8>(), 0..90), magic: bool) {
            if magic && bytes.len() >= 5 {
                bytes[..4].copy_from_slice(&MAGIC.to_be_bytes());
                bytes[4] = VERSION;
            }
            let _ = AckRepr::parse(&bytes);
        }
    }
}
