//! Ethernet II and IEEE 802.1Q VLAN tags (pnet's `EthernetPacket` and `VlanPacket` views).
//!
//! A frame here is what the NIC hands over without the FCS: DA (6), SA (6), EtherType (2),
//! then zero, one or two VLAN tags (a stacked S-tag + C-tag parses), optionally a CN-TAG
//! (802.1Qau, see [`super::cntag`]), then the payload.
//!
//! Two ways in:
//! - [`walk`]: for the datapath. It reads only what a switch needs to classify a frame
//!   (final EtherType, outer tag's PCP/VID, CN-TAG flow id, payload offset), is allocation-free
//!   and never panics.
//! - [`L2Repr`]: the whole L2 header stack with addresses, for parse/emit.
//!
//! 802.1Q-2022 9.6: the TCI is PCP (3 bits), DEI (1 bit), VID (12 bits).

use pnet_base::MacAddr;
use pnet_packet::ethernet::{EtherType, EthernetPacket, MutableEthernetPacket};
use pnet_packet::vlan::{ClassOfService, MutableVlanPacket, VlanPacket};

use super::cntag::{self, CnTagRepr};
use super::{check_out, check_range, view, view_mut, EmitError, Truncated};

/// EtherTypes quench knows. Any other value is kept as it is (round-trips).
pub mod ethertype {
    use pnet_packet::ethernet::EtherType;
    /// IPv4 (RFC 894).
    pub const IPV4: EtherType = EtherType(0x0800);
    /// 802.1Q customer VLAN tag (C-tag) TPID.
    pub const VLAN: EtherType = EtherType(0x8100);
    /// 802.1ad service VLAN tag (S-tag) TPID.
    pub const QINQ: EtherType = EtherType(0x88A8);
    /// MAC Control (802.3 Annex 31B PAUSE, 802.1Qbb PFC).
    pub const MAC_CONTROL: EtherType = EtherType(0x8808);
    /// 802.1Qau CN-TAG (S: HPE 5700 manual).
    pub const CN_TAG: EtherType = super::cntag::ETHERTYPE;
    /// 802.1Qau CNM (S: HPE 5700/5940 manuals; FortiSwitch default 8935).
    pub const CNM: EtherType = EtherType(0x22E7);
}

/// Ethernet II header length: DA, SA, EtherType.
pub const HEADER_LEN: usize = 14;
/// One VLAN tag after its TPID: TCI (2) + next EtherType (2).
pub const VLAN_TAG_LEN: usize = 4;
/// Most VLAN tags [`walk`] and [`L2Repr::parse`] accept (an S-tag and a C-tag).
pub const MAX_VLAN_TAGS: usize = 2;
/// Shortest Ethernet frame without FCS (802.3 clause 4.4.2: minFrameSize 64 octets incl. FCS).
pub const MIN_FRAME_LEN: usize = 60;
/// EtherType values below this are 802.3 length fields, not EtherTypes (IEEE 802.3 3.2.6).
pub const ETHERTYPE_MIN: u16 = 0x0600;

/// Is this EtherType a VLAN TPID quench steps over?
#[inline]
pub fn is_vlan_tpid(et: EtherType) -> bool {
    et == ethertype::VLAN || et == ethertype::QINQ
}

/// Why an Ethernet frame's L2 headers could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum EthernetError {
    /// The frame ends inside a header.
    #[error(transparent)]
    Truncated(#[from] Truncated),
    /// More VLAN tags than [`MAX_VLAN_TAGS`].
    #[error("more than {MAX_VLAN_TAGS} stacked VLAN tags")]
    TooManyTags,
    /// The type/length field is an 802.3 length (< 0x0600), not an EtherType.
    #[error("802.3 length field {0:#06x} where an EtherType was expected")]
    LengthField(u16),
}

/// The Ethernet II header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EthernetRepr {
    /// Destination MAC address.
    pub dst: MacAddr,
    /// Source MAC address.
    pub src: MacAddr,
    /// EtherType (any value, round-trips; a length field < 0x0600 is also kept as is).
    pub ethertype: EtherType,
}

impl EthernetRepr {
    /// Parses the 14-octet Ethernet II header at the start of `buf`.
    pub fn parse(buf: &[u8]) -> Result<Self, Truncated> {
        let p = view("Ethernet", buf, HEADER_LEN, EthernetPacket::new)?;
        Ok(Self {
            dst: p.get_destination(),
            src: p.get_source(),
            ethertype: p.get_ethertype(),
        })
    }

    /// Octets `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header into `buf[..14]`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, EmitError> {
        let mut p = view_mut("Ethernet", buf, HEADER_LEN, MutableEthernetPacket::new)?;
        p.set_destination(self.dst);
        p.set_source(self.src);
        p.set_ethertype(self.ethertype);
        Ok(HEADER_LEN)
    }
}

/// The 802.1Q Tag Control Information.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct VlanTci {
    /// Priority Code Point, 0..=7 (the 802.1p priority PFC and QCN act on).
    pub pcp: u8,
    /// Drop Eligible Indicator.
    pub dei: bool,
    /// VLAN identifier, 0..=4095.
    pub vid: u16,
}

/// One VLAN tag: its TPID (the EtherType that introduced it) and TCI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VlanTag {
    /// 0x8100 (C-tag) or 0x88A8 (S-tag).
    pub tpid: EtherType,
    /// Priority, drop eligibility, VLAN id.
    pub tci: VlanTci,
}

/// The 4 octets after a VLAN TPID: TCI and the next EtherType.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VlanRepr {
    /// Priority, drop eligibility, VLAN id.
    pub tci: VlanTci,
    /// EtherType of what follows the tag.
    pub ethertype: EtherType,
}

impl VlanRepr {
    /// Parses the 4 octets after a VLAN TPID.
    pub fn parse(buf: &[u8]) -> Result<Self, Truncated> {
        let p = view("VLAN tag", buf, VLAN_TAG_LEN, VlanPacket::new)?;
        Ok(Self {
            tci: VlanTci {
                pcp: p.get_priority_code_point().0,
                dei: p.get_drop_eligible_indicator() != 0,
                vid: p.get_vlan_identifier(),
            },
            ethertype: p.get_ethertype(),
        })
    }

    /// Octets `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        VLAN_TAG_LEN
    }

    /// Writes TCI and next EtherType into `buf[..4]`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, EmitError> {
        check_range("VLAN tag", "pcp", self.tci.pcp.into(), 7)?;
        check_range("VLAN tag", "vid", self.tci.vid.into(), 0x0FFF)?;
        let mut p = view_mut("VLAN tag", buf, VLAN_TAG_LEN, MutableVlanPacket::new)?;
        p.set_priority_code_point(ClassOfService(self.tci.pcp));
        p.set_drop_eligible_indicator(u8::from(self.tci.dei));
        p.set_vlan_identifier(self.tci.vid);
        p.set_ethertype(self.ethertype);
        Ok(VlanRepr::buffer_len(self))
    }
}

/// What [`walk`] learns about a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct L2Walk {
    /// The EtherType of the payload (after all VLAN tags and a CN-TAG).
    pub ethertype: EtherType,
    /// The outermost VLAN tag's TCI, if the frame is tagged.
    pub outer: Option<VlanTci>,
    /// Number of VLAN tags stepped over (0..=[`MAX_VLAN_TAGS`]).
    pub vlan_tags: u8,
    /// The CN-TAG's flow id (RPID), if the frame carries a CN-TAG.
    pub rpid: Option<u16>,
    /// Offset of the payload's first octet (just after the final EtherType).
    pub payload_offset: usize,
}

impl L2Walk {
    /// The 802.1p priority of the frame: the outer tag's PCP, or 0 for an untagged frame
    /// (802.1Q 6.9.3: untagged frames get the port's default priority, 0 unless configured).
    #[inline]
    pub fn priority(&self) -> u8 {
        self.outer.map_or(0, |t| t.pcp)
    }
}

#[inline]
fn be16(buf: &[u8], at: usize) -> Option<u16> {
    match buf.get(at..at + 2) {
        Some(&[a, b]) => Some(u16::from_be_bytes([a, b])),
        _ => None,
    }
}

/// Walks an Ethernet frame to its payload: steps over up to [`MAX_VLAN_TAGS`] VLAN tags
/// (TPID 0x8100 or 0x88A8) and one CN-TAG (0x22E9), and returns the final EtherType, the outer
/// tag's TCI, the RPID and the payload offset. Allocation-free, panic-free, O(tags).
///
/// Unknown EtherTypes are not errors (a switch forwards them); an 802.3 length field is
/// ([`EthernetError::LengthField`]).
#[inline]
pub fn walk(frame: &[u8]) -> Result<L2Walk, EthernetError> {
    let truncated = |need: usize| Truncated {
        what: "Ethernet",
        need,
        have: frame.len(),
    };
    // Offset of the current type/length field.
    let mut at = HEADER_LEN - 2;
    let mut et = be16(frame, at).ok_or_else(|| truncated(HEADER_LEN))?;
    let mut outer = None;
    let mut vlan_tags = 0u8;
    while is_vlan_tpid(EtherType(et)) {
        if usize::from(vlan_tags) == MAX_VLAN_TAGS {
            return Err(EthernetError::TooManyTags);
        }
        let tci = be16(frame, at + 2).ok_or_else(|| truncated(at + 2 + VLAN_TAG_LEN))?;
        if vlan_tags == 0 {
            outer = Some(VlanTci {
                pcp: (tci >> 13) as u8,
                dei: tci & 0x1000 != 0,
                vid: tci & 0x0FFF,
            });
        }
        vlan_tags += 1;
        at += VLAN_TAG_LEN;
        et = be16(frame, at).ok_or_else(|| truncated(at + 2))?;
    }
    let mut rpid = None;
    if EtherType(et) == cntag::ETHERTYPE {
        rpid = Some(be16(frame, at + 2).ok_or_else(|| truncated(at + 2 + cntag::LEN))?);
        at += cntag::LEN;
        et = be16(frame, at).ok_or_else(|| truncated(at + 2))?;
    }
    if et < ETHERTYPE_MIN {
        return Err(EthernetError::LengthField(et));
    }
    Ok(L2Walk {
        ethertype: EtherType(et),
        outer,
        vlan_tags,
        rpid,
        payload_offset: at + 2,
    })
}

/// The whole L2 header stack: Ethernet II, up to two VLAN tags, an optional CN-TAG.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct L2Repr {
    /// Destination MAC address.
    pub dst: MacAddr,
    /// Source MAC address.
    pub src: MacAddr,
    /// VLAN tags, outermost first; `tags[1]` is set only if `tags[0]` is.
    pub tags: [Option<VlanTag>; MAX_VLAN_TAGS],
    /// CN-TAG flow id (RPID), if present.
    pub rpid: Option<u16>,
    /// EtherType of the payload.
    pub ethertype: EtherType,
}

impl L2Repr {
    /// An untagged header.
    pub fn new(dst: MacAddr, src: MacAddr, ethertype: EtherType) -> Self {
        Self {
            dst,
            src,
            tags: [None; MAX_VLAN_TAGS],
            rpid: None,
            ethertype,
        }
    }

    /// This header with one 802.1Q C-tag (TPID 0x8100).
    pub fn with_vlan(mut self, tci: VlanTci) -> Self {
        self.tags = [
            Some(VlanTag {
                tpid: ethertype::VLAN,
                tci,
            }),
            None,
        ];
        self
    }

    /// This header with a CN-TAG carrying `rpid`.
    pub fn with_cn_tag(mut self, rpid: u16) -> Self {
        self.rpid = Some(rpid);
        self
    }

    /// Parses the L2 headers; returns the header and the payload offset.
    pub fn parse(frame: &[u8]) -> Result<(Self, usize), EthernetError> {
        let eth = EthernetRepr::parse(frame)?;
        let mut out = Self::new(eth.dst, eth.src, eth.ethertype);
        let mut at = HEADER_LEN;
        let mut n = 0;
        while is_vlan_tpid(out.ethertype) {
            if n == MAX_VLAN_TAGS {
                return Err(EthernetError::TooManyTags);
            }
            let v = VlanRepr::parse(frame.get(at..).unwrap_or_default())?;
            out.tags[n] = Some(VlanTag {
                tpid: out.ethertype,
                tci: v.tci,
            });
            out.ethertype = v.ethertype;
            at += VLAN_TAG_LEN;
            n += 1;
        }
        if out.ethertype == cntag::ETHERTYPE {
            let c = CnTagRepr::parse(frame.get(at..).unwrap_or_default())?;
            out.rpid = Some(c.rpid);
            out.ethertype = c.ethertype;
            at += cntag::LEN;
        }
        if out.ethertype.0 < ETHERTYPE_MIN {
            return Err(EthernetError::LengthField(out.ethertype.0));
        }
        Ok((out, at))
    }

    /// Octets `emit` writes (the payload offset).
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN
            + VLAN_TAG_LEN * self.tags.iter().flatten().count()
            + if self.rpid.is_some() { cntag::LEN } else { 0 }
    }

    /// Writes the L2 headers into the start of `buf`; returns the payload offset.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, EmitError> {
        let need = self.buffer_len();
        check_out("L2 headers", buf, need)?;
        // Each header's EtherType field names the next header.
        let mut types = [self.ethertype; MAX_VLAN_TAGS + 2];
        let mut n = 0;
        for tag in self.tags.iter().flatten() {
            types[n] = tag.tpid;
            n += 1;
        }
        if self.rpid.is_some() {
            types[n] = cntag::ETHERTYPE;
            n += 1;
        }
        types[n] = self.ethertype;
        let mut i = 0;
        let mut at = EthernetRepr {
            dst: self.dst,
            src: self.src,
            ethertype: types[0],
        }
        .emit(buf)?;
        for tag in self.tags.iter().flatten() {
            i += 1;
            at += VlanRepr {
                tci: tag.tci,
                ethertype: types[i],
            }
            .emit(&mut buf[at..])?;
        }
        if let Some(rpid) = self.rpid {
            i += 1;
            at += CnTagRepr {
                rpid,
                ethertype: types[i],
            }
            .emit(&mut buf[at..])?;
        }
        Ok(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const DST: MacAddr = MacAddr(0x02, 0, 0, 0, 0, 0x02);
    const SRC: MacAddr = MacAddr(0x02, 0, 0, 0, 0, 0x01);

    /// Untagged IPv4 header.
    const UNTAGGED: [u8; 14] = [0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x00];
    /// S-tag (PCP 5, VID 100) + C-tag (PCP 3, DEI, VID 0xABC) + CN-TAG (RPID 0x0102) + IPv4.
    const STACKED: [u8; 26] = [
        0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, // DA, SA
        0x88, 0xA8, 0xA0, 0x64, // S-tag: PCP 5, DEI 0, VID 100
        0x81, 0x00, 0x7A, 0xBC, // C-tag: PCP 3, DEI 1, VID 0xABC
        0x22, 0xE9, 0x01, 0x02, // CN-TAG: RPID 0x0102
        0x08, 0x00, // IPv4
    ];

    fn stacked_repr() -> L2Repr {
        L2Repr {
            dst: DST,
            src: SRC,
            tags: [
                Some(VlanTag {
                    tpid: ethertype::QINQ,
                    tci: VlanTci {
                        pcp: 5,
                        dei: false,
                        vid: 100,
                    },
                }),
                Some(VlanTag {
                    tpid: ethertype::VLAN,
                    tci: VlanTci {
                        pcp: 3,
                        dei: true,
                        vid: 0xABC,
                    },
                }),
            ],
            rpid: Some(0x0102),
            ethertype: ethertype::IPV4,
        }
    }

    #[test]
    fn ethernet_fixture_both_ways() {
        let r = EthernetRepr::parse(&UNTAGGED).unwrap();
        assert_eq!(
            r,
            EthernetRepr {
                dst: DST,
                src: SRC,
                ethertype: ethertype::IPV4
            }
        );
        let mut out = [0u8; 14];
        assert_eq!(r.emit(&mut out), Ok(14));
        assert_eq!(out, UNTAGGED);
    }

    #[test]
    fn vlan_fixture_both_ways() {
        let bytes = [0x7A, 0xBC, 0x08, 0x00];
        let r = VlanRepr::parse(&bytes).unwrap();
        assert_eq!(
            r.tci,
            VlanTci {
                pcp: 3,
                dei: true,
                vid: 0xABC
            }
        );
        let mut out = [0u8; 4];
        r.emit(&mut out).unwrap();
        assert_eq!(out, bytes);
    }

    #[test]
    fn stacked_fixture_both_ways() {
        let (r, off) = L2Repr::parse(&STACKED).unwrap();
        assert_eq!(r, stacked_repr());
        assert_eq!(off, 26);
        let mut out = [0u8; 26];
        assert_eq!(stacked_repr().emit(&mut out), Ok(26));
        assert_eq!(out, STACKED);
    }

    #[test]
    fn walk_stacked() {
        let w = walk(&STACKED).unwrap();
        assert_eq!(
            w,
            L2Walk {
                ethertype: ethertype::IPV4,
                outer: Some(VlanTci {
                    pcp: 5,
                    dei: false,
                    vid: 100
                }),
                vlan_tags: 2,
                rpid: Some(0x0102),
                payload_offset: 26,
            }
        );
        assert_eq!(w.priority(), 5);
    }

    #[test]
    fn walk_untagged_and_unknown_ethertype() {
        let mut f = UNTAGGED;
        f[12] = 0x12;
        f[13] = 0x34;
        let w = walk(&f).unwrap();
        assert_eq!(w.ethertype, EtherType(0x1234));
        assert_eq!(w.outer, None);
        assert_eq!(w.priority(), 0);
        assert_eq!(w.payload_offset, 14);
        let (r, _) = L2Repr::parse(&f).unwrap();
        let mut out = [0u8; 14];
        r.emit(&mut out).unwrap();
        assert_eq!(out, f, "unknown EtherType round-trips");
    }

    #[test]
    fn malformed() {
        for n in 0..STACKED.len() {
            assert!(
                matches!(walk(&STACKED[..n]), Err(EthernetError::Truncated(_))),
                "walk len {n}"
            );
            assert!(
                matches!(
                    L2Repr::parse(&STACKED[..n]),
                    Err(EthernetError::Truncated(_))
                ),
                "parse len {n}"
            );
        }
        let mut three = [0u8; 30];
        three[12..14].copy_from_slice(&[0x81, 0x00]);
        three[16..18].copy_from_slice(&[0x81, 0x00]);
        three[20..22].copy_from_slice(&[0x81, 0x00]);
        assert_eq!(walk(&three), Err(EthernetError::TooManyTags));
        assert_eq!(L2Repr::parse(&three), Err(EthernetError::TooManyTags));
        let mut len = UNTAGGED;
        len[12] = 0x00;
        len[13] = 0x2E;
        assert_eq!(walk(&len), Err(EthernetError::LengthField(0x2E)));
    }

    #[test]
    fn emit_rejects_out_of_range_and_short_buffers() {
        let mut r = stacked_repr();
        let mut out = [0u8; 25];
        assert!(matches!(
            r.emit(&mut out),
            Err(EmitError::BufferTooShort { need: 26, .. })
        ));
        r.tags[0] = Some(VlanTag {
            tpid: ethertype::VLAN,
            tci: VlanTci {
                pcp: 8,
                dei: false,
                vid: 1,
            },
        });
        let mut out = [0u8; 26];
        assert!(matches!(
            r.emit(&mut out),
            Err(EmitError::FieldRange { field: "pcp", .. })
        ));
    }

    fn arb_tci() -> impl Strategy<Value = VlanTci> {
        (0u8..8, any::<bool>(), 0u16..4096).prop_map(|(pcp, dei, vid)| VlanTci { pcp, dei, vid })
    }

    fn arb_l2() -> impl Strategy<Value = L2Repr> {
        (
            any::<[u8; 6]>(),
            any::<[u8; 6]>(),
            0usize..=2,
            arb_tci(),
            arb_tci(),
            any::<bool>(),
            any::<Option<u16>>(),
            ETHERTYPE_MIN..=u16::MAX,
        )
            .prop_filter("payload EtherType must not be a tag", |t| {
                !is_vlan_tpid(EtherType(t.7)) && EtherType(t.7) != cntag::ETHERTYPE
            })
            .prop_map(|(d, s, n, t0, t1, s_tag, rpid, et)| {
                let mac = |m: [u8; 6]| MacAddr(m[0], m[1], m[2], m[3], m[4], m[5]);
                let mut r = L2Repr::new(mac(d), mac(s), EtherType(et));
                let tpid0 = if s_tag && n == 2 {
                    ethertype::QINQ
                } else {
                    ethertype::VLAN
                };
                if n >= 1 {
                    r.tags[0] = Some(VlanTag {
                        tpid: tpid0,
                        tci: t0,
                    });
                }
                if n == 2 {
                    r.tags[1] = Some(VlanTag {
                        tpid: ethertype::VLAN,
                        tci: t1,
                    });
                }
                r.rpid = rpid;
                r
            })
    }

    proptest! {
        #[test]
        fn l2_round_trip(r in arb_l2(), tail in proptest::collection::vec(any::<u8>(), 0..8)) {
            let mut buf = vec![0u8; r.buffer_len()];
            prop_assert_eq!(r.emit(&mut buf), Ok(r.buffer_len()));
            buf.extend_from_slice(&tail);
            prop_assert_eq!(L2Repr::parse(&buf), Ok((r, r.buffer_len())));
            let w = walk(&buf).unwrap();
            prop_assert_eq!(w.ethertype, r.ethertype);
            prop_assert_eq!(w.outer, r.tags[0].map(|t| t.tci));
            prop_assert_eq!(w.rpid, r.rpid);
            prop_assert_eq!(w.payload_offset, r.buffer_len());
        }

        #[test]
        fn no_bytes_panic(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            let w = walk(&bytes);
            let p = L2Repr::parse(&bytes);
            // The fast walk and the full parse agree on every input.
            match (w, p) {
                (Ok(w), Ok((r, off))) => {
                    prop_assert_eq!(w.payload_offset, off);
                    prop_assert_eq!(w.ethertype, r.ethertype);
                }
                (Err(a), Err(b)) => prop_assert_eq!(
                    std::mem::discriminant(&a), std::mem::discriminant(&b)),
                (w, p) => prop_assert!(false, "walk {:?} vs parse {:?}", w, p),
            }
            let _ = EthernetRepr::parse(&bytes);
            let _ = VlanRepr::parse(&bytes);
        }

        #[test]
        fn tagged_walks(
            bytes in proptest::collection::vec(any::<u8>(), 0..40),
            tpid in prop_oneof![Just(0x8100u16), Just(0x88A8), Just(0x22E9)],
        ) {
            // Random frames rarely hit tag EtherTypes; force one.
            let mut bytes = bytes;
            if bytes.len() >= 14 {
                bytes[12..14].copy_from_slice(&tpid.to_be_bytes());
            }
            let _ = walk(&bytes);
            let _ = L2Repr::parse(&bytes);
        }
    }
}
