//! `quench sim --sweep KEY=V1,V2,... [--sweep ...] [--seeds N]`: a grid of runs on every core.
//!
//! KEY is a scenario-file key, dotted into its section (`red.kmax_bytes`, `host.mtu`,
//! `dcqcn_rp.rpg_ai_rate`, `stop_ms`); each value is read as a TOML value (`0.2`, `true`,
//! `"10gbit"`; a bare word is a string). Several `--sweep`s make the cross product; `--seeds N`
//! runs every point with N consecutive seeds starting at `--seed` (or the file's, or 1). Each
//! run writes its outputs into its own directory under `--out`, named by its values
//! (`red.kmax_bytes=400000,seed=2`); ns-3 output files named by `--ns3-config` go there too. The
//! summary table is printed and written to `OUT/sweep.tsv` (times in nanoseconds); with
//! `--json` each run's row is also a JSON line (`"type": "sweep_row"`) as the run ends, and the
//! table goes to standard error.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::atomic::AtomicBool;

use anyhow::{bail, Context};

use quench_sim::run::Spec;
use quench_sim::sweep::{self, grid};

/// Runs the grid of `--sweep` and `--seeds` over `spec` on `jobs` threads (default: one per
/// core), writes `out/sweep.tsv` and prints the table (with `json`, a JSON row per run as it
/// ends, and the table on standard error).
#[allow(clippy::too_many_arguments)]
pub fn run(
    spec: &Spec,
    sweeps: &[String],
    seeds: Option<u64>,
    jobs: Option<usize>,
    out: &Path,
    quiet: bool,
    json: bool,
    stop: &AtomicBool,
) -> anyhow::Result<()> {
    let points = grid(sweeps, seeds, spec.seed.unwrap_or(1))?;
    for w in sweep::check(spec, &points)? {
        eprintln!("warning: {w}");
    }
    if json {
        super::human_to_stderr();
    }
    let jobs = jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    // `--json`: a row as its run ends (a failed write shows in the table below).
    let done = |row: &sweep::Row| {
        if json {
            let _ = jsonln!("sweep_row", sweep::row_json(row));
        }
    };
    let mut rows = Vec::with_capacity(points.len());
    let mut errors = Vec::new();
    for r in sweep::sweep(spec, &points, out, jobs, stop, &done)? {
        match r {
            Ok(row) => rows.push(row),
            Err(e) => errors.push(format!("{e:#}")),
        }
    }
    let table = sweep::table(&rows);
    let tsv = out.join("sweep.tsv");
    std::fs::write(&tsv, &table).with_context(|| format!("writing {}", tsv.display()))?;
    if !quiet {
        out!("{}", pretty(&table))?;
    }
    if !errors.is_empty() {
        bail!(
            "{} of {} runs failed:\n{}",
            errors.len(),
            points.len(),
            errors.join("\n")
        );
    }
    Ok(())
}

/// The table with aligned columns for the terminal.
fn pretty(tsv: &str) -> String {
    let rows: Vec<Vec<&str>> = tsv.lines().map(|l| l.split('\t').collect()).collect();
    let n = rows.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..n)
        .map(|c| {
            rows.iter()
                .map(|r| r.get(c).map_or(0, |x| x.len()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut s = String::new();
    for r in &rows {
        for (c, cell) in r.iter().enumerate() {
            if c == 0 {
                let _ = write!(s, "{cell:<w$}", w = widths[c]);
            } else {
                let _ = write!(s, "  {cell:>w$}", w = widths[c]);
            }
        }
        s.push('\n');
    }
    s
}
