//! Whole frames: builders for every frame kind quench sends, and one decoder for all of them.
//!
//! Builders write into a caller's buffer and return the frame length (no FCS, padded with zeros
//! to 60 octets); nothing allocates. [`decode`] reads any frame into a [`Frame`] of Reprs that
//! borrow the input, or returns a typed [`FrameError`].
//!
//! | kind | layout |
//! |---|---|
//! | test data | Ethernet [/ VLAN] [/ CN-TAG] / IPv4 / UDP [`testhdr::UDP_PORT`] / test header / filler |
//! | reflected test data | the same with addresses and UDP ports swapped (from [`testhdr::UDP_PORT`]) |
//! | CNM | Ethernet [/ VLAN] [/ CN-TAG] / 0x22E7 / CNM PDU (see [`emit_cnm`]) |
//! | PFC | [`pfc::emit_frame`] |
//! | RoCEv2 data | Ethernet [/ VLAN] / IPv4 / UDP 4791 / BTH (RC SEND Only) / test header / filler / ICRC |
//! | CNP | Ethernet [/ VLAN] / IPv4 (DSCP 48) / UDP 4791 / BTH 0x81 / 16 zero octets / ICRC |

use std::net::Ipv4Addr;

use pnet_base::MacAddr;
use pnet_packet::ethernet::EtherType;

use super::ack::AckRepr;
use super::cnm::{self, CnmError, CnmRepr};
use super::ethernet::{ethertype, EthernetError, L2Repr, VlanTag, VlanTci, MIN_FRAME_LEN};
use super::int::{self, IntError, IntRepr};
use super::ipv4::{self, Ecn, Ipv4Error, Ipv4Repr};
use super::pfc::{PfcError, PfcRepr};
use super::roce::{self, BthRepr, RoceError};
use super::testhdr::{self, TestHdrError, TestHdrRepr};
use super::udp::{self, UdpError, UdpRepr};
use super::{check_out, check_range, EmitError, Truncated};

/// The IPv4 and UDP fields of a frame quench builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4UdpHeaders {
    /// L2 headers; the EtherType is set to IPv4 when emitted.
    pub l2: L2Repr,
    /// IPv4 source.
    pub src: Ipv4Addr,
    /// IPv4 destination.
    pub dst: Ipv4Addr,
    /// DSCP, 6 bits.
    pub dscp: u8,
    /// ECN codepoint (RFC 3168 or TCD meaning).
    pub ecn: Ecn,
    /// UDP source port.
    pub src_port: u16,
    /// UDP destination port.
    pub dst_port: u16,
}

/// Writes L2 / IPv4 / UDP around a UDP payload of `payload_len` octets that `fill` writes,
/// pads to 60 octets; returns (frame length, IPv4 offset, IPv4 end).
fn emit_ipv4_udp(
    h: &Ipv4UdpHeaders,
    checksummed: bool,
    payload_len: usize,
    buf: &mut [u8],
    fill: impl FnOnce(&mut [u8]) -> Result<(), EmitError>,
) -> Result<(usize, usize, usize), EmitError> {
    let mut l2 = h.l2;
    l2.ethertype = ethertype::IPV4;
    let ip_at = l2.buffer_len();
    let udp_at = ip_at + ipv4::HEADER_LEN;
    let pay_at = udp_at + udp::HEADER_LEN;
    let max_payload = usize::from(u16::MAX) - ipv4::HEADER_LEN - udp::HEADER_LEN;
    check_range(
        "UDP frame",
        "payload_len",
        payload_len as u64,
        max_payload as u64,
    )?;
    let end = pay_at + payload_len;
    let frame_len = end.max(MIN_FRAME_LEN);
    check_out("UDP frame", buf, frame_len)?;
    l2.emit(buf)?;
    fill(&mut buf[pay_at..end])?;
    let udp_payload = payload_len as u16;
    UdpRepr {
        src_port: h.src_port,
        dst_port: h.dst_port,
        payload_len: udp_payload,
        checksummed,
    }
    .emit(&mut buf[udp_at..end], h.src, h.dst)?;
    Ipv4Repr::udp(
        h.src,
        h.dst,
        h.dscp,
        h.ecn,
        udp_payload + udp::HEADER_LEN as u16,
    )
    .emit(&mut buf[ip_at..])?;
    buf[end..frame_len].fill(0);
    Ok((frame_len, ip_at, end))
}

/// Writes a test-traffic frame: `h` / test header / zero filler, `frame_len` octets in all
/// (raised to the shortest frame that holds the headers). UDP carries a real checksum.
pub fn emit_test_frame(
    h: &Ipv4UdpHeaders,
    hdr: &TestHdrRepr,
    frame_len: usize,
    buf: &mut [u8],
) -> Result<usize, EmitError> {
    emit_test_frame_int(h, hdr, None, frame_len, buf)
}

/// [`emit_test_frame`] with an INT header (`int::OFFSET`) after the test header when `int` is
/// given: the space the switches on the path stamp.
pub fn emit_test_frame_int(
    h: &Ipv4UdpHeaders,
    hdr: &TestHdrRepr,
    int: Option<&IntRepr>,
    frame_len: usize,
    buf: &mut [u8],
) -> Result<usize, EmitError> {
    let overhead = h.l2.buffer_len() + ipv4::HEADER_LEN + udp::HEADER_LEN;
    let min = testhdr::LEN + int.map_or(0, IntRepr::buffer_len);
    let payload_len = frame_len.saturating_sub(overhead).max(min);
    let (len, _, _) = emit_ipv4_udp(h, true, payload_len, buf, |p| {
        let mut n = hdr.emit(p)?;
        if let Some(i) = int {
            n += i.emit(&mut p[n..])?;
        }
        p[n..].fill(0);
        Ok(())
    })?;
    Ok(len)
}

/// Where the INT header of a test frame starts: `frame`'s IPv4 header at `l3` carries an
/// unfragmented UDP datagram to [`testhdr::UDP_PORT`] whose payload holds a test header and
/// then the INT magic (`int::MAGIC`). `None` for any other frame.
pub fn int_offset(frame: &[u8], l3: usize) -> Option<usize> {
    int_at(frame, l3).map(|(at, _, _)| at)
}

/// [`int_offset`], where the UDP datagram ends, and where its checksum is.
fn int_at(frame: &[u8], l3: usize) -> Option<(usize, usize, usize)> {
    let ip = frame.get(l3..)?;
    let (h, hl) = ipv4::Ipv4Flow::read(ip).ok()?;
    if h.protocol != ipv4::PROTO_UDP.0 || h.fragment {
        return None;
    }
    // read checked that the total length is within the frame.
    let ip_end = l3 + usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    let udp_at = l3 + hl;
    let u = frame.get(udp_at..udp_at + udp::HEADER_LEN)?;
    if u16::from_be_bytes([u[2], u[3]]) != testhdr::UDP_PORT {
        return None;
    }
    let end = (udp_at + usize::from(u16::from_be_bytes([u[4], u[5]]))).min(ip_end);
    let at = udp_at + udp::HEADER_LEN + int::OFFSET;
    let magic = frame.get(at..end)?.get(..4)?;
    (magic == int::MAGIC.to_be_bytes()).then_some((at, end, udp_at + 6))
}

/// The 16-bit one's-complement sum of `b` (an even number of octets), folded.
fn ones_sum(b: &[u8]) -> u16 {
    let mut s: u32 = b
        .chunks_exact(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    while s > 0xFFFF {
        s = (s & 0xFFFF) + (s >> 16);
    }
    s as u16
}

/// Stamps the INT header of a test frame in place with `stamp` (`int::push_hop` or
/// `int::fold_pint`, given the header's octets) and keeps the UDP checksum valid (RFC 1624,
/// eqn. 3, over the header's octets, which start at an even offset of the datagram; a zero
/// checksum, none sent, stays zero). `Ok(false)`: the frame has no INT header
/// ([`int_offset`]).
pub fn stamp_int(
    frame: &mut [u8],
    l3: usize,
    stamp: impl FnOnce(&mut [u8]) -> Result<usize, IntError>,
) -> Result<bool, IntError> {
    let Some((at, end, sum_at)) = int_at(frame, l3) else {
        return Ok(false);
    };
    let mut old = [0u8; int::HOPS_LEN];
    let have = (end - at).min(int::HOPS_LEN);
    old[..have].copy_from_slice(&frame[at..at + have]);
    // Within the datagram: the octets the checksum covers.
    let len = stamp(&mut frame[at..end])?;
    let before = ones_sum(&old[..len]);
    let after = ones_sum(&frame[at..at + len]);
    let hc = u16::from_be_bytes([frame[sum_at], frame[sum_at + 1]]);
    if hc != 0 {
        let mut s = u32::from(!hc) + u32::from(!before) + u32::from(after);
        while s > 0xFFFF {
            s = (s & 0xFFFF) + (s >> 16);
        }
        let c = match !(s as u16) {
            0 => 0xFFFF,
            c => c,
        };
        frame[sum_at..sum_at + 2].copy_from_slice(&c.to_be_bytes());
    }
    Ok(true)
}

/// What follows a RoCEv2 BTH in frames quench builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RocePayload {
    /// A CNP's "16 zero octets".
    Cnp,
    /// A test header and zero filler, `len` octets in all (at least the header; rounded up to
    /// a multiple of 4, which the BTH's pad count records).
    Test {
        /// The test header.
        hdr: TestHdrRepr,
        /// Octets of payload before padding.
        len: usize,
    },
}

/// Writes a RoCEv2 frame: `h` (the UDP destination port forced to 4791, UDP checksum 0) / BTH
/// / payload / ICRC. For a CNP, pass [`BthRepr::cnp`] and [`RocePayload::Cnp`].
pub fn emit_roce_frame(
    h: &Ipv4UdpHeaders,
    bth: &BthRepr,
    payload: &RocePayload,
    buf: &mut [u8],
) -> Result<usize, EmitError> {
    let (body, pad) = match payload {
        RocePayload::Cnp => (roce::CNP_RESERVED_LEN, 0),
        RocePayload::Test { len, .. } => {
            let len = (*len).max(testhdr::LEN);
            (len, (4 - len % 4) % 4)
        }
    };
    let mut bth = *bth;
    if let RocePayload::Test { .. } = payload {
        bth.pad_count = pad as u8;
    }
    let udp_payload = roce::BTH_LEN + body + pad + roce::ICRC_LEN;
    let mut h = *h;
    h.dst_port = roce::UDP_PORT;
    let (len, ip_at, ip_end) = emit_ipv4_udp(&h, false, udp_payload, buf, |p| {
        let n = bth.emit(p)?;
        p[n..].fill(0);
        if let RocePayload::Test { hdr, .. } = payload {
            hdr.emit(&mut p[n..])?;
        }
        Ok(())
    })?;
    roce::write_icrc(&mut buf[ip_at..ip_end], ipv4::HEADER_LEN)?;
    Ok(len)
}

/// 802.1p priority of CNPs (protocols.md: NVIDIA `cnp_802p_prio` 6).
pub const CNP_PRIORITY: u8 = 6;

/// Writes the CNP a notification point sends back for a CE-marked IPv4 data frame whose L2
/// header is `data_l2` and IPv4 addresses `data_src` -> `data_dst`: to the data frame's source
/// MAC and address, from `our_mac` and the data's destination address, DSCP 48 and 802.1p
/// priority 6 when the data was tagged (protocols.md, NVIDIA defaults), UDP source port
/// `cnp_src_port` (quench uses the data's UDP destination port), DestQP `qp`. Used by `quench recv` and the
/// appliance's notification-point role.
pub fn emit_cnp_reply(
    data_l2: &L2Repr,
    data_src: Ipv4Addr,
    data_dst: Ipv4Addr,
    cnp_src_port: u16,
    our_mac: MacAddr,
    qp: u32,
    buf: &mut [u8],
) -> Result<usize, EmitError> {
    let mut l2 = L2Repr::new(data_l2.src, our_mac, data_l2.ethertype);
    if let Some(tag) = data_l2.tags[0] {
        l2.tags[0] = Some(VlanTag {
            tpid: tag.tpid,
            tci: VlanTci {
                pcp: CNP_PRIORITY,
                ..tag.tci
            },
        });
    }
    let h = Ipv4UdpHeaders {
        l2,
        src: data_dst,
        dst: data_src,
        dscp: ipv4::CNP_DSCP,
        ecn: Ecn::NotEct,
        src_port: cnp_src_port,
        dst_port: roce::UDP_PORT,
    };
    emit_roce_frame(&h, &BthRepr::cnp(qp), &RocePayload::Cnp, buf)
}

/// Writes the ACK (`ack`, [`crate::ack`]) a receiver sends for a test frame whose L2 header is
/// `data_l2`, IPv4 addresses `data_src` -> `data_dst` and UDP source port `data_src_port`: to
/// the data's source MAC, address and port, from `our_mac`, the data's destination address and
/// [`testhdr::UDP_PORT`], the data's VLAN tags and DSCP kept, not ECN-capable, a real UDP
/// checksum.
#[allow(clippy::too_many_arguments)]
pub fn emit_ack_reply(
    data_l2: &L2Repr,
    data_src: Ipv4Addr,
    data_dst: Ipv4Addr,
    data_src_port: u16,
    dscp: u8,
    our_mac: MacAddr,
    ack: &AckRepr,
    buf: &mut [u8],
) -> Result<usize, EmitError> {
    let mut l2 = *data_l2;
    l2.dst = data_l2.src;
    l2.src = our_mac;
    l2.rpid = None;
    let h = Ipv4UdpHeaders {
        l2,
        src: data_dst,
        dst: data_src,
        dscp,
        ecn: Ecn::NotEct,
        src_port: testhdr::UDP_PORT,
        dst_port: data_src_port,
    };
    let (len, _, _) = emit_ipv4_udp(&h, true, ack.buffer_len(), buf, |p| {
        ack.emit(p)?;
        Ok(())
    })?;
    Ok(len)
}

/// EtherType of [`announce_frame`]: IEEE Std 802's Local Experimental EtherType 1 (802-2014
/// 9.2.2), which no protocol is assigned and every station's stack discards.
pub const ANNOUNCE_ETHERTYPE: EtherType = EtherType(0x88B5);

/// The frame a station that otherwise never transmits (a receiver) sends so that bridges learn
/// where it is: from `mac` to `mac`, EtherType [`ANNOUNCE_ETHERTYPE`], zero-padded to 60
/// octets. A bridge learns the source address of every frame it receives (802.1Q 8.7, the
/// Learning Process), then finds the destination on the port the frame came in on and, never
/// sending a frame back out of its reception port (802.1Q 8.6.1), discards it: the frame
/// teaches the first bridge the station's port and goes no further. A bridge that looks the
/// destination up before it learns the source floods the first one, and every station
/// discards its EtherType.
pub fn announce_frame(mac: MacAddr) -> [u8; MIN_FRAME_LEN] {
    let mut f = [0u8; MIN_FRAME_LEN];
    f[..6].copy_from_slice(&mac.octets());
    f[6..12].copy_from_slice(&mac.octets());
    f[12..14].copy_from_slice(&ANNOUNCE_ETHERTYPE.0.to_be_bytes());
    f
}

/// Writes a CNM frame. protocols.md: "DA = source MAC of the sampled frame (S). SA = the
/// congestion point's MAC (V). The CNM copies the sampled frame's VLAN tag and CN-TAG (S)."
/// So `l2` is the sampled frame's L2 header with DA and SA swapped for those; its EtherType is
/// set to 0x22E7 here. Padded to 60 octets.
pub fn emit_cnm(l2: &L2Repr, cnm: &CnmRepr, buf: &mut [u8]) -> Result<usize, EmitError> {
    let mut l2 = *l2;
    l2.ethertype = cnm::ETHERTYPE;
    let end = l2.buffer_len() + cnm.buffer_len();
    let frame_len = end.max(MIN_FRAME_LEN);
    check_out("CNM frame", buf, frame_len)?;
    let at = l2.emit(buf)?;
    cnm.emit(&mut buf[at..])?;
    buf[end..frame_len].fill(0);
    Ok(frame_len)
}

/// The L2 header of the CNM answering a sampled frame with header `sampled`, sent by the CP
/// whose MAC is `cp_mac` at 802.1p priority `cnm_priority` (U: default
/// [`cnm::DEFAULT_CNM_PRIORITY`]): DA = the sampled SA, SA = the CP, VLAN tags and CN-TAG
/// copied, the outer tag's PCP set to the CNM priority.
pub fn cnm_l2(sampled: &L2Repr, cp_mac: MacAddr, cnm_priority: u8) -> L2Repr {
    let mut l2 = *sampled;
    l2.dst = sampled.src;
    l2.src = cp_mac;
    if let Some(tag) = l2.tags[0].as_mut() {
        tag.tci.pcp = cnm_priority & 7;
    }
    l2.ethertype = cnm::ETHERTYPE;
    l2
}

/// What a UDP datagram carries, as far as quench reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UdpBody {
    /// RoCEv2 (UDP 4791) with a verified ICRC.
    Roce {
        /// The BTH.
        bth: BthRepr,
        /// The test header at the start of the BTH payload, if it is quench traffic.
        test: Option<TestHdrRepr>,
    },
    /// quench test traffic (to UDP [`testhdr::UDP_PORT`], or from it: reflected back).
    Test(TestHdrRepr),
    /// A receiver's ACK of test traffic (from UDP [`testhdr::UDP_PORT`], [`crate::ack`]).
    Ack(AckRepr),
    /// Some other UDP port: payload not read.
    Other,
}

/// What an IPv4 packet carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpBody {
    /// UDP.
    Udp {
        /// The UDP header.
        udp: UdpRepr,
        /// Its payload.
        body: UdpBody,
    },
    /// Any other protocol: payload not read.
    Other,
}

/// What follows the L2 headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Body<'a> {
    /// 802.1Qau CNM.
    Cnm(CnmRepr<'a>),
    /// 802.1Qbb PFC.
    Pfc(PfcRepr),
    /// IPv4.
    Ipv4 {
        /// The IPv4 header.
        ip: Ipv4Repr,
        /// Its payload.
        body: IpBody,
    },
}

/// A decoded frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Frame<'a> {
    /// Ethernet, VLAN tags, CN-TAG.
    pub l2: L2Repr,
    /// The rest.
    pub body: Body<'a>,
}

/// Why a frame could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// L2 headers.
    #[error(transparent)]
    Ethernet(#[from] EthernetError),
    /// An EtherType quench does not read.
    #[error("unknown EtherType {0:#06x}")]
    UnknownEtherType(u16),
    /// CNM PDU.
    #[error(transparent)]
    Cnm(#[from] CnmError),
    /// PFC PDU.
    #[error(transparent)]
    Pfc(#[from] PfcError),
    /// IPv4 header.
    #[error(transparent)]
    Ipv4(#[from] Ipv4Error),
    /// UDP header.
    #[error(transparent)]
    Udp(#[from] UdpError),
    /// RoCEv2 BTH or ICRC.
    #[error(transparent)]
    Roce(#[from] RoceError),
    /// quench test header on its UDP port.
    #[error(transparent)]
    TestHdr(#[from] TestHdrError),
}

impl From<Truncated> for FrameError {
    fn from(t: Truncated) -> Self {
        FrameError::Roce(RoceError::Truncated(t))
    }
}

fn decode_udp(ip_packet: &[u8], ip: &Ipv4Repr, hl: usize) -> Result<IpBody, FrameError> {
    let dgram = ip_packet.get(hl..).unwrap_or_default();
    let udp = UdpRepr::parse(dgram, ip.src, ip.dst)?;
    let payload = dgram
        .get(udp::HEADER_LEN..udp::HEADER_LEN + usize::from(udp.payload_len))
        .unwrap_or_default();
    let body = if udp.dst_port == roce::UDP_PORT {
        let bth = BthRepr::parse(payload)?;
        roce::verify_icrc(ip_packet, hl)?;
        let rest = payload.get(roce::BTH_LEN..).unwrap_or_default();
        if bth.opcode == roce::opcode::CNP {
            super::check_len("CNP", rest, roce::CNP_RESERVED_LEN + roce::ICRC_LEN)?;
        }
        UdpBody::Roce {
            bth,
            test: TestHdrRepr::parse(rest).ok(),
        }
    } else if udp.dst_port == testhdr::UDP_PORT {
        UdpBody::Test(TestHdrRepr::parse(payload)?)
    } else if udp.src_port == testhdr::UDP_PORT {
        // A test frame a reflector sent back (ports swapped), or a receiver's ACK; another
        // application's datagram from that port is not an error.
        TestHdrRepr::parse(payload).map_or_else(
            |_| AckRepr::parse(payload).map_or(UdpBody::Other, UdpBody::Ack),
            UdpBody::Test,
        )
    } else {
        UdpBody::Other
    };
    Ok(IpBody::Udp { udp, body })
}

/// Decodes a whole frame (no FCS). Allocation-free; every malformed input is a typed error.
pub fn decode(frame: &[u8]) -> Result<Frame<'_>, FrameError> {
    let (l2, at) = L2Repr::parse(frame)?;
    let rest = frame.get(at..).unwrap_or_default();
    let body = match l2.ethertype {
        et if et == cnm::ETHERTYPE => Body::Cnm(CnmRepr::parse(rest)?),
        et if et == ethertype::MAC_CONTROL => Body::Pfc(PfcRepr::parse(rest)?),
        et if et == ethertype::IPV4 => {
            let (ip, hl) = Ipv4Repr::parse(rest)?;
            let ip_packet = rest
                .get(..hl + usize::from(ip.payload_len))
                .unwrap_or_default();
            let body = if ip.protocol == ipv4::PROTO_UDP {
                decode_udp(ip_packet, &ip, hl)?
            } else {
                IpBody::Other
            };
            Body::Ipv4 { ip, body }
        }
        EtherType(et) => return Err(FrameError::UnknownEtherType(et)),
    };
    Ok(Frame { l2, body })
}

/// One line describing `frame`: the fields quench cares about, or `error: ...`.
pub fn describe(frame: &[u8], link: units::Rate) -> String {
    use std::fmt::Write as _;
    let f = match decode(frame) {
        Ok(f) => f,
        Err(e) => return format!("error: {e}"),
    };
    let mut s = format!("{} > {}", f.l2.src, f.l2.dst);
    for t in f.l2.tags.iter().flatten() {
        let _ = write!(
            s,
            " vlan(tpid={:#06x} pcp={} dei={} vid={})",
            t.tpid.0,
            t.tci.pcp,
            u8::from(t.tci.dei),
            t.tci.vid
        );
    }
    if let Some(rpid) = f.l2.rpid {
        let _ = write!(s, " cn-tag(rpid={rpid})");
    }
    match f.body {
        Body::Cnm(c) => {
            let _ = write!(
                s,
                " cnm version={} qntzfb={} cpid={:#018x} qoffset={} qdelta={} \
                 encap_prio={} ({:#06x}) encap_da={} encap_len={}",
                c.version,
                c.qntz_fb,
                c.cpid,
                c.q_offset,
                c.q_delta,
                c.encap_pcp(),
                c.encap_priority,
                c.encap_da,
                c.encap_msdu.len()
            );
        }
        Body::Pfc(p) => {
            let _ = write!(s, " pfc enable={:#06x}", p.class_enable);
            for (prio, &q) in p.quanta.iter().enumerate() {
                if p.enabled(prio) {
                    let kind = if q == crate::pfc::XON { "XON" } else { "XOFF" };
                    let us = crate::pfc::quanta_to_duration(q, link).as_nanos() as f64 / 1e3;
                    let _ = write!(s, " p{prio}={kind}({q} quanta = {us:.3}us at {link})");
                }
            }
        }
        Body::Ipv4 { ip, body } => {
            let _ = write!(
                s,
                " ipv4 {} > {} dscp={} ecn={:02b} ({} / TCD {}) ttl={}",
                ip.src,
                ip.dst,
                ip.dscp,
                ip.ecn.bits(),
                ip.ecn.rfc3168_name(),
                ip.ecn.tcd_name(),
                ip.ttl
            );
            match body {
                IpBody::Other => {
                    let _ = write!(s, " proto={}", ip.protocol.0);
                }
                IpBody::Udp { udp, body } => {
                    let _ = write!(s, " udp {} > {}", udp.src_port, udp.dst_port);
                    match body {
                        UdpBody::Roce { bth, test } => {
                            let kind = if bth.opcode == crate::roce::opcode::CNP {
                                " CNP"
                            } else {
                                ""
                            };
                            let _ = write!(
                                s,
                                " roce bth(opcode={:#04x}{kind} becn={} destqp={:#08x} psn={} \
                                 pkey={:#06x}) icrc=ok",
                                bth.opcode,
                                u8::from(bth.becn),
                                bth.dest_qp,
                                bth.psn,
                                bth.pkey
                            );
                            if let Some(t) = test {
                                write_test(&mut s, &t);
                            }
                        }
                        UdpBody::Test(t) => write_test(&mut s, &t),
                        UdpBody::Ack(a) => {
                            let _ = write!(
                                s,
                                " ack(flow={} seq={} tx_ns={} ece={} int_hops={})",
                                a.flow.0,
                                a.seq,
                                a.tx.as_nanos(),
                                u8::from(a.ece()),
                                a.int.map_or(0, |i| i.nhop)
                            );
                        }
                        UdpBody::Other => {}
                    }
                }
            }
        }
    }
    s
}

fn write_test(s: &mut String, t: &crate::testhdr::TestHdrRepr) {
    use std::fmt::Write as _;
    let _ = write!(
        s,
        " test(flow={} seq={} tx_ns={})",
        t.flow,
        t.seq,
        t.tx.as_nanos()
    );
}

/// The clock id [`test_frame`] stamps.
pub const TEST_CLOCK: u32 = 0x00c1_0c4e;

/// A 1000-octet test frame from 02:..:01:01 / 10.0.0.1 to 02:..:09:01 / 10.0.0.9, VLAN 1
/// priority 3, clock [`TEST_CLOCK`], for tests of every layer above the wire (not a frame
/// quench sends: `quench send` builds its frames from its configuration).
pub fn test_frame(flow: u32, seq: u64, tx: u64, ecn: units::Ecn, rpid: Option<u16>) -> Vec<u8> {
    test_frame_len(flow, seq, tx, ecn, rpid, 1000)
}

/// [`test_frame`] of `len` octets (at least its headers: 74 octets, 78 with a CN-TAG).
pub fn test_frame_len(
    flow: u32,
    seq: u64,
    tx: u64,
    ecn: units::Ecn,
    rpid: Option<u16>,
    len: usize,
) -> Vec<u8> {
    use crate::ethernet::{ethertype, L2Repr, VlanTci};
    use crate::testhdr::{TestHdrRepr, UDP_PORT};
    use crate::MacAddr;
    use std::net::Ipv4Addr;
    use units::Instant;
    let mut l2 = L2Repr::new(
        MacAddr::new(2, 0, 0, 0, 9, 1),
        MacAddr::new(2, 0, 0, 0, 1, 1),
        ethertype::IPV4,
    )
    .with_vlan(VlanTci {
        pcp: 3,
        dei: false,
        vid: 1,
    });
    if let Some(r) = rpid {
        l2 = l2.with_cn_tag(r);
    }
    let h = Ipv4UdpHeaders {
        l2,
        src: Ipv4Addr::new(10, 0, 0, 1),
        dst: Ipv4Addr::new(10, 0, 0, 9),
        dscp: 0,
        ecn,
        src_port: 40000,
        dst_port: UDP_PORT,
    };
    let mut buf = vec![0; 1600];
    let hdr =
        TestHdrRepr::new(units::FlowId(flow), seq, Instant::from_nanos(tx)).with_clock(TEST_CLOCK);
    let n = emit_test_frame(&h, &hdr, len, &mut buf).unwrap();
    buf.truncate(n);
    buf
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cnm::cpid;
    use crate::ethernet::VlanTci;
    use crate::pfc;
    use proptest::prelude::*;
    use units::{FlowId, Instant};

    const A: MacAddr = MacAddr(0x02, 0, 0, 0, 0, 0x01);
    const B: MacAddr = MacAddr(0x02, 0, 0, 0, 0, 0x02);
    const CP: MacAddr = MacAddr(0x02, 0, 0, 0, 0, 0xCC);

    fn headers(ecn: Ecn) -> Ipv4UdpHeaders {
        Ipv4UdpHeaders {
            l2: L2Repr::new(B, A, ethertype::IPV4)
                .with_vlan(VlanTci {
                    pcp: 3,
                    dei: false,
                    vid: 10,
                })
                .with_cn_tag(7),
            src: Ipv4Addr::new(10, 0, 0, 1),
            dst: Ipv4Addr::new(10, 0, 0, 2),
            dscp: 26,
            ecn,
            src_port: 40_000,
            dst_port: testhdr::UDP_PORT,
        }
    }

    fn hdr() -> TestHdrRepr {
        TestHdrRepr::new(FlowId(7), 3, Instant::from_nanos(123_456))
    }

    /// A test frame with an empty INT header of `mode`; its IPv4 header's offset.
    fn int_frame(mode: int::Mode, len: usize) -> (Vec<u8>, usize) {
        let h = headers(Ecn::Ect0);
        let mut buf = vec![0u8; 1600];
        let n =
            emit_test_frame_int(&h, &hdr(), Some(&IntRepr::empty(mode)), len, &mut buf).unwrap();
        buf.truncate(n);
        (buf, h.l2.buffer_len())
    }

    /// The UDP header and payload of a test frame, checked (checksum included) by decode.
    fn decoded_udp(frame: &[u8]) -> UdpRepr {
        match decode(frame).unwrap().body {
            Body::Ipv4 {
                body: IpBody::Udp { udp, .. },
                ..
            } => udp,
            b => panic!("not UDP: {b:?}"),
        }
    }

    #[test]
    fn int_stamps_keep_the_udp_checksum_valid() {
        for (mode, len) in [
            (int::Mode::Hops, 60),
            (int::Mode::Hops, 1000),
            (int::Mode::Pint, 60),
        ] {
            let (mut f, l3) = int_frame(mode, len);
            let at = int_offset(&f, l3).unwrap();
            assert!(decoded_udp(&f).checksummed);
            for (k, w) in [0x1234_5678_9abc_def0u64, u64::MAX, 7]
                .into_iter()
                .enumerate()
            {
                let stamped = match mode {
                    int::Mode::Hops => stamp_int(&mut f, l3, |b| int::push_hop(b, w)),
                    int::Mode::Pint => stamp_int(&mut f, l3, |b| int::fold_pint(b, w as u16)),
                };
                assert_eq!(stamped, Ok(true));
                // decode verifies the checksum.
                decoded_udp(&f);
                let r = IntRepr::parse(&f[at..]).unwrap();
                assert_eq!(usize::from(r.nhop), k + 1);
            }
        }
        // A frame without INT space is left alone.
        let h = headers(Ecn::Ect0);
        let mut buf = vec![0u8; 200];
        let n = emit_test_frame(&h, &hdr(), 200, &mut buf).unwrap();
        let before = buf.clone();
        let l3 = h.l2.buffer_len();
        assert_eq!(int_offset(&buf[..n], l3), None);
        assert_eq!(
            stamp_int(&mut buf[..n], l3, |b| int::push_hop(b, 1)),
            Ok(false)
        );
        assert_eq!(buf, before);
    }

    #[test]
    fn test_frame_round_trip() {
        let mut buf = [0u8; 1600];
        let n = emit_test_frame(&headers(Ecn::Ect1), &hdr(), 1000, &mut buf).unwrap();
        assert_eq!(n, 1000);
        let f = decode(&buf[..n]).unwrap();
        assert_eq!(f.l2, headers(Ecn::Ect1).l2);
        let Body::Ipv4 { ip, body } = f.body else {
            panic!("{f:?}")
        };
        assert_eq!((ip.dscp, ip.ecn), (26, Ecn::Ect1));
        let IpBody::Udp { udp, body } = body else {
            panic!()
        };
        assert!(udp.checksummed);
        assert_eq!(body, UdpBody::Test(hdr()));
    }

    #[test]
    fn short_test_frame_is_padded() {
        let mut buf = [0xAAu8; 100];
        let mut h = headers(Ecn::NotEct);
        h.l2 = L2Repr::new(B, A, ethertype::IPV4);
        // 14 + 20 + 8 + 28 = 70 > 60: the header sets the minimum.
        assert_eq!(emit_test_frame(&h, &hdr(), 10, &mut buf), Ok(70));
        assert!(decode(&buf[..70]).is_ok());
    }

    #[test]
    fn roce_frames_round_trip() {
        let mut buf = [0u8; 1600];
        for ecn in Ecn::ALL {
            let bth = BthRepr {
                opcode: roce::opcode::RC_SEND_ONLY,
                pkey: roce::DEFAULT_PKEY,
                dest_qp: 0x11,
                psn: 5,
                ..BthRepr::default()
            };
            let p = RocePayload::Test {
                hdr: hdr(),
                len: 30,
            };
            let n = emit_roce_frame(&headers(ecn), &bth, &p, &mut buf).unwrap();
            let f = decode(&buf[..n]).unwrap();
            let Body::Ipv4 {
                ip,
                body: IpBody::Udp { udp, body },
            } = f.body
            else {
                panic!("{f:?}")
            };
            assert_eq!(ip.ecn, ecn);
            assert_eq!(udp.dst_port, roce::UDP_PORT);
            assert!(!udp.checksummed);
            let UdpBody::Roce { bth: got, test } = body else {
                panic!()
            };
            assert_eq!(got.pad_count, 2, "30 octets pad to 32");
            assert_eq!(got.dest_qp, 0x11);
            assert_eq!(test, Some(hdr()));
        }
    }

    #[test]
    fn cnp_is_74_octets_and_verifies() {
        let mut buf = [0u8; 128];
        let mut h = headers(Ecn::NotEct);
        h.l2 = L2Repr::new(A, B, ethertype::IPV4);
        h.dscp = ipv4::CNP_DSCP;
        let n = emit_roce_frame(&h, &BthRepr::cnp(0x123456), &RocePayload::Cnp, &mut buf);
        assert_eq!(n, Ok(74), "protocols.md: 74 octets on the wire without FCS");
        let f = decode(&buf[..74]).unwrap();
        let Body::Ipv4 {
            body:
                IpBody::Udp {
                    body: UdpBody::Roce { bth, .. },
                    ..
                },
            ..
        } = f.body
        else {
            panic!("{f:?}")
        };
        assert_eq!(bth, BthRepr::cnp(0x123456));
        // Flip one payload bit: the ICRC catches it.
        buf[60] ^= 1;
        assert!(matches!(
            decode(&buf[..74]),
            Err(FrameError::Roce(RoceError::BadIcrc { .. }))
        ));
    }

    #[test]
    fn cnm_and_pfc_round_trip() {
        let sampled = headers(Ecn::NotEct).l2;
        let l2 = cnm_l2(&sampled, CP, cnm::DEFAULT_CNM_PRIORITY);
        let msdu = [0x45u8; 64];
        let c = CnmRepr {
            version: 0,
            reserved_v: 0,
            qntz_fb: 63,
            cpid: cpid(CP, 3),
            q_offset: -5,
            q_delta: 9,
            encap_priority: cnm::encap_priority(3),
            encap_da: sampled.dst,
            encap_msdu: &msdu,
        };
        let mut buf = [0u8; 200];
        let n = emit_cnm(&l2, &c, &mut buf).unwrap();
        assert_eq!(n, 14 + 4 + 4 + 24 + 64);
        let f = decode(&buf[..n]).unwrap();
        assert_eq!(f.l2.dst, A);
        assert_eq!(f.l2.src, CP);
        assert_eq!(f.l2.rpid, Some(7));
        assert_eq!(f.l2.tags[0].map(|t| t.tci.pcp), Some(6));
        assert_eq!(f.body, Body::Cnm(c));

        let n = pfc::emit_frame(A, &PfcRepr::pause(0b1000, 0xFFFF), &mut buf).unwrap();
        assert_eq!(
            decode(&buf[..n]).unwrap().body,
            Body::Pfc(PfcRepr::pause(0b1000, 0xFFFF))
        );
    }

    #[test]
    fn unknown_ethertype_is_an_error() {
        let mut buf = [0u8; 60];
        buf[12] = 0x88;
        buf[13] = 0xB5;
        assert_eq!(decode(&buf), Err(FrameError::UnknownEtherType(0x88B5)));
    }

    #[test]
    fn emit_needs_room() {
        let mut buf = [0u8; 60];
        assert!(emit_test_frame(&headers(Ecn::Ce), &hdr(), 100, &mut buf).is_err());
        assert!(emit_roce_frame(
            &headers(Ecn::Ce),
            &BthRepr::cnp(1),
            &RocePayload::Cnp,
            &mut buf
        )
        .is_err());
    }

    proptest! {
        #[test]
        fn int_stamping_never_panics(mut bytes in proptest::collection::vec(any::<u8>(), 0..200),
                                     l3 in 0usize..40, w: u64) {
            let _ = int_offset(&bytes, l3);
            let _ = stamp_int(&mut bytes, l3, |b| int::push_hop(b, w));
        }

        #[test]
        fn no_bytes_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode(&bytes);
        }

        /// Mutate one octet of every valid frame kind: decoding must not panic, and a frame
        /// that still decodes must decode to something (no silent truncation panics).
        #[test]
        fn mutated_frames_never_panic(kind in 0usize..4, at in 0usize..200, val: u8, cut in 0usize..200) {
            let mut buf = [0u8; 200];
            let n = match kind {
                0 => emit_test_frame(&headers(Ecn::Ce), &hdr(), 120, &mut buf).unwrap(),
                1 => emit_roce_frame(&headers(Ecn::Ect0), &BthRepr::cnp(9), &RocePayload::Cnp, &mut buf).unwrap(),
                2 => pfc::emit_frame(A, &PfcRepr::resume(0xFF), &mut buf).unwrap(),
                _ => {
                    let c = CnmRepr {
                        version: 0, reserved_v: 0, qntz_fb: 1, cpid: 2, q_offset: 3, q_delta: 4,
                        encap_priority: 0, encap_da: A, encap_msdu: &[1, 2, 3],
                    };
                    emit_cnm(&cnm_l2(&headers(Ecn::Ce).l2, CP, 6), &c, &mut buf).unwrap()
                }
            };
            buf[at % n] = val;
            let _ = decode(&buf[..cut.min(n)]);
            let _ = decode(&buf[..n]);
        }
    }
}
