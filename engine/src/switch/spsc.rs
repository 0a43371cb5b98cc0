//! A bounded single-producer / single-consumer ring with burst push and pop (DPDK's
//! `rte_ring` in SP/SC mode with burst calls, lib/ring/rte_ring.h): the producer writes up to a
//! burst of slots and publishes them with one release store of its tail; the consumer reads
//! what is published and frees the slots with one release store of its head. The producer may
//! also write items one at a time straight into their slots ([`Producer::stage`]) and publish
//! them later, at once ([`Producer::publish`]): no staging copy of its own. Head and tail
//! sit on their own cache lines, and each side keeps a copy of the other's index, re-read only
//! when the copy says the ring is full (producer) or empty (consumer): a burst of frames costs
//! the slots' cache lines plus about two index transfers between cores, not a locked
//! read-modify-write per frame (crossbeam's `ArrayQueue`, multi-producer, pays one per push
//! and per pop).
//!
//! The two ends are separate, non-clonable handles ([`Producer`], [`Consumer`]) with `&mut
//! self` methods: that is what makes "single producer, single consumer" a type-level fact,
//! and what the `unsafe` below relies on.
use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Slots the consumer prefetches ahead of the one it reads.
const PREFETCH_AHEAD: usize = 4;

/// An index on its own cache line (128 octets: two lines, for the adjacent-line prefetcher).
#[repr(align(128))]
struct Padded(AtomicUsize);

struct Ring<T> {
    slots: Box<[UnsafeCell<MaybeUninit<T>>]>,
    mask: usize,
    /// Next slot the consumer reads (written by the consumer only).
    head: Padded,
    /// Next slot the producer writes (written by the producer only).
    tail: Padded,
}

// Safety: the slots are only touched through the one Producer (slots in [tail, head + cap))
// and the one Consumer (slots in [head, tail)); the release stores of tail and head and the
// acquire loads on the other side order each slot's write before its read. T crosses
// threads, hence T: Send.
unsafe impl<T: Send> Send for Ring<T> {}
// Safety: as above; shared references only reach the atomics and, through the handles' `&mut
// self` methods, disjoint slots.
unsafe impl<T: Send> Sync for Ring<T> {}

impl<T> Drop for Ring<T> {
    fn drop(&mut self) {
        let (mut h, t) = (*self.head.0.get_mut(), *self.tail.0.get_mut());
        while h != t {
            // Safety: slots in [head, tail) hold values written by the producer and not yet
            // read; with both handles gone (`&mut self`) each is dropped here exactly once.
            unsafe { self.slots[h & self.mask].get_mut().assume_init_drop() };
            h = h.wrapping_add(1);
        }
    }
}

/// The producing end.
pub struct Producer<T> {
    ring: Arc<Ring<T>>,
    /// The consumer's head as last read: slots before it are free.
    head: usize,
    /// Items written by `stage` and not published yet: slots [tail, tail + staged).
    staged: usize,
}

impl<T> Drop for Producer<T> {
    /// Publishes what is staged, so that the ring drops it (or the consumer takes it).
    fn drop(&mut self) {
        let r = &*self.ring;
        let t = r.tail.0.load(Ordering::Relaxed);
        r.tail
            .0
            .store(t.wrapping_add(self.staged), Ordering::Release);
    }
}

/// The consuming end.
pub struct Consumer<T> {
    ring: Arc<Ring<T>>,
    /// The producer's tail as last read: slots before it are filled.
    tail: usize,
}

/// A ring of `capacity` slots (rounded up to a power of two), as its two ends.
pub fn ring<T: Send>(capacity: usize) -> (Producer<T>, Consumer<T>) {
    let cap = capacity.max(1).next_power_of_two();
    let ring = Arc::new(Ring {
        slots: (0..cap)
            .map(|_| UnsafeCell::new(MaybeUninit::uninit()))
            .collect(),
        mask: cap - 1,
        head: Padded(AtomicUsize::new(0)),
        tail: Padded(AtomicUsize::new(0)),
    });
    (
        Producer {
            ring: ring.clone(),
            head: 0,
            staged: 0,
        },
        Consumer { ring, tail: 0 },
    )
}

impl<T: Send> Producer<T> {
    /// Moves items from the front of `items` into the ring, as many as there are free slots,
    /// and publishes them at once; the rest stay in `items`, in order. Returns how many moved.
    pub fn push_burst(&mut self, items: &mut Vec<T>) -> usize {
        self.publish();
        let r = &*self.ring;
        let cap = r.mask + 1;
        // Only this handle writes tail.
        let t = r.tail.0.load(Ordering::Relaxed);
        if cap - t.wrapping_sub(self.head) < items.len() {
            // Pairs with the consumer's release store: the slots it freed are read.
            self.head = r.head.0.load(Ordering::Acquire);
        }
        let n = (cap - t.wrapping_sub(self.head)).min(items.len());
        for (i, item) in items.drain(..n).enumerate() {
            let slot = &r.slots[t.wrapping_add(i) & r.mask];
            // Safety: slot t + i lies in [tail, head + cap): free, and only this handle (the
            // single producer, `&mut self`) writes free slots; the consumer reads it only after
            // the release store below.
            unsafe { (*slot.get()).write(item) };
        }
        r.tail.0.store(t.wrapping_add(n), Ordering::Release);
        n
    }
}

impl<T: Send> Producer<T> {
    /// Writes `item` into the next free slot without publishing it (the consumer sees it after
    /// the next [`publish`](Self::publish)); hands it back when the ring is full.
    pub fn stage(&mut self, item: T) -> Result<(), T> {
        let r = &*self.ring;
        let cap = r.mask + 1;
        // Only this handle writes tail.
        let next = r.tail.0.load(Ordering::Relaxed).wrapping_add(self.staged);
        if next.wrapping_sub(self.head) >= cap {
            // Pairs with the consumer's release store: the slots it freed are read.
            self.head = r.head.0.load(Ordering::Acquire);
            if next.wrapping_sub(self.head) >= cap {
                return Err(item);
            }
        }
        // Safety: slot `next` lies in [tail + staged, head + cap): free, and only this handle
        // (the single producer, `&mut self`) writes free slots; the consumer reads it only
        // after `publish`'s release store moves tail past it.
        unsafe { (*r.slots[next & r.mask].get()).write(item) };
        self.staged += 1;
        Ok(())
    }

    /// Items staged and not published yet.
    pub fn staged(&self) -> usize {
        self.staged
    }

    /// Publishes what [`stage`](Self::stage) wrote, with one release store. Returns how many.
    pub fn publish(&mut self) -> usize {
        if self.staged == 0 {
            return 0;
        }
        let r = &*self.ring;
        let t = r.tail.0.load(Ordering::Relaxed);
        r.tail
            .0
            .store(t.wrapping_add(self.staged), Ordering::Release);
        std::mem::take(&mut self.staged)
    }
}

impl<T: Send> Consumer<T> {
    /// Appends up to `max` items, oldest first, to `out`; returns how many.
    pub fn pop_burst(&mut self, out: &mut Vec<T>, max: usize) -> usize {
        let r = &*self.ring;
        // Only this handle writes head.
        let h = r.head.0.load(Ordering::Relaxed);
        if self.tail.wrapping_sub(h) < max {
            // Pairs with the producer's release store: the slots it published are written.
            self.tail = r.tail.0.load(Ordering::Acquire);
        }
        let n = self.tail.wrapping_sub(h).min(max);
        out.reserve(n);
        for i in 0..n {
            // The slots were last written on the producer's core: keep a few loads in flight
            // ahead of the reads (each slot's lines at once; `cache::prefetch` stops at T).
            if i + PREFETCH_AHEAD < n {
                crate::cache::prefetch(&r.slots[h.wrapping_add(i + PREFETCH_AHEAD) & r.mask], 4);
            }
            let slot = &r.slots[h.wrapping_add(i) & r.mask];
            // Safety: slot h + i lies in [head, tail): written and published by the producer;
            // only this handle (the single consumer) reads it, once, before freeing it below.
            out.push(unsafe { (*slot.get()).assume_init_read() });
        }
        r.head.0.store(h.wrapping_add(n), Ordering::Release);
        n
    }

    /// Whether the producer has published nothing this end has not taken (a hint: it may
    /// publish at any time).
    pub fn is_empty(&self) -> bool {
        self.ring.tail.0.load(Ordering::Relaxed) == self.ring.head.0.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bursts_keep_order_and_a_full_ring_leaves_the_rest() {
        let (mut p, mut c) = ring::<u32>(6); // 8 slots
        let mut items: Vec<u32> = (0..5).collect();
        assert_eq!(p.push_burst(&mut items), 5);
        assert!(items.is_empty());
        let mut items: Vec<u32> = (5..12).collect();
        assert_eq!(p.push_burst(&mut items), 3);
        assert_eq!(items, vec![8, 9, 10, 11]);
        let mut out = Vec::new();
        assert_eq!(c.pop_burst(&mut out, 2), 2);
        assert_eq!(p.push_burst(&mut items), 2);
        assert_eq!(c.pop_burst(&mut out, 100), 8);
        assert_eq!(out, (0..10).collect::<Vec<_>>());
        assert!(c.is_empty());
        assert_eq!(c.pop_burst(&mut out, 100), 0);
        // Wrap around many times.
        for k in 0..100u32 {
            let mut v = vec![k; 7];
            assert_eq!(p.push_burst(&mut v), 7);
            let mut o = Vec::new();
            assert_eq!(c.pop_burst(&mut o, 7), 7);
            assert_eq!(o, vec![k; 7]);
        }
    }

    #[test]
    fn staged_items_are_seen_once_published_and_a_full_ring_hands_back() {
        let (mut p, mut c) = ring::<u32>(4);
        for k in 0..3 {
            assert_eq!(p.stage(k), Ok(()));
        }
        assert_eq!(p.staged(), 3);
        let mut out = Vec::new();
        assert_eq!(c.pop_burst(&mut out, 10), 0, "nothing published yet");
        assert_eq!(p.publish(), 3);
        assert_eq!(p.publish(), 0);
        assert_eq!(p.stage(3), Ok(()));
        assert_eq!(p.stage(4), Err(4), "four slots, all taken");
        // push_burst publishes what is staged first, so order holds.
        assert_eq!(p.push_burst(&mut vec![5]), 0);
        assert_eq!(c.pop_burst(&mut out, 2), 2);
        assert_eq!(p.push_burst(&mut vec![5, 6]), 2);
        assert_eq!(c.pop_burst(&mut out, 10), 4);
        assert_eq!(out, vec![0, 1, 2, 3, 5, 6]);
        // Staged and never published: dropped once with the ring.
        let live = Arc::new(());
        let (mut p, c) = ring::<Arc<()>>(4);
        p.stage(live.clone()).unwrap();
        p.stage(live.clone()).unwrap();
        assert_eq!(Arc::strong_count(&live), 3);
        drop((p, c));
        assert_eq!(Arc::strong_count(&live), 1);
    }

    #[test]
    fn what_is_left_in_the_ring_is_dropped_once() {
        let live = Arc::new(());
        let (mut p, c) = ring::<Arc<()>>(4);
        let mut v = vec![live.clone(), live.clone(), live.clone()];
        assert_eq!(p.push_burst(&mut v), 3);
        assert_eq!(Arc::strong_count(&live), 4);
        drop((p, c));
        assert_eq!(Arc::strong_count(&live), 1);
    }

    #[test]
    fn two_threads_move_every_item_once_in_order() {
        let (mut p, mut c) = ring::<u64>(64);
        const N: u64 = 200_000;
        let prod = std::thread::spawn(move || {
            let mut next = 0u64;
            let mut v = Vec::new();
            while next < N || !v.is_empty() {
                while v.len() < 32 && next < N {
                    v.push(next);
                    next += 1;
                }
                if p.push_burst(&mut v) == 0 {
                    std::thread::yield_now();
                }
            }
        });
        let mut want = 0u64;
        let mut out = Vec::new();
        while want < N {
            out.clear();
            if c.pop_burst(&mut out, 32) == 0 {
                std::thread::yield_now();
            }
            for &x in &out {
                assert_eq!(x, want);
                want += 1;
            }
        }
        prod.join().unwrap();
        assert!(c.is_empty());
    }
}
