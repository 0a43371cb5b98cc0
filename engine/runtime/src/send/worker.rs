//! The frame-level half of generator-mode `quench send`: builds each paced frame (VLAN tag with
//! the flow's priority, CN-TAG with the flow id, IPv4 / UDP / test header with sequence number
//! and transmit timestamp), and turns feedback arriving on the port into reaction-point inputs:
//! CNMs (their CN-TAG's flow id, QntzFb) drive the QCN RP, CNPs (their DestQP) the DCQCN RP.
//! Feedback for a flow this sender does not have is counted and ignored.
//!
//! Feedback carries no authentication, so a frame that names one of our flows is acted on only
//! if it can be an answer to what this port sent ([`quench_node::host::validate`], the rule the
//! appliance applies too); everything else is counted as forged, by reason, and ignored.
use std::net::Ipv4Addr;

use units::{FlowId, Instant, Rate};

use quench_node::flowgen::FlowStart;
use quench_node::host::core::{
    AddFlowError, Flow, FlowHandle, FlowSpec, Generated, HostCore, PacingConfig, Transmit,
};
use quench_node::host::rp::{Ack, Echo, Feedback, HostRp, Refused};
use quench_node::host::validate::{self, CnmExpect, ForgedCounts, Sent};
use quench_node::wheel::WheelError;
use quench_port::MAX_FRAME;
use quench_wire::ack::AckRepr;
use quench_wire::classify::{FiveTuple, FlowKey};
use quench_wire::cnm::CnmRepr;
use quench_wire::ethernet::{ethertype, L2Repr, VlanTci};
use quench_wire::frame::{decode, emit_test_frame_int, Body, IpBody, Ipv4UdpHeaders, UdpBody};
use quench_wire::int::{self, IntData, IntRepr};
use quench_wire::ipv4::{Ecn, PROTO_UDP};
use quench_wire::roce::opcode;
use quench_wire::testhdr::{TestHdrRepr, UDP_PORT};
use quench_wire::EmitError;
use quench_wire::MacAddr;

pub use quench_node::host::validate::CNM_SEQ_WINDOW;

/// Addresses of the generated frames.
#[derive(Clone, Copy, Debug)]
pub struct Addressing {
    pub src_mac: MacAddr,
    pub src_ip: Ipv4Addr,
    pub dst_ip: Ipv4Addr,
    pub vlan: u16,
    /// ECN codepoint of data frames (ECT(0) for DCQCN, ECT(1) = TCD-capable).
    pub ecn: Ecn,
    /// Add a CN-TAG carrying the flow id (QCN).
    pub cn_tag: bool,
}

/// Feedback counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SendCounters {
    pub frames: u64,
    pub bytes: u64,
    pub cnms: u64,
    pub cnps: u64,
    /// Feedback naming a flow this sender does not have.
    pub unknown_feedback: u64,
    /// Feedback the RP refused (bad QntzFb, pool full).
    pub refused_feedback: u64,
    /// Feedback naming one of our flows that cannot be an answer to what this port sent, by
    /// reason ([`quench_node::host::validate`]): not acted on.
    pub forged: ForgedCounts,
    /// Frames received that were neither CNMs nor CNPs nor PFC.
    pub other_rx: u64,
    /// PFC frames received (they stop the paused priorities' flows for their quanta).
    pub pfc_rx: u64,
    /// ACKs received ([`quench_wire::ack`]), of them those echoing INT hops, and those after
    /// which the flow's reaction point rate was lower than before.
    pub acks: u64,
    pub acks_with_int: u64,
    pub acks_cutting: u64,
}

/// Why a [`SendWorker`] could not be built.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error("pacing: {0}")]
    Wheel(#[from] WheelError),
    #[error("flow schedule: {0}")]
    Flow(#[from] AddFlowError),
    #[error("frame_len {len}: {err}")]
    Frame { len: u32, err: EmitError },
}

/// The host core of one sender port, its flows' addresses and the port's PFC state: builds
/// the frames the core releases and feeds it what arrives.
pub struct SendWorker {
    pub core: HostCore<Generated>,
    /// Each flow's schedule entry, indexed by its handle (the core's slots, allocated in order:
    /// this worker never removes a flow).
    specs: Vec<FlowStart>,
    addr: Addressing,
    counters: SendCounters,
    /// The port's link speed: the quanta of PFC frames received on it are bit times of it
    /// (802.1Qbb); the pauses themselves are the core's ([`HostCore::handle_pfc`]).
    link_rate: Rate,
    /// The clock id written into every test header ([`quench_wire::time::clock_id`]; 0 = not said).
    clock: u32,
    /// The sequence numbers' epoch ([`quench_wire::testhdr::SEQ_EPOCH_MASK`]), drawn at random
    /// for this port's flows: a forger that does not see their frames cannot name one.
    seq_epoch: u64,
    /// The INT header every data frame carries for the switches to stamp (HPCC: hops,
    /// HPCC-PINT: the code), by the congestion control.
    int: Option<int::Mode>,
    /// Octets of every frame (what an ACK's sequence number counts in).
    wire_len: u32,
}

/// The INT header the congestion control `control` reads from ACKs.
fn int_mode(control: &HostRp) -> Option<int::Mode> {
    match control {
        HostRp::Hpcc(_) => Some(int::Mode::Hops),
        HostRp::Pint(_) => Some(int::Mode::Pint),
        _ => None,
    }
}

/// A random sequence-number epoch: the top 16 bits of a hash under the standard library's
/// random keys (drawn from the operating system's random source once per thread).
fn random_epoch() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let h = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    h & quench_wire::testhdr::SEQ_EPOCH_MASK
}

impl SendWorker {
    /// The flows of `schedule` (start offsets from `run_start`), each frame `frame_len` octets
    /// (as built: the headers' minimum if it is shorter), paced as `pacing` says and reacting
    /// as `control` says.
    pub fn new(
        pacing: PacingConfig,
        frame_len: u32,
        schedule: Vec<FlowStart>,
        run_start: Instant,
        control: HostRp,
        addr: Addressing,
    ) -> Result<Self, WorkerError> {
        let int = int_mode(&control);
        let wire_len = test_frame_len(&addr, int, frame_len)?;
        let mut core = HostCore::new(pacing, control, None)?;
        for f in &schedule {
            let h = core.add_flow(
                FlowSpec {
                    id: f.flow,
                    priority: f.priority,
                    cap: f.max_rate,
                    start: run_start + f.start,
                },
                Generated {
                    frame_len: wire_len,
                    remaining: f.bytes,
                },
            )?;
            debug_assert_eq!(h.0 as usize, core.flows().count() - 1);
        }
        Ok(SendWorker {
            core,
            specs: schedule,
            addr,
            counters: SendCounters::default(),
            link_rate: Rate::from_gbps(1),
            clock: 0,
            seq_epoch: random_epoch(),
            int,
            wire_len,
        })
    }

    /// Stamps the test headers with clock id `clock`, the domain of the `stamp` passed to
    /// [`SendWorker::next_frame`], so receivers can tell whether they share it.
    pub fn with_clock(mut self, clock: u32) -> Self {
        self.clock = clock;
        self
    }

    /// The port's link rate, for the quanta of received PFC frames (default 1 Gbit/s).
    pub fn with_link_rate(mut self, rate: Rate) -> Self {
        self.link_rate = rate;
        self
    }

    pub fn counters(&self) -> SendCounters {
        self.counters
    }

    /// Each flow's schedule entry and its state in the core.
    pub fn flows(&self) -> impl Iterator<Item = (&FlowStart, &Flow<Generated>)> + '_ {
        self.core
            .flows()
            .map(|(h, f)| (&self.specs[h.0 as usize], f))
    }

    /// The flow's current rate (RP rate capped by its configured rate).
    pub fn rate(&self, flow: FlowId) -> Rate {
        self.core
            .find(flow)
            .map_or(Rate::ZERO, |h| self.core.rate(h))
    }

    /// The rate `flow` may send at `now`: its RP rate, or zero while PFC pauses its priority.
    /// A paused flow sends nothing by design (802.1Qbb), so a pacing audit that charged it the
    /// RP rate through the pause would report the link's pauses as pacing error.
    pub fn paced_rate(&self, now: Instant, flow: FlowId) -> Rate {
        let paused = self.core.find(flow).is_some_and(|h| {
            let prio = self.specs[h.0 as usize].priority;
            self.core.paused(now, prio)
        });
        if paused {
            Rate::ZERO
        } else {
            self.rate(flow)
        }
    }

    /// Builds the next due frame into `buf`; `stamp` is the transmit timestamp to write (the
    /// receive side's clock domain). Returns the core's transmit and the frame length.
    pub fn next_frame(
        &mut self,
        now: Instant,
        stamp: Instant,
        buf: &mut [u8],
    ) -> Option<(Transmit<()>, usize)> {
        let d = self.core.poll_transmit(now)?;
        let spec = &self.specs[d.handle.0 as usize];
        let h = headers(&self.addr, spec);
        let n = emit_test_frame_int(
            &h,
            &TestHdrRepr::new(d.id, self.seq_epoch | d.seq, stamp).with_clock(self.clock),
            self.int.map(IntRepr::empty).as_ref(),
            d.len as usize,
            buf,
        )
        .ok()?;
        self.counters.frames += 1;
        self.counters.bytes += n as u64;
        Some((d, n))
    }

    /// A frame arrived on the sender's port: feedback or something else.
    pub fn on_rx(&mut self, now: Instant, frame: &[u8]) {
        self.on_rx_stamped(now, now, frame);
    }

    /// [`SendWorker::on_rx`] with `stamp_now`, the time on the clock of the transmit stamps
    /// (`next_frame`'s `stamp`) when the frame arrived: an ACK's echoed stamp is measured
    /// against it (TIMELY's RTT).
    pub fn on_rx_stamped(&mut self, now: Instant, stamp_now: Instant, frame: &[u8]) {
        let Ok(d) = decode(frame) else {
            self.counters.other_rx += 1;
            return;
        };
        match d.body {
            Body::Cnm(cnm) => {
                self.counters.cnms += 1;
                let Some(rpid) = d.l2.rpid else {
                    self.counters.unknown_feedback += 1;
                    return;
                };
                let flow = FlowId(u32::from(rpid));
                let Some(h) = self.core.find(flow) else {
                    self.counters.unknown_feedback += 1;
                    return;
                };
                if let Err(why) = self.cnm_answers(d.l2.dst, h, &cnm) {
                    self.counters.forged.count(why);
                    return;
                }
                self.feedback(now, flow, Feedback::Cnm(cnm.qntz_fb));
            }
            Body::Ipv4 {
                ip,
                body:
                    IpBody::Udp {
                        body: UdpBody::Roce { bth, .. },
                        ..
                    },
            } if bth.opcode == opcode::CNP => {
                self.counters.cnps += 1;
                let flow = FlowId(bth.dest_qp);
                if self.core.find(flow).is_none() {
                    self.counters.unknown_feedback += 1;
                } else if let Err(why) =
                    validate::check_cnp(self.addr.src_ip, self.addr.dst_ip, ip.src, ip.dst)
                {
                    self.counters.forged.count(why);
                } else {
                    self.feedback(now, flow, Feedback::Cnp);
                }
            }
            Body::Ipv4 {
                ip,
                body:
                    IpBody::Udp {
                        body: UdpBody::Ack(a),
                        ..
                    },
            } => {
                self.counters.acks += 1;
                if let Err(why) =
                    validate::check_cnp(self.addr.src_ip, self.addr.dst_ip, ip.src, ip.dst)
                {
                    self.counters.forged.count(why);
                } else {
                    self.ack(now, stamp_now, &a);
                }
            }
            Body::Pfc(pfc) => {
                self.counters.pfc_rx += 1;
                self.core.handle_pfc(now, self.link_rate, &pfc);
            }
            _ => self.counters.other_rx += 1,
        }
    }

    /// Priorities paused by PFC at `now` (bit n = priority n).
    pub fn paused_mask(&self, now: Instant) -> u8 {
        self.core.paused_mask(now)
    }

    /// Runs the reaction points' timers due at `now`.
    pub fn on_timeout(&mut self, now: Instant) {
        self.core.handle_timeout(now);
    }

    /// When a reaction point's timer is next due.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.core.next_timer()
    }

    /// Whether a CNM addressed to `to` and naming the flow `h` can answer one of the frames
    /// that flow sent ([`validate::check_cnm`]).
    fn cnm_answers(
        &self,
        to: MacAddr,
        h: FlowHandle,
        cnm: &CnmRepr,
    ) -> Result<(), validate::Forged> {
        let (Some(spec), Some(f)) = (self.specs.get(h.0 as usize), self.core.flow(h)) else {
            return Err(validate::Forged::ForeignFrame);
        };
        let expect = CnmExpect {
            src_mac: self.addr.src_mac,
            dst_mac: spec.destination,
            key: Some(FlowKey::Ip(FiveTuple::v4(
                self.addr.src_ip,
                self.addr.dst_ip,
                PROTO_UDP.0,
                udp_src_port(spec.flow),
                UDP_PORT,
            ))),
            sent: Some(Sent {
                flow: spec.flow,
                next_seq: self.seq_epoch | f.seq,
            }),
        };
        validate::check_cnm(&expect, to, cnm.encap_da, cnm.encap_msdu)
    }

    /// An ACK from the flow's destination (`RdmaHw::ReceiveAck`): it acknowledges every frame
    /// up to its sequence number, in octets of this port's frames, and echoes what the
    /// congestion control reads (INT hops, the CE mark, the transmit stamp: an RTT sample
    /// taken on the stamps' clock, `stamp_now`, and carried over to the core's, `now`). An
    /// ACK whose sequence number is not of this port's epoch, or names a frame not sent yet,
    /// is forged.
    fn ack(&mut self, now: Instant, stamp_now: Instant, a: &AckRepr) {
        let Some(h) = self.core.find(a.flow) else {
            self.counters.unknown_feedback += 1;
            return;
        };
        let Some(sent) = self.core.flow(h).map(|f| f.seq) else {
            return;
        };
        let count = a.seq & !quench_wire::testhdr::SEQ_EPOCH_MASK;
        if a.seq & quench_wire::testhdr::SEQ_EPOCH_MASK != self.seq_epoch || count >= sent {
            self.counters.forged.count(validate::Forged::OutsideWindow);
            return;
        }
        let len = u64::from(self.wire_len);
        let echo = match (self.core.host_rp(), a.int) {
            (HostRp::Hpcc(_), Some(i)) => match i.hops() {
                Some(words) => {
                    let mut hops = rp::IntHops::default();
                    for &w in words {
                        hops.push(rp::IntHop(w));
                    }
                    Echo::Int(hops)
                }
                None => Echo::None,
            },
            (
                HostRp::Pint(_),
                Some(IntRepr {
                    data: IntData::Pint(power),
                    ..
                }),
            ) => Echo::Pint {
                power,
                coin: (a.tx.as_nanos() ^ count.rotate_left(17)) as u32 % 65536,
            },
            (HostRp::Timely(_), _) => {
                let rtt = stamp_now.saturating_since(a.tx);
                Echo::Sent(Instant::from_nanos(
                    now.as_nanos().saturating_sub(rtt.as_nanos()),
                ))
            }
            _ => Echo::None,
        };
        self.counters.acks_with_int += u64::from(matches!(echo, Echo::Int(_)));
        let ack = Ack {
            seq: (count + 1) * len,
            snd_nxt: sent * len,
            ecn: a.ece(),
            echo,
        };
        let before = self.core.rate(h);
        self.feedback(now, a.flow, Feedback::Ack(ack));
        self.counters.acks_cutting += u64::from(self.core.rate(h) < before);
    }

    /// Feedback naming `flow`: acted on if this sender has the flow (else counted); the core
    /// re-times the flow's pending release at its new rate.
    fn feedback(&mut self, now: Instant, flow: FlowId, fb: Feedback) {
        let Some(h) = self.core.find(flow) else {
            self.counters.unknown_feedback += 1;
            return;
        };
        match self.core.handle_feedback(now, h, fb) {
            Err(Refused::Rejected) => self.counters.refused_feedback += 1,
            // Feedback of the kind this sender's congestion control does not use.
            Err(Refused::NotOurs) | Ok(()) => {}
        }
    }
}

/// The headers of `flow`'s frames.
fn headers(addr: &Addressing, flow: &FlowStart) -> Ipv4UdpHeaders {
    let mut l2 = L2Repr::new(flow.destination, addr.src_mac, ethertype::IPV4).with_vlan(VlanTci {
        pcp: flow.priority,
        dei: false,
        vid: addr.vlan,
    });
    if addr.cn_tag {
        l2 = l2.with_cn_tag(flow.flow.0 as u16);
    }
    Ipv4UdpHeaders {
        l2,
        src: addr.src_ip,
        dst: addr.dst_ip,
        dscp: 0,
        ecn: addr.ecn,
        src_port: udp_src_port(flow.flow),
        dst_port: UDP_PORT,
    }
}

/// Octets of a test frame asked to be `frame_len` long, as [`emit_test_frame`] builds it (every
/// flow's frames have the same headers' length): what the pacer and the reaction point count.
fn test_frame_len(
    addr: &Addressing,
    int: Option<int::Mode>,
    frame_len: u32,
) -> Result<u32, WorkerError> {
    let probe = FlowStart {
        flow: FlowId(0),
        start: units::Duration::ZERO,
        destination: MacAddr::new(0, 0, 0, 0, 0, 0),
        priority: 0,
        max_rate: Rate::ZERO,
        bytes: None,
    };
    let mut buf = vec![0u8; MAX_FRAME + 64];
    let hdr = TestHdrRepr::new(FlowId(0), 0, Instant::ZERO);
    let int = int.map(IntRepr::empty);
    emit_test_frame_int(
        &headers(addr, &probe),
        &hdr,
        int.as_ref(),
        frame_len as usize,
        &mut buf,
    )
    .map(|n| n as u32)
    .map_err(|err| WorkerError::Frame {
        len: frame_len,
        err,
    })
}

/// The UDP source port of a flow's frames: one per flow, so flows have distinct 5-tuples for
/// ECMP and appliances (the dynamic range, RFC 6335).
pub fn udp_src_port(flow: FlowId) -> u16 {
    49152 | (flow.0 as u16 & 0x3FFF)
}

#[cfg(test)]
mod tests {
    use super::*;
    use quench_wire::pfc::{emit_frame, PfcRepr, FRAME_LEN};
    use units::Duration;

    fn worker(priority: u8) -> SendWorker {
        worker_with(priority, HostRp::None, false)
    }

    fn worker_with(priority: u8, control: HostRp, cn_tag: bool) -> SendWorker {
        let flows = vec![FlowStart {
            flow: FlowId(1),
            start: Duration::ZERO,
            destination: MacAddr(2, 0, 0, 0, 9, 1),
            priority,
            max_rate: Rate::from_mbps(400),
            bytes: None,
        }];
        SendWorker::new(
            PacingConfig::default(),
            1500,
            flows,
            Instant::ZERO,
            control,
            Addressing {
                src_mac: MacAddr::new(2, 0, 0, 0, 1, 1),
                src_ip: Ipv4Addr::new(10, 0, 0, 1),
                dst_ip: Ipv4Addr::new(10, 0, 0, 100),
                vlan: 1,
                ecn: Ecn::NotEct,
                cn_tag,
            },
        )
        .unwrap()
        .with_link_rate(Rate::from_gbps(1))
    }

    /// The reaction point's rate of the worker's flow, above its 400 Mb/s cap.
    fn rp_rate(w: &SendWorker) -> Rate {
        let (h, f) = w.core.flows().next().unwrap();
        let _ = h;
        w.core
            .host_rp()
            .rate(f.rp(), f.spec.id, Rate::from_bps(u64::MAX))
    }

    /// Sends frames until the flow's next sequence number is at least `seq`; returns the last
    /// frame and the time after it.
    fn send_until(w: &mut SendWorker, mut t: Instant, seq: u64) -> (Vec<u8>, Instant) {
        let mut buf = [0u8; 2048];
        let mut last = Vec::new();
        while w.core.flows().next().unwrap().1.seq < seq {
            t += Duration::from_micros(40);
            if let Some((_, n)) = w.next_frame(t, t, &mut buf) {
                last = buf[..n].to_vec();
            }
        }
        (last, t)
    }

    /// The CNM `quench switch` sends for `sampled` (QntzFb 63).
    fn cnm_for(sampled: &[u8]) -> Vec<u8> {
        let src = quench_node::switch::core::CnmSource {
            cp_mac: MacAddr::new(2, 0, 0, 0, 0xc, 0xc),
            priority: 6,
        };
        let fb = cp::qcn::QcnFeedback {
            qntz_fb: 63,
            qoffset: -10,
            qdelta: 4,
        };
        quench_node::switch::cp::cnm_frame(sampled, &src, 0, &fb).unwrap()
    }

    #[test]
    fn a_cnm_acts_only_when_it_answers_a_frame_this_port_sent() {
        let line = Rate::from_gbps(1);
        let qcn = || HostRp::qcn(::rp::QcnParams::default().profile(line).unwrap());
        let mut w = worker_with(0, qcn(), true);
        let (sampled, t) = send_until(&mut w, Instant::ZERO, 3);
        let genuine = cnm_for(&sampled);

        // Addressed elsewhere (a CP answers the sampled frame's source address).
        let mut elsewhere = genuine.clone();
        elsewhere[..6].copy_from_slice(&[2, 0, 0, 0, 7, 7]);
        // A frame this port never sent: another host's 5-tuple with our flow id in its CN-TAG
        // (IPv4 at octet 22, after DA, SA, VLAN tag, CN-TAG and EtherType; its source at 12).
        let mut foreign = sampled.clone();
        foreign[34..38].copy_from_slice(&[10, 0, 0, 66]);
        // A sequence number this flow has not reached (test header at 50, sequence at 62).
        let mut unsent = sampled.clone();
        unsent[62..70].copy_from_slice(&1000u64.to_be_bytes());
        // The sampled frame's DA is not the flow's destination.
        let mut other_da = sampled.clone();
        other_da[..6].copy_from_slice(&[2, 0, 0, 0, 9, 9]);
        // The flow's public fields, the copy cut after the UDP header (test header at 50).
        let cut = &sampled[..50];
        // The same with the IPv4 Total Length (at 24) saying the datagram ends there: a whole
        // copy of a frame without the test header, which this flow never sent.
        let mut empty = cut.to_vec();
        empty[24..26].copy_from_slice(&28u16.to_be_bytes());
        let rp = rp_rate;
        for (i, forged) in [
            elsewhere,
            cnm_for(&foreign),
            cnm_for(&unsent),
            cnm_for(&other_da),
            cnm_for(cut),
            cnm_for(&empty),
        ]
        .iter()
        .enumerate()
        {
            w.on_rx(t, forged);
            assert_eq!(w.counters().forged.total(), i as u64 + 1, "forged CNM {i}");
        }
        assert_eq!(rp(&w), line, "no forged CNM acted");
        let f = w.counters().forged;
        let by_reason = (
            f.other_address,
            f.foreign_frame,
            f.outside_window,
            f.short_copy,
            f.cnp_source,
        );
        assert_eq!(by_reason, (1, 2, 1, 2, 0));

        w.on_rx(t, &genuine);
        assert_eq!(w.counters().forged.total(), 6);
        assert!(rp(&w) < line, "the genuine CNM cut the rate");

        // The sequence numbers carry the port's epoch above the frame count: a CNM naming the
        // count without it names no frame sent.
        let seq = |f: &[u8]| u64::from_be_bytes(f[62..70].try_into().unwrap());
        assert_eq!(seq(&sampled), w.seq_epoch | 2);
        if w.seq_epoch != 0 {
            let mut bare = sampled.clone();
            bare[62..70].copy_from_slice(&2u64.to_be_bytes());
            w.on_rx(t, &cnm_for(&bare));
            assert_eq!(w.counters().forged.outside_window, 2);
        }

        // Replayed once the flow has sent more than the window since: refused.
        let mut w = worker_with(0, qcn(), true);
        let (first, t) = send_until(&mut w, Instant::ZERO, 1);
        let (_, t) = send_until(&mut w, t, CNM_SEQ_WINDOW + 2);
        w.on_rx(t, &cnm_for(&first));
        assert_eq!(w.counters().forged.outside_window, 1);
        assert_eq!(w.counters().forged.total(), 1);
        assert_eq!(rp(&w), line);
    }

    /// `n` frames of `w` sent back to back through a 1 Gb/s switch port (INT on as `int`
    /// says) to a receiver that acknowledges every frame; every ACK back to `w`. Returns the
    /// receiver's counters.
    fn through_switch_and_back(
        w: &mut SendWorker,
        n: usize,
        int: bool,
        mark_ce: bool,
    ) -> crate::recv::worker::RecvCounters {
        use crate::switch::egress::Classified;
        use quench_node::switch::core::SwitchCore;
        use quench_node::switch::cp::{CongestionConfig, CpHook};
        use quench_node::switch::queue::{Class, QueueLimits};
        use quench_port::heap::HeapFrame;
        use quench_port::Frame as _;
        let line = Rate::from_gbps(1);
        let toml_text = format!("port = \"p\"\nint = {int}");
        let c: CongestionConfig = toml::from_str(&toml_text).unwrap();
        let mac = MacAddr::new(2, 0, 0, 0, 0, 0xcc);
        let hook = CpHook::from_config(0, &c, mac)
            .unwrap()
            .with_int_config(0, &c, Some(line))
            .unwrap();
        let mut sw = SwitchCore::<Classified<HeapFrame>>::new(1);
        let limits = QueueLimits {
            data_bytes: 10_000_000,
            control_bytes: 64 * 1024,
        };
        sw.attach(0, limits, hook, line);
        let mut rx = crate::recv::worker::RecvWorker::new(
            crate::recv::RecvConfig::on_clock(0),
            None,
            Duration::from_millis(100),
            MacAddr(2, 0, 0, 0, 9, 1),
        )
        .acking(1);
        let mut t = Instant::ZERO;
        let mut buf = [0u8; 2048];
        let mut sent = 0;
        while sent < n {
            t += Duration::from_micros(1);
            while let Some((_, len)) = w.next_frame(t, t, &mut buf) {
                let mut f = buf[..len].to_vec();
                if mark_ce {
                    quench_wire::ipv4::set_ecn(&mut f[18..], Ecn::Ce).unwrap();
                }
                let f = Classified::classify(HeapFrame::copy_of(&f).unwrap());
                sw.handle_frame(t, 0, 0, Class::Data(0), f);
                sent += 1;
                if sent == n {
                    break;
                }
            }
        }
        // The port drains at 1 Gb/s; each frame's ACK comes back at once.
        let mut acks = Vec::new();
        while let Some((_, f)) = sw.poll_transmit(t, 0) {
            rx.on_frame(t, None, f.frame.data(), &mut |a| acks.push(a.to_vec()));
            for a in acks.drain(..) {
                w.on_rx(t, &a);
            }
            t += Duration::from_micros(12);
        }
        rx.counters()
    }

    #[test]
    fn hpcc_reads_the_int_hops_a_switch_stamped_and_the_receiver_echoed() {
        let line = Rate::from_gbps(1);
        let path = ::rp::FlowPath {
            window: 12_500,
            base_rtt: Duration::from_micros(100),
        };
        let hpcc = HostRp::Hpcc(::rp::HpccParams::default().profile(line, path).unwrap());
        let mut w = worker_with(0, hpcc, false);
        assert_eq!(rp_rate(&w), line);
        // 40 frames queue up at the port: the hops' queue term is several windows, so the
        // utilisation is far above the target and HPCC cuts (to about half here).
        let r = through_switch_and_back(&mut w, 40, true, false);
        assert_eq!((r.acks_sent, r.acks_with_int), (40, 40));
        let c = w.counters();
        assert_eq!((c.acks, c.acks_with_int, c.forged.total()), (40, 40, 0));
        assert!(c.acks_cutting > 0);
        assert!(rp_rate(&w) < Rate::from_mbps(800), "{}", rp_rate(&w));
        // Without INT on the port the ACKs echo empty headers: nothing to react to.
        let hpcc = HostRp::Hpcc(::rp::HpccParams::default().profile(line, path).unwrap());
        let mut w = worker_with(0, hpcc, false);
        let r = through_switch_and_back(&mut w, 40, false, false);
        assert_eq!(r.acks_sent, 40);
        assert_eq!(rp_rate(&w), line);
    }

    #[test]
    fn dctcp_cuts_on_echoed_ce_marks_only() {
        let line = Rate::from_gbps(1);
        let dctcp = || HostRp::Dctcp(::rp::DctcpParams::default().profile(line).unwrap());
        let mut w = worker_with(0, dctcp(), false);
        through_switch_and_back(&mut w, 40, false, false);
        assert_eq!(rp_rate(&w), line);
        let mut w = worker_with(0, dctcp(), false);
        through_switch_and_back(&mut w, 40, false, true);
        assert!(rp_rate(&w) < line, "{}", rp_rate(&w));
    }

    #[test]
    fn an_ack_of_a_frame_not_sent_or_of_another_epoch_is_forged() {
        let line = Rate::from_gbps(1);
        let mut w = worker_with(
            0,
            HostRp::Dctcp(::rp::DctcpParams::default().profile(line).unwrap()),
            false,
        );
        let (data, t) = send_until(&mut w, Instant::ZERO, 2);
        let (l2, _) = L2Repr::parse(&data).unwrap();
        let ack = |seq: u64| {
            let a = AckRepr {
                flags: quench_wire::ack::FLAG_ECE,
                reserved: 0,
                flow: FlowId(1),
                seq,
                tx: Instant::ZERO,
                int: None,
            };
            let mut buf = [0u8; 256];
            let n = quench_wire::frame::emit_ack_reply(
                &l2,
                Ipv4Addr::new(10, 0, 0, 1),
                Ipv4Addr::new(10, 0, 0, 100),
                udp_src_port(FlowId(1)),
                0,
                MacAddr::new(2, 0, 0, 0, 9, 1),
                &a,
                &mut buf,
            )
            .unwrap();
            buf[..n].to_vec()
        };
        let epoch = w.seq_epoch;
        w.on_rx(t, &ack(epoch | 5));
        w.on_rx(t, &ack((epoch ^ (1 << 48)) | 1));
        assert_eq!(w.counters().forged.total(), 2);
        assert_eq!(rp_rate(&w), line);
        w.on_rx(t, &ack(epoch | 1));
        assert_eq!(w.counters().forged.total(), 2);
        assert!(rp_rate(&w) < line);
    }

    #[test]
    fn a_cnp_acts_only_from_the_flows_destination_to_this_port() {
        let line = Rate::from_gbps(1);
        let mut w = worker_with(
            0,
            HostRp::Dcqcn(::rp::DcqcnParams::default().profile(line).unwrap()),
            false,
        );
        let (data, t) = send_until(&mut w, Instant::ZERO, 2);
        let (l2, _) = L2Repr::parse(&data).unwrap();
        let ours = Ipv4Addr::new(10, 0, 0, 1);
        let cnp = |from: Ipv4Addr, qp: u32| {
            let mut buf = [0u8; 256];
            let n = quench_wire::frame::emit_cnp_reply(
                &l2,
                ours,
                from,
                UDP_PORT,
                MacAddr::new(2, 0, 0, 0, 9, 1),
                qp,
                &mut buf,
            )
            .unwrap();
            buf[..n].to_vec()
        };
        // From a third host, for our QP: forged. For a QP we do not hold: unknown.
        w.on_rx(t, &cnp(Ipv4Addr::new(10, 0, 0, 77), 1));
        w.on_rx(t, &cnp(Ipv4Addr::new(10, 0, 0, 100), 9));
        let c = w.counters();
        assert_eq!((c.cnps, c.forged.cnp_source, c.unknown_feedback), (2, 1, 1));
        let rp = rp_rate;
        assert_eq!(rp(&w), line);
        // From the flow's destination: acted on (NVIDIA's defaults cut at the decrease check a
        // few microseconds after the CNP).
        w.on_rx(t, &cnp(Ipv4Addr::new(10, 0, 0, 100), 1));
        assert_eq!(w.counters().forged.total(), 1);
        let until = t + Duration::from_micros(10);
        while let Some(at) = w.next_deadline().filter(|&at| at <= until) {
            w.on_timeout(at);
        }
        assert!(rp(&w) < line);
    }

    fn pause(prio: u8, quanta: u16) -> [u8; FRAME_LEN] {
        let mut q = [0u16; 8];
        q[usize::from(prio)] = quanta;
        let pfc = PfcRepr {
            class_enable: 1 << prio,
            quanta: q,
        };
        let mut buf = [0u8; FRAME_LEN];
        emit_frame(MacAddr::new(2, 0, 0, 0, 2, 2), &pfc, &mut buf).unwrap();
        buf
    }

    #[test]
    fn paced_rate_is_zero_only_while_the_flows_priority_is_paused() {
        let mut w = worker(3);
        let t0 = Instant::ZERO + Duration::from_millis(1);
        assert_eq!(w.paced_rate(t0, FlowId(1)), Rate::from_mbps(400));
        // 1000 quanta x 512 bit times at 1 Gbit/s = 512 us.
        w.on_rx(t0, &pause(3, 1000));
        assert_eq!(w.paced_rate(t0, FlowId(1)), Rate::ZERO);
        let mid = t0 + Duration::from_micros(511);
        assert_eq!(w.paced_rate(mid, FlowId(1)), Rate::ZERO);
        let after = t0 + Duration::from_micros(513);
        assert_eq!(w.paced_rate(after, FlowId(1)), Rate::from_mbps(400));
        // A pause of another priority leaves the flow's rate alone; an unknown flow has none.
        w.on_rx(after, &pause(5, 65535));
        assert_eq!(w.paced_rate(after, FlowId(1)), Rate::from_mbps(400));
        assert_eq!(w.paced_rate(after, FlowId(9)), Rate::ZERO);
    }
}
