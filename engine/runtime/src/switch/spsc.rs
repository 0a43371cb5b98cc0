//! A bounded single-producer / single-consumer ring with burst push and pop (DPDK's
//! `rte_ring` in SP/SC mode with burst calls, lib/ring/rte_ring.h): the producer writes up to a
//! burst of slots and publishes them with one release store of its tail; the consumer reads
//! what is published and frees the slots with one release store of its head. The producer may
//! also write items one at a time straight into their slots ([`Producer::stage_in`]) and publish
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
    /// Items written by `stage_in` and not published yet: slots [tail, tail + staged).
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
    /// The next slot to read. The ring's head (what the producer sees) trails it by what a
    /// [`Burst`] has read and not yet released.
    head: usize,
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
        Consumer {
            ring,
            tail: 0,
            head: 0,
        },
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
    /// Writes an item in place into the next free slot without publishing it (the consumer
    /// sees it after the next [`publish`](Self::publish)): `write` is given the slot and
    /// returns the item it wrote there (as `MaybeUninit::write` does), or `None` to leave the
    /// slot free. Returns whether an item was staged; false, without calling `write`, when the
    /// ring is full. Made in its slot, an item is never built elsewhere and copied in.
    #[inline(always)]
    pub fn stage_in(
        &mut self,
        write: impl for<'a> FnOnce(&'a mut MaybeUninit<T>) -> Option<&'a mut T>,
    ) -> bool {
        let r = &*self.ring;
        let cap = r.mask + 1;
        // Only this handle writes tail.
        let next = r.tail.0.load(Ordering::Relaxed).wrapping_add(self.staged);
        if next.wrapping_sub(self.head) >= cap {
            // Pairs with the consumer's release store: the slots it freed are read.
            self.head = r.head.0.load(Ordering::Acquire);
            if next.wrapping_sub(self.head) >= cap {
                return false;
            }
        }
        // Safety: slot `next` lies in [tail + staged, head + cap): free, and only this handle
        // (the single producer, `&mut self`) writes free slots; the consumer reads it only
        // after `publish`'s release store moves tail past it.
        let slot = unsafe { &mut *r.slots[next & r.mask].get() };
        let want = slot.as_ptr();
        // Only a reference to this very slot shows that it was written (safe code gets one
        // only from `MaybeUninit::write`): anything else leaves it free.
        if !write(slot).is_some_and(|item| std::ptr::eq(item, want)) {
            return false;
        }
        self.staged += 1;
        true
    }

    /// Items staged and not published yet.
    pub fn staged(&self) -> usize {
        self.staged
    }

    /// Publishes what [`stage_in`](Self::stage_in) wrote, with one release store. Returns how many.
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
    /// Up to `max` items, oldest first, read in place from their slots as the returned
    /// [`Burst`] is iterated (no copy into a vector first); the slots are freed, with one
    /// release store, when the burst is dropped. Items the burst still holds then are dropped.
    #[inline]
    pub fn read_burst(&mut self, max: usize) -> Burst<'_, T> {
        let r = &*self.ring;
        if self.tail.wrapping_sub(self.head) < max {
            // Pairs with the producer's release store: the slots it published are written.
            self.tail = r.tail.0.load(Ordering::Acquire);
        }
        let end = self
            .head
            .wrapping_add(self.tail.wrapping_sub(self.head).min(max));
        Burst {
            end,
            consumer: self,
        }
    }

    /// Appends up to `max` items, oldest first, to `out`; returns how many.
    pub fn pop_burst(&mut self, out: &mut Vec<T>, max: usize) -> usize {
        let burst = self.read_burst(max);
        let n = burst.len();
        out.extend(burst);
        n
    }

    /// Whether the producer has published nothing this end has not taken (a hint: it may
    /// publish at any time).
    pub fn is_empty(&self) -> bool {
        self.ring.tail.0.load(Ordering::Relaxed) == self.head
    }
}

impl<T> Drop for Consumer<T> {
    /// Frees the slots read (by a forgotten [`Burst`]), so that the ring drops only what was
    /// never read.
    fn drop(&mut self) {
        self.ring.head.0.store(self.head, Ordering::Release);
    }
}

/// Items of one [`Consumer::read_burst`], read from their slots one at a time (an iterator of
/// owned items). Dropping it drops what was not read and frees the slots; forgetting it
/// (`mem::forget`) leaves the unread items for the next burst and the slots read so far
/// unfreed until then, never an item read twice: the consumer's own position moves as each
/// item is read.
pub struct Burst<'a, T: Send> {
    consumer: &'a mut Consumer<T>,
    /// One past the burst's last slot.
    end: usize,
}

impl<T: Send> Burst<'_, T> {
    /// Items not read yet.
    #[inline]
    pub fn len(&self) -> usize {
        self.end.wrapping_sub(self.consumer.head)
    }

    /// Whether every item was read.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The `k`-th item not read yet, in place (to prefetch what it points to before it is
    /// read, say).
    #[inline]
    pub fn peek(&self, k: usize) -> Option<&T> {
        if k >= self.len() {
            return None;
        }
        let r = &*self.consumer.ring;
        let slot = &r.slots[self.consumer.head.wrapping_add(k) & r.mask];
        // Safety: the slot lies in [head, end), within [ring head, tail): written and published
        // by the producer (acquire load in `read_burst`), not read yet (head moves past a slot
        // when it is read), and not written again until the ring's head moves past it.
        Some(unsafe { (*slot.get()).assume_init_ref() })
    }
}

impl<T: Send> Burst<'_, T> {
    /// The next slot not read yet, moving past it (it is then this call's to read, once).
    #[inline(always)]
    fn advance(&mut self) -> Option<&mut MaybeUninit<T>> {
        let h = self.consumer.head;
        if h == self.end {
            return None;
        }
        let r = &*self.consumer.ring;
        // The slots were last written on the producer's core: keep a few loads in flight ahead
        // of the reads (each slot's lines at once; `cache::prefetch` stops at T).
        if self.end.wrapping_sub(h) > PREFETCH_AHEAD {
            quench_port::cache::prefetch(&r.slots[h.wrapping_add(PREFETCH_AHEAD) & r.mask], 4);
        }
        self.consumer.head = h.wrapping_add(1);
        // Safety: slot h lies in [head, end), within [ring head, tail): written and published by
        // the producer (acquire load in `read_burst`); the caller reads it once (head moved past
        // it above, and only this handle, the single consumer, reads), and it is not written
        // again until the ring's head moves past it (on drop).
        Some(unsafe { &mut *r.slots[h & r.mask].get() })
    }

    /// Reads the next item where it lies: `f` gets it in its slot, and it is dropped there
    /// after (what `f` took out of it is `f`'s). `None` when every item was read.
    #[inline]
    pub fn next_with<R>(&mut self, f: impl FnOnce(&mut T) -> R) -> Option<R> {
        let slot = self.advance()?;
        // Safety: the slot is initialised and this call's to read (`advance`); it is dropped
        // once, below. Should `f` panic, the item is leaked, never dropped twice.
        let out = f(unsafe { slot.assume_init_mut() });
        // Safety: as above.
        unsafe { slot.assume_init_drop() };
        Some(out)
    }
}

impl<T: Send> Iterator for Burst<'_, T> {
    type Item = T;

    #[inline]
    fn next(&mut self) -> Option<T> {
        let slot = self.advance()?;
        // Safety: the slot is initialised and this call's to read, once (`advance`).
        Some(unsafe { slot.assume_init_read() })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.len(), Some(self.len()))
    }
}

impl<T: Send> Drop for Burst<'_, T> {
    fn drop(&mut self) {
        self.by_ref().for_each(drop);
        // Pairs with the producer's acquire load: the slots are read before they are reused.
        let c = &*self.consumer;
        c.ring.head.0.store(c.head, Ordering::Release);
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
            assert!(p.stage_in(|s| Some(s.write(k))));
        }
        assert_eq!(p.staged(), 3);
        let mut out = Vec::new();
        assert_eq!(c.pop_burst(&mut out, 10), 0, "nothing published yet");
        assert_eq!(p.publish(), 3);
        assert_eq!(p.publish(), 0);
        assert!(!p.stage_in(|_| None), "nothing written: nothing staged");
        assert!(
            !p.stage_in(|_| Some(Box::leak(Box::new(9)))),
            "written elsewhere: nothing staged"
        );
        assert!(p.stage_in(|s| Some(s.write(3))));
        let mut called = false;
        assert!(
            !p.stage_in(|s| {
                called = true;
                Some(s.write(4))
            }),
            "four slots, all taken"
        );
        assert!(!called, "nothing is written into a full ring");
        // push_burst publishes what is staged first, so order holds.
        assert_eq!(p.push_burst(&mut vec![5]), 0);
        assert_eq!(c.pop_burst(&mut out, 2), 2);
        assert_eq!(p.push_burst(&mut vec![5, 6]), 2);
        assert_eq!(c.pop_burst(&mut out, 10), 4);
        assert_eq!(out, vec![0, 1, 2, 3, 5, 6]);
        // Staged and never published: dropped once with the ring.
        let live = Arc::new(());
        let (mut p, c) = ring::<Arc<()>>(4);
        assert!(p.stage_in(|s| Some(s.write(live.clone()))));
        assert!(p.stage_in(|s| Some(s.write(live.clone()))));
        assert_eq!(Arc::strong_count(&live), 3);
        drop((p, c));
        assert_eq!(Arc::strong_count(&live), 1);
    }

    #[test]
    fn a_burst_read_in_place_frees_its_slots_when_dropped_and_never_reads_twice() {
        let (mut p, mut c) = ring::<Arc<u32>>(4);
        let live: Vec<Arc<u32>> = (0..4).map(Arc::new).collect();
        let mut items = live.clone();
        assert_eq!(p.push_burst(&mut items), 4);
        {
            let mut b = c.read_burst(3);
            assert_eq!((b.len(), b.peek(0).map(|x| **x)), (3, Some(0)));
            assert_eq!(b.peek(2).map(|x| **x), Some(2));
            assert!(b.peek(3).is_none(), "past the burst");
            assert_eq!(b.next().map(|x| *x), Some(0));
            assert_eq!(b.peek(0).map(|x| **x), Some(1));
            // Read in place, then dropped in its slot.
            assert_eq!(b.next_with(|x| (**x, Arc::strong_count(x))), Some((1, 2)));
            assert_eq!(Arc::strong_count(&live[1]), 1);
            assert_eq!(b.peek(0).map(|x| **x), Some(2));
            // Not freed yet: the ring is full for the producer.
            assert_eq!(p.push_burst(&mut vec![Arc::new(9)]), 0);
        }
        // The burst's unread item (2) was dropped with it, its slots freed.
        assert!(live[..3].iter().all(|x| Arc::strong_count(x) == 1));
        assert_eq!(Arc::strong_count(&live[3]), 2);
        assert_eq!(p.push_burst(&mut vec![Arc::new(4), Arc::new(5)]), 2);
        // A forgotten burst: what it read stays read, the rest is read next time.
        let mut b = c.read_burst(10);
        assert_eq!(b.next().map(|x| *x), Some(3));
        std::mem::forget(b);
        let got: Vec<u32> = c.read_burst(10).map(|x| *x).collect();
        assert_eq!(got, vec![4, 5]);
        assert!(c.is_empty());
        assert_eq!(Arc::strong_count(&live[3]), 1);
        // Forgotten again, then both ends dropped: the ring drops only the unread item.
        let (kept, read) = (Arc::new(7), Arc::new(6));
        assert_eq!(p.push_burst(&mut vec![read.clone(), kept.clone()]), 2);
        let mut b = c.read_burst(10);
        drop(b.next());
        std::mem::forget(b);
        assert_eq!((Arc::strong_count(&read), Arc::strong_count(&kept)), (1, 2));
        drop((p, c));
        assert_eq!(Arc::strong_count(&kept), 1);
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
