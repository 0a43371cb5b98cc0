//! IPv6 fixed header (RFC 8200 section 3) on pnet's `Ipv6Packet` view: what the sender appliance
//! reads to classify a flow (addresses, next header) and the ECN field it may set (RFC 3168
//! section 5: the two low bits of the Traffic Class). IPv6 has no header checksum, so an ECN
//! rewrite touches nothing else. Extension headers are not walked: `next_header` is the first
//! one's number.
use std::net::Ipv6Addr;

use pnet_packet::ipv6::{Ipv6Packet, MutableIpv6Packet};

use super::{view, view_mut, EmitError, Truncated};
use crate::ipv4::Ecn;

/// The fixed header (RFC 8200 section 3).
pub const HEADER_LEN: usize = 40;
/// ICMPv6 (RFC 4443); Neighbor Discovery (RFC 4861) runs on it.
pub const NEXT_ICMPV6: u8 = 58;

/// Why an IPv6 header could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Ipv6Error {
    /// Shorter than the fixed header.
    #[error(transparent)]
    Truncated(#[from] Truncated),
    /// Version field is not 6.
    #[error("IPv6 version field is {0}, not 6")]
    BadVersion(u8),
}

/// What the fixed header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6Repr {
    /// ECN bits of the Traffic Class.
    pub ecn: Ecn,
    /// Next Header.
    pub next_header: u8,
    pub src: Ipv6Addr,
    pub dst: Ipv6Addr,
    /// Payload Length.
    pub payload_len: u16,
}

impl Ipv6Repr {
    /// Parses the fixed header at the start of `buf`.
    pub fn parse(buf: &[u8]) -> Result<Self, Ipv6Error> {
        let p = view("IPv6", buf, HEADER_LEN, Ipv6Packet::new)?;
        if p.get_version() != 6 {
            return Err(Ipv6Error::BadVersion(p.get_version()));
        }
        Ok(Ipv6Repr {
            ecn: Ecn::from_bits(p.get_traffic_class()),
            next_header: p.get_next_header().0,
            src: p.get_source(),
            dst: p.get_destination(),
            payload_len: p.get_payload_length(),
        })
    }
}

/// Rewrites the ECN bits of the IPv6 header at the start of `header` in place.
pub fn set_ecn(header: &mut [u8], ecn: Ecn) -> Result<(), EmitError> {
    let mut p = view_mut("IPv6", header, HEADER_LEN, MutableIpv6Packet::new)?;
    let tc = p.get_traffic_class();
    p.set_traffic_class((tc & !0b11) | ecn.bits());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2001:db8::1 -> 2001:db8::2, Traffic Class 0xb8 (DSCP 46, Not-ECT), flow label 0x12345,
    /// 8 octets of UDP, hop limit 64.
    fn bytes() -> [u8; 40] {
        let mut b = [0u8; 40];
        b[..8].copy_from_slice(&[0x6b, 0x81, 0x23, 0x45, 0x00, 0x08, 17, 64]);
        b[8..10].copy_from_slice(&[0x20, 0x01]);
        b[10..12].copy_from_slice(&[0x0d, 0xb8]);
        b[23] = 1;
        b[24..26].copy_from_slice(&[0x20, 0x01]);
        b[26..28].copy_from_slice(&[0x0d, 0xb8]);
        b[39] = 2;
        b
    }

    #[test]
    fn parses_and_sets_ecn_leaving_the_rest() {
        let mut b = bytes();
        let r = Ipv6Repr::parse(&b).unwrap();
        assert_eq!(r.ecn, Ecn::NotEct);
        assert_eq!(r.next_header, 17);
        assert_eq!(r.payload_len, 8);
        assert_eq!(r.src, "2001:db8::1".parse::<Ipv6Addr>().unwrap());
        set_ecn(&mut b, Ecn::Ect0).unwrap();
        let mut want = bytes();
        want[1] = 0xa1; // Traffic Class 0xba: DSCP 46, ECT(0); flow label kept.
        assert_eq!(b, want);
        assert_eq!(Ipv6Repr::parse(&b).unwrap().ecn, Ecn::Ect0);
    }

    #[test]
    fn refuses_short_and_wrong_version() {
        assert!(matches!(
            Ipv6Repr::parse(&bytes()[..39]),
            Err(Ipv6Error::Truncated(_))
        ));
        let mut b = bytes();
        b[0] = 0x4b;
        assert_eq!(Ipv6Repr::parse(&b), Err(Ipv6Error::BadVersion(4)));
    }
}
