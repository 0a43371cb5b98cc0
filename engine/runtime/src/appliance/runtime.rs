//! The appliance as a library: [`ApplianceLoop::start`] takes a configuration and options and
//! returns an [`ApplianceHandle`] for live stats, stop and join (the final report); `quench
//! appliance` is this plus argument parsing and printing.
//!
//! Each inside/outside pair (and each pair in the notification-point role) gets its own
//! [`Appliance`]; one polling loop, on a thread of its own, reads the clock once per iteration
//! and serves every pair: inside frames in (classified, queued or passed), outside frames in
//! (feedback consumed or passed inside), due frames out, timers; it sleeps while every queued
//! frame waits for a release more than [`SLEEP_MIN`] away, and while nothing is queued (as the
//! idle policy says: by default on a shared CPU). The configuration's `control_socket` serves
//! the live summary to `quench stats`. At the end: per pair, the counters, the flows, the
//! latency the appliance added and the pacing audit; the loop's stalls.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::Context as _;
use serde_json::json;
use units::{Duration, Instant, Rate};

use super::config::ApplianceConfig;
use super::table::{FlowTable, TableConfig, TableCounters};
use super::{Appliance, Counters, InsideAction, OutsideAction, Role};
use crate::live::{LoopHandle, Published};
use crate::switch::control::ControlSocket;
use crate::PortDriver;
use quench_node::host::audit::PaceAudit;
use quench_node::host::rp::HostRp;
use quench_port::any::{AnyFrame, Scratch};
use quench_port::probe::{Iteration, LoopStalls, Probe};
use quench_port::worker::{Backoff, Idle, IdleMode, RxWait};
use quench_port::{Frame as _, Port, BURST};
use quench_wire::time::Clock;

/// How to run a configuration: the ports and what `quench appliance`'s flags say beside the
/// file.
#[derive(Clone, Debug, Default)]
pub struct ApplianceOptions {
    /// (inside, outside) pairs, `[NETNS/]IFACE`, in the configuration's role.
    pub pairs: Vec<(String, String)>,
    /// Pairs in front of a receiver, in the notification-point role whatever the
    /// configuration's `role` says: (toward the receiver, toward the network).
    pub np_pairs: Vec<(String, String)>,
    pub driver: PortDriver,
    /// What the loop does when no frame moved ([`Idle::for_this_thread`]; under `auto`, sleep
    /// [`SLEEP_MAX`] on a shared CPU).
    pub idle: Idle,
    /// Stop by itself after this long.
    pub duration: Option<Duration>,
    /// A flag that stops the loop when set (e.g. by signal handlers); `None`: its own.
    pub stop: Option<Arc<AtomicBool>>,
    /// Where the configuration came from, for errors (a file name or a bundled one's).
    pub origin: String,
}

/// The appliance's entry point (see the module docs).
pub struct ApplianceLoop;

/// A running appliance: [`LoopHandle::stats`] (every pair's figures), stop, join (the
/// [`ApplianceReport`]).
pub type ApplianceHandle = LoopHandle<ApplianceStats, ApplianceReport>;

/// One pair's figures.
#[derive(Clone, Debug, Default)]
pub struct PairStats {
    /// `INSIDE<->OUTSIDE`.
    pub label: String,
    pub counters: Counters,
    pub table: TableCounters,
    /// Flows the table holds.
    pub flows: usize,
    /// Frames the ports did not take or had no buffer for.
    pub tx_dropped: u64,
}

/// Every pair's figures at one time of the loop.
#[derive(Clone, Debug, Default)]
pub struct ApplianceStats {
    /// Seconds since the start.
    pub secs: f64,
    pub pairs: Vec<PairStats>,
}

/// What a stopped appliance leaves.
#[derive(Debug)]
pub struct ApplianceReport {
    pub stats: ApplianceStats,
    /// `{"appliance": [PAIR...], "secs": S, "scheduling": {...}}`: each pair's counters, flows,
    /// latency added and pacing audit (the control socket's answer), and the loop's stalls.
    pub summary: serde_json::Value,
    pub stalls: LoopStalls,
}

impl ApplianceLoop {
    /// Opens the ports, binds the control socket and starts the loop on a thread of its own;
    /// returns once it runs, or with the first error (nothing left running).
    pub fn start(
        cfg: ApplianceConfig,
        options: ApplianceOptions,
    ) -> anyhow::Result<ApplianceHandle> {
        let (stop, duration) = (options.stop.clone(), options.duration);
        LoopHandle::spawn(
            "quench-appliance",
            "the appliance's loop",
            stop,
            move || {
                let s = State::prepare(&cfg, &options)?;
                let notes = s.notes.clone();
                Ok((s, notes))
            },
            move |s, stop, stats| s.run(duration, stop, stats),
        )
    }
}

/// The loop's own state (on its thread).
struct State {
    pairs: Vec<Pair>,
    mode: IdleMode,
    stalls: LoopStalls,
    clock: Clock,
    notes: Vec<String>,
    /// The control socket, bound once the ports are open (their errors come first).
    control: Option<ControlSocket>,
}

/// The idle mode's sleep under `auto` on a shared CPU.
const SLEEP_MAX_STD: std::time::Duration = std::time::Duration::from_nanos(SLEEP_MAX.as_nanos());

impl State {
    /// The decisions of [`ApplianceLoop::start`] on the loop's thread: the idle mode, the
    /// pairs and their ports, the control socket.
    fn prepare(cfg: &ApplianceConfig, options: &ApplianceOptions) -> anyhow::Result<State> {
        let origin = &options.origin;
        let table = cfg.table().with_context(|| origin.clone())?;
        // On a shared CPU the loop sleeps rather than yields: a yield keeps the CPU from going
        // idle, so the switch or a host sharing the machine would not be moved onto it.
        let (mode, why) = options.idle.for_this_thread(IdleMode::Sleep(SLEEP_MAX_STD));
        // A loop gap is a stall (time the flows may have lost) when it exceeds a planned sleep
        // by more than the catch-up bound.
        let stall = table.max_catch_up
            + match mode {
                IdleMode::Spin | IdleMode::Yield => Duration::ZERO,
                IdleMode::Sleep(d) => Duration::from_nanos(d.as_nanos() as u64),
                IdleMode::Wait => SLEEP_MAX,
            };
        let rp_pairs = options.pairs.iter().map(|p| (p, cfg.role));
        let np_pairs = options.np_pairs.iter().map(|p| (p, Role::Np));
        let mut pairs = Vec::new();
        for ((i, o), role) in rp_pairs.chain(np_pairs) {
            pairs.push(Pair::open(cfg, options, table, stall, role, i, o)?);
        }
        let mut notes = vec![
            format!("the loop {} when idle ({why})", mode.what()),
            format!(
                "{} pair(s), role {:?}, cc {:?}, up to {} flows per pair at {} octets of table \
                 memory each",
                pairs.len(),
                cfg.role,
                cfg.cc,
                table.max_flows,
                FlowTable::<AnyFrame>::bytes_per_flow()
            ),
        ];
        let control = match &cfg.control_socket {
            Some(path) => {
                let sock = ControlSocket::bind(path)
                    .with_context(|| format!("control_socket {}", path.display()))?;
                notes.push(format!("control socket {}", path.display()));
                Some(sock)
            }
            None => None,
        };
        Ok(State {
            pairs,
            mode,
            stalls: LoopStalls::new(stall),
            clock: Clock::new(),
            notes,
            control,
        })
    }

    /// Runs the loop until `duration` is over or `stop` is set, then the report. The control
    /// socket's thread ends with the loop, and the socket file with it.
    fn run(
        mut self,
        duration: Option<Duration>,
        stop: &AtomicBool,
        stats: &Published<ApplianceStats>,
    ) -> anyhow::Result<ApplianceReport> {
        let t0 = self.clock.now();
        let published = Arc::new(Published::new(snapshot(&self.pairs, 0.0).to_string()));
        let ctl_stop = Arc::new(AtomicBool::new(false));
        let ctl = match self.control.take() {
            Some(sock) => {
                let (p, s, clock) = (published.clone(), ctl_stop.clone(), self.clock);
                Some(
                    std::thread::Builder::new()
                        .name("quench-ctl".into())
                        .spawn(move || sock.serve_with(&clock, &|| p.ask(), s))?,
                )
            }
            None => None,
        };
        let end = duration.map(|d| t0 + d);
        let looped = self.poll_until(t0, end, stop, &published, stats);
        ctl_stop.store(true, Ordering::Relaxed);
        if let Some(h) = ctl {
            let _ = h.join();
        }
        looped?;
        let secs = (self.clock.now() - t0).as_secs_f64();
        let final_stats = self.stats(secs);
        stats.publish(final_stats.clone());
        let mut summary = snapshot(&self.pairs, secs);
        let stalls = &self.stalls;
        summary["scheduling"] = json!({
            "stall_threshold_us": stalls.threshold().as_nanos() / 1000,
            "stalls": stalls.count,
            "stalled_ns": stalls.total.as_nanos(),
            "longest_stall_ns": stalls.longest.as_nanos(),
        });
        Ok(ApplianceReport {
            stats: final_stats,
            summary,
            stalls: self.stalls,
        })
    }

    /// The loop: every pair polled once per iteration; live answers between iterations; idle
    /// as [`State::idle`] says when nothing moved.
    fn poll_until(
        &mut self,
        t0: Instant,
        end: Option<Instant>,
        stop: &AtomicBool,
        published: &Published<String>,
        stats: &Published<ApplianceStats>,
    ) -> anyhow::Result<()> {
        // With `wait`, every pair's receive descriptors; ports that have none leave the loop
        // sleeping as on a shared CPU.
        let mut fds = Vec::new();
        for p in self.pairs.iter().filter(|_| self.mode == IdleMode::Wait) {
            p.inside.wait_handle(&mut fds);
            p.outside.wait_handle(&mut fds);
        }
        let mut rx_wait = RxWait::new(fds);
        if self.mode == IdleMode::Wait && rx_wait.is_none() {
            self.mode = IdleMode::Sleep(SLEEP_MAX_STD);
        }
        // Sleeps and yields with nothing queued (a frame arriving meanwhile waits at most the
        // sleep in the receive ring). Made here, on the loop's thread, it gives it the fine
        // timer slack that sleeps and waits need: the default 50 us would make each overshoot
        // the release it waits for by up to the pacer's whole catch-up bound.
        let mut backoff = Backoff::new(self.mode, []);
        loop {
            let now = self.clock.now();
            if end.is_some_and(|e| now >= e) || stop.load(Ordering::Relaxed) {
                return Ok(());
            }
            let mut moved = false;
            for p in &mut self.pairs {
                moved |= p.poll(now).with_context(|| p.label.clone())?;
            }
            let secs = || (now - t0).as_secs_f64();
            if published.wanted() {
                published.publish(snapshot(&self.pairs, secs()).to_string());
            }
            if stats.wanted() {
                stats.publish(self.stats(secs()));
            }
            self.stalls.tick(
                now,
                if moved {
                    Iteration::Frames
                } else {
                    Iteration::Idle
                },
            );
            if !moved {
                self.idle(now, rx_wait.as_mut(), &mut backoff);
            }
        }
    }

    /// An iteration moved nothing: wait in the kernel (`wait`), sleep until shortly before the
    /// next release, or back off as the idle mode says.
    fn idle(&mut self, now: Instant, rx_wait: Option<&mut RxWait>, backoff: &mut Backoff) {
        let next = self
            .pairs
            .iter()
            .filter_map(|p| p.app.next_deadline())
            .min();
        if let Some(w) = rx_wait {
            // A queued frame keeps the wait as short as the timed sleep (the pacing audit's
            // stall bound stays that of the sleep); with none queued the loop waits up to the
            // next timer, and that wait is no stall.
            let queued = self.pairs.iter().any(|p| p.app.table().backlog() > 0);
            let cap = if queued { SLEEP_MAX } else { IDLE_WAIT_MAX };
            let wait = next.map_or(cap, |t| t.saturating_since(now).min(cap));
            if wait > SLEEP_MIN {
                let d = wait - SLEEP_EARLY;
                if !queued {
                    self.stalls.planned(now + d);
                }
                w.wait(std::time::Duration::from_nanos(d.as_nanos()));
            }
            return;
        }
        match (self.mode, next) {
            // Every queued frame waits for its release time (or an RP timer): the CPU is given
            // away until shortly before, instead of spinning on it. A frame that arrives
            // meanwhile waits at most the sleep in the receive ring.
            (IdleMode::Sleep(max), Some(t)) if t.saturating_since(now) > SLEEP_MIN => {
                let d = std::time::Duration::from_nanos(
                    (t.saturating_since(now) - SLEEP_EARLY).as_nanos(),
                );
                std::thread::sleep(d.min(max));
            }
            // Due at once: spin.
            (IdleMode::Sleep(_), Some(_)) => {}
            _ => backoff.after(0, || None),
        }
    }

    /// Every pair's figures, `secs` after the start.
    fn stats(&self, secs: f64) -> ApplianceStats {
        ApplianceStats {
            secs,
            pairs: (self.pairs.iter())
                .map(|p| PairStats {
                    label: p.label.clone(),
                    counters: p.app.counters(),
                    table: p.app.table().counters(),
                    flows: p.app.table().flows(),
                    tx_dropped: p.tx_dropped,
                })
                .collect(),
        }
    }
}

/// Every pair's summary: `{"appliance": [PAIR...], "secs": S}`, live and at exit.
fn snapshot(pairs: &[Pair], secs: f64) -> serde_json::Value {
    json!({"appliance": pairs.iter().map(|p| p.summary(secs)).collect::<Vec<_>>(), "secs": secs})
}

/// One inside/outside pair and what is its own.
struct Pair {
    label: String,
    inside: quench_port::netns::NsPort,
    outside: quench_port::netns::NsPort,
    app: Appliance<AnyFrame>,
    to_out: Vec<AnyFrame>,
    to_in: Vec<AnyFrame>,
    rx: Vec<AnyFrame>,
    scratch_out: Scratch,
    scratch_in: Scratch,
    /// Each backlogged flow's octets against its RP rate's integral per 100 ms window.
    audit: PaceAudit,
    /// Frames the ports did not take (ring full beyond the backlog bound) or had no buffer for.
    tx_dropped: u64,
    /// Sends or housekeeping calls a port refused, and the last reason.
    tx_errors: u64,
    last_error: Option<String>,
}

/// The loop sleeps only when the next release is further away than this (a sleep's own cost and
/// overshoot are a few microseconds).
pub const SLEEP_MIN: Duration = Duration::from_micros(20);
/// It wakes this much before the release, for the sleep's overshoot.
pub const SLEEP_EARLY: Duration = Duration::from_micros(5);
/// Longest sleep: what a frame arriving meanwhile may wait in the receive ring (at 1 Gbit/s,
/// ~9 full-size frames of the ring's 2048).
pub const SLEEP_MAX: Duration = Duration::from_micros(100);

/// Longest wait in the kernel with nothing queued (`--idle wait`): the workers' own
/// ([`quench_port::worker::IDLE_WAIT_MAX`]), in this loop's clock units.
const IDLE_WAIT_MAX: Duration =
    Duration::from_nanos(quench_port::worker::IDLE_WAIT_MAX.as_nanos() as u64);

/// The pacing audit's window (as `quench send`'s).
const AUDIT_WINDOW: Duration = Duration::from_millis(100);

/// Frames a pair keeps waiting for a full transmit ring before it drops (and counts) the rest.
const TX_BACKLOG: usize = 4 * BURST;

impl Pair {
    /// The pair `inside`/`outside` in `role`, its ports opened.
    fn open(
        cfg: &ApplianceConfig,
        options: &ApplianceOptions,
        table: TableConfig,
        stall: Duration,
        role: Role,
        i: &str,
        o: &str,
    ) -> anyhow::Result<Pair> {
        let origin = &options.origin;
        let (rp, np) = match role {
            Role::Rp => (cfg.rp(), cfg.np()),
            Role::Np => (Ok(HostRp::None), cfg.notification_point().map(Some)),
        };
        let mut app = Appliance::new(
            role,
            cfg.cn_tag,
            cfg.ect0,
            table,
            rp.with_context(|| origin.clone())?,
            np.with_context(|| origin.clone())?,
        )?;
        let inside = options.driver.open(i).context("--inside")?;
        let outside = options.driver.open(o).context("--outside")?;
        app.set_max_frame(outside.caps().max_frame);
        if cfg.pfc && role == Role::Rp {
            app.set_pfc(table.line_rate);
        }
        Ok(Pair {
            label: format!("{i}<->{o}"),
            inside,
            outside,
            app,
            to_out: Vec::with_capacity(TX_BACKLOG * 2),
            to_in: Vec::with_capacity(TX_BACKLOG * 2),
            rx: Vec::with_capacity(BURST),
            scratch_out: Scratch::default(),
            scratch_in: Scratch::default(),
            audit: PaceAudit::new(AUDIT_WINDOW, stall),
            tx_dropped: 0,
            tx_errors: 0,
            last_error: None,
        })
    }

    /// One pass over the pair; true when a frame moved or waits for ring space.
    fn poll(&mut self, now: Instant) -> anyhow::Result<bool> {
        // Before this iteration changes any rate (PaceAudit::sample's contract).
        // A flow PFC pauses may send nothing (802.1Qbb): its rate is zero meanwhile.
        let (app, core) = (&self.app, self.app.table().core());
        self.audit.sample(now, core, |id| {
            core.find(id)
                .filter(|&h| {
                    !core
                        .flow(h)
                        .is_some_and(|f| app.paused(now, f.spec.priority))
                })
                .map_or(Rate::ZERO, |h| core.rate(h))
        });
        let mut busy = false;
        self.rx.clear();
        self.inside.rx_burst(0, &mut self.rx, BURST)?;
        busy |= !self.rx.is_empty();
        // A burst of frames released at once must fit the transmit backlog.
        self.app
            .set_release_on_arrival(self.to_out.len() + BURST <= TX_BACKLOG);
        let (out, to_out) = (&mut self.outside, &mut self.to_out);
        self.app.on_inside_burst(
            now,
            &self.rx,
            |f| f.data(),
            |n| out.alloc(n),
            |a| match a {
                InsideAction::Send(f) => to_out.push(f),
                InsideAction::Queued | InsideAction::Dropped => {}
            },
        );
        self.rx.clear();
        self.outside.rx_burst(0, &mut self.rx, BURST)?;
        for f in self.rx.drain(..) {
            busy = true;
            let (inside, outside) = (&mut self.inside, &mut self.outside);
            match self
                .app
                .on_outside(now, f.data(), |n| inside.alloc(n), |n| outside.alloc(n))
            {
                OutsideAction::Consumed => {}
                OutsideAction::Pass { inside, cnp } => {
                    self.to_in.extend(inside);
                    self.to_out.extend(cnp);
                }
            }
        }
        let outside = &mut self.outside;
        self.to_out
            .extend(self.app.announce(now, |n| outside.alloc(n)));
        if self.app.next_deadline().is_some_and(|t| t <= now) {
            self.app.on_timeout(now);
        }
        while self.to_out.len() < TX_BACKLOG {
            let Some(r) = self.app.poll_release(now) else {
                break;
            };
            self.app.on_sent(now, r.arrived);
            self.to_out.push(r.frame);
            busy = true;
        }
        for (port, q, scratch) in [
            (&mut self.outside, &mut self.to_out, &mut self.scratch_out),
            (&mut self.inside, &mut self.to_in, &mut self.scratch_in),
        ] {
            // A refused send (a frame over the link's MTU, a link going down) is counted and
            // the loop goes on: one frame must not stop the appliance.
            if !q.is_empty() {
                match port.tx_burst_counted(0, q, scratch) {
                    Ok((_, dropped)) => self.tx_dropped += dropped,
                    Err(e) => {
                        self.tx_errors += 1;
                        self.last_error = Some(e.to_string());
                    }
                }
                if q.len() > TX_BACKLOG {
                    self.tx_dropped += (q.len() - TX_BACKLOG) as u64;
                    q.truncate(TX_BACKLOG);
                }
            }
            if let Err(e) = port.poll() {
                self.tx_errors += 1;
                self.last_error = Some(e.to_string());
            }
        }
        Ok(busy || !self.to_out.is_empty())
    }

    /// The pair's counters, flows and latency as JSON: the live answer on the control socket
    /// and the report at exit have this one shape.
    fn summary(&self, secs: f64) -> serde_json::Value {
        let mut v = self.app.report(secs);
        v["pair"] = json!(self.label);
        v["pacing"] = self.audit.to_json();
        v["lag_dropped_ns"] = json!(self.app.table().core().lag_dropped().as_nanos());
        v["tx_dropped"] = json!(self.tx_dropped);
        v["tx_errors"] = json!(self.tx_errors);
        v["last_error"] = json!(self.last_error);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::switch::control::query_json;
    use quench_port::heap::HeapFrame;

    /// `quench stats` against a running appliance: the control thread asks, the loop (here the
    /// test's thread) answers between two iterations, the client gets the loop's figures; the
    /// socket is 0660 and goes at the end.
    #[test]
    fn the_control_socket_serves_the_loops_snapshot() {
        let line = Rate::from_gbps(1);
        let rp = HostRp::qcn(rp::QcnParams::default().profile(line).unwrap());
        let mut app: Appliance<HeapFrame> =
            Appliance::new(Role::Rp, true, false, TableConfig::default(), rp, None).unwrap();
        let frame = quench_wire::frame::test_frame(1, 1, 0, units::Ecn::NotEct, None);
        let t0 = Instant::from_nanos(1_000);
        assert!(matches!(
            app.on_inside(t0, &frame, HeapFrame::zeroed),
            InsideAction::Queued
        ));
        assert!(
            app.poll_release(t0).is_none(),
            "put on the wheel, due a tick later"
        );
        let r = app.poll_release(t0 + Duration::from_micros(1)).unwrap();
        app.on_sent(t0 + Duration::from_micros(3), r.arrived);

        let path = std::env::temp_dir().join(format!("qn-appl-ctl-{}.sock", std::process::id()));
        let sock = ControlSocket::bind(&path).unwrap();
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o660, "{mode:o}");
        let published = Arc::new(Published::new("{}".into()));
        let stop = Arc::new(AtomicBool::new(false));
        let server = {
            let (p, s) = (published.clone(), stop.clone());
            std::thread::spawn(move || sock.serve_with(&Clock::monotonic(), &|| p.ask(), s))
        };
        let client = {
            let path = path.clone();
            std::thread::spawn(move || query_json(&path))
        };
        let mut answered = 0;
        while !client.is_finished() {
            if published.wanted() {
                let body = json!({"appliance": [app.report(2.0)], "secs": 2.0});
                published.publish(body.to_string());
                answered += 1;
            }
            std::thread::yield_now();
        }
        let v = client.join().unwrap().unwrap();
        assert_eq!(answered, 1);
        let pair = &v["appliance"][0];
        assert_eq!(pair["table"]["released_frames"], 1);
        assert_eq!(pair["flows_held"], 1);
        assert_eq!(pair["top_flows"][0]["rate_mbps"], 1000.0);
        stop.store(true, Ordering::Relaxed);
        server.join().unwrap().unwrap();
        assert!(!path.exists());
    }
}
