//! The event queue: a binary min-heap keyed by `(time, sequence number)`.
//!
//! Invariants:
//! - Events pop in time order; events scheduled for the same nanosecond pop in the order they were
//!   pushed (the sequence number breaks ties), so a run never depends on heap internals and the
//!   same inputs give the same event order.
//! - Events are small `Copy` values (a closed enum, no `Box<dyn>`); the heap's storage grows to
//!   the peak number of pending events and is reused, so the steady state allocates nothing.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use units::Instant;

struct Entry<E> {
    // time in the high 64 bits, sequence number in the low 64 bits: one integer comparison.
    key: u128,
    event: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<E> Ord for Entry<E> {
    // Reversed: BinaryHeap is a max-heap, we want the earliest key on top.
    fn cmp(&self, other: &Self) -> Ordering {
        other.key.cmp(&self.key)
    }
}

/// Pending events in deterministic order.
pub struct EventQueue<E> {
    heap: BinaryHeap<Entry<E>>,
    seq: u64,
    popped: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E> EventQueue<E> {
    pub fn new() -> Self {
        EventQueue {
            heap: BinaryHeap::with_capacity(1024),
            seq: 0,
            popped: 0,
        }
    }

    /// Schedules `event` at `at`.
    pub fn push(&mut self, at: Instant, event: E) {
        let key = ((at.as_nanos() as u128) << 64) | self.seq as u128;
        self.seq += 1;
        self.heap.push(Entry { key, event });
    }

    /// The earliest pending event and its time.
    pub fn pop(&mut self) -> Option<(Instant, E)> {
        let e = self.heap.pop()?;
        self.popped += 1;
        Some((Instant::from_nanos((e.key >> 64) as u64), e.event))
    }

    /// Time of the earliest pending event.
    pub fn peek_time(&self) -> Option<Instant> {
        self.heap
            .peek()
            .map(|e| Instant::from_nanos((e.key >> 64) as u64))
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
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
    }
}
