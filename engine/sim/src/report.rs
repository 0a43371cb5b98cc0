//! A run's outputs: `fct.txt` (ns-3 HPCC columns), `fct.csv` (the same with a header and the
//! flow id), `summary.json`, time-series CSVs, SVG plots (rates, queues, and the FCT slowdown
//! by flow size with its table `slowdown.csv`).
//!
//! Every output is a function of the finished [`World`] only (no wall-clock times, no hash-map
//! iteration order), so the same seed and inputs give byte-identical files.

use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};
use units::Instant;

use super::series::Which;
use super::world::{node_ip, World};
use quench_report::plot::{Plot, Series, Thin};

/// Per-flow results.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct FlowSummary {
    pub id: u32,
    pub src: u32,
    pub dst: u32,
    pub sport: u16,
    pub dport: u16,
    pub pg: u8,
    pub size: u64,
    pub start_ns: u64,
    pub done: bool,
    /// Flow completion time (None while unfinished at the end of the run).
    pub fct_ns: Option<u64>,
    pub ideal_fct_ns: u64,
    pub slowdown: Option<f64>,
    /// size x 8 / FCT.
    pub avg_rate_bps: Option<f64>,
    /// In-order goodput within the statistics window.
    pub window_rate_bps: f64,
    pub notifications_sent: u64,
    pub notifications_received: u64,
    pub ce_received: u64,
    pub ue_received: u64,
    pub retransmits: u64,
}

/// Per switch-port results (ports that carried traffic).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PortSummary {
    pub node: u32,
    pub port: u32,
    pub peer: u32,
    pub rate_bps: u64,
    pub tx_bytes: u64,
    pub tx_pkts: u64,
    pub drops: u64,
    pub marks: u64,
    pub cnms: u64,
    pub pauses_sent: u64,
    pub pauses_received: u64,
    pub queue_mean_bytes: f64,
    pub queue_p99_bytes: u64,
    pub queue_max_bytes: u64,
    /// Coefficient of variation (std / mean) of the sampled queue within the statistics window:
    /// the oscillation metric (a steady queue stays well under 1; a queue that swings between
    /// empty and large goes above 1).
    pub queue_cv: f64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Totals {
    pub flows: usize,
    pub flows_done: usize,
    pub drops: u64,
    pub marks: u64,
    pub cnms: u64,
    pub cnps: u64,
    pub pauses: u64,
    pub retransmits: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct FctStats {
    pub mean_ns: f64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    pub mean_slowdown: f64,
    pub p99_slowdown: f64,
}

/// `summary.json`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    pub cc: String,
    pub seed: u64,
    pub end_ns: u64,
    pub stats_from_ns: u64,
    pub events: u64,
    pub totals: Totals,
    pub fct: Option<FctStats>,
    /// Jain's fairness index over the flows' window rates.
    pub jain: Option<f64>,
    pub flows: Vec<FlowSummary>,
    pub ports: Vec<PortSummary>,
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

impl Summary {
    /// The human summary `quench sim` prints and `quench report summary.json` reprints: the
    /// run, the FCTs, and one line per switch port that carried traffic.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let t = &self.totals;
        let _ = writeln!(
            s,
            "{} of {} flows done at {:.6} ms virtual, {} events (cc {}, seed {})",
            t.flows_done,
            t.flows,
            self.end_ns as f64 * 1e-6,
            self.events,
            self.cc,
            self.seed
        );
        if let Some(f) = &self.fct {
            let _ = writeln!(
                s,
                "FCT mean {:.1} us, p50 {:.1} us, p99 {:.1} us, max {:.1} us; slowdown mean \
                 {:.2}, p99 {:.2}",
                f.mean_ns * 1e-3,
                f.p50_ns as f64 * 1e-3,
                f.p99_ns as f64 * 1e-3,
                f.max_ns as f64 * 1e-3,
                f.mean_slowdown,
                f.p99_slowdown
            );
        }
        let _ = writeln!(
            s,
            "drops {}, ECN marks {}, CNMs {}, CNPs {}, PAUSE frames {}, retransmits {}{}",
            t.drops,
            t.marks,
            t.cnms,
            t.cnps,
            t.pauses,
            t.retransmits,
            self.jain
                .map(|j| format!(", Jain {j:.3}"))
                .unwrap_or_default()
        );
        if !self.ports.is_empty() {
            let _ = writeln!(
                s,
                "{:>10} {:>9} {:>12} {:>8} {:>8} {:>24} {:>6}",
                "port", "Gb/s", "tx octets", "drops", "marks", "queue mean/p99/max KB", "CV"
            );
        }
        // The ports with the largest queues (those queues.svg draws), in port order.
        let keys: Vec<(u64, u64)> = self
            .ports
            .iter()
            .map(|p| (p.queue_max_bytes, p.tx_bytes))
            .collect();
        let (shown, rest) = quench_report::top(&keys, quench_report::TOP);
        for p in shown.iter().map(|&i| &self.ports[i]) {
            let _ = writeln!(
                s,
                "{:>10} {:>9.1} {:>12} {:>8} {:>8} {:>24} {:>6.2}",
                format!("{}:{}>{}", p.node, p.port, p.peer),
                p.rate_bps as f64 * 1e-9,
                p.tx_bytes,
                p.drops,
                p.marks,
                format!(
                    "{:.1}/{:.1}/{:.1}",
                    p.queue_mean_bytes / 1e3,
                    p.queue_p99_bytes as f64 / 1e3,
                    p.queue_max_bytes as f64 / 1e3
                ),
                p.queue_cv
            );
        }
        if rest > 0 {
            let _ = writeln!(
                s,
                "{} of {} ports shown, those with the largest queues; {rest} more in summary.json",
                shown.len(),
                self.ports.len()
            );
        }
        s
    }

    pub fn of(w: &World, cc: &str) -> Summary {
        let end = w.now();
        let cfg = w.config();
        let from = cfg.stats_from;
        let mut flows = Vec::with_capacity(w.flows.len());
        for (i, f) in w.flows.iter().enumerate() {
            let fct = f.done.then(|| (f.finish - f.spec.start).as_nanos());
            let win_end = if f.done { f.finish } else { end };
            let win_start = f.spec.start.max(from);
            let window = (win_end - win_start).as_secs_f64();
            flows.push(FlowSummary {
                id: i as u32,
                src: f.spec.src,
                dst: f.spec.dst,
                sport: f.sport,
                dport: f.spec.dport,
                pg: f.spec.pg,
                size: f.spec.bytes,
                start_ns: f.spec.start.as_nanos(),
                done: f.done,
                fct_ns: fct,
                ideal_fct_ns: f.ideal_fct.as_nanos(),
                slowdown: fct.map(|x| x as f64 / f.ideal_fct.as_nanos().max(1) as f64),
                avg_rate_bps: fct.map(|x| f.spec.bytes as f64 * 8e9 / x.max(1) as f64),
                window_rate_bps: if window > 0.0 {
                    f.window_bytes as f64 * 8.0 / window
                } else {
                    0.0
                },
                notifications_sent: f.notifications_sent,
                notifications_received: f.notifications_received,
                ce_received: f.ce_received,
                ue_received: f.ue_received,
                retransmits: f.retransmits,
            });
        }
        let span = (end - from).as_nanos().max(1) as f64;
        let mut ports = Vec::new();
        for p in 0..w.port_count() {
            let st = w.port_stats(p);
            if !w.port_is_switch(p) || (st.tx_pkts == 0 && st.drops == 0) {
                continue;
            }
            let (node, local, peer) = w.port_name(p);
            let dist = w.queue_dist(p);
            let mean = dist.mean();
            let queue_cv = if mean > 0.0 {
                dist.variance().sqrt() / mean
            } else {
                0.0
            };
            ports.push(PortSummary {
                node,
                port: local,
                peer,
                rate_bps: w.port_rate(p).as_bps(),
                tx_bytes: st.tx_bytes,
                tx_pkts: st.tx_pkts,
                drops: st.drops,
                marks: st.marks,
                cnms: st.cnms,
                pauses_sent: st.pauses_sent,
                pauses_received: st.pauses_received,
                queue_mean_bytes: st.q_integral as f64 / span,
                queue_p99_bytes: dist.percentile(0.99),
                queue_max_bytes: st.q_max,
                queue_cv,
            });
        }
        let mut drops = 0;
        for p in 0..w.port_count() {
            drops += w.port_stats(p).drops;
        }
        let totals = Totals {
            flows: flows.len(),
            flows_done: flows.iter().filter(|f| f.done).count(),
            drops,
            marks: ports.iter().map(|p| p.marks).sum(),
            cnms: ports.iter().map(|p| p.cnms).sum(),
            cnps: w.flows.iter().map(|f| f.notifications_sent).sum(),
            pauses: ports.iter().map(|p| p.pauses_sent).sum(),
            retransmits: w.flows.iter().map(|f| f.retransmits).sum(),
        };
        let mut fcts: Vec<u64> = flows.iter().filter_map(|f| f.fct_ns).collect();
        fcts.sort_unstable();
        let mut slow: Vec<f64> = flows.iter().filter_map(|f| f.slowdown).collect();
        slow.sort_by(f64::total_cmp);
        let fct = (!fcts.is_empty()).then(|| FctStats {
            mean_ns: fcts.iter().sum::<u64>() as f64 / fcts.len() as f64,
            p50_ns: percentile(&fcts, 0.5),
            p99_ns: percentile(&fcts, 0.99),
            max_ns: fcts[fcts.len() - 1],
            mean_slowdown: slow.iter().sum::<f64>() / slow.len() as f64,
            p99_slowdown: slow
                [((0.99 * slow.len() as f64).ceil() as usize).clamp(1, slow.len()) - 1],
        });
        let rates: Vec<f64> = flows
            .iter()
            .filter(|f| f.window_rate_bps > 0.0)
            .map(|f| f.window_rate_bps)
            .collect();
        Summary {
            cc: cc.to_string(),
            seed: cfg.seed,
            end_ns: end.as_nanos(),
            stats_from_ns: from.as_nanos(),
            events: w.events_processed(),
            totals,
            fct,
            jain: quench_report::jain_index(&rates),
            flows,
            ports,
        }
    }
}

/// `fct.txt`: `sip dip sport dport size start_ns fct_ns ideal_fct_ns`, finished flows in order of
/// completion like ns-3 (ties by flow id).
pub fn fct_txt(w: &World) -> String {
    let mut done: Vec<usize> = (0..w.flows.len()).filter(|&i| w.flows[i].done).collect();
    done.sort_by_key(|&i| (w.flows[i].finish, i));
    let mut s = String::new();
    for i in done {
        let f = &w.flows[i];
        let _ = writeln!(
            s,
            "{:08x} {:08x} {} {} {} {} {} {}",
            node_ip(f.spec.src),
            node_ip(f.spec.dst),
            f.sport,
            f.spec.dport,
            f.spec.bytes,
            f.spec.start.as_nanos(),
            (f.finish - f.spec.start).as_nanos(),
            f.ideal_fct.as_nanos()
        );
    }
    s
}

/// Header of `fct.csv`.
pub const FCT_CSV_HEADER: &str = "flow,src,dst,size,start_ns,fct_ns,ideal_ns,slowdown";

/// `fct.csv`: one row per flow in flow order (`flow` is its index in the flow file), nodes by
/// id, size in octets, times in nanoseconds, slowdown = fct / ideal; a flow unfinished at the
/// end has empty `fct_ns` and `slowdown` (NaN to pandas). fct.txt stays ns-3's format for
/// HPCC's analysis scripts.
pub fn fct_csv(s: &Summary) -> String {
    let mut out = String::from(FCT_CSV_HEADER);
    out.push('\n');
    for f in &s.flows {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{}",
            f.id,
            f.src,
            f.dst,
            f.size,
            f.start_ns,
            f.fct_ns.map_or(String::new(), |x| x.to_string()),
            f.ideal_fct_ns,
            f.slowdown.map_or(String::new(), |x| x.to_string())
        );
    }
    out
}

/// `flows.csv`: `time_ns,flow,rate_bps,goodput_bps` (the whole text, read back).
pub fn flows_csv(w: &World) -> std::io::Result<String> {
    w.series().text(Which::Flows)
}

/// `queues.csv`: `time_ns,node,port,bytes` for switch ports that carried traffic (the whole
/// text, read back).
pub fn queues_csv(w: &World) -> std::io::Result<String> {
    w.series().text(Which::Queues)
}

/// Points a plotted series keeps at most, twice this (see [`Thin`]): a long run's plot stays a
/// few hundred KB.
const PLOT_BUCKETS: u32 = 1000;

/// `rates.svg` (per-flow reaction-point rate: the flows with the most octets) and
/// `queues.svg` (per-port queue: the ports with the largest queues), from the time series
/// read back (only the plotted series are held, thinned); the time axis spans the samples,
/// from the first flow's start.
pub fn plots(w: &World) -> anyhow::Result<(String, String)> {
    let ms = |ns: u64| ns as f64 * 1e-6;
    let first = w
        .flows
        .iter()
        .map(|f| f.spec.start)
        .min()
        .unwrap_or(Instant::ZERO);
    let (x0, x1) = (ms(first.as_nanos()), ms(w.now().as_nanos()));
    let thin = || Thin::new(x0, x1, PLOT_BUCKETS);
    let sizes: Vec<u64> = w.flows.iter().map(|f| f.spec.bytes).collect();
    let (chosen, _) = quench_report::top(&sizes, quench_report::TOP);
    // Flow id -> its place among the plotted.
    let mut slot = vec![None; w.flows.len()];
    for (k, &i) in chosen.iter().enumerate() {
        slot[i] = Some(k);
    }
    let mut flows: Vec<Thin> = chosen.iter().map(|_| thin()).collect();
    w.series().for_each_row(Which::Flows, |f| {
        let (Some(Ok(t)), Some(Ok(flow)), Some(Ok(rate))) = (
            f.first().map(|x| x.parse::<u64>()),
            f.get(1).map(|x| x.parse::<usize>()),
            f.get(2).map(|x| x.parse::<u64>()),
        ) else {
            return;
        };
        if let Some(&Some(k)) = slot.get(flow) {
            flows[k].push(ms(t), rate as f64 * 1e-9);
        }
    })?;
    let flows: Vec<Series> = chosen
        .iter()
        .zip(flows)
        .map(|(&i, t)| Series {
            name: format!("flow {i}"),
            points: t.finish(),
        })
        .collect();
    let busy: Vec<u32> = (0..w.port_count())
        .filter(|&p| w.port_is_switch(p) && w.port_stats(p).q_max > 0)
        .collect();
    let keys: Vec<u64> = busy.iter().map(|&p| w.port_stats(p).q_max).collect();
    let (top_ports, _) = quench_report::top(&keys, quench_report::TOP);
    let by_port: Vec<u32> = top_ports.iter().map(|&k| busy[k]).collect();
    let mut queues: Vec<Thin> = by_port.iter().map(|_| thin()).collect();
    w.series().for_each_row(Which::Queues, |f| {
        let (Some(Ok(t)), Some(Ok(node)), Some(Ok(local)), Some(Ok(bytes))) = (
            f.first().map(|x| x.parse::<u64>()),
            f.get(1).map(|x| x.parse::<u32>()),
            f.get(2).map(|x| x.parse::<u32>()),
            f.get(3).map(|x| x.parse::<u64>()),
        ) else {
            return;
        };
        let Some(port) = w.port_id(node, local) else {
            return;
        };
        if let Some(k) = by_port.iter().position(|&p| p == port) {
            queues[k].push(ms(t), bytes as f64 / 1000.0);
        }
    })?;
    let queues: Vec<Series> = by_port
        .iter()
        .zip(queues)
        .map(|(&p, t)| {
            let (n, l, peer) = w.port_name(p);
            Series {
                name: format!("node {n} port {l} (to {peer})"),
                points: t.finish(),
            }
        })
        .collect();
    let flow_note =
        quench_report::shown_note(flows.len(), w.flows.len(), "flows", "with the most octets");
    let port_note = quench_report::shown_note(
        queues.len(),
        busy.len(),
        "switch ports that queued",
        "with the largest queues",
    );
    Ok((
        Plot {
            title: "Reaction point rate per flow",
            x_label: "time (ms)",
            y_label: "rate (Gb/s)",
            note: flow_note.as_deref(),
            log_x: false,
        }
        .draw(&flows)?,
        Plot {
            title: "Egress queue per switch port",
            x_label: "time (ms)",
            y_label: "queue (KB)",
            note: port_note.as_deref(),
            log_x: false,
        }
        .draw(&queues)?,
    ))
}

/// One bucket of finished flows by size, as HPCC's `analysis/fct_analysis.py` makes them:
/// the flows sorted by size, bucket `i` holding ranks `[i n / 20, (i + 1) n / 20)`.
#[derive(Clone, Debug, PartialEq)]
pub struct SizeBucket {
    /// The bucket's upper end as a share of the flows, percent (5, 10, ... 100).
    pub upto_pct: u32,
    /// Its largest flow, octets.
    pub size_max: u64,
    pub flows: usize,
    /// Slowdowns at p50, p95 and p99.
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
}

/// Buckets of 5 % of the finished flows by size with their slowdown percentiles, computed as
/// fct_analysis.py does: slowdown = fct / standalone fct, at least 1 ("slow<1?1:slow"); flows
/// sorted by size; percentile p of a bucket's sorted slowdowns = the one at index int(len x p)
/// (its `get_pctl`); the size shown is the bucket's last, its largest. A bucket with no flow
/// (fewer than 20 flows in all) is left out. (fct_analysis.py also keeps only flows to port 100
/// that end before its `-T`; quench's outputs keep every finished flow.)
pub fn slowdown_by_size(s: &Summary) -> Vec<SizeBucket> {
    let mut rows: Vec<(u64, f64)> = s
        .flows
        .iter()
        .filter_map(|f| {
            let fct = f.fct_ns? as f64;
            Some((f.size, (fct / f.ideal_fct_ns.max(1) as f64).max(1.0)))
        })
        .collect();
    rows.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
    let n = rows.len();
    let mut out = Vec::new();
    for i in (0..100).step_by(5) {
        let (l, r) = (i * n / 100, (i + 5) * n / 100);
        if l == r {
            continue;
        }
        let part = &rows[l..r];
        let mut slow: Vec<f64> = part.iter().map(|r| r.1).collect();
        slow.sort_by(f64::total_cmp);
        let pct = |p: f64| slow[((slow.len() as f64 * p) as usize).min(slow.len() - 1)];
        out.push(SizeBucket {
            upto_pct: i as u32 + 5,
            size_max: part[part.len() - 1].0,
            flows: part.len(),
            p50: pct(0.5),
            p95: pct(0.95),
            p99: pct(0.99),
        });
    }
    out
}

/// `slowdown.csv`: the buckets of [`slowdown_by_size`], one row each.
pub fn slowdown_csv(buckets: &[SizeBucket]) -> String {
    let mut s = String::from("upto_pct,size_max,flows,p50,p95,p99\n");
    for b in buckets {
        let _ = writeln!(
            s,
            "{},{},{},{},{},{}",
            b.upto_pct, b.size_max, b.flows, b.p50, b.p95, b.p99
        );
    }
    s
}

/// `slowdown.svg`: the slowdown percentiles of each size bucket against the bucket's largest
/// flow, on a logarithmic size axis: the plot HPCC's papers draw from fct_analysis.py's table.
pub fn slowdown_plot(s: &Summary, buckets: &[SizeBucket]) -> anyhow::Result<String> {
    let series: Vec<Series> = [("p50", 0), ("p95", 1), ("p99", 2)]
        .into_iter()
        .map(|(name, k)| Series {
            name: name.to_string(),
            points: buckets
                .iter()
                .map(|b| (b.size_max as f64, [b.p50, b.p95, b.p99][k]))
                .collect(),
        })
        .collect();
    let done: usize = buckets.iter().map(|b| b.flows).sum();
    let unfinished = s.flows.len() - s.flows.iter().filter(|f| f.fct_ns.is_some()).count();
    let note = format!(
        "{done} finished flows in {} buckets of 5 % by size (HPCC's fct_analysis.py){}",
        buckets.len(),
        if unfinished > 0 {
            format!("; {unfinished} unfinished left out")
        } else {
            String::new()
        }
    );
    Ok(Plot {
        title: "FCT slowdown by flow size",
        x_label: "flow size, the bucket's largest (octets)",
        y_label: "slowdown (FCT / standalone FCT)",
        note: Some(&note),
        log_x: true,
    }
    .draw(&series)?)
}

/// Writes every output file into `dir`.
pub fn write_all(w: &mut World, cc: &str, dir: &Path) -> anyhow::Result<Summary> {
    use anyhow::Context;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    w.series_result()?;
    let w = &*w;
    let put = |name: &str, body: &str| {
        let p = dir.join(name);
        std::fs::write(&p, body).with_context(|| format!("writing {}", p.display()))
    };
    let summary = Summary::of(w, cc);
    put("fct.txt", &fct_txt(w))?;
    put("fct.csv", &fct_csv(&summary))?;
    put(
        "summary.json",
        &(serde_json::to_string_pretty(&summary)? + "\n"),
    )?;
    // Streamed into `dir` as the run went (`World::stream_series_to`), or written now.
    let streamed = w.series().dir().is_some_and(|d| same_dir(d, dir));
    if !streamed {
        put("flows.csv", &flows_csv(w)?)?;
        put("queues.csv", &queues_csv(w)?)?;
    }
    let (rates, queues) = plots(w)?;
    put("rates.svg", &rates)?;
    put("queues.svg", &queues)?;
    let buckets = slowdown_by_size(&summary);
    put("slowdown.csv", &slowdown_csv(&buckets))?;
    put("slowdown.svg", &slowdown_plot(&summary, &buckets)?)?;
    Ok(summary)
}

/// Whether two paths name one directory.
fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}
