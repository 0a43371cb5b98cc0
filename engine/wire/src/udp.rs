//! UDP (RFC 768) over IPv4, on pnet's `UdpPacket` view.
//!
//! RFC 768: "An all zero transmitted checksum value means that the transmitter generated no
//! checksum"; a computed checksum of zero is sent as all ones. RoCEv2 sends zero (the ICRC
//! protects the packet); quench's test traffic sends a real checksum.

use std::net::Ipv4Addr;

use pnet_packet::udp::{self, MutableUdpPacket, UdpPacket};

use super::{check_len, check_out, check_range, view, view_mut, EmitError, Truncated};

/// UDP header length.
pub const HEADER_LEN: usize = 8;

/// Why a UDP header could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum UdpError {
    /// Shorter than 8 octets or than the length field says.
    #[error(transparent)]
    Truncated(#[from] Truncated),
    /// Length field below 8.
    #[error("UDP length {0} is shorter than its header")]
    BadLength(u16),
    /// A nonzero checksum that does not verify.
    #[error("UDP checksum {found:#06x}, computed {computed:#06x}")]
    BadChecksum {
        /// Checksum in the header.
        found: u16,
        /// Checksum computed over pseudo-header, header and payload.
        computed: u16,
    },
}

/// What a UDP header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Payload octets (length field minus 8).
    pub payload_len: u16,
    /// Whether the datagram carries a checksum (false: the field is zero).
    pub checksummed: bool,
}

/// RFC 768 checksum over the IPv4 pseudo-header and the datagram `p` views (header + payload),
/// with the checksum field skipped; zero is mapped to all ones.
fn checksum(p: &UdpPacket, src: Ipv4Addr, dst: Ipv4Addr) -> u16 {
    match udp::ipv4_checksum(p, &src, &dst) {
        0 => 0xFFFF,
        c => c,
    }
}

impl UdpRepr {
    /// Parses a UDP header from the IPv4 payload `buf` and verifies a nonzero checksum with
    /// the IPv4 addresses. The payload is `buf[8..8 + payload_len]`.
    pub fn parse(buf: &[u8], src: Ipv4Addr, dst: Ipv4Addr) -> Result<Self, UdpError> {
        let p = view("UDP", buf, HEADER_LEN, UdpPacket::new)?;
        let len = p.get_length();
        if usize::from(len) < HEADER_LEN {
            return Err(UdpError::BadLength(len));
        }
        check_len("UDP", buf, usize::from(len))?;
        let found = p.get_checksum();
        if found != 0 {
            // len <= buf.len() was checked above.
            let datagram = buf.get(..usize::from(len)).unwrap_or_default();
            let computed = checksum(
                &view("UDP", datagram, HEADER_LEN, UdpPacket::new)?,
                src,
                dst,
            );
            if computed != found {
                return Err(UdpError::BadChecksum { found, computed });
            }
        }
        Ok(Self {
            src_port: p.get_source(),
            dst_port: p.get_destination(),
            payload_len: len - HEADER_LEN as u16,
            checksummed: found != 0,
        })
    }

    /// Octets of the header `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header into `buf[..8]`. The payload must already sit at
    /// `buf[8..8 + payload_len]` when `checksummed` is set, since the checksum covers it.
    pub fn emit(&self, buf: &mut [u8], src: Ipv4Addr, dst: Ipv4Addr) -> Result<usize, EmitError> {
        let max = u64::from(u16::MAX) - HEADER_LEN as u64;
        check_range("UDP", "payload_len", self.payload_len.into(), max)?;
        let total = HEADER_LEN + usize::from(self.payload_len);
        check_out("UDP", buf, total)?;
        let mut p = view_mut("UDP", buf, total, MutableUdpPacket::new)?;
        p.set_source(self.src_port);
        p.set_destination(self.dst_port);
        p.set_length(total as u16);
        p.set_checksum(0);
        if self.checksummed {
            let c = checksum(&p.to_immutable(), src, dst);
            p.set_checksum(c);
        }
        Ok(HEADER_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SRC: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const DST: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

    /// 1000 -> 2000, payload "quench!!" (8 octets), with checksum.
    /// Pseudo: 0a00+0001+0a00+0002+0011+0010 = 1424; header 03e8+07d0+0010 = 0bc8;
    /// payload 7175+656e+6368+2121 = 1_5b6c -> 5b6d; 1424+0bc8+5b6d = 7b59; !7b59 = 84a6
    /// (also checked with a Python one-liner over the same words).
    const BYTES: [u8; 16] = [
        0x03, 0xE8, 0x07, 0xD0, 0x00, 0x10, 0x84, 0xA6, b'q', b'u', b'e', b'n', b'c', b'h', b'!',
        b'!',
    ];

    fn repr() -> UdpRepr {
        UdpRepr {
            src_port: 1000,
            dst_port: 2000,
            payload_len: 8,
            checksummed: true,
        }
    }

    #[test]
    fn parse_fixture() {
        assert_eq!(UdpRepr::parse(&BYTES, SRC, DST), Ok(repr()));
    }

    #[test]
    fn emit_fixture() {
        let mut out = [0u8; 16];
        out[8..].copy_from_slice(b"quench!!");
        assert_eq!(repr().emit(&mut out, SRC, DST), Ok(8));
        assert_eq!(out, BYTES);
    }

    #[test]
    fn zero_checksum_not_checked() {
        let mut b = BYTES;
        b[6] = 0;
        b[7] = 0;
        let r = UdpRepr::parse(&b, SRC, DST).unwrap();
        assert!(!r.checksummed);
        let mut out = [0u8; 16];
        out[8..].copy_from_slice(b"quench!!");
        r.emit(&mut out, SRC, DST).unwrap();
        assert_eq!(out, b);
    }

    #[test]
    fn malformed() {
        for n in 0..16 {
            assert!(matches!(
                UdpRepr::parse(&BYTES[..n], SRC, DST),
                Err(UdpError::Truncated(_))
            ));
        }
        let mut b = BYTES;
        b[5] = 7;
        assert_eq!(UdpRepr::parse(&b, SRC, DST), Err(UdpError::BadLength(7)));
        assert!(matches!(
            UdpRepr::parse(&BYTES, SRC, Ipv4Addr::new(10, 0, 0, 3)),
            Err(UdpError::BadChecksum { .. })
        ));
    }

    proptest! {
        #[test]
        fn round_trip(
            src_port: u16, dst_port: u16, checksummed: bool, s: u32, d: u32,
            payload in proptest::collection::vec(any::<u8>(), 0..40),
        ) {
            let r = UdpRepr { src_port, dst_port, payload_len: payload.len() as u16, checksummed };
            let mut out = vec![0u8; 8];
            out.extend_from_slice(&payload);
            prop_assert_eq!(r.emit(&mut out, s.into(), d.into()), Ok(8));
            prop_assert_eq!(UdpRepr::parse(&out, s.into(), d.into()), Ok(r));
        }

        #[test]
        fn no_bytes_panic(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            let _ = UdpRepr::parse(&bytes, SRC, DST);
        }
    }
}
