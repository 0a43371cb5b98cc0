//! `quench report FILE`: re-reads what `quench recv` or `quench sim` wrote and prints or plots it.
//!
//! FILE is an interval log (`.hlog`), a percentile distribution (`.hgrm`), a JSON summary
//! (`summary.json` of `quench recv` or of `quench sim`) or a report directory. Prints the summary
//! table, then per interval and flow the receive rate and latency percentiles; `--hgrm` prints
//! the percentile distribution of all intervals merged; `--plot DIR` redraws `rate.svg` and
//! `latency.svg` into DIR.
//!
//! `--json` prints the same as JSON lines, each with its `type` (`summary`, `interval`,
//! `percentiles`); `--csv` prints one CSV table with a header: a log's intervals, a summary's
//! flows (a directory: its summary's), a `.hgrm`'s percentiles. Times are in nanoseconds,
//! rates in bits per second, in both.
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

use quench_report::{self as report, Summary};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// An interval log (.hlog), a percentile distribution (.hgrm), a JSON summary of `quench
    /// recv` or `quench sim` (.json), or a report directory.
    #[arg(value_name = "PATH")]
    pub file: PathBuf,
    /// Write rate.svg and latency.svg into this directory.
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// Print the merged latency percentile distribution (.hgrm format).
    #[arg(long, conflicts_with_all = ["csv", "json"])]
    pub hgrm: bool,
    /// One CSV table with a header: a log's intervals, a summary's flows (of a directory, its
    /// summary's), a .hgrm's percentiles; times in ns.
    #[arg(long, conflicts_with = "json")]
    pub csv: bool,
    /// JSON lines, each with a `type`: the summary, then one per interval; times in ns.
    #[arg(long)]
    pub json: bool,
}

/// How the report is printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Table,
    Csv,
    Json,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let format = match (args.csv, args.json) {
        (true, _) => Format::Csv,
        (_, true) => Format::Json,
        _ => Format::Table,
    };
    if format != Format::Table {
        // Standard output carries the table or the lines only.
        super::human_to_stderr();
    }
    if args.file.extension().is_some_and(|e| e == "hgrm") {
        let text = report::read_file(&args.file)?;
        let p = report::hgrm::Percentiles::read(&args.file, &text)?;
        return match format {
            Format::Table => Ok(out!("{}", p.line())?),
            Format::Csv => Ok(super::machine_out(&p.csv())?),
            Format::Json => Ok(jsonln!("percentiles", p.json())?),
        };
    }
    let (log, json) = if args.file.is_dir() {
        let log = args.file.join("intervals.hlog");
        let json = args.file.join("summary.json");
        (log.exists().then_some(log), json.exists().then_some(json))
    } else if args.file.extension().is_some_and(|e| e == "json") {
        (None, Some(args.file.clone()))
    } else {
        (Some(args.file.clone()), None)
    };
    if log.is_none() && json.is_none() {
        anyhow::bail!(
            "{}: holds neither intervals.hlog nor summary.json",
            args.file.display()
        );
    }
    if let Some(json) = &json {
        let s = AnySummary::read(json)?;
        match format {
            Format::Table => out!("{}", s.table())?,
            Format::Csv => super::machine_out(&s.csv())?,
            Format::Json => jsonln!("summary", s.json()?)?,
        }
    }
    if let Some(log) = &log {
        let text = report::read_file(log)?;
        let ivs = report::read_interval_log(log, &text)?;
        if ivs.is_empty() && json.is_none() {
            anyhow::bail!("{}", report::why_no_intervals(log, &text));
        }
        match format {
            Format::Table => out!("{}", interval_table(&ivs))?,
            // A directory's CSV is its summary's flows (one table); the log's is asked by name.
            Format::Csv if json.is_none() => super::machine_out(&interval_csv(&ivs))?,
            Format::Csv => {}
            Format::Json => {
                for iv in &ivs {
                    jsonln!("interval", interval_json(iv))?;
                }
            }
        }
        if args.hgrm {
            let mut all = report::latency_histogram();
            for iv in &ivs {
                all.add(&iv.latency)
                    .context("merging the intervals' histograms")?;
            }
            out!("{}", report::hgrm(&all))?;
        }
        if let Some(dir) = &args.plot {
            std::fs::create_dir_all(dir).with_context(|| format!("{}", dir.display()))?;
            report::plot_log(log, &text, dir, report::log_kind(&text))?;
            outln!(
                "wrote {} and {}",
                dir.join("rate.svg").display(),
                dir.join("latency.svg").display()
            )?;
        }
    } else if args.plot.is_some() || args.hgrm {
        anyhow::bail!("--plot and --hgrm need an interval log (.hlog)");
    }
    Ok(())
}

/// A `summary.json`: `quench recv`'s, or `quench sim`'s.
enum AnySummary {
    Recv(Summary),
    Sim(quench_sim::report::Summary),
}

impl AnySummary {
    fn read(path: &Path) -> anyhow::Result<AnySummary> {
        let text = report::read_file(path)?;
        match serde_json::from_slice::<Summary>(&text) {
            Ok(s) => Ok(AnySummary::Recv(s)),
            Err(recv_err) => match serde_json::from_slice::<quench_sim::report::Summary>(&text) {
                Ok(s) => Ok(AnySummary::Sim(s)),
                Err(sim_err) => anyhow::bail!(
                    "{}: neither a `quench recv` summary ({recv_err}) nor a `quench sim` one \
                     ({sim_err})",
                    path.display()
                ),
            },
        }
    }

    fn table(&self) -> String {
        match self {
            AnySummary::Recv(s) => s.table(),
            AnySummary::Sim(s) => s.table(),
        }
    }

    /// The flows, one row each: a receiver's counts and latency percentiles, or the
    /// simulator's `fct.csv`.
    fn csv(&self) -> String {
        match self {
            AnySummary::Sim(s) => quench_sim::report::fct_csv(s),
            AnySummary::Recv(s) => {
                let mut out = String::from(
                    "flow,frames,bytes,goodput_bps,lost,reordered,duplicates,p50_ns,p99_ns,\
                     p999_ns,max_ns\n",
                );
                for f in &s.flows {
                    let l = &f.latency;
                    let _ = writeln!(
                        out,
                        "{},{},{},{},{},{},{},{},{},{},{}",
                        f.flow,
                        f.frames,
                        f.bytes,
                        f.goodput_bps,
                        f.lost,
                        f.reordered,
                        f.duplicates,
                        l.p50_ns,
                        l.p99_ns,
                        l.p999_ns,
                        l.max_ns
                    );
                }
                out
            }
        }
    }

    /// The summary as it is in the file, with `kind` saying whose it is.
    fn json(&self) -> anyhow::Result<serde_json::Value> {
        let (kind, mut v) = match self {
            AnySummary::Recv(s) => ("recv", serde_json::to_value(s)?),
            AnySummary::Sim(s) => ("sim", serde_json::to_value(s)?),
        };
        if let Some(o) = v.as_object_mut() {
            o.insert("kind".into(), kind.into());
        }
        Ok(v)
    }
}

/// Nanoseconds from the log's base time to the end of `iv`.
fn end_ns(iv: &report::Interval) -> u64 {
    ((iv.start_s + iv.dur_s) * 1e9).round() as u64
}

/// The latency at quantile `q` of `iv`, in ns.
fn at(iv: &report::Interval, q: f64) -> u64 {
    iv.latency.value_at_quantile(q)
}

/// The interval table: one token per column header, so `split()` and pandas'
/// `sep=r"\s+"` read it.
fn interval_table(ivs: &[report::Interval]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:>9} {:>6} {:>10} {:>10} {:>10} {:>10}",
        "t_s", "flow", "Mb/s", "p50_us", "p99_us", "p99.9_us"
    );
    for iv in ivs {
        let q = |x: f64| at(iv, x) as f64 / 1e3;
        let _ = writeln!(
            s,
            "{:>9.3} {:>6} {:>10.1} {:>10.1} {:>10.1} {:>10.1}",
            iv.start_s + iv.dur_s,
            iv.flow,
            iv.rate_bps() / 1e6,
            q(0.5),
            q(0.99),
            q(0.999)
        );
    }
    s
}

/// The columns of an interval in `--csv` and `--json`.
const INTERVAL_COLUMNS: [&str; 7] = [
    "end_ns", "flow", "rate_bps", "frames", "p50_ns", "p99_ns", "p999_ns",
];

fn interval_values(iv: &report::Interval) -> [u64; 7] {
    [
        end_ns(iv),
        u64::from(iv.flow),
        iv.rate_bps().round() as u64,
        iv.len.len(),
        at(iv, 0.5),
        at(iv, 0.99),
        at(iv, 0.999),
    ]
}

fn interval_csv(ivs: &[report::Interval]) -> String {
    let mut s = INTERVAL_COLUMNS.join(",");
    s.push('\n');
    for iv in ivs {
        let v: Vec<String> = interval_values(iv).iter().map(u64::to_string).collect();
        let _ = writeln!(s, "{}", v.join(","));
    }
    s
}

fn interval_json(iv: &report::Interval) -> serde_json::Value {
    serde_json::Value::Object(
        INTERVAL_COLUMNS
            .iter()
            .zip(interval_values(iv))
            .map(|(c, v)| (c.to_string(), v.into()))
            .collect(),
    )
}
