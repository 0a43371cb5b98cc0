//! The event queue: a radix heap keyed by time, ties in sequence-number order.
//!
//! Invariants:
//! - Events pop in time order; events scheduled for the same nanosecond pop in the order of
//!   their sequence numbers (a push takes the next one; [`EventQueue::reserve_at`] takes one
//!   for a later [`EventQueue::push_reserved`]), so a run never depends on the queue's
//!   internals and the same inputs give the same event order.
//! - Times are never below the last popped time: the simulator only schedules at or after the
//!   present. That monotonicity is what a radix heap needs (Ahuja, Mehlhorn, Orlin and Tarjan,
//!   "Faster algorithms for the shortest path problem", 1990): bucket `b` (b >= 1) holds the
//!   events whose time's highest bit differing from the last popped time is bit `b - 1`, so a
//!   push is a leading-zero count and an append, and a pop empties the lowest non-empty bucket
//!   into lower ones only when bucket 0 is empty. Each event moves down at most 64 times; in
//!   practice a few. The key is the time alone: the sequence number's bits would send events
//!   of one nanosecond down through up to 64 more buckets each.
//! - Bucket 0 holds the events at exactly the last popped time, sorted by sequence number
//!   (descending: the next pops off the end). A push there is almost always the largest
//!   number (a fresh one), a reserved slot pushed late the exception: both a sorted insert
//!   into a bucket that rarely holds more than a few events.
//! - Events are small `Copy` values (a closed enum, no `Box<dyn>`); bucket storage grows to the
//!   peak number of pending events and is reused, so the steady state allocates nothing.

use units::Instant;

struct Entry<E> {
    at: u64,
    seq: u64,
    event: E,
}

/// A place in the event order: a time and a sequence number ([`EventQueue::reserve_at`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    pub at: Instant,
    seq: u64,
}

impl Slot {
    /// Before any event: never pending.
    pub const PAST: Slot = Slot {
        at: Instant::ZERO,
        seq: 0,
    };

    fn key(self) -> (u64, u64) {
        (self.at.as_nanos(), self.seq)
    }
}

/// Buckets: one for "equal to the last popped time", one per bit of the time.
const BUCKETS: usize = 65;

/// Pending events in deterministic order.
pub struct EventQueue<E> {
    buckets: Vec<Vec<Entry<E>>>,
    /// Bit `b` set: bucket `b + 1` is non-empty (bucket 0 is looked at directly).
    occupied: u64,
    /// The time buckets are relative to: the last popped event's (0 before the first pop).
    last: u64,
    /// The last popped event's (time, sequence number); (0, 0) before the first pop.
    popped_key: (u64, u64),
    len: usize,
    seq: u64,
    popped: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

fn bucket(at: u64, last: u64) -> usize {
    BUCKETS - 1 - (at ^ last).leading_zeros() as usize
}

impl<E> EventQueue<E> {
    pub fn new() -> Self {
        EventQueue {
            buckets: (0..BUCKETS).map(|_| Vec::new()).collect(),
            occupied: 0,
            last: 0,
            popped_key: (0, 0),
            len: 0,
            seq: 0,
            popped: 0,
        }
    }

    /// Schedules `event` at `at`, which must not be before the last popped event's time.
    pub fn push(&mut self, at: Instant, event: E) {
        let seq = self.reserve();
        self.push_reserved(Slot { at, seq }, event);
    }

    /// Takes the next sequence number without scheduling anything: the [`Slot`] an event
    /// pushed now would have. [`push_reserved`](Self::push_reserved) may schedule it later (or
    /// never); it then pops exactly where it would have had it been pushed now.
    pub fn reserve_at(&mut self, at: Instant) -> Slot {
        Slot {
            at,
            seq: self.reserve(),
        }
    }

    fn reserve(&mut self) -> u64 {
        let seq = self.seq;
        self.seq += 1;
        seq
    }

    /// Schedules `event` in a reserved slot, which must still be after the current event
    /// ([`EventQueue::is_pending`]).
    pub fn push_reserved(&mut self, slot: Slot, event: E) {
        debug_assert!(slot.key() >= self.popped_key, "event scheduled in the past");
        self.len += 1;
        let (at, seq) = slot.key();
        let e = Entry { at, seq, event };
        if at == self.last {
            let zero = &mut self.buckets[0];
            // Descending by sequence number; a fresh push (the largest) goes first.
            let i = zero.partition_point(|x| x.seq > seq);
            zero.insert(i, e);
        } else {
            self.put(e);
        }
    }

    /// Whether `slot` comes after the event popped last (an event there is still pending).
    pub fn is_pending(&self, slot: Slot) -> bool {
        slot.key() > self.popped_key
    }

    /// Into the bucket for a time after `last`.
    #[inline]
    fn put(&mut self, e: Entry<E>) {
        let b = bucket(e.at, self.last);
        self.occupied |= 1 << (b - 1);
        self.buckets[b].push(e);
    }

    /// The earliest pending event and its time.
    pub fn pop(&mut self) -> Option<(Instant, E)> {
        if self.buckets[0].is_empty() {
            if self.occupied == 0 {
                return None;
            }
            let i = self.occupied.trailing_zeros() as usize + 1;
            self.occupied &= !(1 << (i - 1));
            let mut moving = std::mem::take(&mut self.buckets[i]);
            let min = moving.iter().map(|e| e.at).min()?;
            self.last = min;
            for e in moving.drain(..) {
                if e.at == min {
                    self.buckets[0].push(e);
                } else {
                    self.put(e);
                }
            }
            // Keep the emptied vector's capacity for the next time this bucket fills.
            self.buckets[i] = moving;
            let zero = &mut self.buckets[0];
            if zero.len() > 1 {
                zero.sort_unstable_by_key(|e| std::cmp::Reverse(e.seq));
            }
        }
        let e = self.buckets[0].pop()?;
        self.len -= 1;
        self.popped += 1;
        self.popped_key = (e.at, e.seq);
        Some((Instant::from_nanos(e.at), e.event))
    }

    /// Time of the earliest pending event.
    pub fn peek_time(&self) -> Option<Instant> {
        if !self.buckets[0].is_empty() {
            return Some(Instant::from_nanos(self.last));
        }
        // The lowest non-empty bucket holds the minimum.
        let b = self.buckets.iter().find(|b| !b.is_empty())?;
        let min = b.iter().map(|e| e.at).min()?;
        Some(Instant::from_nanos(min))
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Events popped so far (the simulator's work counter).
    pub fn popped(&self) -> u64 {
        self.popped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_in_time_then_push_order() {
        let mut q = EventQueue::new();
        q.push(Instant::from_nanos(20), 'c');
        q.push(Instant::from_nanos(10), 'a');
        q.push(Instant::from_nanos(20), 'd');
        q.push(Instant::from_nanos(10), 'b');
        let order: Vec<char> = std::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect();
        assert_eq!(order, vec!['a', 'b', 'c', 'd']);
        assert_eq!(q.popped(), 4);
        assert!(q.is_empty());
    }

    #[test]
    fn a_reserved_slot_pops_where_a_push_would_have() {
        let mut q = EventQueue::new();
        q.push(Instant::from_nanos(5), 'a');
        let slot = q.reserve_at(Instant::from_nanos(10));
        q.push(Instant::from_nanos(10), 'c');
        q.push(Instant::from_nanos(10), 'd');
        assert_eq!(q.pop(), Some((Instant::from_nanos(5), 'a')));
        assert!(q.is_pending(slot));
        // Pushed late, it still pops before the events pushed after it was reserved.
        q.push_reserved(slot, 'b');
        let order: Vec<char> = std::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect();
        assert_eq!(order, vec!['b', 'c', 'd']);
        assert!(!q.is_pending(slot));
        assert!(!q.is_pending(Slot::PAST));
    }

    proptest::proptest! {
        #[test]
        fn order_is_time_then_fifo(times in proptest::collection::vec(0u64..50, 0..200)) {
            let mut q = EventQueue::new();
            for (i, t) in times.iter().enumerate() {
                q.push(Instant::from_nanos(*t), i);
            }
            let mut expected: Vec<(u64, usize)> =
                times.iter().copied().enumerate().map(|(i, t)| (t, i)).collect();
            expected.sort();
            let got: Vec<(u64, usize)> =
                std::iter::from_fn(|| q.pop().map(|(t, e)| (t.as_nanos(), e))).collect();
            proptest::prop_assert_eq!(got, expected);
        }

        /// Model-based: pushes interleaved with pops, each push at or after the last popped
        /// time (as the simulator schedules), against a sorted list.
        #[test]
        fn interleaved_pushes_and_pops_match_a_sorted_model(
            ops in proptest::collection::vec((0u64..5, 0u64..1_000_000_000_000), 0..400)
        ) {
            let mut q = EventQueue::new();
            let mut model: Vec<(u64, u64, usize)> = Vec::new(); // (time, seq, id)
            let (mut now, mut seq) = (0u64, 0u64);
            // Reserved slots not pushed yet: (slot, its model sequence number).
            let mut reserved: Vec<(Slot, u64)> = Vec::new();
            let mut last_popped = (0u64, 0u64);
            for (i, (op, dt)) in ops.into_iter().enumerate() {
                if op == 3 {
                    // Reserve a slot now; push it (if still after the last pop) at a later op.
                    let at = now + dt % 8;
                    reserved.push((q.reserve_at(Instant::from_nanos(at)), seq));
                    seq += 1;
                    continue;
                }
                if op == 4 {
                    if let Some((slot, s)) = reserved.pop() {
                        if (slot.at.as_nanos(), s) > last_popped {
                            proptest::prop_assert!(q.is_pending(slot));
                            q.push_reserved(slot, i);
                            model.push((slot.at.as_nanos(), s, i));
                        } else {
                            proptest::prop_assert!(!q.is_pending(slot));
                        }
                    }
                    proptest::prop_assert_eq!(q.len(), model.len());
                    continue;
                }
                if op == 0 {
                    let got = q.pop().map(|(t, e)| (t.as_nanos(), e));
                    model.sort();
                    let want = if model.is_empty() { None } else { Some(model.remove(0)) };
                    proptest::prop_assert_eq!(got, want.map(|(t, _, id)| (t, id)));
                    if let Some((t, s, _)) = want {
                        now = t;
                        last_popped = (t, s);
                    }
                } else {
                    // Steps of a few nanoseconds (ties with the present and each other) and huge
                    // ones, to cross high bits of the time.
                    let at = now + if op == 1 { dt % 8 } else { dt };
                    q.push(Instant::from_nanos(at), i);
                    model.push((at, seq, i));
                    seq += 1;
                }
                proptest::prop_assert_eq!(q.len(), model.len());
            }
        }
    }
}
