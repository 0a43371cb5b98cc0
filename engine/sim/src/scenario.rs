//! The TOML scenario file: everything the ns-3 topology and flow formats cannot say.
//!
//! ```toml
//! topology = "topo.txt"        # ns-3 format, relative to this file (or topology_text = "...")
//! flows = "flows.txt"          # ns-3 format (optional; or flows_text, [[flow]], [[poisson]])
//! cc = "none"                  # none | dcqcn | qcn
//! seed = 1
//! stop_ms = 50.0               # optional: stop even if flows are unfinished
//! sample_us = 10.0             # time-series period
//! stats_from_ms = 10.0         # statistics window start (warm-up excluded)
//!
//! [host]                       # NIC: mtu, header_bytes, ctrl_bytes, ack_every, nack_interval_us, rto_us
//! [switch]                     # buffer_bytes, queue_limit_bytes
//!
//! [red]                        # DCQCN marking: kmin_bytes, kmax_bytes, pmax, mark_at ...
//! [[red.by_rate]]              # ... or per link speed, as ns-3's KMIN/KMAX/PMAX_MAP
//! rate = "100gbit"
//! kmin_bytes = 400000
//! kmax_bytes = 1600000
//!
//! [[link_change]]              # one direction of a link changes rate
//! at_ms = 10.0
//! from = 3
//! to = 4
//! rate = "0.5gbit"
//!
//! [[flow]]                     # inline flows
//! src = 0
//! dst = 2
//! bytes = 1000000
//! start_us = 0.0               # pg = 3, dport = 100 by default
//!
//! [[poisson]]                  # flows from a size CDF with Poisson arrivals at a load
//! cdf = "WebSearch_distribution.txt"
//! load = 0.5
//! duration_ms = 10.0
//! ```
//!
//! Unknown keys are errors (`deny_unknown_fields`), and every error names the file and the key.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use serde::Deserialize;
use units::keys::{key, Key, KeyDefault, Range, Type};
use units::{Duration, Instant, Rate};

use quench_config::reference;

use super::cc::CcSections;
use super::config::{HostConfig, LinkChange, RunConfig, SwitchConfig};
use super::rng::{self, Stream};
use super::topology::Topology;
use super::traffic::{self, Cdf, FlowSpec, PoissonSpec};

/// The keys of [`ScenarioFile`], as the configuration reference lists them; its tables' keys
/// follow ([`HOST_KEYS`], ...), and the parameter tables are the crates' (`rp::dcqcn::KEYS`,
/// ...). The validation checks the integer ranges given here.
pub const KEYS: &[Key] = &[
    Key {
        name: "topology",
        ty: Type::String,
        unit: "",
        default: KeyDefault::None,
        range: Range::Text("not with topology_text"),
        doc: "A topology in ns-3 HPCC's format, relative to the scenario (or `--topology`).",
    },
    Key {
        name: "topology_text",
        ty: Type::String,
        unit: "",
        default: KeyDefault::None,
        range: Range::Text("not with topology"),
        doc: "The topology itself, in ns-3 HPCC's format.",
    },
    Key {
        name: "flows",
        ty: Type::String,
        unit: "",
        default: KeyDefault::None,
        range: Range::Any,
        doc: "A flow file in ns-3 HPCC's format, relative to the scenario (or `--flows`).",
    },
    Key {
        name: "flows_text",
        ty: Type::String,
        unit: "",
        default: KeyDefault::None,
        range: Range::Any,
        doc: "Flows in ns-3 HPCC's format, inline.",
    },
    Key {
        name: "cc",
        ty: Type::OneOf(&[
            "none",
            "dcqcn",
            "qcn",
            "hpcc",
            "timely",
            "dctcp",
            "hpcc-pint",
        ]),
        unit: "",
        default: KeyDefault::Text("`--cc`, required without it"),
        range: Range::Any,
        doc: "The congestion control.",
    },
    quench_config::keys::PRESET,
    Key {
        name: "seed",
        ty: Type::Integer,
        unit: "",
        default: KeyDefault::Value("1"),
        range: Range::Any,
        doc: "Seed of every random choice of the run.",
    },
    Key {
        name: "stop_ms",
        ty: Type::Float,
        unit: "ms",
        default: KeyDefault::None,
        range: Range::Text("> 0"),
        doc: "An upper bound of the run: it ends when its last flow completes, or here.",
    },
    Key {
        name: "sample_us",
        ty: Type::Float,
        unit: "us",
        default: KeyDefault::Value("10"),
        range: Range::Text("> 0"),
        doc: "The time series' sampling period.",
    },
    Key {
        name: "stats_from_ms",
        ty: Type::Float,
        unit: "ms",
        default: KeyDefault::Value("0"),
        range: Range::Any,
        doc: "The statistics window's start (warm-up excluded).",
    },
    Key {
        name: "host",
        ty: Type::Table,
        unit: "",
        default: KeyDefault::None,
        range: Range::Any,
        doc: "NIC settings: `[host]`.",
    },
    Key {
        name: "switch",
        ty: Type::Table,
        unit: "",
        default: KeyDefault::None,
        range: Range::Any,
        doc: "Switch buffer settings: `[switch]`.",
    },
    Key {
        name: "link_change",
        ty: Type::Tables,
        unit: "",
        default: KeyDefault::None,
        range: Range::Any,
        doc: "Changes of a link direction's rate: `[[link_change]]`.",
    },
    Key {
        name: "flow",
        ty: Type::Tables,
        unit: "",
        default: KeyDefault::None,
        range: Range::Any,
        doc: "Inline flows: `[[flow]]`.",
    },
    Key {
        name: "poisson",
        ty: Type::Tables,
        unit: "",
        default: KeyDefault::None,
        range: Range::Any,
        doc: "Flows with Poisson arrivals at a load, sizes from a CDF: `[[poisson]]`.",
    },
    quench_config::keys::DCQCN_RP,
    quench_config::keys::QCN_RP,
    quench_config::keys::NP,
    quench_config::keys::HPCC_RP,
    quench_config::keys::TIMELY_RP,
    quench_config::keys::DCTCP_RP,
    quench_config::keys::PINT_RP,
    Key {
        name: "red",
        ty: Type::Table,
        unit: "",
        default: KeyDefault::None,
        range: Range::Any,
        doc: "Over the preset's: the `[red]` parameter table, and `[[red.by_rate]]`.",
    },
    Key {
        name: "qcn_cp",
        ty: Type::Table,
        unit: "",
        default: KeyDefault::None,
        range: Range::Any,
        doc: "Over the preset's: the `[qcn_cp]` parameter table.",
    },
    Key {
        name: "pfc",
        ty: Type::Table,
        unit: "",
        default: KeyDefault::None,
        range: Range::Any,
        doc: "PFC at every switch: `enabled` and the `[pfc]` parameter table (ports, link_rate, \
              buffer_bytes and, unless given, headroom_bytes per switch).",
    },
    Key {
        name: "tcd",
        ty: Type::Table,
        unit: "",
        default: KeyDefault::None,
        range: Range::Any,
        doc: "TCD at every switch port: `enabled` and the `[tcd]` parameter table (link_rate per \
              port).",
    },
];

/// The keys of `[host]`.
pub const HOST_KEYS: &[Key] = &[
    Key {
        name: "mtu",
        ty: Type::Integer,
        unit: "octets",
        default: KeyDefault::Value("1000"),
        range: Range::Int(64, 65000),
        doc: "Payload octets per data packet (ns-3's PACKET_PAYLOAD_SIZE).",
    },
    Key {
        name: "header_bytes",
        ty: Type::Integer,
        unit: "octets",
        default: KeyDefault::Value("48"),
        range: Range::Any,
        doc: "Header octets added to each data packet (ns-3's without INT).",
    },
    Key {
        name: "ctrl_bytes",
        ty: Type::Integer,
        unit: "octets",
        default: KeyDefault::Value("64"),
        range: Range::Text("> 0"),
        doc: "Octets of an ACK, NACK, CNP or CNM frame on the wire.",
    },
    Key {
        name: "ack_every",
        ty: Type::Integer,
        unit: "",
        default: KeyDefault::Value("1"),
        range: Range::Any,
        doc: "One ACK per this many data packets; 0 sends none (a flow then completes when its \
              last octet arrives).",
    },
    Key {
        name: "nack_interval_us",
        ty: Type::Float,
        unit: "us",
        default: KeyDefault::Value("500"),
        range: Range::Any,
        doc: "The least spacing of NACKs for the same gap (ns-3's NACK_INTERVAL).",
    },
    Key {
        name: "rto_us",
        ty: Type::Float,
        unit: "us",
        default: KeyDefault::Value("4000"),
        range: Range::Text("> 0"),
        doc: "Retransmission timeout: with no ACK progress this long, go back to the first \
              unacknowledged octet.",
    },
];

/// The keys of `[switch]`.
pub const SWITCH_KEYS: &[Key] = &[
    Key {
        name: "buffer_bytes",
        ty: Type::Integer,
        unit: "octets",
        default: KeyDefault::Value("33554432"),
        range: Range::Any,
        doc: "The shared packet buffer per switch (ns-3's 32 MB).",
    },
    Key {
        name: "queue_limit_bytes",
        ty: Type::Integer,
        unit: "octets",
        default: KeyDefault::None,
        range: Range::Any,
        doc: "A tail-drop limit per egress (port, priority) queue (the 802.1Qau simulations' \
              per-port buffer).",
    },
];

/// The keys of a `[[link_change]]` table.
pub const LINK_CHANGE_KEYS: &[Key] = &[
    Key {
        name: "at_ms",
        ty: Type::Float,
        unit: "ms",
        default: KeyDefault::Required,
        range: Range::Any,
        doc: "When the rate changes.",
    },
    Key {
        name: "from",
        ty: Type::Integer,
        unit: "",
        default: KeyDefault::Required,
        range: Range::Text("a node"),
        doc: "The link direction's sending node.",
    },
    Key {
        name: "to",
        ty: Type::Integer,
        unit: "",
        default: KeyDefault::Required,
        range: Range::Text("a node joined to `from`"),
        doc: "The link direction's receiving node.",
    },
    Key {
        name: "rate",
        ty: Type::Rate,
        unit: "",
        default: KeyDefault::Required,
        range: Range::Any,
        doc: "The new rate.",
    },
];

/// A flow's priority group and destination port, in `[[flow]]` and `[[poisson]]`.
const PG: Key = Key {
    name: "pg",
    ty: Type::Integer,
    unit: "",
    default: KeyDefault::Value("3"),
    range: Range::Int(0, 7),
    doc: "The priority group (802.1p priority).",
};
const DPORT: Key = Key {
    name: "dport",
    ty: Type::Integer,
    unit: "",
    default: KeyDefault::Value("100"),
    range: Range::Any,
    doc: "The destination port (ECMP hashes it).",
};

/// The keys of a `[[flow]]` table.
pub const FLOW_KEYS: &[Key] = &[
    Key {
        name: "src",
        ty: Type::Integer,
        unit: "",
        default: KeyDefault::Required,
        range: Range::Text("a host"),
        doc: "The sending host's node id.",
    },
    Key {
        name: "dst",
        ty: Type::Integer,
        unit: "",
        default: KeyDefault::Required,
        range: Range::Text("another host"),
        doc: "The receiving host's node id.",
    },
    PG,
    DPORT,
    Key {
        name: "bytes",
        ty: Type::Integer,
        unit: "octets",
        default: KeyDefault::Required,
        range: Range::Any,
        doc: "The flow's size.",
    },
    Key {
        name: "start_us",
        ty: Type::Float,
        unit: "us",
        default: KeyDefault::Value("0"),
        range: Range::Text(">= 0"),
        doc: "When the flow starts.",
    },
];

/// The keys of a `[[poisson]]` table.
pub const POISSON_KEYS: &[Key] = &[
    Key {
        name: "cdf",
        ty: Type::String,
        unit: "",
        default: KeyDefault::Required,
        range: Range::Text("a bundled name or a file"),
        doc: "A flow-size CDF in ns-3 HPCC's format (`websearch`), relative to the scenario.",
    },
    Key {
        name: "load",
        ty: Type::Float,
        unit: "",
        default: KeyDefault::Required,
        range: Range::Text("(0, 1]"),
        doc: "The offered load per host as a share of its link rate.",
    },
    Key {
        name: "start_ms",
        ty: Type::Float,
        unit: "ms",
        default: KeyDefault::Value("0"),
        range: Range::Any,
        doc: "When the arrivals start.",
    },
    Key {
        name: "duration_ms",
        ty: Type::Float,
        unit: "ms",
        default: KeyDefault::Required,
        range: Range::Text("> 0"),
        doc: "How long arrivals go on.",
    },
    PG,
    DPORT,
    Key {
        name: "hosts",
        ty: Type::Integers,
        unit: "",
        default: KeyDefault::Text("every host"),
        range: Range::Any,
        doc: "Only these hosts send and receive.",
    },
];

/// The key the simulator adds to `[pfc]` and `[tcd]` (`sim::cc`).
pub const ENABLED_KEYS: &[Key] = &[Key {
    name: "enabled",
    ty: Type::Bool,
    unit: "",
    default: KeyDefault::Value("true"),
    range: Range::Any,
    doc: "The section is on; `false` keeps it written but off.",
}];

/// The key the simulator adds to `[red]` (`sim::cc::RedByRate`).
pub const RED_KEYS: &[Key] = &[Key {
    name: "by_rate",
    ty: Type::Tables,
    unit: "",
    default: KeyDefault::None,
    range: Range::Any,
    doc: "Values per link speed: `[[red.by_rate]]` tables, each `rate` and any `[red]` key.",
}];

/// The key of a `[[red.by_rate]]` table besides `[red]`'s.
pub const RED_BY_RATE_KEYS: &[Key] = &[Key {
    name: "rate",
    ty: Type::Rate,
    unit: "",
    default: KeyDefault::Required,
    range: Range::Text("one entry per speed"),
    doc: "The link speed the entry's values are for (ns-3's KMIN_MAP / KMAX_MAP / PMAX_MAP); \
              a switch port of a speed without an entry is an error.",
}];

const MTU: &Key = key(HOST_KEYS, "mtu");

fn ms(v: f64) -> Instant {
    Instant::from_nanos((v.max(0.0) * 1e6).round() as u64)
}
fn us_dur(v: f64) -> Duration {
    Duration::from_nanos((v.max(0.0) * 1e3).round() as u64)
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostSection {
    pub mtu: Option<u32>,
    pub header_bytes: Option<u32>,
    pub ctrl_bytes: Option<u32>,
    pub ack_every: Option<u32>,
    pub nack_interval_us: Option<f64>,
    pub rto_us: Option<f64>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchSection {
    pub buffer_bytes: Option<u64>,
    pub queue_limit_bytes: Option<u64>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkChangeSection {
    pub at_ms: f64,
    pub from: u32,
    pub to: u32,
    pub rate: String,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowSection {
    pub src: u32,
    pub dst: u32,
    #[serde(default = "default_pg")]
    pub pg: u8,
    #[serde(default = "default_dport")]
    pub dport: u16,
    pub bytes: u64,
    #[serde(default)]
    pub start_us: f64,
}

fn default_pg() -> u8 {
    3
}
fn default_dport() -> u16 {
    100
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoissonSection {
    /// A workload CDF file (`size_bytes cumulative_percent`), relative to the scenario.
    pub cdf: String,
    /// Offered load per host as a fraction of its link rate.
    pub load: f64,
    #[serde(default)]
    pub start_ms: f64,
    pub duration_ms: f64,
    #[serde(default = "default_pg")]
    pub pg: u8,
    #[serde(default = "default_dport")]
    pub dport: u16,
    /// Only these hosts send and receive (default: every host).
    pub hosts: Option<Vec<u32>>,
}

/// The scenario file as written.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile {
    pub topology: Option<String>,
    pub topology_text: Option<String>,
    pub flows: Option<String>,
    pub flows_text: Option<String>,
    pub cc: Option<String>,
    pub preset: Option<String>,
    pub seed: Option<u64>,
    pub stop_ms: Option<f64>,
    pub sample_us: Option<f64>,
    pub stats_from_ms: Option<f64>,
    #[serde(default)]
    pub host: HostSection,
    #[serde(default)]
    pub switch: SwitchSection,
    #[serde(default)]
    pub link_change: Vec<LinkChangeSection>,
    #[serde(default)]
    pub flow: Vec<FlowSection>,
    #[serde(default)]
    pub poisson: Vec<PoissonSection>,
    // Congestion-control parameter sections (see `cc::CcSections`), overriding the preset's.
    pub dcqcn_rp: Option<toml::Table>,
    pub qcn_rp: Option<toml::Table>,
    pub np: Option<toml::Table>,
    pub red: Option<toml::Table>,
    pub qcn_cp: Option<toml::Table>,
    pub pfc: Option<toml::Table>,
    pub tcd: Option<toml::Table>,
    pub hpcc_rp: Option<toml::Table>,
    pub timely_rp: Option<toml::Table>,
    pub dctcp_rp: Option<toml::Table>,
    pub pint_rp: Option<toml::Table>,
}

impl ScenarioFile {
    /// The congestion-control sections of this file.
    pub fn cc_sections(&self) -> CcSections {
        CcSections {
            dcqcn_rp: self.dcqcn_rp.clone(),
            qcn_rp: self.qcn_rp.clone(),
            np: self.np.clone(),
            red: self.red.clone(),
            qcn_cp: self.qcn_cp.clone(),
            pfc: self.pfc.clone(),
            tcd: self.tcd.clone(),
            hpcc_rp: self.hpcc_rp.clone(),
            timely_rp: self.timely_rp.clone(),
            dctcp_rp: self.dctcp_rp.clone(),
            pint_rp: self.pint_rp.clone(),
        }
    }
}

/// Reads preset `arg`, a bundled name (`dcqcn-paper`, see [`quench_config::bundled`]) or a TOML file
/// (relative to `base`, else the working directory): congestion-control sections only.
pub fn load_preset(arg: &str, base: Option<&Path>) -> anyhow::Result<CcSections> {
    let src = quench_config::bundled::open(arg, quench_config::bundled::Kind::Preset, base)
        .with_context(|| format!("preset `{arg}`"))?;
    quench_config::file::from_str(&src.text, &src.origin).map_err(anyhow::Error::msg)
}

/// A scenario file together with the directory its relative paths start from.
pub struct Scenario {
    pub file: ScenarioFile,
    pub dir: PathBuf,
    pub name: String,
}

impl Scenario {
    /// Reads `arg`, a bundled scenario name (`incast`, see [`quench_config::bundled`]) or a file; the
    /// relative paths of a bundled one start from the working directory.
    pub fn open(arg: &str) -> anyhow::Result<Scenario> {
        let src = quench_config::bundled::open(arg, quench_config::bundled::Kind::Scenario, None)
            .with_context(|| format!("scenario `{arg}`"))?;
        Scenario::from_text(&src.text, src.dir, src.origin)
    }

    /// Parses scenario text; `path` names it in errors and anchors relative paths.
    pub fn parse(text: &str, path: &Path) -> anyhow::Result<Scenario> {
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Scenario::from_text(text, dir, path.display().to_string())
    }

    /// Parses scenario text read from `name`, relative paths starting from `dir`.
    pub fn from_text(text: &str, dir: PathBuf, name: String) -> anyhow::Result<Scenario> {
        let file: ScenarioFile =
            quench_config::file::from_str(text, &name).map_err(anyhow::Error::msg)?;
        Ok(Scenario { file, dir, name })
    }

    fn resolve(&self, p: &str) -> PathBuf {
        let p = Path::new(p);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.dir.join(p)
        }
    }

    /// The topology named or embedded in the scenario, if any; lines ns-3 would not read go
    /// to `warnings`.
    pub fn topology(&self, warnings: &mut Vec<String>) -> anyhow::Result<Option<Topology>> {
        let text = match (&self.file.topology, &self.file.topology_text) {
            (Some(_), Some(_)) => bail!(
                "{}: give `topology` or `topology_text`, not both",
                self.name
            ),
            (Some(p), None) => {
                let path = self.resolve(p);
                std::fs::read_to_string(&path)
                    .with_context(|| format!("{}: `topology` {}", self.name, path.display()))?
            }
            (None, Some(t)) => t.clone(),
            (None, None) => return Ok(None),
        };
        let (t, w) = Topology::read(&text).with_context(|| format!("{}: `topology`", self.name))?;
        warnings.extend(
            w.into_iter()
                .map(|w| format!("{}: `topology`: {w}", self.name)),
        );
        Ok(Some(t))
    }

    /// Flows from `flows`, `flows_text` and `[[flow]]` (Poisson flows need the topology: see
    /// [`Scenario::poisson_flows`]); lines ns-3 would not read go to `warnings`.
    pub fn flows(&self, warnings: &mut Vec<String>) -> anyhow::Result<Vec<FlowSpec>> {
        let mut out = Vec::new();
        let mut read = |text: &str, what: String| -> anyhow::Result<()> {
            let (f, w) = traffic::read_flows(text).with_context(|| what.clone())?;
            warnings.extend(w.into_iter().map(|w| format!("{what}: {w}")));
            out.extend(f);
            Ok(())
        };
        if let Some(p) = &self.file.flows {
            let path = self.resolve(p);
            let what = format!("{}: `flows` {}", self.name, path.display());
            let text = std::fs::read_to_string(&path).with_context(|| what.clone())?;
            read(&text, what)?;
        }
        if let Some(t) = &self.file.flows_text {
            read(t, format!("{}: `flows_text`", self.name))?;
        }
        for (i, f) in self.file.flow.iter().enumerate() {
            PG.within(f.pg.into())
                .map_err(|e| anyhow::anyhow!("{}: flow[{i}].pg = {}", self.name, e.why()))?;
            if f.start_us.is_nan() || f.start_us < 0.0 {
                bail!("{}: flow[{i}]: `start_us` must be >= 0", self.name);
            }
            out.push(FlowSpec {
                src: f.src,
                dst: f.dst,
                pg: f.pg,
                dport: f.dport,
                bytes: f.bytes,
                start: Instant::from_nanos((f.start_us * 1e3).round() as u64),
            });
        }
        Ok(out)
    }

    /// Flows of the `[[poisson]]` sections, drawn from the run seed.
    pub fn poisson_flows(&self, topo: &Topology, seed: u64) -> anyhow::Result<Vec<FlowSpec>> {
        let mut out = Vec::new();
        for (i, p) in self.file.poisson.iter().enumerate() {
            let src = quench_config::bundled::open(
                &p.cdf,
                quench_config::bundled::Kind::Cdf,
                Some(&self.dir),
            )
            .with_context(|| format!("{}: poisson[{i}].cdf", self.name))?;
            let cdf = Cdf::parse(&src.text)
                .with_context(|| format!("{}: poisson[{i}].cdf {}", self.name, src.origin))?;
            PG.within(p.pg.into())
                .map_err(|e| anyhow::anyhow!("{}: poisson[{i}].pg = {}", self.name, e.why()))?;
            if !(p.load > 0.0 && p.load <= 1.0 && p.duration_ms > 0.0) {
                bail!(
                    "{}: poisson[{i}]: `load` must be in (0, 1] and `duration_ms` > 0",
                    self.name
                );
            }
            let mut hosts = Vec::new();
            for h in topo.hosts() {
                if p.hosts.as_ref().is_some_and(|list| !list.contains(&h)) {
                    continue;
                }
                let rate = topo
                    .links
                    .iter()
                    .find(|l| l.a == h || l.b == h)
                    .map(|l| l.rate)
                    .unwrap_or(Rate::ZERO);
                hosts.push((h, rate));
            }
            let spec = PoissonSpec {
                cdf: &cdf,
                load: p.load,
                start: ms(p.start_ms),
                duration: Duration::from_nanos((p.duration_ms * 1e6).round() as u64),
                pg: p.pg,
                dport: p.dport,
            };
            let mut r = rng::stream(seed, Stream::Traffic, i as u64);
            out.extend(traffic::poisson(&spec, &hosts, &mut r));
        }
        Ok(out)
    }

    /// Applies the scenario's settings to a run configuration.
    pub fn apply(&self, cfg: &mut RunConfig) -> anyhow::Result<()> {
        let f = &self.file;
        let name = &self.name;
        if let Some(s) = f.seed {
            cfg.seed = s;
        }
        if let Some(v) = f.stop_ms {
            if v.is_nan() || v <= 0.0 {
                bail!("{name}: `stop_ms` must be > 0");
            }
            cfg.stop = Some(ms(v));
        }
        if let Some(v) = f.sample_us {
            if v.is_nan() || v <= 0.0 {
                bail!("{name}: `sample_us` must be > 0");
            }
            cfg.sample = us_dur(v);
        }
        if let Some(v) = f.stats_from_ms {
            cfg.stats_from = ms(v);
        }
        let h = &f.host;
        let HostConfig {
            mtu,
            header_bytes,
            ctrl_bytes,
            ack_every,
            nack_interval,
            rto,
            // Not scenario keys: the ns-3 reader sets ns-3's.
            spacing: _,
            ack_pause_prio: _,
            int: _,
            window: _,
        } = &mut cfg.host;
        if let Some(v) = h.mtu {
            MTU.within(v.into())
                .map_err(|e| anyhow::anyhow!("{name}: `host.mtu` = {}", e.why()))?;
            *mtu = v;
        }
        if let Some(v) = h.header_bytes {
            *header_bytes = v;
        }
        if let Some(v) = h.ctrl_bytes {
            if v == 0 {
                bail!("{name}: `host.ctrl_bytes` must be > 0");
            }
            *ctrl_bytes = v;
        }
        if let Some(v) = h.ack_every {
            *ack_every = v;
        }
        if let Some(v) = h.nack_interval_us {
            *nack_interval = us_dur(v);
        }
        if let Some(v) = h.rto_us {
            if v.is_nan() || v <= 0.0 {
                bail!("{name}: `host.rto_us` must be > 0");
            }
            *rto = us_dur(v);
        }
        let SwitchConfig {
            buffer_bytes,
            queue_limit_bytes,
            // Not scenario keys: the ns-3 reader sets ns-3's.
            pfc_frame_bytes: _,
            acks_with_data: _,
        } = &mut cfg.switch;
        if let Some(v) = f.switch.buffer_bytes {
            *buffer_bytes = v;
        }
        if let Some(v) = f.switch.queue_limit_bytes {
            *queue_limit_bytes = Some(v);
        }
        for (i, c) in f.link_change.iter().enumerate() {
            let rate = Rate::parse(&c.rate)
                .map_err(|e| anyhow::anyhow!("{name}: link_change[{i}].rate: {e}"))?;
            cfg.link_changes.push(LinkChange {
                at: ms(c.at_ms),
                from: c.from,
                to: c.to,
                rate,
            });
        }
        Ok(())
    }
}

/// Sets `key` (dotted) in `t` to `v`, creating sections on the way.
pub fn set_dotted(t: &mut toml::Table, key: &str, v: toml::Value) -> anyhow::Result<()> {
    let mut parts: Vec<&str> = key.split('.').collect();
    let last = parts.pop().unwrap_or(key);
    let mut cur = t;
    for p in parts {
        let entry = cur
            .entry(p.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        cur = match entry {
            toml::Value::Table(t) => t,
            _ => bail!("--sweep {key}: `{p}` is not a section"),
        };
    }
    cur.insert(last.to_string(), v);
    Ok(())
}

/// `quench sim --scenario` / `--overrides`: the configuration reference's kind (`quench presets
/// --keys scenario`).
pub const KIND: reference::Kind = reference::Kind {
    name: "scenario",
    about: "`quench sim --scenario NAME|FILE` (bundled: `incast`), and `quench sim \
            --overrides FILE` (the same keys, over the command line's inputs).",
    sections: &[
        reference::own("top level", &[KEYS]),
        reference::own("[host]", &[HOST_KEYS]),
        reference::own("[switch]", &[SWITCH_KEYS]),
        reference::own("[[link_change]]", &[LINK_CHANGE_KEYS]),
        reference::own("[[flow]]", &[FLOW_KEYS]),
        reference::own("[[poisson]]", &[POISSON_KEYS]),
        reference::params("[dcqcn_rp]", &reference::DCQCN_RP),
        reference::params("[qcn_rp]", &reference::QCN_RP),
        reference::params("[np]", &reference::NP),
        reference::params("[hpcc_rp]", &reference::HPCC_RP),
        reference::params("[timely_rp]", &reference::TIMELY_RP),
        reference::params("[dctcp_rp]", &reference::DCTCP_RP),
        reference::params("[pint_rp]", &reference::PINT_RP),
        reference::Section::Params {
            title: "[red]",
            params: &reference::RED,
            extra: RED_KEYS,
        },
        reference::Section::Own {
            title: "[[red.by_rate]]",
            about: "Values for one link speed: `rate` and any `[red]` key.",
            keys: &[RED_BY_RATE_KEYS],
        },
        reference::params("[qcn_cp]", &reference::QCN_CP),
        reference::Section::Params {
            title: "[pfc]",
            params: &reference::PFC,
            extra: ENABLED_KEYS,
        },
        reference::Section::Params {
            title: "[tcd]",
            params: &reference::TCD,
            extra: ENABLED_KEYS,
        },
    ],
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_keys_are_errors_that_name_the_key() {
        let e = Scenario::parse("sede = 3\n", Path::new("s.toml"))
            .err()
            .unwrap();
        let msg = format!("{e:#}");
        assert!(msg.contains("s.toml") && msg.contains("sede"), "{msg}");
        let e = Scenario::parse("[host]\nmtuu = 3\n", Path::new("s.toml"))
            .err()
            .unwrap();
        assert!(format!("{e:#}").contains("mtuu"));
    }

    #[test]
    fn applies_settings() {
        let s = Scenario::parse(
            "seed = 9\nstop_ms = 2.5\nsample_us = 5\n[host]\nmtu = 1500\n[switch]\n\
             queue_limit_bytes = 150000\n[[link_change]]\nat_ms = 1\nfrom = 3\nto = 4\n\
             rate = \"0.5gbit\"\n[[flow]]\nsrc = 0\ndst = 1\nbytes = 5000\nstart_us = 1.5\n",
            Path::new("s.toml"),
        )
        .unwrap();
        let mut cfg = RunConfig::default();
        s.apply(&mut cfg).unwrap();
        assert_eq!(cfg.seed, 9);
        assert_eq!(cfg.stop, Some(Instant::from_nanos(2_500_000)));
        assert_eq!(cfg.sample, Duration::from_micros(5));
        assert_eq!(cfg.host.mtu, 1500);
        assert_eq!(cfg.switch.queue_limit_bytes, Some(150_000));
        assert_eq!(cfg.link_changes[0].rate, Rate::from_mbps(500));
        let flows = s.flows(&mut Vec::new()).unwrap();
        assert_eq!(flows[0].start, Instant::from_nanos(1500));
        assert_eq!(flows[0].pg, 3);
    }
}
