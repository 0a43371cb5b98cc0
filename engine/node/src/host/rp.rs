//! The reaction points of one host (NIC) and its flows, and the notification point of its
//! receive side: the one glue between a host driver and the `rp` / `np` crates.
//!
//! Call order (docs/style.md, "Sans-IO cores"): build the NIC's [`HostRp`] once (`quench send`
//! and `quench appliance` through `quench_runtime::send::config::host_rp`) and [`HostRp::new_flow`] per flow; per
//! transmitted frame [`HostRp::on_tx`]; per feedback [`HostRp::on_feedback`]; when [`HostRp::flow_deadline`] / [`HostRp::host_deadline`] has passed,
//! [`HostRp::on_flow_timeout`] / [`HostRp::on_host_timeout`] (a spurious call does nothing);
//! read [`HostRp::rate`] whenever a flow's pacer needs it. Closed enums, static dispatch: no
//! `dyn` on the per-frame path.
use units::{Ecn, FlowId, Instant, Rate};

/// A host's reaction-point state shared by its flows.
#[derive(Debug)]
pub enum HostRp {
    /// No congestion control: every flow at its own cap.
    None,
    /// DCQCN: the profile for this NIC's rate; per-flow state lives in [`FlowRp`].
    Dcqcn(::rp::DcqcnProfile),
    /// IEEE 802.1Qau QCN: one pool of rate limiters per NIC.
    Qcn(Box<::rp::QcnRp>),
    /// The ns-3 HPCC simulator's ACK-driven controls (`CC_MODE` 3, 8, 7, 10): the profile for
    /// this NIC's rate; per-flow state lives in [`FlowRp`], driven by [`Feedback::Ack`].
    Hpcc(::rp::HpccProfile),
    Dctcp(::rp::DctcpProfile),
    Timely(::rp::TimelyProfile),
    Pint(::rp::PintProfile),
}

/// A flow's own reaction-point state, boxed: a flow carries one pointer (a niche keeps `None`
/// in it), not DCQCN's 120-odd octets or HPCC's more, so the core's per-flow state of a QCN flow or a flow without
/// congestion control (the appliance holds up to 1M) spans fewer cache lines.
#[derive(Clone, Debug)]
pub enum FlowRp {
    None,
    Some(Box<FlowState>),
}

/// The reaction point's state of one flow (boxed in [`FlowRp`], one pointer in the flow).
#[derive(Clone, Debug)]
pub enum FlowState {
    Dcqcn(::rp::DcqcnState),
    Hpcc(Box<::rp::HpccState>),
    Dctcp(::rp::DctcpState),
    Timely(::rp::TimelyState),
    Pint(::rp::PintState),
}

impl FlowRp {
    fn new(s: FlowState) -> FlowRp {
        FlowRp::Some(Box::new(s))
    }

    pub fn state(&self) -> Option<&FlowState> {
        match self {
            FlowRp::Some(b) => Some(b),
            FlowRp::None => None,
        }
    }

    pub fn state_mut(&mut self) -> Option<&mut FlowState> {
        match self {
            FlowRp::Some(b) => Some(b),
            FlowRp::None => None,
        }
    }
}

/// What a sender learns from the network, already parsed to its meaning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Feedback {
    /// DCQCN CNP (or an ACK with the CNP flag).
    Cnp,
    /// TCD undetermined-encountered notification.
    Ue,
    /// QCN CNM with QntzFb.
    Cnm(u8),
    /// An ACK or NACK, for the ACK-driven controls (HPCC, DCTCP, TIMELY, HPCC-PINT).
    Ack(Ack),
}

/// What an ACK (or NACK) tells an ACK-driven reaction point, with the sender's state when it
/// arrived (`RdmaHw::ReceiveAck` then `HandleAck*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ack {
    /// The cumulative sequence number it carries (`ch.ack.seq`).
    pub seq: u64,
    /// The sender's next sequence number (`qp->snd_nxt`), after a NACK rewound it.
    pub snd_nxt: u64,
    /// The CNP flag: the data packet it answers was ECN-marked (DCTCP).
    pub ecn: bool,
    /// What the data packet collected and the ACK echoes.
    pub echo: Echo,
}

/// The telemetry an ACK echoes, by the control's INT mode (`IntHeader::Mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Echo {
    None,
    /// HPCC: the hops' INT words.
    Int(::rp::IntHops),
    /// TIMELY: the data packet's send time.
    Sent(Instant),
    /// HPCC-PINT: the path's utilisation code, and the sender's sampling coin (0..65536).
    Pint {
        power: u16,
        coin: u32,
    },
}

/// Why feedback did not act.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// The kind of feedback this host's congestion control does not use (a CNM at a DCQCN
    /// host, a CNP at a QCN one, any at a host without congestion control).
    NotOurs,
    /// The reaction point refused it: a QntzFb out of range, or QCN's limiter pool is full.
    Rejected,
}

impl HostRp {
    /// QCN with the limiters of `profile`.
    pub fn qcn(profile: ::rp::QcnProfile) -> HostRp {
        HostRp::Qcn(Box::new(::rp::QcnRp::new(profile)))
    }

    pub fn new_flow(&self) -> FlowRp {
        match self {
            HostRp::Dcqcn(p) => FlowRp::new(FlowState::Dcqcn(::rp::DcqcnState::new(p))),
            HostRp::Hpcc(p) => FlowRp::new(FlowState::Hpcc(Box::new(::rp::HpccState::new(p)))),
            HostRp::Dctcp(p) => FlowRp::new(FlowState::Dctcp(::rp::DctcpState::new(p))),
            HostRp::Timely(p) => FlowRp::new(FlowState::Timely(::rp::TimelyState::new(p))),
            HostRp::Pint(p) => FlowRp::new(FlowState::Pint(::rp::PintState::new(p))),
            _ => FlowRp::None,
        }
    }

    /// The rate flow `id` may send at now, at most `cap` (its own limit, or the line rate).
    /// `flow` is read only under DCQCN, out of line: a flow's [`FlowRp`] sits in its cold line
    /// (`host::core::Flow`), which a frame of a QCN flow does not touch, and a load inlined
    /// here is hoisted above the branch that needs it.
    #[inline]
    pub fn rate(&self, flow: &FlowRp, id: FlowId, cap: Rate) -> Rate {
        match self {
            HostRp::Qcn(q) => q.rate(id).min(cap),
            HostRp::Dcqcn(_) => dcqcn_rate(flow, cap),
            HostRp::None => cap,
            _ => ack_driven_rate(flow, cap),
        }
    }

    /// Flow `id` sent `bytes`; `more` tells whether it has more to send right now (QCN frees
    /// the limiter of a flow that went idle at full rate). `flow` is read only under DCQCN, as
    /// in [`HostRp::rate`].
    #[inline]
    pub fn on_tx(&mut self, flow: &mut FlowRp, id: FlowId, now: Instant, bytes: u64, more: bool) {
        match self {
            HostRp::Qcn(q) => {
                q.on_tx(now, id, bytes, !more);
            }
            HostRp::Dcqcn(p) => dcqcn_on_tx(p, flow, now, bytes),
            _ => {}
        }
    }

    /// Feedback for flow `id`.
    pub fn on_feedback(
        &mut self,
        flow: &mut FlowRp,
        id: FlowId,
        now: Instant,
        fb: Feedback,
    ) -> Result<(), Refused> {
        match (self, flow.state_mut(), fb) {
            (HostRp::Dcqcn(p), Some(FlowState::Dcqcn(s)), Feedback::Cnp) => {
                s.on_cnp(p, now);
                Ok(())
            }
            (HostRp::Dcqcn(p), Some(FlowState::Dcqcn(s)), Feedback::Ue) => {
                s.on_ue(p, now);
                Ok(())
            }
            (HostRp::Qcn(q), _, Feedback::Cnm(fb)) => match q.on_cnm(now, id, fb) {
                Ok(::rp::CnmOutcome::PoolFull) | Err(_) => Err(Refused::Rejected),
                Ok(_) => Ok(()),
            },
            (rp, Some(flow), Feedback::Ack(ack)) => on_ack(rp, flow, now, &ack),
            _ => Err(Refused::NotOurs),
        }
    }

    /// Per-flow timers (DCQCN).
    pub fn flow_deadline(flow: &FlowRp) -> Option<Instant> {
        match flow.state() {
            Some(FlowState::Dcqcn(s)) => s.next_deadline(),
            _ => None,
        }
    }

    pub fn on_flow_timeout(&mut self, flow: &mut FlowRp, now: Instant) {
        if let (HostRp::Dcqcn(p), Some(FlowState::Dcqcn(s))) = (self, flow.state_mut()) {
            s.on_timeout(p, now);
        }
    }

    /// Per-host timers (QCN's limiter pool).
    pub fn host_deadline(&self) -> Option<Instant> {
        match self {
            HostRp::Qcn(q) => q.next_deadline(),
            _ => None,
        }
    }

    /// The flows QCN's pool limits now (their rate may be below their cap); none otherwise.
    pub fn limited_flows(&self) -> impl Iterator<Item = FlowId> + '_ {
        let q = match self {
            HostRp::Qcn(q) => Some(q.limited_flows()),
            _ => None,
        };
        q.into_iter().flatten()
    }

    pub fn on_host_timeout(&mut self, now: Instant) {
        if let HostRp::Qcn(q) = self {
            q.on_timeout(now);
        }
    }
}

/// [`HostRp::rate`] under DCQCN.
#[inline(never)]
fn dcqcn_rate(flow: &FlowRp, cap: Rate) -> Rate {
    match flow.state() {
        Some(FlowState::Dcqcn(s)) => s.rate().min(cap),
        _ => cap,
    }
}

/// [`HostRp::rate`] under the ACK-driven controls.
#[inline(never)]
fn ack_driven_rate(flow: &FlowRp, cap: Rate) -> Rate {
    let r = match flow.state() {
        Some(FlowState::Hpcc(s)) => s.rate(),
        Some(FlowState::Dctcp(s)) => s.rate(),
        Some(FlowState::Timely(s)) => s.rate(),
        Some(FlowState::Pint(s)) => s.rate(),
        _ => cap,
    };
    r.min(cap)
}

/// An ACK at an ACK-driven reaction point (`ReceiveAck`'s `HandleAckHp`, `HandleAckTimely`,
/// `HandleAckDctcp`, `HandleAckHpPint`); an echo that is not the control's is refused.
fn on_ack(rp: &HostRp, flow: &mut FlowState, now: Instant, a: &Ack) -> Result<(), Refused> {
    match (rp, flow, a.echo) {
        (HostRp::Hpcc(p), FlowState::Hpcc(s), Echo::Int(int)) => {
            s.on_ack(p, a.seq, a.snd_nxt, &int);
        }
        (HostRp::Dctcp(p), FlowState::Dctcp(s), _) => s.on_ack(p, a.seq, a.snd_nxt, a.ecn),
        (HostRp::Timely(p), FlowState::Timely(s), Echo::Sent(t)) => {
            s.on_ack(p, now, t, a.seq, a.snd_nxt);
        }
        (HostRp::Pint(p), FlowState::Pint(s), Echo::Pint { power, coin }) => {
            s.on_ack(p, a.seq, a.snd_nxt, power, coin);
        }
        _ => return Err(Refused::NotOurs),
    }
    Ok(())
}

/// [`HostRp::on_tx`] under DCQCN.
#[inline(never)]
fn dcqcn_on_tx(p: &::rp::DcqcnProfile, flow: &mut FlowRp, now: Instant, bytes: u64) {
    if let Some(FlowState::Dcqcn(s)) = flow.state_mut() {
        s.on_tx(p, now, bytes);
    }
}

/// What the notification point of a receiving host asks for after a data frame of `flow`
/// with ECN codepoint `ecn` (`None` without a notification point, or nothing to send).
pub fn np_decide(
    np: &mut Option<::np::Np>,
    now: Instant,
    flow: FlowId,
    ecn: Ecn,
) -> Option<Feedback> {
    match np_arrival(np.as_mut()?, now, flow, ecn) {
        ::np::Decision::SendCnp => Some(Feedback::Cnp),
        ::np::Decision::SendUe => Some(Feedback::Ue),
        _ => None,
    }
}

/// The notification point's decision on a data frame of `flow` with ECN codepoint `ecn` (the
/// mark read as the NP's profile says: with TCD, ECT(0) on a TCD-capable flow is UE), for a
/// driver that also counts what it suppressed (`quench recv`).
pub fn np_arrival(np: &mut ::np::Np, now: Instant, flow: FlowId, ecn: Ecn) -> ::np::Decision {
    let tcd = np.profile().tcd;
    np.on_arrival(now, flow, ::np::Mark::from_ecn(ecn.bits(), tcd))
}

#[cfg(test)]
mod tests {
    use super::*;
    use units::Duration;

    #[test]
    fn qcn_feedback_cuts_the_named_flow_and_refuses_what_is_not_its_own() {
        let line = Rate::from_gbps(10);
        let mut h = HostRp::qcn(::rp::QcnParams::default().profile(line).unwrap());
        let mut f = h.new_flow();
        let (a, b) = (FlowId(1), FlowId(2));
        // QntzFb 63 cuts 10 Gb/s by 63/128 (the rp crate's own figure); the other flow keeps
        // the line rate; a flow's own cap bounds both.
        h.on_feedback(&mut f, a, Instant::ZERO, Feedback::Cnm(63))
            .unwrap();
        assert_eq!(h.rate(&f, a, line).as_bps(), 5_078_125_000);
        assert_eq!(h.rate(&f, b, line), line);
        assert_eq!(h.rate(&f, b, Rate::from_gbps(1)), Rate::from_gbps(1));
        assert!(h.host_deadline().is_some());
        assert_eq!(HostRp::flow_deadline(&f), None);
        // A QntzFb that does not fit 6 bits is refused; a CNP is not QCN's.
        assert_eq!(
            h.on_feedback(&mut f, a, Instant::ZERO, Feedback::Cnm(64)),
            Err(Refused::Rejected)
        );
        assert_eq!(
            h.on_feedback(&mut f, a, Instant::ZERO, Feedback::Cnp),
            Err(Refused::NotOurs)
        );
    }

    #[test]
    fn dcqcn_state_is_per_flow_and_runs_on_its_timers() {
        let line = Rate::from_gbps(100);
        let mut h = HostRp::Dcqcn(::rp::DcqcnParams::default().profile(line).unwrap());
        let (mut f, g) = (h.new_flow(), h.new_flow());
        h.on_feedback(&mut f, FlowId(1), Instant::ZERO, Feedback::Cnp)
            .unwrap();
        // NVIDIA defaults: a CNP only marks; the decrease check 4 us later cuts.
        let until = Instant::ZERO + Duration::from_micros(5);
        while let Some(t) = HostRp::flow_deadline(&f).filter(|&t| t <= until) {
            h.on_flow_timeout(&mut f, t);
        }
        assert!(h.rate(&f, FlowId(1), line) < line);
        assert_eq!(h.rate(&g, FlowId(2), line), line);
        assert_eq!(h.host_deadline(), None);
        assert_eq!(
            h.on_feedback(&mut f, FlowId(1), until, Feedback::Cnm(10)),
            Err(Refused::NotOurs)
        );
        // Without congestion control nothing limits a flow but its cap.
        let mut none = HostRp::None;
        let mut n = none.new_flow();
        assert_eq!(none.rate(&n, FlowId(1), line), line);
        assert_eq!(
            none.on_feedback(&mut n, FlowId(1), until, Feedback::Cnp),
            Err(Refused::NotOurs)
        );
    }

    #[test]
    fn the_np_answers_ce_with_a_cnp_and_nothing_without_an_np() {
        let mut np = Some(::np::Np::new(::np::NpParams::default().profile().unwrap()));
        assert_eq!(
            np_decide(&mut np, Instant::ZERO, FlowId(7), Ecn::Ce),
            Some(Feedback::Cnp)
        );
        assert_eq!(
            np_decide(&mut np, Instant::ZERO, FlowId(8), Ecn::Ect0),
            None
        );
        assert_eq!(
            np_decide(&mut None, Instant::ZERO, FlowId(7), Ecn::Ce),
            None
        );
    }
}
