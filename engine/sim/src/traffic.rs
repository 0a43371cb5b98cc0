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
use super::topology::{ignored, tokens as lines, Problems, Warnings};
pub use quench_node::flowgen::Cdf;

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

/// Seconds (decimal) to an instant, as ns-3 turns the flow file's double into a `Time`
/// (`Seconds(start_time)`: the double times 10^9, truncated to the nanosecond), so a flow starts
/// at the same nanosecond in both simulators: `2.004081999` (the double just below it) starts at
/// 2004081998 ns.
fn seconds(line: usize, s: &str) -> Result<Instant, TrafficError> {
    let v: f64 = field(line, "start_seconds", s)?;
    if !(0.0..=1e9).contains(&v) {
        return Err(TrafficError::Syntax {
            line,
            what: format!("start_seconds {v} out of range"),
        });
    }
    Ok(Instant::from_nanos(floor_nanos(v)))
}

/// `floor(v x 10^9)` of the double `v` (0 <= v <= 1e9) computed exactly: v = m x 2^e with a
/// 53-bit m, so m x 10^9 fits 128 bits and the shift truncates. (A float multiply would round
/// 2004081998.99999993... up to 2004081999 first.)
fn floor_nanos(v: f64) -> u64 {
    let bits = v.to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i32;
    let frac = bits & ((1u64 << 52) - 1);
    let (m, e) = if exp == 0 {
        (frac, -1074)
    } else {
        (frac | 1u64 << 52, exp - 1075)
    };
    let p = u128::from(m) * 1_000_000_000;
    if e >= 0 {
        (p << e) as u64
    } else if e <= -128 {
        0
    } else {
        (p >> -e) as u64
    }
}

/// Parses an ns-3 flow file (what it set aside is dropped: see [`read_flows`]).
pub fn parse_flows(text: &str) -> Result<Vec<FlowSpec>, Problems<TrafficError>> {
    read_flows(text).map(|(f, _)| f)
}

/// Parses an ns-3 flow file as ns-3's scratch program reads it: the count line says how many
/// flows it reads, and lines after them (HPCC's own `mix/flow.txt` counts 2 of its 256 flows,
/// then explains the format) are ignored with a warning. Every problem of the file is
/// reported.
pub fn read_flows(text: &str) -> Result<(Vec<FlowSpec>, Warnings), Problems<TrafficError>> {
    let mut it = lines(text);
    let Some((l, head)) = it.next() else {
        return Ok((Vec::new(), Vec::new()));
    };
    let expected: usize = field(l, "flow count", head[0]).map_err(|e| Problems(vec![e]))?;
    let mut flows = Vec::with_capacity(expected.min(1 << 20));
    let mut errs = Vec::new();
    let mut read = 0usize;
    while read < expected {
        let Some((l, t)) = it.next() else { break };
        read += 1;
        match flow(l, &t) {
            Ok(f) => flows.push(f),
            Err(e) => errs.extend(e),
        }
    }
    if read < expected {
        errs.push(TrafficError::Count {
            expected,
            found: read,
        });
    }
    let warnings = ignored(it, expected, "flows", "its count line says")
        .into_iter()
        .collect();
    if !errs.is_empty() {
        return Err(Problems(errs));
    }
    Ok((flows, warnings))
}

/// One flow line, `src dst pg dport bytes start_seconds`: the flow, or every problem of it.
fn flow(l: usize, t: &[&str]) -> Result<FlowSpec, Vec<TrafficError>> {
    if t.len() < 6 {
        return Err(vec![TrafficError::Syntax {
            line: l,
            what: "expected `src dst pg dport bytes start_seconds`".into(),
        }]);
    }
    let pg = field::<u8>(l, "pg", t[2]).and_then(|pg| {
        if (pg as usize) < units::PRIORITIES {
            Ok(pg)
        } else {
            Err(TrafficError::Syntax {
                line: l,
                what: format!("pg {pg} is not a priority 0..=7"),
            })
        }
    });
    match (
        field(l, "src", t[0]),
        field(l, "dst", t[1]),
        pg,
        field(l, "dport", t[3]),
        field(l, "bytes", t[4]),
        seconds(l, t[5]),
    ) {
        (Ok(src), Ok(dst), Ok(pg), Ok(dport), Ok(bytes), Ok(start)) => Ok(FlowSpec {
            src,
            dst,
            pg,
            dport,
            bytes,
            start,
        }),
        (src, dst, pg, dport, bytes, start) => Err([
            src.err(),
            dst.err(),
            pg.err(),
            dport.err(),
            bytes.err(),
            start.err(),
        ]
        .into_iter()
        .flatten()
        .collect()),
    }
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
        // ns-3's truncation of the double's product (traffic_gen.py's 2004081999 ns, printed
        // as 2.004081999, starts at 2004081998 ns there).
        let g = parse_flows("1\n0 1 3 100 10 2.004081999\n").unwrap();
        assert_eq!(g[0].start, Instant::from_nanos(2_004_081_998));
        // 2.000027646 is 2000027645.99999994 ns as a double: a float product would round it up.
        assert_eq!(floor_nanos(2.000027646), 2_000_027_645);
        assert_eq!(floor_nanos(2.0), 2_000_000_000);
        assert_eq!(floor_nanos(0.0), 0);
        assert_eq!(floor_nanos(1e9), 1_000_000_000_000_000_000);
        assert_eq!(parse_flows(&write_flows(&f)).unwrap(), f);
        assert!(matches!(
            parse_flows("3\n2 1 3 100 2000 2\n").unwrap_err().0[..],
            [TrafficError::Count { .. }]
        ));
        assert!(matches!(
            parse_flows("1\n2 1 9 100 2000 2\n").unwrap_err().0[..],
            [TrafficError::Syntax { line: 2, .. }]
        ));
    }

    #[test]
    fn the_count_line_says_how_many_flows_are_read() {
        // As HPCC's mix/flow.txt: a count of 2, more flows, then a note on the format.
        let text = "2\n2 1 3 100 200000000 2\n3 1 3 100 200000000 2\n4 1 3 100 5000 2\n\
                    \nFirst line: # of flows\nsrc0 dst0 3 dst_port0 size0 start_time0\n";
        let (f, warnings) = read_flows(text).unwrap();
        assert_eq!(f.len(), 2);
        assert_eq!(f[1].src, 3);
        assert_eq!(
            warnings,
            [
                "3 lines from line 4 on ignored: ns-3 reads the 2 flows its count line says and \
              stops there"
            ]
        );
        // Every problem of the lines it reads, in one pass.
        let e = parse_flows("3\n0 1 3 100 x 2\n0 1 9 100 10 -1\n0 1 3 100 10 2\n").unwrap_err();
        let m = e.to_string();
        assert!(m.starts_with("3 problems:"), "{m}");
        for want in ["line 2: bytes", "line 3: pg 9", "line 3: start_seconds -1"] {
            assert!(m.contains(want), "{want}: {m}");
        }
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
