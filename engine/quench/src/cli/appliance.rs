//! `quench appliance`: the sender appliance (engine/runtime/src/appliance) on real ports. Each
//! `--inside`/`--outside` pair (and each `--np-inside`/`--np-outside` pair, in the
//! notification-point role) gets its own [`Appliance`]; one polling loop reads the clock once
//! per iteration and serves every pair: inside frames in (classified, queued or passed),
//! outside frames in (feedback consumed or passed inside), due frames out, timers; it sleeps
//! while every queued frame waits for a release more than [`SLEEP_MIN`] away, and while nothing
//! is queued (as `--idle` says: by default on a shared CPU). Ports open as `quench send`'s do ([`quench_port::netns::NsPort`],
//! `[NETNS/]IFACE`, `--driver`). `--control-socket` serves live counters to `quench stats`.
//! At the end: per pair, the counters, the flows, the latency the appliance added and the
//! pacing audit; the loop's stalls; one JSON line.
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use anyhow::Context as _;
use serde_json::json;
use units::keys::{key, Key, KeyDefault, Range, Type};

use super::progress::{per_s, Delta, Progress};
use units::{Duration, Instant, ParamError, Rate};

use serde::Deserialize;

use super::send::Cc;
use quench_node::host::audit::{LoopStalls, PaceAudit};
use quench_node::host::rp::HostRp;
use quench_port::any::{AnyFrame, Scratch};
use quench_port::worker::{Backoff, Idle, IdleMode, RxWait};
use quench_port::{Frame as _, Port, BURST};
use quench_runtime::appliance::table::{TableConfig, WhenFull, MAX_CATCH_UP};
use quench_runtime::appliance::{Appliance, InsideAction, OutsideAction, Role};
use quench_runtime::switch::control::ControlSocket;
use quench_wire::time::Clock;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Port toward the hosts, `[NETNS/]IFACE`. Repeat `--inside`/`--outside` for several pairs
    /// (the k-th `--inside` pairs with the k-th `--outside`), all served by one poll loop.
    #[arg(long, value_name = "[NETNS/]IFACE", required = true)]
    pub inside: Vec<String>,
    /// Port toward the network, `[NETNS/]IFACE`.
    #[arg(long, value_name = "[NETNS/]IFACE", required = true)]
    pub outside: Vec<String>,
    /// Pairs in front of a receiver, served by the same loop in the notification-point role
    /// whatever `role` says: `--np-inside` toward the receiver, `--np-outside` toward the
    /// network (repeat in pairs). One process for both sides of a testbed takes one CPU less.
    #[arg(long, value_name = "[NETNS/]IFACE")]
    pub np_inside: Vec<String>,
    #[arg(long, value_name = "[NETNS/]IFACE")]
    pub np_outside: Vec<String>,
    /// What the loop does when no frame moved (the values of `quench switch --idle`). A
    /// duration, e.g. `100us`: sleep until the next release when it is more than 20 us away,
    /// at most that long, and that long at a time when nothing is queued. `spin`: never give
    /// the CPU up, even while every queued frame waits for its release time (for a CPU of its
    /// own). `yield`: give the CPU up without sleeping. `wait`: wait in the kernel (poll(2) on
    /// the ports' receive descriptors, AF_XDP and AF_PACKET), woken by a frame or at the
    /// timeout: 100 us while frames are queued, else the next timer, at most 10 ms; an idle
    /// appliance takes no CPU and a frame that arrives is seen at once. `auto` (the default):
    /// spin where no other process may run on its CPUs, else sleep 100 us.
    #[arg(long, value_name = quench_port::worker::IDLE_VALUES, default_value = "auto")]
    pub idle: Idle,
    #[command(flatten)]
    pub port: super::PortArgs,
    /// The appliance configuration: a bundled name (`appliance`, `quench presets` lists them)
    /// or a TOML file.
    #[arg(long, value_name = "NAME|FILE", hide_possible_values = true,
          value_parser = super::NameParser::of(&[quench_config::bundled::Kind::Appliance]), default_value = "appliance")]
    pub config: String,
    /// Override the config's `cc`.
    #[arg(long, value_enum, value_name = "CC")]
    pub cc: Option<Cc>,
    /// Override the config's `role`.
    #[arg(long, value_name = "ROLE", value_parser = ["rp", "np"])]
    pub role: Option<String>,
    /// Take `[qcn_rp]` / `[dcqcn_rp]` / `[np]` from this preset instead: a bundled name
    /// (`nvidia`; `quench presets` lists them) or a TOML file, as `quench send --preset`.
    #[arg(long, value_name = "NAME|FILE", value_parser = super::NameParser::presets(),
          hide_possible_values = true, alias = "rp")]
    pub preset: Option<String>,
    /// Stop by itself after this long, e.g. `30s` (SIGINT / SIGTERM end it early, with the
    /// report); without it, run until a signal.
    #[arg(long, value_name = "DURATION", value_parser = super::duration_or_secs_arg,
          allow_hyphen_values = true)]
    pub duration: Option<Duration>,
    /// JSON lines on standard output: one progress object per second, then the summary; the
    /// human report goes to standard error.
    #[arg(long)]
    pub json: bool,
    /// Serve live counters on this Unix socket (mode 0660) for `quench stats --control-socket
    /// PATH`; overrides the config's `control_socket`. Without either, no socket.
    #[arg(long, value_name = "PATH")]
    pub control_socket: Option<PathBuf>,
}

fn default_line_rate() -> String {
    "1gbit".into()
}
fn default_max_flows() -> usize {
    TableConfig::default().max_flows
}
fn default_queue_bytes() -> u32 {
    TableConfig::default().queue_bytes
}
fn default_idle_timeout_s() -> f64 {
    TableConfig::default().idle_timeout.as_secs_f64()
}
fn yes() -> bool {
    true
}
fn default_catch_up_us() -> u32 {
    (MAX_CATCH_UP.as_nanos() / 1000) as u32
}

/// The keys of [`ApplianceConfig`], as the configuration reference lists them;
/// [`ApplianceConfig::table`] checks the ranges given here.
pub(crate) const KEYS: &[Key] = &[
    Key {
        name: "role",
        ty: Type::OneOf(&["rp", "np"]),
        unit: "",
        default: KeyDefault::Value("\"rp\""),
        range: Range::Any,
        doc: "In front of senders (reaction points, per-flow pacing) or of a receiver (CE marks \
              become CNPs).",
    },
    super::send::CC,
    Key {
        name: "line_rate",
        ty: Type::Rate,
        unit: "",
        default: KeyDefault::Value("\"1gbit\""),
        range: Range::Text("> 0"),
        doc: "The reaction points' line rate C: no flow leaves faster.",
    },
    Key {
        name: "cn_tag",
        ty: Type::Bool,
        unit: "",
        default: KeyDefault::Value("true"),
        range: Range::Any,
        doc: "QCN: add a CN-TAG carrying the flow's RPID to frames that have none.",
    },
    Key {
        name: "ect0",
        ty: Type::Bool,
        unit: "",
        default: KeyDefault::Value("true"),
        range: Range::Any,
        doc: "DCQCN: set ECT(0) on Not-ECT packets so that RED marks them instead of dropping.",
    },
    Key {
        name: "max_flows",
        ty: Type::Integer,
        unit: "",
        default: KeyDefault::Value("1048576"),
        range: Range::Int(1, 1 << 24),
        doc: "The flow table's size.",
    },
    Key {
        name: "queue_bytes",
        ty: Type::Integer,
        unit: "octets",
        default: KeyDefault::Value("1048576"),
        range: Range::Text("one largest frame (1522).."),
        doc: "What each flow may queue.",
    },
    Key {
        name: "idle_timeout_s",
        ty: Type::Float,
        unit: "s",
        default: KeyDefault::Value("10"),
        range: Range::Text("> 0"),
        doc: "A flow with an empty queue and no frame for this long is evicted.",
    },
    Key {
        name: "when_full",
        ty: Type::OneOf(&["bypass", "drop"]),
        unit: "",
        default: KeyDefault::Value("\"bypass\""),
        range: Range::Any,
        doc: "A new flow's frame when the table is full of busy flows: sent unpaced, or dropped.",
    },
    Key {
        name: "max_catch_up_us",
        ty: Type::Integer,
        unit: "us",
        default: KeyDefault::Value("50"),
        range: Range::Int(1, 1000000),
        doc: "Sending time a flow whose release the loop was late for catches up at once; more is \
              given up.",
    },
    Key {
        name: "pfc",
        ty: Type::Bool,
        unit: "",
        default: KeyDefault::Value("false"),
        range: Range::Any,
        doc: "Honour PFC PAUSE frames from the network on the outside port (RP role).",
    },
    Key {
        name: "control_socket",
        ty: Type::String,
        unit: "path",
        default: KeyDefault::None,
        range: Range::Any,
        doc: "The control socket `quench stats` reads; none when absent.",
    },
    quench_config::keys::PRESET,
    quench_config::keys::QCN_RP,
    quench_config::keys::DCQCN_RP,
    quench_config::keys::NP,
];

const MAX_FLOWS: &Key = key(KEYS, "max_flows");
const MAX_CATCH_UP_US: &Key = key(KEYS, "max_catch_up_us");

/// configs/appliance.toml.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApplianceConfig {
    /// `rp` (in front of senders) or `np` (in front of a receiver).
    #[serde(default)]
    pub role: Role,
    /// `none`, `qcn` or `dcqcn` (as `quench send`'s `cc`).
    #[serde(default)]
    pub cc: Cc,
    /// The RPs' line rate C, e.g. `1gbit`: no flow leaves faster.
    #[serde(default = "default_line_rate")]
    pub line_rate: String,
    /// QCN: add a CN-TAG carrying the flow's RPID to frames that have none.
    #[serde(default = "yes")]
    pub cn_tag: bool,
    /// DCQCN: set ECT(0) on Not-ECT packets so RED marks them instead of dropping.
    #[serde(default = "yes")]
    pub ect0: bool,
    /// Flow-table size.
    #[serde(default = "default_max_flows")]
    pub max_flows: usize,
    /// Octets each flow may queue.
    #[serde(default = "default_queue_bytes")]
    pub queue_bytes: u32,
    /// Seconds without a frame after which a flow with an empty queue is evicted.
    #[serde(default = "default_idle_timeout_s")]
    pub idle_timeout_s: f64,
    /// `bypass` (send unpaced) or `drop`: a new flow's frame when the table is full of busy
    /// flows.
    #[serde(default)]
    pub when_full: WhenFull,
    /// Microseconds of sending time a flow whose release the loop was late for catches up at
    /// once (more is given up, counted); as `quench send`'s key.
    #[serde(default = "default_catch_up_us")]
    pub max_catch_up_us: u32,
    /// Honour PFC PAUSE frames from the network on the outside port (RP role): the paused
    /// priority's flows hold their frames ([`Appliance::set_pfc`]).
    #[serde(default)]
    pub pfc: bool,
    /// Control socket for `quench stats` (none when absent).
    pub control_socket: Option<std::path::PathBuf>,
    /// A preset (bundled name or file, relative to this file) whose `[qcn_rp]` / `[dcqcn_rp]` /
    /// `[np]` stand where this file writes none ([`quench_config::bundled::PresetTables`]).
    pub preset: Option<String>,
    pub qcn_rp: Option<rp::QcnParams>,
    pub dcqcn_rp: Option<rp::DcqcnParams>,
    pub np: Option<np::NpParams>,
}

impl ApplianceConfig {
    pub fn parse(text: &str) -> Result<Self, toml::de::Error> {
        toml::from_str(text)
    }

    /// Reads a configuration file; its tables are its own or, where it writes none, those of
    /// the preset its `preset` key names.
    pub fn read(src: &quench_config::bundled::Source) -> anyhow::Result<Self> {
        let mut cfg = Self::parse(&src.text).with_context(|| src.origin.clone())?;
        if let Some(p) = &cfg.preset {
            cfg.set_tables(
                quench_config::bundled::PresetTables::from_key(p, src)?,
                false,
            );
        }
        Ok(cfg)
    }

    /// Takes `t`'s tables: all it holds when `over`, else only those this config lacks.
    fn set_tables(&mut self, t: quench_config::bundled::PresetTables, over: bool) {
        let mine = quench_config::bundled::PresetTables {
            qcn_rp: self.qcn_rp.take(),
            dcqcn_rp: self.dcqcn_rp.take(),
            np: self.np.take(),
        };
        let t = if over { t.or(mine) } else { mine.or(t) };
        self.qcn_rp = t.qcn_rp;
        self.dcqcn_rp = t.dcqcn_rp;
        self.np = t.np;
    }

    /// The line rate.
    pub fn line(&self) -> Result<Rate, ParamError> {
        Rate::parse(&self.line_rate)
            .map_err(|e| ParamError::new("line_rate", &self.line_rate, e.to_string()))
    }

    /// The flow table's limits.
    pub fn table(&self) -> Result<TableConfig, ParamError> {
        MAX_FLOWS.within(self.max_flows as u64)?;
        if self.queue_bytes < quench_port::MAX_FRAME as u32 {
            return Err(ParamError::new(
                "queue_bytes",
                self.queue_bytes,
                format!(
                    "must hold one largest frame ({} octets)",
                    quench_port::MAX_FRAME
                ),
            ));
        }
        if !(self.idle_timeout_s.is_finite() && self.idle_timeout_s > 0.0) {
            return Err(ParamError::new(
                "idle_timeout_s",
                self.idle_timeout_s,
                "must be a positive number of seconds",
            ));
        }
        // The catch-up bound is a burst at the line rate: at most one second of it.
        MAX_CATCH_UP_US.within(self.max_catch_up_us.into())?;
        Ok(TableConfig {
            max_catch_up: Duration::from_micros(u64::from(self.max_catch_up_us)),
            max_flows: self.max_flows,
            queue_bytes: self.queue_bytes,
            idle_timeout: Duration::from_nanos((self.idle_timeout_s * 1e9) as u64),
            when_full: self.when_full,
            line_rate: self.line()?,
            ..TableConfig::default()
        })
    }

    /// The reaction points (the `[qcn_rp]` / `[dcqcn_rp]` tables, or their defaults).
    pub fn rp(&self) -> anyhow::Result<HostRp> {
        super::send::host_rp(
            self.cc,
            self.qcn_rp.as_ref(),
            self.dcqcn_rp.as_ref(),
            self.line()?,
        )
    }

    /// The notification point of the NP role.
    pub fn np(&self) -> anyhow::Result<Option<np::Np>> {
        if self.role != Role::Np {
            return Ok(None);
        }
        self.notification_point().map(Some)
    }

    /// A notification point from the `[np]` table (or its defaults).
    pub fn notification_point(&self) -> anyhow::Result<np::Np> {
        let p = self
            .np
            .clone()
            .unwrap_or_default()
            .profile()
            .map_err(|e| anyhow::anyhow!("[np] {e}"))?;
        Ok(np::Np::new(p))
    }
}

fn load(args: &Args) -> anyhow::Result<ApplianceConfig> {
    let src =
        quench_config::bundled::open(&args.config, quench_config::bundled::Kind::Appliance, None)
            .with_context(|| format!("--config {}", args.config))?;
    let mut cfg = ApplianceConfig::read(&src)?;
    if let Some(cc) = args.cc {
        cfg.cc = cc;
    }
    if let Some(c) = &args.control_socket {
        cfg.control_socket = Some(c.clone());
    }
    if let Some(role) = &args.role {
        cfg.role = if role == "np" { Role::Np } else { Role::Rp };
    }
    if let Some(p) = &args.preset {
        cfg.set_tables(quench_config::bundled::PresetTables::from_option(p)?, true);
    }
    Ok(cfg)
}

/// One inside/outside pair and what is its own.
struct Pair {
    label: String,
    inside: quench_port::netns::NsPort,
    outside: quench_port::netns::NsPort,
    app: Appliance<AnyFrame>,
    to_out: Vec<AnyFrame>,
    to_in: Vec<AnyFrame>,
    rx: Vec<AnyFrame>,
    scratch_out: Scratch,
    scratch_in: Scratch,
    /// Each backlogged flow's octets against its RP rate's integral per 100 ms window.
    audit: PaceAudit,
    /// Frames the ports did not take (ring full beyond the backlog bound) or had no buffer for.
    tx_dropped: u64,
    /// Sends or housekeeping calls a port refused, and the last reason.
    tx_errors: u64,
    last_error: Option<String>,
}

/// The loop sleeps only when the next release is further away than this (a sleep's own cost and
/// overshoot are a few microseconds).
pub const SLEEP_MIN: Duration = Duration::from_micros(20);
/// It wakes this much before the release, for the sleep's overshoot.
pub const SLEEP_EARLY: Duration = Duration::from_micros(5);
/// Longest sleep: what a frame arriving meanwhile may wait in the receive ring (at 1 Gbit/s,
/// ~9 full-size frames of the ring's 2048).
pub const SLEEP_MAX: Duration = Duration::from_micros(100);

/// Longest wait in the kernel with nothing queued (`--idle wait`): the workers' own
/// ([`quench_port::worker::IDLE_WAIT_MAX`]), in this loop's clock units.
const IDLE_WAIT_MAX: Duration =
    Duration::from_nanos(quench_port::worker::IDLE_WAIT_MAX.as_nanos() as u64);

/// The pacing audit's window (as `quench send`'s).
const AUDIT_WINDOW: Duration = Duration::from_millis(100);

/// Frames a pair keeps waiting for a full transmit ring before it drops (and counts) the rest.
const TX_BACKLOG: usize = 4 * BURST;

impl Pair {
    /// One pass over the pair; true when a frame moved or waits for ring space.
    fn poll(&mut self, now: Instant) -> anyhow::Result<bool> {
        // Before this iteration changes any rate (PaceAudit::sample's contract).
        // A flow PFC pauses may send nothing (802.1Qbb): its rate is zero meanwhile.
        let (app, core) = (&self.app, self.app.table().core());
        self.audit.sample(now, core, |id| {
            core.find(id)
                .filter(|&h| {
                    !core
                        .flow(h)
                        .is_some_and(|f| app.paused(now, f.spec.priority))
                })
                .map_or(Rate::ZERO, |h| core.rate(h))
        });
        let mut busy = false;
        self.rx.clear();
        self.inside.rx_burst(0, &mut self.rx, BURST)?;
        busy |= !self.rx.is_empty();
        // A burst of frames released at once must fit the transmit backlog.
        self.app
            .set_release_on_arrival(self.to_out.len() + BURST <= TX_BACKLOG);
        let (out, to_out) = (&mut self.outside, &mut self.to_out);
        self.app.on_inside_burst(
            now,
            &self.rx,
            |f| f.data(),
            |n| out.alloc(n),
            |a| match a {
                InsideAction::Send(f) => to_out.push(f),
                InsideAction::Queued | InsideAction::Dropped => {}
            },
        );
        self.rx.clear();
        self.outside.rx_burst(0, &mut self.rx, BURST)?;
        for f in self.rx.drain(..) {
            busy = true;
            let (inside, outside) = (&mut self.inside, &mut self.outside);
            match self
                .app
                .on_outside(now, f.data(), |n| inside.alloc(n), |n| outside.alloc(n))
            {
                OutsideAction::Consumed => {}
                OutsideAction::Pass { inside, cnp } => {
                    self.to_in.extend(inside);
                    self.to_out.extend(cnp);
                }
            }
        }
        let outside = &mut self.outside;
        self.to_out
            .extend(self.app.announce(now, |n| outside.alloc(n)));
        if self.app.next_deadline().is_some_and(|t| t <= now) {
            self.app.on_timeout(now);
        }
        while self.to_out.len() < TX_BACKLOG {
            let Some(r) = self.app.poll_release(now) else {
                break;
            };
            self.app.on_sent(now, r.arrived);
            self.to_out.push(r.frame);
            busy = true;
        }
        for (port, q, scratch) in [
            (&mut self.outside, &mut self.to_out, &mut self.scratch_out),
            (&mut self.inside, &mut self.to_in, &mut self.scratch_in),
        ] {
            // A refused send (a frame over the link's MTU, a link going down) is counted and
            // the loop goes on: one frame must not stop the appliance.
            if !q.is_empty() {
                match port.tx_burst_counted(0, q, scratch) {
                    Ok((_, dropped)) => self.tx_dropped += dropped,
                    Err(e) => {
                        self.tx_errors += 1;
                        self.last_error = Some(e.to_string());
                    }
                }
                if q.len() > TX_BACKLOG {
                    self.tx_dropped += (q.len() - TX_BACKLOG) as u64;
                    q.truncate(TX_BACKLOG);
                }
            }
            if let Err(e) = port.poll() {
                self.tx_errors += 1;
                self.last_error = Some(e.to_string());
            }
        }
        Ok(busy || !self.to_out.is_empty())
    }

    /// The pair's counters, flows and latency as JSON: the live answer on the control socket
    /// and the report at exit have this one shape.
    fn summary(&self, secs: f64) -> serde_json::Value {
        let mut v = self.app.report(secs);
        v["pair"] = json!(self.label);
        v["pacing"] = self.audit.to_json();
        v["lag_dropped_ns"] = json!(self.app.table().core().lag_dropped().as_nanos());
        v["tx_dropped"] = json!(self.tx_dropped);
        v["tx_errors"] = json!(self.tx_errors);
        v["last_error"] = json!(self.last_error);
        v
    }
}

/// The progress status of the appliance's pairs: release rate over the interval, totals of
/// frames, drops, feedback accepted, CNPs sent, PFC (MAC control) frames passed or honoured,
/// flows held.
fn show_progress(
    p: &mut Progress,
    now: Instant,
    pairs: &[Pair],
    released: &mut Delta,
) -> std::io::Result<()> {
    let (mut bytes, mut inside, mut outside, mut drops) = (0, 0, 0, 0);
    let (mut feedback, mut cnps, mut pfc, mut flows) = (0, 0, 0, 0);
    for pr in pairs {
        let c = pr.app.counters();
        let t = pr.app.table().counters();
        bytes += t.released_bytes;
        inside += c.inside_frames;
        outside += c.outside_frames;
        drops += t.queue_drops + t.full_drops + pr.tx_dropped;
        feedback += c.cnms_accepted + c.cnps_accepted;
        cnps += c.cnps_sent;
        // PFC frames passed inside or (`pfc = true`) honoured.
        pfc += c.pass_mac_control + c.pfc_rx;
        flows += pr.app.table().flows() as u64;
    }
    let db = released.step(bytes);
    p.show(
        now,
        |dt| {
            format!(
                "released {:.1} Mb/s | in {inside} out {outside} frames | {drops} drops | feedback {feedback}, {cnps} CNPs sent | {pfc} PFC frames | {flows} flows",
                per_s(db * 8, dt, 1e6)
            )
        },
        |dt| {
            json!({
                "released_bps": per_s(db * 8, dt, 1.0), "inside_frames": inside,
                "outside_frames": outside, "drops": drops, "feedback": feedback,
                "cnps_sent": cnps, "pfc_frames": pfc, "flows": flows,
            })
        },
    )
}

/// The loop's answers for the control socket. The loop owns the appliance state, so the control
/// thread does not read it: it raises `wanted` and waits; the loop, between two iterations,
/// builds the snapshot and hands it over. The loop's cost is one relaxed load per iteration
/// while nobody asks.
struct Published {
    wanted: AtomicBool,
    /// (generation, the last snapshot).
    latest: Mutex<(u64, String)>,
    fresh: Condvar,
}

/// How long the control thread waits for the loop's snapshot before it answers with the last
/// one (the loop has ended, or is descheduled).
const SNAPSHOT_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

impl Published {
    fn new(first: String) -> Self {
        Published {
            wanted: AtomicBool::new(false),
            latest: Mutex::new((0, first)),
            fresh: Condvar::new(),
        }
    }

    /// Control thread: a snapshot the loop made after this call, or the last one.
    fn ask(&self) -> String {
        let g = self.latest.lock().unwrap_or_else(PoisonError::into_inner);
        let seen = g.0;
        self.wanted.store(true, Ordering::Release);
        let (g, _) = self
            .fresh
            .wait_timeout_while(g, SNAPSHOT_WAIT, |l| l.0 == seen)
            .unwrap_or_else(PoisonError::into_inner);
        g.1.clone()
    }

    /// Loop: true when a snapshot is wanted (then call [`Published::publish`]).
    fn wanted(&self) -> bool {
        self.wanted.load(Ordering::Relaxed) && self.wanted.swap(false, Ordering::Acquire)
    }

    fn publish(&self, body: String) {
        let mut g = self.latest.lock().unwrap_or_else(PoisonError::into_inner);
        g.0 += 1;
        g.1 = body;
        self.fresh.notify_all();
    }
}

/// Every pair's summary: `{"appliance": [PAIR...], "secs": S}`, live and at exit.
fn snapshot(pairs: &[Pair], secs: f64) -> serde_json::Value {
    json!({"appliance": pairs.iter().map(|p| p.summary(secs)).collect::<Vec<_>>(), "secs": secs})
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if args.json {
        super::human_to_stderr();
    }
    if args.inside.len() != args.outside.len() {
        anyhow::bail!(
            "{} --inside but {} --outside: give them in pairs",
            args.inside.len(),
            args.outside.len()
        );
    }
    if args.np_inside.len() != args.np_outside.len() {
        anyhow::bail!(
            "{} --np-inside but {} --np-outside: give them in pairs",
            args.np_inside.len(),
            args.np_outside.len()
        );
    }
    let cfg = load(&args)?;
    let path = &args.config;
    let table = cfg.table().with_context(|| path.to_string())?;
    // On a shared CPU the loop sleeps rather than yields: a yield keeps the CPU from going
    // idle, so the switch or a host sharing the machine would not be moved onto it.
    let sleep_max = std::time::Duration::from_nanos(SLEEP_MAX.as_nanos());
    let (mode, why) = args.idle.for_this_thread(IdleMode::Sleep(sleep_max));
    // A loop gap is a stall (time the flows may have lost) when it exceeds a planned sleep by
    // more than the catch-up bound.
    let stall = table.max_catch_up
        + match mode {
            IdleMode::Spin | IdleMode::Yield => Duration::ZERO,
            IdleMode::Sleep(d) => Duration::from_nanos(d.as_nanos() as u64),
            IdleMode::Wait => SLEEP_MAX,
        };
    let mut stalls = LoopStalls::new(stall);
    let mut pairs = Vec::new();
    let rp_pairs = args.inside.iter().zip(&args.outside).map(|p| (p, cfg.role));
    let np_pairs = args
        .np_inside
        .iter()
        .zip(&args.np_outside)
        .map(|p| (p, Role::Np));
    for ((i, o), role) in rp_pairs.chain(np_pairs) {
        let (rp, np) = match role {
            Role::Rp => (cfg.rp(), cfg.np()),
            Role::Np => (Ok(HostRp::None), cfg.notification_point().map(Some)),
        };
        let mut app = Appliance::new(
            role,
            cfg.cn_tag,
            cfg.ect0,
            table,
            rp.with_context(|| path.to_string())?,
            np.with_context(|| path.to_string())?,
        )?;
        let inside = args.port.open(i).context("--inside")?;
        let outside = args.port.open(o).context("--outside")?;
        app.set_max_frame(outside.caps().max_frame);
        if cfg.pfc && role == Role::Rp {
            app.set_pfc(table.line_rate);
        }
        pairs.push(Pair {
            label: format!("{i}<->{o}"),
            inside,
            outside,
            app,
            to_out: Vec::with_capacity(TX_BACKLOG * 2),
            to_in: Vec::with_capacity(TX_BACKLOG * 2),
            rx: Vec::with_capacity(BURST),
            scratch_out: Scratch::default(),
            scratch_in: Scratch::default(),
            audit: PaceAudit::new(AUDIT_WINDOW, stall),
            tx_dropped: 0,
            tx_errors: 0,
            last_error: None,
        });
    }
    eprintln!(
        "quench appliance: the loop {} when idle ({why})",
        mode.what()
    );
    eprintln!(
        "quench appliance: {} pair(s), role {:?}, cc {:?}, up to {} flows per pair at {} octets \
         of table memory each",
        pairs.len(),
        cfg.role,
        cfg.cc,
        table.max_flows,
        quench_runtime::appliance::table::FlowTable::<AnyFrame>::bytes_per_flow()
    );
    let stop = quench_port::worker::stop_on_signals()?;
    let clock = Clock::new();
    let t0 = clock.now();
    let end = args.duration.map(|d| t0 + d);
    // The control socket, bound once the ports are open (their errors come first); its thread
    // ends with the loop (`ctl_stop`), and the socket file with it.
    let published = Arc::new(Published::new(snapshot(&pairs, 0.0).to_string()));
    let ctl_stop = Arc::new(AtomicBool::new(false));
    let ctl = match &cfg.control_socket {
        Some(path) => {
            let sock = ControlSocket::bind(path)
                .with_context(|| format!("control_socket {}", path.display()))?;
            eprintln!("quench appliance: control socket {}", path.display());
            let (p, s) = (published.clone(), ctl_stop.clone());
            Some(
                std::thread::Builder::new()
                    .name("quench-ctl".into())
                    .spawn(move || sock.serve_with(&clock, &|| p.ask(), s))?,
            )
        }
        None => None,
    };
    let mut progress = Progress::new("appliance", args.json, t0);
    let mut released = Delta::default();
    // With --idle wait, every pair's receive descriptors; ports that have none leave the loop
    // sleeping as on a shared CPU.
    let mut fds = Vec::new();
    for p in pairs.iter().filter(|_| mode == IdleMode::Wait) {
        p.inside.rx_fds(&mut fds);
        p.outside.rx_fds(&mut fds);
    }
    let mut rx_wait = RxWait::new(fds);
    let mode = match mode {
        IdleMode::Wait if rx_wait.is_none() => IdleMode::Sleep(sleep_max),
        m => m,
    };
    // Sleeps and yields with nothing queued (a frame arriving meanwhile waits at most the sleep
    // in the receive ring). Made here, it gives this thread the fine timer slack that sleeps and
    // waits need: the default 50 us would make each overshoot the release it waits for by up
    // to the pacer's whole catch-up bound.
    let mut idle = Backoff::new(mode, []);
    let looped = (|| -> anyhow::Result<()> {
        loop {
            let now = clock.now();
            if end.is_some_and(|e| now >= e) || stop.load(Ordering::Relaxed) {
                return Ok(());
            }
            stalls.tick(now);
            let mut moved = false;
            for p in &mut pairs {
                moved |= p.poll(now).with_context(|| p.label.clone())?;
            }
            if published.wanted() {
                published.publish(snapshot(&pairs, (now - t0).as_secs_f64()).to_string());
            }
            if progress.due(now) {
                show_progress(&mut progress, now, &pairs, &mut released)?;
            }
            if moved {
                continue;
            }
            let next = pairs.iter().filter_map(|p| p.app.next_deadline()).min();
            if let Some(w) = rx_wait.as_mut() {
                // A queued frame keeps the wait as short as the timed sleep (the pacing
                // audit's stall bound stays that of the sleep); with none queued the loop
                // waits up to the next timer, and that wait is no stall.
                let queued = pairs.iter().any(|p| p.app.table().backlog() > 0);
                let cap = if queued { SLEEP_MAX } else { IDLE_WAIT_MAX };
                let wait = next.map_or(cap, |t| t.saturating_since(now).min(cap));
                if wait > SLEEP_MIN {
                    let d = wait - SLEEP_EARLY;
                    if !queued {
                        stalls.planned(now + d);
                    }
                    w.wait(std::time::Duration::from_nanos(d.as_nanos()));
                }
                continue;
            }
            match (mode, next) {
                // Every queued frame waits for its release time (or an RP timer): the CPU
                // is given away until shortly before, instead of spinning on it. A frame that
                // arrives meanwhile waits at most the sleep in the receive ring.
                (IdleMode::Sleep(max), Some(t)) if t.saturating_since(now) > SLEEP_MIN => {
                    let d = std::time::Duration::from_nanos(
                        (t.saturating_since(now) - SLEEP_EARLY).as_nanos(),
                    );
                    std::thread::sleep(d.min(max));
                }
                // Due at once: spin.
                (IdleMode::Sleep(_), Some(_)) => {}
                _ => idle.after(0, || None),
            }
        }
    })();
    ctl_stop.store(true, Ordering::Relaxed);
    if let Some(h) = ctl {
        let _ = h.join();
    }
    progress.done();
    looped?;
    let secs = (clock.now() - t0).as_secs_f64();
    let mut all = snapshot(&pairs, secs);
    all["scheduling"] = json!({
        "stall_threshold_us": stalls.threshold().as_nanos() / 1000,
        "stalls": stalls.count,
        "stalled_ns": stalls.total.as_nanos(),
        "longest_stall_ns": stalls.longest.as_nanos(),
    });
    for (p, s) in pairs
        .iter()
        .zip(all["appliance"].as_array().into_iter().flatten())
    {
        let c = p.app.counters();
        let t = p.app.table().counters();
        outln!("== {}", p.label)?;
        outln!(
            "  inside {} frames: released {} ({} octets), passed {} ARP / {} ND / {} other, \
             queue drops {}, bypass {}, table full drops {}",
            c.inside_frames,
            t.released_frames,
            t.released_bytes,
            c.pass_arp,
            c.pass_nd,
            c.pass_other + c.pass_lldp + c.pass_mac_control + c.pass_cnm + c.pass_malformed,
            t.queue_drops,
            t.bypass_frames,
            t.full_drops
        )?;
        outln!(
            "  outside {} frames: CNMs accepted {}, CNPs accepted {}, unknown flow {}, forged {}, \
             other cc {}; CNPs sent {}",
            c.outside_frames,
            c.cnms_accepted,
            c.cnps_accepted,
            c.unknown_flow,
            c.forged.total(),
            c.other_cc_feedback,
            c.cnps_sent
        )?;
        outln!(
            "  flows held {}, created {}, evicted idle {} / full {}; latency added p50 {} us p99 {} us",
            p.app.table().flows(),
            t.flows_created,
            t.idle_evictions,
            t.full_evictions,
            s["latency_us"]["p50"],
            s["latency_us"]["p99"]
        )?;
        let pacing = &s["pacing"];
        if pacing["windows"].as_u64().unwrap_or(0) > 0 {
            let pct = |v: &serde_json::Value| v.as_f64().map_or(0.0, |x| 100.0 * x);
            outln!(
                "  pacing (backlogged flows, 100 ms windows): {} windows, {:.1} % within 1 % of \
                 the RP rate's integral, largest {:.3} %; {} windows no stall touched: {:.1} % \
                 within 1 %, largest {:.3} %",
                pacing["windows"],
                pct(&pacing["within_1pct"]),
                pct(&pacing["max_abs_dev"]),
                pacing["unstalled_windows"],
                pct(&pacing["unstalled_within_1pct"]),
                pct(&pacing["unstalled_max_abs_dev"])
            )?;
        }
    }
    outln!("scheduling: {stalls}")?;
    jsonln!("summary", all)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use quench_port::heap::HeapFrame;
    use quench_runtime::switch::control::query_json;
    use quench_wire::testhdr::UDP_PORT;

    /// `quench stats` against a running appliance: the control thread asks, the loop (here the
    /// test's thread) answers between two iterations, the client gets the loop's figures and
    /// the stats table names the flow with its RP rate; the socket is 0660 and goes at the end.
    #[test]
    fn the_control_socket_serves_the_loops_snapshot() {
        let line = Rate::from_gbps(1);
        let rp = HostRp::qcn(rp::QcnParams::default().profile(line).unwrap());
        let mut app: Appliance<HeapFrame> =
            Appliance::new(Role::Rp, true, false, TableConfig::default(), rp, None).unwrap();
        let frame = quench_wire::frame::test_frame(1, 1, 0, units::Ecn::NotEct, None);
        let t0 = Instant::from_nanos(1_000);
        assert!(matches!(
            app.on_inside(t0, &frame, HeapFrame::zeroed),
            InsideAction::Queued
        ));
        assert!(
            app.poll_release(t0).is_none(),
            "put on the wheel, due a tick later"
        );
        let r = app.poll_release(t0 + Duration::from_micros(1)).unwrap();
        app.on_sent(t0 + Duration::from_micros(3), r.arrived);

        let path = std::env::temp_dir().join(format!("qn-appl-ctl-{}.sock", std::process::id()));
        let sock = ControlSocket::bind(&path).unwrap();
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o660, "{mode:o}");
        let published = Arc::new(Published::new("{}".into()));
        let stop = Arc::new(AtomicBool::new(false));
        let server = {
            let (p, s) = (published.clone(), stop.clone());
            std::thread::spawn(move || sock.serve_with(&Clock::monotonic(), &|| p.ask(), s))
        };
        let client = {
            let path = path.clone();
            std::thread::spawn(move || query_json(&path))
        };
        let mut answered = 0;
        while !client.is_finished() {
            if published.wanted() {
                let body = json!({"appliance": [app.report(2.0)], "secs": 2.0});
                published.publish(body.to_string());
                answered += 1;
            }
            std::thread::yield_now();
        }
        let v = client.join().unwrap().unwrap();
        assert_eq!(answered, 1);
        let pair = &v["appliance"][0];
        assert_eq!(pair["table"]["released_frames"], 1);
        assert_eq!(pair["flows_held"], 1);
        assert_eq!(pair["top_flows"][0]["rate_mbps"], 1000.0);
        let table = crate::cli::stats::appliance_table(&v, None);
        assert!(
            table.contains(&format!("Udp 10.0.0.1:40000 > 10.0.0.9:{UDP_PORT}")),
            "{table}"
        );
        stop.store(true, Ordering::Relaxed);
        server.join().unwrap().unwrap();
        assert!(!path.exists());
    }

    #[test]
    fn the_shipped_config_parses_and_validates() {
        let src = quench_config::bundled::open(
            "appliance",
            quench_config::bundled::Kind::Appliance,
            None,
        )
        .unwrap();
        let c = ApplianceConfig::read(&src).unwrap();
        c.table().unwrap();
        c.rp().unwrap();
        c.np().unwrap();
    }

    /// The appliance and `quench send` run the testbed's reaction points from one preset: the
    /// tables they end up with are the preset's, not the code's defaults.
    #[test]
    fn the_shipped_appliance_and_sender_share_their_rp_tables() {
        use quench_config::bundled::{open, Kind, PresetTables};
        let ap = ApplianceConfig::read(&open("appliance", Kind::Appliance, None).unwrap()).unwrap();
        let send = crate::cli::send::load(&open("send", Kind::Send, None).unwrap()).unwrap();
        let preset = PresetTables::from_option("testbed-1g").unwrap();
        assert!(preset.qcn_rp.is_some() && preset.dcqcn_rp.is_some());
        assert_eq!(ap.qcn_rp, preset.qcn_rp);
        assert_eq!(ap.dcqcn_rp, preset.dcqcn_rp);
        assert_eq!(send.qcn_rp, preset.qcn_rp);
        assert_eq!(send.dcqcn_rp, preset.dcqcn_rp);
        assert_ne!(ap.qcn_rp, Some(rp::QcnParams::default()));
        assert_ne!(ap.dcqcn_rp, Some(rp::DcqcnParams::default()));
    }

    /// A table the file writes stands over its preset's; `--preset` stands over both; a preset
    /// that cannot be read is an error naming the file and the key.
    #[test]
    fn tables_come_from_the_command_line_then_the_file_then_its_preset() {
        use quench_config::bundled::{PresetTables, Source};
        let src = |text: &str| Source {
            text: text.to_string().into(),
            origin: "mine.toml".into(),
            dir: ".".into(),
        };
        let c = ApplianceConfig::read(&src("preset = \"testbed-1g\"\n[qcn_rp]\nrpg_ai_rate = 7\n"))
            .unwrap();
        assert_eq!(c.qcn_rp.as_ref().unwrap().rpg_ai_rate, 7);
        // The file's table is whole: the preset's other QCN keys do not fill it in.
        assert_eq!(
            c.qcn_rp.as_ref().unwrap().rpg_time_reset,
            rp::QcnParams::default().rpg_time_reset
        );
        let preset = PresetTables::from_option("testbed-1g").unwrap();
        assert_eq!(c.dcqcn_rp, preset.dcqcn_rp);
        let mut c = c;
        c.set_tables(PresetTables::from_option("nvidia").unwrap(), true);
        let nvidia = PresetTables::from_option("nvidia").unwrap();
        assert_eq!(c.dcqcn_rp, nvidia.dcqcn_rp);
        assert_eq!(c.qcn_rp.as_ref().unwrap().rpg_ai_rate, 7);
        let e = ApplianceConfig::read(&src("preset = \"testbed-10g\"\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("mine.toml") && e.contains("`preset`"), "{e}");
        assert!(
            e.contains("testbed-1g"),
            "the known presets are listed: {e}"
        );
    }

    #[test]
    fn errors_name_the_key() {
        let e = ApplianceConfig::parse("cc = \"qcn\"\nmax_flow = 3\n").unwrap_err();
        assert!(e.to_string().contains("max_flow"), "{e}");
        let e = ApplianceConfig::parse("when_full = \"later\"\n").unwrap_err();
        assert!(
            e.to_string().contains("when_full") || e.to_string().contains("later"),
            "{e}"
        );
        let c = ApplianceConfig::parse("max_flows = 0\n").unwrap();
        assert_eq!(c.table().unwrap_err().param, "max_flows");
        let c = ApplianceConfig::parse("queue_bytes = 100\n").unwrap();
        assert_eq!(c.table().unwrap_err().param, "queue_bytes");
        let c = ApplianceConfig::parse("line_rate = \"fast\"\n").unwrap();
        assert_eq!(c.table().unwrap_err().param, "line_rate");
        let c = ApplianceConfig::parse("idle_timeout_s = -1.0\n").unwrap();
        assert_eq!(c.table().unwrap_err().param, "idle_timeout_s");
        let c = ApplianceConfig::parse("max_catch_up_us = 0\n").unwrap();
        assert_eq!(c.table().unwrap_err().param, "max_catch_up_us");
        let c = ApplianceConfig::parse("max_catch_up_us = 250\npfc = true\n").unwrap();
        assert_eq!(c.table().unwrap().max_catch_up, Duration::from_micros(250));
        assert!(c.pfc);
    }
}
