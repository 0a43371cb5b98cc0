//! A hashed timing wheel of release times: the pacer (rp crate) says *when* a flow may send its
//! next frame, the wheel keeps those times, and the busy-polling worker pops what is due.
//!
//! Invariants:
//! - An entry is never released before its time: a release time `t` goes into the slot of tick
//!   `ceil(t / tick)`, and a slot is due once `now` reaches its tick's start. It comes out at most
//!   one tick late (plus however late the worker polls).
//! - Entries due in the same slot come out in insertion order; entries of earlier slots come out
//!   before entries of later ones.
//! - Times more than `slots` ticks ahead wait in an overflow heap and move into the wheel as the
//!   cursor approaches them; times in the past are due at once.
//! - A bitmap says which slots hold entries, so [`Wheel::next_deadline`] and the cursor's move
//!   to the next slot that holds any look at one bit per slot, 64 to a word (at most
//!   `slots / 64` words), instead of at every empty slot in between: a flow whose next release
//!   is 1 ms away made each `next_deadline` look at up to 4096 slots, and a driver asks it
//!   once per loop iteration.
//! - [`Wheel::pop_due`] does bounded work per call (one pop, or one move of the cursor).
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use units::{Duration, Instant};

/// Errors from [`Wheel::new`].
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WheelError {
    #[error("wheel tick must be a power of two nanoseconds >= 1, got {0} ns")]
    Tick(u64),
    #[error("wheel slots must be a power of two >= 2, got {0}")]
    Slots(usize),
}

#[derive(Debug)]
struct Far<T> {
    tick: u64,
    seq: u64,
    at: Instant,
    item: T,
}

impl<T> PartialEq for Far<T> {
    fn eq(&self, o: &Self) -> bool {
        (self.tick, self.seq) == (o.tick, o.seq)
    }
}
impl<T> Eq for Far<T> {}
impl<T> PartialOrd for Far<T> {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl<T> Ord for Far<T> {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.tick, self.seq).cmp(&(o.tick, o.seq))
    }
}

/// Release times with a resolution of one tick.
///
/// Call order: [`Wheel::insert`] at any time; [`Wheel::pop_due`] in a loop with the burst's `now`
/// until it returns `None`; [`Wheel::next_deadline`] to learn when to look again.
pub struct Wheel<T> {
    shift: u32,
    mask: u64,
    slots: Vec<VecDeque<(Instant, T)>>,
    /// Tick index of the slot the cursor is on; every resident entry has a tick in
    /// `[cursor, cursor + slots)`.
    cursor: u64,
    resident: usize,
    /// Bit `i` is set exactly when slot `i` holds entries.
    occupied: Vec<u64>,
    far: BinaryHeap<Reverse<Far<T>>>,
    seq: u64,
}

impl<T> Wheel<T> {
    /// A wheel of `slots` slots of `tick` each (both powers of two); its horizon is
    /// `tick x slots`, e.g. 1 us x 4096 = 4 ms.
    pub fn new(tick: Duration, slots: usize) -> Result<Self, WheelError> {
        let t = tick.as_nanos();
        if t == 0 || !t.is_power_of_two() {
            return Err(WheelError::Tick(t));
        }
        if slots < 2 || !slots.is_power_of_two() {
            return Err(WheelError::Slots(slots));
        }
        Ok(Wheel {
            shift: t.trailing_zeros(),
            mask: slots as u64 - 1,
            slots: (0..slots).map(|_| VecDeque::new()).collect(),
            cursor: 0,
            resident: 0,
            occupied: vec![0; slots.div_ceil(64)],
            far: BinaryHeap::new(),
            seq: 0,
        })
    }

    pub fn len(&self) -> usize {
        self.resident + self.far.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn horizon(&self) -> u64 {
        self.mask + 1
    }

    /// The tick whose start is the first one at or after `at`.
    fn tick_of(&self, at: Instant) -> u64 {
        let ns = at.as_nanos();
        let t = ns >> self.shift;
        if t << self.shift == ns {
            t
        } else {
            t + 1
        }
    }

    fn tick_start(&self, tick: u64) -> Instant {
        Instant::from_nanos(tick.saturating_mul(1 << self.shift))
    }

    /// Schedules `item` for release at `at`.
    pub fn insert(&mut self, at: Instant, item: T) {
        let tick = self.tick_of(at).max(self.cursor);
        if tick - self.cursor < self.horizon() {
            self.put(tick, at, item);
        } else {
            self.seq += 1;
            self.far.push(Reverse(Far {
                tick,
                seq: self.seq,
                at,
                item,
            }));
        }
    }

    /// Moves overflow entries that now fall within the horizon into their slots.
    fn refill(&mut self) {
        while let Some(Reverse(f)) = self.far.peek() {
            if f.tick.saturating_sub(self.cursor) >= self.horizon() {
                break;
            }
            let Some(Reverse(f)) = self.far.pop() else {
                break;
            };
            let tick = f.tick.max(self.cursor);
            self.put(tick, f.at, f.item);
        }
    }

    /// Puts an entry in the slot of `tick` (within the horizon).
    fn put(&mut self, tick: u64, at: Instant, item: T) {
        let slot = (tick & self.mask) as usize;
        self.slots[slot].push_back((at, item));
        self.occupied[slot / 64] |= 1 << (slot % 64);
        self.resident += 1;
    }

    /// The first tick at or after the cursor whose slot holds entries.
    fn next_occupied(&self) -> Option<u64> {
        if self.resident == 0 {
            return None;
        }
        let start = self.cursor & self.mask;
        let words = self.occupied.len();
        let (w0, b0) = ((start / 64) as usize, start % 64);
        // The cursor's word from its bit up, the other words in order, then the cursor's word
        // below its bit (the last slots of the horizon).
        let at = |w: usize, bits: u64| {
            let slot = (w * 64) as u64 + u64::from(bits.trailing_zeros());
            self.cursor + (slot.wrapping_sub(start) & self.mask)
        };
        let first = self.occupied[w0] & (!0u64 << b0);
        if first != 0 {
            return Some(at(w0, first));
        }
        for k in 1..=words {
            let w = (w0 + k) % words;
            let bits = if k == words {
                self.occupied[w] & !(!0u64 << b0)
            } else {
                self.occupied[w]
            };
            if bits != 0 {
                return Some(at(w, bits));
            }
        }
        None
    }

    /// The next entry whose release time has come, with that time; `None` when nothing is due.
    pub fn pop_due(&mut self, now: Instant) -> Option<(Instant, T)> {
        let now_tick = now.as_nanos() >> self.shift;
        loop {
            if self.cursor > now_tick {
                return None;
            }
            let slot = (self.cursor & self.mask) as usize;
            if let Some(e) = self.slots[slot].pop_front() {
                self.resident -= 1;
                if self.slots[slot].is_empty() {
                    self.occupied[slot / 64] &= !(1 << (slot % 64));
                }
                return Some(e);
            }
            if self.cursor == now_tick {
                return None;
            }
            // The slot is drained and its tick has passed: on to the next tick that holds an
            // entry (in a slot or still in the overflow heap), `now`'s at the latest.
            let next_far = self.far.peek().map_or(u64::MAX, |Reverse(f)| f.tick);
            let next = self.next_occupied().unwrap_or(u64::MAX);
            self.cursor = now_tick.min(next_far).min(next).max(self.cursor + 1);
            self.refill();
        }
    }

    /// An entry is in the slot an entry inserted now at `at` would go to, or in an earlier
    /// one: it would come out before such an entry.
    #[inline]
    pub fn holds_by(&self, at: Instant) -> bool {
        if self.resident == 0 && self.far.is_empty() {
            return false;
        }
        let tick = self.tick_of(at).max(self.cursor);
        match self.next_occupied() {
            Some(t) => t <= tick,
            None => self.far.peek().is_some_and(|Reverse(f)| f.tick <= tick),
        }
    }

    /// When the earliest entry becomes due (its slot's tick start, at or after its release
    /// time); `None` when empty. Looks at the occupancy bitmap, at most `slots / 64` words.
    pub fn next_deadline(&self) -> Option<Instant> {
        match self.next_occupied() {
            Some(tick) => Some(self.tick_start(tick)),
            None => self.far.peek().map(|Reverse(f)| self.tick_start(f.tick)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ns(n: u64) -> Instant {
        Instant::from_nanos(n)
    }

    fn drain(w: &mut Wheel<u32>, now: Instant) -> Vec<u32> {
        std::iter::from_fn(|| w.pop_due(now).map(|(_, i)| i)).collect()
    }

    #[test]
    fn rejects_bad_geometry() {
        assert_eq!(
            Wheel::<u32>::new(Duration::from_nanos(1000), 8).err(),
            Some(WheelError::Tick(1000))
        );
        assert_eq!(
            Wheel::<u32>::new(Duration::from_nanos(1024), 6).err(),
            Some(WheelError::Slots(6))
        );
    }

    #[test]
    fn never_early_and_in_order() {
        let mut w = Wheel::new(Duration::from_nanos(1024), 16).unwrap();
        w.insert(ns(5000), 2);
        w.insert(ns(1024), 1);
        w.insert(ns(5001), 3);
        assert_eq!(drain(&mut w, ns(1023)), Vec::<u32>::new());
        assert_eq!(drain(&mut w, ns(1024)), vec![1]);
        // 5000 is in tick 5 (5120 ns): not due at 5000.
        assert_eq!(drain(&mut w, ns(5000)), Vec::<u32>::new());
        assert_eq!(w.next_deadline(), Some(ns(5120)));
        assert_eq!(drain(&mut w, ns(5120)), vec![2, 3]);
        assert!(w.is_empty());
        assert_eq!(w.next_deadline(), None);
    }

    #[test]
    fn beyond_the_horizon_waits_in_overflow() {
        let mut w = Wheel::new(Duration::from_nanos(1), 4).unwrap();
        w.insert(ns(100), 100);
        w.insert(ns(2), 2);
        w.insert(ns(50), 50);
        assert_eq!(w.next_deadline(), Some(ns(2)));
        assert_eq!(drain(&mut w, ns(10)), vec![2]);
        assert_eq!(w.next_deadline(), Some(ns(50)));
        assert_eq!(drain(&mut w, ns(99)), vec![50]);
        assert_eq!(drain(&mut w, ns(1000)), vec![100]);
    }

    #[test]
    fn past_times_are_due_now() {
        let mut w = Wheel::new(Duration::from_nanos(8), 8).unwrap();
        assert!(drain(&mut w, ns(10_000)).is_empty());
        w.insert(ns(3), 7);
        assert_eq!(drain(&mut w, ns(10_000)), vec![7]);
    }

    proptest! {
        /// Against a sorted-list model: with random inserts and polls, everything comes out, never
        /// before its time, and nothing whose tick has started is left behind by a poll; a poll
        /// finds a frame exactly when `next_deadline` has passed (one bitmap word, and four).
        #[test]
        fn matches_a_sorted_model(
            ops in proptest::collection::vec((0u64..20_000, 0u64..3_000, any::<bool>()), 1..300),
            slots in prop_oneof![Just(32usize), Just(256)],
        ) {
            let tick = 64u64;
            let mut w = Wheel::new(Duration::from_nanos(tick), slots).unwrap();
            let mut now = 0u64;
            let mut pending: Vec<(u64, u32)> = Vec::new();
            for (i, (offset, advance, poll)) in ops.into_iter().enumerate() {
                let at = now + offset;
                w.insert(ns(at), i as u32);
                pending.push((at, i as u32));
                now += advance;
                if poll {
                    let due = w.next_deadline().is_some_and(|d| d.as_nanos() <= now);
                    let mut first = w.pop_due(ns(now));
                    prop_assert_eq!(due, first.is_some(), "next_deadline {:?} at {}", w.next_deadline(), now);
                    while let Some((t, item)) = first.take().or_else(|| w.pop_due(ns(now))) {
                        prop_assert!(t.as_nanos() <= now, "released early");
                        let pos = pending.iter().position(|&(_, x)| x == item).unwrap();
                        pending.swap_remove(pos);
                    }
                    // Everything whose tick start has passed came out.
                    for &(at, _) in &pending {
                        prop_assert!(at.div_ceil(tick) * tick > now, "{} left at {}", at, now);
                    }
                }
                prop_assert_eq!(w.len(), pending.len());
            }
            let end = now + 1_000_000;
            while w.pop_due(ns(end)).is_some() {}
            prop_assert!(w.is_empty());
        }

        /// `holds_by(at)` is false exactly when an entry inserted at `at` would be the next one
        /// out: after random inserts and polls, the probe comes out first iff it said so.
        #[test]
        fn holds_by_says_whether_an_entry_comes_out_first(
            ops in proptest::collection::vec((0u64..20_000, 0u64..3_000, any::<bool>()), 0..100),
            probe in 0u64..30_000,
            slots in prop_oneof![Just(32usize), Just(256)],
        ) {
            let mut w = Wheel::new(Duration::from_nanos(64), slots).unwrap();
            let mut now = 0u64;
            for (i, (offset, advance, poll)) in ops.into_iter().enumerate() {
                w.insert(ns(now + offset), i as u32);
                now += advance;
                if poll {
                    while w.pop_due(ns(now)).is_some() {}
                }
            }
            let at = (now + probe).saturating_sub(5_000);
            let held = w.holds_by(ns(at));
            w.insert(ns(at), u32::MAX);
            let first = w.pop_due(ns(u64::MAX / 2)).map(|(_, i)| i);
            prop_assert_eq!(first == Some(u32::MAX), !held);
        }
    }
}
