//! The timing wheel: pending items in (tick, sequence number) order. The simulator's event
//! queue (1 ns ticks: every event in time order) and the host core's pacer (release times the
//! pacer in the rp crate computes, popped by a busy-polling worker once due) are this one
//! mechanism.
//!
//! Invariants:
//! - An item pushed for time `at` goes to tick `ceil(at / tick)`, or to the cursor's tick when
//!   that is later (a time in the past is due at once); it comes out at that tick's start,
//!   never before its time and at most one tick after it.
//! - Items pop in tick order; items of the same tick pop in the order of their sequence
//!   numbers (a push takes the next one; [`Wheel::reserve_at`] takes one for a later
//!   [`Wheel::push_reserved`]), so a run never depends on the wheel's internals and the same
//!   inputs give the same order.
//! - The cursor is the tick of the last pop ([`Wheel::pop`]), or for [`Wheel::pop_due`] the
//!   poll's tick when nothing earlier is pending; it never moves back. An item less than
//!   `slots` ticks after the cursor sits in slot `tick mod slots` (so a slot holds one tick
//!   only), later ones in the heap `far`. Whenever the cursor moves, the `far` items that
//!   came within `slots` ticks of it move into their slots before anything else is pushed, so
//!   a slot's tick is never also in `far`, and every slot item is earlier than every `far` one:
//!   a push is one append, a pop one read, with no item moved more than once (a radix heap
//!   moved each a few times, the bulk of its cost). Link delays and frame times of a
//!   data-centre fabric are a few microseconds at most, so the simulator's `far` holds only
//!   timers and flow starts.
//! - A slot's entries are sorted by sequence number; a fresh push is the largest number (an
//!   append), a reserved place pushed late the exception (a sorted insert). The cursor's slot is
//!   read from `head` on; it is emptied (capacity kept) when read to its end.
//! - A bitmap (one bit per slot, one summary bit per 64-slot word) says which slots hold
//!   pending items, so the next one is found with two trailing-zero counts, however far away.
//! - Slot storage grows to the peak number of items per tick and is reused, so the steady
//!   state allocates nothing.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use units::{Duration, Instant};

/// Most slots a wheel has: 64 words of 64, one summary word.
const MAX_SLOTS: usize = 64 * 64;

/// Errors from [`Wheel::new`].
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WheelError {
    #[error("wheel tick must be a power of two nanoseconds >= 1, got {0} ns")]
    Tick(u64),
    #[error("wheel slots must be a power of two from 2 to 4096, got {0}")]
    Slots(usize),
}

/// A slot's item: its tick is its slot's.
#[derive(Clone, Copy)]
struct Entry<T> {
    seq: u64,
    item: T,
}

/// An item beyond the horizon, ordered by (tick, sequence number) alone.
struct Far<T> {
    tick: u64,
    seq: u64,
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

/// A place in the order: a tick and a sequence number ([`Wheel::reserve_at`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    tick: u64,
    seq: u64,
}

impl Slot {
    /// Before any item: never pending.
    pub const PAST: Slot = Slot { tick: 0, seq: 0 };

    fn key(self) -> (u64, u64) {
        (self.tick, self.seq)
    }
}

/// Pending items in deterministic order, with a resolution of one tick.
pub struct Wheel<T> {
    shift: u32,
    mask: u64,
    slots: Vec<Vec<Entry<T>>>,
    /// Entries of the cursor's slot already popped.
    head: usize,
    /// Bit `i % 64` of word `i / 64`: slot `i` holds pending entries.
    words: [u64; MAX_SLOTS / 64],
    /// Words in use.
    nwords: usize,
    /// Bit `w`: word `w` is not zero.
    summary: u64,
    /// The tick of the last pop (0 before the first).
    cursor: u64,
    /// Items at least `slots` ticks after the cursor, earliest (tick, sequence number) first.
    far: BinaryHeap<Reverse<Far<T>>>,
    /// The last popped item's (tick, sequence number); (0, 0) before the first pop.
    popped_key: (u64, u64),
    len: usize,
    seq: u64,
    popped: u64,
}

impl<T: Copy> Wheel<T> {
    /// A wheel of `slots` slots (a power of two from 2 to 4096) of `tick` each (a power of
    /// two); items beyond `tick x slots` wait in a heap.
    pub fn new(tick: Duration, slots: usize) -> Result<Self, WheelError> {
        let t = tick.as_nanos();
        if t == 0 || !t.is_power_of_two() {
            return Err(WheelError::Tick(t));
        }
        if !(2..=MAX_SLOTS).contains(&slots) || !slots.is_power_of_two() {
            return Err(WheelError::Slots(slots));
        }
        Ok(Wheel::with(t.trailing_zeros(), slots))
    }

    /// The simulator's event queue: 1 ns ticks, 2048 slots (about two microseconds ahead).
    pub fn nanoseconds() -> Self {
        Wheel::with(0, 2048)
    }

    fn with(shift: u32, slots: usize) -> Self {
        Wheel {
            shift,
            mask: slots as u64 - 1,
            slots: (0..slots).map(|_| Vec::new()).collect(),
            head: 0,
            words: [0; MAX_SLOTS / 64],
            nwords: slots.div_ceil(64),
            summary: 0,
            cursor: 0,
            far: BinaryHeap::new(),
            popped_key: (0, 0),
            len: 0,
            seq: 0,
            popped: 0,
        }
    }

    fn horizon(&self) -> u64 {
        self.mask + 1
    }

    /// The tick whose start is the first one at or after `at`, not before the cursor's.
    #[inline]
    fn tick_of(&self, at: Instant) -> u64 {
        let ns = at.as_nanos();
        let t = ns >> self.shift;
        let t = if t << self.shift == ns { t } else { t + 1 };
        t.max(self.cursor)
    }

    fn tick_start(&self, tick: u64) -> Instant {
        Instant::from_nanos(tick.saturating_mul(1 << self.shift))
    }

    /// Schedules `item` at `at` (a time before the cursor's tick is due at once).
    #[inline]
    pub fn push(&mut self, at: Instant, item: T) {
        let seq = self.reserve();
        self.len += 1;
        let tick = self.tick_of(at);
        if tick - self.cursor < self.horizon() {
            // The largest sequence number yet: last in its slot.
            self.mark((tick & self.mask) as usize)
                .push(Entry { seq, item });
        } else {
            self.far.push(Reverse(Far { tick, seq, item }));
        }
    }

    /// Takes the next sequence number without scheduling anything: the [`Slot`] an item
    /// pushed now at `at` would have. [`push_reserved`](Self::push_reserved) may schedule it
    /// later (or never); it then pops exactly where it would have had it been pushed now.
    pub fn reserve_at(&mut self, at: Instant) -> Slot {
        Slot {
            tick: self.tick_of(at),
            seq: self.reserve(),
        }
    }

    fn reserve(&mut self) -> u64 {
        let seq = self.seq;
        self.seq += 1;
        seq
    }

    /// Schedules `item` in a reserved place, which must still be after the last pop
    /// ([`Wheel::is_pending`]).
    pub fn push_reserved(&mut self, slot: Slot, item: T) {
        debug_assert!(slot.key() >= self.popped_key, "item scheduled in the past");
        self.len += 1;
        let (tick, seq) = slot.key();
        if tick.wrapping_sub(self.cursor) < self.horizon() {
            self.put(tick, seq, item);
        } else {
            self.far.push(Reverse(Far { tick, seq, item }));
        }
    }

    /// Whether `slot` comes after the item popped last (an item there is still pending).
    pub fn is_pending(&self, slot: Slot) -> bool {
        slot.key() > self.popped_key
    }

    /// Into the slot of `tick`, less than `slots` ticks after the cursor.
    #[inline]
    fn put(&mut self, tick: u64, seq: u64, item: T) {
        let i = (tick & self.mask) as usize;
        // An unmarked slot is empty: no need to read its last entry (a cold line).
        let empty = self.words[i / 64] & (1 << (i % 64)) == 0;
        let v = self.mark(i);
        let e = Entry { seq, item };
        if empty || v.last().map_or(true, |l| l.seq < seq) {
            v.push(e);
        } else {
            // A reserved place pushed late. Entries already popped from the cursor's slot have
            // smaller numbers (they popped before it), so the insert lands after `head`.
            let p = v.partition_point(|x| x.seq < seq);
            v.insert(p, e);
        }
    }

    /// Marks slot `i` as holding entries; returns it.
    #[inline]
    fn mark(&mut self, i: usize) -> &mut Vec<Entry<T>> {
        self.words[i / 64] |= 1 << (i % 64);
        self.summary |= 1 << (i / 64);
        &mut self.slots[i]
    }

    #[inline]
    fn is_marked(&self, i: usize) -> bool {
        self.words[i / 64] & (1 << (i % 64)) != 0
    }

    /// The first slot at or after `from` (circularly) holding pending entries.
    #[inline]
    fn next_occupied(&self, from: usize) -> Option<usize> {
        let w = from / 64;
        let bits = self.words[w] & (!0u64 << (from % 64));
        if bits != 0 {
            return Some(w * 64 + bits.trailing_zeros() as usize);
        }
        let later = if w + 1 < self.nwords {
            self.summary & (!0u64 << (w + 1))
        } else {
            0
        };
        // Past the last word the search wraps to the lowest word with entries (word `w`'s
        // remaining ones are below `from`: later than every other word's).
        let s = if later != 0 { later } else { self.summary };
        if s == 0 {
            return None;
        }
        let k = s.trailing_zeros() as usize;
        Some(k * 64 + self.words[k].trailing_zeros() as usize)
    }

    /// The tick of the earliest pending item.
    #[inline]
    fn next_tick(&self) -> Option<u64> {
        let cur = (self.cursor & self.mask) as usize;
        match self.next_occupied(cur) {
            Some(i) => Some(self.cursor + ((i as u64).wrapping_sub(cur as u64) & self.mask)),
            None => self.far.peek().map(|Reverse(f)| f.tick),
        }
    }

    /// Moves the cursor to the earliest pending item's tick, or to `limit` when that is
    /// earlier (or nothing is pending and `limit` is finite), bringing the `far` items within
    /// reach into their slots; whether the cursor's slot then holds an item.
    #[inline]
    fn settle(&mut self, limit: u64) -> bool {
        if self.is_marked((self.cursor & self.mask) as usize) {
            return true;
        }
        if self.cursor >= limit {
            return false;
        }
        let next = match self.next_tick() {
            Some(t) => t.min(limit),
            None if limit < u64::MAX => limit,
            None => return false,
        };
        self.cursor = next;
        while let Some(Reverse(f)) = self.far.peek() {
            if f.tick - self.cursor >= self.horizon() {
                break;
            }
            if let Some(Reverse(f)) = self.far.pop() {
                self.put(f.tick, f.seq, f.item);
            }
        }
        self.is_marked((self.cursor & self.mask) as usize)
    }

    /// Takes the next entry of the cursor's slot, which holds one.
    #[inline]
    fn take(&mut self) -> T {
        let cur = (self.cursor & self.mask) as usize;
        let v = &mut self.slots[cur];
        let e = v[self.head];
        self.head += 1;
        if self.head == v.len() {
            v.clear();
            self.head = 0;
            self.words[cur / 64] &= !(1 << (cur % 64));
            if self.words[cur / 64] == 0 {
                self.summary &= !(1 << (cur / 64));
            }
        }
        self.len -= 1;
        self.popped += 1;
        self.popped_key = (self.cursor, e.seq);
        e.item
    }

    /// The earliest pending item and its tick's start, however far ahead.
    #[inline]
    pub fn pop(&mut self) -> Option<(Instant, T)> {
        if !self.settle(u64::MAX) {
            return None;
        }
        let item = self.take();
        Some((self.tick_start(self.cursor), item))
    }

    /// The next item whose tick has started by `now`; `None` when nothing is due.
    #[inline]
    pub fn pop_due(&mut self, now: Instant) -> Option<T> {
        let now_tick = now.as_nanos() >> self.shift;
        if self.cursor > now_tick || !self.settle(now_tick) {
            return None;
        }
        Some(self.take())
    }

    /// An item is in the tick an item pushed now at `at` would go to, or in an earlier one:
    /// it would come out before such an item.
    #[inline]
    pub fn holds_by(&self, at: Instant) -> bool {
        self.len > 0 && self.next_tick().is_some_and(|t| t <= self.tick_of(at))
    }

    /// When the earliest item becomes due (its tick's start); `None` when empty.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.next_tick().map(|t| self.tick_start(t))
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Items popped so far (the simulator's work counter).
    pub fn popped(&self) -> u64 {
        self.popped
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const WHEEL: u64 = 2048;

    fn ns(n: u64) -> Instant {
        Instant::from_nanos(n)
    }

    fn drain(w: &mut Wheel<u32>, now: Instant) -> Vec<u32> {
        std::iter::from_fn(|| w.pop_due(now)).collect()
    }

    #[test]
    fn pops_in_time_then_push_order() {
        let mut q = Wheel::nanoseconds();
        q.push(ns(20), 'c');
        q.push(ns(10), 'a');
        q.push(ns(20), 'd');
        q.push(ns(10), 'b');
        let order: Vec<char> = std::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect();
        assert_eq!(order, vec!['a', 'b', 'c', 'd']);
        assert_eq!(q.popped(), 4);
        assert!(q.is_empty());
    }

    #[test]
    fn a_reserved_slot_pops_where_a_push_would_have() {
        let mut q = Wheel::nanoseconds();
        q.push(ns(5), 'a');
        let slot = q.reserve_at(ns(10));
        q.push(ns(10), 'c');
        q.push(ns(10), 'd');
        assert_eq!(q.pop(), Some((ns(5), 'a')));
        assert!(q.is_pending(slot));
        // Pushed late, it still pops before the events pushed after it was reserved.
        q.push_reserved(slot, 'b');
        let order: Vec<char> = std::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect();
        assert_eq!(order, vec!['b', 'c', 'd']);
        assert!(!q.is_pending(slot));
        assert!(!q.is_pending(Slot::PAST));
    }

    #[test]
    fn overflow_events_keep_their_place_among_later_pushes() {
        let mut q = Wheel::nanoseconds();
        let far = ns(3 * WHEEL);
        q.push(ns(WHEEL), 'a');
        q.push(far, 'c'); // beyond the wheel: into `far`
        let slot = q.reserve_at(far); // pushed into `far` later, after 'c'
        q.push(far, 'e');
        assert_eq!(q.next_deadline(), Some(ns(WHEEL)));
        // Popping 'a' brings `far` within the wheel: 'c' and 'e' move into its slot.
        assert_eq!(q.pop(), Some((ns(WHEEL), 'a')));
        q.push(far, 'f'); // straight into the slot, behind the moved ones
        q.push_reserved(slot, 'd');
        q.push(ns(WHEEL), 'b'); // at the cursor
        let order: Vec<char> = std::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect();
        assert_eq!(order, vec!['b', 'c', 'd', 'e', 'f']);
        assert_eq!(q.next_deadline(), None);
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
        assert_eq!(
            Wheel::<u32>::new(Duration::from_nanos(1024), 8192).err(),
            Some(WheelError::Slots(8192))
        );
    }

    #[test]
    fn never_early_and_in_order() {
        let mut w = Wheel::new(Duration::from_nanos(1024), 16).unwrap();
        w.push(ns(5000), 2);
        w.push(ns(1024), 1);
        w.push(ns(5001), 3);
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
        w.push(ns(100), 100);
        w.push(ns(2), 2);
        w.push(ns(50), 50);
        assert_eq!(w.next_deadline(), Some(ns(2)));
        assert_eq!(drain(&mut w, ns(10)), vec![2]);
        assert_eq!(w.next_deadline(), Some(ns(50)));
        assert_eq!(drain(&mut w, ns(99)), vec![50]);
        assert_eq!(drain(&mut w, ns(1000)), vec![100]);
    }

    #[test]
    fn past_times_are_due_now_behind_what_is_due() {
        let mut w = Wheel::new(Duration::from_nanos(8), 8).unwrap();
        assert!(drain(&mut w, ns(10_000)).is_empty());
        w.push(ns(3), 7);
        w.push(ns(1), 8);
        assert_eq!(drain(&mut w, ns(10_000)), vec![7, 8]);
    }

    proptest! {
        #[test]
        fn order_is_time_then_fifo(times in proptest::collection::vec(0u64..50, 0..200)) {
            let mut q = Wheel::nanoseconds();
            for (i, t) in times.iter().enumerate() {
                q.push(ns(*t), i);
            }
            let mut expected: Vec<(u64, usize)> =
                times.iter().copied().enumerate().map(|(i, t)| (t, i)).collect();
            expected.sort();
            let got: Vec<(u64, usize)> =
                std::iter::from_fn(|| q.pop().map(|(t, e)| (t.as_nanos(), e))).collect();
            prop_assert_eq!(got, expected);
        }

        /// Model-based: pushes interleaved with pops, each push at or after the last popped
        /// time (as the simulator schedules), against a sorted list.
        #[test]
        fn interleaved_pushes_and_pops_match_a_sorted_model(
            ops in proptest::collection::vec((0u64..5, 0u64..1_000_000_000_000), 0..400)
        ) {
            let mut q = Wheel::nanoseconds();
            let mut model: Vec<(u64, u64, usize)> = Vec::new(); // (time, seq, id)
            let (mut now, mut seq) = (0u64, 0u64);
            // Reserved places not pushed yet: (place, its time, its model sequence number).
            let mut reserved: Vec<(Slot, u64, u64)> = Vec::new();
            let mut last_popped = (0u64, 0u64);
            for (i, (op, dt)) in ops.into_iter().enumerate() {
                if op == 3 {
                    // Reserve a place now; push it (if still after the last pop) at a later
                    // op: a few nanoseconds ahead (a frame time) or across the wheel's edge.
                    let at = now + if dt % 2 == 0 { dt % 8 } else { dt % 9000 };
                    reserved.push((q.reserve_at(ns(at)), at, seq));
                    seq += 1;
                    continue;
                }
                if op == 4 {
                    if let Some((slot, at, s)) = reserved.pop() {
                        if (at, s) > last_popped {
                            prop_assert!(q.is_pending(slot));
                            q.push_reserved(slot, i);
                            model.push((at, s, i));
                        } else {
                            prop_assert!(!q.is_pending(slot));
                        }
                    }
                    prop_assert_eq!(q.len(), model.len());
                    continue;
                }
                if op == 0 {
                    let got = q.pop().map(|(t, e)| (t.as_nanos(), e));
                    model.sort();
                    let want = if model.is_empty() { None } else { Some(model.remove(0)) };
                    prop_assert_eq!(got, want.map(|(t, _, id)| (t, id)));
                    if let Some((t, s, _)) = want {
                        now = t;
                        last_popped = (t, s);
                    }
                } else {
                    // Steps of a few nanoseconds (ties with the present and each other), steps
                    // around the wheel's size (into `far` and back), and huge ones.
                    let at = now
                        + match (op, dt % 2) {
                            (1, _) => dt % 8,
                            (_, 0) => dt % 9000,
                            _ => dt,
                        };
                    q.push(ns(at), i);
                    model.push((at, seq, i));
                    seq += 1;
                }
                prop_assert_eq!(q.len(), model.len());
            }
        }

        /// Against a sorted-list model: with random pushes and polls, everything comes out,
        /// never before its time, and nothing whose tick has started is left behind by a poll;
        /// a poll finds an item exactly when `next_deadline` has passed (one bitmap word, and
        /// four).
        #[test]
        fn polls_match_a_sorted_model(
            ops in proptest::collection::vec((0u64..20_000, 0u64..3_000, any::<bool>()), 1..300),
            slots in prop_oneof![Just(32usize), Just(256)],
        ) {
            let tick = 64u64;
            let mut w = Wheel::new(Duration::from_nanos(tick), slots).unwrap();
            let mut now = 0u64;
            let mut pending: Vec<(u64, u32)> = Vec::new();
            for (i, (offset, advance, poll)) in ops.into_iter().enumerate() {
                let at = now + offset;
                w.push(ns(at), (at, i as u32));
                pending.push((at, i as u32));
                now += advance;
                if poll {
                    let due = w.next_deadline().is_some_and(|d| d.as_nanos() <= now);
                    let mut first = w.pop_due(ns(now));
                    prop_assert_eq!(due, first.is_some(), "next_deadline {:?} at {}", w.next_deadline(), now);
                    while let Some((t, item)) = first.take().or_else(|| w.pop_due(ns(now))) {
                        prop_assert!(t <= now, "released early");
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

        /// `holds_by(at)` is false exactly when an item pushed at `at` would be the next one
        /// out: after random pushes and polls, the probe comes out first iff it said so.
        #[test]
        fn holds_by_says_whether_an_item_comes_out_first(
            ops in proptest::collection::vec((0u64..20_000, 0u64..3_000, any::<bool>()), 0..100),
            probe in 0u64..30_000,
            slots in prop_oneof![Just(32usize), Just(256)],
        ) {
            let mut w = Wheel::new(Duration::from_nanos(64), slots).unwrap();
            let mut now = 0u64;
            for (i, (offset, advance, poll)) in ops.into_iter().enumerate() {
                w.push(ns(now + offset), i as u32);
                now += advance;
                if poll {
                    while w.pop_due(ns(now)).is_some() {}
                }
            }
            let at = (now + probe).saturating_sub(5_000);
            let held = w.holds_by(ns(at));
            w.push(ns(at), u32::MAX);
            let first = w.pop_due(ns(u64::MAX / 2));
            prop_assert_eq!(first == Some(u32::MAX), !held);
        }
    }
}
