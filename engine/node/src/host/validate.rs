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
//!   must classify to the flow ([`encapsulated_key`]), and where the MSDU reaches quench's test
//!   header, its flow id must be the flow's and its sequence number one of the flow's last
//!   [`CNM_SEQ_WINDOW`] frames (a replayed old CNM is not, nor one naming a frame never sent).
//! - A CNP must come from the flow's destination IP address to its source (RoCEv2 CNPs travel
//!   from the notification point back to the source, DCQCN section 3).
//!
//! This is the one module of `host` that reads bytes: the encapsulated frame is the evidence.
use std::net::Ipv4Addr;

use units::FlowId;

use quench_wire::classify::{encapsulated_key, encapsulated_udp_payload, FlowKey};
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
    pub cnp_source: u64,
}

impl ForgedCounts {
    pub fn count(&mut self, why: Forged) {
        *match why {
            Forged::OtherAddress => &mut self.other_address,
            Forged::ForeignFrame => &mut self.foreign_frame,
            Forged::OutsideWindow => &mut self.outside_window,
            Forged::CnpSource => &mut self.cnp_source,
        } += 1;
    }

    /// Every refusal.
    pub fn total(&self) -> u64 {
        self.other_address + self.foreign_frame + self.outside_window + self.cnp_source
    }

    /// As JSON: the total and each reason.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "total": self.total(), "other_address": self.other_address,
            "foreign_frame": self.foreign_frame, "outside_window": self.outside_window,
            "cnp_source": self.cnp_source,
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
    let Some(sent) = e.sent else {
        return Ok(());
    };
    // The test header's flow id and sequence number, when the MSDU reaches that far (a copy
    // too short to hold them is not checked: a CP copies at most 64 octets).
    let hdr = encapsulated_udp_payload(msdu).unwrap_or_default();
    let Some(Prefix { magic, flow, seq }) = Prefix::parse(hdr) else {
        return Ok(());
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
