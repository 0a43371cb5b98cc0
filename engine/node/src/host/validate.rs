//! Feedback validation: whether a CNM or a CNP that names one of a host's flows can be an answer
//! to what the host sent. QCN and DCQCN feedback carries no authentication, so whoever can put a
//! frame on the wire could otherwise throttle any flow to its minimum rate (issue 18, item 1).
//! Every reaction-point driver (`quench send`'s worker, the appliance) applies this one rule
//! before it hands feedback to [`super::rp::HostRp`]; what fails is counted by [`Forged`] reason
//! and ignored.
//!
//! - A CNM must be addressed to the station that sent the sampled frame (a CP answers the
//!   sampled frame's source address, 802.1Qau 32.9), its encapsulated DA must be the flow's
//!   destination, its encapsulated MSDU (the sampled frame's first octets, which a CP copies)
//!   must classify to the flow ([`encapsulated_key`]), the copy must be as long as a CP's copy
//!   of such a frame ([`copy_is_whole`]), and for a flow of quench's test frames the copy must
//!   hold the test header's flow id, the flow's, and sequence number, one of the flow's last
//!   [`CNM_SEQ_WINDOW`] frames (a replayed old CNM is not, nor one naming a frame never sent).
//!
//! What a CP copies (802.1Qau, the CNM's Encapsulated MSDU; protocols.md: "Encapsulated MSDU
//! (first bytes of the sampled frame) | 0-64"): the first octets of the sampled frame's MSDU,
//! 64 of them, or the whole MSDU when it is shorter. A copy is never cut at a header boundary
//! of the CP's choosing, so a copy that stops after the UDP header of a longer datagram was cut
//! by whoever sent it, and one that stops short of the test header's sequence number names no
//! frame the flow sent: every field such a copy still holds (addresses, 5-tuple) is public, in
//! the flow's configuration, and only the sequence number is live.
//! - A CNP must come from the flow's destination IP address to its source (RoCEv2 CNPs travel
//!   from the notification point back to the source, DCQCN section 3).
//!
//! This is the one module of `host` that reads bytes: the encapsulated frame is the evidence.
use std::net::Ipv4Addr;

use units::FlowId;

use quench_wire::classify::{
    encapsulated_ipv4, encapsulated_key, encapsulated_udp_payload, FlowKey,
};
use quench_wire::cnm::MAX_MSDU_LEN;
use quench_wire::testhdr::{Prefix, MAGIC};
use quench_wire::MacAddr;

/// How many of a flow's most recent frames a CNM may answer. A CP samples a frame as it joins
/// the queue and answers at once, so the sampled frame is at most a queue and a round trip of
/// frames older than the flow's newest: 65,536 frames is 4 MiB of 64-octet frames and 0.8 s of a
/// 1 Gbit/s flow of 1500-octet frames, far more than either.
pub const CNM_SEQ_WINDOW: u64 = 1 << 16;

/// Why feedback naming a held flow was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Forged {
    /// A CNM addressed to another station than the one that sent the flow's frames.
    OtherAddress,
    /// A CNM whose encapsulated DA, 5-tuple or test-header flow id is not the flow's.
    ForeignFrame,
    /// A CNM whose copy of the sampled frame is shorter than a CP's copy of the flow's frames:
    /// cut before the datagram's 64th octet or its end ([`copy_is_whole`]), or, for quench's
    /// test frames, before the test header's sequence number.
    ShortCopy,
    /// A CNM whose encapsulated sequence number the flow has not sent, or sent more than
    /// [`CNM_SEQ_WINDOW`] frames ago (a replay).
    OutsideWindow,
    /// A CNP not from the flow's destination address to its source.
    CnpSource,
}

/// Refused feedback by [`Forged`] reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ForgedCounts {
    pub other_address: u64,
    pub foreign_frame: u64,
    pub outside_window: u64,
    pub short_copy: u64,
    pub cnp_source: u64,
}

impl ForgedCounts {
    pub fn count(&mut self, why: Forged) {
        *match why {
            Forged::OtherAddress => &mut self.other_address,
            Forged::ForeignFrame => &mut self.foreign_frame,
            Forged::OutsideWindow => &mut self.outside_window,
            Forged::ShortCopy => &mut self.short_copy,
            Forged::CnpSource => &mut self.cnp_source,
        } += 1;
    }

    /// Every refusal.
    pub fn total(&self) -> u64 {
        self.other_address
            + self.foreign_frame
            + self.outside_window
            + self.short_copy
            + self.cnp_source
    }

    /// As JSON: the total and each reason.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "total": self.total(), "other_address": self.other_address,
            "foreign_frame": self.foreign_frame, "outside_window": self.outside_window,
            "short_copy": self.short_copy, "cnp_source": self.cnp_source,
        })
    }
}

impl serde::Serialize for ForgedCounts {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(s)
    }
}

/// The frames of one flow a CNM may answer.
#[derive(Clone, Copy, Debug)]
pub struct CnmExpect {
    /// The source MAC of the flow's frames (the CNM's DA).
    pub src_mac: MacAddr,
    /// The flow's destination MAC (the CNM's encapsulated DA).
    pub dst_mac: MacAddr,
    /// What the encapsulated MSDU must classify to; `None` when the flow is named by the
    /// host's own CN-TAG and its packets may be anything.
    pub key: Option<FlowKey>,
    /// The flow's test-header identity, when its frames carry quench's test header.
    pub sent: Option<Sent>,
}

/// A flow's test-header identity: its id and the sequence number its next frame will carry.
#[derive(Clone, Copy, Debug)]
pub struct Sent {
    pub flow: FlowId,
    pub next_seq: u64,
}

/// Whether a CNM addressed to `da`, with encapsulated DA `encap_da` and MSDU `msdu`, answers a
/// frame of the flow `e` describes.
pub fn check_cnm(e: &CnmExpect, da: MacAddr, encap_da: MacAddr, msdu: &[u8]) -> Result<(), Forged> {
    if da != e.src_mac {
        return Err(Forged::OtherAddress);
    }
    if encap_da != e.dst_mac || e.key.is_some_and(|k| encapsulated_key(msdu) != Some(k)) {
        return Err(Forged::ForeignFrame);
    }
    if e.key.is_some() && !copy_is_whole(msdu) {
        return Err(Forged::ShortCopy);
    }
    let Some(sent) = e.sent else {
        return Ok(());
    };
    // The test header's flow id and sequence number: a CP's copy of a test frame always holds
    // them (they end at most 10 + 20 + 8 + 20 = 58 octets into the MSDU, VLAN tag and CN-TAG
    // included), so a copy without them was cut by its sender.
    let hdr = encapsulated_udp_payload(msdu).unwrap_or_default();
    let Some(Prefix { magic, flow, seq }) = Prefix::parse(hdr) else {
        return Err(Forged::ShortCopy);
    };
    if magic != MAGIC || flow != sent.flow {
        return Err(Forged::ForeignFrame);
    }
    if seq < sent.next_seq && sent.next_seq - seq <= CNM_SEQ_WINDOW {
        Ok(())
    } else {
        Err(Forged::OutsideWindow)
    }
}

/// Whether `msdu` is as long as a CP's copy of the IPv4 frame it starts: the datagram's first
/// octets up to the 64th octet of the MSDU or the datagram's end (its Total Length), and in any
/// case its IPv4 header and the transport header that names the flow (a datagram too short to
/// hold its own transport header is no frame of a flow). Padding past a short datagram counts
/// (a CP copies the frame, padding included). `false` when the MSDU holds no IPv4 header.
pub fn copy_is_whole(msdu: &[u8]) -> bool {
    let Some(ip) = encapsulated_ipv4(msdu) else {
        return false;
    };
    let datagram = ip.total_len.max(ip.header_len + ip.transport_len);
    msdu.len() >= (ip.offset + datagram).min(MAX_MSDU_LEN)
}

/// Whether a CNP from `from` to `to` answers a flow from `flow_src` to `flow_dst`.
pub fn check_cnp(
    flow_src: Ipv4Addr,
    flow_dst: Ipv4Addr,
    from: Ipv4Addr,
    to: Ipv4Addr,
) -> Result<(), Forged> {
    if from == flow_dst && to == flow_src {
        Ok(())
    } else {
        Err(Forged::CnpSource)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quench_wire::classify::FiveTuple;
    use quench_wire::ethernet::{ethertype, L2Repr, VlanTci};
    use quench_wire::frame::{emit_test_frame, Ipv4UdpHeaders};
    use quench_wire::ipv4::{Ecn, PROTO_UDP};
    use quench_wire::testhdr::{TestHdrRepr, UDP_PORT};
    use units::Instant;

    const SRC: MacAddr = MacAddr(2, 0, 0, 0, 0, 1);
    const DST: MacAddr = MacAddr(2, 0, 0, 0, 0, 2);
    const FLOW: FlowId = FlowId(7);

    /// Frame `seq` of flow [`FLOW`], `len` octets, VLAN tag and CN-TAG included.
    fn frame(seq: u64, len: usize) -> Vec<u8> {
        let l2 = L2Repr::new(DST, SRC, ethertype::IPV4)
            .with_vlan(VlanTci {
                pcp: 3,
                dei: false,
                vid: 1,
            })
            .with_cn_tag(FLOW.0 as u16);
        let h = Ipv4UdpHeaders {
            l2,
            src: Ipv4Addr::new(10, 0, 0, 1),
            dst: Ipv4Addr::new(10, 0, 0, 2),
            dscp: 0,
            ecn: Ecn::NotEct,
            src_port: 4000,
            dst_port: UDP_PORT,
        };
        let mut buf = vec![0u8; 1600];
        let n = emit_test_frame(
            &h,
            &TestHdrRepr::new(FLOW, seq, Instant::ZERO),
            len,
            &mut buf,
        )
        .unwrap();
        buf.truncate(n);
        buf
    }

    /// What a CP copies of `frame`: its first 64 octets after DA and SA, as `quench switch`.
    fn copy(frame: &[u8]) -> &[u8] {
        &frame[12..frame.len().min(12 + MAX_MSDU_LEN)]
    }

    fn expect(next_seq: u64, test_frames: bool) -> CnmExpect {
        CnmExpect {
            src_mac: SRC,
            dst_mac: DST,
            key: Some(FlowKey::Ip(FiveTuple::v4(
                Ipv4Addr::new(10, 0, 0, 1),
                Ipv4Addr::new(10, 0, 0, 2),
                PROTO_UDP.0,
                4000,
                UDP_PORT,
            ))),
            sent: test_frames.then_some(Sent {
                flow: FLOW,
                next_seq,
            }),
        }
    }

    #[test]
    fn a_whole_copy_of_a_frame_the_flow_sent_answers_it() {
        for len in [64, 100, 1500] {
            let f = frame(5, len);
            for test_frames in [true, false] {
                let got = check_cnm(&expect(10, test_frames), SRC, DST, copy(&f));
                assert_eq!(got, Ok(()), "{len} octets");
            }
            // The MSDU starting after the L2 headers (wire::cnm::encap_msdu) is as whole.
            let after_l2 = &f[22..f.len().min(22 + MAX_MSDU_LEN)];
            assert!(copy_is_whole(after_l2), "{len} octets");
        }
    }

    #[test]
    fn a_copy_cut_short_is_refused_whatever_it_holds() {
        let f = frame(5, 1500);
        let e = expect(10, true);
        // Cut after the UDP header (the test header starts 50 octets into the frame), inside
        // the test header before the sequence number ends, or one octet short of 64.
        for end in [50, 60, 12 + MAX_MSDU_LEN - 1] {
            let cut = &f[12..end];
            assert!(!copy_is_whole(cut), "cut at {end}");
            assert_eq!(check_cnm(&e, SRC, DST, cut), Err(Forged::ShortCopy));
            // The same check for traffic without quench's test header (the appliance's).
            let foreign = expect(10, false);
            assert_eq!(check_cnm(&foreign, SRC, DST, cut), Err(Forged::ShortCopy));
        }
        // Cut after the UDP header with the IPv4 Total Length saying the datagram ends there
        // (at frame octet 24; the checksum is not read): whole for foreign traffic, whose
        // frames may be empty datagrams, but no test frame, so refused for a flow of them.
        let mut empty = f[..50].to_vec();
        empty[24..26].copy_from_slice(&28u16.to_be_bytes());
        assert!(copy_is_whole(&empty[12..]));
        assert_eq!(
            check_cnm(&e, SRC, DST, &empty[12..]),
            Err(Forged::ShortCopy)
        );
        assert_eq!(
            check_cnm(&expect(10, false), SRC, DST, &empty[12..]),
            Ok(())
        );
        // A Total Length too short for the UDP header still needs the header in the copy.
        let mut liar = f[..46].to_vec();
        liar[24..26].copy_from_slice(&20u16.to_be_bytes());
        assert!(!copy_is_whole(&liar[12..]));
    }

    #[test]
    fn a_whole_copy_must_name_a_recent_frame_of_the_flow() {
        let e = expect(10, true);
        assert_eq!(
            check_cnm(&e, SRC, DST, copy(&frame(10, 1500))),
            Err(Forged::OutsideWindow)
        );
        let old = expect(CNM_SEQ_WINDOW + 6, true);
        assert_eq!(
            check_cnm(&old, SRC, DST, copy(&frame(5, 1500))),
            Err(Forged::OutsideWindow)
        );
        assert_eq!(
            check_cnm(&e, DST, DST, copy(&frame(5, 1500))),
            Err(Forged::OtherAddress)
        );
        let mut counts = ForgedCounts::default();
        for why in [Forged::ShortCopy, Forged::ShortCopy, Forged::OutsideWindow] {
            counts.count(why);
        }
        assert_eq!((counts.short_copy, counts.total()), (2, 3));
        assert_eq!(counts.to_json()["short_copy"], 2);
    }
}
