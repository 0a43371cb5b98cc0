//! `quench send` (generator mode): paced test flows out of one or more ports, rate-limited by
//! QCN or DCQCN reaction points fed by the CNMs / CNPs that come back on the same port.
//!
//! The flows come from `--config` (configs/send.toml: `[[flows]]`, addresses, `cc`, and the
//! `[qcn_rp]` / `[dcqcn_rp]` parameter tables, or those of `--preset NAME|FILE`); each
//! `--iface [NETNS/]IFACE` gets its own copy of them, its own flow-id range and reaction points.
//! One busy-polling loop reads the TSC clock once per iteration and serves every port: pops the
//! flows due on its timing wheel, builds their frames (transmit timestamp in `CLOCK_MONOTONIC`,
//! see [`quench_wire::time::shared_now`]) and sends them; `--sink` adds a receiver port (the
//! notification point of `quench recv`) to the same loop. At the end it prints, per port, the
//! flows' rates, the pacing audit and the loop's scheduling stalls, and one JSON line.
use std::net::Ipv4Addr;
use std::path::PathBuf;

use anyhow::Context as _;
use rand_xoshiro::rand_core::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use units::{Duration, Rate};

use super::progress::{per_s, Delta, Progress};
use quench_node::flowgen::schedule;
use quench_node::host::audit::{share_within, LoopStalls};
use quench_port::{Port, MAX_FRAME};
use quench_report as report;
use quench_runtime::recv::sink::{Sink, SinkOptions};
use quench_runtime::recv::worker::RecvWorker;
use quench_runtime::send::config::{default_catch_up_us, host_rp, Cc, PortConfig};
use quench_runtime::send::run::{LoopLimits, SendPort};
use quench_runtime::send::worker::{Addressing, SendWorker};
use quench_wire::time::Clock;
use quench_wire::MacAddr;

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

pub fn run(args: Args) -> anyhow::Result<()> {
    if args.json {
        super::human_to_stderr();
    }
    let nports = args.iface.len();
    let config_of = per_port("config", &args.config, nports)?;
    let rate_of = per_port("rate", &args.rate, nports)?;
    // Each port is its own host: one source address for all of them is refused.
    check_count("src-ip", args.src_ip.len(), nports, "--iface ports", false)?;
    check_count(
        "sink-out",
        args.sink_out.len(),
        args.sink.len(),
        "--sink ports",
        false,
    )?;
    check_count("out", args.out.len(), nports, "--iface ports", false)?;
    let clock_id = match args.clock_id {
        Some(id) if id == 0 || id > 0xFF_FFFF => {
            anyhow::bail!("--clock-id {id}: must be 1 ..= 0xffffff (24 bits, 0 means not said)")
        }
        Some(id) => id,
        None => quench_wire::time::clock_id(),
    };
    let pauses = sink_pauses(&args)?;
    let mut configs = Vec::with_capacity(nports);
    for k in 0..nports {
        let path = config_of(k).expect("--config has a default");
        let src = quench_config::bundled::open(path, quench_config::bundled::Kind::Send, None)
            .with_context(|| format!("--config {path}"))?;
        configs.push(PortConfig::resolve(
            src,
            args.cc,
            rate_of(k),
            args.preset.as_deref(),
        )?);
    }
    // One loop: its stall accounting uses the tightest catch-up bound among the ports, at most
    // 1 ms (with a long bound and a catch-up speed, a gap costs nothing for good, but it is still
    // time the pacing windows had to make up, and what the report should show).
    let loop_catch_up = configs
        .iter()
        .map(|c| c.pacing.max_catch_up)
        .min()
        .unwrap_or(Duration::from_micros(u64::from(default_catch_up_us())))
        .min(Duration::from_millis(1));
    let stop = quench_port::worker::stop_on_signals()?;
    let clock = Clock::new();
    let t0 = clock.now();
    let mut ports = Vec::with_capacity(nports);
    for (k, (label, pc)) in args.iface.iter().zip(&configs).enumerate() {
        let (cfg, file, cc, line) = (&pc.cfg, &pc.file, pc.cc, pc.line);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(cfg.seed.wrapping_add(k as u64));
        let first = (k as u32)
            .checked_mul(args.flow_stride)
            .and_then(|o| o.checked_add(args.flow_base))
            .ok_or_else(|| {
                anyhow::anyhow!("--flow-base + {k} x --flow-stride overflows a flow id")
            })?;
        let flows = schedule(&cfg.flows, &pc.dir, first, &mut rng)
            .map_err(|e| anyhow::anyhow!("{file}: {e}"))?;
        if nports > 1 && flows.len() as u64 > u64::from(args.flow_stride) {
            anyhow::bail!(
                "{file} gives each port {} flows, more than --flow-stride {}: the ports' flow ids \
                 would overlap",
                flows.len(),
                args.flow_stride
            );
        }
        let port = args.port.driver().open(label)?;
        let mac = port
            .caps()
            .mac
            .unwrap_or(MacAddr(2, 0, 0, 0, 0, 1 + k as u8));
        let src_ip = args.src_ip.get(k).copied().unwrap_or(cfg.src_ip);
        let w = SendWorker::new(
            pc.pacing,
            cfg.frame_len.min(MAX_FRAME as u32),
            flows,
            t0,
            host_rp(cc, cfg.qcn_rp.as_ref(), cfg.dcqcn_rp.as_ref(), line)
                .map_err(|e| anyhow::anyhow!("{file}: {e}"))?,
            Addressing {
                src_mac: mac,
                src_ip,
                dst_ip: cfg.dst_ip,
                vlan: cfg.vlan,
                ecn: pc.ecn,
                cn_tag: cc == Cc::Qcn,
            },
        )
        .map_err(|e| anyhow::anyhow!("{file}: {e}"))?
        .with_link_rate(line)
        .with_clock(clock_id);
        let rtt = RecvWorker::round_trip(clock_id, src_ip, Duration::from_millis(100), mac);
        ports.push(
            SendPort::new(
                label.clone(),
                port,
                w,
                Duration::from_millis(100),
                loop_catch_up,
            )
            .with_rtt(rtt),
        );
    }
    let np = if args.sink_no_cnp {
        None
    } else {
        Some(super::recv::np_profile(None)?)
    };
    let mut sinks = Vec::with_capacity(args.sink.len());
    for (label, pause) in args.sink.iter().zip(pauses) {
        let opts = SinkOptions {
            pfc_pause: pause,
            ..SinkOptions::defaults(np)
        };
        sinks.push(Sink::new(args.port.driver().open(label)?, opts)?);
    }
    let (idle, why) = args
        .idle
        .for_this_thread(quench_port::worker::IdleMode::Yield);
    eprintln!("quench send: the loop {} when idle ({why})", idle.what());
    let limits = LoopLimits {
        idle,
        end: t0 + args.duration,
        stop: &stop,
        linger: args.sink_linger,
    };
    // Gaps longer than the catch-up bound (or 1 ms) are reported as stalls.
    let mut stalls = LoopStalls::new(loop_catch_up);
    let mut progress = Progress::new("send", args.json, t0);
    let (mut tx_bytes, mut tx_frames) = (Delta::default(), Delta::default());
    let mut show = |now, ports: &[SendPort], sinks: &[Sink]| {
        if !progress.due(now) {
            return Ok(());
        }
        let mut c = quench_runtime::send::worker::SendCounters::default();
        let mut paused = 0u8;
        for o in ports {
            let k = o.w.counters();
            (c.frames, c.bytes) = (c.frames + k.frames, c.bytes + k.bytes);
            (c.cnms, c.cnps, c.pfc_rx) = (c.cnms + k.cnms, c.cnps + k.cnps, c.pfc_rx + k.pfc_rx);
            paused |= o.w.paused_mask(now);
        }
        let rtt_back: u64 = ports
            .iter()
            .filter_map(|o| o.rtt.as_ref())
            .flat_map(|m| m.receiver().flows())
            .map(|f| f.frames)
            .sum();
        let sink_rx: u64 = sinks
            .iter()
            .flat_map(|s| s.worker().receiver().flows())
            .map(|f| f.frames)
            .sum();
        let (db, df) = (tx_bytes.step(c.bytes), tx_frames.step(c.frames));
        progress.show(
            now,
            |dt| {
                format!(
                    "tx {:.1} Mb/s {:.0} frames/s | {} frames | feedback {} CNMs {} CNPs | {} PFC frames, paused {:#04x} | {} reflected back{}",
                    per_s(db * 8, dt, 1e6),
                    per_s(df, dt, 1.0),
                    c.frames,
                    c.cnms,
                    c.cnps,
                    c.pfc_rx,
                    paused,
                    rtt_back,
                    if sinks.is_empty() { String::new() } else { format!(" | sinks rx {sink_rx}") }
                )
            },
            |dt| {
                serde_json::json!({
                    "tx_bps": per_s(db * 8, dt, 1.0), "tx_fps": per_s(df, dt, 1.0),
                    "frames": c.frames, "cnms": c.cnms, "cnps": c.cnps, "pfc_rx": c.pfc_rx,
                    "paused_mask": paused, "reflected_back": rtt_back, "sink_frames": sink_rx,
                })
            },
        )
    };
    let secs = quench_runtime::send::run::run(
        &mut ports,
        &mut sinks,
        &clock,
        t0,
        &limits,
        &mut stalls,
        &mut show,
    )?;
    progress.done();
    for (k, o) in ports.iter_mut().enumerate() {
        if nports > 1 {
            outln!("== port {}", o.label)?;
        }
        let unsent = o.tx.len() + o.port.tx_queued().unwrap_or(0);
        let kernel = KernelTx {
            unsent,
            refusals: o.port.tx_refusals(),
            drops: o.port.kernel_tx_drops(),
            rx_drops: o.port.kernel_rx_drops(),
        };
        report(o, configs[k].cc, secs, &stalls, &kernel)?;
    }
    for (k, o) in ports.into_iter().enumerate() {
        let out = args.out.get(k);
        let Some(rtt) = o.rtt else { continue };
        if rtt.receiver().flows().is_empty() && out.is_none() {
            continue;
        }
        let (summary, all, log) = rtt.finish(quench_wire::time::shared_now());
        if let Some(dir) = out {
            report::write_report_dir(dir, &summary, &all, &log)?;
        }
        outln!(
            "== rtt {} (frames reflected back by quench recv --reflect)",
            o.label
        )?;
        out!("{}", summary.table())?;
        if let Some(dir) = out {
            outln!("report written to {}", dir.display())?;
        }
        jsonln!("rtt", serde_json::json!({"port": o.label, "rtt": summary}))?;
    }
    for (k, (s, label)) in sinks.into_iter().zip(&args.sink).enumerate() {
        outln!("== sink {label}")?;
        let json = super::recv::finish_sink(s, args.sink_out.get(k).map(PathBuf::as_path))?;
        jsonln!("sink", serde_json::from_str::<serde_json::Value>(&json)?)?;
    }
    Ok(())
}

/// What became of the frames a port was handed, as its kernel side tells.
struct KernelTx {
    /// Still queued at the end ([`quench_port::Port::tx_queued`] plus the sender's own queue).
    unsent: usize,
    refusals: Option<u64>,
    drops: Option<u64>,
    /// Frames the kernel dropped for want of room in the port's receive ring (feedback among
    /// them), where the port can tell.
    rx_drops: Option<u64>,
}

/// One port's lines: per-flow rates, feedback counts, what did not leave, the pacing audit,
/// the loop's scheduling stalls (shared by every port of the loop), then one JSON line.
fn report(
    o: &SendPort,
    cc: Cc,
    secs: f64,
    stalls: &LoopStalls,
    k: &KernelTx,
) -> std::io::Result<()> {
    let w = &o.w;
    let c = w.counters();
    outln!(
        "{:>6} {:>10} {:>12} {:>12}",
        "flow",
        "frames",
        "Mb/s sent",
        "rate now"
    )?;
    let mut flows_json = Vec::new();
    for (spec, f) in w.flows() {
        let rate_now = w.rate(spec.flow);
        let mbps = f.bytes_sent as f64 * 8.0 / secs / 1e6;
        outln!(
            "{:>6} {:>10} {:>12.1} {:>12}",
            spec.flow,
            f.seq,
            mbps,
            rate_now
        )?;
        flows_json.push(serde_json::json!({
            "flow": spec.flow.0, "frames": f.seq, "sent_bps": mbps * 1e6,
            "rate_now_bps": rate_now.as_bps(),
        }));
    }
    outln!(
        "sent {} frames in {:.1} s; feedback: {} CNMs, {} CNPs, {} for unknown flows, {} forged, {} refused; {} PFC frames; {} frames without a buffer",
        c.frames, secs, c.cnms, c.cnps, c.unknown_feedback, c.forged.total(), c.refused_feedback, c.pfc_rx, o.no_buffer
    )?;
    if k.unsent > 0 {
        outln!(
            "not sent: {} frames still queued (here or in the port's ring) at the end",
            k.unsent
        )?;
    }
    if let Some(r) = k.refusals.filter(|&r| r > 0) {
        outln!("the device refused {r} transmit attempts (peer down or backlog full); each was retried")?;
    }
    if let Some(d) = k.drops.filter(|&d| d > 0) {
        outln!("lost: {d} frames the kernel took and dropped unsent (the device refused them)")?;
    }
    let audit = &o.audit;
    let dev = audit.max_abs();
    // The windows no stall touched: what the pacer itself gets wrong, apart from the CPU being
    // taken away.
    let unstalled = audit.unstalled().count();
    let unstalled_within = share_within(audit.unstalled(), 0.01);
    let unstalled_dev = audit.unstalled().map(f64::abs).reduce(f64::max);
    if let Some(d) = dev {
        outln!(
            "pacing: sent vs RP rate over {} windows of 100 ms: {:.1} % within 1 %, largest deviation {:.3} %",
            audit.deviations.len(),
            100.0 * audit.within(0.01).unwrap_or(0.0),
            100.0 * d
        )?;
        outln!(
            "pacing: the {} windows no loop stall over the catch-up bound touched: {:.1} % within 1 %, largest deviation {:.3} %",
            unstalled,
            100.0 * unstalled_within.unwrap_or(0.0),
            100.0 * unstalled_dev.unwrap_or(0.0)
        )?;
    }
    outln!(
        "scheduling: {stalls}; transmission time given up at the catch-up bound: {:.1} ms",
        w.core.lag_dropped().as_nanos() as f64 / 1e6
    )?;
    jsonln!(
        "summary",
        serde_json::json!({
            "port": o.label,
            "pacing": audit.to_json(),
            "scheduling": {"stalls": stalls.count, "stalled_ns": stalls.total.as_nanos(),
                           "longest_stall_ns": stalls.longest.as_nanos(),
                           "lag_dropped_ns": w.core.lag_dropped().as_nanos()},
            "cc": format!("{cc:?}").to_lowercase(), "seconds": secs, "frames": c.frames,
            "cnms": c.cnms, "cnps": c.cnps, "unknown_feedback": c.unknown_feedback,
            "forged_feedback": c.forged.total(), "forged": c.forged, "refused_feedback": c.refused_feedback,
            "pfc_rx": c.pfc_rx, "no_buffer": o.no_buffer, "unsent": k.unsent,
            "tx_refusals": k.refusals, "tx_kernel_drops": k.drops, "rx_kernel_drops": k.rx_drops,
            "flows": flows_json,
        })
    )?;
    Ok(())
}
