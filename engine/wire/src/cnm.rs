//! IEEE 802.1Qau Congestion Notification Message (CNM), EtherType 0x22E7.
//!
//! protocols.md: "**CNM**: EtherType **0x22E7** (S: HPE 5700/5940 manuals; FortiSwitch default
//! 8935). PDU = 24 + 0..64 octets":
//!
//! | octets | field | width |
//! |---|---|---|
//! | 0-1 | Version (=0) / ReservedV / QntzFb | 4 / 6 / 6 bits |
//! | 2-9 | CPID | 8 |
//! | 10-11 | cnmQOffset (signed) | 2 |
//! | 12-13 | cnmQDelta (signed) | 2 |
//! | 14-15 | Encapsulated priority | 2 |
//! | 16-21 | Encapsulated MAC DA | 6 |
//! | 22-23 | Encapsulated MSDU length | 2 |
//! | 24- | Encapsulated MSDU (first bytes of the sampled frame) | 0-64 |
//!
//! "DA = source MAC of the sampled frame (S). SA = the congestion point's MAC (V). The CNM copies
//! the sampled frame's VLAN tag and CN-TAG (S)." Building the whole frame is
//! [`super::frame::emit_cnm`]; this file is the PDU after the EtherType.
//!
//! Version, ReservedV and unknown values of every field round-trip: `parse` rejects only what
//! cannot be read (short buffer, MSDU length over 64 or past the end of the buffer).

use pnet_base::MacAddr;
use pnet_macros::packet;
use pnet_macros_support::types::{u16be, u4, u6, u64be};
use pnet_packet::ethernet::EtherType;

use super::ethernet::L2Walk;
use super::{check_out, check_range, view, view_mut, EmitError, Truncated};

/// The CNM's EtherType (S: HPE 5700/5940 manuals; FortiSwitch default 8935 = 0x22E7).
pub const ETHERTYPE: EtherType = EtherType(0x22E7);
/// Fixed part of the CNM PDU, up to and including the encapsulated MSDU length.
pub const HEADER_LEN: usize = 24;
/// Longest encapsulated MSDU: "Encapsulated MSDU (first bytes of the sampled frame) | 0-64".
pub const MAX_MSDU_LEN: usize = 64;
/// The only CNM version defined: "Version (=0)".
pub const VERSION: u8 = 0;
/// Largest QntzFb: a 6-bit field.
pub const MAX_QNTZ_FB: u8 = 63;

/// **U**: unit of cnmQOffset and cnmQDelta in octets. protocols.md: "U: units of cnmQOffset /
/// cnmQDelta (likely 64-octet pages)". Conversions take the unit as a parameter; this is the
/// default quench uses.
pub const QUEUE_UNIT_OCTETS: i32 = 64;

/// **U**: bit position of the 3-bit priority inside the 2-octet Encapsulated priority field.
/// protocols.md: "U: ... the layout of the encapsulated priority inside its 2 octets". quench
/// puts the priority in the 3 most significant bits (as in a VLAN TCI) and zeroes the rest;
/// the raw 16 bits are kept, so any other layout round-trips.
pub const ENCAP_PRIORITY_SHIFT: u32 = 13;

/// **U**: CPID layout. protocols.md: "U: ... the CPID convention (CP MAC + 2-octet queue id)".
/// quench writes the CP's MAC in octets 0-5 and the queue (priority) id in octets 6-7.
pub const CPID_QUEUE_BITS: u32 = 16;

/// **U**: default priority of CNMs: "ieee8021CnGlobalCnmTransmitPriority (V); default believed
/// 6 (U)". Callers pass the priority; this is quench's default.
pub const DEFAULT_CNM_PRIORITY: u8 = 6;

/// View over the CNM PDU (after EtherType 0x22E7).
#[packet]
pub struct Cnm {
    pub version: u4,
    pub reserved_v: u6,
    pub qntz_fb: u6,
    pub cpid: u64be,
    pub q_offset: u16be,
    pub q_delta: u16be,
    pub encap_priority: u16be,
    #[construct_with(u8, u8, u8, u8, u8, u8)]
    pub encap_da: MacAddr,
    pub encap_len: u16be,
    #[length = "encap_len"]
    #[payload]
    pub encap_msdu: Vec<u8>,
}

/// Builds a CPID by quench's convention ([`CPID_QUEUE_BITS`], U): CP MAC, then queue id.
pub fn cpid(cp_mac: MacAddr, queue: u16) -> u64 {
    let m = cp_mac.octets();
    let mac = m.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b));
    (mac << CPID_QUEUE_BITS) | u64::from(queue)
}

/// The Encapsulated priority field for an 802.1p priority, by [`ENCAP_PRIORITY_SHIFT`] (U).
pub fn encap_priority(pcp: u8) -> u16 {
    u16::from(pcp & 7) << ENCAP_PRIORITY_SHIFT
}

/// **U**: which octets of the sampled frame the CNM encapsulates. protocols.md says only
/// "Encapsulated MSDU (first bytes of the sampled frame) | 0-64". quench takes the frame from the
/// first octet after its final EtherType (after VLAN tags and CN-TAG: the IP header onward), up
/// to [`MAX_MSDU_LEN`] octets. `walk` is [`super::ethernet::walk`] of `frame`.
pub fn encap_msdu<'a>(frame: &'a [u8], walk: &L2Walk) -> &'a [u8] {
    let rest = frame.get(walk.payload_offset..).unwrap_or_default();
    rest.get(..MAX_MSDU_LEN).unwrap_or(rest)
}

/// Why a CNM PDU could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CnmError {
    /// Shorter than the 24-octet fixed part or than the MSDU length says.
    #[error(transparent)]
    Truncated(#[from] Truncated),
    /// Encapsulated MSDU length above 64.
    #[error("CNM encapsulated MSDU length {0} exceeds {MAX_MSDU_LEN}")]
    MsduTooLong(u16),
}

/// What a CNM says. Borrows the encapsulated MSDU: parsing allocates nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CnmRepr<'a> {
    /// Version, 4 bits (0 is the only one defined; others round-trip).
    pub version: u8,
    /// ReservedV, 6 bits (round-trips).
    pub reserved_v: u8,
    /// Quantized feedback, 6 bits: 6 MSBs of -Fb scaled to Fbmax (protocols.md QCN section).
    pub qntz_fb: u8,
    /// Congestion point identifier.
    pub cpid: u64,
    /// cnmQOffset: Qeq - Q, signed, in [`QUEUE_UNIT_OCTETS`] (U).
    pub q_offset: i16,
    /// cnmQDelta: Q - Qold, signed, in [`QUEUE_UNIT_OCTETS`] (U).
    pub q_delta: i16,
    /// Encapsulated priority, raw 16 bits (layout U, see [`ENCAP_PRIORITY_SHIFT`]).
    pub encap_priority: u16,
    /// Destination MAC of the sampled frame.
    pub encap_da: MacAddr,
    /// First octets of the sampled frame's MSDU, 0..=64.
    pub encap_msdu: &'a [u8],
}

impl<'a> CnmRepr<'a> {
    /// Parses a CNM PDU. Octets past the MSDU (Ethernet padding) are ignored.
    pub fn parse(buf: &'a [u8]) -> Result<Self, CnmError> {
        let p = view("CNM", buf, HEADER_LEN, CnmPacket::new)?;
        let len = p.get_encap_len();
        if usize::from(len) > MAX_MSDU_LEN {
            return Err(CnmError::MsduTooLong(len));
        }
        let end = HEADER_LEN + usize::from(len);
        let encap_msdu = buf.get(HEADER_LEN..end).ok_or(Truncated {
            what: "CNM encapsulated MSDU",
            need: end,
            have: buf.len(),
        })?;
        Ok(Self {
            version: p.get_version(),
            reserved_v: p.get_reserved_v(),
            qntz_fb: p.get_qntz_fb(),
            cpid: p.get_cpid(),
            q_offset: p.get_q_offset() as i16,
            q_delta: p.get_q_delta() as i16,
            encap_priority: p.get_encap_priority(),
            encap_da: p.get_encap_da(),
            encap_msdu,
        })
    }

    /// The 802.1p priority inside the Encapsulated priority field ([`ENCAP_PRIORITY_SHIFT`], U).
    pub fn encap_pcp(&self) -> u8 {
        ((self.encap_priority >> ENCAP_PRIORITY_SHIFT) & 7) as u8
    }

    /// cnmQOffset in octets, for a unit of `unit_octets` per step ([`QUEUE_UNIT_OCTETS`], U).
    pub fn q_offset_octets(&self, unit_octets: i32) -> i32 {
        i32::from(self.q_offset).saturating_mul(unit_octets)
    }

    /// cnmQDelta in octets, for a unit of `unit_octets` per step ([`QUEUE_UNIT_OCTETS`], U).
    pub fn q_delta_octets(&self, unit_octets: i32) -> i32 {
        i32::from(self.q_delta).saturating_mul(unit_octets)
    }

    /// Octets `emit` writes: 24 + MSDU length.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.encap_msdu.len()
    }

    /// Writes the PDU into the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, EmitError> {
        const W: &str = "CNM";
        check_range(W, "version", self.version.into(), 0xF)?;
        check_range(W, "reserved_v", self.reserved_v.into(), 0x3F)?;
        check_range(W, "qntz_fb", self.qntz_fb.into(), MAX_QNTZ_FB.into())?;
        let len = self.encap_msdu.len();
        check_range(W, "encap_msdu length", len as u64, MAX_MSDU_LEN as u64)?;
        let need = self.buffer_len();
        check_out(W, buf, need)?;
        {
            let mut p = view_mut(W, buf, HEADER_LEN, MutableCnmPacket::new)?;
            p.set_version(self.version);
            p.set_reserved_v(self.reserved_v);
            p.set_qntz_fb(self.qntz_fb);
            p.set_cpid(self.cpid);
            p.set_q_offset(self.q_offset as u16);
            p.set_q_delta(self.q_delta as u16);
            p.set_encap_priority(self.encap_priority);
            p.set_encap_da(self.encap_da);
            p.set_encap_len(len as u16);
        }
        buf[HEADER_LEN..need].copy_from_slice(self.encap_msdu);
        Ok(need)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const CP: MacAddr = MacAddr(0x02, 0, 0, 0, 0, 0xCC);
    const DA: MacAddr = MacAddr(0x02, 0, 0, 0, 0, 0x02);

    /// QntzFb 42, CPID = CP MAC + queue 3, QOffset -100, QDelta 25, priority 3, 4-octet MSDU.
    const BYTES: [u8; 28] = [
        0x00, 0x2A, // version 0, reservedV 0, QntzFb 42
        0x02, 0, 0, 0, 0, 0xCC, 0x00, 0x03, // CPID
        0xFF, 0x9C, // cnmQOffset -100
        0x00, 0x19, // cnmQDelta 25
        0x60, 0x00, // encapsulated priority 3 (top 3 bits)
        0x02, 0, 0, 0, 0, 0x02, // encapsulated DA
        0x00, 0x04, // MSDU length 4
        0x08, 0x00, 0x45, 0x00, // MSDU
    ];

    fn repr() -> CnmRepr<'static> {
        CnmRepr {
            version: 0,
            reserved_v: 0,
            qntz_fb: 42,
            cpid: cpid(CP, 3),
            q_offset: -100,
            q_delta: 25,
            encap_priority: encap_priority(3),
            encap_da: DA,
            encap_msdu: &BYTES[24..],
        }
    }

    #[test]
    fn parse_fixture() {
        let r = CnmRepr::parse(&BYTES).unwrap();
        assert_eq!(r, repr());
        assert_eq!(r.encap_pcp(), 3);
        assert_eq!(r.q_offset_octets(QUEUE_UNIT_OCTETS), -6400);
        assert_eq!(r.q_delta_octets(QUEUE_UNIT_OCTETS), 1600);
    }

    #[test]
    fn emit_fixture() {
        let mut out = [0u8; 28];
        assert_eq!(repr().emit(&mut out), Ok(28));
        assert_eq!(out, BYTES);
    }

    #[test]
    fn padding_ignored_and_reserved_round_trip() {
        let mut f = [0u8; 46];
        f[..28].copy_from_slice(&BYTES);
        f[0] = 0x5F; // version 5, reservedV 0x3C
        f[1] = 0x2A;
        let r = CnmRepr::parse(&f).unwrap();
        assert_eq!((r.version, r.reserved_v, r.qntz_fb), (5, 0x3C, 42));
        let mut out = [0u8; 28];
        r.emit(&mut out).unwrap();
        assert_eq!(out[..], f[..28]);
    }

    #[test]
    fn malformed() {
        for n in 0..28 {
            assert!(matches!(
                CnmRepr::parse(&BYTES[..n]),
                Err(CnmError::Truncated(_))
            ));
        }
        let mut long = [0u8; 24 + 65];
        long[22..24].copy_from_slice(&65u16.to_be_bytes());
        assert_eq!(CnmRepr::parse(&long), Err(CnmError::MsduTooLong(65)));
        let mut r = repr();
        r.qntz_fb = 64;
        assert!(matches!(
            r.emit(&mut [0u8; 28]),
            Err(EmitError::FieldRange {
                field: "qntz_fb",
                ..
            })
        ));
        let msdu = [0u8; 65];
        r.qntz_fb = 0;
        r.encap_msdu = &msdu;
        assert!(r.emit(&mut [0u8; 100]).is_err());
    }

    proptest! {
        #[test]
        fn round_trip(
            version in 0u8..16, reserved_v in 0u8..64, qntz_fb in 0u8..64, cpid: u64,
            q_offset: i16, q_delta: i16, encap_priority: u16, da: [u8; 6],
            msdu in proptest::collection::vec(any::<u8>(), 0..=64),
        ) {
            let r = CnmRepr {
                version, reserved_v, qntz_fb, cpid, q_offset, q_delta, encap_priority,
                encap_da: MacAddr(da[0], da[1], da[2], da[3], da[4], da[5]),
                encap_msdu: &msdu,
            };
            let mut out = vec![0u8; r.buffer_len()];
            prop_assert_eq!(r.emit(&mut out), Ok(r.buffer_len()));
            prop_assert_eq!(CnmRepr::parse(&out), Ok(r));
        }

        #[test]
        fn no_bytes_panic(bytes in proptest::collection::vec(any::<u8>(), 0..120)) {
            if let Ok(r) = CnmRepr::parse(&bytes) {
                prop_assert!(r.encap_msdu.len() <= MAX_MSDU_LEN);
                let mut out = vec![0u8; r.buffer_len()];
                prop_assert_eq!(r.emit(&mut out), Ok(r.buffer_len()));
                prop_assert_eq!(&out[..], &bytes[..r.buffer_len()]);
            }
        }
    }
}
