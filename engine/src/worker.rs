//! Worker threads: one per core, pinned, polling in a run-to-completion loop until told to
//! stop. The stop flag is the only shared state a worker reads every iteration (a relaxed
//! load); everything else it owns.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use units::Instant;

use crate::time::Clock;

/// The cores this process may run on, in order (falls back to core 0 when unknown).
pub fn cores() -> Vec<core_affinity::CoreId> {
    let c = core_affinity::get_core_ids().unwrap_or_default();
    if c.is_empty() {
        vec![core_affinity::CoreId { id: 0 }]
    } else {
        c
    }
}

/// Spawns a thread named `name` pinned to the `index`-th usable core (wrapping around).
pub fn spawn_pinned<T: Send + 'static>(
    index: usize,
    name: String,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::io::Result<JoinHandle<T>> {
    let cores = cores();
    let core = cores[index % cores.len()];
    std::thread::Builder::new().name(name).spawn(move || {
        // Pinning can fail in a restricted cpuset; the worker then still runs, unpinned.
        let _ = core_affinity::set_for_current(core);
        f()
    })
}

/// Moves the calling thread (and the threads it spawns afterwards) off the cores that
/// [`spawn_pinned`] gives indices `0..workers`, onto the usable cores left, if any are left;
/// else it stays where it may run. For a process's threads that only wait and report (the
/// switch's main and control-socket threads): each wake-up on a worker's core preempts the
/// worker for tens of microseconds, the frames it holds waiting meanwhile. Returns whether the
/// thread moved.
pub fn keep_off_workers(workers: usize) -> bool {
    let rest: Vec<_> = cores().into_iter().skip(workers).collect();
    if rest.is_empty() {
        return false;
    }
    // Safety: a zeroed cpu_set_t is an empty set; CPU_SET writes inside it (ids come from the
    // kernel's own affinity mask, below CPU_SETSIZE); sched_setaffinity reads `size_of` bytes.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for c in &rest {
            libc::CPU_SET(c.id, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// Polls `step(now)` until `stop` is set, reading the clock once per iteration. `step` returns
/// the work it did; idle iterations back off as [`Idle`] says.
pub fn run_loop(
    clock: &Clock,
    stop: &AtomicBool,
    mut idle: Idle,
    mut step: impl FnMut(Instant) -> usize,
) {
    while !stop.load(Ordering::Relaxed) {
        let now = clock.now();
        idle.after(step(now));
    }
}

/// Idle back-off for poll loops: the first [`Idle::SPINS`] idle iterations in a row spin with a
/// CPU relax hint (poll mode: a frame that arrives is seen within a microsecond, and sleeping is
/// useless for timing here), every further one yields the CPU (`sched_yield`). Why yield at
/// all: when busy-polling processes outnumber cores (the 2-core testbed runs a switch, two
/// senders and a receiver), a loop that only spins holds the CPU its own frames are waiting for
/// (the peer that would produce them cannot run). A yield costs a system call, about a
/// microsecond, when no other task wants the CPU.
///
/// [`Idle::spinning`] never yields: for a loop with a core of its own (`quench switch
/// --busy-poll`), where a yield can only hand the CPU to someone whose time slice then delays
/// the frames that arrive meanwhile.
///
/// [`Idle::sleeping`] sleeps instead of yielding: a yield returns at once when nobody else
/// wants this CPU, so a yielding loop never lets its CPU go idle, and the scheduler only moves
/// a runnable task there (from a busier CPU) at its periodic balancing, not at the moment it
/// would go idle. On the 2-CPU testbed of scripts/appliance.sh the switch's yielding loop held
/// one CPU while the appliance, the iperf3 senders and their softirqs queued on the other. The
/// price is the sleep itself: a frame that arrives meanwhile waits up to the sleep (plus the
/// timer's wake-up) in the receive ring.
#[derive(Debug, Default)]
pub struct Idle {
    run: u32,
    never_yield: bool,
    sleep: Option<std::time::Duration>,
}

/// Sets the calling thread's timer slack to 1 us (prctl(2) PR_SET_TIMERSLACK): the default
/// 50 us would make every short sleep of a poll loop overshoot by up to that much.
pub fn fine_timer_slack() {
    // Safety: PR_SET_TIMERSLACK takes one integer argument and changes only this thread's
    // timer slack (prctl(2)).
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1_000 as libc::c_ulong) };
}

impl Idle {
    /// Idle iterations in a row that spin before the loop starts yielding.
    pub const SPINS: u32 = 64;

    /// Spins on every idle iteration, never yielding.
    pub fn spinning() -> Self {
        Idle {
            never_yield: true,
            ..Idle::default()
        }
    }

    /// Spins [`Idle::SPINS`] idle iterations, then sleeps `sleep` on every further one (call
    /// [`fine_timer_slack`] in the loop's thread for sleeps of tens of microseconds).
    pub fn sleeping(sleep: std::time::Duration) -> Self {
        Idle {
            sleep: Some(sleep),
            ..Idle::default()
        }
    }

    /// Call once per iteration with the work it did (frames moved, timers run).
    pub fn after(&mut self, work: usize) {
        if work > 0 {
            self.run = 0;
        } else if self.run < Self::SPINS || self.never_yield {
            self.run = self.run.saturating_add(1);
            std::hint::spin_loop();
        } else if let Some(d) = self.sleep {
            std::thread::sleep(d);
        } else {
            std::thread::yield_now();
        }
    }
}

/// Installs SIGINT and SIGTERM handlers that set the returned flag (and nothing else).
pub fn stop_on_signals() -> std::io::Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGINT, stop.clone())?;
    signal_hook::flag::register(signal_hook::consts::SIGTERM, stop.clone())?;
    Ok(stop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinned_loop_runs_until_stopped() {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let h = spawn_pinned(0, "t".into(), move || {
            let clock = Clock::monotonic();
            let mut n = 0u64;
            run_loop(&clock, &s, Idle::default(), |_| {
                n += 1;
                if n == 1000 {
                    s.store(true, Ordering::Relaxed);
                }
                1
            });
            n
        })
        .unwrap();
        assert_eq!(h.join().unwrap(), 1000);
        assert!(stop.load(Ordering::Relaxed));
    }

    #[test]
    fn idle_spins_then_yields_and_work_resets_it() {
        let mut idle = Idle::default();
        for _ in 0..Idle::SPINS {
            idle.after(0);
        }
        assert_eq!(idle.run, Idle::SPINS);
        // Past the spin budget it yields and stays there until work is done.
        idle.after(0);
        assert_eq!(idle.run, Idle::SPINS);
        idle.after(3);
        assert_eq!(idle.run, 0);
        // A spinning one counts its idle run but never reaches the yield branch.
        let mut spin = Idle::spinning();
        for _ in 0..Idle::SPINS + 3 {
            spin.after(0);
        }
        assert_eq!(spin.run, Idle::SPINS + 3);
        // A sleeping one spins the same budget, then stays past it (sleeping) until work.
        let mut nap = Idle::sleeping(std::time::Duration::from_micros(1));
        for _ in 0..Idle::SPINS + 2 {
            nap.after(0);
        }
        assert_eq!(nap.run, Idle::SPINS);
        nap.after(1);
        assert_eq!(nap.run, 0);
    }
}
