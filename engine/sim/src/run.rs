//! The simulator's library entry point: a run described by a [`Spec`] (the files and settings
//! `quench sim` takes), assembled by [`prepare`] into a [`Prepared`] run and run by [`run`] into
//! an output directory. `quench sim`, the sweeps ([`crate::sweep`]) and any Rust program call
//! these; nothing here prints.
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};

use crate::cc::{CcSections, CcSetup};
use crate::ns3::{self, Ns3Config};
use crate::report::{self, Summary};
use crate::scenario::{load_preset, Scenario};
use crate::world::Progress;
use crate::{CcKind, FlowSpec, RunConfig, Topology, World};

/// What to run: the inputs of `quench sim`. Files are the user's (ns-3 HPCC formats, TOML);
/// names are bundled presets and scenarios (`quench presets`).
#[derive(Clone, Debug, Default)]
pub struct Spec {
    /// Topology in the ns-3 HPCC format.
    pub topology: Option<PathBuf>,
    /// Flows in the ns-3 HPCC format.
    pub flows: Option<PathBuf>,
    /// Congestion control; else the scenario's `cc`, else DCQCN under an ns-3 config.
    pub cc: Option<CcKind>,
    /// Parameter preset: a bundled name or a TOML file.
    pub preset: Option<String>,
    /// TOML overrides (the keys of a scenario file).
    pub config: Option<String>,
    /// A complete TOML scenario: a bundled name or a file.
    pub scenario: Option<String>,
    /// Seed of every random choice in the run.
    pub seed: Option<u64>,
    /// Upper bound on virtual time; the run ends when its last flow completes.
    pub stop: Option<units::Duration>,
    /// An HPCC ns-3 config.txt to run unchanged.
    pub ns3_config: Option<PathBuf>,
    /// Where config.txt's relative paths start (ns-3's working directory).
    pub ns3_dir: Option<PathBuf>,
    /// NIC speed in Gb/s for run.py's presets (`hpcc-dcqcn`, `hpcc-dcqcn-paper`).
    pub bw: Option<u64>,
}

/// Everything needed to run, assembled from a [`Spec`] and its files.
pub struct Prepared {
    pub topo: Topology,
    pub flows: Vec<FlowSpec>,
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

/// The directory config.txt's relative paths start from: [`Spec::ns3_dir`], else the current
/// directory if `probe` is found there, else the directory above the config's.
fn ns3_base(spec: &Spec, config: &Path, probe: Option<&str>) -> PathBuf {
    if let Some(d) = &spec.ns3_dir {
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
fn read_flows(p: &Path, warnings: &mut Vec<String>) -> anyhow::Result<Vec<FlowSpec>> {
    let text =
        std::fs::read_to_string(p).with_context(|| format!("reading flows {}", p.display()))?;
    let (f, w) =
        crate::traffic::read_flows(&text).with_context(|| format!("flows {}", p.display()))?;
    warnings.extend(w.into_iter().map(|w| format!("flows {}: {w}", p.display())));
    Ok(f)
}

/// The scenario file with `overrides` (dotted keys) set in it; `seed` wins over every other.
fn scenario_with(
    spec: &Spec,
    overrides: &[(String, toml::Value)],
) -> anyhow::Result<Option<Scenario>> {
    let file = spec.scenario.as_ref().or(spec.config.as_ref());
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
        crate::scenario::set_dotted(&mut table, k, v.clone())?;
    }
    let text = toml::to_string(&table).context("writing the swept scenario")?;
    match src {
        Some(src) => Scenario::from_text(&text, src.dir, src.origin).map(Some),
        None => Scenario::parse(&text, Path::new("sweep.toml")).map(Some),
    }
}

/// Assembles the run `spec` describes, with `overrides` (dotted scenario keys, as a sweep sets
/// them) and `seed` (which wins over every other).
pub fn prepare(
    spec: &Spec,
    overrides: &[(String, toml::Value)],
    seed: Option<u64>,
) -> anyhow::Result<Prepared> {
    let scen = scenario_with(spec, overrides)?;
    if spec.ns3_config.is_some() {
        ns3_conflicts(spec, scen.as_ref())?;
    }
    let preset = spec
        .preset
        .as_ref()
        .or(scen.as_ref().and_then(|s| s.file.preset.as_ref()));
    // An ns-3 setting: config.txt, or a run.py preset at --bw.
    let run_py = preset.and_then(|p| ns3::run_py_preset(p).map(|cc| (p, cc)));
    let ns3cfg = match (&spec.ns3_config, run_py) {
        (Some(p), _) => {
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("reading ns-3 config {}", p.display()))?;
            Some(Ns3Config::parse_file(&text, &p.display().to_string())?)
        }
        (None, Some((p, cc))) => {
            let bw = spec.bw.with_context(|| {
                format!("--preset {p} reproduces run.py --cc {cc} --bw N: give --bw (Gb/s)")
            })?;
            let text = ns3::run_py_config(cc, bw)?;
            Some(Ns3Config::parse(&text, &format!("preset {p} --bw {bw}"))?)
        }
        (None, None) => {
            if spec.bw.is_some() {
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
    if let Some(seed) = seed.or(spec.seed) {
        cfg.seed = seed;
    }
    if let Some(d) = spec.stop {
        if d == units::Duration::ZERO {
            bail!("--stop must be above zero");
        }
        cfg.stop = Some(units::Instant::ZERO + d);
    }
    // config.txt's own files, relative to ns-3's working directory.
    let mut ns3_outputs = Ns3Outputs::default();
    let mut ns3_topo = None;
    let mut ns3_flows = None;
    if let (Some(n), Some(path)) = (&ns3cfg, &spec.ns3_config) {
        let base = ns3_base(spec, path, n.topology_file.as_deref());
        let at = |f: &Option<String>| f.as_deref().map(|f| ns3::resolve(&base, f));
        ns3_topo = at(&n.topology_file);
        ns3_flows = at(&n.flow_file);
        ns3_outputs = Ns3Outputs {
            fct: at(&n.fct_file),
            pfc: at(&n.pfc_file),
            qlen: n.qlen.as_ref().map(|(f, _)| ns3::resolve(&base, f)),
        };
    }
    let mut topo = match (&spec.topology, &ns3_topo) {
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
    match (&spec.flows, &ns3_flows) {
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
    let cc = match (spec.cc, scen.as_ref().and_then(|s| s.file.cc.as_deref())) {
        (Some(c), _) => c,
        (None, Some(name)) => CcKind::parse(name)?,
        (None, None) if ns3cfg.is_some() => ns3cfg.as_ref().map_or(CcKind::Dcqcn, |n| n.kind()),
        (None, None) => bail!("give --cc or `cc` in the scenario"),
    };
    if let Some(n) = &ns3cfg {
        if cc != n.kind() {
            bail!(
                "{}: sets {}; --cc/`cc` asks for {}",
                n.origin,
                n.kind().name(),
                cc.name()
            );
        }
    }
    let (mut sections, mut origin) = match (&ns3cfg, preset) {
        (Some(n), _) => (n.sections.clone(), n.origin.clone()),
        // A preset named in the scenario file is relative to that file; `--preset` to the
        // working directory.
        (None, Some(name)) => {
            let base = match (&spec.preset, &scen) {
                (None, Some(s)) => Some(s.dir.as_path()),
                _ => None,
            };
            let sections = load_preset(name, base)?;
            preset_applies(name, &sections, cc)?;
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
    let cc = CcSetup::new(cc, &sections, &origin)?;
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
fn ns3_conflicts(spec: &Spec, scen: Option<&Scenario>) -> anyhow::Result<()> {
    let given = [
        ("--topology", spec.topology.is_some(), "its TOPOLOGY_FILE"),
        ("--flows", spec.flows.is_some(), "its FLOW_FILE"),
        ("--preset", spec.preset.is_some(), "its parameters"),
        ("--bw", spec.bw.is_some(), "its parameters"),
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

/// How a run ended.
pub struct Outcome {
    /// The run's summary, as written to `summary.json`.
    pub summary: Summary,
    /// False when `go_on` stopped the run before its end: the outputs hold the run up to then.
    pub finished: bool,
    /// The virtual time the run reached.
    pub reached: units::Instant,
}

/// Runs `p`, streaming its time series into `out` and writing every output there (and the ns-3
/// files its config.txt named); `progress` is called as the run advances, and the run stops
/// early, with its outputs written, when `go_on` returns false.
pub fn run(
    p: Prepared,
    out: &Path,
    progress: &mut dyn FnMut(Progress),
    go_on: &dyn Fn() -> bool,
) -> anyhow::Result<Outcome> {
    let cc_name = p.cc.kind.name();
    let mut world = World::new(&p.topo, &p.flows, p.cc, p.cfg)?;
    world
        .stream_series_to(out)
        .with_context(|| format!("writing the time series into {}", out.display()))?;
    let finished = world.run_while(progress, go_on);
    let summary = report::write_all(&mut world, cc_name, out)?;
    write_ns3_outputs(&world, &p.ns3_outputs)?;
    Ok(Outcome {
        summary,
        finished,
        reached: world.now(),
    })
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
