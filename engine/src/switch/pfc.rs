//! PFC (802.1Qbb) in `quench switch`: PAUSE generation from per (ingress port, priority)
//! accounting, and honouring of PAUSE frames received on a port.
//!
//! The decisions are `cp::pfc`'s ([`PfcIngress`] for generation, [`PausedState`] for the pauses
//! a port received); this module ties them to the switch's frames and queues:
//! - a data frame of a lossless priority is admitted by [`SwitchPfc::admit`] before it is
//!   queued (no headroom left: it is dropped and counted, the one loss PFC allows); the egress
//!   port and priority it was queued at remember its ingress port and length, in queue order,
//!   so that [`SwitchPfc::dequeued`] returns exactly those octets to the right ingress account
//!   when it leaves (the egress FIFOs are per priority, so the order is the same);
//! - XOFF / XON decisions become real PAUSE frames (`wire::pfc`), sent out of the ingress port
//!   in the control class, which PAUSE never stops;
//! - a PAUSE frame received on a port stops that port's egress priorities for its quanta (512
//!   bit times of the port's rate each), a quanta-0 frame or the expiry resumes them.
//!
//! One worker owns all the accounting: a frame's bytes count against its ingress port while it
//! sits in any egress queue, so the configuration refuses PFC with more than one worker.
//! Flooded frames (unknown or group destinations) are not accounted: they are not the traffic
//! PFC protects, and a copy per port would count one arrival several times.
use std::collections::VecDeque;

use cp::pfc::{PausedState, PfcAction, PfcIngress, PfcProfile};
use units::{Instant, Rate, PRIORITIES};

use crate::wire::pfc::{emit_frame, PfcRepr, FRAME_LEN};
use crate::wire::MacAddr;

/// Per-port PFC counters (published through the port's stats).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PfcCounters {
    /// PAUSE frames sent out of this port (XOFF and XON).
    pub sent: u64,
    /// PFC frames received on this port.
    pub received: u64,
    /// Lossless frames from this port dropped for want of headroom.
    pub headroom_drops: u64,
}

/// A priority's egress state changed on a port: pause it (`true`) or resume it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PauseChange {
    pub port: usize,
    pub prio: u8,
    pub paused: bool,
}

/// The switch's PFC state. See the module docs.
pub struct SwitchPfc {
    profile: PfcProfile,
    ingress: PfcIngress,
    /// Per port: pauses it received.
    paused: Vec<PausedState>,
    /// Per egress port and priority: (ingress port, octets) of each accounted queued frame.
    origin: Vec<[VecDeque<(u16, u32)>; PRIORITIES]>,
    /// Per port: the source address of the PAUSE frames it sends.
    macs: Vec<MacAddr>,
    /// PAUSE frames waiting to be queued: (port, frame).
    out: Vec<(usize, [u8; FRAME_LEN])>,
    pub counters: Vec<PfcCounters>,
}

impl SwitchPfc {
    /// `rates[i]`: the speed of port i, for the quanta of PAUSE frames it receives (802.1Qbb:
    /// bit times of the receiving port); `macs[i]`: its address.
    pub fn new(profile: PfcProfile, rates: &[Rate], macs: &[MacAddr]) -> Self {
        let n = rates.len();
        SwitchPfc {
            ingress: PfcIngress::new(&profile),
            profile,
            paused: rates.iter().map(|&r| PausedState::new(r)).collect(),
            origin: (0..n).map(|_| Default::default()).collect(),
            macs: (0..n)
                .map(|i| {
                    macs.get(i)
                        .copied()
                        .unwrap_or(MacAddr(0x02, 0x71, 0x6e, 0xfe, 0, i as u8))
                })
                .collect(),
            out: Vec::new(),
            counters: vec![PfcCounters::default(); n],
        }
    }

    pub fn is_lossless(&self, prio: u8) -> bool {
        self.profile.is_lossless(prio)
    }

    fn act(&mut self, port: usize, action: Option<PfcAction>) {
        let Some(action) = action else { return };
        let pdu = match action {
            PfcAction::Pause { prio, quanta } => PfcRepr::pause(1 << prio, quanta),
            PfcAction::Resume { prio } => PfcRepr::resume(1 << prio),
        };
        let mut buf = [0u8; FRAME_LEN];
        if emit_frame(mac_of(&self.macs, port), &pdu, &mut buf).is_ok() {
            self.out.push((port, buf));
            if let Some(c) = self.counters.get_mut(port) {
                c.sent += 1;
            }
        }
    }

    /// A lossless data frame of `len` octets arrived on `ingress` at priority `prio`. False:
    /// no headroom left, drop it (counted).
    pub fn admit(&mut self, now: Instant, ingress: usize, prio: u8, len: u32) -> bool {
        match self
            .ingress
            .on_enqueue(&self.profile, now, ingress as u16, prio, u64::from(len))
        {
            Ok(d) => {
                self.act(ingress, d.action);
                if !d.admitted {
                    if let Some(c) = self.counters.get_mut(ingress) {
                        c.headroom_drops += 1;
                    }
                }
                d.admitted
            }
            // A port or priority outside the profile: not ours to account.
            Err(_) => true,
        }
    }

    /// An admitted frame was queued at `egress` (`queued`), or went nowhere (tail drop,
    /// filtered): then its octets leave the ingress account at once.
    pub fn placed(
        &mut self,
        now: Instant,
        ingress: usize,
        egress: usize,
        prio: u8,
        len: u32,
        queued: bool,
    ) {
        match self
            .origin
            .get_mut(egress)
            .and_then(|o| o.get_mut(usize::from(prio)))
        {
            Some(q) if queued => q.push_back((ingress as u16, len)),
            _ => self.release(now, ingress, prio, len),
        }
    }

    fn release(&mut self, now: Instant, ingress: usize, prio: u8, len: u32) {
        if let Ok(action) =
            self.ingress
                .on_dequeue(&self.profile, now, ingress as u16, prio, u64::from(len))
        {
            self.act(ingress, action);
        }
    }

    /// A data frame of priority `prio` left `egress`'s queue.
    pub fn dequeued(&mut self, now: Instant, egress: usize, prio: u8) {
        let front = self
            .origin
            .get_mut(egress)
            .and_then(|o| o.get_mut(usize::from(prio)))
            .and_then(|q| q.pop_front());
        if let Some((ingress, len)) = front {
            self.release(now, usize::from(ingress), prio, len);
        }
    }

    /// A MAC Control frame arrived on `port`; `pdu` is what follows its EtherType. Returns the
    /// priorities it paused or resumed (legacy 802.3x PAUSE and malformed PDUs change nothing).
    pub fn on_mac_control(&mut self, now: Instant, port: usize, pdu: &[u8]) -> Vec<PauseChange> {
        let Ok(pfc) = PfcRepr::parse(pdu) else {
            return Vec::new();
        };
        let Some(state) = self.paused.get_mut(port) else {
            return Vec::new();
        };
        if let Some(c) = self.counters.get_mut(port) {
            c.received += 1;
        }
        (0..PRIORITIES as u8)
            .filter(|&p| pfc.enabled(usize::from(p)))
            .filter_map(|p| {
                let quanta = pfc.quanta[usize::from(p)];
                state.on_pause_frame(now, p, quanta).then_some(PauseChange {
                    port,
                    prio: p,
                    paused: quanta > 0,
                })
            })
            .collect()
    }

    /// Runs what is due at `now`: received pauses that ran out (returned as resumes) and, in
    /// refresh mode, PAUSE refreshes.
    pub fn on_timeout(&mut self, now: Instant, changes: &mut Vec<PauseChange>) {
        for (port, st) in self.paused.iter_mut().enumerate() {
            if st.next_deadline().is_some_and(|t| t <= now) {
                let mask = st.on_timeout(now);
                changes.extend((0..PRIORITIES as u8).filter(|p| mask & (1 << p) != 0).map(
                    |prio| PauseChange {
                        port,
                        prio,
                        paused: false,
                    },
                ));
            }
        }
        while self.ingress.next_deadline().is_some_and(|t| t <= now) {
            let Some(f) = self.ingress.poll_timeout(&self.profile, now) else {
                break;
            };
            self.act(usize::from(f.port), Some(f.action));
        }
    }

    /// The PAUSE frames decided since the last call: (port to send out of, frame).
    pub fn take_frames(&mut self) -> std::vec::Drain<'_, (usize, [u8; FRAME_LEN])> {
        self.out.drain(..)
    }

    /// Octets accounted to (ingress port, priority) (tests and stats).
    pub fn held(&self, ingress: usize, prio: u8) -> u64 {
        self.ingress
            .account(ingress as u16, prio)
            .map_or(0, |a| a.held())
    }
}

fn mac_of(macs: &[MacAddr], port: usize) -> MacAddr {
    macs.get(port).copied().unwrap_or(MacAddr::zero())
}
