//! Traffic: flow lists in the HPCC ns-3 format and Poisson arrivals at a load, sizes drawn from a
//! workload CDF (parsed by `send::flowgen::Cdf`, the one parser of the format).
//!
//! Formats (../shared/reference/dcqcn.md): "flows: a count line, then
//! `src dst pg dport bytes start_seconds`" and "workload CDFs: `size_bytes cumulative_percent`,
//! linear interpolation".

use std::fmt::Write as _;

use thiserror::Error;
use units::{Duration, Instant, Rate};

use super::rng::{self, SimRng};
use super::topology::tokens as lines;
pub use crate::send::flowgen::Cdf;

/// One flow to simulate.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowSpec {
    pub src: u32,
    pub dst: u32,
    /// Priority group (802.1p priority / traffic class), 0..=7.
    pub pg: u8,
    pub dport: u16,
    pub bytes: u64,
    pub start: Instant,
}

#[derive(Debug, Error, PartialEq)]
pub enum TrafficError {
    #[error("line {line}: {what}")]
    Syntax { line: usize, what: String },
    #[error("the count line promises {expected} flows, the file has {found}")]
    Count { expected: usize, found: usize },
}

fn field<T: std::str::FromStr>(line: usize, name: &str, s: &str) -> Result<T, TrafficError> {
    s.parse().map_err(|_| TrafficError::Syntax {
        line,
        what: format!("{name}: `{s}` is not valid"),
    })
}

/// Seconds (decimal) to an instant, rounded to the nanosecond.
fn seconds(line: usize, s: &str) -> Result<Instant, TrafficError> {
    let v: f64 = field(line, "start_seconds", s)?;
    if !(0.0..=1e9).contains(&v) {
        return Err(TrafficError::Syntax {
            line,
            what: format!("start_seconds {v} out of range"),
        });
    }
    Ok(Instant::from_nanos((v * 1e9).round() as u64))
}

/// Parses an ns-3 flow file.
pub fn parse_flows(text: &str) -> Result<Vec<FlowSpec>, TrafficError> {
    let mut it = lines(text);
    let Some((l, head)) = it.next() else {
        return Ok(Vec::new());
    };
    let expected: usize = field(l, "flow count", head[0])?;
    let mut flows = Vec::with_capacity(expected);
    for (l, t) in it {
        if t.len() < 6 {
            return Err(TrafficError::Syntax {
                line: l,
                what: "expected `src dst pg dport bytes start_seconds`".into(),
            });
        }
        let pg: u8 = field(l, "pg", t[2])?;
        if pg as usize >= units::PRIORITIES {
            return Err(TrafficError::Syntax {
                line: l,
                what: format!("pg {pg} is not a priority 0..=7"),
            });
        }
        flows.push(FlowSpec {
            src: field(l, "src", t[0])?,
            dst: field(l, "dst", t[1])?,
            pg,
            dport: field(l, "dport", t[3])?,
            bytes: field(l, "bytes", t[4])?,
            start: seconds(l, t[5])?,
        });
    }
    if flows.len() != expected {
        return Err(TrafficError::Count {
            expected,
            found: flows.len(),
        });
    }
    Ok(flows)
}

/// Writes flows in the ns-3 format (start times with nanosecond precision).
pub fn write_flows(flows: &[FlowSpec]) -> String {
    let mut s = format!("{}\n", flows.len());
    for f in flows {
        let ns = f.start.as_nanos();
        let _ = writeln!(
            s,
            "{} {} {} {} {} {}.{:09}",
            f.src,
            f.dst,
            f.pg,
            f.dport,
            f.bytes,
            ns / 1_000_000_000,
            ns % 1_000_000_000
        );
    }
    s
}

/// Poisson traffic at a given load: every host starts flows with exponential inter-arrival times
/// so that its offered load is `load` x its link rate, sizes from `cdf`, destinations uniform
/// over the other hosts.
pub struct PoissonSpec<'a> {
    pub cdf: &'a Cdf,
    pub load: f64,
    pub start: Instant,
    pub duration: Duration,
    pub pg: u8,
    pub dport: u16,
}

/// Generates the flows for `hosts` with their access link rates.
pub fn poisson(spec: &PoissonSpec, hosts: &[(u32, Rate)], rng: &mut SimRng) -> Vec<FlowSpec> {
    let mut flows = Vec::new();
    if hosts.len() < 2 || spec.load <= 0.0 {
        return flows;
    }
    let mean_bits = spec.cdf.mean() * 8.0;
    let end = spec.start + spec.duration;
    for (i, &(h, rate)) in hosts.iter().enumerate() {
        let lambda = spec.load * rate.as_bps_f64() / mean_bits; // flows per second
        if lambda <= 0.0 || !lambda.is_finite() {
            continue;
        }
        let mut t = spec.start.as_nanos() as f64;
        loop {
            let u = rng::unit(rng);
            t += -(1.0 - u).ln() / lambda * 1e9;
            if t >= end.as_nanos() as f64 {
                break;
            }
            let mut j = (rng::unit(rng) * (hosts.len() - 1) as f64) as usize;
            if j >= i {
                j += 1;
            }
            flows.push(FlowSpec {
                src: h,
                dst: hosts[j.min(hosts.len() - 1)].0,
                pg: spec.pg,
                dport: spec.dport,
                bytes: spec.cdf.sample(rng),
                start: Instant::from_nanos(t as u64),
            });
        }
    }
    flows.sort_by_key(|f| (f.start, f.src, f.dst));
    flows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_ns3_flow_example() {
        let f = parse_flows("2\n2 1 3 100 200000000 2\n3 1 3 100 5000 2.0000015\n").unwrap();
        assert_eq!(f.len(), 2);
        assert_eq!(f[0].src, 2);
        assert_eq!(f[0].pg, 3);
        assert_eq!(f[0].bytes, 200_000_000);
        assert_eq!(f[0].start, Instant::from_nanos(2_000_000_000));
        assert_eq!(f[1].start, Instant::from_nanos(2_000_001_500));
        assert_eq!(parse_flows(&write_flows(&f)).unwrap(), f);
        assert!(matches!(
            parse_flows("3\n2 1 3 100 2000 2\n"),
            Err(TrafficError::Count { .. })
        ));
        assert!(matches!(
            parse_flows("1\n2 1 9 100 2000 2\n"),
            Err(TrafficError::Syntax { line: 2, .. })
        ));
    }

    #[test]
    fn poisson_offers_the_requested_load() {
        let c = Cdf::parse("1000 0\n1000 100\n").unwrap();
        let spec = PoissonSpec {
            cdf: &c,
            load: 0.5,
            start: Instant::ZERO,
            duration: Duration::from_millis(10),
            pg: 3,
            dport: 100,
        };
        let hosts = [(0, Rate::from_gbps(10)), (1, Rate::from_gbps(10))];
        let mut r = rng::stream(1, rng::Stream::Traffic, 0);
        let flows = poisson(&spec, &hosts, &mut r);
        // 0.5 x 10 Gb/s x 10 ms / 8000 bits = 6250 flows per host, 12500 in all.
        let n = flows.len() as f64;
        assert!((n - 12_500.0).abs() < 400.0, "{n}");
        assert!(flows.iter().all(|f| f.src != f.dst));
        let mut r2 = rng::stream(1, rng::Stream::Traffic, 0);
        assert_eq!(poisson(&spec, &hosts, &mut r2), flows);
    }
}
