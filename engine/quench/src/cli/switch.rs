//! `quench switch --config configs/switch.toml`: the software switch on real ports
//! ([`quench_runtime::switch::runtime::Switch`]): parses the flags, starts the switch, shows
//! its progress until SIGINT/SIGTERM or `--duration`, and prints the final counters.
use std::path::PathBuf;

use anyhow::Context;
use units::Duration;

use quench_port::worker;
use quench_runtime::switch::config::SwitchConfig;
use quench_runtime::switch::runtime::{FastPathMode, Switch, SwitchOptions};
use quench_runtime::switch::stats::{PortSnapshot, Snapshot};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The switch configuration: a bundled name (`switch-qcn`, `quench presets` lists them) or a
    /// TOML file.
    #[arg(long, value_name = "NAME|FILE", hide_possible_values = true,
          value_parser = super::NameParser::of(&[quench_config::bundled::Kind::Switch]))]
    pub config: String,
    /// Forwarding workers (pinned cores); overrides the file's `workers`.
    #[arg(long, value_name = "N")]
    pub workers: Option<usize>,
    /// Write a port's rx and tx to pcap: `--capture PORT=FILE` (repeatable).
    #[arg(long, value_name = "PORT=FILE")]
    pub capture: Vec<String>,
    /// Control socket path (`quench stats --control-socket`); overrides the file's
    /// `control_socket`.
    #[arg(long, value_name = "PATH", alias = "control")]
    pub control_socket: Option<PathBuf>,
    /// Replace XDP programs already attached to the ports (not only stale quench ones).
    #[arg(long)]
    pub force_xdp: bool,
    /// Stop by itself after this long, e.g. `30s`.
    #[arg(long, value_name = "DURATION", value_parser = super::duration_or_secs_arg,
          allow_hyphen_values = true)]
    pub duration: Option<Duration>,
    /// JSON lines on standard output: one progress object per second (totals and each port's
    /// counters), then the final snapshot; the human table goes to standard error.
    #[arg(long)]
    pub json: bool,
    /// What an idle worker does after a short spin: `auto` spins where the worker's core is
    /// its own (no other process's thread may run there: a CPU shielded by affinity, as
    /// scripts/testbed/cpu-shield.sh does, or isolated) and yields elsewhere (waits in the kernel
    /// with the kernel fast path), so that on a shared machine the peers that produce its frames
    /// get the CPU; `spin` (never give the CPU up, as DPDK's lcores); `yield`; a duration, e.g.
    /// `50us`: sleep that long, so that its CPU goes idle and the scheduler can run others there
    /// (a machine with fewer CPUs than busy processes: scripts/testbed/appliance.sh; a frame arriving
    /// meanwhile waits up to this long, the egress shaper catches up what a sleep delayed); or
    /// `wait`: wait in the kernel (poll(2) on its ports' receive descriptors, AF_XDP and
    /// AF_PACKET) until a frame arrives, its shaper's next release while frames wait, at the
    /// latest 10 ms: its CPU goes idle and a frame is seen at once (a worker with other
    /// workers' crossings to take, or ports that cannot be waited on, yields instead).
    #[arg(long, value_name = worker::IDLE_VALUES, default_value = "auto")]
    pub idle: worker::Idle,
    /// `auto` (the default): forward frames between plain ports in the kernel. Each plain port
    /// gets quench's own XDP program (instead of libxdp's), which redirects a frame whose source
    /// and destination the switch has learned at plain ports straight to the egress device, and
    /// hands every other frame to the workers; worker 0 programs the program's table from its
    /// MAC table, which every worker's learning reaches. A plain port is an AF_XDP port with no
    /// congestion point, no egress rate, no PFC and no `--capture`, whose device sends frames
    /// redirected to it (checked at start, and on the way: a veth does only while its peer has
    /// GRO on or an XDP program); with fewer than two there is no fast path. `off`: every frame
    /// through the workers. (`kernel` is `auto`.) docs/design.md, "The kernel fast path".
    #[arg(long, value_enum, default_value = "auto")]
    pub fast_path: FastPathArg,
}

/// `--fast-path`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum FastPathArg {
    #[value(alias = "kernel")]
    Auto,
    Off,
}

impl Args {
    /// The runtime's options from the flags.
    fn options(&self, origin: String) -> anyhow::Result<SwitchOptions> {
        let mut captures = Vec::new();
        for c in &self.capture {
            let (name, file) = c
                .split_once('=')
                .with_context(|| format!("--capture {c:?}: expected PORT=FILE"))?;
            captures.push((name.to_string(), PathBuf::from(file)));
        }
        Ok(SwitchOptions {
            workers: self.workers,
            captures,
            control_socket: self.control_socket.clone(),
            force_xdp: self.force_xdp,
            idle: self.idle,
            fast_path: match self.fast_path {
                FastPathArg::Auto => FastPathMode::Auto,
                FastPathArg::Off => FastPathMode::Off,
            },
            stop: Some(worker::stop_on_signals().context("installing signal handlers")?),
            origin,
        })
    }
}

/// The progress status of the switch from a counters snapshot: forwarding rate over the
/// interval, totals of frames, drops, control frames it originated (CNMs, PFC) and PFC pauses.
#[derive(Default)]
struct SwitchProgress {
    rx_bytes: super::progress::Delta,
    tx_bytes: super::progress::Delta,
}

impl SwitchProgress {
    fn show(
        &mut self,
        p: &mut super::progress::Progress,
        now: units::Instant,
        snap: &Snapshot,
    ) -> std::io::Result<()> {
        use super::progress::per_s;
        let sum = |f: fn(&PortSnapshot) -> u64| -> u64 { snap.ports.iter().map(f).sum() };
        let (rx, tx) = (sum(|p| p.rx_pkts), sum(|p| p.tx_pkts));
        let drops = sum(|p| p.rx_drops + p.tx_drops + p.queue_drops + p.pfc_headroom_drops);
        let ctl = sum(|p| {
            p.queues
                .iter()
                .filter(|q| q.class == "ctl")
                .map(|q| q.counters.enq_pkts)
                .sum()
        });
        let (sent, got) = (sum(|p| p.pfc_pauses_sent), sum(|p| p.pfc_pauses_received));
        let (drx, dtx) = (
            self.rx_bytes.step(sum(|p| p.rx_bytes)),
            self.tx_bytes.step(sum(|p| p.tx_bytes)),
        );
        p.show(
            now,
            |dt| {
                format!(
                    "rx {:.1} Mb/s tx {:.1} Mb/s | {rx} in {tx} out | {drops} drops | {ctl} CNM/PFC frames sent | pauses {sent} sent {got} received",
                    per_s(drx * 8, dt, 1e6),
                    per_s(dtx * 8, dt, 1e6)
                )
            },
            |dt| {
                serde_json::json!({
                    "rx_bps": per_s(drx * 8, dt, 1.0), "tx_bps": per_s(dtx * 8, dt, 1.0),
                    "rx_frames": rx, "tx_frames": tx, "drops": drops, "control_frames": ctl,
                    "pauses_sent": sent, "pauses_received": got, "fdb_entries": snap.fdb_entries,
                    "ports": snap.ports,
                })
            },
        )
    }
}

/// The main thread's longest sleep: how late it sees the stop flag and a deadline, and how
/// often it wakes (progress is shown each second).
const MAIN_NAP: Duration = Duration::from_millis(100);

pub fn run(args: Args) -> anyhow::Result<()> {
    if args.json {
        super::human_to_stderr();
    }
    let src =
        quench_config::bundled::open(&args.config, quench_config::bundled::Kind::Switch, None)
            .with_context(|| format!("--config {}", args.config))?;
    let profile = SwitchConfig::parse(&src.text, &src.origin)?;
    let sw = Switch::start(profile, args.options(src.origin.clone())?)?;
    for n in sw.notes() {
        eprintln!("quench switch: {n}");
    }
    // This thread only waits and reports: where no worker polls, when there is a core to spare.
    worker::keep_off_workers(sw.workers());
    let clock = sw.clock();
    let deadline = args.duration.map(|d| clock.now() + d);
    let mut progress = super::progress::Progress::new("switch", args.json, clock.now());
    let mut status = SwitchProgress::default();
    while !sw.is_stopped() {
        let now = clock.now();
        if deadline.is_some_and(|d| now >= d) {
            sw.stop();
            break;
        }
        if progress.due(now) {
            // A closed standard output does not stop the switch: the workers go on.
            let _ = status.show(&mut progress, now, &sw.stats());
        }
        // Each wake-up may take a worker's CPU: the workers do the work.
        let nap = deadline.map_or(MAIN_NAP, |d| MAIN_NAP.min(d - now));
        std::thread::sleep(std::time::Duration::from_nanos(nap.as_nanos()));
    }
    progress.done();
    let report = sw.join()?;
    for w in &report.warnings {
        eprintln!("quench switch: {w}");
    }
    outln!("{}", crate::cli::stats::table(&report.snapshot, None))?;
    if args.json {
        jsonln!("counters", serde_json::to_value(&report.snapshot)?)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--idle` takes the policy's values (the flags it replaced: main's `RETIRED`).
    #[test]
    fn idle_parses() {
        use worker::{Idle, IdleMode};
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            a: Args,
        }
        let parse = |v: &[&str]| {
            <Cli as clap::Parser>::try_parse_from(
                ["quench", "--config", "c.toml"].iter().chain(v.iter()),
            )
        };
        assert_eq!(parse(&[]).unwrap().a.idle, Idle::Auto);
        assert_eq!(
            parse(&["--idle", "50us"]).unwrap().a.idle,
            Idle::Fixed(IdleMode::Sleep(std::time::Duration::from_micros(50)))
        );
        assert!(parse(&["--idle", "soon"]).is_err());
    }
}
