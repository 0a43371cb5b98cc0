//! `quench sim`: run a topology and flows in virtual time.
//!
//! ```text
//! quench sim --topology TOPO --flows FLOWS --cc {qcn,dcqcn,none} [--preset NAME|FILE]
//!            [--config FILE.toml] [--seed N] --out DIR
//! quench sim --scenario FILE.toml --out DIR
//! quench sim --ns3-config config.txt [--ns3-dir DIR] --out DIR
//! quench sim --topology TOPO --flows FLOWS --preset hpcc-dcqcn --bw 100 --out DIR
//! ```
//! TOPO and FLOWS are in the HPCC ns-3 formats; the TOML file (see `quench_sim::scenario`) holds
//! everything else. `--ns3-config` runs an HPCC ns-3 `config.txt` (see `quench_sim::ns3`) and
//! writes its FCT, PFC and queue-length files where ns-3 would; the presets `hpcc-dcqcn` and
//! `hpcc-dcqcn-paper` are what run.py writes for `--cc dcqcn` / `--cc dcqcn_paper` at `--bw`.
//! A scenario or `--config` file overrides a preset's or config.txt's values; command-line values
//! win over every file's.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::ValueEnum;

use quench_sim::cc::{CcSections, CcSetup};
use quench_sim::ns3::{self, Ns3Config};
use quench_sim::report;

use super::sweep;
use quench_sim::scenario::{load_preset, Scenario};
use quench_sim::{CcKind, RunConfig, Topology, World};

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
    /// Parameter preset: a bundled name (`dcqcn-paper`, `quench presets` lists them) or a TOML
    /// file; `hpcc-dcqcn` and `hpcc-dcqcn-paper` are run.py's settings at `--bw`.
    #[arg(long, value_name = "NAME|FILE")]
    pub preset: Option<String>,
    /// TOML overrides (same keys as a scenario file).
    #[arg(long, value_name = "FILE")]
    pub config: Option<String>,
    /// A complete TOML scenario (topology, flows and settings): a bundled name (`incast`,
    /// `quench presets` lists them) or a file.
    #[arg(long, value_name = "NAME|FILE", conflicts_with = "config")]
    pub scenario: Option<String>,
    /// Seed of every random choice in the run.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Stop after this much virtual time even if flows are unfinished, e.g. `50ms`. An upper
    /// bound: the run ends when its last flow completes.
    #[arg(long, value_parser = super::duration_arg)]
    pub stop: Option<units::Duration>,
    /// Deprecated: `--stop`, in milliseconds.
    #[arg(long, hide = true, conflicts_with = "stop")]
    pub stop_ms: Option<f64>,
    /// An HPCC ns-3 config.txt (as run.py writes it) to run unchanged.
    #[arg(long, conflicts_with = "scenario")]
    pub ns3_config: Option<PathBuf>,
    /// Where config.txt's relative paths start (ns-3's working directory, `simulation/`).
    /// Default: the current directory, else the directory above the config's (run.py's
    /// `mix/config_*.txt` naming `mix/...` files).
    #[arg(long, requires = "ns3_config")]
    pub ns3_dir: Option<PathBuf>,
    /// NIC speed in Gb/s for the run.py presets (hpcc-dcqcn, hpcc-dcqcn-paper), as run.py --bw.
    #[arg(long)]
    pub bw: Option<u64>,
    /// Sweep a scenario key over values, `KEY=V1,V2,...` (repeat for a grid); KEY is a dotted
    /// key of the scenario file, e.g. `dcqcn_rp.rpg_ai_rate`.
    #[arg(long, value_name = "KEY=V1,V2,...")]
    pub sweep: Vec<String>,
    /// Run each point with N seeds, from --seed (or 1) upward.
    #[arg(long)]
    pub seeds: Option<u64>,
    /// Runs at once in a sweep (default: one per core).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Output directory.
    #[arg(long)]
    pub out: PathBuf,
    /// No progress bar, no summary on stdout.
    #[arg(long, short)]
    pub quiet: bool,
    /// JSON lines on standard output: one progress object per second of wall time (virtual
    /// time, flows done, events), then the summary; the human table goes to standard error.
    #[arg(long, conflicts_with = "quiet")]
    pub json: bool,
}

/// Everything needed to run, assembled from the arguments and files.
pub struct Prepared {
    pub topo: Topology,
    pub flows: Vec<quench_sim::FlowSpec>,
    pub cc: CcSetup,
    pub cfg: RunConfig,
    /// ns-3 output files to write after the run (from `--ns3-config`).
    pub ns3_outputs: Ns3Outputs,
    /// Input set aside as ns-3 sets it aside, a sentence each, for standard error.
    pub warnings: Vec<String>,
}

/// Where a config.txt wants its outputs, resolved.
#[derive(Default)]
pub struct Ns3Outputs {
    pub fct: Option<PathBuf>,
    pub pfc: Option<PathBuf>,
    pub qlen: Option<PathBuf>,
}

/// The directory config.txt's relative paths start from: `--ns3-dir`, else the current
/// directory if `probe` is found there, else the directory above the config's.
fn ns3_base(args: &Args, config: &Path, probe: Option<&str>) -> PathBuf {
    if let Some(d) = &args.ns3_dir {
        return d.clone();
    }
    let cwd = PathBuf::from(".");
    let Some(probe) = probe else {
        return cwd;
    };
    if ns3::resolve(&cwd, probe).exists() {
        return cwd;
    }
    match config.parent().and_then(Path::parent) {
        Some(up) if ns3::resolve(up, probe).exists() => up.to_path_buf(),
        _ => cwd,
    }
}

/// Reads an ns-3 topology file; what ns-3 would not read either goes to `warnings`.
fn read_topology(p: &Path, warnings: &mut Vec<String>) -> anyhow::Result<Topology> {
    let text =
        std::fs::read_to_string(p).with_context(|| format!("reading topology {}", p.display()))?;
    let (t, w) = Topology::read(&text).with_context(|| format!("topology {}", p.display()))?;
    warnings.extend(
        w.into_iter()
            .map(|w| format!("topology {}: {w}", p.display())),
    );
    Ok(t)
}

/// Reads an ns-3 flow file; what ns-3 would not read either goes to `warnings`.
fn read_flows(p: &Path, warnings: &mut Vec<String>) -> anyhow::Result<Vec<quench_sim::FlowSpec>> {
    let text =
        std::fs::read_to_string(p).with_context(|| format!("reading flows {}", p.display()))?;
    let (f, w) =
        quench_sim::traffic::read_flows(&text).with_context(|| format!("flows {}", p.display()))?;
    warnings.extend(w.into_iter().map(|w| format!("flows {}: {w}", p.display())));
    Ok(f)
}

/// The scenario file with `overrides` (dotted keys) set in it; `seed` wins over every other.
fn scenario_with(
    args: &Args,
    overrides: &[(String, toml::Value)],
) -> anyhow::Result<Option<Scenario>> {
    let file = args.scenario.as_ref().or(args.config.as_ref());
    if overrides.is_empty() {
        return file.map(|p| Scenario::open(p)).transpose();
    }
    let (mut table, src) = match file {
        Some(p) => {
            let src = quench_config::bundled::open(p, quench_config::bundled::Kind::Scenario, None)
                .with_context(|| format!("scenario `{p}`"))?;
            let t: toml::Table =
                toml::from_str(&src.text).with_context(|| format!("in {}", src.origin))?;
            (t, Some(src))
        }
        None => (toml::Table::new(), None),
    };
    for (k, v) in overrides {
        sweep::set_dotted(&mut table, k, v.clone())?;
    }
    let text = toml::to_string(&table).context("writing the swept scenario")?;
    match src {
        Some(src) => Scenario::from_text(&text, src.dir, src.origin).map(Some),
        None => Scenario::parse(&text, Path::new("sweep.toml")).map(Some),
    }
}

/// [`prepare`] with sweep overrides and a seed.
pub fn prepare_with(
    args: &Args,
    overrides: &[(String, toml::Value)],
    seed: Option<u64>,
) -> anyhow::Result<Prepared> {
    let scen = scenario_with(args, overrides)?;
    if args.ns3_config.is_some() {
        ns3_conflicts(args, scen.as_ref())?;
    }
    let preset = args
        .preset
        .as_ref()
        .or(scen.as_ref().and_then(|s| s.file.preset.as_ref()));
    // An ns-3 setting: config.txt, or a run.py preset at --bw.
    let run_py = preset.and_then(|p| ns3::run_py_preset(p).map(|cc| (p, cc)));
    let ns3cfg = match (&args.ns3_config, run_py) {
        (Some(p), _) => {
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("reading ns-3 config {}", p.display()))?;
            Some(Ns3Config::parse_file(&text, &p.display().to_string())?)
        }
        (None, Some((p, cc))) => {
            let bw = args.bw.with_context(|| {
                format!("--preset {p} reproduces run.py --cc {cc} --bw N: give --bw (Gb/s)")
            })?;
            let text = ns3::run_py_config(cc, bw)?;
            Some(Ns3Config::parse(&text, &format!("preset {p} --bw {bw}"))?)
        }
        (None, None) => {
            if args.bw.is_some() {
                bail!("--bw goes with --preset hpcc-dcqcn or hpcc-dcqcn-paper");
            }
            None
        }
    };
    let mut warnings = Vec::new();
    let mut cfg = RunConfig::default();
    if let Some(n) = &ns3cfg {
        n.apply(&mut cfg);
        warnings.extend(n.warnings.iter().cloned());
    }
    if let Some(s) = &scen {
        s.apply(&mut cfg)?;
    }
    if let Some(seed) = seed.or(args.seed) {
        cfg.seed = seed;
    }
    let stop = args
        .stop
        .or_else(|| super::legacy_ms("stop-ms", "stop", args.stop_ms));
    if let Some(d) = stop {
        if d == units::Duration::ZERO {
            bail!("--stop must be above zero");
        }
        cfg.stop = Some(units::Instant::ZERO + d);
    }
    // config.txt's own files, relative to ns-3's working directory.
    let mut ns3_outputs = Ns3Outputs::default();
    let mut ns3_topo = None;
    let mut ns3_flows = None;
    if let (Some(n), Some(path)) = (&ns3cfg, &args.ns3_config) {
        let base = ns3_base(args, path, n.topology_file.as_deref());
        let at = |f: &Option<String>| f.as_deref().map(|f| ns3::resolve(&base, f));
        ns3_topo = at(&n.topology_file);
        ns3_flows = at(&n.flow_file);
        ns3_outputs = Ns3Outputs {
            fct: at(&n.fct_file),
            pfc: at(&n.pfc_file),
            qlen: n.qlen.as_ref().map(|(f, _)| ns3::resolve(&base, f)),
        };
    }
    let mut topo = match (&args.topology, &ns3_topo) {
        (Some(p), _) | (None, Some(p)) => read_topology(p, &mut warnings)?,
        (None, None) => match &scen {
            Some(s) => s
                .topology(&mut warnings)?
                .with_context(|| format!("{}: no `topology` and no --topology", s.name))?,
            None => bail!("give --topology (and --flows), --scenario or --ns3-config"),
        },
    };
    if let Some(n) = &ns3cfg {
        n.apply_topology(&mut topo);
    }
    let mut flows = Vec::new();
    match (&args.flows, &ns3_flows) {
        (Some(p), _) | (None, Some(p)) => flows.extend(read_flows(p, &mut warnings)?),
        (None, None) => {
            if let Some(s) = &scen {
                flows.extend(s.flows(&mut warnings)?);
            }
        }
    }
    if let Some(s) = &scen {
        flows.extend(s.poisson_flows(&topo, cfg.seed)?);
    }
    let cc = match (args.cc, scen.as_ref().and_then(|s| s.file.cc.as_deref())) {
        (Some(c), _) => c,
        (None, Some(name)) => CcArg::parse(name)?,
        (None, None) if ns3cfg.is_some() => CcArg::Dcqcn,
        (None, None) => bail!("give --cc or `cc` in the scenario"),
    };
    if let Some(n) = &ns3cfg {
        if cc.kind() != n.kind() {
            bail!(
                "{}: sets DCQCN (CC_MODE 1); --cc/`cc` asks for {}",
                n.origin,
                cc.kind().name()
            );
        }
    }
    let (mut sections, mut origin) = match (&ns3cfg, preset) {
        (Some(n), _) => (n.sections.clone(), n.origin.clone()),
        // A preset named in the scenario file is relative to that file; `--preset` to the
        // working directory.
        (None, Some(name)) => {
            let base = match (&args.preset, &scen) {
                (None, Some(s)) => Some(s.dir.as_path()),
                _ => None,
            };
            let sections = load_preset(name, base)?;
            preset_applies(name, &sections, cc.kind())?;
            (sections, format!("preset {name}"))
        }
        (None, None) => (CcSections::default(), String::new()),
    };
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
        ns3_outputs,
        warnings,
    })
}

/// `--ns3-config` runs config.txt as ns-3 would: the topology, flows and parameters it names
/// are the run's, so an option or scenario key that names others is an error rather than
/// one of the two being dropped.
fn ns3_conflicts(args: &Args, scen: Option<&Scenario>) -> anyhow::Result<()> {
    let given = [
        ("--topology", args.topology.is_some(), "its TOPOLOGY_FILE"),
        ("--flows", args.flows.is_some(), "its FLOW_FILE"),
        ("--preset", args.preset.is_some(), "its parameters"),
        ("--bw", args.bw.is_some(), "its parameters"),
    ];
    for (opt, set, what) in given {
        if set {
            bail!("--ns3-config and {opt}: config.txt names {what}; give one or the other");
        }
    }
    if let Some(s) = scen {
        let f = &s.file;
        let keys = [
            (
                "topology",
                f.topology.is_some() || f.topology_text.is_some(),
            ),
            (
                "flows",
                f.flows.is_some() || f.flows_text.is_some() || !f.flow.is_empty(),
            ),
            ("preset", f.preset.is_some()),
        ];
        for (key, set) in keys {
            if set {
                bail!(
                    "--ns3-config and {} `{key}`: config.txt names the run's {key}; give one or \
                     the other",
                    s.name
                );
            }
        }
    }
    Ok(())
}

/// A preset that sets none of the sections congestion control `kind` reads would run on that
/// control's defaults without a word: an error naming both.
fn preset_applies(name: &str, sections: &CcSections, kind: CcKind) -> anyhow::Result<()> {
    let set = sections.names();
    let read = kind.sections();
    if set.is_empty() || set.iter().any(|s| read.contains(s)) {
        return Ok(());
    }
    let list = |v: &[&str]| {
        v.iter()
            .map(|s| format!("[{s}]"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    bail!(
        "--preset {name} sets {} and --cc {} reads only {}: the run would take {}'s defaults; \
         give a preset for {} (`quench presets` lists them)",
        list(&set),
        kind.name(),
        list(read),
        kind.name(),
        kind.name()
    )
}

/// Writes the ns-3 output files config.txt named.
fn write_ns3_outputs(world: &World, out: &Ns3Outputs) -> anyhow::Result<()> {
    let put = |p: &Option<PathBuf>, body: Option<String>| -> anyhow::Result<()> {
        if let (Some(p), Some(body)) = (p, body) {
            if let Some(dir) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("creating {}", dir.display()))?;
            }
            std::fs::write(p, body).with_context(|| format!("writing {}", p.display()))?;
        }
        Ok(())
    };
    put(&out.fct, Some(report::fct_txt(world)))?;
    put(&out.pfc, world.pfc_text())?;
    put(&out.qlen, world.qlen_text().map(str::to_string))?;
    Ok(())
}

/// SIGINT or SIGTERM ends a run at the virtual time it reached, its outputs written for the
/// run up to then, with status 0; a sweep starts no further run.
pub fn run(args: Args) -> anyhow::Result<()> {
    let stop = quench_port::worker::stop_on_signals().context("installing signal handlers")?;
    if !args.sweep.is_empty() || args.seeds.is_some() {
        return sweep::run(&args, &stop);
    }
    run_one(&args, &[], None, &args.out, false, &stop).map(|_| ())
}

/// One run into `out`; in a sweep (`sweeping`), quietly and with config.txt's output files in
/// `out` as well.
pub fn run_one(
    args: &Args,
    overrides: &[(String, toml::Value)],
    seed: Option<u64>,
    out: &Path,
    sweeping: bool,
    stop: &std::sync::atomic::AtomicBool,
) -> anyhow::Result<report::Summary> {
    let mut p = prepare_with(args, overrides, seed)?;
    if sweeping {
        let o = &p.ns3_outputs;
        p.ns3_outputs = Ns3Outputs {
            fct: sweep::redirect(&o.fct, out),
            pfc: sweep::redirect(&o.pfc, out),
            qlen: sweep::redirect(&o.qlen, out),
        };
    }
    if !sweeping {
        for w in &p.warnings {
            eprintln!("warning: {w}");
        }
    }
    let cc_name = p.cc.kind.name();
    let mut world = World::new(&p.topo, &p.flows, p.cc, p.cfg)?;
    world
        .stream_series_to(out)
        .with_context(|| format!("writing the time series into {}", out.display()))?;
    let json = args.json && !sweeping;
    if json {
        super::human_to_stderr();
    }
    let show = !args.quiet && !sweeping && !json && std::io::stderr().is_terminal();
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
    let finished = world.run_while(
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
    shown?;
    if !finished {
        eprintln!(
            "quench sim: interrupted at virtual time {:.3} ms; {} holds the run up to then",
            world.now().as_nanos() as f64 * 1e-6,
            out.display()
        );
    }
    let summary = report::write_all(&mut world, cc_name, out)?;
    write_ns3_outputs(&world, &p.ns3_outputs)?;
    if !args.quiet && !sweeping {
        out!("{}", summary.table())?;
        outln!("outputs in {}", out.display())?;
    }
    if json {
        jsonln!("summary", serde_json::to_value(&summary)?)?;
    }
    Ok(summary)
}
