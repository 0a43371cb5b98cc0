//! `quench appliance`: the sender appliance (engine/src/appliance) on real ports. Each
//! `--inside`/`--outside` pair gets its own [`Appliance`]; one busy-polling loop reads the clock
//! once per iteration and serves every pair: inside frames in (classified, queued or passed),
//! outside frames in (feedback consumed or passed inside), due frames out, timers. Ports open
//! as `quench send`'s do ([`crate::port::netns::NsPort`], `[NETNS/]IFACE`, `--driver`). At the end: per pair,
//! the counters, the flows and the latency the appliance added, and one JSON line.
use std::sync::atomic::Ordering;

use anyhow::Context as _;
use serde_json::json;

use super::progress::{per_s, Delta, Progress};
use units::{Duration, Instant, ParamError, Rate};

use serde::Deserialize;

use super::send::Cc;
use crate::appliance::table::{TableConfig, WhenFull};
use crate::appliance::{Appliance, InsideAction, OutsideAction, Role};
use crate::host::rp::HostRp;
use crate::port::any::{AnyFrame, Scratch};
use crate::port::{Frame as _, Port, BURST};
use crate::time::Clock;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Port toward the hosts, `[NETNS/]IFACE`. Repeat `--inside`/`--outside` for several pairs
    /// (the k-th `--inside` pairs with the k-th `--outside`), all served by one poll loop.
    #[arg(long, required = true)]
    pub inside: Vec<String>,
    /// Port toward the network, `[NETNS/]IFACE`.
    #[arg(long, required = true)]
    pub outside: Vec<String>,
    #[command(flatten)]
    pub port: super::PortArgs,
    /// The appliance configuration: a bundled name (`appliance`, `quench presets` lists them)
    /// or a TOML file.
    #[arg(long, value_name = "NAME|FILE", default_value = "appliance")]
    pub config: String,
    /// Override the config's `cc`.
    #[arg(long, value_enum)]
    pub cc: Option<Cc>,
    /// Override the config's `role`.
    #[arg(long, value_parser = ["rp", "np"])]
    pub role: Option<String>,
    /// Take `[qcn_rp]` / `[dcqcn_rp]` / `[np]` from this preset instead: a bundled name
    /// (`nvidia`; `quench presets` lists them) or a TOML file, as `quench send --preset`.
    #[arg(long, value_name = "NAME|FILE", alias = "rp")]
    pub preset: Option<String>,
    /// Stop by itself after this long, e.g. `30s` (SIGINT / SIGTERM end it early, with the
    /// report); without it, run until a signal.
    #[arg(long, value_parser = super::duration_or_secs_arg)]
    pub duration: Option<Duration>,
    /// JSON lines on standard output: one progress object per second, then the summary; the
    /// human report goes to standard error.
    #[arg(long)]
    pub json: bool,
}

/// configs/appliance.toml: what `quench appliance` reads, validated into the pieces an
/// [`Appliance`] is built from. Unknown keys are refused; errors name the key.
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
    /// Control socket for `quench stats`.
    pub control_socket: Option<std::path::PathBuf>,
    pub qcn_rp: Option<rp::QcnParams>,
    pub dcqcn_rp: Option<rp::DcqcnParams>,
    pub np: Option<np::NpParams>,
}

impl ApplianceConfig {
    pub fn parse(text: &str) -> Result<Self, toml::de::Error> {
        toml::from_str(text)
    }

    /// The line rate.
    pub fn line(&self) -> Result<Rate, ParamError> {
        Rate::parse(&self.line_rate)
            .map_err(|e| ParamError::new("line_rate", &self.line_rate, e.to_string()))
    }

    /// The flow table's limits.
    pub fn table(&self) -> Result<TableConfig, ParamError> {
        if self.max_flows == 0 || self.max_flows > 1 << 24 {
            return Err(ParamError::new(
                "max_flows",
                self.max_flows,
                "must be in 1..=16777216",
            ));
        }
        if self.queue_bytes < crate::port::MAX_FRAME as u32 {
            return Err(ParamError::new(
                "queue_bytes",
                self.queue_bytes,
                format!(
                    "must hold one largest frame ({} octets)",
                    crate::port::MAX_FRAME
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
        Ok(TableConfig {
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
        let p = self
            .np
            .clone()
            .unwrap_or_default()
            .profile()
            .map_err(|e| anyhow::anyhow!("[np] {e}"))?;
        Ok(Some(np::Np::new(p)))
    }
}

fn load(args: &Args) -> anyhow::Result<ApplianceConfig> {
    let src = crate::bundled::open(&args.config, crate::bundled::Kind::Appliance, None)
        .with_context(|| format!("--config {}", args.config))?;
    let mut cfg = ApplianceConfig::parse(&src.text).with_context(|| src.origin.clone())?;
    if let Some(cc) = args.cc {
        cfg.cc = cc;
    }
    if let Some(role) = &args.role {
        cfg.role = if role == "np" { Role::Np } else { Role::Rp };
    }
    if let Some(p) = &args.preset {
        use crate::bundled::{open, table, Kind};
        let preset = open(p, Kind::Preset, None).with_context(|| format!("--preset {p}"))?;
        if let Some(t) = table(&preset, "qcn_rp")? {
            cfg.qcn_rp = Some(t);
        }
        if let Some(t) = table(&preset, "dcqcn_rp")? {
            cfg.dcqcn_rp = Some(t);
        }
        if let Some(t) = table(&preset, "np")? {
            cfg.np = Some(t);
        }
    }
    Ok(cfg)
}

/// One inside/outside pair and what is its own.
struct Pair {
    label: String,
    inside: crate::port::netns::NsPort,
    outside: crate::port::netns::NsPort,
    app: Appliance<AnyFrame>,
    to_out: Vec<AnyFrame>,
    to_in: Vec<AnyFrame>,
    rx: Vec<AnyFrame>,
    scratch_out: Scratch,
    scratch_in: Scratch,
    /// Frames the ports did not take (ring full beyond the backlog bound) or had no buffer for.
    tx_dropped: u64,
    /// Sends or housekeeping calls a port refused, and the last reason.
    tx_errors: u64,
    last_error: Option<String>,
}

/// Frames a pair keeps waiting for a full transmit ring before it drops (and counts) the rest.
const TX_BACKLOG: usize = 4 * BURST;

impl Pair {
    fn poll(&mut self, now: Instant) -> anyhow::Result<bool> {
        let mut busy = false;
        self.rx.clear();
        self.inside.rx_burst(0, &mut self.rx, BURST)?;
        for f in self.rx.drain(..) {
            busy = true;
            let out = &mut self.outside;
            match self.app.on_inside(now, f.data(), |n| out.alloc(n)) {
                InsideAction::Send(f) => self.to_out.push(f),
                InsideAction::Queued | InsideAction::Dropped => {}
            }
        }
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
        Ok(busy)
    }

    fn summary(&self, secs: f64) -> serde_json::Value {
        let c = self.app.counters();
        let t = self.app.table().counters();
        let h = self.app.latency();
        let q = |p: f64| h.value_at_quantile(p) as f64 / 1e3;
        let flows: Vec<serde_json::Value> = self
            .app
            .table()
            .top(16)
            .iter()
            .map(|f| {
                json!({
                    "flow": format!("{:?}", f.key),
                    "rpid": f.rpid,
                    "rate_mbps": f.rate.as_bps() as f64 / 1e6,
                    "sent_mbps": f.sent_bytes as f64 * 8.0 / secs.max(1e-9) / 1e6,
                    "sent_frames": f.sent_frames,
                    "queued_bytes": f.queued_bytes,
                    "drops": f.drops,
                })
            })
            .collect();
        json!({
            "pair": self.label,
            "counters": c,
            "table": t,
            "flows_held": self.app.table().flows(),
            "tx_dropped": self.tx_dropped,
            "tx_errors": self.tx_errors,
            "last_error": self.last_error,
            "latency_us": {"count": h.len(), "p50": q(0.5), "p99": q(0.99), "p999": q(0.999), "max": h.max() as f64 / 1e3},
            "np": self.app.np_counters().map(|n| json!({"ce": n.ce, "cnps": n.cnps, "suppressed": n.suppressed})),
            "top_flows": flows,
        })
    }
}

/// The progress status of the appliance's pairs: release rate over the interval, totals of
/// frames, drops, feedback accepted, CNPs sent, PFC (MAC control) frames passed, flows held.
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
        pfc += c.pass_mac_control;
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
    let cfg = load(&args)?;
    let path = &args.config;
    let table = cfg.table().with_context(|| path.to_string())?;
    let mut pairs = Vec::new();
    for (i, o) in args.inside.iter().zip(&args.outside) {
        let app = Appliance::new(
            cfg.role,
            cfg.cn_tag,
            cfg.ect0,
            table,
            cfg.rp().with_context(|| path.to_string())?,
            cfg.np().with_context(|| path.to_string())?,
        )?;
        pairs.push(Pair {
            label: format!("{i}<->{o}"),
            inside: args.port.open(i).context("--inside")?,
            outside: args.port.open(o).context("--outside")?,
            app,
            to_out: Vec::with_capacity(TX_BACKLOG * 2),
            to_in: Vec::with_capacity(TX_BACKLOG * 2),
            rx: Vec::with_capacity(BURST),
            scratch_out: Scratch::default(),
            scratch_in: Scratch::default(),
            tx_dropped: 0,
            tx_errors: 0,
            last_error: None,
        });
    }
    eprintln!(
        "quench appliance: {} pair(s), role {:?}, cc {:?}, up to {} flows per pair at {} octets \
         of table memory each",
        pairs.len(),
        cfg.role,
        cfg.cc,
        table.max_flows,
        crate::appliance::table::FlowTable::<AnyFrame>::bytes_per_flow()
    );
    let stop = crate::worker::stop_on_signals()?;
    let clock = Clock::new();
    let t0 = clock.now();
    let end = args.duration.map(|d| t0 + d);
    let mut progress = Progress::new("appliance", args.json, t0);
    let mut released = Delta::default();
    loop {
        let now = clock.now();
        if end.is_some_and(|e| now >= e) || stop.load(Ordering::Relaxed) {
            break;
        }
        for p in &mut pairs {
            p.poll(now).with_context(|| p.label.clone())?;
        }
        if progress.due(now) {
            show_progress(&mut progress, now, &pairs, &mut released)?;
        }
    }
    progress.done();
    let secs = (clock.now() - t0).as_secs_f64();
    let mut all = Vec::new();
    for p in &pairs {
        let s = p.summary(secs);
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
        all.push(s);
    }
    jsonln!("{}", json!({"appliance": all, "secs": secs}))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_config_parses_and_validates() {
        let text = include_str!("../../../configs/appliance.toml");
        let c = ApplianceConfig::parse(text).unwrap();
        c.table().unwrap();
        c.rp().unwrap();
        c.np().unwrap();
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
    }
}
