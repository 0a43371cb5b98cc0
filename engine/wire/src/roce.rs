//! RoCEv2: InfiniBand Base Transport Header (BTH) over UDP 4791, the Congestion Notification
//! Packet (CNP) and the invariant CRC (ICRC).
//!
//! protocols.md (V: matched scapy contrib/roce.py byte for byte, ICRC included):
//! "Ethernet / IPv4 / UDP dst 4791 / BTH (12 octets) / 16 zero octets / ICRC (4) = 74 octets on
//! the wire without FCS. BTH: opcode **0x81**, SE/M/Pad/TVer 0, P_Key 0xFFFF, octet 4 = 0x40
//! (BECN=1), DestQP = the sender's QP, A=0, PSN=0."
//!
//! pnet has no BTH, so the view is our own `#[packet]`. Whole frames are built in
//! [`super::frame`].

use crc32fast::Hasher;
use pnet_macros::packet;
use pnet_macros_support::types::{u1, u16be, u2, u24be, u4, u6, u7};

use super::ipv4::HEADER_LEN as IPV4_MIN;
use super::udp::HEADER_LEN as UDP_LEN;
use super::{check_len, check_range, view, view_mut, EmitError, Truncated};

/// RoCEv2's UDP destination port (IANA "roce").
pub const UDP_PORT: u16 = 4791;
/// BTH length.
pub const BTH_LEN: usize = 12;
/// ICRC length.
pub const ICRC_LEN: usize = 4;
/// "16 zero octets" after a CNP's BTH.
pub const CNP_RESERVED_LEN: usize = 16;
/// "P_Key 0xFFFF": the default partition key.
pub const DEFAULT_PKEY: u16 = 0xFFFF;
/// Largest DestQP / PSN: 24-bit fields.
pub const MAX_QP: u32 = 0x00FF_FFFF;

/// BTH opcodes quench uses (any other value round-trips).
pub mod opcode {
    /// "opcode **0x81**": RoCEv2 Congestion Notification Packet.
    pub const CNP: u8 = 0x81;
    /// Reliable Connection SEND Only (IBTA vol. 1, 9.2): quench's RoCEv2 data frames.
    pub const RC_SEND_ONLY: u8 = 0x04;
}

/// View over the 12-octet BTH (IBTA vol. 1, 9.2: opcode, SE, M, PadCnt, TVer, P_Key, FECN,
/// BECN, reserved 6 bits, DestQP, A, reserved 7 bits, PSN).
#[packet]
pub struct Bth {
    pub opcode: u8,
    pub solicited: u1,
    pub migreq: u1,
    pub pad_count: u2,
    pub tver: u4,
    pub pkey: u16be,
    pub fecn: u1,
    pub becn: u1,
    pub resv6: u6,
    pub dest_qp: u24be,
    pub ack_req: u1,
    pub resv7: u7,
    pub psn: u24be,
    #[payload]
    pub payload: Vec<u8>,
}

/// Why a RoCEv2 header could not be read or verified.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RoceError {
    /// Shorter than the BTH, the CNP body or the ICRC.
    #[error(transparent)]
    Truncated(#[from] Truncated),
    /// The ICRC does not match the one computed.
    #[error("RoCEv2 ICRC {found:#010x}, computed {computed:#010x}")]
    BadIcrc {
        /// ICRC on the wire (read little-endian).
        found: u32,
        /// ICRC computed over the masked headers and payload.
        computed: u32,
    },
}

/// What a BTH says. Reserved bits round-trip.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct BthRepr {
    /// Opcode ([`opcode`]).
    pub opcode: u8,
    /// Solicited event (SE).
    pub solicited: bool,
    /// Migration request (M).
    pub migreq: bool,
    /// Pad count, 0..=3 octets of padding before the ICRC.
    pub pad_count: u8,
    /// Transport header version, 4 bits.
    pub tver: u8,
    /// Partition key.
    pub pkey: u16,
    /// Forward ECN.
    pub fecn: bool,
    /// Backward ECN: set in CNPs ("octet 4 = 0x40 (BECN=1)").
    pub becn: bool,
    /// Reserved 6 bits after BECN.
    pub resv6: u8,
    /// Destination queue pair, 24 bits.
    pub dest_qp: u32,
    /// Acknowledge request (A).
    pub ack_req: bool,
    /// Reserved 7 bits after A.
    pub resv7: u8,
    /// Packet sequence number, 24 bits.
    pub psn: u32,
}

impl BthRepr {
    /// The BTH of a CNP to `dest_qp`: "opcode 0x81, SE/M/Pad/TVer 0, P_Key 0xFFFF, octet 4 =
    /// 0x40 (BECN=1), DestQP = the sender's QP, A=0, PSN=0."
    pub fn cnp(dest_qp: u32) -> Self {
        Self {
            opcode: opcode::CNP,
            pkey: DEFAULT_PKEY,
            becn: true,
            dest_qp,
            ..Self::default()
        }
    }

    /// Parses the 12-octet BTH at the start of `buf`.
    pub fn parse(buf: &[u8]) -> Result<Self, Truncated> {
        let p = view("BTH", buf, BTH_LEN, BthPacket::new)?;
        Ok(Self {
            opcode: p.get_opcode(),
            solicited: p.get_solicited() != 0,
            migreq: p.get_migreq() != 0,
            pad_count: p.get_pad_count(),
            tver: p.get_tver(),
            pkey: p.get_pkey(),
            fecn: p.get_fecn() != 0,
            becn: p.get_becn() != 0,
            resv6: p.get_resv6(),
            dest_qp: p.get_dest_qp(),
            ack_req: p.get_ack_req() != 0,
            resv7: p.get_resv7(),
            psn: p.get_psn(),
        })
    }

    /// Octets `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        BTH_LEN
    }

    /// Writes the BTH into `buf[..12]`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, EmitError> {
        const W: &str = "BTH";
        check_range(W, "pad_count", self.pad_count.into(), 3)?;
        check_range(W, "tver", self.tver.into(), 0xF)?;
        check_range(W, "resv6", self.resv6.into(), 0x3F)?;
        check_range(W, "dest_qp", self.dest_qp.into(), MAX_QP.into())?;
        check_range(W, "resv7", self.resv7.into(), 0x7F)?;
        check_range(W, "psn", self.psn.into(), MAX_QP.into())?;
        let mut p = view_mut(W, buf, BTH_LEN, MutableBthPacket::new)?;
        p.set_opcode(self.opcode);
        p.set_solicited(self.solicited.into());
        p.set_migreq(self.migreq.into());
        p.set_pad_count(self.pad_count);
        p.set_tver(self.tver);
        p.set_pkey(self.pkey);
        p.set_fecn(self.fecn.into());
        p.set_becn(self.becn.into());
        p.set_resv6(self.resv6);
        p.set_dest_qp(self.dest_qp);
        p.set_ack_req(self.ack_req.into());
        p.set_resv7(self.resv7);
        p.set_psn(self.psn);
        Ok(BTH_LEN)
    }
}

/// The ICRC of a RoCEv2-over-IPv4 packet. `ip` is the IPv4 packet from its first header octet
/// up to (not including) the ICRC; `ip_header_len` is its IHL in octets.
///
/// protocols.md: "ICRC: CRC-32 (zlib) over 8 x 0xFF, then the IP header with TOS, TTL and
/// checksum set to all ones, the UDP header with checksum 0xFFFF, the BTH with octet 4 set to
/// 0xFF, then the payload". The masked octets are fed as 0xFF in place; nothing is copied.
pub fn icrc(ip: &[u8], ip_header_len: usize) -> Result<u32, Truncated> {
    // An IPv4 header is at least 20 octets (parse rejects less); clamping keeps `masked` sorted.
    let ip_header_len = ip_header_len.max(IPV4_MIN);
    let bth = ip_header_len + UDP_LEN;
    check_len("RoCEv2 ICRC input", ip, bth + BTH_LEN)?;
    // Octets replaced by 0xFF, in increasing order: IPv4 TOS (1), TTL (8), header checksum
    // (10, 11); UDP checksum (6, 7 into UDP); BTH octet 4 (FECN, BECN, resv6).
    let masked = [1, 8, 10, 11, ip_header_len + 6, ip_header_len + 7, bth + 4];
    let mut h = Hasher::new();
    h.update(&[0xFF; 8]);
    let mut from = 0;
    for at in masked {
        h.update(ip.get(from..at).unwrap_or_default());
        h.update(&[0xFF]);
        from = at + 1;
    }
    h.update(ip.get(from..).unwrap_or_default());
    Ok(h.finalize())
}

/// Checks the ICRC at the end of `ip` (the whole IPv4 packet, ICRC included).
pub fn verify_icrc(ip: &[u8], ip_header_len: usize) -> Result<(), RoceError> {
    let min = ip_header_len.max(IPV4_MIN) + UDP_LEN + BTH_LEN + ICRC_LEN;
    check_len("RoCEv2 packet", ip, min)?;
    let (body, tail) = ip.split_at(ip.len() - ICRC_LEN);
    let found = u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]);
    let computed = icrc(body, ip_header_len)?;
    if found == computed {
        Ok(())
    } else {
        Err(RoceError::BadIcrc { found, computed })
    }
}

/// Computes the ICRC over `ip[..ip.len() - 4]` and stores it little-endian in the last 4
/// octets ("stored little-endian").
pub fn write_icrc(ip: &mut [u8], ip_header_len: usize) -> Result<(), EmitError> {
    let len = ip.len();
    let need = ip_header_len + UDP_LEN + BTH_LEN + ICRC_LEN;
    super::check_out("RoCEv2 ICRC", ip, need)?;
    let c = icrc(&ip[..len - ICRC_LEN], ip_header_len).map_err(|t| EmitError::BufferTooShort {
        what: "RoCEv2 ICRC",
        need: t.need,
        have: t.have,
    })?;
    ip[len - ICRC_LEN..].copy_from_slice(&c.to_le_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// BTH of a CNP to QP 0x123456.
    const CNP_BTH: [u8; 12] = [
        0x81, 0x00, 0xFF, 0xFF, 0x40, 0x12, 0x34, 0x56, 0x00, 0x00, 0x00, 0x00,
    ];

    #[test]
    fn bth_fixture_both_ways() {
        assert_eq!(BthRepr::parse(&CNP_BTH), Ok(BthRepr::cnp(0x123456)));
        let mut out = [0u8; 12];
        assert_eq!(BthRepr::cnp(0x123456).emit(&mut out), Ok(12));
        assert_eq!(out, CNP_BTH);
    }

    /// A whole CNP IPv4 packet (IP/UDP/BTH/16 zero/ICRC), 60 octets, as scapy 2.5 builds it:
    /// `raw(IP(src="10.0.0.2", dst="10.0.0.1", tos=48<<2, ttl=64, flags="DF", id=0, chksum=0)
    ///  / UDP(sport=4791, dport=4791, chksum=0) / cnp(0x123456))`, ICRC 09 7a 3b 16 from
    /// scapy's `compute_icrc`. The integration test re-checks the CNP `quench frames` writes
    /// with scapy itself.
    fn cnp_ip() -> [u8; 60] {
        let mut b = [0u8; 60];
        b[..20].copy_from_slice(&[
            0x45, 0xC0, 0x00, 0x3C, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 10, 0, 0, 2,
            10, 0, 0, 1,
        ]);
        b[20..28].copy_from_slice(&[0x12, 0xB7, 0x12, 0xB7, 0x00, 0x28, 0x00, 0x00]);
        b[28..40].copy_from_slice(&CNP_BTH);
        b[56..].copy_from_slice(&SCAPY_ICRC);
        b
    }

    const SCAPY_ICRC: [u8; 4] = [0x09, 0x7A, 0x3B, 0x16];

    #[test]
    fn icrc_known_answer_from_scapy() {
        let mut a = cnp_ip();
        assert_eq!(verify_icrc(&a, 20), Ok(()));
        a[56..].fill(0);
        write_icrc(&mut a, 20).unwrap();
        assert_eq!(a[56..], SCAPY_ICRC);
    }

    #[test]
    fn icrc_ignores_masked_fields() {
        let mut a = cnp_ip();
        write_icrc(&mut a, 20).unwrap();
        assert_eq!(verify_icrc(&a, 20), Ok(()));
        // TOS, TTL, IP checksum, UDP checksum and BTH octet 4 are outside the ICRC.
        let mut b = a;
        for at in [1, 8, 10, 11, 26, 27, 32] {
            b[at] ^= 0x5A;
        }
        assert_eq!(verify_icrc(&b, 20), Ok(()));
        // Any other octet is covered.
        for at in (0..56).filter(|i| ![1, 8, 10, 11, 26, 27, 32].contains(i)) {
            let mut c = a;
            c[at] ^= 1;
            assert!(
                matches!(verify_icrc(&c, 20), Err(RoceError::BadIcrc { .. })),
                "octet {at}"
            );
        }
    }

    #[test]
    fn icrc_matches_reference_crc() {
        // The same CRC computed the slow way: copy, mask, zlib CRC-32 (crc32fast is zlib's).
        let a = cnp_ip();
        let mut masked = vec![0xFFu8; 8];
        masked.extend_from_slice(&a[..56]);
        for at in [1, 8, 10, 11, 26, 27, 32] {
            masked[8 + at] = 0xFF;
        }
        assert_eq!(icrc(&a[..56], 20), Ok(crc32fast::hash(&masked)));
    }

    #[test]
    fn malformed() {
        for n in 0..44 {
            assert!(matches!(
                verify_icrc(&cnp_ip()[..n], 20),
                Err(RoceError::Truncated(_))
            ));
        }
        for n in 0..12 {
            assert!(BthRepr::parse(&CNP_BTH[..n]).is_err());
        }
        let mut r = BthRepr::cnp(MAX_QP + 1);
        assert!(r.emit(&mut [0u8; 12]).is_err());
        r.dest_qp = 1;
        r.pad_count = 4;
        assert!(r.emit(&mut [0u8; 12]).is_err());
    }

    proptest! {
        #[test]
        fn bth_round_trip(
            opcode: u8, solicited: bool, migreq: bool, pad_count in 0u8..4, tver in 0u8..16,
            pkey: u16, fecn: bool, becn: bool, resv6 in 0u8..64, dest_qp in 0u32..=MAX_QP,
            ack_req: bool, resv7 in 0u8..128, psn in 0u32..=MAX_QP,
        ) {
            let r = BthRepr {
                opcode, solicited, migreq, pad_count, tver, pkey, fecn, becn, resv6, dest_qp,
                ack_req, resv7, psn,
            };
            let mut out = [0u8; 12];
            r.emit(&mut out).unwrap();
            prop_assert_eq!(BthRepr::parse(&out), Ok(r));
        }

        #[test]
        fn no_bytes_panic(bytes in proptest::collection::vec(any::<u8>(), 0..80), ihl in 0usize..70) {
            let _ = BthRepr::parse(&bytes);
            let _ = verify_icrc(&bytes, ihl);
            let _ = icrc(&bytes, ihl);
        }
    }
}
