//! `quench send` (generator mode): paced test flows out of one or more ports, each under its
//! reaction point: QCN or DCQCN fed by the CNMs / CNPs that come back, or HPCC, DCTCP or TIMELY
//! fed by the receiver's ACKs ([`quench_runtime::send::runtime::SendLoop`]). Parses the flags,
//! starts the loop, shows its progress and prints, per port, the flows' rates, the pacing audit,
//! the loop's stalls and one JSON line; then the round trips and the sinks' reports. The flows
//! come from `--config` (configs/send.toml, with `--preset NAME|FILE`'s parameter tables); each
//! `--iface [NETNS/]IFACE` gets its own copy, flow-id range and reaction points; `--sink` adds a
//! receiver port (the notification point of `quench recv`) to the same loop.

use std::net::Ipv4Addr;
use std::path::PathBuf;

use anyhow::Context as _;
use units::{Duration, Rate};

use super::progress::{per_s, Delta, Progress};
use quench_config::bundled::{open, Kind};
use quench_runtime::recv::sink::{np_profile, SinkOptions};
use quench_runtime::send::config::{Cc, PortConfig};
use quench_runtime::send::runtime::{SendLoop, SendOptions, SendPortSpec, SendStats};
use quench_wire::time::Clock;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Port to send on, `[NETNS/]IFACE` (the driver: `--driver`). Repeat it to drive several
    /// ports, e.g. one per sender host's namespace, from one poll loop: port k's flows are
    /// numbered from `--flow-base` + k x `--flow-stride` and seeded with the config's seed + k.
    /// A `NETNS/` prefix opens the interface inside that network namespace (root).
    #[arg(long, value_name = "[NETNS/]IFACE", required = true)]
    pub iface: Vec<String>,
    #[command(flatten)]
    pub port: super::PortArgs,
    /// The flows, addresses and RP tables: once, or once per `--iface` in the same order (hosts
    /// with different destinations or traffic in one process).
    #[arg(long, value_name = "NAME|FILE", hide_possible_values = true,
          value_parser = super::NameParser::of(&[quench_config::bundled::Kind::Send]), default_value = "send")]
    pub config: Vec<String>,
    /// Override the config's `cc`.
    #[arg(long, value_enum, value_name = "CC")]
    pub cc: Option<Cc>,
    /// Take `[qcn_rp]` / `[dcqcn_rp]` from this preset instead: a bundled name (`nvidia`,
    /// `quench presets` lists them) or a TOML file.
    #[arg(long, value_name = "NAME|FILE", value_parser = super::NameParser::presets(),
          hide_possible_values = true, alias = "rp")]
    pub preset: Option<String>,
    /// Override the config's `src_ip`: once per `--iface`, in the same order (each port is a
    /// host of its own, so one address for several ports is refused).
    #[arg(long, value_name = "IPV4")]
    pub src_ip: Vec<Ipv4Addr>,
    /// First flow id (senders sharing a receiver need distinct ranges).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub flow_base: u32,
    /// Flow-id distance between the ranges of consecutive `--iface` ports.
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub flow_stride: u32,
    /// Override the rate of every flow group, e.g. `300mbit`: once, or once per `--iface`.
    #[arg(long, value_name = "RATE", value_parser = super::rate_arg, allow_hyphen_values = true)]
    pub rate: Vec<Rate>,
    /// Also receive on this port, `[NETNS/]IFACE`, in the same poll loop: the receiver and
    /// notification point of `quench recv` with its defaults (CNPs for CE marks, per-flow
    /// goodput, loss, one-way latency). For a machine with fewer cores than hosts: a separate
    /// receiver process would share a core with the switch or the senders and read its frames
    /// milliseconds late. Repeat it for several receivers. Each report, headed `== sink LABEL`,
    /// ends with one JSON line: the receiver's summary, as `quench recv --json` prints it,
    /// with `"type": "sink"`.
    #[arg(long, value_name = "[NETNS/]IFACE")]
    pub sink: Vec<String>,
    /// With --sink: acknowledge each flow every OCTETS octets, as `quench recv --ack-interval`
    /// (for `--cc hpcc|dctcp|timely`).
    #[arg(long, value_name = "OCTETS", requires = "sink")]
    pub sink_ack_interval: Option<u64>,
    /// With --sink: the report directory to write (as `quench recv --out`), once per `--sink`
    /// in the same order.
    #[arg(long, value_name = "DIR", requires = "sink")]
    pub sink_out: Vec<PathBuf>,
    /// With --sink: send no CNPs.
    #[arg(long, requires = "sink")]
    pub sink_no_cnp: bool,
    /// Make the sink LABEL (one of the `--sink` arguments) a receiver whose link pauses, as
    /// `quench recv --pfc-pause`: `--sink-pfc-pause r1/eth0=400:200`. Repeatable.
    #[arg(long, value_name = "LABEL=PERIOD_US:PAUSE_US")]
    pub sink_pfc_pause: Vec<String>,
    /// With --sink: keep receiving this long after the last frame is sent, so that frames
    /// still queued in the switch arrive instead of counting as lost (a sink's goodput runs
    /// from its first frame to its last, so the wait does not dilute it).
    #[arg(long, value_name = "DURATION", default_value = "100ms", value_parser = super::duration_arg,
          requires = "sink", allow_hyphen_values = true)]
    pub sink_linger: Duration,
    /// Round-trip report directory (as `quench recv --out`, with `rtt.hgrm` and latency kind
    /// `rtt`): the frames a `quench recv --reflect` sends back, timed on this host's clock.
    /// Once per `--iface`, in the same order. Without it the round trip is printed when
    /// reflected frames come back.
    #[arg(long, value_name = "DIR")]
    pub out: Vec<PathBuf>,
    /// JSON lines on standard output: one progress object per second, then the summaries; the
    /// human report goes to standard error.
    #[arg(long)]
    pub json: bool,
    /// Stamp this clock id (24 bits) into the test headers instead of this host's: a receiver
    /// on this host then takes the sender for another machine and refuses one-way latency
    /// (a test of a receiver's clock check on one machine).
    #[arg(long, value_name = "N")]
    pub clock_id: Option<u32>,
    /// How long to run, e.g. `10s` (SIGINT / SIGTERM end it early, with the report).
    #[arg(long, value_name = "DURATION", default_value = "10s",
          value_parser = super::duration_or_secs_arg, allow_hyphen_values = true)]
    pub duration: Duration,
    /// What the loop does when an iteration moved nothing, after a short spin (the values of
    /// `quench switch --idle`): `auto` spins where no other process may run on its CPUs and
    /// yields elsewhere; `spin`; `yield`; `wait` (in the kernel until a frame arrives on
    /// its ports, AF_XDP and AF_PACKET, or its next deadline); or a duration, e.g. `50us`: sleep
    /// that long, at most until its next deadline.
    #[arg(long, value_name = quench_port::worker::IDLE_VALUES, default_value = "auto")]
    pub idle: quench_port::worker::Idle,
}

/// Checks that `--NAME` was given once per one of `n` `what` (e.g. "--iface ports"), in the
/// same order, or not at all; or also just once, for all of them, when `once_for_all`.
fn check_count(
    name: &str,
    given: usize,
    n: usize,
    what: &str,
    once_for_all: bool,
) -> anyhow::Result<()> {
    if given == 0 || given == n || (once_for_all && given == 1) {
        return Ok(());
    }
    anyhow::bail!(
        "--{name} given {given} times for {n} {what}: give it {}once per {}, in the same order, \
         or not at all",
        if once_for_all { "once, " } else { "" },
        what.trim_end_matches('s')
    )
}

/// `--NAME`'s value for port k (see [`check_count`]): its own, the one given for all ports, or
/// `None`.
fn per_port<'a, T>(
    name: &str,
    given: &'a [T],
    nports: usize,
) -> anyhow::Result<impl Fn(usize) -> Option<&'a T>> {
    check_count(name, given.len(), nports, "--iface ports", true)?;
    Ok(move |k: usize| given.get(k).or(given.first()))
}

/// `--sink-pfc-pause LABEL=SPEC` arguments -> the spec of each `--sink`, in order.
fn sink_pauses(args: &Args) -> anyhow::Result<Vec<Option<String>>> {
    let mut specs = vec![None; args.sink.len()];
    for a in &args.sink_pfc_pause {
        let (label, spec) = a.split_once('=').ok_or_else(|| {
            anyhow::anyhow!(
                "--sink-pfc-pause {a:?}: expected LABEL=PERIOD_US:PAUSE_US, e.g. r1/eth0=400:200"
            )
        })?;
        let k = args.sink.iter().position(|s| s == label).ok_or_else(|| {
            anyhow::anyhow!("--sink-pfc-pause {a:?}: {label:?} is not one of the --sink ports")
        })?;
        specs[k] = Some(spec.to_string());
    }
    Ok(specs)
}

impl Args {
    /// The runtime's options from the flags: each port's configuration, the sinks'.
    fn options(&self) -> anyhow::Result<SendOptions> {
        let nports = self.iface.len();
        let config_of = per_port("config", &self.config, nports)?;
        let rate_of = per_port("rate", &self.rate, nports)?;
        // Each port is its own host: one source address for all of them is refused.
        check_count("src-ip", self.src_ip.len(), nports, "--iface ports", false)?;
        let nsinks = self.sink.len();
        check_count(
            "sink-out",
            self.sink_out.len(),
            nsinks,
            "--sink ports",
            false,
        )?;
        check_count("out", self.out.len(), nports, "--iface ports", false)?;
        let pauses = sink_pauses(self)?;
        let mut ports = Vec::with_capacity(nports);
        for (k, label) in self.iface.iter().enumerate() {
            let path = config_of(k).expect("--config has a default");
            let src = open(path, Kind::Send, None).with_context(|| format!("--config {path}"))?;
            let preset = self.preset.as_deref();
            ports.push(SendPortSpec {
                label: label.clone(),
                config: PortConfig::resolve(src, self.cc, rate_of(k), preset)?,
                src_ip: self.src_ip.get(k).copied(),
            });
        }
        let np = if self.sink_no_cnp {
            None
        } else {
            Some(np_profile(None)?)
        };
        let sinks = (self.sink.iter().zip(pauses))
            .map(|(label, pause)| {
                let opts = SinkOptions {
                    pfc_pause: pause,
                    ack_interval: self.sink_ack_interval,
                    ..SinkOptions::defaults(np)
                };
                (label.clone(), opts)
            })
            .collect();
        Ok(SendOptions {
            ports,
            driver: self.port.driver(),
            flow_base: self.flow_base,
            flow_stride: self.flow_stride,
            sinks,
            clock_id: self.clock_id,
            duration: self.duration,
            linger: self.sink_linger,
            idle: self.idle,
            stop: Some(quench_port::worker::stop_on_signals()?),
        })
    }
}

/// The progress status of the sender: transmit rate over the interval, totals of frames,
/// feedback, PFC frames, priorities paused, reflected frames back, the sinks' frames (`sinks`).
fn show_progress(
    p: &mut Progress,
    now: units::Instant,
    s: &SendStats,
    sinks: bool,
    [bytes, frames]: &mut [Delta; 2],
) -> std::io::Result<()> {
    let (c, pm, rb) = (&s.sent, s.paused_mask, s.reflected_back);
    let (db, df) = (bytes.step(c.bytes), frames.step(c.frames));
    let sinks_rx = match sinks {
        true => format!(" | sinks rx {}", s.sink_frames),
        false => String::new(),
    };
    p.show(
        now,
        |dt| {
            let (mbps, fps) = (per_s(db * 8, dt, 1e6), per_s(df, dt, 1.0));
            format!(
                "tx {mbps:.1} Mb/s {fps:.0} frames/s | {} frames | feedback {} CNMs {} CNPs | {} \
                 PFC frames, paused {pm:#04x} | {rb} reflected back{sinks_rx}",
                c.frames, c.cnms, c.cnps, c.pfc_rx
            )
        },
        |dt| {
            serde_json::json!({
                "tx_bps": per_s(db * 8, dt, 1.0), "tx_fps": per_s(df, dt, 1.0),
                "frames": c.frames, "cnms": c.cnms, "cnps": c.cnps, "pfc_rx": c.pfc_rx,
                "paused_mask": pm, "reflected_back": rb, "sink_frames": s.sink_frames,
            })
        },
    )
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if args.json {
        super::human_to_stderr();
    }
    let send = SendLoop::start(args.options()?)?;
    for n in send.notes() {
        eprintln!("quench send: {n}");
    }
    let clock = Clock::new();
    let mut progress = Progress::new("send", args.json, clock.now());
    let mut deltas = Default::default();
    while !send.wait(super::progress::WATCH_NAP) {
        let now = clock.now();
        if progress.due(now) {
            let sinks = !args.sink.is_empty();
            show_progress(&mut progress, now, &send.stats(), sinks, &mut deltas)?;
        }
    }
    progress.done();
    let report = send.join()?;
    for o in &report.ports {
        if report.ports.len() > 1 {
            outln!("== port {}", o.label)?;
        }
        out!("{}", o.table(report.secs, &report.stalls))?;
        jsonln!("summary", o.to_json(report.secs, &report.stalls))?;
    }
    for (k, o) in report.ports.into_iter().enumerate() {
        if let Some(rtt) = o.rtt {
            super::recv::print_rtt(&o.label, rtt, args.out.get(k).map(PathBuf::as_path))?;
        }
    }
    for (k, (s, label)) in report.sinks.into_iter().zip(&args.sink).enumerate() {
        outln!("== sink {label}")?;
        let json = super::recv::finish_sink(s, args.sink_out.get(k).map(PathBuf::as_path))?;
        jsonln!("sink", serde_json::from_str::<serde_json::Value>(&json)?)?;
    }
    Ok(())
}
