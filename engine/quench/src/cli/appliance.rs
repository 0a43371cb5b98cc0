//! `quench appliance`: the sender appliance on real ports
//! ([`quench_runtime::appliance::runtime::ApplianceLoop`]): parses the flags, starts the loop,
//! shows its progress until SIGINT/SIGTERM or `--duration`, and prints, per pair, the counters,
//! the flows, the latency the appliance added and the pacing audit; the loop's stalls; one JSON
//! line. Ports open as `quench send`'s do (`[NETNS/]IFACE`, `--driver`). `--control-socket`
//! serves live counters to `quench stats`.
use std::path::PathBuf;

use anyhow::Context as _;
use serde_json::json;
use units::Duration;

use super::progress::{per_s, Delta, Progress};
use quench_config::bundled::{open, Kind, PresetTables};
use quench_port::worker::Idle;
use quench_runtime::appliance::config::ApplianceConfig;
use quench_runtime::appliance::runtime::{ApplianceLoop, ApplianceOptions, ApplianceStats};
use quench_runtime::appliance::Role;
use quench_runtime::send::config::Cc;
use quench_wire::time::Clock;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Port toward the hosts, `[NETNS/]IFACE`. Repeat `--inside`/`--outside` for several pairs
    /// (the k-th `--inside` pairs with the k-th `--outside`), all served by one poll loop.
    #[arg(long, value_name = "[NETNS/]IFACE", required = true)]
    pub inside: Vec<String>,
    /// Port toward the network, `[NETNS/]IFACE`.
    #[arg(long, value_name = "[NETNS/]IFACE", required = true)]
    pub outside: Vec<String>,
    /// Pairs in front of a receiver, served by the same loop in the notification-point role
    /// whatever `role` says: `--np-inside` toward the receiver, `--np-outside` toward the
    /// network (repeat in pairs). One process for both sides of a testbed takes one CPU less.
    #[arg(long, value_name = "[NETNS/]IFACE")]
    pub np_inside: Vec<String>,
    #[arg(long, value_name = "[NETNS/]IFACE")]
    pub np_outside: Vec<String>,
    /// What the loop does when no frame moved (the values of `quench switch --idle`). A
    /// duration, e.g. `100us`: sleep until the next release when it is more than 20 us away,
    /// at most that long, and that long at a time when nothing is queued. `spin`: never give
    /// the CPU up, even while every queued frame waits for its release time (for a CPU of its
    /// own). `yield`: give the CPU up without sleeping. `wait`: wait in the kernel (poll(2) on
    /// the ports' receive descriptors, AF_XDP and AF_PACKET), woken by a frame or at the
    /// timeout: 100 us while frames are queued, else the next timer, at most 10 ms; an idle
    /// appliance takes no CPU and a frame that arrives is seen at once. `auto` (the default):
    /// spin where no other process may run on its CPUs, else sleep 100 us.
    #[arg(long, value_name = quench_port::worker::IDLE_VALUES, default_value = "auto")]
    pub idle: Idle,
    #[command(flatten)]
    pub port: super::PortArgs,
    /// The appliance configuration: a bundled name (`appliance`, `quench presets` lists them)
    /// or a TOML file.
    #[arg(long, value_name = "NAME|FILE", hide_possible_values = true,
          value_parser = super::NameParser::of(&[quench_config::bundled::Kind::Appliance]), default_value = "appliance")]
    pub config: String,
    /// Override the config's `cc`.
    #[arg(long, value_enum, value_name = "CC")]
    pub cc: Option<Cc>,
    /// Override the config's `role`.
    #[arg(long, value_name = "ROLE", value_parser = ["rp", "np"])]
    pub role: Option<String>,
    /// Take `[qcn_rp]` / `[dcqcn_rp]` / `[np]` from this preset instead: a bundled name
    /// (`nvidia`; `quench presets` lists them) or a TOML file, as `quench send --preset`.
    #[arg(long, value_name = "NAME|FILE", value_parser = super::NameParser::presets(),
          hide_possible_values = true, alias = "rp")]
    pub preset: Option<String>,
    /// Stop by itself after this long, e.g. `30s` (SIGINT / SIGTERM end it early, with the
    /// report); without it, run until a signal.
    #[arg(long, value_name = "DURATION", value_parser = super::duration_or_secs_arg,
          allow_hyphen_values = true)]
    pub duration: Option<Duration>,
    /// JSON lines on standard output: one progress object per second, then the summary; the
    /// human report goes to standard error.
    #[arg(long)]
    pub json: bool,
    /// Serve live counters on this Unix socket (mode 0660) for `quench stats --control-socket
    /// PATH`; overrides the config's `control_socket`. Without either, no socket.
    #[arg(long, value_name = "PATH")]
    pub control_socket: Option<PathBuf>,
}

impl Args {
    /// The configuration with the flags' overrides.
    fn config(&self) -> anyhow::Result<(ApplianceConfig, String)> {
        let src = open(&self.config, Kind::Appliance, None)
            .with_context(|| format!("--config {}", self.config))?;
        let mut cfg = ApplianceConfig::read(&src)?;
        if let Some(cc) = self.cc {
            cfg.cc = cc;
        }
        if let Some(c) = &self.control_socket {
            cfg.control_socket = Some(c.clone());
        }
        if let Some(role) = &self.role {
            cfg.role = if role == "np" { Role::Np } else { Role::Rp };
        }
        if let Some(p) = &self.preset {
            cfg.set_tables(PresetTables::from_option(p)?, true);
        }
        Ok((cfg, self.config.clone()))
    }

    /// The runtime's options from the flags.
    fn options(&self, origin: String) -> anyhow::Result<ApplianceOptions> {
        let pairs = |what: &str, inside: &[String], outside: &[String]| {
            if inside.len() != outside.len() {
                anyhow::bail!(
                    "{} --{what}inside but {} --{what}outside: give them in pairs",
                    inside.len(),
                    outside.len()
                );
            }
            Ok(inside
                .iter()
                .cloned()
                .zip(outside.iter().cloned())
                .collect())
        };
        Ok(ApplianceOptions {
            pairs: pairs("", &self.inside, &self.outside)?,
            np_pairs: pairs("np-", &self.np_inside, &self.np_outside)?,
            driver: self.port.driver(),
            idle: self.idle,
            duration: self.duration,
            stop: Some(quench_port::worker::stop_on_signals()?),
            origin,
        })
    }
}

/// The progress status of the appliance's pairs: release rate over the interval, totals of
/// frames, drops, feedback accepted, CNPs sent, PFC (MAC control) frames passed or honoured,
/// flows held.
fn show_progress(
    p: &mut Progress,
    now: units::Instant,
    s: &ApplianceStats,
    released: &mut Delta,
) -> std::io::Result<()> {
    let (mut bytes, mut inside, mut outside, mut drops) = (0, 0, 0, 0);
    let (mut feedback, mut cnps, mut pfc, mut flows) = (0, 0, 0, 0);
    for pr in &s.pairs {
        let (c, t) = (&pr.counters, &pr.table);
        bytes += t.released_bytes;
        inside += c.inside_frames;
        outside += c.outside_frames;
        drops += t.queue_drops + t.full_drops + pr.tx_dropped;
        feedback += c.cnms_accepted + c.cnps_accepted;
        cnps += c.cnps_sent;
        // PFC frames passed inside or (`pfc = true`) honoured.
        pfc += c.pass_mac_control + c.pfc_rx;
        flows += pr.flows as u64;
    }
    let db = released.step(bytes);
    p.show(
        now,
        |dt| {
            format!(
                "released {:.1} Mb/s | in {inside} out {outside} frames | {drops} drops | feedback {feedback}, {cnps} CNPs sent | {pfc} PFC frames | {flows} flows",
                per_s(db * 8, dt, 1e6)
            )
        },
        |dt| {
            json!({
                "released_bps": per_s(db * 8, dt, 1.0), "inside_frames": inside,
                "outside_frames": outside, "drops": drops, "feedback": feedback,
                "cnps_sent": cnps, "pfc_frames": pfc, "flows": flows,
            })
        },
    )
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if args.json {
        super::human_to_stderr();
    }
    let (cfg, origin) = args.config()?;
    let app = ApplianceLoop::start(cfg, args.options(origin)?)?;
    for n in app.notes() {
        eprintln!("quench appliance: {n}");
    }
    let clock = Clock::new();
    let mut progress = Progress::new("appliance", args.json, clock.now());
    let mut released = Delta::default();
    while !app.wait(super::progress::WATCH_NAP) {
        let now = clock.now();
        if progress.due(now) {
            show_progress(&mut progress, now, &app.stats(), &mut released)?;
        }
    }
    progress.done();
    let report = app.join()?;
    let pairs = report.stats.pairs.iter();
    for (p, s) in pairs.zip(report.summary["appliance"].as_array().into_iter().flatten()) {
        print_pair(p, s)?;
    }
    outln!("scheduling: {}", report.stalls)?;
    jsonln!("summary", report.summary)?;
    Ok(())
}

/// One pair's lines: its counters, flows, latency added and pacing audit (`s`: its summary).
fn print_pair(
    p: &quench_runtime::appliance::runtime::PairStats,
    s: &serde_json::Value,
) -> std::io::Result<()> {
    let (c, t) = (&p.counters, &p.table);
    outln!("== {}", p.label)?;
    outln!(
        "  inside {} frames: released {} ({} octets), passed {} ARP / {} ND / {} other, \
         queue drops {}, bypass {}, table full drops {}",
        c.inside_frames,
        t.released_frames,
        t.released_bytes,
        c.pass_arp,
        c.pass_nd,
        c.pass_other + c.pass_lldp + c.pass_mac_control + c.pass_cnm + c.pass_malformed,
        t.queue_drops,
        t.bypass_frames,
        t.full_drops
    )?;
    outln!(
        "  outside {} frames: CNMs accepted {}, CNPs accepted {}, unknown flow {}, forged {}, \
         other cc {}; CNPs sent {}",
        c.outside_frames,
        c.cnms_accepted,
        c.cnps_accepted,
        c.unknown_flow,
        c.forged.total(),
        c.other_cc_feedback,
        c.cnps_sent
    )?;
    outln!(
        "  flows held {}, created {}, evicted idle {} / full {}; latency added p50 {} us p99 {} us",
        p.flows,
        t.flows_created,
        t.idle_evictions,
        t.full_evictions,
        s["latency_us"]["p50"],
        s["latency_us"]["p99"]
    )?;
    let pacing = &s["pacing"];
    if pacing["windows"].as_u64().unwrap_or(0) > 0 {
        let pct = |v: &serde_json::Value| v.as_f64().map_or(0.0, |x| 100.0 * x);
        outln!(
            "  pacing (backlogged flows, 100 ms windows): {} windows, {:.1} % within 1 % of \
             the RP rate's integral, largest {:.3} %; {} windows no stall touched: {:.1} % \
             within 1 %, largest {:.3} %",
            pacing["windows"],
            pct(&pacing["within_1pct"]),
            pct(&pacing["max_abs_dev"]),
            pacing["unstalled_windows"],
            pct(&pacing["unstalled_within_1pct"]),
            pct(&pacing["unstalled_max_abs_dev"])
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use quench_node::host::rp::HostRp;
    use quench_port::heap::HeapFrame;
    use quench_runtime::appliance::table::TableConfig;
    use quench_runtime::appliance::{Appliance, InsideAction, Role};
    use quench_wire::testhdr::UDP_PORT;
    use units::{Duration, Instant, Rate};

    /// `quench stats`' table of an appliance's answer names the flow with its RP rate.
    #[test]
    fn the_stats_table_names_the_appliances_flows() {
        let rp = HostRp::qcn(
            rp::QcnParams::default()
                .profile(Rate::from_gbps(1))
                .unwrap(),
        );
        let mut app: Appliance<HeapFrame> =
            Appliance::new(Role::Rp, true, false, TableConfig::default(), rp, None).unwrap();
        let frame = quench_wire::frame::test_frame(1, 1, 0, units::Ecn::NotEct, None);
        let t0 = Instant::from_nanos(1_000);
        let queued = app.on_inside(t0, &frame, HeapFrame::zeroed);
        assert!(matches!(queued, InsideAction::Queued));
        assert!(app.poll_release(t0).is_none(), "due a tick later");
        let r = app.poll_release(t0 + Duration::from_micros(1)).unwrap();
        app.on_sent(t0 + Duration::from_micros(3), r.arrived);
        let v = serde_json::json!({"appliance": [app.report(2.0)], "secs": 2.0});
        let table = crate::cli::stats::appliance_table(&v, None);
        let flow = format!("Udp 10.0.0.1:40000 > 10.0.0.9:{UDP_PORT}");
        assert!(table.contains(&flow), "{table}");
    }
}
