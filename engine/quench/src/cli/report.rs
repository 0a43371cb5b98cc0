//! `quench report FILE`: re-reads what `quench recv` or `quench sim` wrote and prints or plots it.
//!
//! FILE is an interval log (`.hlog`), a percentile distribution (`.hgrm`), a JSON summary
//! (`summary.json` of `quench recv` or of `quench sim`) or a report directory. Prints the summary
//! table, then per interval and flow the receive rate and latency percentiles; `--hgrm` prints
//! the percentile distribution of all intervals merged; `--plot DIR` redraws `rate.svg` and
//! `latency.svg` into DIR.
use std::path::{Path, PathBuf};

use anyhow::Context as _;

use quench_report::{self as report, Summary};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// An interval log (.hlog), a percentile distribution (.hgrm), a JSON summary of `quench
    /// recv` or `quench sim` (.json), or a report directory.
    pub file: PathBuf,
    /// Write rate.svg and latency.svg into this directory.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Print the merged latency percentile distribution (.hgrm format).
    #[arg(long)]
    pub hgrm: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if args.file.extension().is_some_and(|e| e == "hgrm") {
        let text = report::read_file(&args.file)?;
        out!("{}", hgrm_summary(&args.file, &text)?)?;
        return Ok(());
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
        out!("{}", summary_table(json)?)?;
    }
    if let Some(log) = &log {
        let text = report::read_file(log)?;
        let ivs = report::read_interval_log(log, &text)?;
        if ivs.is_empty() && json.is_none() {
            anyhow::bail!("{}", report::why_no_intervals(log, &text));
        }
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

/// The table of a `summary.json`: `quench recv`'s, or `quench sim`'s.
fn summary_table(path: &Path) -> anyhow::Result<String> {
    let text = report::read_file(path)?;
    match serde_json::from_slice::<Summary>(&text) {
        Ok(s) => Ok(s.table()),
        Err(recv_err) => match serde_json::from_slice::<quench_sim::report::Summary>(&text) {
            Ok(s) => Ok(s.table()),
            Err(sim_err) => anyhow::bail!(
                "{}: neither a `quench recv` summary ({recv_err}) nor a `quench sim` one \
                 ({sim_err})",
                path.display()
            ),
        },
    }
}

/// The percentiles of a `.hgrm` file (values in milliseconds, HdrHistogram's
/// `outputPercentileDistribution` format): p50, p90, p99, p99.9, p99.99 and max, in
/// microseconds, and the total count.
fn hgrm_summary(path: &Path, text: &[u8]) -> anyhow::Result<String> {
    let text = String::from_utf8_lossy(text);
    // (value ms, percentile) rows.
    let mut rows = Vec::new();
    let mut total = None;
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if let [v, q, ..] = f.as_slice() {
            if let (Ok(v), Ok(q)) = (v.parse::<f64>(), q.parse::<f64>()) {
                rows.push((v, q));
            }
        }
        if let Some(rest) = line.split("Total count").nth(1) {
            total = rest
                .trim_start_matches([' ', '='])
                .trim_end_matches(']')
                .trim()
                .parse::<u64>()
                .ok();
        }
    }
    let (Some(total), false) = (total, rows.is_empty()) else {
        anyhow::bail!(
            "{}: not a percentile distribution (.hgrm: `Value Percentile TotalCount` rows and \
             a `Total count` line)",
            path.display()
        );
    };
    let mut s = format!("{total} values;");
    for (name, q) in [
        ("p50", 0.5),
        ("p90", 0.9),
        ("p99", 0.99),
        ("p99.9", 0.999),
        ("p99.99", 0.9999),
    ] {
        // The first row at or past the percentile: the value below which that share lies.
        if let Some((v, _)) = rows.iter().find(|(_, rq)| *rq >= q) {
            s += &format!(" {name} {:.1} us", v * 1e3);
        }
    }
    if let Some((v, _)) = rows.last() {
        s += &format!(", max {:.1} us", v * 1e3);
    }
    s.push('\n');
    Ok(s)
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
