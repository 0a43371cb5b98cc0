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
use units::{Duration, Instant, Rate};

use super::cc::CcSections;
use super::config::{HostConfig, LinkChange, RunConfig, SwitchConfig};
use super::rng::{self, Stream};
use super::topology::Topology;
use super::traffic::{self, Cdf, FlowSpec, PoissonSpec};

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
            if f.pg as usize >= units::PRIORITIES || f.start_us.is_nan() || f.start_us < 0.0 {
                bail!(
                    "{}: flow[{i}]: `pg` must be 0..=7 and `start_us` >= 0",
                    self.name
                );
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
        } = &mut cfg.host;
        if let Some(v) = h.mtu {
            if !(64..=65_000).contains(&v) {
                bail!("{name}: `host.mtu` must be 64..=65000");
            }
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
