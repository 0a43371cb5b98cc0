//! `quench sim`: run a topology and flows in virtual time.
//!
//! ```text
//! quench sim --topology TOPO --flows FLOWS --cc {qcn,dcqcn,none} [--preset NAME|FILE]
//!            [--overrides FILE.toml] [--seed N] --out DIR
//! quench sim --scenario FILE.toml --out DIR
//! quench sim --ns3-config config.txt [--ns3-dir DIR] --out DIR
//! quench sim --topology TOPO --flows FLOWS --preset hpcc-dcqcn --bw 100gbit --out DIR
//! ```
//! TOPO and FLOWS are in the HPCC ns-3 formats; the TOML file (see `quench_sim::scenario`) holds
//! everything else. `--ns3-config` runs an HPCC ns-3 `config.txt` (see `quench_sim::ns3`) and
//! writes its FCT, PFC and queue-length files where ns-3 would; the presets `hpcc-dcqcn` and
//! `hpcc-dcqcn-paper` are what run.py writes for `--cc dcqcn` / `--cc dcqcn_paper` at `--bw`.
//! A scenario or `--overrides` file overrides a preset's or config.txt's values; command-line values
//! win over every file's.

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::Context;
use clap::ValueEnum;

use quench_sim::run::{prepare, Spec};

use super::sweep;
use quench_sim::CcKind;

/// Congestion control to simulate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CcArg {
    /// No congestion control: senders at line rate.
    None,
    /// DCQCN (RED/ECN, CNPs, rp::dcqcn).
    Dcqcn,
    /// IEEE 802.1Qau QCN (CNMs, rp::qcn).
    Qcn,
}

impl CcArg {
    pub fn kind(self) -> CcKind {
        match self {
            CcArg::None => CcKind::None,
            CcArg::Dcqcn => CcKind::Dcqcn,
            CcArg::Qcn => CcKind::Qcn,
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Topology in the ns-3 HPCC format (`nodes switches links`, switch ids, links).
    #[arg(long, value_name = "FILE")]
    pub topology: Option<PathBuf>,
    /// Flows in the ns-3 HPCC format (count, then `src dst pg dport bytes start_seconds`).
    #[arg(long, value_name = "FILE")]
    pub flows: Option<PathBuf>,
    /// Congestion control.
    #[arg(long, value_enum, value_name = "CC")]
    pub cc: Option<CcArg>,
    /// Parameter preset: a bundled name (`dcqcn-paper`, `quench presets` lists them) or a TOML
    /// file; `hpcc-dcqcn` and `hpcc-dcqcn-paper` are run.py's settings at `--bw`.
    #[arg(long, value_name = "NAME|FILE", value_parser = super::NameParser::presets(),
          hide_possible_values = true)]
    pub preset: Option<String>,
    /// TOML overrides (same keys as a scenario file) over the command line's inputs.
    #[arg(long, value_name = "FILE")]
    pub overrides: Option<String>,
    /// A complete TOML scenario (topology, flows and settings): a bundled name (`incast`,
    /// `quench presets` lists them) or a file.
    #[arg(long, value_name = "NAME|FILE", conflicts_with = "overrides",
          value_parser = super::NameParser::of(&[quench_config::bundled::Kind::Scenario]),
          hide_possible_values = true)]
    pub scenario: Option<String>,
    /// Seed of every random choice in the run.
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Stop after this much virtual time even if flows are unfinished, e.g. `50ms`. An upper
    /// bound: the run ends when its last flow completes.
    #[arg(long, value_name = "DURATION", value_parser = super::duration_arg,
          allow_hyphen_values = true)]
    pub stop: Option<units::Duration>,
    /// An HPCC ns-3 config.txt (as run.py writes it) to run unchanged.
    #[arg(long, value_name = "FILE", conflicts_with = "scenario")]
    pub ns3_config: Option<PathBuf>,
    /// Where config.txt's relative paths start (ns-3's working directory, `simulation/`).
    /// Default: the current directory, else the directory above the config's (run.py's
    /// `mix/config_*.txt` naming `mix/...` files).
    #[arg(long, value_name = "DIR", requires = "ns3_config")]
    pub ns3_dir: Option<PathBuf>,
    /// NIC speed for the run.py presets (hpcc-dcqcn, hpcc-dcqcn-paper), as run.py --bw: a
    /// whole number of Gb/s, `100gbit` (a bare `100` is read in Gb/s, as run.py does).
    #[arg(long, value_name = "RATE", value_parser = bw_arg, allow_hyphen_values = true)]
    pub bw: Option<u64>,
    /// Sweep a scenario key over values, `KEY=V1,V2,...` (repeat for a grid); KEY is a dotted
    /// key of the scenario file, e.g. `dcqcn_rp.rpg_ai_rate`.
    #[arg(long, value_name = "KEY=V1,V2,...")]
    pub sweep: Vec<String>,
    /// Run each point with N seeds, from --seed (or 1) upward.
    #[arg(long, value_name = "N")]
    pub seeds: Option<u64>,
    /// Runs at once in a sweep (default: one per core).
    #[arg(long, value_name = "N")]
    pub jobs: Option<usize>,
    /// Output directory.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// No progress bar, no summary on stdout.
    #[arg(long, short)]
    pub quiet: bool,
    /// JSON lines on standard output: one progress object per second of wall time (virtual
    /// time, flows done, events), then the summary; the human table goes to standard error.
    #[arg(long, conflicts_with = "quiet")]
    pub json: bool,
}

/// The run the arguments describe.
fn spec(args: &Args) -> Spec {
    Spec {
        topology: args.topology.clone(),
        flows: args.flows.clone(),
        cc: args.cc.map(CcArg::kind),
        preset: args.preset.clone(),
        config: args.overrides.clone(),
        scenario: args.scenario.clone(),
        seed: args.seed,
        stop: args.stop,
        ns3_config: args.ns3_config.clone(),
        ns3_dir: args.ns3_dir.clone(),
        bw: args.bw,
    }
}

/// `--bw`'s parser: run.py's NIC speed in whole Gb/s, written as a rate (`100gbit`, `25Gb/s`) or,
/// as run.py takes it, a bare number of Gb/s.
pub(crate) fn bw_arg(s: &str) -> Result<u64, String> {
    let bps = match s.trim().parse::<u64>() {
        Ok(gbps) => gbps.checked_mul(1_000_000_000).ok_or("too large")?,
        Err(_) => units::Rate::parse(s).map_err(|e| e.to_string())?.as_bps(),
    };
    quench_sim::ns3::run_py_bw(bps).map_err(|e| format!("`{s}`: {e}"))
}

/// SIGINT or SIGTERM ends a run at the virtual time it reached, its outputs written for the
/// run up to then, with status 0; a sweep starts no further run.
pub fn run(args: Args) -> anyhow::Result<()> {
    let stop = quench_port::worker::stop_on_signals().context("installing signal handlers")?;
    let spec = spec(&args);
    if !args.sweep.is_empty() || args.seeds.is_some() {
        return sweep::run(
            &spec,
            &args.sweep,
            args.seeds,
            args.jobs,
            &args.out,
            args.quiet,
            args.json,
            &stop,
        );
    }
    let p = prepare(&spec, &[], None)?;
    for w in &p.warnings {
        eprintln!("warning: {w}");
    }
    let out = &args.out;
    let json = args.json;
    if json {
        super::human_to_stderr();
    }
    let show = !args.quiet && !json && std::io::stderr().is_terminal();
    let bar = if show {
        let b = indicatif::ProgressBar::new(p.flows.len() as u64);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{bar:40} {pos}/{len} flows done, virtual {msg}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        Some(b)
    } else {
        None
    };
    let wall = quench_wire::time::Clock::monotonic();
    let mut progress = super::progress::Progress::new("sim", json, wall.now());
    let mut events = super::progress::Delta::default();
    let mut show_json = |pr: &quench_sim::world::Progress| -> std::io::Result<()> {
        let now = wall.now();
        if !progress.due(now) {
            return Ok(());
        }
        let de = events.step(pr.events);
        progress.show(
            now,
            |_| String::new(),
            |dt| {
                serde_json::json!({
                    "virtual_ns": pr.now.as_nanos(), "flows_done": pr.flows_done,
                    "flows": pr.flows, "events": pr.events,
                    "events_per_s": super::progress::per_s(de, dt, 1.0),
                })
            },
        )
    };
    let mut shown = Ok(());
    let go_on = || !stop.load(std::sync::atomic::Ordering::Relaxed);
    let outcome = quench_sim::run::run(
        p,
        out,
        &mut |pr| {
            if json && shown.is_ok() {
                shown = show_json(&pr);
            }
            if let Some(b) = &bar {
                b.set_position(pr.flows_done as u64);
                b.set_message(format!(
                    "{:.3} ms, {} events",
                    pr.now.as_nanos() as f64 * 1e-6,
                    pr.events
                ));
            }
        },
        &go_on,
    );
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let outcome = outcome?;
    shown?;
    if !outcome.finished {
        eprintln!(
            "quench sim: interrupted at virtual time {:.3} ms; {} holds the run up to then",
            outcome.reached.as_nanos() as f64 * 1e-6,
            out.display()
        );
    }
    let summary = outcome.summary;
    if !args.quiet {
        out!("{}", summary.table())?;
        outln!("outputs in {}", out.display())?;
    }
    if json {
        jsonln!("summary", serde_json::to_value(&summary)?)?;
    }
    Ok(())
}
