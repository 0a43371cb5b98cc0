//! The receiver as a library: [`RecvLoop::start`] takes a port and the receiver's options and
//! returns a [`RecvHandle`] for live stats, stop and join (the final report, [`SinkEnd`]);
//! `quench recv` is this plus argument parsing and printing.
//!
//! One loop on a thread of its own polls the port ([`Sink::step`]: count, answer CE marks with
//! CNPs, reflect, pause) until the duration is over or a stop.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use units::{Duration, Instant};

use super::sink::{Sink, SinkEnd, SinkOptions};
use super::worker::RecvWorker;
use crate::live::{LoopHandle, Published};
use crate::PortDriver;
use quench_port::worker::{Backoff, Idle, IdleMode};
use quench_wire::time::shared_now;

/// How to run: the port and what `quench recv`'s flags say.
pub struct RecvOptions {
    /// `[NETNS/]IFACE`.
    pub iface: String,
    pub driver: PortDriver,
    pub sink: SinkOptions,
    pub duration: Duration,
    /// What the loop does when an iteration moved nothing ([`Idle::for_this_thread`]; under
    /// `auto`, yield on a shared CPU).
    pub idle: Idle,
    /// A flag that stops the loop when set (e.g. by signal handlers); `None`: its own.
    pub stop: Option<Arc<AtomicBool>>,
}

/// The receiver's entry point (see the module docs).
pub struct RecvLoop;

/// A running receiver: [`LoopHandle::stats`], stop, join (the [`SinkEnd`]).
pub type RecvHandle = LoopHandle<RecvStats, SinkEnd>;

/// The receiver's figures at one time of the loop.
#[derive(Clone, Copy, Debug, Default)]
pub struct RecvStats {
    /// Test frames and their octets received, over every flow.
    pub frames: u64,
    pub bytes: u64,
    /// Sequence numbers still missing.
    pub lost: u64,
    pub flows: usize,
    pub cnps_sent: u64,
    pub reflected: u64,
}

impl RecvStats {
    /// `w`'s figures now.
    pub fn of(w: &RecvWorker) -> RecvStats {
        let flows = w.receiver().flows();
        let c = w.counters();
        RecvStats {
            frames: flows.iter().map(|f| f.frames).sum(),
            bytes: flows.iter().map(|f| f.bytes).sum(),
            lost: flows.iter().map(|f| f.missing).sum(),
            flows: flows.len(),
            cnps_sent: c.cnps_sent,
            reflected: c.reflected,
        }
    }
}

impl RecvLoop {
    /// Opens the port and starts the loop on a thread of its own; returns once it runs, or
    /// with the first error (nothing left running).
    pub fn start(options: RecvOptions) -> anyhow::Result<RecvHandle> {
        let RecvOptions {
            iface,
            driver,
            sink,
            duration,
            idle,
            stop,
        } = options;
        LoopHandle::spawn(
            "quench-recv",
            "the receiver's loop",
            stop,
            move || {
                let sink = Sink::new(driver.open(&iface)?, sink)?;
                let (mode, why) = idle.for_this_thread(IdleMode::Yield);
                let note = format!("the loop {} when idle ({why})", mode.what());
                Ok(((sink, mode), vec![note]))
            },
            move |(sink, mode), stop, stats| run(sink, mode, shared_now() + duration, stop, stats),
        )
    }
}

/// The loop: one [`Sink::step`] per iteration until `end` or `stop`; the live answers between
/// iterations.
fn run(
    mut sink: Sink,
    mode: IdleMode,
    end: Instant,
    stop: &AtomicBool,
    stats: &Published<RecvStats>,
) -> anyhow::Result<SinkEnd> {
    let mut fds = Vec::new();
    sink.wait_handle(&mut fds);
    let mut idle = Backoff::new(mode, fds);
    loop {
        let (n, now) = sink.step()?;
        idle.after(n, || {
            let pause = sink.next_deadline().unwrap_or(end);
            Some(pause.min(end).saturating_since(now))
        });
        if stats.wanted() {
            stats.publish(RecvStats::of(sink.worker()));
        }
        if now >= end || stop.load(Ordering::Relaxed) {
            break;
        }
    }
    stats.publish(RecvStats::of(sink.worker()));
    Ok(sink.finish())
}
