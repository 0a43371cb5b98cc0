//! Sweeps: a grid of runs of one [`Spec`] over scenario keys and seeds, on several threads.
//!
//! A key is a scenario-file key, dotted into its section (`red.kmax_bytes`, `host.mtu`,
//! `dcqcn_rp.rpg_ai_rate`, `stop_ms`); each value is a TOML value (`0.2`, `true`, `"10gbit"`; a
//! bare word is a string). Several keys make the cross product; seeds vary last. Each run writes
//! its outputs into its own directory, named by its values (`red.kmax_bytes=400000,seed=2`); the
//! ns-3 output files a config.txt names go there too. [`table`] is `sweep.tsv`: one row per run,
//! times in nanoseconds.
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use anyhow::{bail, Context};

use crate::report::Summary;
use crate::run::{prepare, run, Ns3Outputs, Spec};

/// One point of the grid: (key, value) overrides, in `--sweep` order, seed last.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    pub overrides: Vec<(String, toml::Value)>,
    pub seed: Option<u64>,
}

impl Point {
    /// The run's directory name: `key=value` joined by commas.
    pub fn name(&self) -> String {
        let mut parts: Vec<String> = self
            .overrides
            .iter()
            .map(|(k, v)| format!("{k}={}", show(v)))
            .collect();
        if let Some(s) = self.seed {
            parts.push(format!("seed={s}"));
        }
        let n = parts.join(",");
        n.chars()
            .map(|c| {
                if c == '/' || c == '\\' || c == '"' {
                    '_'
                } else {
                    c
                }
            })
            .collect()
    }
}

fn show(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        v => v.to_string(),
    }
}

/// A value as written on the command line: TOML if it parses as one, else a string.
pub fn value(s: &str) -> toml::Value {
    toml::from_str::<toml::Table>(&format!("v = {s}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(s.to_string()))
}

/// The grid of `--sweep` and `--seeds`.
pub fn grid(sweeps: &[String], seeds: Option<u64>, first_seed: u64) -> anyhow::Result<Vec<Point>> {
    let mut points = vec![Point {
        overrides: Vec::new(),
        seed: None,
    }];
    for s in sweeps {
        let (key, vals) = s
            .split_once('=')
            .with_context(|| format!("--sweep {s}: expected KEY=V1,V2,..."))?;
        let key = key.trim();
        if key.is_empty() || key.split('.').any(str::is_empty) {
            bail!("--sweep {s}: `{key}` is not a key such as red.kmax_bytes");
        }
        if key == "seed" {
            bail!("--sweep seed=...: use --seeds N");
        }
        let vals: Vec<toml::Value> = vals.split(',').map(|v| value(v.trim())).collect();
        if vals
            .iter()
            .any(|v| matches!(v, toml::Value::String(s) if s.is_empty()))
        {
            bail!("--sweep {s}: an empty value");
        }
        let mut next = Vec::with_capacity(points.len() * vals.len());
        for p in &points {
            for v in &vals {
                let mut q = p.clone();
                q.overrides.push((key.to_string(), v.clone()));
                next.push(q);
            }
        }
        points = next;
    }
    if let Some(n) = seeds {
        if n == 0 {
            bail!("--seeds 0: give at least one seed");
        }
        let mut next = Vec::with_capacity(points.len() * n as usize);
        for p in &points {
            for s in first_seed..first_seed + n {
                let mut q = p.clone();
                q.seed = Some(s);
                next.push(q);
            }
        }
        points = next;
    }
    Ok(points)
}

/// One finished run.
pub struct Row {
    /// The run's directory name under the sweep's output directory.
    pub name: String,
    /// Its point of the grid.
    pub point: Point,
    pub summary: Summary,
    /// Wall time of the run.
    pub wall: units::Duration,
}

/// Reads and checks every point's inputs before any run starts: a key no scenario has, or a
/// value out of range, fails the sweep at once, each problem named once. Returns the first
/// point's warnings (input set aside as ns-3 sets it aside), which every point shares.
pub fn check(spec: &Spec, points: &[Point]) -> anyhow::Result<Vec<String>> {
    let mut problems: Vec<String> = Vec::new();
    let mut warnings = Vec::new();
    for (i, p) in points.iter().enumerate() {
        match prepare(spec, &p.overrides, p.seed) {
            Ok(prepared) if i == 0 => warnings = prepared.warnings,
            Ok(_) => {}
            Err(e) => {
                let e = format!("{e:#}");
                if !problems.contains(&e) {
                    problems.push(e);
                }
            }
        }
    }
    if !problems.is_empty() {
        bail!(
            "the sweep's inputs do not hold together, no run started:\n{}",
            problems.join("\n")
        );
    }
    Ok(warnings)
}

/// Runs `points` of `spec` on `jobs` threads into `out/<point name>`; `done` sees each run's
/// row as it ends. Returns every run's result in grid order (a run's error is its own: the
/// others go on). No further run starts once `stop` is set.
pub fn sweep(
    spec: &Spec,
    points: &[Point],
    out: &Path,
    jobs: usize,
    stop: &AtomicBool,
    done: &(dyn Fn(&Row) + Sync),
) -> anyhow::Result<Vec<anyhow::Result<Row>>> {
    let jobs = jobs.clamp(1, points.len().max(1));
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<anyhow::Result<Row>>>> =
        Mutex::new((0..points.len()).map(|_| None).collect());
    let clock = quench_wire::time::Clock::monotonic();
    let go_on = || !stop.load(Ordering::Relaxed);
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| loop {
                if !go_on() {
                    break; // no further run
                }
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(p) = points.get(i) else { break };
                let dir = out.join(p.name());
                let t0 = clock.now();
                let r = one(spec, p, &dir, &go_on)
                    .map(|summary| Row {
                        name: p.name(),
                        point: p.clone(),
                        summary,
                        wall: clock.now() - t0,
                    })
                    .with_context(|| format!("sweep run {}", p.name()));
                if let Ok(row) = &r {
                    done(row);
                }
                if let Ok(mut v) = results.lock() {
                    v[i] = Some(r);
                }
            });
        }
    });
    let results = results
        .into_inner()
        .map_err(|_| anyhow::anyhow!("a sweep thread panicked"))?;
    Ok(results.into_iter().flatten().collect())
}

/// One run of the grid into `dir`, config.txt's output files there as well.
fn one(spec: &Spec, p: &Point, dir: &Path, go_on: &dyn Fn() -> bool) -> anyhow::Result<Summary> {
    let mut prepared = prepare(spec, &p.overrides, p.seed)?;
    let o = &prepared.ns3_outputs;
    prepared.ns3_outputs = Ns3Outputs {
        fct: redirect(&o.fct, dir),
        pfc: redirect(&o.pfc, dir),
        qlen: redirect(&o.qlen, dir),
    };
    Ok(run(prepared, dir, &mut |_| {}, go_on)?.summary)
}

/// The columns of `sweep.tsv` and of the `--json` rows: times in nanoseconds (the FCT mean
/// rounded to one), `-` where no flow finished.
pub const COLUMNS: [&str; 13] = [
    "run",
    "flows_done",
    "flows",
    "fct_mean_ns",
    "fct_p50_ns",
    "fct_p99_ns",
    "slowdown_mean",
    "slowdown_p99",
    "drops",
    "marks",
    "pauses",
    "events",
    "wall_ns",
];

/// One run's values, in [`COLUMNS`] order (`None`: no flow finished).
pub fn row_values(r: &Row) -> [serde_json::Value; 13] {
    use serde_json::Value;
    let t = &r.summary.totals;
    let f = r.summary.fct.as_ref();
    let opt = |v: Option<Value>| v.unwrap_or(Value::Null);
    [
        r.name.clone().into(),
        t.flows_done.into(),
        t.flows.into(),
        opt(f.map(|f| (f.mean_ns.round() as u64).into())),
        opt(f.map(|f| f.p50_ns.into())),
        opt(f.map(|f| f.p99_ns.into())),
        opt(f.map(|f| f.mean_slowdown.into())),
        opt(f.map(|f| f.p99_slowdown.into())),
        t.drops.into(),
        t.marks.into(),
        t.pauses.into(),
        r.summary.events.into(),
        r.wall.as_nanos().into(),
    ]
}

/// A `--json` row: the columns as fields.
pub fn row_json(r: &Row) -> serde_json::Value {
    let fields = COLUMNS
        .iter()
        .map(|c| c.to_string())
        .zip(row_values(r))
        .collect();
    serde_json::Value::Object(fields)
}

/// The summary table, tab-separated, one row per run in grid order.
pub fn table(rows: &[Row]) -> String {
    let mut s = COLUMNS.join("\t");
    s.push('\n');
    for r in rows {
        let cells: Vec<String> = row_values(r)
            .iter()
            .map(|v| match v {
                serde_json::Value::Null => "-".to_string(),
                serde_json::Value::String(x) => x.clone(),
                serde_json::Value::Number(n) if n.is_f64() => {
                    format!("{:.3}", n.as_f64().unwrap_or(f64::NAN))
                }
                v => v.to_string(),
            })
            .collect();
        let _ = writeln!(s, "{}", cells.join("\t"));
    }
    s
}

/// Where a run of the sweep writes an ns-3 output file: its own directory, same file name.
fn redirect(p: &Option<PathBuf>, dir: &Path) -> Option<PathBuf> {
    p.as_ref()
        .map(|p| dir.join(p.file_name().unwrap_or(p.as_os_str())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::set_dotted;

    #[test]
    fn grid_is_the_cross_product_with_seeds_last() {
        let g = grid(
            &["red.kmax_bytes=1,2".into(), "cc=dcqcn,none".into()],
            Some(2),
            5,
        )
        .unwrap();
        assert_eq!(g.len(), 8);
        assert_eq!(g[0].name(), "red.kmax_bytes=1,cc=dcqcn,seed=5");
        assert_eq!(g[1].name(), "red.kmax_bytes=1,cc=dcqcn,seed=6");
        assert_eq!(g[7].name(), "red.kmax_bytes=2,cc=none,seed=6");
        assert_eq!(g[0].overrides[0].1, toml::Value::Integer(1));
        assert_eq!(g[0].overrides[1].1, toml::Value::String("dcqcn".into()));
        assert_eq!(value("0.5"), toml::Value::Float(0.5));
        assert_eq!(value("\"10gbit\""), toml::Value::String("10gbit".into()));
        assert_eq!(value("true"), toml::Value::Boolean(true));
    }

    #[test]
    fn bad_sweeps_are_errors() {
        for s in ["nokey", "=1", "red.=1", "seed=1,2", "red.pmax=1,,2"] {
            assert!(grid(&[s.into()], None, 1).is_err(), "{s}");
        }
        assert!(grid(&[], Some(0), 1).is_err());
        let mut t = toml::Table::new();
        set_dotted(&mut t, "red.pmax", value("0.5")).unwrap();
        set_dotted(&mut t, "seed", value("3")).unwrap();
        assert_eq!(t["red"]["pmax"].as_float(), Some(0.5));
        assert!(set_dotted(&mut t, "seed.x", value("1")).is_err());
    }
}
