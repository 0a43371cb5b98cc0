//! The congestion point of `quench switch`: plugs the cp crate's QCN and RED/ECN decisions into
//! an egress port's queues through their [`CongestionHook`], per egress port and priority.
//!
//! - **QCN**: on every data frame admitted to a QCN-enabled priority, [`cp::qcn::QcnCp::on_frame`]
//!   with the class's length including the frame; when it returns feedback, a CNM (EtherType
//!   0x22E7) is built to the sampled frame's source MAC, copying its VLAN tag and CN-TAG (the
//!   flow id the RP looks up), with CPID = CP MAC + priority, QntzFb, QOffset, QDelta, the
//!   sampled frame's priority and DA, and its first 64 octets after the MAC addresses as the
//!   encapsulated MSDU (U: protocols.md does not say where the MSDU starts; quench starts after
//!   DA and SA, so the tags and the EtherType are included). CNMs wait in the hook until the
//!   switch drains them ([`CpHook::take_control`]) and forwards them like frames it received.
//! - **RED/ECN (DCQCN)**: [`cp::red::RedProfile`] on the class's octets, at dequeue (ns-3 HPCC)
//!   or enqueue as configured; a CE mark rewrites the IPv4 ECN field of an ECT frame in place with
//!   an incremental checksum update (RFC 1624).
//!
//! - **TCD**: a [`cp::tcd::TcdPort`] per watched priority; the switch reports PFC pauses and
//!   resumes of that egress priority ([`CpHook::on_pause`], [`CpHook::on_resume`]), and each
//!   departing IPv4 frame gets the ternary code point (UE / CE) written into its ECN field.
//!
//! Frames the hook cannot parse (not Ethernet II, no IPv4 for RED) pass unchanged and are
//! counted. The hook never drops: with PFC on the switch must not lose data frames, and QCN and
//! RED only signal.
use rand_xoshiro::rand_core::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Deserialize;

use cp::qcn::{QcnCp, QcnCpParams, QcnCpProfile, QcnFeedback};
use cp::red::{Mark, RedParams, RedProfile};
use cp::tcd::{TcdCodepoint, TcdParams, TcdPort, TcdProfile};
use units::{Instant, PRIORITIES};

use super::queue::{Admit, Class, CongestionHook, QueueEvent};
use crate::port::Frame;
use crate::wire::cnm::{self, CnmRepr};
use crate::wire::ethernet::{ethertype, walk, L2Repr};
use crate::wire::frame::{cnm_l2, emit_cnm};
use crate::wire::ipv4::{self, Ecn};
use crate::wire::MacAddr;

/// Octets of the sampled frame a CNM carries (protocols.md: "Encapsulated MSDU ... 0-64").
const CNM_MSDU_OCTETS: usize = cnm::MAX_MSDU_LEN;
/// Where the encapsulated MSDU starts in the sampled frame: after DA and SA (U, see module doc).
const MSDU_OFFSET: usize = 12;

/// The `[[congestion]]` entries of `configs/switch.toml`: which congestion point runs on which
/// egress port and priorities.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CongestionConfig {
    /// Egress port name, as in the switch's `[[ports]]`.
    pub port: String,
    /// Data priorities (802.1p) the congestion point watches; default all eight.
    #[serde(default = "all_priorities")]
    pub priorities: Vec<u8>,
    /// QCN congestion point (IEEE8021-CN-MIB names).
    pub qcn: Option<QcnCpParams>,
    /// RED/ECN marking (DCQCN).
    pub red: Option<RedParams>,
    /// Ternary congestion detection.
    pub tcd: Option<TcdParams>,
    /// The CP's MAC address (CNM source, CPID); default: the port's own MAC.
    pub cp_mac: Option<String>,
    /// 802.1p priority of CNMs (protocols.md: default believed 6, U).
    #[serde(default = "default_cnm_priority")]
    pub cnm_priority: u8,
    /// Seed of the marking and sampling RNG (replays exactly).
    #[serde(default)]
    pub seed: u64,
}

fn all_priorities() -> Vec<u8> {
    (0..PRIORITIES as u8).collect()
}

fn default_cnm_priority() -> u8 {
    cnm::DEFAULT_CNM_PRIORITY
}

/// A congestion config that failed validation; names the key.
#[derive(Debug, thiserror::Error)]
#[error("congestion[{index}] (port {port:?}).{key}: {why}")]
pub struct CpConfigError {
    pub index: usize,
    pub port: String,
    pub key: String,
    pub why: String,
}

/// Counters of one port's congestion point.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpCounters {
    /// QCN samples taken.
    pub qcn_samples: u64,
    /// CNMs built.
    pub cnms: u64,
    /// Frames marked CE by RED.
    pub ce_marks: u64,
    /// Frames TCD marked UE / CE.
    pub tcd_ue: u64,
    pub tcd_ce: u64,
    /// Frames the hook could not parse (passed unchanged).
    pub unparsed: u64,
    /// CNMs not built (the sampled frame's header could not be re-emitted).
    pub cnm_errors: u64,
}

/// The congestion point of one egress port. `CpHook::default()` does nothing (a plain port).
#[derive(Debug)]
pub struct CpHook {
    prio_mask: u8,
    qcn: Option<(QcnCpProfile, [QcnCp; PRIORITIES])>,
    red: Option<RedProfile>,
    tcd: Option<(TcdProfile, Vec<TcdPort>)>,
    cp_mac: MacAddr,
    cnm_priority: u8,
    rng: Xoshiro256PlusPlus,
    control: Vec<Vec<u8>>,
    counters: CpCounters,
}

impl Default for CpHook {
    fn default() -> Self {
        CpHook {
            prio_mask: 0,
            qcn: None,
            red: None,
            tcd: None,
            cp_mac: MacAddr::zero(),
            cnm_priority: cnm::DEFAULT_CNM_PRIORITY,
            rng: Xoshiro256PlusPlus::seed_from_u64(0),
            control: Vec::new(),
            counters: CpCounters::default(),
        }
    }
}

impl CpHook {
    /// Validates entry `index` of the config for a port whose MAC is `port_mac`.
    pub fn new(
        index: usize,
        c: &CongestionConfig,
        port_mac: MacAddr,
    ) -> Result<Self, CpConfigError> {
        let err = |key: &str, why: String| CpConfigError {
            index,
            port: c.port.clone(),
            key: key.to_string(),
            why,
        };
        let mut prio_mask = 0u8;
        for &p in &c.priorities {
            if usize::from(p) >= PRIORITIES {
                return Err(err("priorities", format!("{p} is not in 0..=7")));
            }
            prio_mask |= 1 << p;
        }
        if usize::from(c.cnm_priority) >= PRIORITIES {
            return Err(err(
                "cnm_priority",
                format!("{} is not in 0..=7", c.cnm_priority),
            ));
        }
        let qcn = match &c.qcn {
            Some(p) => {
                let prof = QcnCpProfile::new(p)
                    .map_err(|e| err(&format!("qcn.{}", e.param), e.reason.clone()))?;
                let cps = std::array::from_fn(|_| QcnCp::new(&prof));
                Some((prof, cps))
            }
            None => None,
        };
        let red = match &c.red {
            Some(p) => Some(
                RedProfile::new(p)
                    .map_err(|e| err(&format!("red.{}", e.param), e.reason.clone()))?,
            ),
            None => None,
        };
        let tcd = match &c.tcd {
            Some(p) => {
                let prof = TcdProfile::new(p)
                    .map_err(|e| err(&format!("tcd.{}", e.param), e.reason.clone()))?;
                let ports = (0..PRIORITIES)
                    .map(|_| TcdPort::new(&prof, Instant::ZERO))
                    .collect();
                Some((prof, ports))
            }
            None => None,
        };
        let cp_mac = match &c.cp_mac {
            Some(s) => crate::port::parse_mac(s)
                .ok_or_else(|| err("cp_mac", format!("{s:?} is not a MAC address")))?,
            None => port_mac,
        };
        Ok(CpHook {
            prio_mask,
            qcn,
            red,
            tcd,
            cp_mac,
            cnm_priority: c.cnm_priority,
            rng: Xoshiro256PlusPlus::seed_from_u64(c.seed),
            control: Vec::new(),
            counters: CpCounters::default(),
        })
    }

    pub fn counters(&self) -> CpCounters {
        self.counters
    }

    /// Whether [`take_control`](Self::take_control) has frames: the switch asks every poll, and
    /// collecting an empty drain was a call per port per poll.
    pub fn has_control(&self) -> bool {
        !self.control.is_empty()
    }

    /// Frames the congestion point originated (CNMs), for the switch to forward by their DA.
    pub fn take_control(&mut self) -> std::vec::Drain<'_, Vec<u8>> {
        self.control.drain(..)
    }

    /// A received PFC PAUSE stopped egress priority `prio` (TCD: an OFF period begins).
    pub fn on_pause(&mut self, now: Instant, prio: u8) {
        if let Some((prof, ports)) = &mut self.tcd {
            if let Some(p) = ports.get_mut(usize::from(prio)) {
                p.on_pause(prof, now);
            }
        }
    }

    /// Egress priority `prio` may send again (resume frame or quanta ran out).
    pub fn on_resume(&mut self, now: Instant, prio: u8) {
        if let Some((_, ports)) = &mut self.tcd {
            if let Some(p) = ports.get_mut(usize::from(prio)) {
                p.on_resume(now);
            }
        }
    }

    fn tcd_mark(&mut self, now: Instant, prio: usize, queue_bytes: u64, frame: &mut [u8]) {
        let Some((prof, ports)) = &mut self.tcd else {
            return;
        };
        let Some(ip_at) = ipv4_offset(frame) else {
            self.counters.unparsed += 1;
            return;
        };
        let cur = TcdCodepoint::from(Ecn::from_bits(frame[ip_at + 1]));
        let new = ports[prio].on_dequeue(prof, now, queue_bytes, cur);
        if new != cur {
            match new {
                TcdCodepoint::Ue => self.counters.tcd_ue += 1,
                TcdCodepoint::Ce => self.counters.tcd_ce += 1,
                _ => {}
            }
            let _ = ipv4::set_ecn(&mut frame[ip_at..], new.into());
        }
    }

    fn watches(&self, class: Class) -> Option<usize> {
        match class {
            Class::Data(p) if self.prio_mask & (1 << p) != 0 => Some(usize::from(p)),
            _ => None,
        }
    }

    /// Builds the CNM answering `sampled` (priority `prio`).
    fn cnm(&mut self, sampled: &[u8], prio: usize, fb: QcnFeedback) {
        let Ok((l2, _)) = L2Repr::parse(sampled) else {
            self.counters.cnm_errors += 1;
            return;
        };
        let msdu_end = sampled.len().min(MSDU_OFFSET + CNM_MSDU_OCTETS);
        let repr = CnmRepr {
            version: cnm::VERSION,
            reserved_v: 0,
            qntz_fb: fb.qntz_fb,
            cpid: cnm::cpid(self.cp_mac, prio as u16),
            q_offset: fb.qoffset,
            q_delta: fb.qdelta,
            encap_priority: cnm::encap_priority(prio as u8),
            encap_da: l2.dst,
            encap_msdu: sampled.get(MSDU_OFFSET..msdu_end).unwrap_or_default(),
        };
        let hdr = cnm_l2(&l2, self.cp_mac, self.cnm_priority);
        let mut buf = vec![0u8; hdr.buffer_len() + repr.buffer_len() + 64];
        match emit_cnm(&hdr, &repr, &mut buf) {
            Ok(n) => {
                buf.truncate(n);
                self.control.push(buf);
                self.counters.cnms += 1;
            }
            Err(_) => self.counters.cnm_errors += 1,
        }
    }

    fn red_mark(&mut self, queue_bytes: u64, enqueue: bool, frame: &mut [u8]) {
        let Some(red) = &self.red else { return };
        let Some(ip_at) = ipv4_offset(frame) else {
            self.counters.unparsed += 1;
            return;
        };
        let cp_ecn = Ecn::from_bits(frame[ip_at + 1]);
        let mark = if enqueue {
            red.on_enqueue(queue_bytes, cp_ecn, &mut self.rng)
        } else {
            red.on_dequeue(queue_bytes, cp_ecn, &mut self.rng)
        };
        if mark == Mark::Ce && mark.apply(cp_ecn) == Ecn::Ce && cp_ecn != Ecn::Ce {
            let _ = ipv4::set_ecn(&mut frame[ip_at..], Ecn::Ce);
            self.counters.ce_marks += 1;
        }
    }
}

/// Offset of the IPv4 header of an IPv4 frame, if it holds a whole minimal header.
fn ipv4_offset(frame: &[u8]) -> Option<usize> {
    let w = walk(frame).ok()?;
    (w.ethertype == ethertype::IPV4 && frame.len() >= w.payload_offset + 20)
        .then_some(w.payload_offset)
}

impl<F: Frame> CongestionHook<F> for CpHook {
    fn observes(&self) -> bool {
        self.qcn.is_some() || self.red.is_some() || self.tcd.is_some()
    }
    fn on_enqueue(&mut self, ev: &QueueEvent, frame: &mut F) -> Admit {
        let Some(prio) = self.watches(ev.class) else {
            return Admit::Accept;
        };
        let q = ev.class_bytes + u64::from(ev.frame_len);
        if let Some((prof, cps)) = &mut self.qcn {
            let d = cps[prio].on_frame(prof, q, ev.frame_len, &mut self.rng);
            if d.sampled {
                self.counters.qcn_samples += 1;
            }
            if let Some(fb) = d.feedback {
                self.cnm(frame.data(), prio, fb);
            }
        }
        self.red_mark(q, true, frame.data_mut());
        Admit::Accept
    }

    fn on_dequeue(&mut self, ev: &QueueEvent, frame: &mut F) {
        if let Some(prio) = self.watches(ev.class) {
            self.red_mark(ev.class_bytes, false, frame.data_mut());
            self.tcd_mark(ev.now, prio, ev.class_bytes, frame.data_mut());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::port::heap::HeapFrame;
    use crate::switch::queue::{EgressQueue, QueueLimits};
    use crate::wire::frame::{decode, Body};
    use units::Duration;

    fn frame(ecn: Ecn, rpid: Option<u16>) -> Vec<u8> {
        crate::recv::worker::test_frame(5, 0, 0, ecn, rpid)
    }

    fn hook(toml_text: &str) -> CpHook {
        let c: CongestionConfig = toml::from_str(toml_text).unwrap();
        CpHook::new(0, &c, MacAddr::new(2, 0, 0, 0, 0, 0xcc)).unwrap()
    }

    fn heap(bytes: &[u8]) -> HeapFrame {
        HeapFrame::copy_of(bytes).unwrap()
    }

    #[test]
    fn qcn_sends_cnms_to_the_source_with_the_cn_tag() {
        let mut q = EgressQueue::with_hook(
            QueueLimits {
                data_bytes: 10_000_000,
                control_bytes: 64 * 1024,
            },
            hook("port = \"p\"\npriorities = [3]\nqcn = { sample_jitter_percent = 0 }"),
        );
        let f = frame(Ecn::NotEct, Some(0x1234));
        // 400 frames of 1000 octets, nothing dequeued: the queue passes Qeq = 26000 quickly.
        for _ in 0..400 {
            q.enqueue(Instant::ZERO, Class::Data(3), heap(&f));
        }
        let c = q.hook().counters();
        assert!(c.cnms > 0, "{c:?}");
        let cnms: Vec<Vec<u8>> = q.hook_mut().take_control().collect();
        assert_eq!(cnms.len() as u64, c.cnms);
        let d = decode(&cnms[0]).unwrap();
        assert_eq!(d.l2.dst, MacAddr::new(2, 0, 0, 0, 1, 1));
        assert_eq!(d.l2.src, MacAddr::new(2, 0, 0, 0, 0, 0xcc));
        assert_eq!(d.l2.rpid, Some(0x1234));
        let Body::Cnm(cnm) = d.body else { panic!() };
        assert!(cnm.qntz_fb > 0);
        assert_eq!(cnm.cpid, cnm::cpid(MacAddr::new(2, 0, 0, 0, 0, 0xcc), 3));
        assert_eq!(cnm.encap_da, MacAddr::new(2, 0, 0, 0, 9, 1));
        assert_eq!(cnm.encap_msdu.len(), 64);
        assert_eq!(cnm.encap_msdu, &f[12..76]);
    }

    #[test]
    fn red_marks_ect_frames_above_kmax_and_leaves_other_priorities() {
        let mut q = EgressQueue::with_hook(
            QueueLimits {
                data_bytes: 10_000_000,
                control_bytes: 64 * 1024,
            },
            hook("port = \"p\"\npriorities = [3]\nred = { kmin_bytes = 1000, kmax_bytes = 2000, pmax = 0.2 }"),
        );
        for _ in 0..10 {
            q.enqueue(Instant::ZERO, Class::Data(3), heap(&frame(Ecn::Ect0, None)));
            q.enqueue(Instant::ZERO, Class::Data(2), heap(&frame(Ecn::Ect0, None)));
            q.enqueue(
                Instant::ZERO,
                Class::Data(3),
                heap(&frame(Ecn::NotEct, None)),
            );
        }
        let mut ce = [0u32; 8];
        while let Some((class, f)) = q.dequeue(Instant::ZERO) {
            let Class::Data(p) = class else { continue };
            if let Body::Ipv4 { ip, .. } = decode(f.data()).unwrap().body {
                if ip.ecn == Ecn::Ce {
                    ce[p as usize] += 1;
                }
            }
        }
        // Priority 3 dequeues with > 2000 octets behind them are marked: at least 7 ECT frames.
        assert!(ce[3] >= 7, "{ce:?}");
        assert_eq!(ce[2], 0);
        assert_eq!(q.hook().counters().ce_marks, u64::from(ce[3]));
    }

    fn ecn_of(f: &[u8]) -> Ecn {
        match decode(f).unwrap().body {
            Body::Ipv4 { ip, .. } => ip.ecn,
            b => panic!("{b:?}"),
        }
    }

    #[test]
    fn tcd_marks_ue_on_a_paused_port_and_ce_on_a_congested_one() {
        let cfg = "port = \"p\"\npriorities = [3]\ntcd = { link_rate = \"1gbit\", congestion_threshold_bytes = 20000, non_congestion_threshold_bytes = 5000 }";
        let limits = QueueLimits {
            data_bytes: 10_000_000,
            control_bytes: 64 * 1024,
        };
        // A port paused on and off (short ON periods): UE, never CE.
        let mut q = EgressQueue::with_hook(limits, hook(cfg));
        let mut ue = 0;
        for i in 0..50u64 {
            let t = Instant::from_nanos(1_000_000 + i * 20_000);
            q.hook_mut().on_pause(t, 3);
            q.hook_mut().on_resume(t + Duration::from_micros(5), 3);
            q.enqueue(t, Class::Data(3), heap(&frame(Ecn::TCD_CAPABLE, None)));
            let (_, f) = q.dequeue(t + Duration::from_micros(6)).unwrap();
            let e = ecn_of(f.data());
            assert_ne!(e, Ecn::TCD_CONGESTED);
            ue += u32::from(e == Ecn::TCD_UNDETERMINED);
        }
        assert!(ue > 40, "{ue}");
        // A never-paused port whose queue keeps growing past the threshold: CE.
        let mut q = EgressQueue::with_hook(limits, hook(cfg));
        let mut ce = 0;
        for i in 0..200u64 {
            let t = Instant::from_nanos(1_000_000 + i * 1_000);
            q.enqueue(t, Class::Data(3), heap(&frame(Ecn::TCD_CAPABLE, None)));
            q.enqueue(t, Class::Data(3), heap(&frame(Ecn::TCD_CAPABLE, None)));
            let (_, f) = q.dequeue(t).unwrap();
            let e = ecn_of(f.data());
            assert_ne!(e, Ecn::TCD_UNDETERMINED);
            ce += u32::from(e == Ecn::TCD_CONGESTED);
        }
        assert!(ce > 100, "{ce}");
    }

    #[test]
    fn config_errors_name_the_key() {
        let c: CongestionConfig =
            toml::from_str("port = \"p\"\nred = { kmin_bytes = 5, kmax_bytes = 1 }").unwrap();
        let e = CpHook::new(2, &c, MacAddr::zero()).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("congestion[2] (port \"p\").red.kmin_bytes"),
            "{e}"
        );
        assert!(toml::from_str::<CongestionConfig>("port = \"p\"\nbogus = 1").is_err());
    }
}

#[cfg(test)]
mod config_tests {
    use crate::switch::config::SwitchConfig;

    #[test]
    fn shipped_switch_configs_carry_their_congestion_points() {
        let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../configs");
        for (f, qcn) in [("switch-qcn.toml", true), ("switch-dcqcn.toml", false)] {
            let p = SwitchConfig::load(&dir.join(f)).unwrap();
            let r0 = p.ports.iter().find(|p| p.name == "r0").unwrap();
            let c = r0.congestion.as_ref().unwrap();
            assert_eq!(c.qcn.is_some(), qcn, "{f}");
            assert_eq!(c.red.is_some(), !qcn, "{f}");
        }
    }

    #[test]
    fn congestion_errors_name_the_key_and_file() {
        let base = "[[ports]]\nname = \"r0\"\niface = \"x\"\n";
        let e = SwitchConfig::parse(&format!("{base}[[congestion]]\nport = \"r9\"\n"), "t.toml")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("t.toml") && e.contains("congestion[0].port"),
            "{e}"
        );
        let e = SwitchConfig::parse(
            &format!("{base}[[congestion]]\nport = \"r0\"\nred = {{ pmax = 2.0 }}\n"),
            "t.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("congestion[0].red.pmax"), "{e}");
    }
}
