//! `quench report FILE`: re-reads what `quench recv` wrote and prints or plots it.
//!
//! FILE is an interval log (`.hlog`), a JSON summary (`summary.json`) or a report directory
//! holding both. Prints the summary table, then per interval and flow the receive rate and latency
//! percentiles; `--hgrm` prints the percentile distribution of all intervals merged; `--plot DIR`
//! redraws `rate.svg` and `latency.svg` into DIR.
use std::path::{Path, PathBuf};

use anyhow::Context as _;

use crate::report::{self, Summary};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// An interval log (.hlog), a JSON summary (.json), or a report directory.
    pub file: PathBuf,
    /// Write rate.svg and latency.svg into this directory.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Print the merged latency percentile distribution (.hgrm format).
    #[arg(long)]
    pub hgrm: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
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
        out!("{}", summary_table(json)?)?;
    }
    if let Some(log) = &log {
        let text = report::read_file(log)?;
        let ivs = report::read_interval_log(log, &text)?;
        out!("{}", interval_table(&ivs))?;
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
            report::plot_log(log, &text, dir)?;
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

fn summary_table(path: &Path) -> anyhow::Result<String> {
    let text = report::read_file(path)?;
    let s: Summary = serde_json::from_slice(&text).map_err(|source| report::ReportError::Json {
        path: path.display().to_string(),
        source,
    })?;
    Ok(s.table())
}

fn interval_table(ivs: &[report::Interval]) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:>9} {:>6} {:>10} {:>10} {:>10} {:>10}",
        "t (s)", "flow", "Mb/s", "p50 us", "p99 us", "p99.9 us"
    );
    for iv in ivs {
        let q = |x: f64| iv.latency.value_at_quantile(x) as f64 / 1e3;
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
