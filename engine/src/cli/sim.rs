//! `quench sim`: run a topology and flows in virtual time.
//!
//! ```text
//! quench sim --topology TOPO --flows FLOWS --cc {qcn,dcqcn,none} [--preset NAME]
//!            [--config FILE.toml] [--seed N] --out DIR
//! quench sim --scenario FILE.toml --out DIR
//! ```
//! TOPO and FLOWS are in the HPCC ns-3 formats; the TOML file (see `engine::sim::scenario`) holds
//! everything else. Command-line values win over the file's.

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::ValueEnum;

use crate::sim::cc::{CcSections, CcSetup};
use crate::sim::report;
use crate::sim::scenario::{load_preset, Scenario};
use crate::sim::{CcKind, RunConfig, Topology, World};

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

    fn parse(name: &str) -> anyhow::Result<CcArg> {
        CcArg::from_str(name, true)
            .map_err(|_| anyhow::anyhow!("`cc` = \"{name}\": expected one of: none, dcqcn, qcn"))
    }
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Topology in the ns-3 HPCC format (`nodes switches links`, switch ids, links).
    #[arg(long)]
    pub topology: Option<PathBuf>,
    /// Flows in the ns-3 HPCC format (count, then `src dst pg dport bytes start_seconds`).
    #[arg(long)]
    pub flows: Option<PathBuf>,
    /// Congestion control.
    #[arg(long, value_enum)]
    pub cc: Option<CcArg>,
    /// Parameter preset (configs/NAME.toml).
    #[arg(long)]
    pub preset: Option<String>,
    /// TOML overrides (same keys as a scenario file).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// A complete TOML scenario (topology, flows and settings).
    #[arg(long, conflicts_with = "config")]
    pub scenario: Option<PathBuf>,
    /// Seed of every random choice in the run.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Stop after this much virtual time (ms) even if flows are unfinished.
    #[arg(long)]
    pub stop_ms: Option<f64>,
    /// Output directory.
    #[arg(long)]
    pub out: PathBuf,
    /// No progress bar, no summary on stdout.
    #[arg(long, short)]
    pub quiet: bool,
}

/// Everything needed to run, assembled from the arguments and files.
pub struct Prepared {
    pub topo: Topology,
    pub flows: Vec<crate::sim::FlowSpec>,
    pub cc: CcSetup,
    pub cfg: RunConfig,
}

pub fn prepare(args: &Args) -> anyhow::Result<Prepared> {
    let file = args.scenario.as_ref().or(args.config.as_ref());
    let scen = match file {
        Some(p) => Some(Scenario::load(p)?),
        None => None,
    };
    let mut cfg = RunConfig::default();
    if let Some(s) = &scen {
        s.apply(&mut cfg)?;
    }
    if let Some(seed) = args.seed {
        cfg.seed = seed;
    }
    if let Some(v) = args.stop_ms {
        if v.is_nan() || v <= 0.0 {
            bail!("--stop-ms must be > 0");
        }
        cfg.stop = Some(units::Instant::from_nanos((v * 1e6).round() as u64));
    }
    let topo = match &args.topology {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("reading topology {}", p.display()))?;
            Topology::parse(&text).with_context(|| format!("topology {}", p.display()))?
        }
        None => match &scen {
            Some(s) => s
                .topology()?
                .with_context(|| format!("{}: no `topology` and no --topology", s.name))?,
            None => bail!("give --topology (and --flows) or --scenario"),
        },
    };
    let mut flows = Vec::new();
    match &args.flows {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("reading flows {}", p.display()))?;
            flows.extend(
                crate::sim::traffic::parse_flows(&text)
                    .with_context(|| format!("flows {}", p.display()))?,
            );
        }
        None => {
            if let Some(s) = &scen {
                flows.extend(s.flows()?);
            }
        }
    }
    if let Some(s) = &scen {
        flows.extend(s.poisson_flows(&topo, cfg.seed)?);
    }
    let cc = match (args.cc, scen.as_ref().and_then(|s| s.file.cc.as_deref())) {
        (Some(c), _) => c,
        (None, Some(name)) => CcArg::parse(name)?,
        (None, None) => bail!("give --cc or `cc` in the scenario"),
    };
    let preset = args
        .preset
        .as_ref()
        .or(scen.as_ref().and_then(|s| s.file.preset.as_ref()));
    let mut sections = match preset {
        Some(name) => load_preset(name)?,
        None => CcSections::default(),
    };
    let mut origin = preset.map(|p| format!("preset {p}")).unwrap_or_default();
    if let Some(s) = &scen {
        sections.overlay(&s.file.cc_sections());
        origin = if origin.is_empty() {
            s.name.clone()
        } else {
            format!("{origin} + {}", s.name)
        };
    }
    let cc = CcSetup::new(cc.kind(), &sections, &origin)?;
    Ok(Prepared {
        topo,
        flows,
        cc,
        cfg,
    })
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let p = prepare(&args)?;
    let cc_name = p.cc.kind.name();
    let mut world = World::new(&p.topo, &p.flows, p.cc, p.cfg)?;
    let show = !args.quiet && std::io::stderr().is_terminal();
    let bar = if show {
        let b = indicatif::ProgressBar::new(world.flows.len() as u64);
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
    world.run(&mut |pr| {
        if let Some(b) = &bar {
            b.set_position(pr.flows_done as u64);
            b.set_message(format!(
                "{:.3} ms, {} events",
                pr.now.as_nanos() as f64 * 1e-6,
                pr.events
            ));
        }
    });
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let summary = report::write_all(&world, cc_name, &args.out)?;
    if !args.quiet {
        outln!(
            "{} of {} flows done at {:.6} ms virtual, {} events; outputs in {}",
            summary.totals.flows_done,
            summary.totals.flows,
            summary.end_ns as f64 * 1e-6,
            summary.events,
            args.out.display()
        )?;
        if let Some(f) = &summary.fct {
            outln!(
                "FCT mean {:.1} us, p99 {:.1} us, mean slowdown {:.2}",
                f.mean_ns * 1e-3,
                f.p99_ns as f64 * 1e-3,
                f.mean_slowdown
            )?;
        }
    }
    Ok(())
}
