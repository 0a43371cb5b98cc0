//! The flow generator of `quench send`: turns the `[[flows]]` of a send config into a schedule
//! of flow starts.
//!
//! Two kinds of flow groups:
//! - **long flows**: `count` flows of unbounded size starting at `start`, each sending at most at
//!   `rate` (the RP's line rate for that flow);
//! - **a Poisson stream**: `count` flows whose sizes are fixed (`size`) or drawn from a CDF file in
//!   the ns-3 HPCC `traffic_gen` format (`size_cdf`, lines of `size_bytes cumulative_percent`,
//!   linear interpolation between points), arriving with exponential inter-arrival times whose
//!   mean makes the offered load `load` x `link_rate` (as HPCC's `traffic_gen.py` computes it:
//!   mean gap = mean size x 8 / (load x link rate)).
//!
//! Randomness comes from one seeded generator, so a config and a seed give the same schedule.
//! `configs/cdf/websearch.txt` holds the web-search flow-size distribution of Alizadeh et al.,
//! "Data Center TCP" (SIGCOMM 2010, Fig. 4), written from its published points.
use std::path::Path;

use rand_core::RngCore;
use serde::Deserialize;
use units::keys::{key, Key, KeyDefault, Range, Type};
use units::{Duration, FlowId, Rate};

/// Errors reading a CDF file.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum CdfError {
    #[error("line {line}: expected `size_bytes cumulative_percent`")]
    Syntax { line: usize },
    #[error("line {line}: sizes and percentiles must not decrease")]
    NotMonotonic { line: usize },
    #[error("the last point must be at 100 percent (is {0})")]
    NotComplete(f64),
    #[error("line {line}: the first point must be at 0 percent")]
    FirstNotAtZero { line: usize },
    #[error("a CDF needs at least one point")]
    Empty,
}

/// A flow-size distribution in the ns-3 HPCC `traffic_gen` format: lines of
/// `size_bytes cumulative_percent`, linear interpolation between points. The one parser of
/// `quench send`'s `size_cdf` and `quench sim`'s `[[poisson]]` `cdf`.
///
/// As HPCC's `custom_rand.py` (`testCdf`) requires, the first point is at 0 % and the last at
/// 100 %, so every size is interpolated between two given points and the mean is
/// sum((x_i + x_{i-1}) / 2 * (p_i - p_{i-1})) as its `getAvg` computes it. Unlike `testCdf`,
/// repeated sizes and repeated percents are accepted: `1000 0` / `1000 100` is a fixed size
/// and a flat step is a gap in the sizes. `#` starts a comment.
#[derive(Clone, Debug, PartialEq)]
pub struct Cdf {
    /// (size in octets, cumulative fraction 0..=1), non-decreasing in both.
    points: Vec<(f64, f64)>,
}

impl Cdf {
    pub fn parse(text: &str) -> Result<Cdf, CdfError> {
        let mut points: Vec<(f64, f64)> = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let mut it = line.split_whitespace();
            let (Some(a), Some(b), None) = (it.next(), it.next(), it.next()) else {
                return Err(CdfError::Syntax { line: i + 1 });
            };
            let (Ok(size), Ok(pct)) = (a.parse::<f64>(), b.parse::<f64>()) else {
                return Err(CdfError::Syntax { line: i + 1 });
            };
            if !size.is_finite() || !pct.is_finite() || size < 0.0 || !(0.0..=100.0).contains(&pct)
            {
                return Err(CdfError::Syntax { line: i + 1 });
            }
            match points.last() {
                Some(&(s0, p0)) if size < s0 || pct / 100.0 < p0 => {
                    return Err(CdfError::NotMonotonic { line: i + 1 });
                }
                None if pct != 0.0 => return Err(CdfError::FirstNotAtZero { line: i + 1 }),
                _ => {}
            }
            points.push((size, pct / 100.0));
        }
        match points.last() {
            None => Err(CdfError::Empty),
            Some(&(_, p)) if (p - 1.0).abs() > 1e-9 => Err(CdfError::NotComplete(p * 100.0)),
            Some(_) => Ok(Cdf { points }),
        }
    }

    /// A size drawn from the distribution, in whole octets, at least 1.
    pub fn sample(&self, rng: &mut impl RngCore) -> u64 {
        self.quantile(unit(rng)).round().max(1.0) as u64
    }

    /// The size at cumulative fraction `u` in [0, 1], interpolating linearly.
    pub fn quantile(&self, u: f64) -> f64 {
        let u = u.clamp(0.0, 1.0);
        let mut prev = (0.0, 0.0);
        for &(s, p) in &self.points {
            if u <= p {
                if p <= prev.1 {
                    return s;
                }
                return prev.0 + (s - prev.0) * (u - prev.1) / (p - prev.1);
            }
            prev = (s, p);
        }
        prev.0
    }

    /// The distribution's mean size (exact for the piecewise-linear CDF).
    pub fn mean(&self) -> f64 {
        let mut prev = (0.0, 0.0);
        let mut m = 0.0;
        for &(s, p) in &self.points {
            m += (p - prev.1) * (s + prev.0) / 2.0;
            prev = (s, p);
        }
        m
    }
}

/// A uniform draw in [0, 1) (`units::unit_interval`).
pub fn unit(rng: &mut impl RngCore) -> f64 {
    units::unit_interval(rng.next_u64())
}

/// An exponential draw with mean `mean`.
pub fn exponential(rng: &mut impl RngCore, mean: f64) -> f64 {
    // 1 - U is in (0, 1], so the logarithm is finite.
    -(1.0 - unit(rng)).ln() * mean
}

/// The keys of a `[[flows]]` table ([`FlowGroup`]), as the configuration reference lists them;
/// the validation checks the ranges given here.
pub const KEYS: &[Key] = &[
    Key {
        name: "count",
        ty: Type::Integer,
        unit: "",
        default: KeyDefault::Value("1"),
        range: Range::Any,
        doc: "Flows in the group.",
    },
    Key {
        name: "destination",
        ty: Type::String,
        unit: "",
        default: KeyDefault::Required,
        range: Range::Text("a MAC address"),
        doc: "The frames' destination MAC (`02:00:00:00:00:01`).",
    },
    Key {
        name: "priority",
        ty: Type::Integer,
        unit: "",
        default: KeyDefault::Value("0"),
        range: Range::Int(0, 7),
        doc: "The frames' 802.1p priority.",
    },
    Key {
        name: "rate",
        ty: Type::Rate,
        unit: "",
        default: KeyDefault::Required,
        range: Range::Text("> 0"),
        doc: "Each flow's highest rate (its reaction point's line rate); `--rate` overrides it.",
    },
    Key {
        name: "size",
        ty: Type::Integer,
        unit: "octets",
        default: KeyDefault::None,
        range: Range::Text("> 0; not with size_cdf"),
        doc: "Each flow's payload; with neither size nor size_cdf, flows last the whole run.",
    },
    Key {
        name: "size_cdf",
        ty: Type::String,
        unit: "",
        default: KeyDefault::None,
        range: Range::Text("a bundled name or a file"),
        doc: "Flow sizes drawn from a CDF in ns-3 HPCC's format (`websearch`), relative to this \
              file.",
    },
    Key {
        name: "load",
        ty: Type::Float,
        unit: "",
        default: KeyDefault::None,
        range: Range::Text("(0, 1], with a size"),
        doc: "A Poisson stream: the offered load as a share of link_rate.",
    },
    Key {
        name: "link_rate",
        ty: Type::Rate,
        unit: "",
        default: KeyDefault::Text("the group's `rate`"),
        range: Range::Text("> 0"),
        doc: "The rate the load refers to.",
    },
    Key {
        name: "start_ms",
        ty: Type::Integer,
        unit: "ms",
        default: KeyDefault::Value("0"),
        range: Range::Any,
        doc: "When the group's first flow starts, after the run starts.",
    },
];

const PRIORITY: &Key = key(KEYS, "priority");

fn default_count() -> u32 {
    1
}

/// One `[[flows]]` entry of a send config.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FlowGroup {
    /// Number of flows in the group.
    #[serde(default = "default_count")]
    pub count: u32,
    /// Destination MAC address, `02:00:00:00:00:01`.
    pub destination: String,
    /// 802.1p priority of the frames, 0..=7.
    #[serde(default)]
    pub priority: u8,
    /// Highest rate of each flow (the RP's line rate), e.g. `1gbit`.
    pub rate: String,
    /// Fixed flow size in octets of payload; with `size_cdf` absent and this absent, flows are
    /// long (unbounded).
    pub size: Option<u64>,
    /// Flow sizes drawn from a CDF in the ns-3 HPCC format: a bundled name (`websearch`) or a
    /// file, relative to the config file's directory.
    pub size_cdf: Option<String>,
    /// Offered load of a Poisson stream as a fraction of `link_rate` (needs a size).
    pub load: Option<f64>,
    /// Link rate the load refers to (defaults to `rate`).
    pub link_rate: Option<String>,
    /// Start of the group (of its first flow), in milliseconds after the run starts.
    #[serde(default)]
    pub start_ms: u64,
}

/// Errors validating a flow group.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum FlowConfigError {
    #[error("flows[{group}].{key}: {why}")]
    Bad {
        group: usize,
        key: &'static str,
        why: String,
    },
    #[error("flows[{group}].size_cdf: {path}: {source}")]
    Cdf {
        group: usize,
        path: String,
        source: CdfError,
    },
    #[error("flows[{group}].size_cdf: {why}")]
    CdfFile { group: usize, why: String },
}

/// A scheduled flow.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowStart {
    pub flow: FlowId,
    /// Offset from the start of the run.
    pub start: Duration,
    pub destination: quench_wire::MacAddr,
    pub priority: u8,
    pub max_rate: Rate,
    /// Payload octets to send; `None` = until the run ends.
    pub bytes: Option<u64>,
}

enum Sizes {
    Long,
    Fixed(u64),
    Drawn(Cdf),
}

/// Validates `groups` and draws the schedule: flows sorted by start time, ids from `first_id`
/// upwards. `base` is the directory relative paths are resolved against.
pub fn schedule(
    groups: &[FlowGroup],
    base: &Path,
    first_id: u32,
    rng: &mut impl RngCore,
) -> Result<Vec<FlowStart>, FlowConfigError> {
    let mut out = Vec::new();
    let mut id = first_id;
    for (g, fg) in groups.iter().enumerate() {
        let bad = |key: &'static str, why: &str| FlowConfigError::Bad {
            group: g,
            key,
            why: why.to_string(),
        };
        let destination = quench_port::parse_mac(&fg.destination).ok_or_else(|| {
            bad(
                "destination",
                "expected a MAC address like 02:00:00:00:00:01",
            )
        })?;
        PRIORITY
            .within(fg.priority.into())
            .map_err(|e| bad("priority", &e.problem))?;
        let max_rate = Rate::parse(&fg.rate).map_err(|e| bad("rate", &e.to_string()))?;
        if max_rate == Rate::ZERO {
            return Err(bad("rate", "must be above zero"));
        }
        let sizes = match (&fg.size, &fg.size_cdf) {
            (Some(_), Some(_)) => return Err(bad("size", "give size or size_cdf, not both")),
            (Some(0), None) => return Err(bad("size", "must be above zero")),
            (Some(s), None) => Sizes::Fixed(*s),
            (None, Some(p)) => {
                let src =
                    quench_config::bundled::open(p, quench_config::bundled::Kind::Cdf, Some(base))
                        .map_err(|e| FlowConfigError::CdfFile {
                            group: g,
                            why: e.to_string(),
                        })?;
                Sizes::Drawn(
                    Cdf::parse(&src.text).map_err(|source| FlowConfigError::Cdf {
                        group: g,
                        path: src.origin,
                        source,
                    })?,
                )
            }
            (None, None) => Sizes::Long,
        };
        let start = Duration::from_millis(fg.start_ms);
        match (fg.load, &sizes) {
            (None, _) => {
                for _ in 0..fg.count {
                    let bytes = match &sizes {
                        Sizes::Long => None,
                        Sizes::Fixed(s) => Some(*s),
                        Sizes::Drawn(c) => Some(c.sample(rng)),
                    };
                    out.push(FlowStart {
                        flow: FlowId(id),
                        start,
                        destination,
                        priority: fg.priority,
                        max_rate,
                        bytes,
                    });
                    id += 1;
                }
            }
            (Some(_), Sizes::Long) => {
                return Err(bad("load", "a Poisson stream needs size or size_cdf"));
            }
            (Some(load), _) => {
                if !(load > 0.0 && load <= 1.0) {
                    return Err(bad("load", "must be in (0, 1]"));
                }
                let link = match &fg.link_rate {
                    Some(l) => Rate::parse(l).map_err(|e| bad("link_rate", &e.to_string()))?,
                    None => max_rate,
                };
                let mean_size = match &sizes {
                    Sizes::Fixed(s) => *s as f64,
                    Sizes::Drawn(c) => c.mean(),
                    Sizes::Long => unreachable!("rejected above"),
                };
                // traffic_gen.py: avg_inter_arrival = 1 / (bandwidth * load / 8 / avg)
                let mean_gap_s = mean_size * 8.0 / (load * link.as_bps_f64());
                let mut t = start.as_nanos() as f64 * 1e-9;
                for _ in 0..fg.count {
                    t += exponential(rng, mean_gap_s);
                    let bytes = match &sizes {
                        Sizes::Fixed(s) => *s,
                        Sizes::Drawn(c) => c.sample(rng),
                        Sizes::Long => unreachable!("rejected above"),
                    };
                    out.push(FlowStart {
                        flow: FlowId(id),
                        start: Duration::from_nanos((t * 1e9) as u64),
                        destination,
                        priority: fg.priority,
                        max_rate,
                        bytes: Some(bytes),
                    });
                    id += 1;
                }
            }
        }
    }
    out.sort_by_key(|f| (f.start, f.flow));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_xoshiro::rand_core::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    fn websearch() -> &'static str {
        quench_config::bundled::get("websearch", quench_config::bundled::Kind::Cdf)
            .expect("bundled")
            .text
    }

    fn group(toml_text: &str) -> FlowGroup {
        toml::from_str(toml_text).unwrap()
    }

    #[test]
    fn websearch_cdf_parses_and_interpolates() {
        let c = Cdf::parse(websearch()).unwrap();
        assert_eq!(c.quantile(0.0), 0.0);
        assert_eq!(c.quantile(0.15), 10_000.0);
        // Halfway between (10000, 15 %) and (20000, 20 %).
        assert!((c.quantile(0.175) - 15_000.0).abs() < 1e-6);
        assert_eq!(c.quantile(1.0), 30_000_000.0);
        // Mean of the piecewise-linear web-search CDF: about 1.6 MB.
        let m = c.mean();
        assert!((1.5e6..1.8e6).contains(&m), "{m}");
    }

    #[test]
    fn cdf_errors_name_the_line() {
        assert_eq!(Cdf::parse("0 0\n10 x\n"), Err(CdfError::Syntax { line: 2 }));
        assert_eq!(
            Cdf::parse("0 0\n10 50\n5 100\n"),
            Err(CdfError::NotMonotonic { line: 3 })
        );
        assert_eq!(Cdf::parse("0 0\n10 50\n"), Err(CdfError::NotComplete(50.0)));
        assert_eq!(Cdf::parse("\n"), Err(CdfError::Empty));
        assert_eq!(
            Cdf::parse("# sizes\n100 10\n200 100\n"),
            Err(CdfError::FirstNotAtZero { line: 2 })
        );
        assert!(Cdf::parse("100 0\n200 100 7\n").is_err());
        assert!(Cdf::parse("-1 0\n200 100\n").is_err());
        assert!(Cdf::parse("0 0\n200 101\n").is_err());
        assert!(Cdf::parse("0 0\nNaN 100\n").is_err());
    }

    #[test]
    fn cdf_interpolates_from_its_first_point() {
        let c = Cdf::parse("100 0\n1000 50\n2000 100\n").unwrap();
        assert_eq!(c.quantile(0.0), 100.0);
        assert_eq!(c.quantile(0.25), 550.0);
        assert_eq!(c.quantile(0.75), 1500.0);
        assert_eq!(c.quantile(1.0), 2000.0);
        // getAvg of HPCC's custom_rand.py: 550 x 0.5 + 1500 x 0.5.
        assert!((c.mean() - 1025.0).abs() < 1e-9);
        // A fixed size: every draw is that size.
        let fixed = Cdf::parse("1000 0\n1000 100\n").unwrap();
        assert_eq!(fixed.mean(), 1000.0);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
        assert!((0..100).all(|_| fixed.sample(&mut rng) == 1000));
    }

    #[test]
    fn long_flows() {
        let g = group(
            r#"count = 2
               destination = "02:00:00:00:03:01"
               priority = 3
               rate = "1gbit""#,
        );
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        let s = schedule(&[g], Path::new("."), 10, &mut rng).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].flow, FlowId(10));
        assert_eq!(s[1].flow, FlowId(11));
        assert_eq!(s[0].bytes, None);
        assert_eq!(s[0].priority, 3);
        assert_eq!(s[0].max_rate, Rate::from_gbps(1));
        assert_eq!(s[0].destination, quench_wire::MacAddr(2, 0, 0, 0, 3, 1));
    }

    #[test]
    fn poisson_stream_has_the_offered_load() {
        // The bundled distribution, whatever the base directory.
        let dir = Path::new("/nonexistent");
        let g = group(
            r#"count = 4000
               destination = "02:00:00:00:03:01"
               rate = "10gbit"
               size_cdf = "websearch"
               load = 0.5"#,
        );
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        let s = schedule(std::slice::from_ref(&g), dir, 0, &mut rng).unwrap();
        assert_eq!(s.len(), 4000);
        assert!(s.windows(2).all(|w| w[0].start <= w[1].start));
        let bytes: u64 = s.iter().map(|f| f.bytes.unwrap()).sum();
        let span = s.last().unwrap().start.as_secs_f64();
        let load = bytes as f64 * 8.0 / span / 10e9;
        // Heavy-tailed sizes: 4000 draws land within 15 % of the asked load.
        assert!((0.425..0.575).contains(&load), "{load}");
        // Same seed, same schedule.
        let mut rng2 = Xoshiro256PlusPlus::seed_from_u64(7);
        assert_eq!(schedule(&[g], dir, 0, &mut rng2).unwrap(), s);
    }

    #[test]
    fn config_errors_name_the_key() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        let g = group(
            r#"destination = "02:00:00:00:03"
               rate = "1gbit""#,
        );
        let e = schedule(&[g], Path::new("."), 0, &mut rng).unwrap_err();
        assert!(e.to_string().starts_with("flows[0].destination"), "{e}");
        let g = group(
            r#"destination = "02:00:00:00:03:01"
               rate = "1gbit"
               load = 0.5"#,
        );
        let e = schedule(&[g], Path::new("."), 0, &mut rng).unwrap_err();
        assert!(e.to_string().starts_with("flows[0].load"), "{e}");
        assert!(
            toml::from_str::<FlowGroup>("destination = \"x\"\nrate = \"1gbit\"\nspeed = 1")
                .is_err()
        );
    }

    #[test]
    fn exponential_mean() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        let n = 100_000;
        let m: f64 = (0..n).map(|_| exponential(&mut rng, 2.0)).sum::<f64>() / n as f64;
        assert!((m - 2.0).abs() < 0.05, "{m}");
    }
}
