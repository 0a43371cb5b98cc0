//! The one pacer: a flow's (or a link's) rate turns into the release time of its next frame.
//!
//! Every paced thing in quench uses it: the simulator's and `quench send`'s flows, the
//! appliance's per-flow queues, a switch port's egress shaper and `quench blast`. The pacer only
//! computes times; **the engine enforces them** (it holds the frame in the flow's queue, its
//! timing wheel or the port's backlog until the returned instant; docs/style.md, "Pacing and
//! deadlines"). The rate comes from the caller (a flow's reaction point, a port's configured
//! rate) and may change between frames: each frame is spaced by its own length at the rate in
//! force when it is released.
//!
//! Exactness: the next allowed release is kept in fixed point with 32 fractional bits of a
//! nanosecond, so rounding to whole nanoseconds never accumulates: after any number of frames at
//! one rate, the schedule is within one nanosecond of `total_bits / rate`. Release times are
//! rounded up to the next nanosecond, so a flow never runs ahead of its rate.
//!
//! Credit: the one knob beyond the rate is how far the schedule may lag `now`, i.e. how much
//! sending time a flow may bank and spend later as frames closer together than its rate:
//! - `credit = 0`: idle time earns nothing; a frame offered after the schedule has passed goes
//!   out at `now` and the schedule restarts from there (the simulator's hosts);
//! - `credit = d`: a token bucket `d x rate` deep. A sender whose worker was late (off the CPU)
//!   catches up at most `d` (`quench send`'s `max_catch_up`, a switch shaper's 100 ms); an idle
//!   link keeps at most its burst ([`Pacer::forget_credit`] when a backlog starts).
//!
//! Two more inputs keep the schedule right when the world changes under it:
//! - [`Pacer::shift`]: time the flow was not allowed to send (a PFC pause of its priority)
//!   moves the schedule on by exactly that time, so a pause is neither owed nor lost;
//! - [`Pacer::retime`]: a new rate re-times the part of the next frame's gap still ahead of
//!   `now` (`old / new`), and what a flow behind its schedule owes, keeping the credit earned.
//!
//! ```
//! use rp::Pacer;
//! use units::{Duration, Instant, Rate};
//!
//! let mut pacer = Pacer::new();
//! let r = Rate::from_gbps(10);
//! let first = pacer.next_release(Instant::ZERO, 1500, r, Duration::ZERO);
//! let second = pacer.next_release(Instant::ZERO, 1500, r, Duration::ZERO);
//! assert_eq!(second - first, Duration::from_nanos(1200));
//! ```

use units::{Duration, Instant, Rate, TxTime};

/// How a schedule spaces consecutive frames.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Spacing {
    /// Each frame's exact serialisation time at the rate, carried in fixed point: over any
    /// number of frames the schedule is within a nanosecond of `total_bits / rate`.
    #[default]
    Exact,
    /// As ns-3 HPCC's NIC: the next frame may leave a whole number of nanoseconds after this
    /// one's release, the frame's serialisation time truncated as ns-3 truncates it
    /// ([`TxTime::Ns3`]). `RdmaHw::UpdateNextAvail` (simulation/src/point-to-point/model/
    /// rdma-hw.cc): "sendingTime = interframeGap + Seconds(qp->m_rate.CalculateTxTime(pkt_size));
    /// qp->m_nextAvail = Simulator::Now() + sendingTime;" with `DataRate::CalculateTxTime`
    /// "static_cast<double>(bytes)*8/m_bps" and `Seconds(double)` keeping the integer part of
    /// the nanoseconds. No fraction carries: at line rate a flow of 1048-octet frames on a
    /// 100 Gb/s NIC sends every 83 ns (100.97 Gb/s), where `Exact` averages 83.84 ns.
    Ns3,
}

const FRAC_BITS: u32 = 32;
const ONE: u128 = 1 << FRAC_BITS;

/// One flow's pacing schedule (12 octets, aligned to 4): the earliest release of its next
/// frame.
///
/// The schedule is a fixed-point time of 64 + [`FRAC_BITS`] = 96 bits, computed in `u128` and
/// stored as its nanoseconds and its fraction, packed to 4 octets: a `u128` field would take
/// 16 octets aligned to 16, and a flow's state holds two pacers among up to a million flows
/// (the sender appliance), each of whose cache lines a frame pays for. Every operation reads
/// the two into a `u128` and writes its result back, so the arithmetic is the `u128`
/// arithmetic; a result past 2^96 (a release after `Instant::MAX`, which
/// [`Pacer::release_time`] already reports as `Instant::MAX`) is stored as 2^96 - 1. Two
/// fields of their own sizes, not three 32-bit words: a 64-bit load spanning two narrower
/// stores just made cannot take its value from the store buffer and waits for them to drain
/// (a store-forwarding stall), on every read after a write.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C, packed(4))]
pub struct Pacer {
    /// Earliest release of the next frame: whole nanoseconds, and the fraction in units of
    /// 2^-FRAC_BITS ns.
    ns: u64,
    frac: u32,
}

/// The largest schedule a [`Pacer`] stores.
const MAX_FP: u128 = (1 << 96) - 1;

// `Pacer::frac` holds the FRAC_BITS bits of fraction.
const _: () = assert!(FRAC_BITS == 32);

fn fp(t: Instant) -> u128 {
    u128::from(t.as_nanos()) << FRAC_BITS
}

fn fp_d(d: Duration) -> u128 {
    u128::from(d.as_nanos()) << FRAC_BITS
}

fn ceil_ns(fp: u128) -> u64 {
    u64::try_from(fp.div_ceil(ONE)).unwrap_or(u64::MAX)
}

/// Serialisation time of `len` octets at `rate`, in fixed-point nanoseconds: bits * 1e9 / rate.
fn gap_fp(len: u64, rate: Rate) -> u128 {
    let bits_ns = u128::from(len) * 8 * 1_000_000_000;
    (bits_ns << FRAC_BITS) / u128::from(rate.as_bps())
}

impl Pacer {
    /// A schedule that allows a frame at any time (from `Instant::ZERO`).
    pub const fn new() -> Self {
        Pacer { ns: 0, frac: 0 }
    }

    /// A schedule whose first frame may leave at `t` and not earlier: a flow that starts at
    /// `t` owes nothing for the time before.
    pub fn starting_at(t: Instant) -> Self {
        let mut p = Pacer::new();
        p.set_fp(fp(t));
        p
    }

    /// The schedule, nanoseconds << FRAC_BITS.
    #[inline]
    fn next_fp(&self) -> u128 {
        u128::from(self.ns) << FRAC_BITS | u128::from(self.frac)
    }

    /// Stores the schedule `v` (at most [`MAX_FP`]).
    #[inline]
    fn set_fp(&mut self, v: u128) {
        let v = v.min(MAX_FP);
        self.ns = (v >> FRAC_BITS) as u64;
        self.frac = v as u32;
    }

    /// When a frame of `len` octets offered at `now` may be released at `rate`, the schedule
    /// lagging `now` by at most `credit`; commits the schedule as if the frame is released
    /// then. A zero rate never releases: `Instant::MAX`, and the schedule is left unchanged.
    #[inline]
    pub fn next_release(
        &mut self,
        now: Instant,
        len: u64,
        rate: Rate,
        credit: Duration,
    ) -> Instant {
        self.next_release_spaced(now, len, rate, credit, Spacing::Exact)
    }

    /// [`Pacer::next_release`] with the frames spaced as `spacing` says.
    #[inline]
    pub fn next_release_spaced(
        &mut self,
        now: Instant,
        len: u64,
        rate: Rate,
        credit: Duration,
        spacing: Spacing,
    ) -> Instant {
        if rate == Rate::ZERO {
            return Instant::MAX;
        }
        let release_fp = self.next_fp().max(fp(now).saturating_sub(fp_d(credit)));
        let (release_fp, gap) = match spacing {
            Spacing::Exact => (release_fp, gap_fp(len, rate)),
            // From the release rounded up to the nanosecond it happens at (ns-3 counts from
            // `Simulator::Now()`, an integer), by a whole number of nanoseconds.
            Spacing::Ns3 => (
                u128::from(ceil_ns(release_fp)) << FRAC_BITS,
                fp_d(TxTime::Ns3.of(rate, len)),
            ),
        };
        self.set_fp(release_fp.saturating_add(gap));
        Instant::from_nanos(ceil_ns(release_fp))
    }

    /// The schedule's next release, rounded up to a nanosecond; it may lie before `now` (credit).
    #[inline]
    pub fn release_time(&self) -> Instant {
        Instant::from_nanos(ceil_ns(self.next_fp()))
    }

    /// The earliest instant the next frame could go, without committing anything.
    #[inline]
    pub fn earliest(&self, now: Instant) -> Instant {
        self.release_time().max(now)
    }

    /// True when a frame may leave at `now`.
    #[inline]
    pub fn ready(&self, now: Instant) -> bool {
        self.release_time() <= now
    }

    /// How far the schedule lags `now` (the credit banked; zero when it is ahead).
    pub fn lag(&self, now: Instant) -> Duration {
        let behind = fp(now).saturating_sub(self.next_fp());
        Duration::from_nanos(u64::try_from(behind >> FRAC_BITS).unwrap_or(u64::MAX))
    }

    /// Forgets credit beyond `credit` at `now` (an idle link keeps at most its burst); returns
    /// the sending time given up.
    pub fn forget_credit(&mut self, now: Instant, credit: Duration) -> Duration {
        let floor = fp(now).saturating_sub(fp_d(credit));
        let next = self.next_fp();
        if next >= floor {
            return Duration::ZERO;
        }
        let lost = floor - next;
        self.set_fp(floor);
        Duration::from_nanos(u64::try_from(lost >> FRAC_BITS).unwrap_or(u64::MAX))
    }

    /// The flow could not send for `d` (PFC paused its priority): the schedule moves on by `d`.
    pub fn shift(&mut self, d: Duration) {
        self.set_fp(self.next_fp().saturating_add(fp_d(d)));
    }

    /// The schedule moves back by `d` (ns-3 HPCC's `ChangeRate` to a higher rate).
    pub fn shift_back(&mut self, d: Duration) {
        self.set_fp(self.next_fp().saturating_sub(fp_d(d)));
    }

    /// The rate changed from `old` to `new` at `now`: the part of the schedule ahead of `now`
    /// stretches by `old / new` (the credit earned at the old rate is kept, as a hardware rate
    /// limiter accrues credit at its current rate), and so does the time owed behind it (a flow
    /// catching up owes the same octets at the new rate). Returns the new release time. A zero
    /// rate on either side changes nothing.
    pub fn retime(&mut self, now: Instant, old: Rate, new: Rate) -> Instant {
        if old == new || old == Rate::ZERO || new == Rate::ZERO {
            return self.release_time();
        }
        let now_fp = fp(now);
        let scale = |d: u128| d.saturating_mul(u128::from(old.as_bps())) / u128::from(new.as_bps());
        let next = self.next_fp();
        self.set_fp(if next >= now_fp {
            now_fp.saturating_add(scale(next - now_fp))
        } else {
            now_fp.saturating_sub(scale(now_fp - next))
        });
        self.release_time()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn back_to_back_frames_are_spaced_by_their_serialisation_time() {
        let mut p = Pacer::new();
        let r = Rate::from_gbps(10);
        // 1500 octets at 10 Gb/s = 1200 ns.
        assert_eq!(
            p.next_release(Instant::ZERO, 1500, r, Duration::ZERO),
            Instant::ZERO
        );
        assert_eq!(
            p.next_release(Instant::ZERO, 1500, r, Duration::ZERO),
            Instant::from_nanos(1200)
        );
        assert_eq!(
            p.next_release(Instant::from_nanos(100), 64, r, Duration::ZERO),
            Instant::from_nanos(2400)
        );
        // 64 octets = 51.2 ns: the next one is at 2451.2 ns, released at 2452.
        assert_eq!(p.earliest(Instant::ZERO), Instant::from_nanos(2452));
    }

    #[test]
    fn fractions_carry_instead_of_drifting() {
        // 1 octet at 3 Gb/s = 2.666.. ns. Rounding each gap to 3 ns would put frame 3000 at
        // 9000 ns; the carried fraction puts it at ceil(3000 * 8 / 3) = 8000 ns.
        let mut p = Pacer::new();
        let r = Rate::from_gbps(3);
        let mut last = Instant::ZERO;
        for _ in 0..=3000 {
            last = p.next_release(Instant::ZERO, 1, r, Duration::ZERO);
        }
        assert_eq!(last, Instant::from_nanos(8000));
    }

    #[test]
    fn ns3_spacing_truncates_each_gap_to_the_nanosecond() {
        // 1048 octets at 100 Gb/s: 83.84 ns exact, 83 ns in ns-3 (RdmaHw::UpdateNextAvail);
        // 25 frames at line rate: the last leaves at 24 x 83 = 1992 ns, exact at ceil(24 x
        // 83.84) = 2013 ns.
        let r = Rate::from_gbps(100);
        let last = |spacing| {
            let mut p = Pacer::new();
            let mut t = Instant::ZERO;
            for _ in 0..25 {
                t = p.next_release_spaced(Instant::ZERO, 1048, r, Duration::ZERO, spacing);
            }
            t
        };
        assert_eq!(last(Spacing::Ns3), Instant::from_nanos(1992));
        assert_eq!(last(Spacing::Exact), Instant::from_nanos(2013));
        // A frame offered late starts the schedule again from its own release, a whole
        // nanosecond: 1000 octets at 100 Gb/s are 79 ns in ns-3 (8e-8 s as a double is below).
        let mut p = Pacer::new();
        let t = Instant::from_nanos(500);
        assert_eq!(
            p.next_release_spaced(t, 1000, r, Duration::ZERO, Spacing::Ns3),
            t
        );
        assert_eq!(p.release_time(), Instant::from_nanos(579));
        assert_eq!(
            p.next_release_spaced(t, 1, Rate::ZERO, Duration::ZERO, Spacing::Ns3),
            Instant::MAX
        );
    }

    #[test]
    fn idle_time_earns_no_burst() {
        let mut p = Pacer::new();
        let r = Rate::from_gbps(1);
        p.next_release(Instant::ZERO, 1000, r, Duration::ZERO); // next at 8000 ns
        let t = Instant::from_nanos(1_000_000);
        assert_eq!(p.next_release(t, 1000, r, Duration::ZERO), t);
        assert_eq!(
            p.next_release(t, 1000, r, Duration::ZERO),
            t + Duration::from_nanos(8000)
        );
        assert_eq!(
            p.next_release(t, 1, Rate::ZERO, Duration::ZERO),
            Instant::MAX
        );
    }

    proptest! {
        /// Long-run rate within 0.1 % of the set rate, for any rate and frame mix, with the
        /// caller always asking at the previous release time (a saturated sender).
        #[test]
        fn long_run_rate_is_exact(
            bps in 1_000_000u64..400_000_000_000,
            lens in proptest::collection::vec(64u64..9000, 2000),
        ) {
            let rate = Rate::from_bps(bps);
            let mut p = Pacer::new();
            let mut now = Instant::ZERO;
            let mut first = None;
            let mut bytes = 0u64;
            for &len in &lens {
                now = p.next_release(now, len, rate, Duration::ZERO);
                first.get_or_insert(now);
                bytes += len;
            }
            // Time from the first release to when the schedule allows the next frame covers
            // every frame's serialisation time.
            let span = p.earliest(now) - first.unwrap();
            let achieved = bytes as f64 * 8.0 / span.as_secs_f64();
            let err = (achieved - bps as f64).abs() / bps as f64;
            prop_assert!(err < 0.001, "achieved {} vs {} ({})", achieved, bps, err);
            // And never faster than the rate.
            prop_assert!(achieved <= bps as f64 * (1.0 + 1e-9));
        }
    }

    #[test]
    fn shaper_releases_at_exactly_the_rate_after_its_idle_credit() {
        // 1500 octets at 1 Gb/s = 12 us per frame: 1000 back-to-back frames take 12 ms. The
        // first goes at 1 ms minus the 20 us an idle link may bank; the 1000th at +999 x 12 us.
        let (r, burst, max_lag) = (
            Rate::from_gbps(1),
            Duration::from_micros(20),
            Duration::from_millis(100),
        );
        let mut p = Pacer::new();
        let mut now = Instant::from_nanos(1_000_000);
        p.forget_credit(now, burst);
        let mut last = now;
        for _ in 0..1000 {
            if !p.ready(now) {
                now = p.release_time();
            }
            last = p.next_release(now, 1500, r, max_lag);
        }
        assert_eq!(last, Instant::from_nanos(1_000_000 - 20_000 + 999 * 12_000));
        assert_eq!(
            p.release_time(),
            Instant::from_nanos(1_000_000 - 20_000 + 1000 * 12_000)
        );
    }

    #[test]
    fn a_late_backlogged_sender_catches_up_within_its_credit() {
        let (r, max_lag) = (Rate::from_gbps(1), Duration::from_millis(100));
        let mut p = Pacer::new();
        p.next_release(Instant::ZERO, 1500, r, max_lag); // next = 12 us
                                                         // Away for 10 ms with a backlog: it may send the 10 ms it owes at once.
        let now = Instant::from_nanos(10_012_000);
        let mut burst = 0;
        while p.ready(now) {
            p.next_release(now, 1500, r, max_lag);
            burst += 1;
        }
        assert_eq!(burst, 834); // (10_012 us - 12 us) / 12 us, rounded up
                                // Away for longer than the credit: the debt beyond 100 ms is forgiven.
        let now = Instant::from_nanos(200_000_000);
        let mut burst = 0;
        while p.ready(now) {
            p.next_release(now, 1500, r, max_lag);
            burst += 1;
        }
        assert_eq!(burst, 8334); // 100 ms / 12 us, rounded up
        assert_eq!(p.lag(now), Duration::ZERO);
    }

    #[test]
    fn odd_rates_carry_their_fractions() {
        // 3 bit/s: one octet is 8/3 s; three octets are exactly 8 s.
        let mut p = Pacer::new();
        for _ in 0..3 {
            p.next_release(Instant::ZERO, 1, Rate::from_bps(3), Duration::ZERO);
        }
        assert_eq!(p.release_time(), Instant::from_nanos(8_000_000_000));
    }

    #[test]
    fn credit_bounds_the_burst_after_idle_time() {
        // 1 Gb/s, 1500-octet frames (12 us), credit 50 us: after 1 ms idle, frames offered at
        // once go out at most 50 us / 12 us + 1 = 5 at a time, the rest at the rate.
        let (r, credit) = (Rate::from_gbps(1), Duration::from_micros(50));
        let mut p = Pacer::starting_at(Instant::ZERO);
        p.next_release(Instant::ZERO, 1500, r, credit);
        let now = Instant::from_nanos(1_000_000);
        let mut at_once = 0;
        while p.ready(now) {
            p.next_release(now, 1500, r, credit);
            at_once += 1;
        }
        assert_eq!(at_once, 5);
        // With credit 0 the same idle time earns nothing: one frame, then the rate.
        let mut p = Pacer::starting_at(Instant::ZERO);
        p.next_release(Instant::ZERO, 1500, r, Duration::ZERO);
        assert_eq!(p.next_release(now, 1500, r, Duration::ZERO), now);
        assert!(!p.ready(now));
        // An idle link keeps at most its burst: what is forgotten is reported.
        let mut p = Pacer::starting_at(Instant::ZERO);
        assert_eq!(
            p.forget_credit(now, Duration::from_micros(20)),
            Duration::from_micros(980)
        );
        assert_eq!(p.lag(now), Duration::from_micros(20));
    }

    #[test]
    fn a_pause_shifts_the_schedule_by_exactly_its_length() {
        let r = Rate::from_gbps(1);
        let mut p = Pacer::starting_at(Instant::ZERO);
        p.next_release(Instant::ZERO, 1500, r, Duration::ZERO); // next at 12 us
                                                                // Paused for 7 us of the gap: the next frame is 7 us later, neither owed nor lost.
        p.shift(Duration::from_micros(7));
        assert_eq!(p.release_time(), Instant::from_nanos(19_000));
        assert_eq!(
            p.earliest(Instant::from_nanos(3_000)),
            Instant::from_nanos(19_000)
        );
    }

    #[test]
    fn a_rate_change_retimes_what_is_ahead_and_what_is_owed() {
        // 1500 octets at 10 Mb/s = 1.2 ms; 300 us in, a quarter is earned. The other 900 us at
        // 10 Mb/s are 9 us at 1 Gb/s.
        let mut p = Pacer::starting_at(Instant::ZERO);
        p.next_release(Instant::ZERO, 1500, Rate::from_mbps(10), Duration::ZERO);
        let t1 = Instant::from_nanos(300_000);
        assert_eq!(
            p.retime(t1, Rate::from_mbps(10), Rate::from_gbps(1)),
            Instant::from_nanos(309_000)
        );
        // Behind the schedule by 12 us at 1 Gb/s: at 500 Mb/s the same octets are 24 us.
        let now = Instant::from_nanos(100_000);
        let mut p = Pacer::starting_at(Instant::from_nanos(88_000));
        p.retime(now, Rate::from_gbps(1), Rate::from_mbps(500));
        assert_eq!(p.lag(now), Duration::from_micros(24));
        // The same rate, or a zero one, moves nothing.
        assert_eq!(
            p.retime(now, Rate::ZERO, Rate::from_gbps(1)),
            Instant::from_nanos(76_000)
        );
    }

    proptest! {
        /// Exact over many frames at changing rates: the schedule after any sequence of
        /// (frame length, rate) pairs offered back to back is the exact sum of their
        /// serialisation times, within one nanosecond, however many frames.
        #[test]
        fn exact_over_changing_rates(
            frames in proptest::collection::vec((64u64..9000, 1_000_000u64..100_000_000_000), 1..3000),
        ) {
            let mut p = Pacer::starting_at(Instant::ZERO);
            // The exact sum in picoseconds-of-a-nanosecond precision (1e-12 ns), far finer than
            // the schedule's 2^-32 ns.
            let mut exact_pico: u128 = 0;
            for &(len, bps) in &frames {
                p.next_release(Instant::ZERO, len, Rate::from_bps(bps), Duration::ZERO);
                exact_pico += u128::from(len * 8) * 1_000_000_000 * 1_000_000_000_000 / u128::from(bps);
            }
            let got = u128::from(p.release_time().as_nanos());
            let want = exact_pico.div_ceil(1_000_000_000_000);
            // Each gap is truncated by under 2^-32 ns and the reference by under 1e-12 ns: 3000
            // frames drift by under a nanosecond, so the rounded-up times differ by at most one.
            prop_assert!(got.abs_diff(want) <= 1, "{} vs {}", got, want);
        }
    }

    /// The stored schedule is the `u128` one over the whole range a time can take (a release up
    /// to `Instant::MAX` with any fraction), in 12 octets aligned to 4;
    /// past 2^96 it stays at the largest, whose release is `Instant::MAX` as before.
    #[test]
    fn the_packed_schedule_is_the_u128_one() {
        assert_eq!(std::mem::size_of::<Pacer>(), 12);
        assert_eq!(std::mem::align_of::<Pacer>(), 4);
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        for k in 0..10_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = (u128::from(x) << 32 | u128::from(x.rotate_left(17) as u32)) >> (k % 96);
            let mut p = Pacer::new();
            p.set_fp(v);
            assert_eq!(p.next_fp(), v);
        }
        let mut p = Pacer::starting_at(Instant::MAX);
        p.shift(Duration::from_nanos(u64::MAX));
        assert_eq!(p.next_fp(), MAX_FP);
        assert_eq!(p.release_time(), Instant::MAX);
    }
}
