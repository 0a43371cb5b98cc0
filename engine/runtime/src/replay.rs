//! `quench replay`: drives one algorithm of `cp` / `rp` / `np` from an event file and writes its
//! state after every event as CSV. A researcher's tool and our conformance harness.
//!
//! Event file: CSV with the header `time_ns,event,value`; blank lines and lines starting with
//! `#` are skipped; times never go backwards. Events per algorithm:
//!
//! | algo | events (value) |
//! |---|---|
//! | `qcn-cp`, `dcqcn-cp` | `enqueue` / `dequeue` (frame octets), `tick` |
//! | `pfc` | `enqueue` / `dequeue` (octets on the ingress port 0, first lossless priority), `pause` (quanta received on the egress port, 0 = resume), `resume`, `tick` |
//! | `tcd` | `enqueue` / `dequeue` (octets), `pause` / `resume` (the port goes OFF / ON), `tick` |
//! | `qcn-rp` | `tx` (octets sent by flow 1), `cnm` (QntzFb), `tick` |
//! | `dcqcn-rp` | `tx` (octets sent by the flow), `cnp`, `ue` (a TCD UE notification), `tick` |
//! | `np` | `rx` (the ECN bits 0..=3 of a data packet of flow 1), `tick` |
//!
//! Timers that fall due between events (RP timers, PFC refreshes and pause expiry, the TCD trend
//! period) are processed in time order before the event at or after their deadline, each
//! printed as a row with event `timer`. `tick` only lets time pass.
//!
//! Config file: TOML with one optional table per algorithm (`[qcn_cp]`, `[red]`, `[pfc]`,
//! `[tcd]`, `[qcn_rp]`, `[dcqcn_rp]`, `[np]`; the presets in `configs/` load as they are) holding that algorithm's parameters under the names its crate documents,
//! and a top-level `line_rate` for the reaction points (default `"10gbit"`). A missing table
//! means the defaults. Unknown keys are errors.
//!
//! Conventions: the CP replays keep the queue themselves (enqueue adds, dequeue removes, never
//! below 0); RED sees ECT(0) packets and TCD sees TCD-capable (01) packets; the QCN RP's flow is
//! backlogged (its limiter queue is never empty, so a limiter is never released by `tx`).
use std::fmt::Write as _;
use std::io::Write;
use std::path::Path;

use anyhow::Context as _;
use rand_xoshiro::rand_core::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Deserialize;
use units::{FlowId, Instant, Rate};

use cp::pfc::{PausedState, PfcAction, PfcIngress, PfcParams, PfcProfile};
use cp::qcn::{QcnCp, QcnCpParams, QcnCpProfile};
use cp::red::{RedParams, RedProfile};
use cp::tcd::{PortState, TcdCodepoint, TcdParams, TcdPort, TcdProfile};
use cp::Ecn;

/// The algorithms `quench replay` drives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Algo {
    /// QCN congestion point (cp::qcn).
    QcnCp,
    /// QCN reaction point (rp::qcn).
    QcnRp,
    /// DCQCN congestion point: RED/ECN marking (cp::red).
    DcqcnCp,
    /// PFC ingress accounting and egress paused state (cp::pfc).
    Pfc,
    /// Ternary congestion detection (cp::tcd).
    Tcd,
    /// DCQCN reaction point, "mlx" or "paper" variant (rp::dcqcn).
    DcqcnRp,
    /// DCQCN notification point: CNP generation (np).
    Np,
}

/// The replay config file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplayConfig {
    /// Line rate of the reaction point's port, e.g. `"10gbit"`.
    pub line_rate: Option<String>,
    pub qcn_cp: Option<QcnCpParams>,
    pub red: Option<RedParams>,
    pub pfc: Option<PfcParams>,
    pub tcd: Option<TcdParams>,
    pub qcn_rp: Option<rp::QcnParams>,
    pub dcqcn_rp: Option<rp::DcqcnParams>,
    pub np: Option<np::NpParams>,
}

impl ReplayConfig {
    /// Parses `text`; `origin` (the file name) prefixes every error.
    pub fn parse(text: &str, origin: &str) -> anyhow::Result<Self> {
        quench_config::file::from_str(text, origin).map_err(anyhow::Error::msg)
    }

    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Validates every table (absent ones as their defaults) as `quench replay` would for
    /// each algorithm; errors name `origin`, the config file.
    pub fn check(&self, origin: &str) -> anyhow::Result<()> {
        use clap::ValueEnum as _;
        for algo in Algo::value_variants() {
            build(*algo, self, 0).with_context(|| origin.to_string())?;
        }
        Ok(())
    }

    fn line_rate(&self) -> anyhow::Result<Rate> {
        match &self.line_rate {
            None => Ok(Rate::from_gbps(10)),
            Some(s) => Rate::parse(s).map_err(|e| anyhow::anyhow!("`line_rate` = {s:?}: {e}")),
        }
    }
}

/// The kinds of event an event file may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    Enqueue,
    Dequeue,
    Tx,
    Cnm,
    Cnp,
    Pause,
    Resume,
    Tick,
    Rx,
    Ue,
}

impl EventKind {
    const ALL: [(&'static str, EventKind); 10] = [
        ("enqueue", EventKind::Enqueue),
        ("dequeue", EventKind::Dequeue),
        ("tx", EventKind::Tx),
        ("cnm", EventKind::Cnm),
        ("cnp", EventKind::Cnp),
        ("pause", EventKind::Pause),
        ("resume", EventKind::Resume),
        ("tick", EventKind::Tick),
        ("rx", EventKind::Rx),
        ("ue", EventKind::Ue),
    ];

    fn name(self) -> &'static str {
        EventKind::ALL
            .iter()
            .find(|(_, k)| *k == self)
            .map_or("?", |(n, _)| n)
    }
}

/// One event of the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    pub time: Instant,
    pub kind: EventKind,
    pub value: u64,
    /// 1-based line in the file, for error messages.
    pub line: usize,
}

/// A bad event file; `line` and `column` are 1-based (column = character position of the field).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EventError {
    #[error("line {line}: the header must be `time_ns,event,value`, found `{found}`")]
    Header { line: usize, found: String },
    #[error("line {line}: expected 3 fields `time_ns,event,value`, found {found}")]
    FieldCount { line: usize, found: usize },
    #[error("line {line}, column {column}: time_ns `{text}` is not a whole number of ns")]
    BadTime {
        line: usize,
        column: usize,
        text: String,
    },
    #[error(
        "line {line}, column {column}: time {time} ns is before the previous event ({prev} ns)"
    )]
    TimeBackwards {
        line: usize,
        column: usize,
        time: u64,
        prev: u64,
    },
    #[error("line {line}, column {column}: unknown event `{text}` (for {algo}: {allowed})")]
    BadEvent {
        line: usize,
        column: usize,
        text: String,
        algo: String,
        allowed: String,
    },
    #[error("line {line}, column {column}: value `{text}` is not a whole number")]
    BadValue {
        line: usize,
        column: usize,
        text: String,
    },
    #[error("line {line}, column {column}: value {value} out of range for `{event}` ({range})")]
    ValueRange {
        line: usize,
        column: usize,
        value: u64,
        event: &'static str,
        range: &'static str,
    },
    #[error("the file has no header line `time_ns,event,value`")]
    Empty,
}

/// Parses an event file for `algo`.
pub fn parse_events(text: &str, algo: Algo) -> Result<Vec<Event>, EventError> {
    let allowed = allowed_events(algo);
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l))
        .filter(|(_, l)| !l.trim().is_empty() && !l.trim_start().starts_with('#'));
    let (hline, header) = lines.next().ok_or(EventError::Empty)?;
    let cols: Vec<&str> = header.split(',').map(str::trim).collect();
    if cols != ["time_ns", "event", "value"] {
        return Err(EventError::Header {
            line: hline,
            found: header.to_string(),
        });
    }
    let mut out = Vec::new();
    let mut prev = 0u64;
    for (line, text) in lines {
        // Column of each field: 1 + the characters before it.
        let mut fields = Vec::with_capacity(3);
        let mut col = 1;
        for f in text.split(',') {
            fields.push((col, f));
            col += f.chars().count() + 1;
        }
        if fields.len() != 3 {
            return Err(EventError::FieldCount {
                line,
                found: fields.len(),
            });
        }
        let (tcol, traw) = fields[0];
        let (ecol, eraw) = fields[1];
        let (vcol, vraw) = fields[2];
        let (tcol, ecol, vcol) = (tcol + lead(traw), ecol + lead(eraw), vcol + lead(vraw));
        let time: u64 = traw.trim().parse().map_err(|_| EventError::BadTime {
            line,
            column: tcol,
            text: traw.trim().to_string(),
        })?;
        if time < prev {
            return Err(EventError::TimeBackwards {
                line,
                column: tcol,
                time,
                prev,
            });
        }
        prev = time;
        let name = eraw.trim();
        let kind = EventKind::ALL
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, k)| *k)
            .filter(|k| allowed.contains(k))
            .ok_or_else(|| EventError::BadEvent {
                line,
                column: ecol,
                text: name.to_string(),
                algo: format!("{algo:?}"),
                allowed: allowed
                    .iter()
                    .map(|k| k.name())
                    .collect::<Vec<_>>()
                    .join(", "),
            })?;
        let vtext = vraw.trim();
        // `tick`, `cnp`, `resume` and TCD's `pause` carry no value: an empty field is 0.
        let no_value = matches!(
            kind,
            EventKind::Tick | EventKind::Cnp | EventKind::Ue | EventKind::Resume
        ) || (kind == EventKind::Pause && algo == Algo::Tcd);
        let value: u64 = if vtext.is_empty() && no_value {
            0
        } else {
            vtext.parse().map_err(|_| EventError::BadValue {
                line,
                column: vcol,
                text: vtext.to_string(),
            })?
        };
        let range = match kind {
            EventKind::Cnm if value > 63 => Some("QntzFb is 0..=63"),
            EventKind::Pause if value > 0xFFFF => Some("pause quanta are 0..=65535"),
            EventKind::Rx if value > 3 => Some("ECN bits are 0..=3"),
            EventKind::Enqueue | EventKind::Dequeue | EventKind::Tx if value > 1 << 32 => {
                Some("octets are 0..=2^32")
            }
            _ => None,
        };
        if let Some(range) = range {
            return Err(EventError::ValueRange {
                line,
                column: vcol,
                value,
                event: kind.name(),
                range,
            });
        }
        out.push(Event {
            time: Instant::from_nanos(time),
            kind,
            value,
            line,
        });
    }
    Ok(out)
}

/// Leading whitespace characters of a field, so columns point at the text itself.
fn lead(f: &str) -> usize {
    f.chars().take_while(|c| c.is_whitespace()).count()
}

fn allowed_events(algo: Algo) -> &'static [EventKind] {
    use EventKind::*;
    match algo {
        Algo::QcnCp | Algo::DcqcnCp => &[Enqueue, Dequeue, Tick],
        Algo::Pfc | Algo::Tcd => &[Enqueue, Dequeue, Pause, Resume, Tick],
        Algo::QcnRp => &[Tx, Cnm, Tick],
        Algo::DcqcnRp => &[Tx, Cnp, Ue, Tick],
        Algo::Np => &[Rx, Tick],
    }
}

/// One algorithm under replay.
trait Replayer {
    /// The CSV columns after `time_ns,event,value`.
    fn columns(&self) -> &'static str;
    fn next_deadline(&self) -> Option<Instant>;
    /// Runs what is due at `now` (a deadline); returns the state row.
    fn on_timer(&mut self, now: Instant) -> String;
    /// Applies one event; returns the state row.
    fn on_event(&mut self, ev: &Event) -> anyhow::Result<String>;
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or(String::new(), |v| v.to_string())
}

fn bit(b: bool) -> &'static str {
    if b {
        "1"
    } else {
        "0"
    }
}

struct QcnCpReplay {
    profile: QcnCpProfile,
    cp: QcnCp,
    queue: u64,
    rng: Xoshiro256PlusPlus,
}

impl Replayer for QcnCpReplay {
    fn columns(&self) -> &'static str {
        "queue_bytes,q_old,fb,qntz_fb,sampled,de,cnm_qntz_fb,cnm_qoffset,cnm_qdelta,bytes_until_sample"
    }
    fn next_deadline(&self) -> Option<Instant> {
        None
    }
    fn on_timer(&mut self, _now: Instant) -> String {
        String::new()
    }
    fn on_event(&mut self, ev: &Event) -> anyhow::Result<String> {
        let d = match ev.kind {
            EventKind::Enqueue => {
                self.queue = self.queue.saturating_add(ev.value);
                let bytes = u32::try_from(ev.value).unwrap_or(u32::MAX);
                Some(
                    self.cp
                        .on_frame(&self.profile, self.queue, bytes, &mut self.rng),
                )
            }
            EventKind::Dequeue => {
                self.queue = self.queue.saturating_sub(ev.value);
                None
            }
            _ => None,
        };
        let f = d.and_then(|d| d.feedback);
        Ok(format!(
            "{},{},{},{},{},{},{},{},{},{}",
            self.queue,
            self.cp.q_old(),
            opt(d.map(|d| d.fb)),
            opt(d.map(|d| d.qntz_fb)),
            d.map_or("", |d| bit(d.sampled)),
            d.map_or("", |d| bit(d.discard_eligible)),
            opt(f.map(|f| f.qntz_fb)),
            opt(f.map(|f| f.qoffset)),
            opt(f.map(|f| f.qdelta)),
            self.cp.bytes_until_sample(),
        ))
    }
}

struct RedReplay {
    profile: RedProfile,
    queue: u64,
    rng: Xoshiro256PlusPlus,
}

impl Replayer for RedReplay {
    fn columns(&self) -> &'static str {
        "queue_bytes,probability,ecn_out"
    }
    fn next_deadline(&self) -> Option<Instant> {
        None
    }
    fn on_timer(&mut self, _now: Instant) -> String {
        String::new()
    }
    fn on_event(&mut self, ev: &Event) -> anyhow::Result<String> {
        let mark = match ev.kind {
            EventKind::Enqueue => {
                self.queue = self.queue.saturating_add(ev.value);
                Some(
                    self.profile
                        .on_enqueue(self.queue, Ecn::Ect0, &mut self.rng),
                )
            }
            EventKind::Dequeue => {
                self.queue = self.queue.saturating_sub(ev.value);
                Some(
                    self.profile
                        .on_dequeue(self.queue, Ecn::Ect0, &mut self.rng),
                )
            }
            _ => None,
        };
        let out = mark.map(|m| match m.apply(Ecn::Ect0) {
            Ecn::Ce => "ce",
            _ => "ect0",
        });
        Ok(format!(
            "{},{},{}",
            self.queue,
            self.profile.probability(self.queue),
            out.unwrap_or("")
        ))
    }
}

struct PfcReplay {
    profile: PfcProfile,
    ingress: PfcIngress,
    prio: u8,
    upstream: PausedState,
    now: Instant,
}

impl PfcReplay {
    fn row(&self, sent: &str) -> String {
        let a = self
            .ingress
            .account(0, self.prio)
            .copied()
            .unwrap_or_default();
        format!(
            "{},{},{},{},{},{},{},{}",
            a.ingress_bytes,
            a.headroom_bytes,
            self.ingress.shared_used(),
            self.ingress.threshold(&self.profile, 0),
            bit(a.paused),
            sent,
            self.upstream.paused_mask(self.now),
            opt(self.upstream.paused_until(self.prio).map(|t| t.as_nanos())),
        )
    }
}

fn action_text(a: Option<PfcAction>) -> String {
    match a {
        None => String::new(),
        Some(PfcAction::Pause { quanta, .. }) => format!("pause:{quanta}"),
        Some(PfcAction::Resume { .. }) => "resume".to_string(),
    }
}

impl Replayer for PfcReplay {
    fn columns(&self) -> &'static str {
        "ingress_bytes,headroom_bytes,shared_used,threshold,paused,sent,upstream_paused_mask,upstream_paused_until_ns"
    }
    fn next_deadline(&self) -> Option<Instant> {
        [self.ingress.next_deadline(), self.upstream.next_deadline()]
            .into_iter()
            .flatten()
            .min()
    }
    fn on_timer(&mut self, now: Instant) -> String {
        self.now = now;
        let mut sent = Vec::new();
        while let Some(f) = self.ingress.poll_timeout(&self.profile, now) {
            sent.push(action_text(Some(f.action)));
        }
        self.upstream.on_timeout(now);
        self.row(&sent.join(" "))
    }
    fn on_event(&mut self, ev: &Event) -> anyhow::Result<String> {
        self.now = ev.time;
        let sent = match ev.kind {
            EventKind::Enqueue => {
                let d = self
                    .ingress
                    .on_enqueue(&self.profile, ev.time, 0, self.prio, ev.value)?;
                if d.admitted {
                    action_text(d.action)
                } else {
                    "drop".to_string()
                }
            }
            EventKind::Dequeue => action_text(self.ingress.on_dequeue(
                &self.profile,
                ev.time,
                0,
                self.prio,
                ev.value,
            )?),
            EventKind::Pause => {
                // `value` fits u16: checked by the parser.
                self.upstream
                    .on_pause_frame(ev.time, self.prio, ev.value as u16);
                String::new()
            }
            EventKind::Resume => {
                self.upstream.on_pause_frame(ev.time, self.prio, 0);
                String::new()
            }
            _ => String::new(),
        };
        Ok(self.row(&sent))
    }
}

struct TcdReplay {
    profile: TcdProfile,
    port: TcdPort,
    queue: u64,
}

impl TcdReplay {
    fn row(&self, now: Instant, out: Option<TcdCodepoint>) -> String {
        let state = match self.port.state() {
            PortState::NonCongestion => "non_congestion",
            PortState::Undetermined => "undetermined",
            PortState::Congestion => "congestion",
        };
        let out = out.map_or("", |c| match c {
            TcdCodepoint::NotCapable => "00",
            TcdCodepoint::Capable => "01",
            TcdCodepoint::Ue => "10",
            TcdCodepoint::Ce => "11",
        });
        format!(
            "{},{},{},{},{},{}",
            self.queue,
            state,
            bit(self.port.is_off()),
            opt(self.port.ton(now).map(|d| d.as_nanos())),
            self.profile.max_ton().as_nanos(),
            out
        )
    }
}

impl Replayer for TcdReplay {
    fn columns(&self) -> &'static str {
        "queue_bytes,state,off,ton_ns,max_ton_ns,codepoint_out"
    }
    fn next_deadline(&self) -> Option<Instant> {
        self.port.next_deadline(&self.profile)
    }
    fn on_timer(&mut self, now: Instant) -> String {
        self.port.on_timeout(&self.profile, now, self.queue);
        self.row(now, None)
    }
    fn on_event(&mut self, ev: &Event) -> anyhow::Result<String> {
        let now = ev.time;
        let out = match ev.kind {
            EventKind::Enqueue => {
                self.queue = self.queue.saturating_add(ev.value);
                None
            }
            EventKind::Dequeue => {
                self.queue = self.queue.saturating_sub(ev.value);
                Some(
                    self.port
                        .on_dequeue(&self.profile, now, self.queue, TcdCodepoint::Capable),
                )
            }
            EventKind::Pause => {
                self.port.on_pause(&self.profile, now);
                None
            }
            EventKind::Resume => {
                self.port.on_resume(now);
                None
            }
            _ => None,
        };
        Ok(self.row(now, out))
    }
}

const RP_FLOW: FlowId = FlowId(1);

struct QcnRpReplay {
    rp: rp::QcnRp,
}

impl QcnRpReplay {
    fn row(&self, outcome: &str) -> String {
        let s = self.rp.snapshot(RP_FLOW);
        format!(
            "{},{},{},{},{},{},{},{}",
            self.rp.rate(RP_FLOW).as_bps(),
            self.rp.target_rate(RP_FLOW).as_bps(),
            bit(s.is_some()),
            opt(s.map(|s| s.tx_bcount)),
            opt(s.map(|s| s.si_count)),
            opt(s.map(|s| s.timer_scount)),
            opt(self.rp.next_deadline().map(|t| t.as_nanos())),
            outcome,
        )
    }
}

impl Replayer for QcnRpReplay {
    fn columns(&self) -> &'static str {
        "rate_bps,target_rate_bps,limited,tx_bcount,si_count,timer_scount,next_deadline_ns,outcome"
    }
    fn next_deadline(&self) -> Option<Instant> {
        self.rp.next_deadline()
    }
    fn on_timer(&mut self, now: Instant) -> String {
        self.rp.on_timeout(now);
        self.row("")
    }
    fn on_event(&mut self, ev: &Event) -> anyhow::Result<String> {
        let outcome = match ev.kind {
            EventKind::Tx => format!("{:?}", self.rp.on_tx(ev.time, RP_FLOW, ev.value, false)),
            EventKind::Cnm => {
                // `value` fits 6 bits: checked by the parser.
                match self.rp.on_cnm(ev.time, RP_FLOW, ev.value as u8)? {
                    rp::CnmOutcome::Decreased { new_limiter, .. } => {
                        format!("Decreased{}", if new_limiter { "+new" } else { "" })
                    }
                    o => format!("{o:?}"),
                }
            }
            _ => String::new(),
        };
        Ok(self.row(&outcome))
    }
}

struct DcqcnRpReplay {
    rp: rp::DcqcnRp,
}

impl Replayer for DcqcnRpReplay {
    fn columns(&self) -> &'static str {
        "rate_bps,target_rate_bps,alpha,time_stage,byte_stage,byte_count,cnp_pending,held_increases,next_deadline_ns"
    }
    fn next_deadline(&self) -> Option<Instant> {
        self.rp.next_deadline()
    }
    fn on_timer(&mut self, now: Instant) -> String {
        self.rp.on_timeout(now);
        self.row()
    }
    fn on_event(&mut self, ev: &Event) -> anyhow::Result<String> {
        match ev.kind {
            EventKind::Tx => self.rp.on_tx(ev.time, ev.value),
            EventKind::Cnp => self.rp.on_cnp(ev.time),
            EventKind::Ue => self.rp.on_ue(ev.time),
            _ => {}
        }
        Ok(self.row())
    }
}

impl DcqcnRpReplay {
    fn row(&self) -> String {
        let s = self.rp.state().snapshot();
        format!(
            "{},{},{},{},{},{},{},{},{}",
            s.rate.as_bps(),
            s.target_rate.as_bps(),
            s.alpha,
            s.time_stage,
            s.byte_stage,
            s.byte_count,
            bit(s.cnp_pending),
            s.held_increases,
            opt(self.rp.next_deadline().map(|t| t.as_nanos())),
        )
    }
}

struct NpReplay {
    np: np::Np,
}

impl Replayer for NpReplay {
    fn columns(&self) -> &'static str {
        "mark,decision,cnps,ue_sent,suppressed,tracked"
    }
    fn next_deadline(&self) -> Option<Instant> {
        None
    }
    fn on_timer(&mut self, _now: Instant) -> String {
        String::new()
    }
    fn on_event(&mut self, ev: &Event) -> anyhow::Result<String> {
        let (mark, decision) = match ev.kind {
            EventKind::Rx => {
                // `value` fits 2 bits: checked by the parser.
                let mark = np::Mark::from_ecn(ev.value as u8, self.np.profile().tcd);
                let d = self.np.on_arrival(ev.time, RP_FLOW, mark);
                (format!("{mark:?}"), format!("{d:?}"))
            }
            _ => (String::new(), String::new()),
        };
        let c = self.np.counters();
        Ok(format!(
            "{mark},{decision},{},{},{},{}",
            c.cnps,
            c.ue_sent,
            c.suppressed,
            self.np.tracked()
        ))
    }
}

fn build(algo: Algo, cfg: &ReplayConfig, seed: u64) -> anyhow::Result<Box<dyn Replayer>> {
    let rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    Ok(match algo {
        Algo::QcnCp => {
            let profile =
                QcnCpProfile::new(&cfg.qcn_cp.clone().unwrap_or_default()).context("[qcn_cp]")?;
            Box::new(QcnCpReplay {
                cp: QcnCp::new(&profile),
                profile,
                queue: 0,
                rng,
            })
        }
        Algo::DcqcnCp => Box::new(RedReplay {
            profile: RedProfile::new(&cfg.red.clone().unwrap_or_default()).context("[red]")?,
            queue: 0,
            rng,
        }),
        Algo::Pfc => {
            let params = cfg.pfc.clone().unwrap_or_default();
            let profile = PfcProfile::new(&params).context("[pfc]")?;
            let prio = *params
                .lossless_priorities
                .iter()
                .min()
                .context("[pfc] `lossless_priorities` is empty: nothing to replay")?;
            Box::new(PfcReplay {
                ingress: PfcIngress::new(&profile),
                upstream: PausedState::new(profile.link_rate()),
                profile,
                prio,
                now: Instant::ZERO,
            })
        }
        Algo::Tcd => {
            let profile = TcdProfile::new(&cfg.tcd.clone().unwrap_or_default()).context("[tcd]")?;
            Box::new(TcdReplay {
                port: TcdPort::new(&profile, Instant::ZERO),
                profile,
                queue: 0,
            })
        }
        Algo::QcnRp => {
            let profile = cfg
                .qcn_rp
                .clone()
                .unwrap_or_default()
                .profile(cfg.line_rate()?)
                .context("[qcn_rp]")?;
            Box::new(QcnRpReplay {
                rp: rp::QcnRp::new(profile),
            })
        }
        Algo::DcqcnRp => {
            let profile = cfg
                .dcqcn_rp
                .clone()
                .unwrap_or_default()
                .profile(cfg.line_rate()?)
                .context("[dcqcn_rp]")?;
            Box::new(DcqcnRpReplay {
                rp: rp::DcqcnRp::new(profile),
            })
        }
        Algo::Np => {
            let profile = cfg
                .np
                .clone()
                .unwrap_or_default()
                .profile()
                .context("[np]")?;
            Box::new(NpReplay {
                np: np::Np::new(profile),
            })
        }
    })
}

/// Replays `events` through `algo` configured by `cfg`, writing the CSV to `out`.
pub fn replay(
    algo: Algo,
    cfg: &ReplayConfig,
    events: &[Event],
    seed: u64,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let mut r = build(algo, cfg, seed)?;
    writeln!(out, "time_ns,event,value,{}", r.columns())?;
    let mut row = String::new();
    for ev in events {
        // Timers due at or before the event, in time order.
        while let Some(d) = r.next_deadline().filter(|&d| d <= ev.time) {
            let state = r.on_timer(d);
            if r.next_deadline() == Some(d) {
                anyhow::bail!("internal: a timer at {} ns did not move", d.as_nanos());
            }
            writeln!(out, "{},timer,,{state}", d.as_nanos())?;
        }
        let state = r
            .on_event(ev)
            .with_context(|| format!("line {}: {} event", ev.line, ev.kind.name()))?;
        row.clear();
        write!(
            row,
            "{},{},{},{state}",
            ev.time.as_nanos(),
            ev.kind.name(),
            ev.value
        )?;
        writeln!(out, "{row}")?;
    }
    Ok(())
}

/// Replays text inputs to a CSV string (for tests and tools).
pub fn replay_to_string(
    algo: Algo,
    config: &str,
    events: &str,
    seed: u64,
) -> anyhow::Result<String> {
    let cfg = ReplayConfig::parse(config, "config")?;
    let evs = parse_events(events, algo)?;
    let mut out = Vec::new();
    replay(algo, &cfg, &evs, seed, &mut out)?;
    Ok(String::from_utf8(out)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_errors_name_line_and_column() {
        let e = parse_events(
            "time_ns,event,value\n0,enqueue,100\n5, bogus,1\n",
            Algo::QcnCp,
        )
        .unwrap_err();
        assert!(
            matches!(
                e,
                EventError::BadEvent {
                    line: 3,
                    column: 4,
                    ..
                }
            ),
            "{e}"
        );
        let e = parse_events("time_ns,event,value\n10,tick,\n5,tick,\n", Algo::Tcd).unwrap_err();
        assert_eq!(
            e,
            EventError::TimeBackwards {
                line: 3,
                column: 1,
                time: 5,
                prev: 10
            }
        );
        let e = parse_events("time_ns,event,value\n1,cnm,64\n", Algo::QcnRp).unwrap_err();
        assert!(
            matches!(
                e,
                EventError::ValueRange {
                    line: 2,
                    column: 7,
                    ..
                }
            ),
            "{e}"
        );
        let e = parse_events("time_ns,event,value\n1,enqueue,x\n", Algo::QcnCp).unwrap_err();
        assert!(
            matches!(
                e,
                EventError::BadValue {
                    line: 2,
                    column: 11,
                    ..
                }
            ),
            "{e}"
        );
        let e = parse_events("time,event,value\n", Algo::QcnCp).unwrap_err();
        assert!(matches!(e, EventError::Header { line: 1, .. }));
        let e = parse_events("# c\ntime_ns,event,value\n1,tick\n", Algo::Tcd).unwrap_err();
        assert_eq!(e, EventError::FieldCount { line: 3, found: 2 });
        let e = parse_events("time_ns,event,value\n1,tx,100\n", Algo::Pfc).unwrap_err();
        assert!(e.to_string().contains("line 2, column 3"), "{e}");
    }

    proptest::proptest! {
        /// Malformed event files are typed errors, never panics; accepted ones replay.
        #[test]
        fn any_event_text_is_safe(body in "([0-9]{0,4},(enqueue|dequeue|tick|pause|x),[0-9a-z]{0,3}\n){0,20}") {
            let text = format!("time_ns,event,value\n{body}");
            for algo in [Algo::QcnCp, Algo::Pfc, Algo::Tcd] {
                if let Ok(evs) = parse_events(&text, algo) {
                    let mut out = Vec::new();
                    replay(algo, &ReplayConfig::default(), &evs, 1, &mut out).unwrap();
                }
            }
        }
    }

    #[test]
    fn config_errors_name_key_and_file() {
        let e = ReplayConfig::parse("[qcn_cp]\nqueue_size_set_pont = 1\n", "x.toml").unwrap_err();
        let msg = format!("{e:#}");
        assert!(
            msg.contains("x.toml") && msg.contains("queue_size_set_pont"),
            "{msg}"
        );
        let cfg = ReplayConfig::parse("[red]\nkmin_bytes = 10\nkmax_bytes = 5\n", "y").unwrap();
        let e = build(Algo::DcqcnCp, &cfg, 1).err().unwrap();
        let msg = format!("{e:#}");
        assert!(msg.contains("[red]") && msg.contains("kmin_bytes"), "{msg}");
    }
}
