//! `quench stats [--json] [--watch] [--control-socket PATH]`: live per-port and per-queue counters of a running
//! `quench switch`, read from its control socket, in the spirit of testpmd's `show port stats`;
//! or, from a `quench appliance --control-socket PATH`, its pairs' counters and top flows.
use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::Context;

use quench_runtime::switch::config::DEFAULT_CONTROL_SOCKET;
use quench_runtime::switch::control::{query_answer, Answer};
use quench_runtime::switch::stats::{PortSnapshot, Snapshot};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The switch's control socket (`quench switch --control-socket`, `control_socket`).
    #[arg(long, value_name = "PATH", default_value = DEFAULT_CONTROL_SOCKET, alias = "socket")]
    pub control_socket: PathBuf,
    /// Print the raw JSON snapshot.
    #[arg(long)]
    pub json: bool,
    /// Refresh every `--interval`, with rates over the last interval.
    #[arg(long)]
    pub watch: bool,
    /// With --watch: time between snapshots, e.g. `1s`, `50ms` (one long-lived reader instead
    /// of a process per sample, which on a small machine takes CPU from the poll loops being
    /// measured).
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = super::duration_arg,
          allow_hyphen_values = true)]
    pub interval: units::Duration,
    /// With --watch: stop after this many refreshes.
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,
}

fn si(v: f64) -> String {
    if v >= 1e9 {
        format!("{:.2}G", v / 1e9)
    } else if v >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

/// The human-readable table; with `prev`, rates are the deltas since it.
pub fn table(now: &Snapshot, prev: Option<&Snapshot>) -> String {
    let mut s = String::new();
    let dt = prev
        .map(|p| now.uptime_ns.saturating_sub(p.uptime_ns) as f64 * 1e-9)
        .filter(|&d| d > 0.0);
    let _ = writeln!(
        s,
        "######## quench switch: {:.1} s up, {} MAC entries, {} frames not learned (table full) ########",
        now.uptime_ns as f64 * 1e-9,
        now.fdb_entries,
        now.fdb_refused
    );
    let sum = |f: fn(&PortSnapshot) -> u64| now.ports.iter().map(f).sum::<u64>();
    let (tx, fast) = (sum(|p| p.tx_pkts), sum(|p| p.fast_tx_pkts));
    let _ = writeln!(
        s,
        "frames sent: {} by the kernel fast path, {} by the workers",
        fast,
        tx.saturating_sub(fast)
    );
    let _ = writeln!(
        s,
        "{:<8} {:<12} {:<22} {:>12} {:>12} {:>12} {:>12} {:>9} {:>9} {:>9} {:>10} {:>10} {:>10} {:>10}",
        "port",
        "iface",
        "mode",
        "rx-pkts",
        "tx-pkts",
        "rx-pps",
        "tx-pps",
        "rx-bps",
        "tx-bps",
        "drops",
        "q-drops",
        "pfc-drops",
        "q-depth",
        "flood-uc"
    );
    for (i, p) in now.ports.iter().enumerate() {
        let old = prev.and_then(|pr| pr.ports.get(i));
        let rate = |cur: u64, old: Option<u64>| match (dt, old) {
            (Some(dt), Some(o)) => si(cur.saturating_sub(o) as f64 / dt),
            _ => "-".into(),
        };
        let _ = writeln!(
            s,
            "{:<8} {:<12} {:<22} {:>12} {:>12} {:>12} {:>12} {:>9} {:>9} {:>9} {:>10} {:>10} {:>10} {:>10}",
            p.info.name,
            p.info.iface,
            format!("{}/{}", p.info.kind, p.info.mode),
            p.rx_pkts,
            p.tx_pkts,
            rate(p.rx_pkts, old.map(|o| o.rx_pkts)),
            rate(p.tx_pkts, old.map(|o| o.tx_pkts)),
            rate(p.rx_bytes * 8, old.map(|o| o.rx_bytes * 8)),
            rate(p.tx_bytes * 8, old.map(|o| o.tx_bytes * 8)),
            // Everything dropped outside the queues: in the kernel before the receive ring,
            // on receive (malformed, filtered), for want of a buffer on the way out, in the
            // kernel after sending.
            p.rx_kernel_drops + p.rx_drops + p.tx_drops + p.tx_kernel_drops,
            p.queue_drops,
            // Lossless frames that arrived on this port beyond its XOFF + headroom: a PAUSE
            // that came too late (the sender or this switch was not running).
            p.pfc_headroom_drops,
            p.queue_depth_bytes,
            // Unicast frames received here that went out of every other port: their DA is not
            // in the FDB (a receiver that never sends, or an entry aged out).
            p.flooded_unicast,
        );
        if p.fast_rx_pkts + p.fast_tx_pkts > 0 {
            // Of rx-pkts / tx-pkts: the share no worker saw, and the rest.
            let _ = writeln!(
                s,
                "  kernel fast path: {} rx, {} tx; through the workers: {} rx, {} tx",
                p.fast_rx_pkts,
                p.fast_tx_pkts,
                p.rx_pkts.saturating_sub(p.fast_rx_pkts),
                p.tx_pkts.saturating_sub(p.fast_tx_pkts)
            );
        }
        for q in p.queues.iter().filter(|q| q.counters.enq_pkts > 0) {
            let c = &q.counters;
            let _ = writeln!(
                s,
                "    queue {:<3} enq {:>12} deq {:>12} drop {:>10} ({} B) depth {:>8} B max {:>8} B",
                q.class, c.enq_pkts, c.deq_pkts, c.drop_pkts, c.drop_bytes, c.depth_bytes,
                c.max_depth_bytes
            );
        }
    }
    for (w, l) in now.workers.iter().enumerate() {
        let us = |ns: u64| ns as f64 / 1e3;
        let g = |x: &quench_port::probe::GapSummary| {
            format!(
                "{} x {:.1}/{:.1}/{:.1}/{:.1}",
                x.iterations,
                us(x.p50_ns),
                us(x.p99_ns),
                us(x.p999_ns),
                us(x.max_ns)
            )
        };
        let _ = writeln!(
            s,
            "worker {w} loop gaps, us p50/p99/p99.9/max: after frames {}, housekeeping {}, idle {}",
            g(&l.frames),
            g(&l.housekeeping),
            g(&l.idle)
        );
    }
    s
}

/// The appliance's table (`quench appliance`'s control-socket answer, cli/appliance.rs
/// `snapshot`); with `prev`, the released rate is over the interval since it.
pub fn appliance_table(now: &serde_json::Value, prev: Option<&serde_json::Value>) -> String {
    let mut s = String::new();
    let secs = now["secs"].as_f64().unwrap_or(0.0);
    let dt = prev
        .and_then(|p| p["secs"].as_f64())
        .map(|p| secs - p)
        .filter(|&d| d > 0.0);
    let _ = writeln!(s, "######## quench appliance: {secs:.1} s up ########");
    let u = |v: &serde_json::Value| v.as_u64().unwrap_or(0);
    let pairs = now["appliance"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    for (i, p) in pairs.iter().enumerate() {
        let (c, t) = (&p["counters"], &p["table"]);
        let old = prev.and_then(|pr| pr["appliance"].get(i));
        let rate = match (dt, old) {
            (Some(dt), Some(o)) => si(u(&t["released_bytes"])
                .saturating_sub(u(&o["table"]["released_bytes"]))
                as f64
                * 8.0
                / dt),
            _ => "-".into(),
        };
        let _ = writeln!(
            s,
            "{}: in {} frames, released {} ({} b/s), queue drops {}, bypass {}, full drops {}, \
             flows {}",
            p["pair"].as_str().unwrap_or("?"),
            u(&c["inside_frames"]),
            u(&t["released_frames"]),
            rate,
            u(&t["queue_drops"]),
            u(&t["bypass_frames"]),
            u(&t["full_drops"]),
            u(&p["flows_held"]),
        );
        let _ = writeln!(
            s,
            "  feedback: CNMs {} CNPs {} accepted; refused: unknown flow {}, forged {}, other cc \
             {}, by the RP {}; CNPs sent {}; latency added p50 {} us p99 {} us",
            u(&c["cnms_accepted"]),
            u(&c["cnps_accepted"]),
            u(&c["unknown_flow"]),
            u(&c["forged"]["total"]),
            u(&c["other_cc_feedback"]),
            u(&t["refused_feedback"]),
            u(&c["cnps_sent"]),
            p["latency_us"]["p50"],
            p["latency_us"]["p99"],
        );
        let _ = writeln!(
            s,
            "  {:<44} {:>6} {:>10} {:>10} {:>12} {:>10}",
            "flow", "rpid", "RP Mb/s", "sent Mb/s", "queued B", "drops"
        );
        for f in p["top_flows"].as_array().into_iter().flatten() {
            let _ = writeln!(
                s,
                "  {:<44} {:>6} {:>10.1} {:>10.1} {:>12} {:>10}",
                f["flow"].as_str().unwrap_or("?"),
                f["rpid"].as_u64().map_or("-".into(), |r| r.to_string()),
                f["rate_mbps"].as_f64().unwrap_or(0.0),
                f["sent_mbps"].as_f64().unwrap_or(0.0),
                u(&f["queued_bytes"]),
                u(&f["drops"]),
            );
        }
    }
    s
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let get = || query_answer(&args.control_socket);
    // SIGINT / SIGTERM end a watch with status 0 (every table printed is complete).
    let stop = quench_port::worker::stop_on_signals().context("installing signal handlers")?;
    let stopped = || stop.load(std::sync::atomic::Ordering::Relaxed);
    let every = args.interval.max(units::Duration::from_millis(1));
    let mut prev: Option<Answer> = None;
    let mut n = 0u64;
    // Requests on the interval's schedule from the first (absolute deadlines): the time a
    // request and its printing take does not stretch the period.
    let clock = quench_wire::time::Clock::monotonic();
    let mut tick = quench_wire::time::Ticker::new(clock.now(), every);
    loop {
        let snap = get()?;
        match (&snap, &prev) {
            (Answer::Switch(s), _) if args.json => jsonln!("counters", serde_json::to_value(s)?)?,
            (Answer::Appliance(v), _) if args.json => jsonln!("counters", v.clone())?,
            (Answer::Switch(s), Some(Answer::Switch(p))) => out!("{}", table(s, Some(p)))?,
            (Answer::Switch(s), _) => out!("{}", table(s, None))?,
            (Answer::Appliance(v), Some(Answer::Appliance(p))) => {
                out!("{}", appliance_table(v, Some(p)))?
            }
            (Answer::Appliance(v), _) => out!("{}", appliance_table(v, None))?,
        }
        n += 1;
        if !args.watch || args.count.is_some_and(|c| n >= c) {
            return Ok(());
        }
        prev = Some(snap);
        // In slices, so a signal is acted on within 20 ms (sleep resumes after a handler).
        loop {
            if stopped() {
                return Ok(());
            }
            let now = clock.now();
            if tick.due(now) {
                tick.take(now);
                break;
            }
            let left = tick.next().saturating_since(now).as_nanos().min(20_000_000);
            std::thread::sleep(std::time::Duration::from_nanos(left));
        }
    }
}

#[cfg(test)]
#[path = "stats_tests.rs"]
mod tests;
