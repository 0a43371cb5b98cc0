//! IPv4 (RFC 791) with DSCP (RFC 2474) and the 2-bit ECN field (RFC 3168; TCD reuses the same
//! bits), on pnet's `Ipv4Packet` view. The header checksum is computed on emit and verified on
//! parse.
//!
//! Options are accepted on parse (IHL 5..=15, skipped) but not kept: `emit` writes a 20-octet
//! header. Everything else (flags, fragment offset, protocol numbers, DSCP values) round-trips.

use std::net::Ipv4Addr;

use pnet_packet::ip::IpNextHeaderProtocol;
use pnet_packet::ipv4::{self, Ipv4Packet, MutableIpv4Packet};

use super::{check_len, check_range, view, view_mut, EmitError, Truncated};

/// Header without options.
pub const HEADER_LEN: usize = 20;
/// IP protocol number of UDP (RFC 768).
pub const PROTO_UDP: IpNextHeaderProtocol = IpNextHeaderProtocol(17);
/// The "don't fragment" bit in the 3-bit flags field (RFC 791).
pub const FLAG_DF: u8 = 0b010;
/// NVIDIA's default DSCP for CNPs (protocols.md: "CNPs go with DSCP 48").
pub const CNP_DSCP: u8 = 48;

/// The 2-bit ECN field (one type across quench).
pub use units::Ecn;

/// Why an IPv4 header could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Ipv4Error {
    /// Shorter than the header or than the total length says.
    #[error(transparent)]
    Truncated(#[from] Truncated),
    /// Version field is not 4.
    #[error("IPv4 version field is {0}, not 4")]
    BadVersion(u8),
    /// IHL below 5 words.
    #[error("IPv4 header length {0} words is below 5")]
    BadHeaderLen(u8),
    /// Total length shorter than the header.
    #[error("IPv4 total length {total} is shorter than the header ({header})")]
    BadTotalLen {
        /// Total length field.
        total: u16,
        /// Header length in octets.
        header: usize,
    },
    /// Header checksum does not verify.
    #[error("IPv4 header checksum {found:#06x}, computed {computed:#06x}")]
    BadChecksum {
        /// Checksum in the header.
        found: u16,
        /// Checksum computed over the header.
        computed: u16,
    },
}

/// The first 20 octets of `buf`, the header length and the total length, once the version, the
/// header length and the total length are consistent with each other and with `buf` (what
/// [`Ipv4Repr::parse`] and [`Ipv4Flow::read`] both check, RFC 791 section 3.1).
fn check_lengths(buf: &[u8]) -> Result<(&[u8; HEADER_LEN], usize, u16), Ipv4Error> {
    let Some(h) = buf.first_chunk::<HEADER_LEN>() else {
        return Err(Truncated {
            what: "IPv4",
            need: HEADER_LEN,
            have: buf.len(),
        }
        .into());
    };
    let version = h[0] >> 4;
    if version != 4 {
        return Err(Ipv4Error::BadVersion(version));
    }
    let ihl = h[0] & 0x0F;
    if ihl < 5 {
        return Err(Ipv4Error::BadHeaderLen(ihl));
    }
    let header = usize::from(ihl) * 4;
    let total = u16::from_be_bytes([h[2], h[3]]);
    if usize::from(total) < header {
        return Err(Ipv4Error::BadTotalLen { total, header });
    }
    check_len("IPv4", buf, usize::from(total))?;
    Ok((h, header, total))
}

/// What a flow classifier reads of an IPv4 header (the sender appliance's, per frame): read
/// straight from the header's fixed offsets (RFC 791 section 3.1) once its lengths are checked,
/// and **without verifying the header checksum**, which [`Ipv4Repr::parse`] does. A forwarder
/// that is not a router has no duty to check it: RFC 1812 section 5.2.2 asks it of routers,
/// which rewrite the TTL; a bridge does not look at it; the receiving host verifies it and
/// discards a bad header (RFC 1122 section 3.2.1.2), and an in-place rewrite ([`set_ecn`], RFC
/// 1624's incremental update) keeps a bad checksum bad, so the receiver still sees the error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Flow {
    /// ECN field.
    pub ecn: Ecn,
    /// Protocol of the payload.
    pub protocol: u8,
    /// A fragment of a datagram: more fragments follow, or its offset is not zero.
    pub fragment: bool,
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
}

impl Ipv4Flow {
    /// Reads the header at the start of `buf`; returns it and the header length (payload
    /// offset). Refuses what [`Ipv4Repr::parse`] refuses, except a bad checksum.
    #[inline]
    pub fn read(buf: &[u8]) -> Result<(Self, usize), Ipv4Error> {
        let (h, header, _) = check_lengths(buf)?;
        // Flags are the top 3 bits of octet 6 (MF is the lowest of them), the fragment offset
        // the 13 bits after.
        let more_fragments = h[6] & 0x20 != 0;
        let offset = u16::from_be_bytes([h[6], h[7]]) & 0x1FFF;
        Ok((
            Ipv4Flow {
                ecn: Ecn::from_bits(h[1] & 0b11),
                protocol: h[9],
                fragment: more_fragments || offset != 0,
                src: Ipv4Addr::new(h[12], h[13], h[14], h[15]),
                dst: Ipv4Addr::new(h[16], h[17], h[18], h[19]),
            },
            header,
        ))
    }
}

/// What an IPv4 header says (options dropped).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Repr {
    /// Differentiated Services codepoint, 6 bits.
    pub dscp: u8,
    /// ECN field.
    pub ecn: Ecn,
    /// Identification.
    pub ident: u16,
    /// Flags, 3 bits ([`FLAG_DF`]).
    pub flags: u8,
    /// Fragment offset in 8-octet units, 13 bits.
    pub frag_offset: u16,
    /// Time to live.
    pub ttl: u8,
    /// Protocol of the payload (any value round-trips).
    pub protocol: IpNextHeaderProtocol,
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// Payload octets (total length minus header length).
    pub payload_len: u16,
}

impl Ipv4Repr {
    /// A UDP datagram header with DF set, TTL 64, identification 0.
    pub fn udp(src: Ipv4Addr, dst: Ipv4Addr, dscp: u8, ecn: Ecn, payload_len: u16) -> Self {
        Self {
            dscp,
            ecn,
            ident: 0,
            flags: FLAG_DF,
            frag_offset: 0,
            ttl: 64,
            protocol: PROTO_UDP,
            src,
            dst,
            payload_len,
        }
    }

    /// Parses and verifies an IPv4 header; returns it and the header length (payload offset).
    /// The payload is `buf[header_len..header_len + payload_len]`; octets past the total length
    /// (Ethernet padding) are ignored.
    pub fn parse(buf: &[u8]) -> Result<(Self, usize), Ipv4Error> {
        let (_, header, total) = check_lengths(buf)?;
        let p = view("IPv4", buf, HEADER_LEN, Ipv4Packet::new)?;
        // header <= total <= buf.len(), so the slice is there.
        let hdr = view(
            "IPv4",
            buf.get(..header).unwrap_or_default(),
            header,
            Ipv4Packet::new,
        )?;
        let found = hdr.get_checksum();
        let computed = ipv4::checksum(&hdr);
        if found != computed {
            return Err(Ipv4Error::BadChecksum { found, computed });
        }
        Ok((
            Self {
                dscp: p.get_dscp(),
                ecn: Ecn::from_bits(p.get_ecn()),
                ident: p.get_identification(),
                flags: p.get_flags(),
                frag_offset: p.get_fragment_offset(),
                ttl: p.get_ttl(),
                protocol: p.get_next_level_protocol(),
                src: p.get_source(),
                dst: p.get_destination(),
                payload_len: total - header as u16,
            },
            header,
        ))
    }

    /// Octets `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes a 20-octet header with a correct checksum into `buf[..20]`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, EmitError> {
        const W: &str = "IPv4";
        check_range(W, "dscp", self.dscp.into(), 0x3F)?;
        check_range(W, "flags", self.flags.into(), 0b111)?;
        check_range(W, "frag_offset", self.frag_offset.into(), 0x1FFF)?;
        let max_payload = u64::from(u16::MAX) - HEADER_LEN as u64;
        check_range(W, "payload_len", self.payload_len.into(), max_payload)?;
        let mut p = view_mut(W, buf, HEADER_LEN, MutableIpv4Packet::new)?;
        p.set_version(4);
        p.set_header_length(5);
        p.set_dscp(self.dscp);
        p.set_ecn(self.ecn.bits());
        p.set_total_length(self.payload_len + HEADER_LEN as u16);
        p.set_identification(self.ident);
        p.set_flags(self.flags);
        p.set_fragment_offset(self.frag_offset);
        p.set_ttl(self.ttl);
        p.set_next_level_protocol(self.protocol);
        p.set_checksum(0);
        p.set_source(self.src);
        p.set_destination(self.dst);
        let sum = ipv4::checksum(&p.to_immutable());
        p.set_checksum(sum);
        Ok(HEADER_LEN)
    }
}

/// The ECN field of the IPv4 header at the start of `header`.
pub fn ecn(header: &[u8]) -> Result<Ecn, Truncated> {
    check_len("IPv4", header, HEADER_LEN)?;
    Ok(Ecn::from_bits(header[1]))
}

/// Rewrites the ECN field of the IPv4 header at the start of `header` in place, updating the
/// header checksum incrementally. RFC 1624 eqn. 3: "HC' = ~(~HC + ~m + m')", with m the 16-bit
/// word holding the field (DSCP + ECN, with the version and IHL octet) before and m' after.
/// A header whose checksum was valid stays valid; nothing else of the header is read.
pub fn set_ecn(header: &mut [u8], ecn: Ecn) -> Result<(), Truncated> {
    check_len("IPv4", header, HEADER_LEN)?;
    let old_word = u16::from_be_bytes([header[0], header[1]]);
    header[1] = (header[1] & !0b11) | ecn.bits();
    let new_word = u16::from_be_bytes([header[0], header[1]]);
    let hc = u16::from_be_bytes([header[10], header[11]]);
    let mut sum = u32::from(!hc) + u32::from(!old_word) + u32::from(new_word);
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    header[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// 10.0.0.1 -> 10.0.0.2, UDP, DSCP 26, ECT(0), DF, TTL 64, 8 octets of payload.
    /// Checksum by hand: 456a+001c+0000+4000+4011+0000+0a00+0001+0a00+0002 = d99a, !d99a = 2665.
    const BYTES: [u8; 20] = [
        0x45, 0x6A, 0x00, 0x1C, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x26, 0x65, 10, 0, 0, 1, 10, 0,
        0, 2,
    ];

    fn repr() -> Ipv4Repr {
        Ipv4Repr::udp(
            Ipv4Addr::new(10, 0, 0, 1),
            Ipv4Addr::new(10, 0, 0, 2),
            26,
            Ecn::Ect0,
            8,
        )
    }

    fn with_payload() -> [u8; 28] {
        let mut b = [0u8; 28];
        b[..20].copy_from_slice(&BYTES);
        b
    }

    #[test]
    fn parse_fixture() {
        let (r, hl) = Ipv4Repr::parse(&with_payload()).unwrap();
        assert_eq!(r, repr());
        assert_eq!(hl, 20);
    }

    #[test]
    fn emit_fixture() {
        let mut out = [0u8; 20];
        assert_eq!(repr().emit(&mut out), Ok(20));
        assert_eq!(out, BYTES);
    }

    #[test]
    fn set_ecn_keeps_the_checksum_valid_for_every_transition() {
        for from in Ecn::ALL {
            for to in Ecn::ALL {
                let mut buf = with_payload();
                let mut r = repr();
                r.ecn = from;
                r.emit(&mut buf).unwrap();
                assert_eq!(ecn(&buf), Ok(from));
                set_ecn(&mut buf, to).unwrap();
                // parse verifies the checksum.
                let (got, _) = Ipv4Repr::parse(&buf).unwrap();
                assert_eq!(got.ecn, to);
                assert_eq!(got.dscp, r.dscp);
            }
        }
        assert!(set_ecn(&mut [0u8; 19], Ecn::Ce).is_err());
        assert!(ecn(&[0u8; 19]).is_err());
    }

    #[test]
    fn ecn_names() {
        assert_eq!(Ecn::from_bits(0b10), Ecn::Ect0);
        assert_eq!(Ecn::TCD_UNDETERMINED.bits(), 0b10);
        assert_eq!(Ecn::TCD_CONGESTED.rfc3168_name(), "CE");
        assert_eq!(Ecn::Ect1.tcd_name(), "TCD-capable");
        for (i, e) in Ecn::ALL.iter().enumerate() {
            assert_eq!(usize::from(e.bits()), i);
        }
    }

    #[test]
    fn malformed() {
        let good = with_payload();
        for n in 0..28 {
            assert!(matches!(
                Ipv4Repr::parse(&good[..n]),
                Err(Ipv4Error::Truncated(_))
            ));
        }
        let mut b = good;
        b[10] ^= 1;
        assert!(matches!(
            Ipv4Repr::parse(&b),
            Err(Ipv4Error::BadChecksum { .. })
        ));
        let mut b = good;
        b[0] = 0x65;
        assert_eq!(Ipv4Repr::parse(&b), Err(Ipv4Error::BadVersion(6)));
        let mut b = good;
        b[0] = 0x44;
        assert_eq!(Ipv4Repr::parse(&b), Err(Ipv4Error::BadHeaderLen(4)));
        let mut b = good;
        b[3] = 19;
        assert_eq!(
            Ipv4Repr::parse(&b),
            Err(Ipv4Error::BadTotalLen {
                total: 19,
                header: 20
            })
        );
        let mut r = repr();
        r.dscp = 64;
        assert!(r.emit(&mut [0u8; 20]).is_err());
    }

    #[test]
    fn options_skipped() {
        // IHL 6: one word of options (NOP x 4); checksum recomputed.
        let mut b = [0u8; 32];
        b[..20].copy_from_slice(&BYTES);
        b[0] = 0x46;
        b[3] = 32;
        b[20..24].fill(1);
        b[10] = 0;
        b[11] = 0;
        let sum = ipv4::checksum(&Ipv4Packet::new(&b[..24]).unwrap());
        b[10..12].copy_from_slice(&sum.to_be_bytes());
        let (r, hl) = Ipv4Repr::parse(&b).unwrap();
        assert_eq!(hl, 24);
        assert_eq!(r.payload_len, 8);
    }

    proptest! {
        #[test]
        fn round_trip(
            dscp in 0u8..64, ecn in 0u8..4, ident: u16, flags in 0u8..8,
            frag_offset in 0u16..0x2000, ttl: u8, proto: u8, src: u32, dst: u32,
            payload_len in 0u16..64,
        ) {
            let r = Ipv4Repr {
                dscp, ecn: Ecn::from_bits(ecn), ident, flags, frag_offset, ttl,
                protocol: IpNextHeaderProtocol(proto), src: src.into(), dst: dst.into(),
                payload_len,
            };
            let mut out = vec![0u8; 20 + usize::from(payload_len)];
            prop_assert_eq!(r.emit(&mut out), Ok(20));
            prop_assert_eq!(Ipv4Repr::parse(&out), Ok((r, 20)));
            prop_assert_eq!(Ipv4Flow::read(&out), Ok((flow_of(&r), 20)));
            // The in-place rewrite keeps every header's checksum valid.
            for to in Ecn::ALL {
                let mut h = out.clone();
                set_ecn(&mut h, to).unwrap();
                prop_assert_eq!(Ipv4Repr::parse(&h), Ok((Ipv4Repr { ecn: to, ..r }, 20)));
            }
        }

        #[test]
        fn no_bytes_panic(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            let _ = Ipv4Repr::parse(&bytes);
        }

        #[test]
        fn no_header_panics(mut bytes in proptest::collection::vec(any::<u8>(), 20..80), ihl in 0u8..16) {
            // Random bytes rarely have version 4; force it and fix the checksum so the
            // length checks are reached.
            bytes[0] = 0x40 | ihl;
            let hl = (usize::from(ihl) * 4).clamp(20, bytes.len());
            bytes[10] = 0;
            bytes[11] = 0;
            let sum = ipv4::checksum(&Ipv4Packet::new(&bytes[..hl]).unwrap());
            bytes[10..12].copy_from_slice(&sum.to_be_bytes());
            let parsed = Ipv4Repr::parse(&bytes);
            // The flow read refuses exactly what parse refuses (the checksum is valid here) and
            // reads the same fields.
            let read = Ipv4Flow::read(&bytes);
            prop_assert_eq!(parsed.map(|(r, hl)| (flow_of(&r), hl)), read);
            // A bad checksum: refused by parse only.
            bytes[10] ^= 0x5A;
            if let Ok(ok) = read {
                prop_assert_eq!(Ipv4Flow::read(&bytes), Ok(ok));
                prop_assert!(
                    matches!(Ipv4Repr::parse(&bytes), Err(Ipv4Error::BadChecksum { .. })),
                    "checksum not verified"
                );
            }
        }
    }

    /// What [`Ipv4Flow::read`] should read of a header `r` describes.
    fn flow_of(r: &Ipv4Repr) -> Ipv4Flow {
        Ipv4Flow {
            ecn: r.ecn,
            protocol: r.protocol.0,
            fragment: r.flags & 0b001 != 0 || r.frag_offset != 0,
            src: r.src,
            dst: r.dst,
        }
    }
}
