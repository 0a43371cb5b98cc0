//! The frame-level half of generator-mode `quench send`: builds each paced frame (VLAN tag with
//! the flow's priority, CN-TAG with the flow id, IPv4 / UDP / test header with sequence number
//! and transmit timestamp), and turns feedback arriving on the port into reaction-point inputs:
//! CNMs (their CN-TAG's flow id, QntzFb) drive the QCN RP, CNPs (their DestQP) the DCQCN RP.
//! Feedback for a flow this sender does not have is counted and ignored.
use std::collections::HashMap;
use std::net::Ipv4Addr;

use units::{FlowId, Instant, Rate};

use super::pacer::{Generator, TxDesc};
use crate::host::rp::{Feedback, FlowRp, HostRp, Refused};
use crate::wire::ethernet::{ethertype, L2Repr, VlanTci};
use crate::wire::frame::{decode, emit_test_frame, Body, IpBody, Ipv4UdpHeaders, UdpBody};
use crate::wire::ipv4::Ecn;
use crate::wire::roce::opcode;
use crate::wire::testhdr::{TestHdrRepr, UDP_PORT};
use crate::wire::MacAddr;

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
    /// The NIC's reaction points and each flow's (indexed as [`Generator::flows`]).
    pub control: HostRp,
    flow_rps: Vec<FlowRp>,
    addr: Addressing,
    by_flow: HashMap<FlowId, usize>,
    counters: SendCounters,
    /// Priorities stopped by PFC frames received on the port (802.1Qbb: quanta are bit times
    /// of this port's link).
    paused: cp::pfc::PausedState,
}

impl SendWorker {
    pub fn new(gen: Generator, control: HostRp, addr: Addressing) -> Self {
        let flow_rps = gen.flows().iter().map(|_| control.new_flow()).collect();
        let by_flow = gen
            .flows()
            .iter()
            .enumerate()
            .map(|(i, f)| (f.spec.flow, i))
            .collect();
        SendWorker {
            gen,
            control,
            flow_rps,
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
            Some(&i) => self.rp_rate(i, self.gen.flows()[i].spec.max_rate),
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
        let (control, flow_rps, by_flow) = (&self.control, &self.flow_rps, &self.by_flow);
        let paused = &self.paused;
        // The generator caps the RP rate at the flow's configured rate.
        let d = self.gen.poll_unpaused(
            now,
            |f| match by_flow.get(&f) {
                Some(&i) => control.rate(&flow_rps[i], f, Rate::from_bps(u64::MAX)),
                None => Rate::ZERO,
            },
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
        self.control
            .on_tx(&mut self.flow_rps[d.index], d.flow, now, n as u64, true);
        // QCN's byte counter may just have raised the rate the next release was timed with.
        let rate = self.rp_rate(d.index, Rate::from_bps(u64::MAX));
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
                self.feedback(now, FlowId(u32::from(rpid)), Feedback::Cnm(cnm.qntz_fb));
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
                self.feedback(now, FlowId(bth.dest_qp), Feedback::Cnp);
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

    /// Runs the reaction points' timers due at `now`.
    pub fn on_timeout(&mut self, now: Instant) {
        let mut ran = false;
        if self.control.host_deadline().is_some_and(|t| t <= now) {
            self.control.on_host_timeout(now);
            ran = true;
        }
        for s in &mut self.flow_rps {
            if HostRp::flow_deadline(s).is_some_and(|t| t <= now) {
                self.control.on_flow_timeout(s, now);
                ran = true;
            }
        }
        if ran {
            let (control, flow_rps, by_flow) = (&self.control, &self.flow_rps, &self.by_flow);
            self.gen.retime_all(now, |f| match by_flow.get(&f) {
                Some(&i) => control.rate(&flow_rps[i], f, Rate::from_bps(u64::MAX)),
                None => Rate::ZERO,
            });
        }
    }

    /// When a reaction point's timer is next due.
    pub fn next_deadline(&self) -> Option<Instant> {
        let flows = self.flow_rps.iter().filter_map(HostRp::flow_deadline).min();
        match (self.control.host_deadline(), flows) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The RP rate of the flow at `index`, at most `cap`.
    fn rp_rate(&self, index: usize, cap: Rate) -> Rate {
        let flow = self.gen.flows()[index].spec.flow;
        self.control.rate(&self.flow_rps[index], flow, cap)
    }

    /// Feedback naming `flow`: acted on if this sender has the flow (else counted), and the
    /// flow's pending release re-timed at its new rate.
    fn feedback(&mut self, now: Instant, flow: FlowId, fb: Feedback) {
        let Some(&i) = self.by_flow.get(&flow) else {
            self.counters.unknown_feedback += 1;
            return;
        };
        match self
            .control
            .on_feedback(&mut self.flow_rps[i], flow, now, fb)
        {
            Err(Refused::Rejected) => self.counters.refused_feedback += 1,
            // Feedback of the kind this sender's congestion control does not use.
            Err(Refused::NotOurs) | Ok(()) => {}
        }
        let rate = self.rp_rate(i, Rate::from_bps(u64::MAX));
        self.gen.retime(now, i, rate);
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
            HostRp::None,
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
