//! What the sender appliance reads of a frame: which flow it belongs to (inside -> outside), or
//! which feedback it is (outside -> inside). One walk of the headers per frame; the offsets it
//! learns (where a CN-TAG goes, where the IP header is) travel with the result so the rewrite
//! does not walk again.
//!
//! Flow classification, in order:
//! 1. a CN-TAG already on the frame: the flow is (source MAC, RPID), 802.1Qau's reaction point
//!    identity;
//! 2. RoCEv2 (IPv4, UDP 4791): (source IP, destination IP, BTH destination QP);
//! 3. IPv4 / IPv6 with any other protocol: the 5-tuple (ports for TCP, UDP and SCTP, zero for
//!    other protocols and for every fragment, so a fragmented datagram stays one flow).
//!
//! Not flow data, passed straight through unpaced: ARP, LLDP, PFC / MAC control, CNMs, IPv6
//! Neighbor Discovery and router messages (ICMPv6 133..=137), other EtherTypes, and frames that
//! do not parse (counted by the caller). An IPv4 header checksum is not verified: a frame with
//! a bad one is paced as its fields say and its receiver discards it
//! ([`crate::ipv4::Ipv4Flow`] gives the sources).
use std::net::{Ipv4Addr, Ipv6Addr};

use pnet_packet::ethernet::EtherType;

use crate::ethernet::{ethertype, walk};
use crate::ipv4::{self, Ecn, Ipv4Flow, Ipv4Repr};
use crate::ipv6::{self, Ipv6Repr};
use crate::roce::{self, BthRepr};
use crate::{cnm, udp, MacAddr};

/// IPv6's EtherType (RFC 8200 / IEEE registry).
pub const ETHERTYPE_IPV6: EtherType = EtherType(0x86DD);
/// ARP (RFC 826).
pub const ETHERTYPE_ARP: EtherType = EtherType(0x0806);
/// LLDP (IEEE 802.1AB).
pub const ETHERTYPE_LLDP: EtherType = EtherType(0x88CC);

const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = ipv4::PROTO_UDP.0;
const PROTO_SCTP: u8 = 132;
/// A TCP header without options (RFC 9293 3.1).
const TCP_HEADER_LEN: usize = 20;

/// An IP 5-tuple; IPv4 addresses are stored IPv4-mapped (RFC 4291 2.5.5.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FiveTuple {
    pub src: [u8; 16],
    pub dst: [u8; 16],
    pub protocol: u8,
    pub src_port: u16,
    pub dst_port: u16,
}

impl FiveTuple {
    pub fn v4(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, src_port: u16, dst_port: u16) -> Self {
        FiveTuple {
            src: src.to_ipv6_mapped().octets(),
            dst: dst.to_ipv6_mapped().octets(),
            protocol,
            src_port,
            dst_port,
        }
    }

    /// The DCQCN queue pair both appliance roles give this flow (the one rule, documented
    /// here): FNV-1a (32 bit) over source address, destination address (16 octets each,
    /// IPv4-mapped), protocol, source port and destination port (big-endian), folded to the
    /// BTH's 24-bit QP field by XOR of the high octet into the low bits; 0 becomes 1 (QP 0 is
    /// the special QP0 of InfiniBand). The sender role keys the flow's reaction point by it,
    /// and the notification role (in front of the receiver) writes it as a CNP's DestQP for a
    /// CE-marked frame of that 5-tuple: the same data frame gives the same QP on both sides.
    pub fn qp(&self) -> u32 {
        let mut h: u32 = 0x811c_9dc5;
        let mut eat = |b: u8| {
            h ^= u32::from(b);
            h = h.wrapping_mul(0x0100_0193);
        };
        self.src.iter().chain(&self.dst).for_each(|&b| eat(b));
        eat(self.protocol);
        self.src_port.to_be_bytes().into_iter().for_each(&mut eat);
        self.dst_port.to_be_bytes().into_iter().for_each(&mut eat);
        let qp = (h & roce::MAX_QP) ^ (h >> 24);
        qp.max(1)
    }

    /// The IPv4 addresses, when both are IPv4-mapped.
    pub fn v4_addrs(&self) -> Option<(Ipv4Addr, Ipv4Addr)> {
        let s = Ipv6Addr::from(self.src).to_ipv4_mapped()?;
        let d = Ipv6Addr::from(self.dst).to_ipv4_mapped()?;
        Some((s, d))
    }
}

/// Which flow a data frame belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FlowKey {
    /// The frame carries a CN-TAG: 802.1Qau names the reaction point by (source MAC, RPID).
    CnTag { src: MacAddr, rpid: u16 },
    /// RoCEv2: the destination QP between two addresses.
    RoceQp {
        src: Ipv4Addr,
        dst: Ipv4Addr,
        qp: u32,
    },
    /// Any other IP traffic.
    Ip(FiveTuple),
}

/// `Udp 10.0.0.1:5000 > 10.0.0.2:9`, `roce 10.0.0.1 > 10.0.0.2 qp 17`, `cn-tag
/// 02:00:00:00:00:01 rpid 3`: how the control socket and the report name a flow.
impl std::fmt::Display for FlowKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FlowKey::CnTag { src, rpid } => write!(f, "cn-tag {src} rpid {rpid}"),
            FlowKey::RoceQp { src, dst, qp } => write!(f, "roce {src} > {dst} qp {qp}"),
            FlowKey::Ip(t) => {
                // The protocol by its name where pnet knows it ("Tcp", "Udp"), else its number.
                let proto = pnet_packet::ip::IpNextHeaderProtocol(t.protocol);
                match t.v4_addrs() {
                    Some((s, d)) => {
                        write!(f, "{proto} {s}:{} > {d}:{}", t.src_port, t.dst_port)
                    }
                    None => write!(
                        f,
                        "{proto} [{}]:{} > [{}]:{}",
                        Ipv6Addr::from(t.src),
                        t.src_port,
                        Ipv6Addr::from(t.dst),
                        t.dst_port
                    ),
                }
            }
        }
    }
}

impl FlowKey {
    /// The (queue pair, flow source, flow destination) a CNP for this flow names (the CNP comes
    /// from the destination, addressed to the source); `None` for flows no CNP can name (CN-TAG
    /// flows, IPv6).
    pub fn cnp_key(&self) -> Option<CnpKey> {
        match *self {
            FlowKey::CnTag { .. } => None,
            FlowKey::RoceQp { src, dst, qp } => Some(CnpKey { qp, src, dst }),
            FlowKey::Ip(t) => {
                let (src, dst) = t.v4_addrs()?;
                Some(CnpKey {
                    qp: t.qp(),
                    src,
                    dst,
                })
            }
        }
    }
}

/// How a CNP names a flow: its DestQP, and the flow's source (the CNP's IP destination) and
/// destination (the CNP's IP source).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CnpKey {
    pub qp: u32,
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
}

/// Where the IP header of a data frame is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum L3 {
    V4 { at: u16, ecn: Ecn },
    V6 { at: u16, ecn: Ecn },
}

/// A data frame, classified.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowFrame {
    pub key: FlowKey,
    pub src_mac: MacAddr,
    pub dst_mac: MacAddr,
    /// Offset of the EtherType a CN-TAG would be inserted before (after the VLAN tags).
    pub tag_at: u16,
    /// The frame already carries a CN-TAG.
    pub tagged: bool,
    /// Its 802.1p priority (the outer VLAN tag's PCP, 0 untagged): the priority PFC pauses.
    pub priority: u8,
    pub l3: L3,
}

/// Why a frame is not flow data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PassReason {
    Arp,
    Lldp,
    /// PFC and other MAC control.
    MacControl,
    Cnm,
    /// IPv6 Neighbor Discovery / router messages.
    Nd,
    /// Another EtherType (or another IP protocol with no flow meaning, none today).
    Other,
    /// The headers do not parse.
    Malformed,
}

/// What an inside frame is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    Flow(FlowFrame),
    Pass(PassReason),
}

fn be16(b: &[u8], at: usize) -> u16 {
    match b.get(at..at + 2) {
        Some(&[x, y]) => u16::from_be_bytes([x, y]),
        _ => 0,
    }
}

fn ports(l4: &[u8], protocol: u8, fragment: bool) -> (u16, u16) {
    if fragment || !matches!(protocol, PROTO_TCP | PROTO_UDP | PROTO_SCTP) {
        return (0, 0);
    }
    (be16(l4, 0), be16(l4, 2))
}

/// Classifies a frame entering the inside port.
pub fn classify(frame: &[u8]) -> Class {
    let Ok(w) = walk(frame) else {
        return Class::Pass(PassReason::Malformed);
    };
    let mac = |at: usize| {
        let b = &frame[at..at + 6];
        MacAddr(b[0], b[1], b[2], b[3], b[4], b[5])
    };
    // walk() read at least the 14-octet header.
    let (dst_mac, src_mac) = (mac(0), mac(6));
    let tag_at = (12 + 4 * usize::from(w.vlan_tags)) as u16;
    let payload = &frame[w.payload_offset..];
    let at = w.payload_offset as u16;
    let (key, l3) = match w.ethertype {
        et if et == ethertype::IPV4 => {
            // The header checksum is left to the receiver (`Ipv4Flow`'s docs say why).
            let Ok((ip, hl)) = Ipv4Flow::read(payload) else {
                return Class::Pass(PassReason::Malformed);
            };
            let (protocol, fragment) = (ip.protocol, ip.fragment);
            let l4 = &payload[hl..];
            let key = if !fragment
                && protocol == PROTO_UDP
                && be16(l4, 2) == roce::UDP_PORT
                && l4.len() >= udp::HEADER_LEN + roce::BTH_LEN
            {
                match BthRepr::parse(&l4[udp::HEADER_LEN..]) {
                    Ok(bth) => FlowKey::RoceQp {
                        src: ip.src,
                        dst: ip.dst,
                        qp: bth.dest_qp,
                    },
                    Err(_) => return Class::Pass(PassReason::Malformed),
                }
            } else {
                let (sp, dp) = ports(l4, protocol, fragment);
                FlowKey::Ip(FiveTuple::v4(ip.src, ip.dst, protocol, sp, dp))
            };
            (key, L3::V4 { at, ecn: ip.ecn })
        }
        et if et == ETHERTYPE_IPV6 => {
            let Ok(ip) = Ipv6Repr::parse(payload) else {
                return Class::Pass(PassReason::Malformed);
            };
            let l4 = &payload[ipv6::HEADER_LEN..];
            if ip.next_header == ipv6::NEXT_ICMPV6 && matches!(l4.first(), Some(133..=137)) {
                return Class::Pass(PassReason::Nd);
            }
            let (sp, dp) = ports(l4, ip.next_header, false);
            let t = FiveTuple {
                src: ip.src.octets(),
                dst: ip.dst.octets(),
                protocol: ip.next_header,
                src_port: sp,
                dst_port: dp,
            };
            (FlowKey::Ip(t), L3::V6 { at, ecn: ip.ecn })
        }
        et if et == ETHERTYPE_ARP => return Class::Pass(PassReason::Arp),
        et if et == ETHERTYPE_LLDP => return Class::Pass(PassReason::Lldp),
        et if et == ethertype::MAC_CONTROL => return Class::Pass(PassReason::MacControl),
        et if et == cnm::ETHERTYPE => return Class::Pass(PassReason::Cnm),
        _ => return Class::Pass(PassReason::Other),
    };
    let key = match w.rpid {
        Some(rpid) => FlowKey::CnTag { src: src_mac, rpid },
        None => key,
    };
    Class::Flow(FlowFrame {
        key,
        src_mac,
        dst_mac,
        tag_at,
        tagged: w.rpid.is_some(),
        priority: w.priority(),
        l3,
    })
}

/// Feedback arriving on the outside port, as read (not yet validated).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Feedback<'a> {
    /// An 802.1Qau CNM.
    Cnm {
        /// Its destination: the source MAC of the sampled frame.
        da: MacAddr,
        /// Its CN-TAG's RPID (the CP copies the sampled frame's CN-TAG).
        rpid: Option<u16>,
        qntz_fb: u8,
        /// Encapsulated MAC DA: the sampled frame's destination.
        encap_da: MacAddr,
        /// Encapsulated MSDU: the first octets of the sampled frame after its L2 header.
        msdu: &'a [u8],
    },
    /// A RoCEv2 CNP.
    Cnp { key: CnpKey },
}

/// Reads a frame arriving on the outside port as feedback; `None` for anything else (which
/// passes inside unchanged).
pub fn feedback(frame: &[u8]) -> Option<Feedback<'_>> {
    let w = walk(frame).ok()?;
    let payload = &frame[w.payload_offset..];
    if w.ethertype == cnm::ETHERTYPE {
        let c = cnm::CnmRepr::parse(payload).ok()?;
        let b = &frame[..6];
        return Some(Feedback::Cnm {
            da: MacAddr(b[0], b[1], b[2], b[3], b[4], b[5]),
            rpid: w.rpid,
            qntz_fb: c.qntz_fb,
            encap_da: c.encap_da,
            msdu: c.encap_msdu,
        });
    }
    if w.ethertype != ethertype::IPV4 {
        return None;
    }
    let (ip, hl) = Ipv4Repr::parse(payload).ok()?;
    let l4 = payload.get(hl..hl + usize::from(ip.payload_len))?;
    if ip.protocol != ipv4::PROTO_UDP || be16(l4, 2) != roce::UDP_PORT {
        return None;
    }
    let bth = BthRepr::parse(l4.get(udp::HEADER_LEN..)?).ok()?;
    if bth.opcode != roce::opcode::CNP {
        return None;
    }
    Some(Feedback::Cnp {
        key: CnpKey {
            qp: bth.dest_qp,
            src: ip.dst,
            dst: ip.src,
        },
    })
}

/// The flow a CNM's encapsulated MSDU (the sampled frame's first octets after its L2 header,
/// which a real CP copies) belongs to, classified as [`classify`] does: RoCEv2's QP or the
/// 5-tuple. `None` when the MSDU is not IPv4 or too short to tell (the MSDU is at most 64
/// octets, so its IPv4 checksum and length are not checked: the packet is cut).
///
/// Where the MSDU starts is not pinned down (protocols.md, U): `wire::cnm::encap_msdu` starts it
/// after the L2 headers, `quench switch` right after DA and SA (tags and EtherType included).
/// Both are read: an IPv4 header starts with version 4, while what follows DA and SA starts with
/// an EtherType or TPID (0x08.., 0x81.., 0x88.., 0x22..), never with 0x4_, and is walked here.
pub fn encapsulated_key(msdu: &[u8]) -> Option<FlowKey> {
    encapsulated_ip(msdu.get(encapsulated_ip_offset(msdu)?..)?)
}

/// Where the IPv4 header of a CNM's encapsulated MSDU starts (see [`encapsulated_key`] for the
/// two places an MSDU may start); `None` when the MSDU is not IPv4.
fn encapsulated_ip_offset(msdu: &[u8]) -> Option<usize> {
    if msdu.first().is_some_and(|b| b >> 4 == 4) {
        return Some(0);
    }
    // After DA and SA: walk the tags as a frame with zeroed addresses.
    let mut frame = [0u8; 12 + cnm::MAX_MSDU_LEN];
    let n = msdu.len().min(cnm::MAX_MSDU_LEN);
    frame[12..12 + n].copy_from_slice(&msdu[..n]);
    let w = walk(&frame[..12 + n]).ok()?;
    (w.ethertype == ethertype::IPV4).then(|| w.payload_offset - 12)
}

/// The UDP payload of a CNM's encapsulated MSDU, as far as the MSDU holds it (at most 64 octets
/// of the sampled frame, so usually cut): what a sender finds its own test header in. `None`
/// when the encapsulated frame is not an unfragmented IPv4 UDP datagram.
pub fn encapsulated_udp_payload(msdu: &[u8]) -> Option<&[u8]> {
    let ip = msdu.get(encapsulated_ip_offset(msdu)?..)?;
    if ip.len() < ipv4::HEADER_LEN || ip[0] >> 4 != 4 || ip[9] != PROTO_UDP {
        return None;
    }
    if be16(ip, 6) & 0x3fff != 0 {
        return None; // a fragment: no UDP header, or not at its start
    }
    let hl = usize::from(ip[0] & 0x0f) * 4;
    ip.get(hl + udp::HEADER_LEN..)
}

/// What a CNM's encapsulated MSDU says of the IPv4 frame it was copied from: the lengths a
/// congestion point's copy of that frame is bound by (see `host::validate`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EncapsulatedIpv4 {
    /// Where the IPv4 header starts in the MSDU (0, or after the tags and EtherType).
    pub offset: usize,
    /// The IPv4 header's length (IHL), octets.
    pub header_len: usize,
    /// The datagram's length as its header gives it (Total Length), octets.
    pub total_len: usize,
    /// The transport header that names the flow, octets: UDP 8 (RoCEv2: UDP and the 12-octet
    /// BTH), TCP 20 (without options), 0 for other protocols and for fragments, whose transport
    /// header is not at their start.
    pub transport_len: usize,
}

/// Reads [`EncapsulatedIpv4`] from a CNM's encapsulated MSDU; `None` when the MSDU holds no
/// IPv4 header (not IPv4, or cut inside the fixed 20 octets) or the header's IHL is below 5.
pub fn encapsulated_ipv4(msdu: &[u8]) -> Option<EncapsulatedIpv4> {
    let offset = encapsulated_ip_offset(msdu)?;
    let b = msdu.get(offset..)?;
    if b.len() < ipv4::HEADER_LEN || b[0] >> 4 != 4 {
        return None;
    }
    let header_len = usize::from(b[0] & 0x0f) * 4;
    if header_len < ipv4::HEADER_LEN {
        return None;
    }
    let fragment = be16(b, 6) & 0x3fff != 0;
    let transport_len = match b[9] {
        _ if fragment => 0,
        PROTO_UDP
            if b.get(header_len + 2..header_len + 4) == Some(&roce::UDP_PORT.to_be_bytes()) =>
        {
            udp::HEADER_LEN + roce::BTH_LEN
        }
        PROTO_UDP => udp::HEADER_LEN,
        PROTO_TCP => TCP_HEADER_LEN,
        _ => 0,
    };
    Some(EncapsulatedIpv4 {
        offset,
        header_len,
        total_len: usize::from(be16(b, 2)),
        transport_len,
    })
}

fn encapsulated_ip(msdu: &[u8]) -> Option<FlowKey> {
    let b = msdu;
    if b.len() < ipv4::HEADER_LEN || b[0] >> 4 != 4 {
        return None;
    }
    let hl = usize::from(b[0] & 0x0f) * 4;
    let protocol = b[9];
    let fragment = be16(b, 6) & 0x3fff != 0;
    let a = |at: usize| Ipv4Addr::new(b[at], b[at + 1], b[at + 2], b[at + 3]);
    let (src, dst) = (a(12), a(16));
    let l4 = b.get(hl..)?;
    if !fragment && protocol == PROTO_UDP && be16(l4, 2) == roce::UDP_PORT {
        let qp = BthRepr::parse(l4.get(udp::HEADER_LEN..)?).ok()?.dest_qp;
        return Some(FlowKey::RoceQp { src, dst, qp });
    }
    let (sp, dp) = if fragment || !matches!(protocol, PROTO_TCP | PROTO_UDP | PROTO_SCTP) {
        (0, 0)
    } else {
        if l4.len() < 4 {
            return None;
        }
        (be16(l4, 0), be16(l4, 2))
    };
    Some(FlowKey::Ip(FiveTuple::v4(src, dst, protocol, sp, dp)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qp_rule_is_fixed_nonzero_and_24_bit() {
        let t = FiveTuple::v4(
            Ipv4Addr::new(10, 71, 0, 1),
            Ipv4Addr::new(10, 71, 0, 101),
            6,
            40000,
            5201,
        );
        // Pinned: both roles (possibly different builds) must agree on it.
        assert_eq!(t.qp(), t.qp());
        assert!(t.qp() >= 1 && t.qp() <= roce::MAX_QP);
        let u = FiveTuple {
            src_port: 40001,
            ..t
        };
        assert_ne!(t.qp(), u.qp());
        let mut seen = std::collections::HashSet::new();
        for p in 0..10_000u16 {
            seen.insert(FiveTuple { src_port: p, ..t }.qp());
        }
        // 10k tuples in 2^24 QPs: a handful of collisions at most.
        assert!(seen.len() > 9_990, "{}", seen.len());
    }

    #[test]
    fn ipv6_flows_and_neighbor_discovery() {
        let mut f = vec![0u8; 14 + 40 + 8];
        f[12..14].copy_from_slice(&[0x86, 0xdd]);
        f[14] = 0x60;
        f[14 + 6] = 17;
        f[14 + 8] = 0xfe;
        f[14 + 24] = 0xfe;
        f[54..58].copy_from_slice(&[0x13, 0x88, 0x14, 0x51]);
        let Class::Flow(ff) = classify(&f) else {
            panic!()
        };
        let FlowKey::Ip(t) = ff.key else { panic!() };
        assert_eq!((t.protocol, t.src_port, t.dst_port), (17, 5000, 5201));
        assert_eq!(ff.key.cnp_key(), None);
        f[14 + 6] = 58;
        f[54] = 135; // Neighbor Solicitation
        assert_eq!(classify(&f), Class::Pass(PassReason::Nd));
    }

    #[test]
    fn encapsulated_msdu_is_read_from_either_start() {
        // A VLAN-tagged, CN-TAGged IPv4/UDP frame.
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&[0x81, 0x00, 0x60, 0x01, 0x22, 0xe9, 0x00, 0x07, 0x08, 0x00]);
        let ip_at = f.len();
        f.extend_from_slice(&[0x45, 0, 0, 48, 0, 0, 0x40, 0, 64, 17, 0, 0]);
        f.extend_from_slice(&[
            10, 0, 0, 1, 10, 0, 0, 2, 0x13, 0x88, 0x14, 0x51, 0, 28, 0, 0,
        ]);
        f.resize(ip_at + 48, 0);
        let want = FlowKey::Ip(FiveTuple::v4(
            Ipv4Addr::new(10, 0, 0, 1),
            Ipv4Addr::new(10, 0, 0, 2),
            17,
            5000,
            5201,
        ));
        // After the L2 headers (wire::cnm::encap_msdu) and after DA and SA (quench switch).
        assert_eq!(encapsulated_key(&f[ip_at..]), Some(want));
        assert_eq!(encapsulated_key(&f[12..]), Some(want));
        assert_eq!(encapsulated_key(&[0x88, 0xb5, 1, 2]), None);
    }
}
