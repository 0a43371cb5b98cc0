//! Reports of a run: the HdrHistogram percentile distribution text (`.hgrm`), an interval log in
//! the HdrHistogram log format (`.hlog`, readable by HdrHistogram's `HistogramLogProcessor`), a
//! JSON summary, and SVG plots of per-flow rate over time and latency percentiles; the line-plot
//! routine ([`plot`]) and Jain's index ([`jain_index`]) that `quench sim`'s report uses too.
//!
//! The interval log carries, per flow and interval, two tagged histograms:
//! - `lat.<flow>`: one-way latency in nanoseconds;
//! - `len.<flow>`: frame lengths in octets, so that count x mean is the octets received in the
//!   interval exactly (lengths below 2048 are exact at 3 significant digits). This is what lets
//!   `quench report run.hlog` redraw the rate plot from the log alone;
//!
//! and after them one untagged histogram per interval: the latency of every flow together, so
//! that HdrHistogram tools that ignore tags (`HistogramLogProcessor`, PyPI's `hdrhistogram`) read
//! the run's latency as a plain interval log. Merged over all intervals it is the histogram of
//! `latency.hgrm`.
//!
//! Layering: this module formats and reads histograms, logs and summaries; it imports nothing
//! from the modules that fill them (`recv`, `sim`), which import it.
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io;
use std::path::Path;
use std::time::Duration as StdDuration;

use base64::Engine as _;
use hdrhistogram::serialization::interval_log::{
    IntervalLogIterator, IntervalLogWriterBuilder, LogEntry, Tag,
};
use hdrhistogram::serialization::{Deserializer, V2DeflateSerializer};
use hdrhistogram::Histogram;

pub mod hgrm;
pub mod plot;
pub mod summary;

pub use plot::Series;

pub use summary::{jain_index, FlowSummary, LatencyKind, LatencySummary, RxTimestamps, Summary};

/// Rows a human table shows at most, and series a plot draws: the largest by the table's
/// measure; the rest are counted in a closing line (the JSON and CSV outputs have them all).
pub const TOP: usize = 12;

/// The indices of the `n` largest of `keys` (ties to the earlier), in their original order, and
/// how many are left out.
pub fn top<K: Ord>(keys: &[K], n: usize) -> (Vec<usize>, usize) {
    let mut idx: Vec<usize> = (0..keys.len()).collect();
    idx.sort_by(|&a, &b| keys[b].cmp(&keys[a]).then(a.cmp(&b)));
    idx.truncate(n);
    idx.sort_unstable();
    let rest = keys.len() - idx.len();
    (idx, rest)
}

/// The note of a plot or table that shows `shown` of `total` `what`, chosen `how`
/// ("12 of 137 flows shown: the 12 with the most octets"); `None` when it shows them all.
pub fn shown_note(shown: usize, total: usize, what: &str, how: &str) -> Option<String> {
    (shown < total).then(|| format!("{shown} of {total} {what} shown: the {shown} {how}"))
}

/// Largest latency the histograms hold: 10 s in nanoseconds. Larger values are clamped (and
/// counted by the receiver) rather than lost.
pub const MAX_LATENCY_NS: u64 = 10_000_000_000;
/// Significant decimal digits of the latency histograms (0.1 % value resolution).
pub const SIGFIG: u8 = 3;

/// An empty latency histogram (nanoseconds, 1 ..= [`MAX_LATENCY_NS`], [`SIGFIG`] digits).
pub fn latency_histogram() -> Histogram<u64> {
    // Cannot fail: 1 <= MAX_LATENCY_NS / 2 and SIGFIG <= 5 are compile-time facts.
    Histogram::new_with_bounds(1, MAX_LATENCY_NS, SIGFIG).unwrap_or_else(|_| unreachable!())
}

/// Errors reading or writing a report file.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("{path}: {source}")]
    Io { path: String, source: io::Error },
    #[error("{path}: not an HdrHistogram interval log (parse error at byte {offset})")]
    LogParse { path: String, offset: usize },
    #[error("{path}: interval at {start_s:.3} s holds an undecodable histogram: {why}")]
    Histogram {
        path: String,
        start_s: f64,
        why: String,
    },
    #[error("{path}: {why}")]
    Plot { path: String, why: String },
    #[error(
        "{path}: not a percentile distribution (.hgrm: `Value Percentile TotalCount` rows and a \
         `Total count` line)"
    )]
    Hgrm { path: String },
    #[error("{path}: not a quench JSON summary: {source}")]
    Json {
        path: String,
        source: serde_json::Error,
    },
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> ReportError + '_ {
    move |source| ReportError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Nanoseconds per millisecond: `.hgrm` values are in milliseconds, the unit HdrHistogram's
/// plotting page (`plotFiles.html`) assumes.
const NS_PER_MS: f64 = 1e6;

/// The percentile distribution of `h` (nanoseconds) in the `.hgrm` text format of HdrHistogram's
/// `outputPercentileDistribution`, values in milliseconds, five ticks per half distance.
pub fn hgrm(h: &Histogram<u64>) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:>12} {:>14} {:>10} {:>14}\n",
        "Value", "Percentile", "TotalCount", "1/(1-Percentile)"
    );
    let total = h.len();
    if total > 0 {
        let mut cum = 0u64;
        for v in h.iter_quantiles(5) {
            let q = v.quantile_iterated_to();
            let value = v.value_iterated_to() as f64 / NS_PER_MS;
            cum += v.count_since_last_iteration();
            if q < 1.0 {
                let _ = writeln!(
                    s,
                    "{:12.6} {:2.12} {:10} {:14.2}",
                    value,
                    q,
                    cum,
                    1.0 / (1.0 - q)
                );
            } else {
                let _ = writeln!(s, "{:12.6} {:2.12} {:10}", value, q, cum);
            }
        }
    }
    let _ = writeln!(
        s,
        "#[Mean    = {:12.6}, StdDeviation   = {:12.6}]",
        h.mean() / NS_PER_MS,
        h.stdev() / NS_PER_MS
    );
    let _ = writeln!(
        s,
        "#[Max     = {:12.6}, Total count    = {:12}]",
        h.max() as f64 / NS_PER_MS,
        total
    );
    let _ = writeln!(
        s,
        "#[Buckets = {:12}, SubBuckets     = {:12}]",
        h.buckets(),
        sub_buckets(h)
    );
    s
}

/// The sub-buckets of each of `h`'s buckets, as HdrHistogram defines them (the Java and Python
/// writers print it in the `.hgrm` footer): the power of two that resolves
/// 2 x 10^significant-figures values one by one, 2048 for 3 figures. Not the counts array's
/// length, (buckets + 1) x half of this.
pub fn sub_buckets(h: &Histogram<u64>) -> u64 {
    let single_unit = 2 * 10u64.pow(u32::from(h.sigfig()));
    single_unit.next_power_of_two()
}

/// Writes an interval log: one `lat.<flow>` and one `len.<flow>` histogram per flow and interval.
///
/// Memory stays bounded over a run of any length: once [`SPILL_AT`] octets of log text have
/// built up they move to an unnamed temporary file (`O_TMPFILE` in the temporary directory,
/// gone when the log is dropped), and [`IntervalLog::bytes`] reads them back at the end. Where
/// no temporary file can be made the text stays in memory.
pub struct IntervalLog {
    /// Text written since the last spill.
    text: Vec<u8>,
    /// The text spilled so far, in order.
    spill: Option<std::fs::File>,
    serializer: V2DeflateSerializer,
}

/// Log text an [`IntervalLog`] holds in memory before it spills to its temporary file.
pub const SPILL_AT: usize = 256 * 1024;

impl IntervalLog {
    /// A log whose interval timestamps count from `base_unix_s` (seconds since the Unix epoch),
    /// its `lat.<flow>` histograms holding `kind`.
    pub fn new(base_unix_s: f64, comment: &str, kind: LatencyKind) -> Self {
        let mut text = Vec::new();
        let mut serializer = V2DeflateSerializer::new();
        let base = StdDuration::from_secs_f64(base_unix_s.max(0.0));
        // Writing into a Vec cannot fail.
        let _ = IntervalLogWriterBuilder::new()
            .add_comment(comment)
            .add_comment(&format!(
                "quench interval log: lat.<flow> = {k} (ns), len.<flow> = frame octets, \
                 untagged = {k} of all flows (ns)",
                k = kind.label()
            ))
            .with_start_time(std::time::UNIX_EPOCH + base)
            .with_base_time(std::time::UNIX_EPOCH + base)
            .begin_log_with(&mut text, &mut serializer);
        IntervalLog {
            text,
            spill: None,
            serializer,
        }
    }

    /// Moves the text in memory to the temporary file once there is [`SPILL_AT`] of it.
    fn maybe_spill(&mut self) {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        if self.text.len() < SPILL_AT {
            return;
        }
        if self.spill.is_none() {
            self.spill = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .mode(0o600)
                .custom_flags(libc::O_TMPFILE)
                .open(std::env::temp_dir())
                .ok();
        }
        if let Some(f) = self.spill.as_mut() {
            if f.write_all(&self.text).is_ok() {
                self.text.clear();
            } else {
                // The file's end is unknown after a failed write: keep everything in memory.
                self.spill = None;
            }
        }
    }

    /// Appends the histograms of one flow for the interval `[start, start + dur)` (seconds since
    /// the base time).
    pub fn add(
        &mut self,
        flow: u32,
        start_s: f64,
        dur_s: f64,
        latency: &Histogram<u64>,
        len: &Histogram<u64>,
    ) -> Result<(), String> {
        let mut w = IntervalLogWriterBuilder::new()
            .begin_log_with(&mut self.text, &mut self.serializer)
            .map_err(|e| e.to_string())?;
        let start = StdDuration::from_secs_f64(start_s.max(0.0));
        let dur = StdDuration::from_secs_f64(dur_s.max(0.0));
        for (prefix, h) in [("lat", latency), ("len", len)] {
            let tag = format!("{prefix}.{flow}");
            w.write_histogram(h, start, dur, Tag::new(&tag))
                .map_err(|e| e.to_string())?;
        }
        self.maybe_spill();
        Ok(())
    }

    /// Appends the untagged latency histogram of every flow together for the interval
    /// `[start, start + dur)`.
    pub fn add_all_flows(
        &mut self,
        start_s: f64,
        dur_s: f64,
        latency: &Histogram<u64>,
    ) -> Result<(), String> {
        let mut w = IntervalLogWriterBuilder::new()
            .begin_log_with(&mut self.text, &mut self.serializer)
            .map_err(|e| e.to_string())?;
        w.write_histogram(
            latency,
            StdDuration::from_secs_f64(start_s.max(0.0)),
            StdDuration::from_secs_f64(dur_s.max(0.0)),
            None,
        )
        .map_err(|e| e.to_string())?;
        self.maybe_spill();
        Ok(())
    }

    /// The whole log: what was spilled to the temporary file, then what is in memory.
    pub fn bytes(&self) -> io::Result<std::borrow::Cow<'_, [u8]>> {
        use std::io::{Read as _, Seek as _};
        let Some(mut f) = self.spill.as_ref() else {
            return Ok(std::borrow::Cow::Borrowed(&self.text));
        };
        let mut all = Vec::new();
        f.rewind()?;
        f.read_to_end(&mut all)?;
        all.extend_from_slice(&self.text);
        Ok(std::borrow::Cow::Owned(all))
    }
}

/// What the `lat.<flow>` histograms of a log written by [`IntervalLog`] hold, from its header
/// comment (a log without that comment is taken as one-way).
pub fn log_kind(text: &[u8]) -> LatencyKind {
    let rtt = format!("lat.<flow> = {} (ns)", LatencyKind::Rtt.label());
    let head = &text[..text.len().min(1024)];
    if String::from_utf8_lossy(head).contains(&rtt) {
        LatencyKind::Rtt
    } else {
        LatencyKind::OneWay
    }
}

/// One interval of one flow read back from a log.
#[derive(Clone, Debug)]
pub struct Interval {
    pub flow: u32,
    pub start_s: f64,
    pub dur_s: f64,
    pub latency: Histogram<u64>,
    pub len: Histogram<u64>,
}

impl Interval {
    /// Octets received in the interval.
    pub fn bytes(&self) -> f64 {
        self.len.mean() * self.len.len() as f64
    }
    pub fn rate_bps(&self) -> f64 {
        if self.dur_s > 0.0 {
            self.bytes() * 8.0 / self.dur_s
        } else {
            0.0
        }
    }
}

/// Reads a log written by [`IntervalLog`] (untagged or foreign-tagged histograms are skipped).
pub fn read_interval_log(path: &Path, text: &[u8]) -> Result<Vec<Interval>, ReportError> {
    let p = || path.display().to_string();
    let mut lat: BTreeMap<(u64, u32), (f64, f64, Histogram<u64>)> = BTreeMap::new();
    let mut out = Vec::new();
    let mut de = Deserializer::new();
    for entry in IntervalLogIterator::new(text) {
        let entry = entry.map_err(|e| match e {
            hdrhistogram::serialization::interval_log::LogIteratorError::ParseError { offset } => {
                ReportError::LogParse { path: p(), offset }
            }
        })?;
        let LogEntry::Interval(iv) = entry else {
            continue;
        };
        let start_s = iv.start_timestamp().as_secs_f64();
        let dur_s = iv.duration().as_secs_f64();
        let Some(tag) = iv.tag() else { continue };
        let Some((kind, flow)) = tag.as_str().split_once('.') else {
            continue;
        };
        let Ok(flow) = flow.parse::<u32>() else {
            continue;
        };
        let bad = |why: String| ReportError::Histogram {
            path: p(),
            start_s,
            why,
        };
        let raw = base64::engine::general_purpose::STANDARD
            .decode(iv.encoded_histogram())
            .map_err(|e| bad(e.to_string()))?;
        let h: Histogram<u64> = de
            .deserialize(&mut io::Cursor::new(raw))
            .map_err(|e| bad(format!("{e:?}")))?;
        let key = ((start_s * 1e9) as u64, flow);
        match kind {
            "lat" => {
                lat.insert(key, (start_s, dur_s, h));
            }
            "len" => {
                let latency = match lat.remove(&key) {
                    Some((_, _, l)) => l,
                    None => latency_histogram(),
                };
                out.push(Interval {
                    flow,
                    start_s,
                    dur_s,
                    latency,
                    len: h,
                });
            }
            _ => {}
        }
    }
    out.sort_by(|a, b| a.start_s.total_cmp(&b.start_s).then(a.flow.cmp(&b.flow)));
    Ok(out)
}

/// Why [`read_interval_log`] found no interval in `text`, as an error message naming `path`:
/// an empty file, a log without histograms, or one whose histograms carry no `lat.<flow>` /
/// `len.<flow>` tag (what it holds instead is listed).
pub fn why_no_intervals(path: &Path, text: &[u8]) -> String {
    let p = path.display();
    if text.iter().all(u8::is_ascii_whitespace) {
        return format!("{p}: empty file");
    }
    let mut histograms = 0usize;
    let mut untagged = 0usize;
    let mut tags: Vec<String> = Vec::new();
    for entry in IntervalLogIterator::new(text) {
        let Ok(LogEntry::Interval(iv)) = entry else {
            continue;
        };
        histograms += 1;
        match iv.tag() {
            None => untagged += 1,
            Some(t) if !tags.iter().any(|x| x == t.as_str()) => tags.push(t.as_str().to_string()),
            Some(_) => {}
        }
    }
    if histograms == 0 {
        return format!("{p}: no interval histogram in it (not an HdrHistogram interval log?)");
    }
    tags.sort();
    let shown: Vec<&str> = tags.iter().take(5).map(String::as_str).collect();
    let more = tags.len().saturating_sub(shown.len());
    format!(
        "{p}: {histograms} histograms, none tagged `lat.<flow>` and `len.<flow>` as quench's \
         interval logs are (tags found: {}{}; untagged: {untagged})",
        if shown.is_empty() {
            "none".to_string()
        } else {
            shown.join(", ")
        },
        if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        }
    )
}

/// Per-flow rate (Mb/s) over time from intervals.
pub fn rate_series(intervals: &[Interval]) -> Vec<Series> {
    let mut by_flow: BTreeMap<u32, Vec<(f64, f64)>> = BTreeMap::new();
    for iv in intervals {
        by_flow
            .entry(iv.flow)
            .or_default()
            .push((iv.start_s + iv.dur_s, iv.rate_bps() / 1e6));
    }
    by_flow
        .into_iter()
        .map(|(f, points)| Series {
            name: format!("flow {f}"),
            points,
        })
        .collect()
}

/// Latency percentiles (us) over time, all flows merged per interval.
pub fn latency_series(intervals: &[Interval]) -> Vec<Series> {
    let mut merged: BTreeMap<u64, (f64, Histogram<u64>)> = BTreeMap::new();
    for iv in intervals {
        let k = ((iv.start_s + iv.dur_s) * 1e9) as u64;
        match merged.get_mut(&k) {
            Some((_, h)) => {
                let _ = h.add(&iv.latency);
            }
            None => {
                merged.insert(k, (iv.start_s + iv.dur_s, iv.latency.clone()));
            }
        }
    }
    [("p50", 0.5), ("p99", 0.99), ("p99.9", 0.999)]
        .into_iter()
        .map(|(name, q)| Series {
            name: name.to_string(),
            points: merged
                .values()
                .filter(|(_, h)| !h.is_empty())
                .map(|(t, h)| (*t, h.value_at_quantile(q) as f64 / 1e3))
                .collect(),
        })
        .collect()
}

/// Draws `series` as lines into an SVG file (see [`plot::Plot::draw`]).
pub fn plot_svg(path: &Path, plot: &plot::Plot, series: &[Series]) -> Result<(), ReportError> {
    let svg = plot.draw(series).map_err(|e| ReportError::Plot {
        path: path.display().to_string(),
        why: e.to_string(),
    })?;
    write_file(path, svg.as_bytes())
}

/// Writes `text` to `path`, naming the path in the error.
pub fn write_file(path: &Path, text: &[u8]) -> Result<(), ReportError> {
    std::fs::write(path, text).map_err(io_err(path))
}

/// Reads `path`, naming the path in the error.
pub fn read_file(path: &Path) -> Result<Vec<u8>, ReportError> {
    std::fs::read(path).map_err(io_err(path))
}

/// Writes the report directory of a run: `summary.json`, `latency.hgrm` (`rtt.hgrm` for a
/// round-trip report), `intervals.hlog`, `rate.svg`, `latency.svg`.
pub fn write_report_dir(
    dir: &Path,
    summary: &Summary,
    latency: &Histogram<u64>,
    log: &IntervalLog,
) -> Result<(), ReportError> {
    std::fs::create_dir_all(dir).map_err(io_err(dir))?;
    let json = serde_json::to_vec_pretty(summary).map_err(|source| ReportError::Json {
        path: dir.join("summary.json").display().to_string(),
        source,
    })?;
    write_file(&dir.join("summary.json"), &json)?;
    write_file(
        &dir.join(hgrm_name(summary.latency_kind)),
        hgrm(latency).as_bytes(),
    )?;
    let log_path = dir.join("intervals.hlog");
    let text = log.bytes().map_err(io_err(&log_path))?;
    write_file(&log_path, &text)?;
    plot_log(&log_path, &text, dir, summary.latency_kind)
}

/// The percentile file of a report directory holding `kind`.
pub fn hgrm_name(kind: LatencyKind) -> &'static str {
    match kind {
        LatencyKind::OneWay => "latency.hgrm",
        LatencyKind::Rtt => "rtt.hgrm",
    }
}

/// Redraws `rate.svg` and `latency.svg` into `out_dir` from an interval log of `kind`.
pub fn plot_log(
    path: &Path,
    text: &[u8],
    out_dir: &Path,
    kind: LatencyKind,
) -> Result<(), ReportError> {
    let ivs = read_interval_log(path, text)?;
    // The flows with the most octets, [`TOP`] of them.
    let mut rates = rate_series(&ivs);
    let mut octets: BTreeMap<u32, u64> = BTreeMap::new();
    for iv in &ivs {
        *octets.entry(iv.flow).or_default() += iv.bytes().round() as u64;
    }
    let keys: Vec<u64> = octets.values().copied().collect();
    let (shown, _) = top(&keys, TOP);
    let total = rates.len();
    let mut k = 0;
    rates.retain(|_| {
        k += 1;
        shown.contains(&(k - 1))
    });
    let note = shown_note(rates.len(), total, "flows", "with the most octets");
    plot_svg(
        &out_dir.join("rate.svg"),
        &plot::Plot {
            title: "Per-flow receive rate",
            x_label: "time (s)",
            y_label: "rate (Mb/s)",
            note: note.as_deref(),
            log_x: false,
        },
        &rates,
    )?;
    plot_svg(
        &out_dir.join("latency.svg"),
        &plot::Plot {
            title: match kind {
                LatencyKind::OneWay => "One-way latency percentiles (all flows)",
                LatencyKind::Rtt => "Round-trip time percentiles (all flows)",
            },
            x_label: "time (s)",
            y_label: &format!("{} (us)", kind.label()),
            note: None,
            log_x: false,
        },
        &latency_series(&ivs),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hist(vals: &[u64]) -> Histogram<u64> {
        let mut h = latency_histogram();
        for &v in vals {
            h.record(v).unwrap();
        }
        h
    }

    #[test]
    fn top_keeps_the_largest_in_their_order() {
        assert_eq!(top(&[5, 1, 9, 5, 0], 3), (vec![0, 2, 3], 2));
        assert_eq!(top(&[1, 2], 12), (vec![0, 1], 0));
        assert_eq!(top::<u64>(&[], 3), (vec![], 0));
    }

    #[test]
    fn hgrm_has_the_hdrhistogram_shape() {
        let h = hist(&(1..=1000).map(|i| i * 1000).collect::<Vec<_>>());
        let t = hgrm(&h);
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].contains("Percentile") && lines[0].contains("TotalCount"));
        // First data line: 1 us = 0.001 ms at quantile 0.
        let first: Vec<&str> = lines[2].split_whitespace().collect();
        assert_eq!(first[0], "0.001000");
        assert_eq!(first[2], "1");
        let last_data = lines.iter().rev().find(|l| !l.starts_with('#')).unwrap();
        let cols: Vec<&str> = last_data.split_whitespace().collect();
        assert_eq!(cols[1], "1.000000000000");
        assert_eq!(cols[2], "1000");
        assert!(t.contains("Total count    =         1000"));
        // HdrHistogram's footer for 3 significant figures up to 10 s in ns (hdrh: Buckets 24,
        // SubBuckets 2048, and 25,600 counts).
        assert!(t.ends_with("#[Buckets =           24, SubBuckets     =         2048]\n"));
        assert_eq!(h.distinct_values(), 25 * 2048 / 2);
    }

    #[test]
    fn interval_log_round_trips_rates_and_latency() {
        let mut log = IntervalLog::new(1_700_000_000.0, "test", LatencyKind::OneWay);
        // flow 3: 100 frames of 1500 octets in 0.1 s = 12 Mb/s; latency 50 us.
        let lat = hist(&[50_000; 100]);
        let len = hist(&[1500; 100]);
        log.add(3, 0.0, 0.1, &lat, &len).unwrap();
        log.add(3, 0.1, 0.1, &hist(&[70_000; 10]), &hist(&[1000; 10]))
            .unwrap();
        let text = String::from_utf8(log.bytes().unwrap().to_vec()).unwrap();
        assert_eq!(log_kind(&log.bytes().unwrap()), LatencyKind::OneWay);
        assert_eq!(
            log_kind(
                &IntervalLog::new(0.0, "t", LatencyKind::Rtt)
                    .bytes()
                    .unwrap()
            ),
            LatencyKind::Rtt
        );
        assert!(text.contains("#[BaseTime: 1700000000.000"));
        assert!(text.contains("Tag=lat.3,"));
        let ivs = read_interval_log(Path::new("x.hlog"), &log.bytes().unwrap()).unwrap();
        assert_eq!(ivs.len(), 2);
        assert!((ivs[0].rate_bps() - 12e6).abs() < 1.0);
        assert!((ivs[1].rate_bps() - 0.8e6).abs() < 1.0);
        assert!(ivs[0]
            .latency
            .equivalent(ivs[0].latency.value_at_quantile(0.5), 50_000));
        let r = rate_series(&ivs);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].points.len(), 2);
    }

    #[test]
    fn a_long_log_spills_and_reads_back_whole() {
        let mut log = IntervalLog::new(0.0, "t", LatencyKind::OneWay);
        let (lat, len) = (hist(&[50_000, 60_000, 70_000]), hist(&[1500; 3]));
        let mut n = 0;
        while log.spill.is_none() || log.text.len() > SPILL_AT / 2 {
            log.add(n % 4, f64::from(n) * 0.1, 0.1, &lat, &len).unwrap();
            n += 1;
            assert!(log.text.len() < 2 * SPILL_AT, "memory grows with the run");
        }
        let text = log.bytes().unwrap();
        assert!(text.len() > SPILL_AT);
        let ivs = read_interval_log(Path::new("x.hlog"), &text).unwrap();
        assert_eq!(ivs.len(), n as usize);
        assert!(ivs.iter().all(|iv| iv.latency.len() == 3));
    }

    #[test]
    fn the_rate_plot_draws_the_largest_flows_and_says_so() {
        let dir = std::env::temp_dir().join(format!("quench-rate-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut log = IntervalLog::new(0.0, "t", LatencyKind::OneWay);
        // Flow f sends f + 1 frames: flows 2..=13 are the 12 largest of 14.
        for f in 0..14u32 {
            let n = f as usize + 1;
            log.add(f, 1.0, 0.5, &hist(&vec![10_000; n]), &hist(&vec![1000; n]))
                .unwrap();
        }
        let path = dir.join("intervals.hlog");
        let text = log.bytes().unwrap().to_vec();
        plot_log(&path, &text, &dir, LatencyKind::OneWay).unwrap();
        let svg = std::fs::read_to_string(dir.join("rate.svg")).unwrap();
        assert!(svg.contains("12 of 14 flows shown: the 12 with the most octets"));
        assert!(svg.contains("\nflow 13\n") && !svg.contains("\nflow 1\n"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn garbage_is_a_parse_error_not_a_panic() {
        let e = read_interval_log(Path::new("bad"), b"Tag=lat.1,x,y,z\n").unwrap_err();
        assert!(matches!(e, ReportError::LogParse { .. }), "{e}");
    }

    #[test]
    fn report_dir_has_all_files() {
        let dir = std::env::temp_dir().join(format!("quench-report-{}", std::process::id()));
        let mut log = IntervalLog::new(0.0, "t", LatencyKind::Rtt);
        log.add(1, 0.0, 0.5, &hist(&[10_000, 20_000]), &hist(&[64, 64]))
            .unwrap();
        let s = Summary::default();
        write_report_dir(&dir, &s, &hist(&[10_000, 20_000]), &log).unwrap();
        let s = Summary {
            latency_kind: LatencyKind::Rtt,
            ..s
        };
        write_report_dir(&dir, &s, &hist(&[10_000, 20_000]), &log).unwrap();
        for f in [
            "summary.json",
            "rtt.hgrm",
            "intervals.hlog",
            "rate.svg",
            "latency.svg",
        ] {
            let meta = std::fs::metadata(dir.join(f)).unwrap();
            assert!(meta.len() > 0, "{f} empty");
        }
        let svg = std::fs::read_to_string(dir.join("rate.svg")).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("flow 1"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
