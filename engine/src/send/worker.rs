//! The frame-level half of generator-mode `quench send`: builds each paced frame (VLAN tag with
//! the flow's priority, CN-TAG with the flow id, IPv4 / UDP / test header with sequence number
//! and transmit timestamp), and turns feedback arriving on the port into reaction-point inputs:
//! CNMs (their CN-TAG's flow id, QntzFb) drive the QCN RP, CNPs (their DestQP) the DCQCN RP.
//! Feedback for a flow this sender does not have is counted and ignored.
use std::collections::HashMap;
use std::net::Ipv4Addr;

use rp::{DcqcnProfile, DcqcnState, QcnProfile, QcnRp};
use units::{FlowId, Instant, Rate};

use super::pacer::{Generator, TxDesc};
use crate::wire::ethernet::{ethertype, L2Repr, VlanTci};
use crate::wire::frame::{decode, emit_test_frame, Body, IpBody, Ipv4UdpHeaders, UdpBody};
use crate::wire::ipv4::Ecn;
use crate::wire::roce::opcode;
use crate::wire::testhdr::{TestHdrRepr, UDP_PORT};
use crate::wire::MacAddr;

/// Which reaction point limits the flows.
#[derive(Debug)]
pub enum Control {
    /// No congestion control: every flow at its configured rate.
    None,
    /// IEEE 802.1Qau QCN: one pool of rate limiters for all flows.
    Qcn(QcnRp),
    /// DCQCN: one reaction point per flow (QP), driven by CNPs.
    Dcqcn {
        profile: DcqcnProfile,
        flows: HashMap<FlowId, DcqcnState>,
    },
}

impl Control {
    pub fn qcn(profile: QcnProfile) -> Self {
        Control::Qcn(QcnRp::new(profile))
    }

    /// DCQCN with a reaction point for each of `flows`.
    pub fn dcqcn(profile: DcqcnProfile, flows: impl IntoIterator<Item = FlowId>) -> Self {
        let flows = flows
            .into_iter()
            .map(|f| (f, DcqcnState::new(&profile)))
            .collect();
        Control::Dcqcn { profile, flows }
    }

    fn rate(&self, flow: FlowId, max: Rate) -> Rate {
        match self {
            Control::None => max,
            Control::Qcn(rp) => rp.rate(flow).min(max),
            Control::Dcqcn { flows, .. } => flows.get(&flow).map_or(max, |s| s.rate().min(max)),
        }
    }

    fn on_tx(&mut self, now: Instant, flow: FlowId, bytes: u64) {
        match self {
            Control::None => {}
            Control::Qcn(rp) => {
                rp.on_tx(now, flow, bytes, false);
            }
            Control::Dcqcn { profile, flows } => {
                if let Some(s) = flows.get_mut(&flow) {
                    s.on_tx(profile, now, bytes);
                }
            }
        }
    }

    /// When a reaction point's timer is next due.
    pub fn next_deadline(&self) -> Option<Instant> {
        match self {
            Control::None => None,
            Control::Qcn(rp) => rp.next_deadline(),
            Control::Dcqcn { flows, .. } => flows.values().filter_map(|s| s.next_deadline()).min(),
        }
    }
}

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
    /// Frames received that were neither CNMs nor CNPs nor PFC.
    pub other_rx: u64,
    /// PFC frames received (they stop the paused priorities' flows for their quanta).
    pub pfc_rx: u64,
}

/// Generator, reaction point and frame building for one sender port.
pub struct SendWorker {
    pub gen: Generator,
    pub control: Control,
    addr: Addressing,
    by_flow: HashMap<FlowId, usize>,
    counters: SendCounters,
    /// Priorities stopped by PFC frames received on the port (802.1Qbb: quanta are bit times
    /// of this port's link).
    paused: cp::pfc::PausedState,
}

impl SendWorker {
    pub fn new(gen: Generator, control: Control, addr: Addressing) -> Self {
        let by_flow = gen
            .flows()
            .iter()
            .enumerate()
            .map(|(i, f)| (f.spec.flow, i))
            .collect();
        SendWorker {
            gen,
            control,
            addr,
            by_flow,
            counters: SendCounters::default(),
            paused: cp::pfc::PausedState::new(Rate::from_gbps(1)),
        }
    }

    /// The port's link rate, for the quanta of received PFC frames (default 1 Gbit/s).
    pub fn with_link_rate(mut self, rate: Rate) -> Self {
        self.paused = cp::pfc::PausedState::new(rate);
        self
    }

    pub fn counters(&self) -> SendCounters {
        self.counters
    }

    /// The flow's current rate (RP rate capped by its configured rate).
    pub fn rate(&self, flow: FlowId) -> Rate {
        match self.by_flow.get(&flow) {
            Some(&i) => self.control.rate(flow, self.gen.flows()[i].spec.max_rate),
            None => Rate::ZERO,
        }
    }

    /// The rate `flow` may send at `now`: its RP rate, or zero while PFC pauses its priority.
    /// A paused flow sends nothing by design (802.1Qbb), so a pacing audit that charged it the
    /// RP rate through the pause would report the link's pauses as pacing error.
    pub fn paced_rate(&self, now: Instant, flow: FlowId) -> Rate {
        let paused = self.by_flow.get(&flow).is_some_and(|&i| {
            let prio = self.gen.flows()[i].spec.priority;
            self.paused.is_paused(now, prio)
        });
        if paused {
            Rate::ZERO
        } else {
            self.rate(flow)
        }
    }

    /// Builds the next due frame into `buf`; `stamp` is the transmit timestamp to write (the
    /// receive side's clock domain). Returns the descriptor and the frame length.
    pub fn next_frame(
        &mut self,
        now: Instant,
        stamp: Instant,
        buf: &mut [u8],
    ) -> Option<(TxDesc, usize)> {
        let control = &self.control;
        let paused = &self.paused;
        // The generator caps the RP rate at the flow's configured rate.
        let d = self.gen.poll_unpaused(
            now,
            |f| control.rate(f, Rate::from_bps(u64::MAX)),
            |prio| paused.paused_until(prio),
        )?;
        let spec = &self.gen.flows()[d.index].spec;
        let mut l2 =
            L2Repr::new(spec.destination, self.addr.src_mac, ethertype::IPV4).with_vlan(VlanTci {
                pcp: spec.priority,
                dei: false,
                vid: self.addr.vlan,
            });
        if self.addr.cn_tag {
            l2 = l2.with_cn_tag(d.flow.0 as u16);
        }
        let h = Ipv4UdpHeaders {
            l2,
            src: self.addr.src_ip,
            dst: self.addr.dst_ip,
            dscp: 0,
            ecn: self.addr.ecn,
            // One UDP source port per flow: distinct 5-tuples for ECMP and appliances.
            src_port: 49152 | (d.flow.0 as u16 & 0x3FFF),
            dst_port: UDP_PORT,
        };
        let n = emit_test_frame(
            &h,
            &TestHdrRepr::new(d.flow, d.seq, stamp),
            d.len as usize,
            buf,
        )
        .ok()?;
        self.control.on_tx(now, d.flow, n as u64);
        // QCN's byte counter may just have raised the rate the next release was timed with.
        let rate = self.control.rate(d.flow, Rate::from_bps(u64::MAX));
        self.gen.retime(now, d.index, rate);
        self.counters.frames += 1;
        self.counters.bytes += n as u64;
        Some((d, n))
    }

    /// A frame arrived on the sender's port: feedback or something else.
    pub fn on_rx(&mut self, now: Instant, frame: &[u8]) {
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
                if !self.by_flow.contains_key(&flow) {
                    self.counters.unknown_feedback += 1;
                    return;
                }
                if let Control::Qcn(rp) = &mut self.control {
                    match rp.on_cnm(now, flow, cnm.qntz_fb) {
                        Ok(rp::CnmOutcome::PoolFull) | Err(_) => {
                            self.counters.refused_feedback += 1
                        }
                        Ok(_) => {}
                    }
                }
                self.retime(now, flow);
            }
            Body::Ipv4 {
                body:
                    IpBody::Udp {
                        body: UdpBody::Roce { bth, .. },
                        ..
                    },
                ..
            } if bth.opcode == opcode::CNP => {
                self.counters.cnps += 1;
                let flow = FlowId(bth.dest_qp);
                if !self.by_flow.contains_key(&flow) {
                    self.counters.unknown_feedback += 1;
                    return;
                }
                if let Control::Dcqcn { profile, flows } = &mut self.control {
                    if let Some(s) = flows.get_mut(&flow) {
                        s.on_cnp(profile, now);
                    }
                }
                self.retime(now, flow);
            }
            Body::Pfc(pfc) => {
                self.counters.pfc_rx += 1;
                for prio in 0..units::PRIORITIES as u8 {
                    if pfc.enabled(usize::from(prio)) {
                        self.paused
                            .on_pause_frame(now, prio, pfc.quanta[usize::from(prio)]);
                    }
                }
            }
            _ => self.counters.other_rx += 1,
        }
    }

    /// Priorities paused by PFC at `now` (bit n = priority n).
    pub fn paused_mask(&self, now: Instant) -> u8 {
        self.paused.paused_mask(now)
    }

    /// Runs the reaction point's timers due at `now`.
    pub fn on_timeout(&mut self, now: Instant) {
        let mut ran = false;
        match &mut self.control {
            Control::None => {}
            Control::Qcn(rp) => {
                if rp.next_deadline().is_some_and(|t| t <= now) {
                    rp.on_timeout(now);
                    ran = true;
                }
            }
            Control::Dcqcn { profile, flows } => {
                for s in flows.values_mut() {
                    if s.next_deadline().is_some_and(|t| t <= now) {
                        s.on_timeout(profile, now);
                        ran = true;
                    }
                }
            }
        }
        if ran {
            let control = &self.control;
            self.gen
                .retime_all(now, |f| control.rate(f, Rate::from_bps(u64::MAX)));
        }
    }

    /// Feedback changed `flow`'s rate: re-time its pending release.
    fn retime(&mut self, now: Instant, flow: FlowId) {
        if let Some(&i) = self.by_flow.get(&flow) {
            let rate = self.control.rate(flow, Rate::from_bps(u64::MAX));
            self.gen.retime(now, i, rate);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::send::flowgen::FlowStart;
    use crate::send::pacer::PacingConfig;
    use crate::wire::pfc::{emit_frame, PfcRepr, FRAME_LEN};
    use units::Duration;

    fn worker(priority: u8) -> SendWorker {
        let flows = vec![FlowStart {
            flow: FlowId(1),
            start: Duration::ZERO,
            destination: MacAddr(2, 0, 0, 0, 9, 1),
            priority,
            max_rate: Rate::from_mbps(400),
            bytes: None,
        }];
        let gen = Generator::new(PacingConfig::default(), flows, Instant::ZERO).unwrap();
        SendWorker::new(
            gen,
            Control::None,
            Addressing {
                src_mac: MacAddr::new(2, 0, 0, 0, 1, 1),
                src_ip: Ipv4Addr::new(10, 0, 0, 1),
                dst_ip: Ipv4Addr::new(10, 0, 0, 100),
                vlan: 1,
                ecn: Ecn::NotEct,
                cn_tag: false,
            },
        )
        .with_link_rate(Rate::from_gbps(1))
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
