//! The engine's clock: the only place quench reads time (docs/style.md, "Time").
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

fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// Clock `id` now, in nanoseconds.
#[allow(clippy::disallowed_methods)] // reason: this is the clock module; reading clocks is its job
fn clock_ns(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // Safety: `ts` is a valid, writable timespec; CLOCK_MONOTONIC and CLOCK_REALTIME always
    // exist on Linux.
    unsafe { libc::clock_gettime(id, &mut ts) };
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

/// `CLOCK_REALTIME` now, in nanoseconds since the Unix epoch: the clock AF_PACKET's software
/// receive timestamps are in (packet(7), `tp_sec` / `tp_nsec`).
fn realtime_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME)
}

/// Converts kernel receive timestamps (`CLOCK_REALTIME`, or a NIC clock that phc2sys keeps on
/// it) into the [`shared_now`] time base, with one pair of clock reads per burst: a frame stamped
/// `age` before the realtime read arrived `age` before the monotonic read. Only the age crosses
/// between the clocks, so a realtime step (NTP, settimeofday) between two bursts cannot move a
/// frame's time by more than the step that happened inside one burst.
#[derive(Clone, Copy, Debug)]
pub struct KernelStamps {
    real_ns: u64,
    mono: Instant,
}

impl KernelStamps {
    /// Reads both clocks now (after the burst was taken from the ring).
    pub fn read() -> KernelStamps {
        let mono = shared_now();
        KernelStamps {
            real_ns: realtime_ns(),
            mono,
        }
    }

    /// The [`shared_now`] time of a frame the kernel stamped `stamp_real_ns` (never later than
    /// the read: a stamp from the future is taken as now).
    pub fn to_shared(&self, stamp_real_ns: u64) -> Instant {
        let age = self.real_ns.saturating_sub(stamp_real_ns);
        Instant::from_nanos(self.mono.as_nanos().saturating_sub(age))
    }
}

/// The clock domain of [`shared_now`] on this host, as 24 bits for the test header's clock
/// field (never 0, which means "not said"): a hash of the kernel's boot id (a new one every
/// boot: `CLOCK_MONOTONIC` restarts with it) and of this process's time namespace (which may
/// offset `CLOCK_MONOTONIC`, time_namespaces(7)). Two processes whose ids are equal read the
/// same `CLOCK_MONOTONIC`; different ids mean another machine, another boot or another time
/// namespace, except for a 2^-24 chance of a collision between two machines.
pub fn clock_id() -> u32 {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    let timens = std::fs::read_link("/proc/self/ns/time")
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    clock_id_of(boot.trim(), &timens)
}

/// [`clock_id`] of a boot id and a time-namespace name: FNV-1a (64 bits) folded to 24.
pub fn clock_id_of(boot_id: &str, timens: &str) -> u32 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in boot_id.bytes().chain([0]).chain(timens.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    let folded = ((h >> 48) ^ (h >> 24) ^ h) as u32 & 0xFF_FFFF;
    folded.max(1)
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

/// A periodic schedule on whole intervals from a start, for what runs "every N ms" (the
/// progress line, `quench stats --watch`). A tick taken late is taken once, and the next is the
/// first of the schedule after it: lateness never shifts later ticks (a loop that sleeps a
/// whole interval after each piece of work runs slow by the work's time), and ticks missed by
/// more than an interval are skipped rather than made up in a burst.
#[derive(Clone, Copy, Debug)]
pub struct Ticker {
    next: Instant,
    every: Duration,
}

impl Ticker {
    /// Ticks at `start + every`, `start + 2 every`, ...; `every` is at least 1 ns.
    pub fn new(start: Instant, every: Duration) -> Ticker {
        let every = every.max(Duration::from_nanos(1));
        Ticker {
            next: start + every,
            every,
        }
    }

    /// Whether a tick is due at `now`.
    #[inline]
    pub fn due(&self, now: Instant) -> bool {
        now >= self.next
    }

    /// The next tick.
    pub fn next(&self) -> Instant {
        self.next
    }

    /// Takes the tick due at `now` (if any): the next is the first tick after `now`.
    pub fn take(&mut self, now: Instant) {
        if self.due(now) {
            let missed = now.saturating_since(self.next).as_nanos() / self.every.as_nanos();
            self.next += self.every.saturating_mul(missed + 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticker_keeps_whole_intervals_from_the_start_and_skips_what_it_missed() {
        let ms = Duration::from_millis;
        let at = |n| Instant::ZERO + ms(n);
        let mut t = Ticker::new(Instant::ZERO, ms(10));
        assert!(!t.due(at(9)));
        // Taken 3 ms late: the next tick is still at 20, not 23.
        assert!(t.due(at(13)));
        t.take(at(13));
        assert_eq!(t.next(), at(20));
        // Taken exactly on time.
        t.take(at(20));
        assert_eq!(t.next(), at(30));
        // A 25 ms stall: the ticks at 30 and 40 are one tick taken at 55, then 60.
        t.take(at(55));
        assert_eq!(t.next(), at(60));
        // Nothing due: nothing moves.
        t.take(at(59));
        assert_eq!(t.next(), at(60));
    }

    #[test]
    fn clock_ids_are_24_bits_nonzero_and_tell_boots_and_namespaces_apart() {
        let a = clock_id_of("0f1e2d3c-aaaa-bbbb-cccc-000000000001", "time:[4026531834]");
        let b = clock_id_of("0f1e2d3c-aaaa-bbbb-cccc-000000000002", "time:[4026531834]");
        let c = clock_id_of("0f1e2d3c-aaaa-bbbb-cccc-000000000001", "time:[4026532000]");
        for id in [a, b, c, clock_id()] {
            assert!(id > 0 && id <= 0xFF_FFFF, "{id:#x}");
        }
        assert_ne!(a, b);
        assert_ne!(a, c);
        assert_eq!(clock_id(), clock_id(), "one host, one id");
    }

    #[test]
    fn kernel_stamps_keep_the_age_of_a_frame() {
        let k = KernelStamps {
            real_ns: 1_700_000_000_000_000_000,
            mono: Instant::from_nanos(5_000_000),
        };
        assert_eq!(
            k.to_shared(1_700_000_000_000_000_000 - 30_000),
            Instant::from_nanos(4_970_000)
        );
        // A stamp after the read (clock stepped back in between) is taken as the read.
        assert_eq!(
            k.to_shared(1_700_000_000_000_000_000 + 7),
            Instant::from_nanos(5_000_000)
        );
    }

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
