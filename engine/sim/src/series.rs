//! The run's time series, `flows.csv` and `queues.csv`, written row by row as the run samples
//! them, and the per-port queue distribution the summary's statistics need.
//!
//! Memory stays bounded over a run of any length: once [`Series::stream_to`] names a directory,
//! each row goes to its file through a buffered writer as it is sampled (before that, and in
//! tests that never name one, rows collect in memory). The summary's queue mean, p99 and
//! coefficient of variation come from [`QueueDist`], one count per distinct queue length, not
//! from the rows; plots read the rows back from the file ([`Series::for_each_row`]).
//!
//! Formats (unchanged since the first simulator): `flows.csv` is `time_ns,flow,rate_bps,
//! goodput_bps`, `queues.csv` is `time_ns,node,port,bytes`, times in nanoseconds.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufRead as _, BufReader, BufWriter, Write as _};
use std::path::{Path, PathBuf};

/// Header of `flows.csv`.
pub const FLOWS_HEADER: &str = "time_ns,flow,rate_bps,goodput_bps\n";
/// Header of `queues.csv`.
pub const QUEUES_HEADER: &str = "time_ns,node,port,bytes\n";

/// Which of the two files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    Flows,
    Queues,
}

impl Which {
    pub fn file_name(self) -> &'static str {
        match self {
            Which::Flows => "flows.csv",
            Which::Queues => "queues.csv",
        }
    }

    fn header(self) -> &'static str {
        match self {
            Which::Flows => FLOWS_HEADER,
            Which::Queues => QUEUES_HEADER,
        }
    }
}

enum Sink {
    Memory(Vec<u8>),
    File { path: PathBuf, w: BufWriter<File> },
}

/// One of the two CSV files: in memory until it is streamed to a file.
struct Csv {
    sink: Sink,
}

impl Csv {
    fn new(which: Which) -> Csv {
        Csv {
            sink: Sink::Memory(which.header().as_bytes().to_vec()),
        }
    }

    fn out(&mut self) -> &mut dyn io::Write {
        match &mut self.sink {
            Sink::Memory(v) => v,
            Sink::File { w, .. } => w,
        }
    }
}

/// Both time-series files of a run, and the first write error (reported when the run's
/// outputs are written: a sample is never lost silently).
pub struct Series {
    flows: Csv,
    queues: Csv,
    error: Option<io::Error>,
}

impl Default for Series {
    fn default() -> Self {
        Series {
            flows: Csv::new(Which::Flows),
            queues: Csv::new(Which::Queues),
            error: None,
        }
    }
}

impl Series {
    fn csv(&self, which: Which) -> &Csv {
        match which {
            Which::Flows => &self.flows,
            Which::Queues => &self.queues,
        }
    }

    fn csv_mut(&mut self, which: Which) -> &mut Csv {
        match which {
            Which::Flows => &mut self.flows,
            Which::Queues => &mut self.queues,
        }
    }

    /// From now on rows go to `dir/flows.csv` and `dir/queues.csv` (created, with what was
    /// sampled so far).
    pub fn stream_to(&mut self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir_all(dir)?;
        for which in [Which::Flows, Which::Queues] {
            let path = dir.join(which.file_name());
            let csv = self.csv_mut(which);
            if let Sink::File { path: p, .. } = &csv.sink {
                if *p == path {
                    continue;
                }
            }
            let mut w = BufWriter::new(File::create(&path)?);
            match &csv.sink {
                Sink::Memory(v) => w.write_all(v)?,
                Sink::File { path: old, .. } => {
                    io::copy(&mut File::open(old)?, &mut w)?;
                }
            }
            csv.sink = Sink::File { path, w };
        }
        Ok(())
    }

    /// The directory the rows stream to, if any.
    pub fn dir(&self) -> Option<&Path> {
        match &self.flows.sink {
            Sink::File { path, .. } => path.parent(),
            Sink::Memory(_) => None,
        }
    }

    /// Appends one row (`args` formatted, then a newline).
    pub fn row(&mut self, which: Which, args: std::fmt::Arguments) {
        if self.error.is_some() {
            return;
        }
        if let Err(e) = writeln!(self.csv_mut(which).out(), "{args}") {
            self.error = Some(e);
        }
    }

    /// Writes out what is buffered; the first error of the run, if any.
    pub fn flush(&mut self) -> io::Result<()> {
        if self.error.is_none() {
            for which in [Which::Flows, Which::Queues] {
                if let Err(e) = self.csv_mut(which).out().flush() {
                    self.error = Some(e);
                    break;
                }
            }
        }
        match &self.error {
            None => Ok(()),
            Some(e) => Err(io::Error::new(
                e.kind(),
                format!("writing the time series: {e}"),
            )),
        }
    }

    /// Calls `f` with the fields of every row of `which` after its header, in order, reading a
    /// streamed file back line by line (call after [`Series::flush`]).
    pub fn for_each_row(&self, which: Which, mut f: impl FnMut(&[&str])) -> io::Result<()> {
        let csv = self.csv(which);
        let mut fields: Vec<&str> = Vec::with_capacity(4);
        match &csv.sink {
            Sink::Memory(v) => {
                let text = std::str::from_utf8(v)
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                for line in text.lines().skip(1) {
                    fields.clear();
                    fields.extend(line.split(','));
                    f(&fields);
                }
            }
            Sink::File { path, .. } => {
                let mut r = BufReader::new(File::open(path)?);
                let mut line = String::new();
                let mut first = true;
                loop {
                    line.clear();
                    if r.read_line(&mut line)? == 0 {
                        break;
                    }
                    if std::mem::take(&mut first) {
                        continue;
                    }
                    let mut fields: Vec<&str> = Vec::with_capacity(4);
                    fields.extend(line.trim_end().split(','));
                    f(&fields);
                }
            }
        }
        Ok(())
    }

    /// The whole text of `which` (header included): all of it in memory, for tests and for
    /// copying a file elsewhere.
    pub fn text(&self, which: Which) -> io::Result<String> {
        match &self.csv(which).sink {
            Sink::Memory(v) => String::from_utf8(v.clone())
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e)),
            Sink::File { path, .. } => std::fs::read_to_string(path),
        }
    }
}

/// The queue lengths one port was sampled at within the statistics window, one count per
/// distinct length: exact percentiles, mean and variance without the samples themselves.
#[derive(Clone, Debug, Default)]
pub struct QueueDist {
    counts: BTreeMap<u64, u64>,
    n: u64,
    sum: u128,
}

impl QueueDist {
    pub fn add(&mut self, bytes: u64) {
        *self.counts.entry(bytes).or_insert(0) += 1;
        self.n += 1;
        self.sum += u128::from(bytes);
    }

    pub fn len(&self) -> u64 {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The sample mean (0 without samples).
    pub fn mean(&self) -> f64 {
        if self.n == 0 {
            return 0.0;
        }
        self.sum as f64 / self.n as f64
    }

    /// The population variance.
    pub fn variance(&self) -> f64 {
        if self.n == 0 {
            return 0.0;
        }
        let mean = self.mean();
        let sq: f64 = self
            .counts
            .iter()
            .map(|(&x, &c)| c as f64 * (x as f64 - mean).powi(2))
            .sum();
        sq / self.n as f64
    }

    /// The smallest sampled length at or below which a share `p` of the samples lies (the
    /// sample of rank ceil(p x n), as a sorted list of the samples gives it); 0 without samples.
    pub fn percentile(&self, p: f64) -> u64 {
        if self.n == 0 {
            return 0;
        }
        let rank = ((p * self.n as f64).ceil() as u64).clamp(1, self.n);
        let mut seen = 0;
        for (&x, &c) in &self.counts {
            seen += c;
            if seen >= rank {
                return x;
            }
        }
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_stream_to_the_file_as_they_come() {
        let dir = std::env::temp_dir().join(format!("quench-series-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut s = Series::default();
        s.row(Which::Queues, format_args!("0,3,1,0"));
        s.stream_to(&dir).unwrap();
        s.row(Which::Queues, format_args!("10,3,1,2048"));
        s.flush().unwrap();
        // On disk before anything else asks for it, header first.
        let text = std::fs::read_to_string(dir.join("queues.csv")).unwrap();
        assert_eq!(text, "time_ns,node,port,bytes\n0,3,1,0\n10,3,1,2048\n");
        assert_eq!(s.text(Which::Queues).unwrap(), text);
        let mut rows = Vec::new();
        s.for_each_row(Which::Queues, |f| rows.push(f.join("|")))
            .unwrap();
        assert_eq!(rows, ["0|3|1|0", "10|3|1|2048"]);
        assert_eq!(s.dir(), Some(dir.as_path()));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn queue_distribution_matches_the_sorted_samples() {
        let samples = [5u64, 0, 0, 7, 5, 5, 1000, 0, 3, 5];
        let mut d = QueueDist::default();
        for &x in &samples {
            d.add(x);
        }
        let mut sorted = samples.to_vec();
        sorted.sort_unstable();
        for p in [0.01, 0.5, 0.9, 0.99, 1.0] {
            let i = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
            assert_eq!(d.percentile(p), sorted[i], "p {p}");
        }
        let mean = samples.iter().sum::<u64>() as f64 / 10.0;
        assert_eq!(d.mean(), mean);
        let var = samples
            .iter()
            .map(|&x| (x as f64 - mean).powi(2))
            .sum::<f64>()
            / 10.0;
        assert!((d.variance() - var).abs() < 1e-9 * var);
        assert_eq!(QueueDist::default().percentile(0.99), 0);
    }
}
