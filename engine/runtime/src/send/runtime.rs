//! The sender as a library: [`SendLoop::start`] takes each port's configuration and the options
//! and returns a [`SendHandle`] for live stats, stop and join (the final report); `quench send`
//! is this plus argument parsing and printing.
//!
//! Each port gets its own copy of its configuration's flows, its own flow-id range and reaction
//! points; one loop on a thread of its own ([`super::run::run`]) serves every port and the
//! receiver ports (sinks) beside them, until the duration is over or a stop, then flushes and
//! lets the sinks linger.
use std::net::Ipv4Addr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use rand_xoshiro::rand_core::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use units::{Duration, Instant};

use super::audit::{share_within, PaceAudit};
use super::config::{default_catch_up_us, host_rp, Cc, PortConfig};
use super::run::{LoopLimits, SendPort};
use super::worker::{Addressing, SendCounters, SendWorker};
use crate::live::{LoopHandle, Published};
use crate::recv::sink::{Sink, SinkEnd, SinkOptions};
use crate::recv::worker::RecvWorker;
use crate::PortDriver;
use quench_node::flowgen::schedule;
use quench_port::probe::LoopStalls;
use quench_port::worker::{Idle, IdleMode};
use quench_port::{Port, MAX_FRAME};
use quench_wire::time::Clock;
use quench_wire::MacAddr;

/// One sender port: `[NETNS/]IFACE`, its configuration, its source address if not the
/// configuration's.
pub struct SendPortSpec {
    pub label: String,
    pub config: PortConfig,
    pub src_ip: Option<Ipv4Addr>,
}

/// How to run: the ports and what `quench send`'s flags say beside the files.
pub struct SendOptions {
    pub ports: Vec<SendPortSpec>,
    pub driver: PortDriver,
    /// Port k's flows are numbered from `flow_base + k * flow_stride`.
    pub flow_base: u32,
    pub flow_stride: u32,
    /// Receivers in the same loop: `[NETNS/]IFACE` and their options.
    pub sinks: Vec<(String, SinkOptions)>,
    /// The clock id stamped into the test headers instead of this host's
    /// ([`quench_wire::time::clock_id`]): a receiver on this host then takes the sender for
    /// another machine (for tests).
    pub clock_id: Option<u32>,
    pub duration: Duration,
    /// How long the sinks (and round-trip meters) keep receiving after the last frame is sent.
    pub linger: Duration,
    /// What the loop does when an iteration moved nothing ([`Idle::for_this_thread`]; under
    /// `auto`, yield on a shared CPU).
    pub idle: Idle,
    /// A flag that stops the loop when set (e.g. by signal handlers); `None`: its own.
    pub stop: Option<Arc<AtomicBool>>,
}

/// The sender's entry point (see the module docs).
pub struct SendLoop;

/// A running sender: [`LoopHandle::stats`] (every port's and sink's figures), stop, join (the
/// [`SendReport`]).
pub type SendHandle = LoopHandle<SendStats, SendReport>;

/// Every port's and sink's figures at one time of the loop.
#[derive(Clone, Copy, Debug, Default)]
pub struct SendStats {
    /// The ports' frames and octets sent, feedback and PFC frames received.
    pub sent: SendCounters,
    /// Priorities paused now on any port.
    pub paused_mask: u8,
    /// Test frames a reflector sent back.
    pub reflected_back: u64,
    /// Test frames the sinks received.
    pub sink_frames: u64,
}

/// What became of the frames a port was handed, as its kernel side tells.
#[derive(Clone, Copy, Debug, Default)]
pub struct KernelTx {
    /// Still queued at the end ([`quench_port::PortStats::tx_queued`] plus the sender's own
    /// queue).
    pub unsent: usize,
    pub refusals: Option<u64>,
    pub drops: Option<u64>,
    /// Frames the kernel dropped for want of room in the port's receive ring (feedback among
    /// them), where the port can tell.
    pub rx_drops: Option<u64>,
}

/// One port at the end.
pub struct PortReport {
    pub label: String,
    pub cc: Cc,
    /// Its flows, counters and reaction points.
    pub w: SendWorker,
    pub audit: PaceAudit,
    /// Frames built that found no transmit buffer.
    pub no_buffer: u64,
    pub kernel: KernelTx,
    /// The round-trip meter (frames a reflector sent back).
    pub rtt: Option<RecvWorker>,
}

/// What a stopped sender leaves.
pub struct SendReport {
    /// From the start to the loop's end (before the flush and the linger).
    pub secs: f64,
    /// The loop's scheduling stalls (shared by every port).
    pub stalls: LoopStalls,
    pub ports: Vec<PortReport>,
    pub sinks: Vec<SinkEnd>,
}

impl SendLoop {
    /// Opens the ports and starts the loop on a thread of its own; returns once it runs, or
    /// with the first error (nothing left running).
    pub fn start(options: SendOptions) -> anyhow::Result<SendHandle> {
        let stop = options.stop.clone();
        LoopHandle::spawn(
            "quench-send",
            "the sender's loop",
            stop,
            move || {
                let s = State::prepare(options)?;
                let notes = s.notes.clone();
                Ok((s, notes))
            },
            State::run,
        )
    }
}

/// The loop's own state (on its thread).
struct State {
    ports: Vec<SendPort>,
    ccs: Vec<Cc>,
    sinks: Vec<Sink>,
    clock: Clock,
    t0: Instant,
    end: Instant,
    linger: Duration,
    idle: IdleMode,
    /// The tightest catch-up bound among the ports, at most 1 ms: loop gaps over it are stalls.
    stall: Duration,
    notes: Vec<String>,
}

impl State {
    /// The decisions of [`SendLoop::start`] on the loop's thread: each port's flows, worker
    /// and port, the sinks, the idle mode.
    fn prepare(options: SendOptions) -> anyhow::Result<State> {
        // One loop: its stall accounting uses the tightest catch-up bound among the ports, at
        // most 1 ms (with a long bound and a catch-up speed, a gap costs nothing for good, but
        // it is still time the pacing windows had to make up, and what the report should
        // show).
        let stall = (options.ports.iter())
            .map(|p| p.config.pacing.max_catch_up)
            .min()
            .unwrap_or(Duration::from_micros(u64::from(default_catch_up_us())))
            .min(Duration::from_millis(1));
        let clock_id = match options.clock_id {
            Some(id) if id == 0 || id > 0xFF_FFFF => {
                anyhow::bail!("--clock-id {id}: must be 1 ..= 0xffffff (24 bits, 0 means not said)")
            }
            Some(id) => id,
            None => quench_wire::time::clock_id(),
        };
        let clock = Clock::new();
        let t0 = clock.now();
        let mut ports = Vec::with_capacity(options.ports.len());
        for (k, spec) in options.ports.iter().enumerate() {
            ports.push(open_port(&options, k, spec, clock_id, t0, stall)?);
        }
        let mut sinks = Vec::with_capacity(options.sinks.len());
        for (label, opts) in options.sinks {
            sinks.push(Sink::new(options.driver.open(&label)?, opts)?);
        }
        let (idle, why) = options.idle.for_this_thread(IdleMode::Yield);
        Ok(State {
            ports,
            ccs: options.ports.iter().map(|p| p.config.cc).collect(),
            sinks,
            clock,
            t0,
            end: t0 + options.duration,
            linger: options.linger,
            idle,
            stall,
            notes: vec![format!("the loop {} when idle ({why})", idle.what())],
        })
    }

    /// Runs the loop ([`super::run::run`]), answering `stats` between iterations, then the
    /// report.
    fn run(
        mut self,
        stop: &AtomicBool,
        stats: &Published<SendStats>,
    ) -> anyhow::Result<SendReport> {
        let limits = LoopLimits {
            idle: self.idle,
            end: self.end,
            stop,
            linger: self.linger,
        };
        let mut stalls = LoopStalls::new(self.stall);
        let mut answer = |now, ports: &[SendPort], sinks: &[Sink]| {
            if stats.wanted() {
                stats.publish(SendStats::of(now, ports, sinks));
            }
            Ok(())
        };
        let (ports, sinks) = (&mut self.ports, &mut self.sinks);
        let secs = super::run::run(
            ports,
            sinks,
            &self.clock,
            self.t0,
            &limits,
            &mut stalls,
            &mut answer,
        )?;
        stats.publish(SendStats::of(self.clock.now(), &self.ports, &self.sinks));
        let ports = (self.ports.into_iter().zip(self.ccs))
            .map(|(mut o, cc)| {
                let s = o.port.stats();
                PortReport {
                    kernel: KernelTx {
                        unsent: o.tx.len() + s.tx_queued.unwrap_or(0),
                        refusals: s.tx_refusals,
                        drops: s.tx_kernel_drops,
                        rx_drops: s.rx_kernel_drops,
                    },
                    label: o.label,
                    cc,
                    w: o.w,
                    audit: o.audit,
                    no_buffer: o.no_buffer,
                    rtt: o.rtt,
                }
            })
            .collect();
        Ok(SendReport {
            secs,
            stalls,
            ports,
            sinks: self.sinks.into_iter().map(Sink::finish).collect(),
        })
    }
}

/// Port `k` of `options`: its flows scheduled from `t0`, its worker and reaction points, the
/// port opened, its round-trip meter.
fn open_port(
    options: &SendOptions,
    k: usize,
    spec: &SendPortSpec,
    clock_id: u32,
    t0: Instant,
    stall: Duration,
) -> anyhow::Result<SendPort> {
    let pc = &spec.config;
    let (cfg, file, cc, line) = (&pc.cfg, &pc.file, pc.cc, pc.line);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(cfg.seed.wrapping_add(k as u64));
    let first = (k as u32)
        .checked_mul(options.flow_stride)
        .and_then(|o| o.checked_add(options.flow_base))
        .ok_or_else(|| anyhow::anyhow!("--flow-base + {k} x --flow-stride overflows a flow id"))?;
    let flows = schedule(&cfg.flows, &pc.dir, first, &mut rng)
        .map_err(|e| anyhow::anyhow!("{file}: {e}"))?;
    if options.ports.len() > 1 && flows.len() as u64 > u64::from(options.flow_stride) {
        anyhow::bail!(
            "{file} gives each port {} flows, more than --flow-stride {}: the ports' flow ids \
             would overlap",
            flows.len(),
            options.flow_stride
        );
    }
    let port = options.driver.open(&spec.label)?;
    let mac = (port.caps().mac).unwrap_or(MacAddr(2, 0, 0, 0, 0, 1 + k as u8));
    let src_ip = spec.src_ip.unwrap_or(cfg.src_ip);
    let base_rtt = Duration::from_micros(u64::from(cfg.base_rtt_us));
    let rp = host_rp(
        cc,
        cfg.qcn_rp.as_ref(),
        cfg.dcqcn_rp.as_ref(),
        base_rtt,
        line,
    )
    .map_err(|e| anyhow::anyhow!("{file}: {e}"))?;
    let addressing = Addressing {
        src_mac: mac,
        src_ip,
        dst_ip: cfg.dst_ip,
        vlan: cfg.vlan,
        ecn: pc.ecn,
        cn_tag: cc == Cc::Qcn,
    };
    let frame_len = cfg.frame_len.min(MAX_FRAME as u32);
    let w = SendWorker::new(pc.pacing, frame_len, flows, t0, rp, addressing)
        .map_err(|e| anyhow::anyhow!("{file}: {e}"))?
        .with_link_rate(line)
        .with_clock(clock_id);
    let rtt = RecvWorker::round_trip(clock_id, src_ip, Duration::from_millis(100), mac);
    let window = Duration::from_millis(100);
    Ok(SendPort::new(spec.label.clone(), port, w, window, stall).with_rtt(rtt))
}

impl SendStats {
    /// The figures of `ports` and `sinks` at `now` (the loop's clock).
    fn of(now: Instant, ports: &[SendPort], sinks: &[Sink]) -> SendStats {
        let mut s = SendStats::default();
        for o in ports {
            let (c, k) = (&mut s.sent, o.w.counters());
            (c.frames, c.bytes) = (c.frames + k.frames, c.bytes + k.bytes);
            (c.cnms, c.cnps, c.pfc_rx) = (c.cnms + k.cnms, c.cnps + k.cnps, c.pfc_rx + k.pfc_rx);
            s.paused_mask |= o.w.paused_mask(now);
        }
        s.reflected_back = (ports.iter())
            .filter_map(|o| o.rtt.as_ref())
            .flat_map(|m| m.receiver().flows())
            .map(|f| f.frames)
            .sum();
        s.sink_frames = (sinks.iter())
            .flat_map(|s| s.worker().receiver().flows())
            .map(|f| f.frames)
            .sum();
        s
    }
}

impl PortReport {
    /// The port's summary as one JSON object: pacing audit, scheduling, counters, kernel
    /// figures, each flow's frames and rates (`secs`: the run's length).
    pub fn to_json(&self, secs: f64, stalls: &LoopStalls) -> serde_json::Value {
        let (w, k) = (&self.w, &self.kernel);
        let c = w.counters();
        let flows: Vec<serde_json::Value> = (w.flows())
            .map(|(spec, f)| {
                let mbps = f.bytes_sent as f64 * 8.0 / secs / 1e6;
                serde_json::json!({
                    "flow": spec.flow.0, "frames": f.seq, "sent_bps": mbps * 1e6,
                    "rate_now_bps": w.rate(spec.flow).as_bps(),
                })
            })
            .collect();
        serde_json::json!({
            "port": self.label,
            "pacing": self.audit.to_json(),
            "scheduling": {"stalls": stalls.count, "stalled_ns": stalls.total.as_nanos(),
                           "longest_stall_ns": stalls.longest.as_nanos(),
                           "lag_dropped_ns": w.core.lag_dropped().as_nanos()},
            "cc": format!("{:?}", self.cc).to_lowercase(), "seconds": secs, "frames": c.frames,
            "cnms": c.cnms, "cnps": c.cnps, "unknown_feedback": c.unknown_feedback,
            "forged_feedback": c.forged.total(), "forged": c.forged,
            "refused_feedback": c.refused_feedback, "pfc_rx": c.pfc_rx,
            "acks": c.acks, "acks_with_int": c.acks_with_int, "acks_cutting": c.acks_cutting,
            "no_buffer": self.no_buffer, "unsent": k.unsent, "tx_refusals": k.refusals,
            "tx_kernel_drops": k.drops, "rx_kernel_drops": k.rx_drops, "flows": flows,
        })
    }
}

impl PortReport {
    /// The port's lines: per-flow rates, feedback counts, what did not leave, the pacing audit,
    /// the loop's scheduling stalls (shared by every port of the loop).
    pub fn table(&self, secs: f64, stalls: &LoopStalls) -> String {
        use std::fmt::Write as _;
        let (w, k, mut t) = (&self.w, &self.kernel, String::new());
        let c = w.counters();
        let _ = writeln!(
            t,
            "{:>6} {:>10} {:>12} {:>12}",
            "flow", "frames", "Mb/s sent", "rate now"
        );
        for (spec, f) in w.flows() {
            let mbps = f.bytes_sent as f64 * 8.0 / secs / 1e6;
            let rate = w.rate(spec.flow);
            let _ = writeln!(t, "{:>6} {:>10} {mbps:>12.1} {rate:>12}", spec.flow, f.seq);
        }
        let _ =
            writeln!(
            t,
            "sent {} frames in {secs:.1} s; feedback: {} CNMs, {} CNPs, {} for unknown flows, {} \
             forged, {} refused; {} PFC frames; {} frames without a buffer",
            c.frames, c.cnms, c.cnps, c.unknown_feedback, c.forged.total(), c.refused_feedback,
            c.pfc_rx, self.no_buffer
        );
        if c.acks > 0 {
            let _ = writeln!(
                t,
                "ACKs: {} ({} echoing INT hops, {} cutting the rate)",
                c.acks, c.acks_with_int, c.acks_cutting
            );
        }
        if k.unsent > 0 {
            let _ = writeln!(
                t,
                "not sent: {} frames still queued (here or in the port's ring) at the end",
                k.unsent
            );
        }
        if let Some(r) = k.refusals.filter(|&r| r > 0) {
            let _ = writeln!(
                t,
                "the device refused {r} transmit attempts (peer down or backlog full); each was \
                 retried"
            );
        }
        if let Some(d) = k.drops.filter(|&d| d > 0) {
            let _ = writeln!(
                t,
                "lost: {d} frames the kernel took and dropped unsent (the device refused them)"
            );
        }
        let audit = &self.audit;
        // The windows no stall touched: what the pacer itself gets wrong, apart from the CPU
        // being taken away.
        if let Some(d) = audit.max_abs() {
            let _ = writeln!(
                t,
                "pacing: sent vs RP rate over {} windows of 100 ms: {:.1} % within 1 %, largest \
                 deviation {:.3} %",
                audit.deviations.len(),
                100.0 * audit.within(0.01).unwrap_or(0.0),
                100.0 * d
            );
            let _ =
                writeln!(
                t,
                "pacing: the {} windows no loop stall over the catch-up bound touched: {:.1} % \
                 within 1 %, largest deviation {:.3} %",
                audit.unstalled().count(),
                100.0 * share_within(audit.unstalled(), 0.01).unwrap_or(0.0),
                100.0 * audit.unstalled().map(f64::abs).reduce(f64::max).unwrap_or(0.0)
            );
        }
        let _ = writeln!(
            t,
            "scheduling: {stalls}; transmission time given up at the catch-up bound: {:.1} ms",
            w.core.lag_dropped().as_nanos() as f64 / 1e6
        );
        t
    }
}
