//! Pacing: a flow's current rate turns into the release time of its next frame.
//!
//! The pacer only computes times; **the engine enforces them** (it holds the frame in the
//! flow's queue, or its timing wheel, until the returned instant; STYLE.md rule 10). The rate
//! comes from the flow's reaction point (`QcnRp::rate(flow)`, `DcqcnState::rate()`) and may
//! change between frames: each frame is spaced by its own length at the rate in force when it
//! is released.
//!
//! Exactness: the next allowed release is kept in fixed point with 32 fractional bits of a
//! nanosecond, so rounding to whole nanoseconds never accumulates: after any number of frames at
//! one rate, the schedule is within one nanosecond of `total_bits / rate`. Release times are
//! rounded up to the next nanosecond, so a flow never runs ahead of its rate.
//!
//! Idle flows earn no credit: a frame offered after the schedule has passed goes out at `now`
//! and the schedule restarts from there (no burst after a pause).

use units::{Instant, Rate};

const FRAC_BITS: u32 = 32;

/// One flow's pacing schedule (16 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pacer {
    /// Earliest release of the next frame, nanoseconds << FRAC_BITS.
    next_fp: u128,
}

impl Pacer {
    pub fn new() -> Self {
        Pacer::default()
    }

    /// When a frame of `frame_len` octets offered at `now` may be released at `rate`; commits
    /// the schedule as if it is released then. A zero rate never releases: `Instant::MAX`, and
    /// the schedule is left unchanged.
    pub fn next_release(&mut self, now: Instant, frame_len: u64, rate: Rate) -> Instant {
        if rate == Rate::ZERO {
            return Instant::MAX;
        }
        let now_fp = u128::from(now.as_nanos()) << FRAC_BITS;
        let release_fp = self.next_fp.max(now_fp);
        // Serialisation time at `rate`, in fixed-point nanoseconds: bits * 1e9 / rate.
        let bits_ns = u128::from(frame_len) * 8 * 1_000_000_000;
        let gap_fp = (bits_ns << FRAC_BITS) / u128::from(rate.as_bps());
        self.next_fp = release_fp.saturating_add(gap_fp);
        Instant::from_nanos(ceil_ns(release_fp))
    }

    /// The earliest instant the next frame could go, without committing anything.
    pub fn earliest(&self, now: Instant) -> Instant {
        Instant::from_nanos(ceil_ns(self.next_fp)).max(now)
    }
}

fn ceil_ns(fp: u128) -> u64 {
    let ns = fp.div_ceil(1u128 << FRAC_BITS);
    u64::try_from(ns).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use units::Duration;

    #[test]
    fn back_to_back_frames_are_spaced_by_their_serialisation_time() {
        let mut p = Pacer::new();
        let r = Rate::from_gbps(10);
        // 1500 octets at 10 Gb/s = 1200 ns.
        assert_eq!(p.next_release(Instant::ZERO, 1500, r), Instant::ZERO);
        assert_eq!(
            p.next_release(Instant::ZERO, 1500, r),
            Instant::from_nanos(1200)
        );
        assert_eq!(
            p.next_release(Instant::from_nanos(100), 64, r),
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
            last = p.next_release(Instant::ZERO, 1, r);
        }
        assert_eq!(last, Instant::from_nanos(8000));
    }

    #[test]
    fn idle_time_earns_no_burst() {
        let mut p = Pacer::new();
        let r = Rate::from_gbps(1);
        p.next_release(Instant::ZERO, 1000, r); // next at 8000 ns
        let t = Instant::from_nanos(1_000_000);
        assert_eq!(p.next_release(t, 1000, r), t);
        assert_eq!(p.next_release(t, 1000, r), t + Duration::from_nanos(8000));
        assert_eq!(p.next_release(t, 1, Rate::ZERO), Instant::MAX);
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
                now = p.next_release(now, len, rate);
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
}
