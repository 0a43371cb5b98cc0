//! `quench recv`: the receiver and DCQCN notification point on one interface.
//!
//! Busy-polls a port for `--duration`, counts quench test frames per flow (goodput, loss,
//! reordering, and one-way latency against the senders' `CLOCK_MONOTONIC` stamps when their
//! clock id says they share this host's clock: refused with the reason otherwise), sends them
//! back with `--reflect` (the sender then measures the round trip),
//! answers CE marks with RoCEv2 CNPs as the np crate decides (`--preset NAME|FILE`, the `[np]`
//! table of a preset such as `nvidia`; `--no-cnp` to stay silent), and at the end prints the
//! summary table and one JSON line, and writes the report directory (`--out DIR`: summary.json,
//! latency.hgrm, intervals.hlog, rate.svg, latency.svg).
use std::path::PathBuf;

use units::Duration;

use super::progress::{per_s, Delta, Progress};
use quench_report as report;
use quench_runtime::recv::runtime::{RecvLoop, RecvOptions, RecvStats};
use quench_runtime::recv::sink::{np_profile, SinkEnd, SinkOptions, DEFAULT_MAX_FLOWS};
use quench_wire::time::shared_now;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Interface to receive on, `[NETNS/]IFACE` (the driver: `--driver`).
    #[arg(long, value_name = "[NETNS/]IFACE")]
    pub iface: String,
    #[command(flatten)]
    pub port: super::PortArgs,
    /// How long to run, e.g. `10s`, `500ms`.
    #[arg(long, value_name = "DURATION", default_value = "10s",
          value_parser = super::duration_or_secs_arg, allow_hyphen_values = true)]
    pub duration: Duration,
    /// Report directory to write.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Interval of the interval log and the rate plot, e.g. `100ms`.
    #[arg(long, value_name = "DURATION", default_value = "100ms", value_parser = super::duration_arg,
          allow_hyphen_values = true)]
    pub interval: Duration,
    /// Preset whose `[np]` table configures the notification point (np::NpParams): a bundled
    /// name (`nvidia`, `quench presets` lists them) or a TOML file.
    #[arg(long, value_name = "NAME|FILE", value_parser = super::NameParser::presets(),
          hide_possible_values = true, alias = "np")]
    pub preset: Option<String>,
    /// Send no CNPs.
    #[arg(long)]
    pub no_cnp: bool,
    /// Flow-table size.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_FLOWS)]
    pub max_flows: usize,
    /// JSON lines on standard output: one progress object per second, then the summary; the
    /// human table goes to standard error.
    #[arg(long)]
    pub json: bool,
    /// Send every test frame back to its sender (addresses and UDP ports swapped, test header
    /// and its transmit stamp kept), so that `quench send --out DIR` measures the round trip
    /// on its own clock: latency between machines that share no clock.
    #[arg(long)]
    pub reflect: bool,
    /// Acknowledge each flow's test frames every OCTETS octets received (ns-3 HPCC's
    /// L2_ACK_INTERVAL; 1: every frame): the ACK echoes the frame's sequence number, transmit
    /// stamp, CE mark and INT hops, for `quench send --cc hpcc|dctcp|timely`.
    #[arg(long, value_name = "OCTETS")]
    pub ack_interval: Option<u64>,
    /// Act as a receiver whose link pauses: every PERIOD_US send a PFC PAUSE for priority 3
    /// lasting PAUSE_US (quanta at 1 Gbit/s, 512 ns each): `--pfc-pause 400:200`. The switch
    /// port toward this receiver then goes OFF and ON (TCD's victim scenario).
    #[arg(long, value_name = "PERIOD_US:PAUSE_US")]
    pub pfc_pause: Option<String>,
    /// What the loop does when an iteration moved nothing, after a short spin (the values of
    /// `quench switch --idle`): `auto` spins where no other process may run on its CPUs and
    /// yields elsewhere; `spin`; `yield`; `wait` (in the kernel until a frame arrives on
    /// its ports, AF_XDP and AF_PACKET, or its next deadline); or a duration, e.g. `50us`: sleep
    /// that long, at most until its next deadline.
    #[arg(long, value_name = quench_port::worker::IDLE_VALUES, default_value = "auto")]
    pub idle: quench_port::worker::Idle,
}

/// Writes the report directory `out`, prints the summary table of `sink`'s run and returns the
/// summary's JSON.
pub(crate) fn finish_sink(e: SinkEnd, out: Option<&std::path::Path>) -> anyhow::Result<String> {
    // The report first: a closed standard output (`| head`) must not lose it.
    if let Some(dir) = out {
        report::write_report_dir(dir, &e.summary, &e.latency, &e.log)?;
    }
    out!("{}", e.summary.table())?;
    for (n, what) in [
        (e.reflected, "test frames reflected to their senders"),
        (e.acks_sent, "ACKs sent (--ack-interval)"),
        (e.acks_with_int, "ACKs echoing INT hops"),
        (
            e.reply_tx_drops,
            "CNPs and reflected frames not sent (transmit ring full)",
        ),
        (e.pauses_sent, "PFC PAUSE frames sent (--pfc-pause)"),
        (
            e.announced,
            "frames announcing this port's MAC to the bridges",
        ),
        (
            e.cnps_suppressed,
            "CNPs suppressed by the notification point's interval",
        ),
    ] {
        if n > 0 {
            outln!("{what}: {n}")?;
        }
    }
    if let Some(dir) = out {
        outln!("report written to {}", dir.display())?;
    }
    Ok(serde_json::to_string(&e.summary)?)
}

/// The round trip of sender port `label` (the frames a `quench recv --reflect` sent back),
/// when any came back or `out` asks for its report directory.
pub(crate) fn print_rtt(
    label: &str,
    rtt: quench_runtime::recv::worker::RecvWorker,
    out: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    if rtt.receiver().flows().is_empty() && out.is_none() {
        return Ok(());
    }
    let (summary, all, log) = rtt.finish(shared_now());
    if let Some(dir) = out {
        report::write_report_dir(dir, &summary, &all, &log)?;
    }
    outln!("== rtt {label} (frames reflected back by quench recv --reflect)")?;
    out!("{}", summary.table())?;
    if let Some(dir) = out {
        outln!("report written to {}", dir.display())?;
    }
    jsonln!("rtt", serde_json::json!({"port": label, "rtt": summary}))?;
    Ok(())
}

/// The progress status of a receiver: receive rate and frames over the interval, totals of
/// frames, lost, CNPs and reflected frames.
fn show_progress(
    p: &mut Progress,
    now: units::Instant,
    s: &RecvStats,
    [frames, bytes]: &mut [Delta; 2],
) -> std::io::Result<()> {
    let (df, db) = (frames.step(s.frames), bytes.step(s.bytes));
    p.show(
        now,
        |dt| {
            format!(
                "rx {:.1} Mb/s {:.0} frames/s | {} frames, {} lost, {} flows | {} CNPs, {} reflected",
                per_s(db * 8, dt, 1e6),
                per_s(df, dt, 1.0),
                s.frames,
                s.lost,
                s.flows,
                s.cnps_sent,
                s.reflected
            )
        },
        |dt| {
            serde_json::json!({
                "rx_bps": per_s(db * 8, dt, 1.0), "rx_fps": per_s(df, dt, 1.0),
                "frames": s.frames, "bytes": s.bytes, "lost": s.lost, "flows": s.flows,
                "cnps_sent": s.cnps_sent, "reflected": s.reflected,
            })
        },
    )
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if args.json {
        super::human_to_stderr();
    }
    let np = if args.no_cnp {
        None
    } else {
        Some(np_profile(args.preset.as_deref())?)
    };
    let interval = args.interval.max(Duration::from_millis(1));
    let recv = RecvLoop::start(RecvOptions {
        iface: args.iface.clone(),
        driver: args.port.driver(),
        sink: SinkOptions {
            np,
            interval,
            max_flows: args.max_flows,
            pfc_pause: args.pfc_pause.clone(),
            reflect: args.reflect,
            ack_interval: args.ack_interval,
            clock: quench_wire::time::clock_id(),
        },
        duration: args.duration,
        idle: args.idle,
        stop: Some(quench_port::worker::stop_on_signals()?),
    })?;
    for n in recv.notes() {
        eprintln!("quench recv: {n}");
    }
    let mut progress = Progress::new("recv", args.json, shared_now());
    let mut deltas = Default::default();
    while !recv.wait(super::progress::WATCH_NAP) {
        let now = shared_now();
        if progress.due(now) {
            show_progress(&mut progress, now, &recv.stats(), &mut deltas)?;
        }
    }
    progress.done();
    let json = finish_sink(recv.join()?, args.out.as_deref())?;
    jsonln!("summary", serde_json::from_str(&json)?)?;
    Ok(())
}
