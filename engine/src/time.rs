//! The engine's clock: the only place quench reads time (STYLE.md rule 3).
//!
//! Workers read [`Clock::now`] once per burst and pass the [`Instant`] down to everything that
//! needs it. On x86-64 with an invariant TSC (`constant_tsc` and `nonstop_tsc` in
//! /proc/cpuinfo) the clock is the TSC, calibrated against `CLOCK_MONOTONIC` once at start-up:
//! a read is one `rdtsc` (~10 ns) instead of a vDSO call, and busy-polling it is how the egress
//! pacer waits (sleeping is useless for timing: `sleep(1us)` takes ~54 us on the target VM).
//! Elsewhere, or when the TSC is not invariant, it falls back to `CLOCK_MONOTONIC`.
//!
//! Invariants: an [`Instant`] from a [`Clock`] is nanoseconds since that clock's creation;
//! copies of one `Clock` on different cores agree (the invariant TSC is synchronised across
//! cores), so instants may be compared across workers.
use units::{Duration, Instant};

/// How long calibration spins against `CLOCK_MONOTONIC`. Longer is more precise: the error is
/// about (2 x clock_gettime jitter) / CALIBRATION, ~1e-6 for 20 ms, far inside the 1 % shaping
/// target.
const CALIBRATION: Duration = Duration::from_millis(20);

/// Which counter the clock reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The time-stamp counter, at `hz` ticks per second.
    Tsc { hz: u64 },
    /// `clock_gettime(CLOCK_MONOTONIC)`.
    Monotonic,
}

/// A calibrated, cheap, monotonic clock. `Copy`: every worker gets its own copy.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    source: Source,
    /// Counter value at the epoch (TSC ticks or monotonic nanoseconds).
    base: u64,
    /// Nanoseconds per tick as a 32.32 fixed-point multiplier (TSC only).
    mult: u64,
}

#[allow(clippy::disallowed_methods)] // reason: this is the clock module; reading clocks is its job
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // Safety: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn rdtsc() -> u64 {
    // Safety: rdtsc is available on every x86-64 CPU and has no memory effects.
    unsafe { core::arch::x86_64::_rdtsc() }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn rdtsc() -> u64 {
    0
}

/// True when the CPU advertises an invariant TSC that the kernel itself trusts.
fn tsc_is_invariant() -> bool {
    if !cfg!(target_arch = "x86_64") {
        return false;
    }
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let flags = cpuinfo
        .lines()
        .find(|l| l.starts_with("flags"))
        .unwrap_or("");
    let has = |f: &str| flags.split_whitespace().any(|w| w == f);
    has("constant_tsc") && has("nonstop_tsc")
}

/// `CLOCK_MONOTONIC` now, in nanoseconds since boot: the one time base every process on the
/// machine shares. quench's test header carries transmit timestamps in it, so that a receiver in
/// another process (another network namespace) measures one-way latency against the same clock.
/// Read it once per burst, like [`Clock::now`].
pub fn shared_now() -> Instant {
    Instant::from_nanos(monotonic_ns())
}

impl Clock {
    /// The best clock available: a calibrated TSC when invariant, else `CLOCK_MONOTONIC`.
    /// Spins for ~20 ms when calibrating; call once at start-up.
    pub fn new() -> Clock {
        if tsc_is_invariant() {
            Clock::calibrate_tsc()
        } else {
            Clock::monotonic()
        }
    }

    /// A clock reading `CLOCK_MONOTONIC` directly.
    pub fn monotonic() -> Clock {
        Clock {
            source: Source::Monotonic,
            base: monotonic_ns(),
            mult: 0,
        }
    }

    fn calibrate_tsc() -> Clock {
        let (t0, c0) = (monotonic_ns(), rdtsc());
        let mut t1 = t0;
        let mut c1 = c0;
        while t1 - t0 < CALIBRATION.as_nanos() {
            t1 = monotonic_ns();
            c1 = rdtsc();
        }
        let ticks = c1.saturating_sub(c0);
        let ns = t1 - t0;
        if ticks == 0 {
            return Clock::monotonic();
        }
        let hz = (ticks as u128 * 1_000_000_000 / ns as u128) as u64;
        let mult = ((ns as u128) << 32) / ticks as u128;
        Clock {
            source: Source::Tsc { hz },
            base: c1,
            mult: mult as u64,
        }
    }

    /// What this clock reads.
    pub fn source(&self) -> Source {
        self.source
    }

    /// Now, in nanoseconds since the clock was made.
    #[inline]
    pub fn now(&self) -> Instant {
        match self.source {
            Source::Tsc { .. } => {
                let ticks = rdtsc().saturating_sub(self.base);
                Instant::from_nanos(((ticks as u128 * self.mult as u128) >> 32) as u64)
            }
            Source::Monotonic => Instant::from_nanos(monotonic_ns().saturating_sub(self.base)),
        }
    }

    /// Busy-polls until `deadline` and returns the time read then (never sleeps: see module docs).
    pub fn spin_until(&self, deadline: Instant) -> Instant {
        loop {
            let now = self.now();
            if now >= deadline {
                return now;
            }
            std::hint::spin_loop();
        }
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_is_monotonic_and_tracks_the_os_clock() {
        let c = Clock::new();
        let m = Clock::monotonic();
        let a = c.now();
        let b = c.now();
        assert!(b >= a);
        // Bracket each TSC read between two OS-clock reads: whatever the scheduler does, the
        // TSC's elapsed time must lie between the inner and outer OS-clock spans (with 1 %
        // calibration slack). A consistency check, not a timing assertion.
        let (m0a, c0, m0b) = (m.now(), c.now(), m.now());
        let _ = m.spin_until(m0b + Duration::from_millis(5));
        let (m1a, c1, m1b) = (m.now(), c.now(), m.now());
        let dc = (c1 - c0).as_nanos() as f64;
        let inner = (m1a - m0b).as_nanos() as f64;
        let outer = (m1b - m0a).as_nanos() as f64;
        assert!(
            dc >= inner * 0.99 && dc <= outer * 1.01,
            "clock {:?}: {dc} ns not within [{inner}, {outer}] ns",
            c.source()
        );
    }
}
