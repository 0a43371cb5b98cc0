//! The percentile distributions `quench recv` writes (`.hgrm`, HdrHistogram's
//! `outputPercentileDistribution` format) read back: the values at p50 ... p99.99, the max and
//! the count, for `quench report`.
use std::path::Path;

use crate::ReportError;

/// The percentiles of a `.hgrm` file: value (ns) at p50, p90, p99, p99.9, p99.99, the max,
/// and the count.
#[derive(Debug)]
pub struct Percentiles {
    pub count: u64,
    pub at: Vec<(&'static str, u64)>,
    pub max_ns: Option<u64>,
}

impl Percentiles {
    /// `N values; p50 X us ...` on one line.
    pub fn line(&self) -> String {
        let mut s = format!("{} values;", self.count);
        for (name, ns) in &self.at {
            s += &format!(" {name} {:.1} us", *ns as f64 / 1e3);
        }
        if let Some(m) = self.max_ns {
            s += &format!(", max {:.1} us", m as f64 / 1e3);
        }
        s.push('\n');
        s
    }

    /// (name, value) pairs: `count`, `p50_ns`, ..., `max_ns`.
    pub fn fields(&self) -> Vec<(String, u64)> {
        let mut f = vec![("count".to_string(), self.count)];
        for (name, ns) in &self.at {
            f.push((format!("{}_ns", name.replace('.', "")), *ns));
        }
        f.extend(self.max_ns.map(|m| ("max_ns".to_string(), m)));
        f
    }

    /// A header and one row.
    pub fn csv(&self) -> String {
        let (names, values): (Vec<String>, Vec<String>) = self
            .fields()
            .into_iter()
            .map(|(n, v)| (n, v.to_string()))
            .unzip();
        format!("{}\n{}\n", names.join(","), values.join(","))
    }

    /// One JSON object of [`Percentiles::fields`].
    pub fn json(&self) -> serde_json::Value {
        serde_json::Value::Object(
            self.fields()
                .into_iter()
                .map(|(n, v)| (n, v.into()))
                .collect(),
        )
    }

    /// Reads a `.hgrm` file (values in milliseconds, HdrHistogram's `outputPercentileDistribution`
    /// format).
    pub fn read(path: &Path, text: &[u8]) -> Result<Percentiles, ReportError> {
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
        let (Some(count), false) = (total, rows.is_empty()) else {
            return Err(ReportError::Hgrm {
                path: path.display().to_string(),
            });
        };
        let ns = |ms: f64| (ms * 1e6).round() as u64;
        let mut at = Vec::new();
        for (name, q) in [
            ("p50", 0.5),
            ("p90", 0.9),
            ("p99", 0.99),
            ("p99.9", 0.999),
            ("p99.99", 0.9999),
        ] {
            // The first row at or past the percentile: the value below which that share lies.
            if let Some((v, _)) = rows.iter().find(|(_, rq)| *rq >= q) {
                at.push((name, ns(*v)));
            }
        }
        Ok(Percentiles {
            count,
            at,
            max_ns: rows.last().map(|(v, _)| ns(*v)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_distribution_reads_back_and_junk_is_refused_naming_the_file() {
        let text = "       Value     Percentile TotalCount 1/(1-Percentile)\n\n\
                    0.010 0.500000000000 5 2.00\n0.020 0.990000000000 9 100.00\n\
                    0.030 1.000000000000 10\n#[Mean = 0.015, StdDeviation = 0.005]\n\
                    #[Max = 0.030, Total count = 10]\n";
        let p = Percentiles::read(Path::new("a.hgrm"), text.as_bytes()).unwrap();
        assert_eq!(p.count, 10);
        assert_eq!(p.at[0], ("p50", 10_000));
        assert_eq!(p.at[2], ("p99", 20_000));
        assert_eq!(p.max_ns, Some(30_000));
        assert_eq!(
            p.csv().lines().next().unwrap().split(',').next(),
            Some("count")
        );
        let e = Percentiles::read(Path::new("b.hgrm"), b"hello").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("b.hgrm: not a percentile distribution"),
            "{e}"
        );
    }
}
