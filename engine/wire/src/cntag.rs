//! IEEE 802.1Qau CN-TAG: the congestion-notification tag a reaction point puts on its frames.
//!
//! protocols.md: "**CN-TAG** (4 octets, after the C-VLAN tag): EtherType **0x22E9**, then a
//! 16-bit Flow ID (RPID)." (S: HPE FlexFabric 5700 manual; FortiSwitch default 8937 = 0x22E9)
//!
//! As with a VLAN tag, the EtherType 0x22E9 sits in the preceding header's EtherType field; the
//! view here covers the 4 octets after it: RPID (2) and the next EtherType (2).

use pnet_macros::packet;
use pnet_macros_support::types::u16be;
use pnet_packet::ethernet::EtherType;

use super::{view, view_mut, EmitError, Truncated};

/// The CN-TAG's EtherType (S; configurable on real switches, e.g. FortiSwitch 8937).
pub const ETHERTYPE: EtherType = EtherType(0x22E9);
/// Octets after the 0x22E9 EtherType: RPID and the next EtherType.
pub const LEN: usize = 4;

/// View over the 4 octets after EtherType 0x22E9.
#[packet]
pub struct CnTag {
    // Flow ID chosen by the reaction point (RPID); the CP echoes it in the CNM's CN-TAG.
    pub rpid: u16be,
    // EtherType of what follows the CN-TAG.
    #[construct_with(u16be)]
    pub ethertype: EtherType,
    #[payload]
    pub payload: Vec<u8>,
}

/// What a CN-TAG says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CnTagRepr {
    /// Flow ID (RPID).
    pub rpid: u16,
    /// EtherType of what follows (any value, round-trips).
    pub ethertype: EtherType,
}

impl CnTagRepr {
    /// Parses the 4 octets after EtherType 0x22E9.
    pub fn parse(buf: &[u8]) -> Result<Self, Truncated> {
        let p = view("CN-TAG", buf, LEN, CnTagPacket::new)?;
        Ok(Self {
            rpid: p.get_rpid(),
            ethertype: p.get_ethertype(),
        })
    }

    /// Octets `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }

    /// Writes RPID and next EtherType into `buf[..4]`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, EmitError> {
        let mut p = view_mut("CN-TAG", buf, LEN, MutableCnTagPacket::new)?;
        p.set_rpid(self.rpid);
        p.set_ethertype(self.ethertype);
        Ok(LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const BYTES: [u8; 4] = [0x12, 0x34, 0x08, 0x00];

    #[test]
    fn parse_fixture() {
        let r = CnTagRepr::parse(&BYTES).unwrap();
        assert_eq!(r.rpid, 0x1234);
        assert_eq!(r.ethertype, EtherType(0x0800));
    }

    #[test]
    fn emit_fixture() {
        let r = CnTagRepr {
            rpid: 0x1234,
            ethertype: EtherType(0x0800),
        };
        let mut out = [0u8; 4];
        assert_eq!(r.emit(&mut out), Ok(4));
        assert_eq!(out, BYTES);
    }

    #[test]
    fn truncated() {
        assert_eq!(
            CnTagRepr::parse(&BYTES[..3]),
            Err(Truncated {
                what: "CN-TAG",
                need: 4,
                have: 3
            })
        );
        let mut out = [0u8; 3];
        assert!(CnTagRepr::parse(&BYTES).unwrap().emit(&mut out).is_err());
    }

    proptest! {
        #[test]
        fn round_trip(rpid: u16, et: u16) {
            let r = CnTagRepr { rpid, ethertype: EtherType(et) };
            let mut out = [0u8; 4];
            r.emit(&mut out).unwrap();
            prop_assert_eq!(CnTagRepr::parse(&out), Ok(r));
        }

        #[test]
        fn no_bytes_panic(bytes in proptest::collection::vec(any::<u8>(), 0..16)) {
            let _ = CnTagRepr::parse(&bytes);
        }
    }
}
