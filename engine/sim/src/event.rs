//! The event queue: a timing wheel of one-nanosecond slots for the near future, an ordered map
//! for the rest; ties in sequence-number order.
//!
//! Invariants:
//! - Events pop in time order; events scheduled for the same nanosecond pop in the order of
//!   their sequence numbers (a push takes the next one; [`EventQueue::reserve_at`] takes one
//!   for a later [`EventQueue::push_reserved`]), so a run never depends on the queue's
//!   internals and the same inputs give the same event order.
//! - Times are never below the last popped time (`now`): the simulator only schedules at or
//!   after the present. An event less than [`WHEEL`] ns ahead of `now` sits in the wheel's slot
//!   `time mod WHEEL` (so a slot holds one time only), later ones in the ordered map `far`.
//!   Whenever `now` moves, the `far` events that came within [`WHEEL`] ns of it move into their
//!   slots before anything else is pushed, so a slot's time is never also in `far`, and every
//!   wheel event is earlier than every `far` event: a push is one append, a pop one read, with
//!   no event moved more than once (a radix heap moved each a few times, the bulk of its cost).
//!   Link delays and frame times of a data-centre fabric are a few microseconds at most, so
//!   `far` holds only timers and flow starts.
//! - A slot's entries are sorted by sequence number; a fresh push is the largest number (an
//!   append), a reserved slot pushed late the exception (a sorted insert). The slot at `now` is
//!   read from `head` on; it is emptied (capacity kept) when read to its end.
//! - A bitmap (one bit per slot, one summary bit per 64-slot word) says which slots hold
//!   pending events, so the next one is found with two trailing-zero counts.
//! - Events are small `Copy` values (a closed enum, no `Box<dyn>`); slot storage grows to the
//!   peak number of events per nanosecond and is reused, so the steady state allocates nothing.

use std::collections::BTreeMap;

use units::Instant;

/// Slots of the wheel, one nanosecond each (a power of two, at most 64 x 64).
const WHEEL: usize = 2048;
const MASK: u64 = WHEEL as u64 - 1;
const WORDS: usize = WHEEL / 64;

/// A wheel event: its time is its slot's.
#[derive(Clone, Copy)]
struct Entry<E> {
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

/// Pending events in deterministic order.
pub struct EventQueue<E> {
    slots: Vec<Vec<Entry<E>>>,
    /// Entries of the slot at `now` already popped.
    head: usize,
    /// Bit `i % 64` of word `i / 64`: slot `i` holds pending entries.
    words: [u64; WORDS],
    /// Bit `w`: word `w` is not zero.
    summary: u64,
    /// The last popped event's time (0 before the first pop).
    now: u64,
    /// Events at least [`WHEEL`] ns after `now`, by (time, sequence number).
    far: BTreeMap<(u64, u64), E>,
    /// The last popped event's (time, sequence number); (0, 0) before the first pop.
    popped_key: (u64, u64),
    len: usize,
    seq: u64,
    popped: u64,
}

impl<E: Copy> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E: Copy> EventQueue<E> {
    pub fn new() -> Self {
        EventQueue {
            slots: (0..WHEEL).map(|_| Vec::new()).collect(),
            head: 0,
            words: [0; WORDS],
            summary: 0,
            now: 0,
            far: BTreeMap::new(),
            popped_key: (0, 0),
            len: 0,
            seq: 0,
            popped: 0,
        }
    }

    /// Schedules `event` at `at`, which must not be before the last popped event's time.
    pub fn push(&mut self, at: Instant, event: E) {
        let seq = self.reserve();
        self.len += 1;
        let at = at.as_nanos();
        debug_assert!(at >= self.now, "event scheduled in the past");
        if at - self.now < WHEEL as u64 {
            // The largest sequence number yet: last in its slot.
            self.mark((at & MASK) as usize).push(Entry { seq, event });
        } else {
            self.far.insert((at, seq), event);
        }
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
        if at.wrapping_sub(self.now) < WHEEL as u64 {
            self.put(at, seq, event);
        } else {
            self.far.insert((at, seq), event);
        }
    }

    /// Whether `slot` comes after the event popped last (an event there is still pending).
    pub fn is_pending(&self, slot: Slot) -> bool {
        slot.key() > self.popped_key
    }

    /// Into the slot of `at`, less than [`WHEEL`] ns after `now`.
    #[inline]
    fn put(&mut self, at: u64, seq: u64, event: E) {
        let i = (at & MASK) as usize;
        // An unmarked slot is empty: no need to read its last entry (a cold line).
        let empty = self.words[i / 64] & (1 << (i % 64)) == 0;
        let v = self.mark(i);
        let e = Entry { seq, event };
        if empty || v.last().map_or(true, |l| l.seq < seq) {
            v.push(e);
        } else {
            // A reserved slot pushed late. Entries already popped from the slot at `now` have
            // smaller numbers (they popped before it), so the insert lands after `head`.
            let p = v.partition_point(|x| x.seq < seq);
            v.insert(p, e);
        }
    }

    /// Marks slot `i` as holding entries; returns it.
    #[inline]
    fn mark(&mut self, i: usize) -> &mut Vec<Entry<E>> {
        self.words[i / 64] |= 1 << (i % 64);
        self.summary |= 1 << (i / 64);
        &mut self.slots[i]
    }

    /// The first slot at or after `from` (circularly) holding pending entries.
    #[inline]
    fn next_occupied(&self, from: usize) -> Option<usize> {
        let w = from / 64;
        let bits = self.words[w] & (!0u64 << (from % 64));
        if bits != 0 {
            return Some(w * 64 + bits.trailing_zeros() as usize);
        }
        let later = if w + 1 < WORDS {
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

    /// The earliest pending event and its time.
    pub fn pop(&mut self) -> Option<(Instant, E)> {
        let mut cur = (self.now & MASK) as usize;
        if self.words[cur / 64] & (1 << (cur % 64)) == 0 {
            // Nothing left at `now`: on to the next occupied slot, or to the earliest `far`
            // event when the wheel is empty.
            self.now = match self.next_occupied(cur) {
                Some(i) => self.now + ((i as u64).wrapping_sub(cur as u64) & MASK),
                None => self.far.first_key_value()?.0 .0,
            };
            while let Some(&(at, _)) = self.far.first_key_value().map(|(k, _)| k) {
                if at - self.now >= WHEEL as u64 {
                    break;
                }
                if let Some(((at, seq), event)) = self.far.pop_first() {
                    self.put(at, seq, event);
                }
            }
            cur = (self.now & MASK) as usize;
        }
        let v = &mut self.slots[cur];
        let e = *v.get(self.head)?;
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
        self.popped_key = (self.now, e.seq);
        Some((Instant::from_nanos(self.now), e.event))
    }

    /// Time of the earliest pending event.
    pub fn peek_time(&self) -> Option<Instant> {
        let cur = (self.now & MASK) as usize;
        match self.next_occupied(cur) {
            Some(i) => Some(Instant::from_nanos(
                self.now + ((i as u64).wrapping_sub(cur as u64) & MASK),
            )),
            None => self
                .far
                .first_key_value()
                .map(|(&(at, _), _)| Instant::from_nanos(at)),
        }
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

    #[test]
    fn overflow_events_keep_their_place_among_later_pushes() {
        let mut q = EventQueue::new();
        let far = Instant::from_nanos(3 * WHEEL as u64);
        q.push(Instant::from_nanos(WHEEL as u64), 'a');
        q.push(far, 'c'); // beyond the wheel: into `far`
        let slot = q.reserve_at(far); // pushed into `far` later, after 'c'
        q.push(far, 'e');
        assert_eq!(q.peek_time(), Some(Instant::from_nanos(WHEEL as u64)));
        // Popping 'a' brings `far` within the wheel: 'c' and 'e' move into its slot.
        assert_eq!(q.pop(), Some((Instant::from_nanos(WHEEL as u64), 'a')));
        q.push(far, 'f'); // straight into the slot, behind the moved ones
        q.push_reserved(slot, 'd');
        q.push(Instant::from_nanos(WHEEL as u64), 'b'); // at `now`
        let order: Vec<char> = std::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect();
        assert_eq!(order, vec!['b', 'c', 'd', 'e', 'f']);
        assert_eq!(q.peek_time(), None);
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
                    // Reserve a slot now; push it (if still after the last pop) at a later op:
                    // a few nanoseconds ahead (a frame time) or across the wheel's edge.
                    let at = now + if dt % 2 == 0 { dt % 8 } else { dt % 9000 };
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
                    // Steps of a few nanoseconds (ties with the present and each other), steps
                    // around the wheel's size (into `far` and back), and huge ones.
                    let at = now
                        + match (op, dt % 2) {
                            (1, _) => dt % 8,
                            (_, 0) => dt % 9000,
                            _ => dt,
                        };
                    q.push(Instant::from_nanos(at), i);
                    model.push((at, seq, i));
                    seq += 1;
                }
                proptest::prop_assert_eq!(q.len(), model.len());
            }
        }
    }
}
