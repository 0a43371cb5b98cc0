//! The poll loop of `quench send`: one busy-polling loop reads the clock once per iteration and
//! serves every sender port (feedback in, reaction-point timers, the paced frames out) and the
//! `--sink` receiver ports beside them, until the end time or a stop signal; then it flushes
//! what was generated but not yet sent and lets the sinks linger. The start and the report are
//! [`super::runtime`]'s.
use std::sync::atomic::{AtomicBool, Ordering};

use units::{Duration, Instant};

use super::audit::PaceAudit;
use super::worker::SendWorker;
use crate::recv::sink::Sink;
use crate::recv::worker::RecvWorker;
use quench_port::any::AnyFrame;
use quench_port::netns::NsPort;
use quench_port::probe::{Iteration, LoopStalls, Probe};
use quench_port::worker::{Backoff, IdleMode};
use quench_port::{Frame as _, Port, BURST, MAX_FRAME};
use quench_wire::time::{shared_now, Clock};

/// One port of the sender and what is its own: its flows and their reaction points, the frames
/// it has yet to hand to the ring, its pacing audit.
pub struct SendPort {
    /// The `--iface` argument, `[NETNS/]IFACE`.
    pub label: String,
    pub port: NsPort,
    pub w: SendWorker,
    /// Frames built but not yet taken by the transmit ring, in order.
    pub tx: Vec<AnyFrame>,
    /// Frames built that found no transmit buffer (dropped).
    pub no_buffer: u64,
    pub audit: PaceAudit,
    /// The round-trip meter: takes the test frames a reflector (`quench recv --reflect`) sends
    /// back to this port, before the sender sees them.
    pub rtt: Option<RecvWorker>,
}

impl SendPort {
    /// `w` on `port`, audited in windows of `window` with loop gaps over `stall` as stalls.
    pub fn new(
        label: String,
        port: NsPort,
        w: SendWorker,
        window: Duration,
        stall: Duration,
    ) -> Self {
        SendPort {
            label,
            port,
            w,
            tx: Vec::with_capacity(BURST),
            no_buffer: 0,
            audit: PaceAudit::new(window, stall),
            rtt: None,
        }
    }

    /// With round-trip meter `rtt` ([`RecvWorker::round_trip`]).
    pub fn with_rtt(self, rtt: RecvWorker) -> Self {
        SendPort {
            rtt: Some(rtt),
            ..self
        }
    }
}

/// When the loop stops, how long the sinks keep receiving after it, and what it does when idle.
pub struct LoopLimits<'a> {
    pub end: Instant,
    pub stop: &'a AtomicBool,
    pub linger: Duration,
    pub idle: IdleMode,
}

/// Runs the loop until `limits.end` or a stop; returns the seconds from `t0` to the loop's end.
/// `stalls` records the loop's scheduling gaps; `status` is called once per iteration with the
/// loop's clock (the command's live progress: it checks whether one is due).
pub fn run(
    ports: &mut [SendPort],
    sinks: &mut [Sink],
    clock: &Clock,
    t0: Instant,
    limits: &LoopLimits,
    stalls: &mut LoopStalls,
    status: &mut impl FnMut(Instant, &[SendPort], &[Sink]) -> std::io::Result<()>,
) -> anyhow::Result<f64> {
    let mut rx = Vec::with_capacity(BURST);
    let mut buf = vec![0u8; MAX_FRAME + 64];
    let mut fds = Vec::new();
    for o in ports.iter() {
        o.port.wait_handle(&mut fds);
    }
    for s in sinks.iter() {
        s.wait_handle(&mut fds);
    }
    let mut idle = Backoff::new(limits.idle, fds);
    loop {
        let now = clock.now();
        if now >= limits.end || limits.stop.load(Ordering::Relaxed) {
            break;
        }
        let stamp = shared_now();
        let mut work = 0;
        for o in ports.iter_mut() {
            let SendPort {
                port,
                w,
                tx,
                no_buffer,
                audit,
                rtt,
                ..
            } = o;
            audit.sample(now, &w.core, |f| w.paced_rate(now, f));
            work += receive(port, w, rtt, now, stamp, &mut rx)?;
            w.on_timeout(now);
            while tx.len() < BURST {
                let Some((_, n)) = w.next_frame(now, stamp, &mut buf) else {
                    break;
                };
                match port.import(&buf[..n]) {
                    Some(f) => tx.push(f),
                    None => *no_buffer += 1,
                }
            }
            work += tx.len();
            if !tx.is_empty() {
                // Frames the ring did not take stay in `tx`, in order, for the next burst.
                port.tx_burst(0, tx)?;
            }
            port.poll()?;
        }
        for s in sinks.iter_mut() {
            work += s.step()?.0;
        }
        status(now, ports, sinks)?;
        stalls.tick(
            now,
            if work > 0 {
                Iteration::Frames
            } else {
                Iteration::Idle
            },
        );
        idle.after(work, || next_deadline(ports, sinks, now, stamp));
    }
    let secs = (clock.now() - t0).as_secs_f64();
    // Frames generated but still waiting (for ring space, or in the ring for the kernel) go
    // out now, so that what the report counts as sent was sent; what is still queued after
    // 10 ms (a device that keeps refusing) is reported as unsent.
    let flush_end = clock.now() + Duration::from_millis(10);
    for o in ports.iter_mut() {
        loop {
            if !o.tx.is_empty() {
                o.port.tx_burst(0, &mut o.tx)?;
            }
            o.port.poll()?;
            let queued = o.port.stats().tx_queued.unwrap_or(0);
            if (o.tx.is_empty() && queued == 0) || clock.now() >= flush_end {
                break;
            }
        }
    }
    // Frames still on their way (to the sinks, or reflected back to a port) arrive during the
    // linger instead of counting as lost.
    let linger_end = clock.now() + limits.linger;
    let lingering = !sinks.is_empty() || ports.iter().any(|o| o.rtt.is_some());
    while lingering && clock.now() < linger_end && !limits.stop.load(Ordering::Relaxed) {
        let (now, stamp) = (clock.now(), shared_now());
        let mut work = 0;
        for s in sinks.iter_mut() {
            work += s.step()?.0;
        }
        for o in ports.iter_mut().filter(|o| o.rtt.is_some()) {
            work += receive(&mut o.port, &mut o.w, &mut o.rtt, now, stamp, &mut rx)?;
        }
        let linger_left = linger_end.saturating_since(clock.now());
        idle.after(work, || Some(linger_left));
    }
    Ok(secs)
}

/// The time from `now` (the loop's clock; `stamp` the shared clock read with it) to the loop's
/// next deadline: a flow's start or release, a reaction point's timer, a sink's PAUSE.
fn next_deadline(
    ports: &[SendPort],
    sinks: &[Sink],
    now: Instant,
    stamp: Instant,
) -> Option<Duration> {
    let senders = ports
        .iter()
        .filter_map(|o| o.w.core.next_deadline())
        .map(|t| t.saturating_since(now));
    let sinks = sinks
        .iter()
        .filter_map(Sink::next_deadline)
        .map(|t| t.saturating_since(stamp));
    senders.chain(sinks).min()
}

/// Reads one burst of a sender port: reflected test frames to the round-trip meter `rtt`, the
/// rest (feedback, PFC) to the sender. `now` is the loop's clock, `stamp` the shared clock read
/// with it. Returns the frames read.
fn receive(
    port: &mut NsPort,
    w: &mut SendWorker,
    rtt: &mut Option<RecvWorker>,
    now: Instant,
    stamp: Instant,
    rx: &mut Vec<AnyFrame>,
) -> anyhow::Result<usize> {
    port.rx_burst(0, rx, BURST)?;
    let n = rx.len();
    // A reflected frame without a kernel stamp is timed after the burst arrived, on the clock
    // its transmit stamp was read from.
    let rx_at = if n == 0 { stamp } else { shared_now() };
    for f in rx.drain(..) {
        let reflected = rtt
            .as_mut()
            .is_some_and(|m| m.on_frame(rx_at, f.rx_stamp(), f.data(), &mut |_| {}));
        if !reflected {
            w.on_rx_stamped(now, rx_at, f.data());
        }
    }
    if let Some(m) = rtt {
        m.on_tick(rx_at);
    }
    Ok(n)
}
