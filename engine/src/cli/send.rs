//! `quench send` (generator mode): paced test flows out of one interface, rate-limited by QCN or
//! DCQCN reaction points fed by the CNMs / CNPs that come back on the same interface.
//!
//! The flows come from `--config` (configs/send.toml: `[[flows]]`, addresses, `cc`, and the
//! `[qcn_rp]` / `[dcqcn_rp]` parameter tables, or those of a preset via `--rp FILE`). A
//! busy-polling loop reads the TSC clock once per burst, pops the flows due on the timing wheel,
//! builds their frames (transmit timestamp in `CLOCK_MONOTONIC`, see [`crate::time::shared_now`])
//! and sends them with AF_PACKET. At the end it prints per-flow rates and one JSON line.
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use rand_xoshiro::rand_core::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Deserialize;
use units::{Duration, FlowId, Rate};

use crate::port::{Frame as _, Port, BURST, MAX_FRAME};
use crate::send::flowgen::{schedule, FlowGroup};
use crate::send::pacer::{Generator, PacingConfig};
use crate::send::worker::{Addressing, Control, SendWorker};
use crate::time::{shared_now, Clock};
use crate::wire::ipv4::Ecn;
use crate::wire::MacAddr;

/// Which congestion control the sender runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Cc {
    #[default]
    None,
    Qcn,
    Dcqcn,
}

/// ECN codepoint of the data frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EcnSetting {
    NotEct,
    Ect0,
    /// ECT(1), which TCD reads as "TCD-capable".
    Ect1,
}

fn default_frame_len() -> u32 {
    1500
}
fn default_vlan() -> u16 {
    1
}

/// configs/send.toml.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SendConfig {
    #[serde(default)]
    pub cc: Cc,
    /// The RPs' line rate C, e.g. `1gbit`.
    pub line_rate: String,
    #[serde(default = "default_frame_len")]
    pub frame_len: u32,
    pub src_ip: Ipv4Addr,
    pub dst_ip: Ipv4Addr,
    #[serde(default = "default_vlan")]
    pub vlan: u16,
    /// Default: ECT(0) with DCQCN, Not-ECT otherwise.
    pub ecn: Option<EcnSetting>,
    #[serde(default)]
    pub seed: u64,
    pub qcn_rp: Option<rp::QcnParams>,
    pub dcqcn_rp: Option<rp::DcqcnParams>,
    pub flows: Vec<FlowGroup>,
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Interface to send on (the driver: `--driver`).
    #[arg(long)]
    pub iface: String,
    #[command(flatten)]
    pub port: super::PortArgs,
    #[arg(long, default_value = "configs/send.toml")]
    pub config: PathBuf,
    /// Override the config's `cc`.
    #[arg(long, value_enum)]
    pub cc: Option<Cc>,
    /// Take `[qcn_rp]` / `[dcqcn_rp]` from this preset instead (e.g. configs/nvidia.toml).
    #[arg(long)]
    pub rp: Option<PathBuf>,
    /// Override the config's `src_ip`.
    #[arg(long)]
    pub src_ip: Option<Ipv4Addr>,
    /// First flow id (senders sharing a receiver need distinct ranges).
    #[arg(long, default_value_t = 1)]
    pub flow_base: u32,
    /// Override the rate of every flow group, e.g. `300mbit`.
    #[arg(long)]
    pub rate: Option<String>,
    /// How long to run, seconds.
    #[arg(long, default_value_t = 10.0)]
    pub duration_s: f64,
}

fn load(path: &Path) -> anyhow::Result<SendConfig> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    toml::from_str(&text).with_context(|| format!("{}", path.display()))
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let mut cfg = load(&args.config)?;
    let file = args.config.display().to_string();
    let cc = args.cc.unwrap_or(cfg.cc);
    if let Some(r) = &args.rate {
        for g in &mut cfg.flows {
            g.rate = r.clone();
        }
    }
    if let Some(p) = &args.rp {
        if let Some(q) = super::preset_table(p, "qcn_rp")? {
            cfg.qcn_rp = Some(q);
        }
        if let Some(d) = super::preset_table(p, "dcqcn_rp")? {
            cfg.dcqcn_rp = Some(d);
        }
    }
    let line =
        Rate::parse(&cfg.line_rate).map_err(|e| anyhow::anyhow!("{file}: line_rate: {e}"))?;
    let base = args.config.parent().unwrap_or(Path::new("."));
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(cfg.seed);
    let flows = schedule(&cfg.flows, base, args.flow_base, &mut rng)
        .map_err(|e| anyhow::anyhow!("{file}: {e}"))?;
    let ids: Vec<FlowId> = flows.iter().map(|f| f.flow).collect();
    let control = match cc {
        Cc::None => Control::None,
        Cc::Qcn => Control::qcn(
            cfg.qcn_rp
                .clone()
                .unwrap_or_default()
                .profile(line)
                .map_err(|e| anyhow::anyhow!("{file}: [qcn_rp] {e}"))?,
        ),
        Cc::Dcqcn => Control::dcqcn(
            cfg.dcqcn_rp
                .clone()
                .unwrap_or_default()
                .profile(line)
                .map_err(|e| anyhow::anyhow!("{file}: [dcqcn_rp] {e}"))?,
            ids.iter().copied(),
        ),
    };
    let mut port = super::open_port(&args.iface, &args.port)?;
    let mac = port.caps().mac.unwrap_or([2, 0, 0, 0, 0, 1]);
    let ecn = match cfg.ecn {
        Some(EcnSetting::NotEct) => Ecn::NotEct,
        Some(EcnSetting::Ect0) => Ecn::Ect0,
        Some(EcnSetting::Ect1) => Ecn::Ect1,
        None if cc == Cc::Dcqcn => Ecn::Ect0,
        None => Ecn::NotEct,
    };
    let clock = Clock::new();
    let t0 = clock.now();
    let pacing = PacingConfig {
        frame_len: cfg.frame_len.min(MAX_FRAME as u32),
        ..PacingConfig::default()
    };
    let gen = Generator::new(pacing, flows, t0)?;
    let mut w = SendWorker::new(
        gen,
        control,
        Addressing {
            src_mac: MacAddr::new(mac[0], mac[1], mac[2], mac[3], mac[4], mac[5]),
            src_ip: args.src_ip.unwrap_or(cfg.src_ip),
            dst_ip: cfg.dst_ip,
            vlan: cfg.vlan,
            ecn,
            cn_tag: cc == Cc::Qcn,
        },
    )
    .with_link_rate(line);
    let end = t0 + Duration::from_nanos((args.duration_s.max(0.0) * 1e9) as u64);
    let mut rx = Vec::with_capacity(BURST);
    let mut tx = Vec::with_capacity(BURST);
    let mut buf = vec![0u8; MAX_FRAME + 64];
    let mut no_buffer = 0u64;
    let mut idle = crate::worker::Idle::default();
    let mut audit = crate::send::pacer::PaceAudit::new(Duration::from_millis(100));
    // The pacer's catch-up bound: gaps longer than it cost transmission time for good.
    let mut stalls = crate::send::pacer::LoopStalls::new(pacing.max_catch_up);
    loop {
        let now = clock.now();
        if now >= end {
            break;
        }
        stalls.tick(now);
        audit.sample(now, &w.gen, |f| w.paced_rate(now, f));
        port.rx_burst(0, &mut rx, BURST)?;
        let mut work = rx.len();
        for f in rx.drain(..) {
            w.on_rx(now, f.data());
        }
        w.on_timeout(now);
        let stamp = shared_now();
        while tx.len() < BURST {
            let Some((_, n)) = w.next_frame(now, stamp, &mut buf) else {
                break;
            };
            match port.import(&buf[..n]) {
                Some(f) => tx.push(f),
                None => no_buffer += 1,
            }
        }
        work += tx.len();
        if !tx.is_empty() {
            // Frames the ring did not take stay in `tx`, in order, for the next burst.
            port.tx_burst(0, &mut tx)?;
        }
        port.poll()?;
        idle.after(work);
    }
    let secs = (clock.now() - t0).as_secs_f64();
    let c = w.counters();
    println!(
        "{:>6} {:>10} {:>12} {:>12}",
        "flow", "frames", "Mb/s sent", "rate now"
    );
    let mut flows_json = Vec::new();
    for f in w.gen.flows() {
        let rate_now = w.rate(f.spec.flow);
        let mbps = f.bytes_sent as f64 * 8.0 / secs / 1e6;
        println!(
            "{:>6} {:>10} {:>12.1} {:>12}",
            f.spec.flow, f.seq, mbps, rate_now
        );
        flows_json.push(serde_json::json!({
            "flow": f.spec.flow.0, "frames": f.seq, "sent_bps": mbps * 1e6,
            "rate_now_bps": rate_now.as_bps(),
        }));
    }
    println!(
        "sent {} frames in {:.1} s; feedback: {} CNMs, {} CNPs, {} for unknown flows, {} refused; {} PFC frames; {} frames without a buffer",
        c.frames, secs, c.cnms, c.cnps, c.unknown_feedback, c.refused_feedback, c.pfc_rx, no_buffer
    );
    let dev = audit.max_abs();
    if let Some(d) = dev {
        println!(
            "pacing: sent vs RP rate over {} windows of 100 ms: {:.1} % within 1 %, largest deviation {:.3} %",
            audit.deviations.len(),
            100.0 * audit.within(0.01).unwrap_or(0.0),
            100.0 * d
        );
    }
    println!(
        "scheduling: {} loop gaps over {} us, {:.1} ms in all, longest {:.1} ms; transmission time given up at the catch-up bound: {:.1} ms",
        stalls.count,
        pacing.max_catch_up.as_nanos() / 1000,
        stalls.total.as_nanos() as f64 / 1e6,
        stalls.longest.as_nanos() as f64 / 1e6,
        w.gen.lag_dropped().as_nanos() as f64 / 1e6
    );
    println!(
        "{}",
        serde_json::json!({
            "pacing": {"windows": audit.deviations.len(), "max_abs_dev": dev,
                       "within_1pct": audit.within(0.01), "deviations": audit.deviations},
            "scheduling": {"stalls": stalls.count, "stalled_ms": stalls.total.as_nanos() as f64 / 1e6,
                           "longest_stall_ms": stalls.longest.as_nanos() as f64 / 1e6,
                           "lag_dropped_ms": w.gen.lag_dropped().as_nanos() as f64 / 1e6},
            "cc": format!("{cc:?}").to_lowercase(), "seconds": secs, "frames": c.frames,
            "cnms": c.cnms, "cnps": c.cnps, "unknown_feedback": c.unknown_feedback,
            "pfc_rx": c.pfc_rx,
            "flows": flows_json,
        })
    );
    Ok(())
}
