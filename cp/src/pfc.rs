//! Priority flow control (IEEE 802.1Qbb): the ingress accounting that decides when to send
//! PAUSE / resume, and the egress state of priorities paused by received PAUSE frames.
//!
//! # Method groups and call order
//! Ingress side (the switch that sends PAUSE upstream), one [`PfcIngress`] per switch, because
//! the dynamic threshold depends on the whole shared buffer:
//! 1. Configure: [`PfcParams`] -> [`PfcProfile::new`].
//! 2. Create: [`PfcIngress::new`].
//! 3. Per packet arriving on `(port, prio)`: [`PfcIngress::on_enqueue`]`(now, port, prio, bytes)`
//!    -> [`IngressDecision`]: admit or drop (headroom exhausted), and maybe a
//!    [`PfcAction::Pause`] to send out of `port`.
//! 4. Per packet leaving the switch that had arrived on `(port, prio)`:
//!    [`PfcIngress::on_dequeue`] -> maybe a [`PfcAction::Resume`].
//! 5. Timers (refresh mode only): when `now >= `[`PfcIngress::next_deadline`], call
//!    [`PfcIngress::poll_timeout`]`(now)` until it returns `None`; each [`PfcFrame`] is a PAUSE
//!    refresh (the priority is still congested) or a resume (the dynamic threshold rose
//!    meanwhile). A spurious call returns `None`.
//!
//! Egress side (the port that receives PAUSE), one [`PausedState`] per port:
//! 1. [`PausedState::new`]`(link_rate)`.
//! 2. Per PAUSE frame, for each priority enabled in its class-enable vector:
//!    [`PausedState::on_pause_frame`]`(now, prio, quanta)`; quanta 0 is a resume (XON).
//! 3. [`PausedState::is_paused`]`(now, prio)` before sending on `prio`.
//! 4. When `now >= `[`PausedState::next_deadline`]: [`PausedState::on_timeout`]`(now)` returns the
//!    priorities whose pause ran out.
//!
//! Pause modes: `until_resume` is the ns-3 HPCC mode (PAUSE with quanta 0xFFFF, no refresh, an
//! explicit resume when the queue drains; "Pause lasts until an explicit resume", dcqcn.md);
//! `refresh` sends finite quanta and re-sends PAUSE after `refresh_percent` of the pause time
//! while the priority is still congested, so the upstream never resumes early. Both modes send an
//! explicit resume (quanta 0) when the resume condition holds.
//!
//! Threshold modes: `static` (XOFF / XON thresholds on the bytes held for `(port, prio)`, with
//! `headroom_bytes` above XOFF for the bytes in flight) and `dynamic` (the shared-buffer
//! threshold of ns-3 HPCC `switch-mmu.cc`, dcqcn.md).
//! [`PfcProfile::with_ports`] gives each port its own headroom and
//! shift, as ns-3 HPCC's third.cc configures them.
use units::{Duration, Instant, Rate, PRIORITIES};

use units::keys::{key, Key, KeyDefault, Range, Type};

use crate::ParamError;

/// One pause quantum is 512 bit times (802.1Qbb; protocols.md).
pub const QUANTUM_BITS: u64 = 512;
/// The largest pause time; ns-3 HPCC pauses with it and resumes explicitly.
pub const QUANTA_MAX: u16 = 0xFFFF;

/// How long `quanta` pause quanta last at `rate` (512 bit times each), rounded up to the
/// nanosecond. 0xFFFF at 10 Gb/s = 33553920 bits = 3355392 ns.
pub fn quanta_duration(quanta: u16, rate: Rate) -> Duration {
    rate.tx_time(u64::from(quanta) * QUANTUM_BITS / 8)
}

/// When a pause that a PAUSE frame received at `now` on a link of `rate` gives a priority with
/// `quanta` ends: `now` plus `quanta` x 512 bit times, replacing any earlier pause time; quanta 0
/// is a resume, `None` (802.1Qbb as protocols.md has it: "pause times in quanta of 512 bit
/// times ... Quanta 0 = resume (XON)"). The rule every receiver of PAUSE frames times its
/// pauses by ([`PausedState`], a host's pause clock).
pub fn pause_end(now: Instant, quanta: u16, rate: Rate) -> Option<Instant> {
    (quanta > 0).then(|| now + quanta_duration(quanta, rate))
}

/// Which threshold decides XOFF / XON.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum ThresholdMode {
    /// Fixed `xoff_bytes` / `xon_bytes` per (port, priority).
    Static,
    /// ns-3 HPCC: `(buffer - total headroom - total reserve - shared used) >> alpha_shift`.
    #[default]
    Dynamic,
}

/// How PAUSE frames are timed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum PauseMode {
    /// ns-3 HPCC: one PAUSE with `pause_quanta` (default 0xFFFF), then an explicit resume.
    #[default]
    UntilResume,
    /// Finite quanta, refreshed after `refresh_percent` of the pause time while congested.
    Refresh,
}

/// PFC parameters as users write them.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields, default))]
pub struct PfcParams {
    /// Ingress ports of the switch (1..=4096).
    pub ports: u16,
    /// Lossless priorities (PFC-enabled), 0..=7. Default `[3]` (ns-3 HPCC data on pg 3).
    pub lossless_priorities: Vec<u8>,
    /// Link rate of the ports, for quanta -> time. Default 100 Gb/s.
    #[cfg_attr(feature = "serde", serde(deserialize_with = "crate::de::rate"))]
    pub link_rate: Rate,
    /// `dynamic` (default, ns-3 HPCC) or `static`.
    pub threshold: ThresholdMode,
    /// Static mode: PAUSE when the bytes held for (port, prio) reach this. Default 100000.
    pub xoff_bytes: u64,
    /// Static mode: resume when they fall to this. Default 97000 (2 MTU below XOFF, the PFC
    /// practice tcd.md quotes).
    pub xon_bytes: u64,
    /// Headroom per port, octets: the bytes still arriving after PAUSE (one RTT of line rate
    /// plus an MTU). ns-3 HPCC: 3 x rate x one-way delay. Default 37500 (100 Gb/s, 1 us).
    pub headroom_bytes: u64,
    /// Dynamic mode: the shared buffer, octets. Default 12 MiB (ns-3 HPCC `buffer_size`).
    pub buffer_bytes: u64,
    /// Dynamic mode: bytes reserved per (port, lossless prio) before shared use. Default 4096.
    pub reserve_bytes: u64,
    /// Dynamic mode: resume when shared use + this <= threshold. Default 3072.
    pub resume_offset_bytes: u64,
    /// Dynamic mode: the threshold is the free shared buffer >> this. Default 3.
    pub alpha_shift: u8,
    /// `until_resume` (default, ns-3 HPCC) or `refresh`.
    pub pause: PauseMode,
    /// Quanta in each PAUSE frame (1..=65535). Default 0xFFFF.
    pub pause_quanta: u16,
    /// Refresh mode: re-send PAUSE after this share of the pause time, 1..=99. Default 50.
    pub refresh_percent: u8,
    /// PFC watchdog ([`PauseWatchdog`]): a priority a port has received PAUSE for without a
    /// break for this many milliseconds is a storm, and the port stops honouring PAUSE for it.
    /// 0..=60000; default 0, off (a commodity switch's default detection is 100-200 ms).
    pub watchdog_ms: u64,
    /// PFC watchdog: the storm ends when no PAUSE for the priority has arrived for this many
    /// milliseconds. 1..=60000; default 200.
    pub watchdog_restore_ms: u64,
}

impl Default for PfcParams {
    fn default() -> Self {
        PfcParams {
            ports: 1,
            lossless_priorities: vec![3],
            link_rate: Rate::from_gbps(100),
            threshold: ThresholdMode::Dynamic,
            xoff_bytes: 100_000,
            xon_bytes: 97_000,
            headroom_bytes: 37_500,
            buffer_bytes: 12 * 1024 * 1024,
            reserve_bytes: 4 * 1024,
            resume_offset_bytes: 3 * 1024,
            alpha_shift: 3,
            pause: PauseMode::UntilResume,
            pause_quanta: QUANTA_MAX,
            refresh_percent: 50,
            watchdog_ms: 0,
            watchdog_restore_ms: 200,
        }
    }
}

/// The keys of [`PfcParams`], as the configuration reference lists them; the validation checks the
/// integer and float ranges given here.
pub const KEYS: &[Key] = &[
    Key {
        name: "ports",
        ty: Type::Integer,
        unit: "",
        default: KeyDefault::Text("the switch's port count"),
        range: Range::Int(1, 4096),
        doc: "Ingress ports; the switch and the simulator set it from their port lists.",
    },
    Key {
        name: "lossless_priorities",
        ty: Type::Integers,
        unit: "",
        default: KeyDefault::Value("[3]"),
        range: Range::Text("each 0..=7"),
        doc: "Priorities PFC keeps lossless (ns-3 HPCC's data runs on priority 3).",
    },
    Key {
        name: "link_rate",
        ty: Type::Rate,
        unit: "",
        default: KeyDefault::Value("\"100gbit\""),
        range: Range::Text("> 0"),
        doc: "Link rate of the ports, to turn pause quanta into time (the simulator sets each \
              switch's).",
    },
    Key {
        name: "threshold",
        ty: Type::OneOf(&["dynamic", "static"]),
        unit: "",
        default: KeyDefault::Value("\"dynamic\""),
        range: Range::Any,
        doc: "How XOFF is decided: a share of the free shared buffer (ns-3 HPCC) or fixed octets.",
    },
    Key {
        name: "xoff_bytes",
        ty: Type::Integer,
        unit: "octets",
        default: KeyDefault::Value("100000"),
        range: Range::Int(0, units::MAX_BUFFER_BYTES),
        doc: "Static threshold: PAUSE when the octets held for a (port, priority) reach it.",
    },
    Key {
        name: "xon_bytes",
        ty: Type::Integer,
        unit: "octets",
        default: KeyDefault::Value("97000"),
        range: Range::Text("<= xoff_bytes"),
        doc: "Static threshold: resume when they fall to it (2 MTU below XOFF, the practice seed \
              004 quotes).",
    },
    Key {
        name: "headroom_bytes",
        ty: Type::Integer,
        unit: "octets",
        default: KeyDefault::Value("37500"),
        range: Range::Int(0, units::MAX_BUFFER_BYTES),
        doc: "Headroom per port: what still arrives after a PAUSE (ns-3 HPCC: 3 x rate x one-way \
              delay; the simulator computes it per port unless given).",
    },
    Key {
        name: "buffer_bytes",
        ty: Type::Integer,
        unit: "octets",
        default: KeyDefault::Value("12582912"),
        range: Range::Text("> ports x (headroom_bytes + lossless priorities x reserve_bytes)"),
        doc: "Dynamic threshold: the shared buffer (12 MiB).",
    },
    Key {
        name: "reserve_bytes",
        ty: Type::Integer,
        unit: "octets",
        default: KeyDefault::Value("4096"),
        range: Range::Any,
        doc: "Dynamic threshold: octets reserved per (port, lossless priority) before shared use.",
    },
    Key {
        name: "resume_offset_bytes",
        ty: Type::Integer,
        unit: "octets",
        default: KeyDefault::Value("3072"),
        range: Range::Any,
        doc: "Dynamic threshold: resume when shared use plus this is at most the threshold.",
    },
    Key {
        name: "alpha_shift",
        ty: Type::Integer,
        unit: "log2",
        default: KeyDefault::Value("3"),
        range: Range::Int(0, 30),
        doc: "Dynamic threshold: the threshold is the free shared buffer >> alpha_shift.",
    },
    Key {
        name: "pause",
        ty: Type::OneOf(&["until_resume", "refresh"]),
        unit: "",
        default: KeyDefault::Value("\"until_resume\""),
        range: Range::Any,
        doc: "Pause until a resume frame (ns-3 HPCC), or with finite quanta refreshed while \
              congested.",
    },
    Key {
        name: "pause_quanta",
        ty: Type::Integer,
        unit: "512 bit times",
        default: KeyDefault::Value("65535"),
        range: Range::Int(1, 65535),
        doc: "Quanta in each PAUSE frame.",
    },
    Key {
        name: "refresh_percent",
        ty: Type::Integer,
        unit: "percent",
        default: KeyDefault::Value("50"),
        range: Range::Int(1, 99),
        doc: "Refresh mode: send the next PAUSE after this share of the pause time.",
    },
    Key {
        name: "watchdog_ms",
        ty: Type::Integer,
        unit: "ms",
        default: KeyDefault::Value("0"),
        range: Range::Int(0, 60000),
        doc: "PFC watchdog: a priority paused without a break this long is a storm and stops \
              being honoured; 0 is off.",
    },
    Key {
        name: "watchdog_restore_ms",
        ty: Type::Integer,
        unit: "ms",
        default: KeyDefault::Value("200"),
        range: Range::Int(1, 60000),
        doc: "PFC watchdog: the storm ends after this long without a PAUSE for the priority.",
    },
];
const PORTS: &Key = key(KEYS, "ports");
const XOFF_BYTES: &Key = key(KEYS, "xoff_bytes");
const HEADROOM_BYTES: &Key = key(KEYS, "headroom_bytes");
const ALPHA_SHIFT: &Key = key(KEYS, "alpha_shift");
const PAUSE_QUANTA: &Key = key(KEYS, "pause_quanta");
const REFRESH_PERCENT: &Key = key(KEYS, "refresh_percent");
const WATCHDOG_MS: &Key = key(KEYS, "watchdog_ms");
const WATCHDOG_RESTORE_MS: &Key = key(KEYS, "watchdog_restore_ms");

/// Validated PFC parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct PfcProfile {
    ports: u16,
    /// Bit n set = priority n is lossless.
    lossless: u8,
    link_rate: Rate,
    threshold: ThresholdMode,
    xoff: u64,
    xon: u64,
    headroom: u64,
    buffer: u64,
    reserve: u64,
    resume_offset: u64,
    alpha_shift: u8,
    /// Per-port headroom and threshold shift where they differ by port
    /// ([`PfcProfile::with_ports`]); `None`: `headroom` and `alpha_shift` for every port.
    per_port: Option<Box<[PortPfc]>>,
    /// Sum of the ports' headroom (ns-3 `total_hdrm`).
    total_headroom: u64,
    /// Sum of the reserves (ns-3 `total_rsrv`).
    total_reserve: u64,
    pause_quanta: u16,
    /// Refresh mode: time from one PAUSE to its refresh; `None` in until-resume mode.
    refresh_after: Option<Duration>,
    /// The watchdog's detection and restoration times; `None`: off.
    watchdog: Option<(Duration, Duration)>,
}

impl PfcProfile {
    pub fn new(p: &PfcParams) -> Result<Self, ParamError> {
        PORTS.within(p.ports.into())?;
        XOFF_BYTES.within(p.xoff_bytes)?;
        HEADROOM_BYTES.within(p.headroom_bytes)?;
        // xon_bytes: at most xoff_bytes in static mode, and never above the buffer bound.
        units::within("xon_bytes", p.xon_bytes, 0, units::MAX_BUFFER_BYTES)?;
        WATCHDOG_MS.within(p.watchdog_ms)?;
        WATCHDOG_RESTORE_MS.within(p.watchdog_restore_ms)?;
        PAUSE_QUANTA.within(p.pause_quanta.into())?;
        // Checked in either mode: a bad value is a mistake whichever mode reads it.
        REFRESH_PERCENT.within(p.refresh_percent.into())?;
        let mut lossless = 0u8;
        for &prio in &p.lossless_priorities {
            if usize::from(prio) >= PRIORITIES {
                return Err(ParamError::new(
                    "lossless_priorities",
                    prio,
                    "a priority must be in 0..=7",
                ));
            }
            lossless |= 1 << prio;
        }
        if p.link_rate == Rate::ZERO {
            return Err(ParamError::new(
                "link_rate",
                p.link_rate,
                "must be above zero",
            ));
        }
        if p.threshold == ThresholdMode::Static && p.xon_bytes > p.xoff_bytes {
            return Err(ParamError::new(
                "xon_bytes",
                p.xon_bytes,
                format!("must not exceed xoff_bytes ({})", p.xoff_bytes),
            ));
        }
        ALPHA_SHIFT.within(p.alpha_shift.into())?;
        let n_lossless = u64::from(lossless.count_ones());
        let total_headroom = u64::from(p.ports).saturating_mul(p.headroom_bytes);
        // ns-3 HPCC ConfigNPort: "total_rsrv += reserve" once per port; it has one lossless
        // queue per port in practice. Here: one reserve per (port, lossless priority), the
        // same number when one priority is lossless.
        let total_reserve = (u64::from(p.ports) * n_lossless).saturating_mul(p.reserve_bytes);
        if p.threshold == ThresholdMode::Dynamic
            && p.buffer_bytes <= total_headroom.saturating_add(total_reserve)
        {
            return Err(ParamError::new(
                "buffer_bytes",
                p.buffer_bytes,
                format!(
                    "must exceed the total headroom ({total_headroom}) plus reserve \
                     ({total_reserve})"
                ),
            ));
        }
        let refresh_after = match p.pause {
            PauseMode::UntilResume => None,
            PauseMode::Refresh => {
                let d = quanta_duration(p.pause_quanta, p.link_rate).as_nanos();
                let r = d * u64::from(p.refresh_percent) / 100;
                if r == 0 {
                    return Err(ParamError::new(
                        "pause_quanta",
                        p.pause_quanta,
                        "the refresh interval rounds to 0 ns at this link rate",
                    ));
                }
                Some(Duration::from_nanos(r))
            }
        };
        Ok(PfcProfile {
            ports: p.ports,
            lossless,
            link_rate: p.link_rate,
            threshold: p.threshold,
            xoff: p.xoff_bytes,
            xon: p.xon_bytes,
            headroom: p.headroom_bytes,
            buffer: p.buffer_bytes,
            reserve: p.reserve_bytes,
            resume_offset: p.resume_offset_bytes,
            alpha_shift: p.alpha_shift,
            per_port: None,
            total_headroom,
            total_reserve,
            pause_quanta: p.pause_quanta,
            refresh_after,
            watchdog: (p.watchdog_ms > 0).then(|| {
                (
                    Duration::from_millis(p.watchdog_ms),
                    Duration::from_millis(p.watchdog_restore_ms),
                )
            }),
        })
    }

    /// A fresh watchdog for one port, if the profile has one.
    pub fn watchdog(&self) -> Option<PauseWatchdog> {
        self.watchdog.map(|(d, r)| PauseWatchdog::new(d, r))
    }

    pub fn link_rate(&self) -> Rate {
        self.link_rate
    }

    /// Gives each port its own headroom and dynamic-threshold shift, as ns-3 HPCC configures
    /// its switches (third.cc): `ConfigHdrm(j, headroom)` per port, `total_hdrm` their sum, and
    /// "pfc_a_shift[j] = shift; while (rate > nic_rate && pfc_a_shift[j] > 0)
    /// { pfc_a_shift[j]--; rate /= 2; }", so a port faster than the NICs gets a larger share
    /// of the free buffer. `ports` must list every port of the profile.
    pub fn with_ports(mut self, ports: &[PortPfc]) -> Result<Self, ParamError> {
        if ports.len() != usize::from(self.ports) {
            return Err(ParamError::new(
                "ports",
                ports.len(),
                format!("must list each of the profile's {} ports", self.ports),
            ));
        }
        for p in ports {
            ALPHA_SHIFT.within(p.alpha_shift.into())?;
        }
        let total_headroom = ports
            .iter()
            .fold(0u64, |s, p| s.saturating_add(p.headroom_bytes));
        if self.threshold == ThresholdMode::Dynamic
            && self.buffer <= total_headroom.saturating_add(self.total_reserve)
        {
            return Err(ParamError::new(
                "buffer_bytes",
                self.buffer,
                format!(
                    "must exceed the total headroom ({total_headroom}) plus reserve ({})",
                    self.total_reserve
                ),
            ));
        }
        self.total_headroom = total_headroom;
        self.per_port = Some(ports.into());
        Ok(self)
    }

    /// Headroom of ingress `port` (ns-3 `headroom[port]`).
    fn headroom_of(&self, port: u16) -> u64 {
        match &self.per_port {
            Some(p) => p
                .get(usize::from(port))
                .map_or(self.headroom, |p| p.headroom_bytes),
            None => self.headroom,
        }
    }

    /// Dynamic-threshold shift of ingress `port` (ns-3 `pfc_a_shift[port]`).
    fn shift_of(&self, port: u16) -> u8 {
        match &self.per_port {
            Some(p) => p
                .get(usize::from(port))
                .map_or(self.alpha_shift, |p| p.alpha_shift),
            None => self.alpha_shift,
        }
    }

    pub fn is_lossless(&self, prio: u8) -> bool {
        usize::from(prio) < PRIORITIES && self.lossless & (1 << prio) != 0
    }

    /// How long one of our PAUSE frames pauses the upstream port.
    pub fn pause_duration(&self) -> Duration {
        quanta_duration(self.pause_quanta, self.link_rate)
    }
}

/// One port's PFC settings where they differ by port ([`PfcProfile::with_ports`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortPfc {
    pub headroom_bytes: u64,
    pub alpha_shift: u8,
}

/// What to send out of an ingress port, per priority.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PfcAction {
    /// A PAUSE frame with this priority enabled and this pause time.
    Pause { prio: u8, quanta: u16 },
    /// A PAUSE frame with this priority enabled and pause time 0 (XON).
    Resume { prio: u8 },
}

/// A [`PfcAction`] and the port to send it out of (from [`PfcIngress::poll_timeout`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PfcFrame {
    pub port: u16,
    pub action: PfcAction,
}

/// The result of a packet arriving on (port, prio).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IngressDecision {
    /// False: no headroom left, drop the packet (it was not counted).
    pub admitted: bool,
    /// Send this out of the ingress port.
    pub action: Option<PfcAction>,
}

/// A call named a port or priority the profile does not have.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PfcError {
    #[error("port {port} out of range (the profile has {ports} ports)")]
    NoSuchPort { port: u16, ports: u16 },
    #[error("priority {0} out of range 0..=7")]
    NoSuchPriority(u8),
}

/// Accounting of one (ingress port, priority). Aligned to a cache line: every lossless frame
/// reads and writes its account, and at 40 octets packed eight to a port the account of a
/// port's priority 3 always straddled two lines.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(align(64))]
pub struct QueueAccount {
    /// Bytes held outside the headroom (ns-3 `ingress_bytes`; in static mode all bytes up to
    /// XOFF).
    pub ingress_bytes: u64,
    /// Bytes held in the headroom (ns-3 `hdrm_bytes`).
    pub headroom_bytes: u64,
    /// We have sent PAUSE and no resume since.
    pub paused: bool,
    /// Refresh mode: when to re-send PAUSE.
    refresh_at: Option<Instant>,
}

impl QueueAccount {
    /// All bytes held for this (port, prio).
    pub fn held(&self) -> u64 {
        self.ingress_bytes + self.headroom_bytes
    }
}

/// Ingress-side PFC state of one switch.
#[derive(Clone, Debug)]
pub struct PfcIngress {
    /// `ports * 8` accounts, index `port * 8 + prio`.
    queues: Vec<QueueAccount>,
    /// Dynamic mode: shared buffer in use (ns-3 `shared_used_bytes`).
    shared_used: u64,
}

impl PfcIngress {
    pub fn new(profile: &PfcProfile) -> Self {
        PfcIngress {
            queues: vec![QueueAccount::default(); usize::from(profile.ports) * PRIORITIES],
            shared_used: 0,
        }
    }

    fn index(&self, profile: &PfcProfile, port: u16, prio: u8) -> Result<usize, PfcError> {
        if port >= profile.ports {
            return Err(PfcError::NoSuchPort {
                port,
                ports: profile.ports,
            });
        }
        if usize::from(prio) >= PRIORITIES {
            return Err(PfcError::NoSuchPriority(prio));
        }
        Ok(usize::from(port) * PRIORITIES + usize::from(prio))
    }

    /// The accounting of (port, prio), if they exist.
    pub fn account(&self, port: u16, prio: u8) -> Option<&QueueAccount> {
        if usize::from(prio) >= PRIORITIES {
            return None;
        }
        self.queues
            .get(usize::from(port) * PRIORITIES + usize::from(prio))
    }

    /// Dynamic mode: shared buffer in use, octets.
    pub fn shared_used(&self) -> u64 {
        self.shared_used
    }

    /// The threshold the pause decision of ingress `port` compares against: XOFF in static
    /// mode; in dynamic mode the current shared-buffer threshold, ns-3 HPCC `GetPfcThreshold`:
    /// "return (buffer_size - total_hdrm - total_rsrv - shared_used_bytes) >>
    /// pfc_a_shift[port];" (saturating here where ns-3's unsigned arithmetic would wrap).
    pub fn threshold(&self, profile: &PfcProfile, port: u16) -> u64 {
        if profile.threshold == ThresholdMode::Static {
            return profile.xoff;
        }
        profile
            .buffer
            .saturating_sub(profile.total_headroom)
            .saturating_sub(profile.total_reserve)
            .saturating_sub(self.shared_used)
            >> profile.shift_of(port)
    }

    /// ns-3 `GetSharedUsed`: "used > reserve ? used - reserve : 0".
    fn shared_of(profile: &PfcProfile, q: &QueueAccount) -> u64 {
        q.ingress_bytes.saturating_sub(profile.reserve)
    }

    fn should_pause(&self, profile: &PfcProfile, port: u16, q: &QueueAccount) -> bool {
        match profile.threshold {
            ThresholdMode::Static => q.held() >= profile.xoff,
            // ns-3 CheckShouldPause: "hdrm_bytes[port][qIndex] > 0 ||
            // GetSharedUsed(port, qIndex) >= GetPfcThreshold(port)"
            ThresholdMode::Dynamic => {
                q.headroom_bytes > 0 || Self::shared_of(profile, q) >= self.threshold(profile, port)
            }
        }
    }

    fn should_resume(&self, profile: &PfcProfile, port: u16, q: &QueueAccount) -> bool {
        match profile.threshold {
            ThresholdMode::Static => q.held() <= profile.xon,
            // ns-3 CheckShouldResume: "hdrm_bytes[port][qIndex] == 0 && (shared_used == 0 ||
            // shared_used + resume_offset <= GetPfcThreshold(port))"
            ThresholdMode::Dynamic => {
                let shared = Self::shared_of(profile, q);
                q.headroom_bytes == 0
                    && (shared == 0
                        || shared.saturating_add(profile.resume_offset)
                            <= self.threshold(profile, port))
            }
        }
    }

    fn pause(&mut self, profile: &PfcProfile, i: usize, now: Instant, prio: u8) -> PfcAction {
        let q = &mut self.queues[i];
        q.paused = true;
        q.refresh_at = profile.refresh_after.map(|d| now + d);
        PfcAction::Pause {
            prio,
            quanta: profile.pause_quanta,
        }
    }

    fn resume(&mut self, i: usize, prio: u8) -> PfcAction {
        let q = &mut self.queues[i];
        q.paused = false;
        q.refresh_at = None;
        PfcAction::Resume { prio }
    }

    /// A packet of `bytes` octets arrived on (port, prio). Lossy priorities are admitted and
    /// not counted.
    pub fn on_enqueue(
        &mut self,
        profile: &PfcProfile,
        now: Instant,
        port: u16,
        prio: u8,
        bytes: u64,
    ) -> Result<IngressDecision, PfcError> {
        let i = self.index(profile, port, prio)?;
        if !profile.is_lossless(prio) {
            return Ok(IngressDecision {
                admitted: true,
                action: None,
            });
        }
        let q = self.queues[i];
        match profile.threshold {
            ThresholdMode::Static => {
                // Drop what would overflow XOFF + headroom; bytes above XOFF are headroom.
                let held = q.held().saturating_add(bytes);
                if held > profile.xoff.saturating_add(profile.headroom_of(port)) {
                    return Ok(IngressDecision {
                        admitted: false,
                        action: None,
                    });
                }
                let q = &mut self.queues[i];
                q.headroom_bytes = held.saturating_sub(profile.xoff);
                q.ingress_bytes = held - q.headroom_bytes;
            }
            ThresholdMode::Dynamic => {
                let thresh = self.threshold(profile, port);
                // ns-3 CheckIngressAdmission: drop "if (psize + hdrm_bytes[port][qIndex] >
                // headroom[port] && psize + GetSharedUsed(port, qIndex) > GetPfcThreshold(port))"
                if bytes.saturating_add(q.headroom_bytes) > profile.headroom_of(port)
                    && bytes.saturating_add(Self::shared_of(profile, &q)) > thresh
                {
                    return Ok(IngressDecision {
                        admitted: false,
                        action: None,
                    });
                }
                // ns-3 UpdateIngressAdmission.
                let new_bytes = q.ingress_bytes.saturating_add(bytes);
                let q = &mut self.queues[i];
                if new_bytes <= profile.reserve {
                    // "if (new_bytes <= reserve) ingress_bytes[port][qIndex] += psize;"
                    q.ingress_bytes = new_bytes;
                } else if new_bytes - profile.reserve > thresh {
                    // "if (new_bytes - reserve > thresh) hdrm_bytes[port][qIndex] += psize;"
                    q.headroom_bytes = q.headroom_bytes.saturating_add(bytes);
                } else {
                    // "ingress_bytes[port][qIndex] += psize; shared_used_bytes +=
                    //  std::min(psize, new_bytes - reserve);"
                    q.ingress_bytes = new_bytes;
                    self.shared_used = self
                        .shared_used
                        .saturating_add(bytes.min(new_bytes - profile.reserve));
                }
            }
        }
        // ns-3 CheckAndSendPfc after admission: "if (m_mmu->CheckShouldPause(inDev, qIndex))"
        // where CheckShouldPause starts with "!paused[port][qIndex] &&".
        let q = self.queues[i];
        let action = (!q.paused && self.should_pause(profile, port, &q))
            .then(|| self.pause(profile, i, now, prio));
        Ok(IngressDecision {
            admitted: true,
            action,
        })
    }

    /// A packet of `bytes` octets that had arrived on (port, prio) left the switch.
    pub fn on_dequeue(
        &mut self,
        profile: &PfcProfile,
        now: Instant,
        port: u16,
        prio: u8,
        bytes: u64,
    ) -> Result<Option<PfcAction>, PfcError> {
        let _ = now;
        let i = self.index(profile, port, prio)?;
        if !profile.is_lossless(prio) {
            return Ok(None);
        }
        let q = &mut self.queues[i];
        match profile.threshold {
            ThresholdMode::Static => {
                let held = q.held().saturating_sub(bytes);
                q.headroom_bytes = held.saturating_sub(profile.xoff);
                q.ingress_bytes = held - q.headroom_bytes;
            }
            ThresholdMode::Dynamic => {
                // ns-3 RemoveFromIngressAdmission: headroom first, then shared, then reserve.
                let from_hdrm = q.headroom_bytes.min(bytes);
                let rest = (bytes - from_hdrm).min(q.ingress_bytes);
                let from_shared = rest.min(q.ingress_bytes.saturating_sub(profile.reserve));
                q.headroom_bytes -= from_hdrm;
                q.ingress_bytes -= rest;
                self.shared_used = self.shared_used.saturating_sub(from_shared);
            }
        }
        // ns-3 SwitchNotifyDequeue: "CheckAndSendResume(inDev, qIndex);"
        let q = self.queues[i];
        Ok((q.paused && self.should_resume(profile, port, &q)).then(|| self.resume(i, prio)))
    }

    /// Refresh mode: the earliest time a PAUSE must be re-sent.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.queues.iter().filter_map(|q| q.refresh_at).min()
    }

    /// Handles one due refresh, if any: re-sends PAUSE for a priority still congested, or sends
    /// the resume that the risen dynamic threshold now allows. Call until `None`.
    pub fn poll_timeout(&mut self, profile: &PfcProfile, now: Instant) -> Option<PfcFrame> {
        let (i, _) = self
            .queues
            .iter()
            .enumerate()
            .filter_map(|(i, q)| q.refresh_at.map(|t| (i, t)))
            .filter(|&(_, t)| t <= now)
            .min_by_key(|&(_, t)| t)?;
        let port = (i / PRIORITIES) as u16;
        let prio = (i % PRIORITIES) as u8;
        let q = self.queues[i];
        let action = if self.should_resume(profile, port, &q) {
            self.resume(i, prio)
        } else {
            self.pause(profile, i, now, prio)
        };
        Some(PfcFrame { port, action })
    }
}

/// Egress side: which priorities of one port are paused by PAUSE frames received on it, and
/// until when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PausedState {
    link_rate: Rate,
    paused_until: [Option<Instant>; PRIORITIES],
}

impl PausedState {
    /// `link_rate` is the speed of the port that received the PAUSE (802.1Qbb: quanta are bit
    /// times of that port).
    pub fn new(link_rate: Rate) -> Self {
        PausedState {
            link_rate,
            paused_until: [None; PRIORITIES],
        }
    }

    /// A received PAUSE frame has `prio` enabled with `quanta`: pause from `now` for `quanta`
    /// x 512 bit times, replacing any earlier pause time; quanta 0 resumes at once. Priorities
    /// above 7 are ignored (returns false).
    pub fn on_pause_frame(&mut self, now: Instant, prio: u8, quanta: u16) -> bool {
        let Some(slot) = self.paused_until.get_mut(usize::from(prio)) else {
            return false;
        };
        *slot = pause_end(now, quanta, self.link_rate);
        true
    }

    /// May `prio` not send at `now`?
    pub fn is_paused(&self, now: Instant, prio: u8) -> bool {
        self.paused_until
            .get(usize::from(prio))
            .copied()
            .flatten()
            .is_some_and(|t| now < t)
    }

    /// Bit n set = priority n paused at `now`.
    pub fn paused_mask(&self, now: Instant) -> u8 {
        (0..PRIORITIES as u8)
            .filter(|&p| self.is_paused(now, p))
            .fold(0, |m, p| m | 1 << p)
    }

    /// When the earliest pause runs out.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.paused_until.iter().flatten().copied().min()
    }

    /// Clears the pauses that ran out by `now`; returns them as a bit mask (0 for a spurious
    /// call).
    pub fn on_timeout(&mut self, now: Instant) -> u8 {
        let mut expired = 0u8;
        for (p, slot) in self.paused_until.iter_mut().enumerate() {
            if slot.is_some_and(|t| t <= now) {
                *slot = None;
                expired |= 1 << p;
            }
        }
        expired
    }

    /// When `prio`'s pause runs out, if it is paused.
    pub fn paused_until(&self, prio: u8) -> Option<Instant> {
        self.paused_until.get(usize::from(prio)).copied().flatten()
    }
}

/// The PFC watchdog of one port's received pauses, as commodity switches have it (SONiC
/// `pfcwd`, Arista and Cisco "PFC watchdog"): a priority paused without a break for `detect`
/// is a PFC storm (a host or link that pauses for ever holds the priority, and through PFC its
/// senders); from then on the port stops honouring PAUSE for that priority, so its queue drains
/// towards the storming peer, until no PAUSE for it has arrived for `restore`.
///
/// Inputs: [`on_paused`](Self::on_paused) / [`on_resumed`](Self::on_resumed) as the port's
/// priority starts and stops being paused, [`on_pause_frame`](Self::on_pause_frame) for each
/// received PAUSE naming it (the answer says whether to honour it), and
/// [`on_timeout`](Self::on_timeout) at [`next_deadline`](Self::next_deadline).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PauseWatchdog {
    detect: Duration,
    restore: Duration,
    /// When each priority's current pause began.
    since: [Option<Instant>; PRIORITIES],
    /// Priorities in a storm: until when PAUSE for them is ignored (each ignored PAUSE moves
    /// it to `restore` after that frame).
    storm_until: [Option<Instant>; PRIORITIES],
}

/// What a watchdog timeout found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WatchdogTimeout {
    /// Priorities found storming now (bit n = priority n): the caller ends their pause.
    pub storms: u8,
    /// Priorities whose storm ended (PAUSE honoured again).
    pub restored: u8,
}

impl PauseWatchdog {
    pub fn new(detect: Duration, restore: Duration) -> Self {
        PauseWatchdog {
            detect,
            restore,
            since: [None; PRIORITIES],
            storm_until: [None; PRIORITIES],
        }
    }

    /// `prio` is paused from `now` (a pause already running keeps its start).
    pub fn on_paused(&mut self, now: Instant, prio: u8) {
        if let Some(s) = self.since.get_mut(usize::from(prio)) {
            s.get_or_insert(now);
        }
    }

    /// `prio` may send again.
    pub fn on_resumed(&mut self, prio: u8) {
        if let Some(s) = self.since.get_mut(usize::from(prio)) {
            *s = None;
        }
    }

    /// A received PAUSE names `prio`: whether to honour it (false while `prio` storms, which
    /// this frame prolongs).
    pub fn on_pause_frame(&mut self, now: Instant, prio: u8) -> bool {
        match self.storm_until.get_mut(usize::from(prio)) {
            Some(Some(until)) => {
                *until = now + self.restore;
                false
            }
            _ => true,
        }
    }

    /// Whether `prio` is in a storm (its PAUSE frames ignored).
    pub fn storming(&self, prio: u8) -> bool {
        self.storm_until
            .get(usize::from(prio))
            .is_some_and(Option::is_some)
    }

    /// The earliest detection or restoration due.
    pub fn next_deadline(&self) -> Option<Instant> {
        let detect = self.since.iter().flatten().map(|&s| s + self.detect);
        detect
            .chain(self.storm_until.iter().flatten().copied())
            .min()
    }

    /// Detections and restorations due at `now` (a spurious call finds none).
    pub fn on_timeout(&mut self, now: Instant) -> WatchdogTimeout {
        let mut out = WatchdogTimeout::default();
        for prio in 0..PRIORITIES {
            if self.storm_until[prio].is_some_and(|t| t <= now) {
                self.storm_until[prio] = None;
                out.restored |= 1 << prio;
            }
            if self.since[prio].is_some_and(|s| s + self.detect <= now) {
                self.since[prio] = None;
                self.storm_until[prio] = Some(now + self.restore);
                out.storms |= 1 << prio;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watchdog_finds_an_unbroken_pause_and_restores_after_a_quiet_spell() {
        let ms = |m: u64| Instant::ZERO + Duration::from_millis(m);
        let mut w = PauseWatchdog::new(Duration::from_millis(100), Duration::from_millis(200));
        assert_eq!(w.next_deadline(), None);
        // A pause with a break before 100 ms: nothing.
        w.on_paused(ms(0), 3);
        w.on_paused(ms(50), 3); // refreshed: the pause still began at 0
        assert_eq!(w.next_deadline(), Some(ms(100)));
        w.on_resumed(3);
        assert_eq!(w.next_deadline(), None);
        // Unbroken from 200 ms: a storm at 300 ms.
        w.on_paused(ms(200), 3);
        assert_eq!(w.on_timeout(ms(299)), WatchdogTimeout::default());
        let t = w.on_timeout(ms(300));
        assert_eq!((t.storms, t.restored), (1 << 3, 0));
        assert!(w.storming(3) && !w.storming(2));
        // PAUSE during the storm is not honoured and prolongs it.
        assert!(!w.on_pause_frame(ms(350), 3));
        assert!(w.on_pause_frame(ms(350), 2));
        assert_eq!(w.on_timeout(ms(500)), WatchdogTimeout::default());
        assert_eq!(w.next_deadline(), Some(ms(550)));
        let t = w.on_timeout(ms(550));
        assert_eq!((t.storms, t.restored), (0, 1 << 3));
        assert!(w.on_pause_frame(ms(560), 3));
    }
    use proptest::prelude::*;

    fn t(ns: u64) -> Instant {
        Instant::from_nanos(ns)
    }

    #[test]
    fn quanta_to_time() {
        // 0xFFFF * 512 = 33553920 bits at 10 Gb/s = 3355392 ns (protocols.md: 3.355 ms).
        assert_eq!(
            quanta_duration(QUANTA_MAX, Rate::from_gbps(10)),
            Duration::from_nanos(3_355_392)
        );
        // 1 quantum at 100 Gb/s = 512 bits / 100 = 5.12 ns -> 6 ns (rounded up).
        assert_eq!(
            quanta_duration(1, Rate::from_gbps(100)),
            Duration::from_nanos(6)
        );
    }

    /// Per-port headroom and shift (third.cc: a 400G port beside 100G NICs gets shift 1).
    /// Buffer 100000, reserve 4000, ports 0 (headroom 10000, shift 3) and 1 (headroom 30000,
    /// shift 1): total headroom 40000, threshold = (100000 - 40000 - 8000 - shared) >> shift.
    #[test]
    fn per_port_headroom_and_shift() {
        let prof = PfcProfile::new(&PfcParams {
            ports: 2,
            buffer_bytes: 100_000,
            headroom_bytes: 10_000,
            reserve_bytes: 4_000,
            ..PfcParams::default()
        })
        .unwrap();
        let ports = [
            PortPfc {
                headroom_bytes: 10_000,
                alpha_shift: 3,
            },
            PortPfc {
                headroom_bytes: 30_000,
                alpha_shift: 1,
            },
        ];
        let prof = prof.with_ports(&ports).unwrap();
        let pfc = PfcIngress::new(&prof);
        assert_eq!(pfc.threshold(&prof, 0), 52_000 >> 3);
        assert_eq!(pfc.threshold(&prof, 1), 52_000 >> 1);
        // Port 1 pauses only when its shared use reaches its own, larger threshold.
        let mut pfc = PfcIngress::new(&prof);
        let mut paused_after = [0u32; 2];
        for (port, n) in paused_after.iter_mut().enumerate() {
            while pfc
                .on_enqueue(&prof, t(0), port as u16, 3, 1_000)
                .unwrap()
                .action
                .is_none()
            {
                *n += 1;
            }
        }
        assert!(paused_after[1] > 2 * paused_after[0], "{paused_after:?}");
        // The list must cover every port, and the buffer the new total headroom.
        assert!(prof.clone().with_ports(&ports[..1]).is_err());
        let big = PortPfc {
            headroom_bytes: 50_000,
            alpha_shift: 3,
        };
        assert!(prof.with_ports(&[big, big]).is_err());
    }

    /// ns-3 HPCC dynamic threshold by hand. 2 ports, lossless prio 3, buffer 100000, headroom
    /// 10000 per port, reserve 4000, resume offset 3000, shift 3: total headroom 20000, total
    /// reserve 2*1*4000 = 8000, threshold = (100000-20000-8000-shared) >> 3 = (72000-shared)/8.
    #[test]
    fn dynamic_threshold_trace_by_hand() {
        let prof = PfcProfile::new(&PfcParams {
            ports: 2,
            buffer_bytes: 100_000,
            headroom_bytes: 10_000,
            reserve_bytes: 4_000,
            resume_offset_bytes: 3_000,
            ..PfcParams::default()
        })
        .unwrap();
        let mut pfc = PfcIngress::new(&prof);
        let now = t(0);
        assert_eq!(pfc.threshold(&prof, 0), 9_000);
        let enq = |pfc: &mut PfcIngress| pfc.on_enqueue(&prof, now, 0, 3, 1_000).unwrap();
        // Packets 1-4: new bytes 1000..4000 <= reserve: ingress only, shared 0, no pause.
        for _ in 0..4 {
            assert_eq!(enq(&mut pfc).action, None);
        }
        assert_eq!(
            (pfc.account(0, 3).unwrap().ingress_bytes, pfc.shared_used()),
            (4_000, 0)
        );
        // Packets 5..11 (k = 1..7 beyond the reserve): shared = 1000k; pause needs 1000k >=
        // (72000 - 1000k) >> 3, i.e. k >= 8. k = 7: 7000 >= 65000>>3 = 8125? no.
        for _ in 0..7 {
            assert_eq!(enq(&mut pfc).action, None);
        }
        assert_eq!(pfc.shared_used(), 7_000);
        // Packet 12 (k = 8): threshold before it (72000-7000)>>3 = 8125, new - reserve = 8000 <=
        // 8125 -> shared 8000; threshold now 64000>>3 = 8000; 8000 >= 8000 -> PAUSE 0xFFFF.
        let d = enq(&mut pfc);
        assert_eq!(
            d.action,
            Some(PfcAction::Pause {
                prio: 3,
                quanta: 0xFFFF
            })
        );
        assert_eq!(pfc.threshold(&prof, 0), 8_000);
        // Packet 13: new - reserve = 9000 > 8000 -> headroom 1000; already paused: no action.
        assert_eq!(
            enq(&mut pfc),
            IngressDecision {
                admitted: true,
                action: None
            }
        );
        assert_eq!(pfc.account(0, 3).unwrap().headroom_bytes, 1_000);
        // Until-resume mode has no timer.
        assert_eq!(pfc.next_deadline(), None);
        let deq = |pfc: &mut PfcIngress| pfc.on_dequeue(&prof, now, 0, 3, 1_000).unwrap();
        // Dequeue 1: taken from the headroom (1000 -> 0); shared 8000 + 3000 <= 8000? no.
        assert_eq!(deq(&mut pfc), None);
        // Dequeue 2: shared 7000, threshold 65000>>3 = 8125: 10000 <= 8125? no.
        // Dequeue 3: shared 6000, threshold 66000>>3 = 8250: 9000 <= 8250? no.
        assert_eq!(deq(&mut pfc), None);
        assert_eq!(deq(&mut pfc), None);
        // Dequeue 4: shared 5000, threshold 67000>>3 = 8375: 8000 <= 8375 -> RESUME.
        assert_eq!(deq(&mut pfc), Some(PfcAction::Resume { prio: 3 }));
        assert_eq!(pfc.shared_used(), 5_000);
        // Lossy priority 0: admitted, not counted, never paused.
        let d = pfc.on_enqueue(&prof, now, 1, 0, 1_000_000).unwrap();
        assert_eq!(
            d,
            IngressDecision {
                admitted: true,
                action: None
            }
        );
        // Bad port / priority: typed errors.
        assert_eq!(
            pfc.on_enqueue(&prof, now, 2, 3, 1),
            Err(PfcError::NoSuchPort { port: 2, ports: 2 })
        );
        assert_eq!(
            pfc.on_dequeue(&prof, now, 0, 8, 1),
            Err(PfcError::NoSuchPriority(8))
        );
    }

    /// Headroom exhausted in dynamic mode: ns-3 CheckIngressAdmission drops.
    #[test]
    fn dynamic_admission_drop() {
        let prof = PfcProfile::new(&PfcParams {
            ports: 1,
            buffer_bytes: 20_000,
            headroom_bytes: 2_000,
            reserve_bytes: 0,
            ..PfcParams::default()
        })
        .unwrap();
        // threshold = (20000 - 2000 - 0 - shared) >> 3 = 2250 at shared 0.
        let mut pfc = PfcIngress::new(&prof);
        let now = t(0);
        // 2000 octets: new - reserve = 2000 <= 2250 -> shared 2000; threshold 16000>>3 = 2000;
        // 2000 >= 2000 -> PAUSE.
        let d = pfc.on_enqueue(&prof, now, 0, 3, 2_000).unwrap();
        assert!(d.admitted && d.action.is_some());
        // 2000 more: 4000 > 2000 -> headroom 2000 (2000 + 0 <= 2000 headroom: admitted).
        assert!(pfc.on_enqueue(&prof, now, 0, 3, 2_000).unwrap().admitted);
        // 1 more: 1 + 2000 > 2000 headroom and 1 + 2000 > 2000 threshold -> drop.
        assert!(!pfc.on_enqueue(&prof, now, 0, 3, 1).unwrap().admitted);
        assert_eq!(pfc.account(0, 3).unwrap().held(), 4_000);
    }

    /// Static thresholds by hand: XOFF 10000, XON 7000, headroom 3000.
    #[test]
    fn static_threshold_trace_by_hand() {
        let prof = PfcProfile::new(&PfcParams {
            threshold: ThresholdMode::Static,
            xoff_bytes: 10_000,
            xon_bytes: 7_000,
            headroom_bytes: 3_000,
            ..PfcParams::default()
        })
        .unwrap();
        let mut pfc = PfcIngress::new(&prof);
        let now = t(0);
        // 9 x 1000: held 9000 < 10000: nothing. The 10th: 10000 >= XOFF -> PAUSE.
        for _ in 0..9 {
            assert_eq!(
                pfc.on_enqueue(&prof, now, 0, 3, 1_000).unwrap().action,
                None
            );
        }
        assert!(pfc
            .on_enqueue(&prof, now, 0, 3, 1_000)
            .unwrap()
            .action
            .is_some());
        // 3 more fill the headroom (13000 = XOFF + headroom); the 4th would exceed: drop.
        for _ in 0..3 {
            assert!(pfc.on_enqueue(&prof, now, 0, 3, 1_000).unwrap().admitted);
        }
        let a = pfc.account(0, 3).unwrap();
        assert_eq!((a.ingress_bytes, a.headroom_bytes), (10_000, 3_000));
        assert!(!pfc.on_enqueue(&prof, now, 0, 3, 1_000).unwrap().admitted);
        // Drain: 13000 -> 8000 in 5 steps, no resume (8000 > 7000); the 6th reaches 7000 -> XON.
        for _ in 0..5 {
            assert_eq!(pfc.on_dequeue(&prof, now, 0, 3, 1_000).unwrap(), None);
        }
        assert_eq!(
            pfc.on_dequeue(&prof, now, 0, 3, 1_000).unwrap(),
            Some(PfcAction::Resume { prio: 3 })
        );
    }

    /// Refresh mode by hand: 10 Gb/s, quanta 1000 = 512000 bits = 51200 ns; refresh at 50 % =
    /// 25600 ns after each PAUSE.
    #[test]
    fn refresh_trace_by_hand() {
        let prof = PfcProfile::new(&PfcParams {
            link_rate: Rate::from_gbps(10),
            threshold: ThresholdMode::Static,
            xoff_bytes: 1_000,
            xon_bytes: 0,
            pause: PauseMode::Refresh,
            pause_quanta: 1_000,
            ..PfcParams::default()
        })
        .unwrap();
        assert_eq!(prof.pause_duration(), Duration::from_nanos(51_200));
        let mut pfc = PfcIngress::new(&prof);
        let d = pfc.on_enqueue(&prof, t(0), 0, 3, 1_500).unwrap();
        assert_eq!(
            d.action,
            Some(PfcAction::Pause {
                prio: 3,
                quanta: 1_000
            })
        );
        assert_eq!(pfc.next_deadline(), Some(t(25_600)));
        // Spurious / early calls do nothing.
        assert_eq!(pfc.poll_timeout(&prof, t(25_599)), None);
        let f = pfc.poll_timeout(&prof, t(25_600)).unwrap();
        assert_eq!(
            f,
            PfcFrame {
                port: 0,
                action: PfcAction::Pause {
                    prio: 3,
                    quanta: 1_000
                }
            }
        );
        assert_eq!(pfc.poll_timeout(&prof, t(25_600)), None);
        assert_eq!(pfc.next_deadline(), Some(t(51_200)));
        // Drained to 0 <= XON at 30000: explicit resume, and the timer is gone.
        assert_eq!(
            pfc.on_dequeue(&prof, t(30_000), 0, 3, 1_500).unwrap(),
            Some(PfcAction::Resume { prio: 3 })
        );
        assert_eq!(pfc.next_deadline(), None);
    }

    /// The egress side by hand at 10 Gb/s.
    #[test]
    fn paused_state_by_hand() {
        let mut ps = PausedState::new(Rate::from_gbps(10));
        // PAUSE prio 3 with 0xFFFF at t = 1000: until 1000 + 3355392 = 3356392.
        assert!(ps.on_pause_frame(t(1_000), 3, QUANTA_MAX));
        assert!(ps.is_paused(t(3_356_391), 3));
        assert!(!ps.is_paused(t(3_356_392), 3));
        assert!(!ps.is_paused(t(1_000), 2));
        assert_eq!(ps.next_deadline(), Some(t(3_356_392)));
        // PAUSE prio 5 with 10 quanta at t = 2000: 5120 bits = 512 ns -> until 2512.
        ps.on_pause_frame(t(2_000), 5, 10);
        assert_eq!(ps.paused_mask(t(2_000)), 0b0010_1000);
        assert_eq!(ps.next_deadline(), Some(t(2_512)));
        assert_eq!(ps.on_timeout(t(2_511)), 0);
        assert_eq!(ps.on_timeout(t(2_512)), 1 << 5);
        // Resume (quanta 0) for prio 3.
        ps.on_pause_frame(t(3_000), 3, 0);
        assert!(!ps.is_paused(t(3_000), 3));
        assert_eq!(ps.next_deadline(), None);
        assert!(!ps.on_pause_frame(t(3_000), 8, 1));
    }

    #[test]
    fn validation_names_the_parameter() {
        let bad = |f: fn(&mut PfcParams)| {
            let mut p = PfcParams::default();
            f(&mut p);
            PfcProfile::new(&p).unwrap_err().param
        };
        assert_eq!(bad(|p| p.ports = 0), "ports");
        assert_eq!(
            bad(|p| p.lossless_priorities = vec![8]),
            "lossless_priorities"
        );
        assert_eq!(bad(|p| p.link_rate = Rate::ZERO), "link_rate");
        assert_eq!(
            bad(|p| {
                p.threshold = ThresholdMode::Static;
                p.xon_bytes = p.xoff_bytes + 1;
            }),
            "xon_bytes"
        );
        assert_eq!(bad(|p| p.buffer_bytes = 1_000), "buffer_bytes");
        assert_eq!(bad(|p| p.pause_quanta = 0), "pause_quanta");
        assert_eq!(
            bad(|p| {
                p.pause = PauseMode::Refresh;
                p.refresh_percent = 100;
            }),
            "refresh_percent"
        );
        assert_eq!(bad(|p| p.alpha_shift = 31), "alpha_shift");
    }

    #[derive(Clone, Debug)]
    enum Op {
        Enq { port: u16, prio: u8, bytes: u64 },
        Deq { port: u16, prio: u8, bytes: u64 },
        Wait(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (0u16..3, prop_oneof![Just(3u8), Just(4u8), Just(0u8)], 64u64..3_000)
                .prop_map(|(port, prio, bytes)| Op::Enq { port, prio, bytes }),
            3 => (0u16..3, prop_oneof![Just(3u8), Just(4u8), Just(0u8)], 64u64..3_000)
                .prop_map(|(port, prio, bytes)| Op::Deq { port, prio, bytes }),
            1 => (1u64..200_000).prop_map(Op::Wait),
        ]
    }

    proptest! {
        /// Model-based, ingress + egress together: a switch in refresh or until-resume mode,
        /// random arrivals/departures/time; each PFC frame goes straight to the upstream port's
        /// PausedState. Checks: bytes held match the model; shared use equals the sum of
        /// per-queue use above the reserve; new PAUSE and resume alternate per (port, prio) and
        /// refreshes come only while paused; in refresh mode, while the switch holds a priority
        /// paused, the upstream stays paused (the refresh always comes before the quanta run
        /// out); in every mode, a priority upstream is never paused past its last PAUSE's quanta.
        #[test]
        fn pfc_model(
            dynamic in any::<bool>(),
            refresh in any::<bool>(),
            quanta in 100u16..=2_000,
            pct in 1u8..=99,
            ops in prop::collection::vec(op(), 1..300),
        ) {
            let prof = PfcProfile::new(&PfcParams {
                ports: 3,
                lossless_priorities: vec![3, 4],
                link_rate: Rate::from_gbps(10),
                threshold: if dynamic { ThresholdMode::Dynamic } else { ThresholdMode::Static },
                xoff_bytes: 12_000,
                xon_bytes: 6_000,
                headroom_bytes: 6_000,
                buffer_bytes: 120_000,
                reserve_bytes: 2_000,
                resume_offset_bytes: 1_000,
                alpha_shift: 2,
                pause: if refresh { PauseMode::Refresh } else { PauseMode::UntilResume },
                pause_quanta: if refresh { quanta } else { QUANTA_MAX },
                refresh_percent: pct,
                ..PfcParams::default()
            }).unwrap();
            let dur = prof.pause_duration();
            let mut sw = PfcIngress::new(&prof);
            let mut up: Vec<PausedState> = (0..3).map(|_| PausedState::new(Rate::from_gbps(10))).collect();
            let mut held = [[0u64; 8]; 3];
            let mut paused = [[false; 8]; 3];
            let mut last_pause = [[None::<Instant>; 8]; 3];
            let mut now = Instant::ZERO;

            let apply = |port: u16, a: PfcAction, from_timer: bool, now: Instant,
                             up: &mut Vec<PausedState>, paused: &mut [[bool; 8]; 3],
                             last_pause: &mut [[Option<Instant>; 8]; 3]| -> Result<(), TestCaseError> {
                let p = usize::from(port);
                match a {
                    PfcAction::Pause { prio, quanta } => {
                        let k = usize::from(prio);
                        // A PAUSE while paused is only ever a refresh from the timer.
                        prop_assert!(!paused[p][k] || from_timer);
                        paused[p][k] = true;
                        last_pause[p][k] = Some(now);
                        up[p].on_pause_frame(now, prio, quanta);
                    }
                    PfcAction::Resume { prio } => {
                        let k = usize::from(prio);
                        prop_assert!(paused[p][k]);
                        paused[p][k] = false;
                        up[p].on_pause_frame(now, prio, 0);
                    }
                }
                Ok(())
            };

            for o in ops {
                match o {
                    Op::Enq { port, prio, bytes } => {
                        let d = sw.on_enqueue(&prof, now, port, prio, bytes).unwrap();
                        if d.admitted && prof.is_lossless(prio) {
                            held[usize::from(port)][usize::from(prio)] += bytes;
                        }
                        if let Some(a) = d.action {
                            apply(port, a, false, now, &mut up, &mut paused, &mut last_pause)?;
                        }
                    }
                    Op::Deq { port, prio, bytes } => {
                        let h = &mut held[usize::from(port)][usize::from(prio)];
                        let bytes = bytes.min(*h);
                        if bytes == 0 { continue; }
                        *h -= bytes;
                        if let Some(a) = sw.on_dequeue(&prof, now, port, prio, bytes).unwrap() {
                            apply(port, a, false, now, &mut up, &mut paused, &mut last_pause)?;
                        }
                    }
                    Op::Wait(dt) => {
                        let end = now + Duration::from_nanos(dt);
                        // Process every deadline on the way, in time order.
                        while let Some(d) = sw.next_deadline().filter(|&d| d <= end) {
                            prop_assert!(d >= now);
                            now = d;
                            while let Some(f) = sw.poll_timeout(&prof, now) {
                                apply(f.port, f.action, true, now, &mut up, &mut paused, &mut last_pause)?;
                            }
                        }
                        now = end;
                    }
                }
                let mut shared = 0;
                for port in 0..3u16 {
                    for prio in 0..8u8 {
                        let (p, k) = (usize::from(port), usize::from(prio));
                        let a = sw.account(port, prio).unwrap();
                        prop_assert_eq!(a.held(), held[p][k]);
                        prop_assert_eq!(a.paused, paused[p][k]);
                        shared += a.ingress_bytes.saturating_sub(2_000);
                        let up_paused = up[p].is_paused(now, prio);
                        if let Some(t0) = last_pause[p][k] {
                            // Never paused past the last PAUSE's quanta.
                            if now >= t0 + dur { prop_assert!(!up_paused); }
                            if refresh && paused[p][k] {
                                prop_assert!(now < t0 + dur);
                                prop_assert!(up_paused);
                            }
                        } else {
                            prop_assert!(!up_paused);
                        }
                    }
                }
                if dynamic { prop_assert_eq!(sw.shared_used(), shared); }
            }
        }

        /// Egress model: after random PAUSE/resume frames and time, a priority is paused iff its
        /// last frame had quanta > 0 and that many quanta have not yet elapsed; on_timeout clears
        /// exactly the expired ones.
        #[test]
        fn paused_state_model(
            frames in prop::collection::vec((0u64..5_000, 0u8..8, prop_oneof![Just(0u16), 1u16..50]), 1..100),
        ) {
            let rate = Rate::from_gbps(1);
            let mut ps = PausedState::new(rate);
            let mut until = [None::<Instant>; 8];
            let mut now = Instant::ZERO;
            for (dt, prio, quanta) in frames {
                now += Duration::from_nanos(dt);
                let expired = ps.on_timeout(now);
                for (p, u) in until.iter_mut().enumerate() {
                    let was = u.is_some_and(|u| u <= now);
                    prop_assert_eq!(expired & (1 << p) != 0, was);
                    if was { *u = None; }
                }
                ps.on_pause_frame(now, prio, quanta);
                until[usize::from(prio)] = (quanta > 0).then(|| now + quanta_duration(quanta, rate));
                for p in 0..8u8 {
                    let want = until[usize::from(p)].is_some_and(|u| now < u);
                    prop_assert_eq!(ps.is_paused(now, p), want);
                }
                prop_assert_eq!(ps.next_deadline(), until.iter().flatten().copied().min());
            }
        }
    }
}
