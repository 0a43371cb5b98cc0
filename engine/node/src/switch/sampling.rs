//! QCN's sampling state of a congestion-point port whose egress several workers hold
//! (`switch::depth`), kept port-wide, so that the port samples the frames a one-worker switch
//! would sample (docs/design.md, "Switch runtime").
//!
//! In byte-interval mode (802.1Qau practice, the default) one congestion point samples the
//! first frame whose arrival reaches the last sample's position plus an interval, sets Qold to
//! the queue there and draws the next interval's jitter from its generator
//! ([`cp::qcn::QcnCp::on_frame`]). Port-wide here, per data priority:
//! - **the position**: octets admitted at the priority over all the port's workers. Each
//!   worker counts its own exactly and publishes the count once per poll, at its end, in its
//!   depth line's second half (`switch::depth`, the same store and read as the depth); it reads
//!   the others' once per poll, before receiving;
//! - **the next sample point, Qold, and a sample number** in a line of their own per priority,
//!   written only on a sample (one every 18.5-150 KB of the port's arrivals at the MIB's
//!   MinSampleBase). Each worker keeps a copy and re-reads the line once per poll when its
//!   number changed (a load of a line that stays cached between samples);
//! - **the generator** of the one-worker congestion point (stream 0 of the configured seed),
//!   drawn only by the worker taking a sample. The workers' own generators (RED's coins) are
//!   streams 1..=N ([`super::core::PortCp::with_shared_sampling`]).
//!
//! A worker whose position (own + others' published) reaches the next point takes the sample:
//! a compare-exchange of the sample number from its copy's (even) to odd decides the winner
//! when two reach it concurrently; the winner draws, writes the next point and Qold, and
//! publishes the number + 2 (a sequence lock: readers take the fields only between two equal,
//! even loads of the number). A loser re-reads the line: the point has moved on, its frame is
//! not a sample (or, if the writer is mid-way, the writer's sample is this crossing's).
//!
//! **Stepped one poll at a time in turn** (the tests), every worker's position is the port's
//! exact position and its copy of the line is current, so every frame is sampled or not, with
//! the same Qold, the same draws and the same CNM, as in the one-worker switch (provided the
//! one-worker generator draws nothing else in between: RED's coin between Kmin and Kmax
//! shares it there). **Concurrently**, a position lags the port's by at most the other
//! workers' admissions in one poll each (the depth's staleness argument, `switch::depth`), so
//! each sample falls at most that many octets early or late; every sample number is taken by
//! exactly one worker, and Qold is the port's queue at the port's last sample.
//!
//! Probability mode (the seed's coin per frame) is not shared: there is no counter, each
//! worker draws its coins from its own stream and keeps its own Qold.
use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use cp::qcn::{QcnCpProfile, QcnDecision};
use rand_xoshiro::Xoshiro256PlusPlus;
use units::PRIORITIES;

/// One priority's sampling point: written only on a sample; a line of its own (aligned to 128
/// so that the adjacent-line prefetcher does not pair it with a neighbour's).
#[repr(align(128))]
#[derive(Debug)]
struct SampleLine {
    /// Twice the samples taken, + 1 while the winner of the next one writes.
    seq: AtomicU64,
    /// The port's position (octets admitted at this priority) that the next sample reaches.
    next: AtomicU64,
    /// Qold: the port's queue at the last sample, octets.
    q_old: AtomicU64,
}

/// A port's QCN sampling state shared by the workers holding its egress. See the module docs.
#[derive(Debug)]
pub struct SharedSampling {
    lines: [SampleLine; PRIORITIES],
    /// The one-worker congestion point's generator; locked only by the worker that won a
    /// sample number (of any priority), for one draw.
    rng: Mutex<Xoshiro256PlusPlus>,
}

impl SharedSampling {
    /// The state a congestion point of `profile` starts with (`QcnCp::new`: the first sample
    /// after MinSampleBase octets, Qold 0), drawing from `rng`.
    pub fn new(profile: &QcnCpProfile, rng: Xoshiro256PlusPlus) -> Arc<SharedSampling> {
        Arc::new(SharedSampling {
            lines: std::array::from_fn(|_| SampleLine {
                seq: AtomicU64::new(0),
                next: AtomicU64::new(profile.sample_interval(0)),
                q_old: AtomicU64::new(0),
            }),
            rng: Mutex::new(rng),
        })
    }

    /// A worker's handle.
    pub fn share(self: &Arc<Self>) -> SampleShare {
        let seen = std::array::from_fn(|p| Seen {
            seq: 0,
            next: self.lines[p].next.load(Ordering::Relaxed),
            q_old: 0,
        });
        SampleShare {
            shared: self.clone(),
            own: [0; PRIORITIES],
            others: [0; PRIORITIES],
            seen,
        }
    }

    /// Samples taken at data priority `prio` by all the workers.
    pub fn samples(&self, prio: usize) -> u64 {
        self.lines
            .get(prio)
            .map_or(0, |l| l.seq.load(Ordering::Acquire) / 2)
    }
}

/// A worker's copy of one priority's [`SampleLine`].
#[derive(Clone, Copy, Debug)]
struct Seen {
    seq: u64,
    next: u64,
    q_old: u64,
}

/// A worker's handle on a port's [`SharedSampling`]: its own admitted octets, the others' as
/// published, and its copy of each priority's line.
#[derive(Debug)]
pub struct SampleShare {
    shared: Arc<SharedSampling>,
    own: [u64; PRIORITIES],
    others: [u64; PRIORITIES],
    seen: [Seen; PRIORITIES],
}

impl SampleShare {
    /// Octets this worker admitted per data priority (what it publishes).
    pub fn admitted(&self) -> &[u64; PRIORITIES] {
        &self.own
    }

    /// Once per poll, before receiving: the other workers' admitted octets as published, and
    /// the lines of the priorities in `mask` re-read where a sample was taken since.
    pub fn refresh(&mut self, others: &[u64; PRIORITIES], mask: u8) {
        self.others = *others;
        for p in 0..PRIORITIES {
            if mask & (1 << p) != 0 {
                self.reload(p);
            }
        }
    }

    /// Re-reads priority `p`'s line if its number moved; false when a writer is mid-way (the
    /// copy is then left as it was).
    fn reload(&mut self, p: usize) -> bool {
        let line = &self.shared.lines[p];
        let s1 = line.seq.load(Ordering::Acquire);
        if s1 == self.seen[p].seq {
            return true;
        }
        if s1 & 1 == 1 {
            return false;
        }
        let next = line.next.load(Ordering::Relaxed);
        let q_old = line.q_old.load(Ordering::Relaxed);
        // Sequence lock, reader side: the fields were read between two equal, even numbers
        // (the fence keeps their loads before the second one).
        fence(Ordering::Acquire);
        if line.seq.load(Ordering::Relaxed) != s1 {
            return false;
        }
        self.seen[p] = Seen {
            seq: s1,
            next,
            q_old,
        };
        true
    }

    /// Takes the sample the port's position `pos` reached at priority `p`, unless another
    /// worker took it: true when this worker won the sample number (it must then publish).
    fn claim(&mut self, p: usize, pos: u64) -> bool {
        loop {
            let seq = self.seen[p].seq;
            if self.shared.lines[p]
                .seq
                .compare_exchange(seq, seq + 1, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                // Sequence lock, writer side: the odd number is visible before the fields.
                fence(Ordering::Release);
                return true;
            }
            // Another worker sampled since this copy: the point moved on (or is moving).
            if !self.reload(p) || pos < self.seen[p].next {
                return false;
            }
        }
    }

    /// QCN's decision for a frame of `frame_bytes` octets admitted at data priority `prio`,
    /// the port's queue holding `queue_bytes` octets with it: sampled when the port's position
    /// reaches the next sample point.
    pub fn on_frame(
        &mut self,
        profile: &QcnCpProfile,
        prio: u8,
        queue_bytes: u64,
        frame_bytes: u32,
    ) -> QcnDecision {
        let p = usize::from(prio) % PRIORITIES;
        self.own[p] += u64::from(frame_bytes);
        let pos = self.own[p] + self.others[p];
        if pos < self.seen[p].next || !self.claim(p, pos) {
            return profile.on_unsampled(queue_bytes, self.seen[p].q_old);
        }
        let (d, s) = {
            // Locked by the winner of a sample number only: at most the winners of two
            // priorities' samples meet here, for one draw.
            let mut rng = self
                .shared
                .rng
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            profile.on_sampled(queue_bytes, self.seen[p].q_old, &mut *rng)
        };
        let seen = &mut self.seen[p];
        seen.next = pos.saturating_add(s.next_interval);
        seen.q_old = s.q_old;
        seen.seq += 2;
        let line = &self.shared.lines[p];
        line.next.store(seen.next, Ordering::Relaxed);
        line.q_old.store(seen.q_old, Ordering::Relaxed);
        line.seq.store(seen.seq, Ordering::Release);
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cp::qcn::{QcnCp, QcnCpParams};
    use rand_xoshiro::rand_core::SeedableRng;

    /// Two workers' handles, each told the other's admitted octets after every frame (what
    /// stepping them one poll at a time does), decide every frame as one congestion point
    /// does; a handle left with the other's octets unpublished samples late.
    #[test]
    fn handles_stepped_in_turn_sample_as_one_congestion_point() {
        let prof = QcnCpProfile::new(&QcnCpParams {
            min_sample_base: 10_000,
            ..QcnCpParams::default()
        })
        .unwrap();
        let rng = Xoshiro256PlusPlus::seed_from_u64(3);
        let mut one = QcnCp::new(&prof);
        let mut one_rng = rng.clone();
        let shared = SharedSampling::new(&prof, rng);
        let mut h = [shared.share(), shared.share()];
        let mut q = 0;
        let mut samples = 0;
        for k in 0..500u32 {
            let len = 64 + (k * 97) % 1400;
            q = (q + u64::from(len)).saturating_sub(if k % 3 == 0 { 2_000 } else { 0 });
            let w = (k as usize / 7) % 2;
            let other = *h[1 - w].admitted();
            h[w].refresh(&other, 1 << 3);
            let got = h[w].on_frame(&prof, 3, q, len);
            let want = one.on_frame(&prof, q, len, &mut one_rng);
            assert_eq!(got, want, "frame {k}");
            samples += u64::from(want.sampled);
        }
        assert!(samples > 20, "{samples}");
        assert_eq!(shared.samples(3), samples);
        // Without the other's octets the position lags and the point is reached later.
        let shared = SharedSampling::new(&prof, Xoshiro256PlusPlus::seed_from_u64(3));
        let (mut a, mut b) = (shared.share(), shared.share());
        for _ in 0..9 {
            assert!(!a.on_frame(&prof, 3, 0, 1_000).sampled);
        }
        assert!(!b.on_frame(&prof, 3, 0, 1_000).sampled);
        b.refresh(a.admitted(), 1 << 3);
        assert!(b.on_frame(&prof, 3, 0, 1_000).sampled);
        // a's copy is stale: its crossing finds the number moved and the point 10,000 on.
        a.refresh(b.admitted(), 1 << 3);
        assert!(!a.on_frame(&prof, 3, 0, 1_000).sampled);
        assert_eq!(shared.samples(3), 1);
    }

    /// Four threads crossing sample points concurrently (an interval every 10 of their
    /// frames, the admitted counts exchanged every 32 frames as polls would): every sample
    /// number is taken by exactly one thread, and each sample's next point is at least the
    /// shortest interval past the one before (its winner's position had reached that one).
    #[test]
    fn concurrent_claims_take_each_sample_number_once() {
        const THREADS: usize = 4;
        const FRAMES: u64 = 20_000;
        let prof = QcnCpProfile::new(&QcnCpParams {
            min_sample_base: 10_000,
            ..QcnCpParams::default()
        })
        .unwrap();
        let shared = SharedSampling::new(&prof, Xoshiro256PlusPlus::seed_from_u64(9));
        let published: Arc<Vec<AtomicU64>> =
            Arc::new((0..THREADS).map(|_| AtomicU64::new(0)).collect());
        let start = Arc::new(std::sync::Barrier::new(THREADS));
        let threads: Vec<_> = (0..THREADS)
            .map(|me| {
                let (mut h, prof) = (shared.share(), prof.clone());
                let (published, start) = (published.clone(), start.clone());
                std::thread::spawn(move || {
                    let mut taken = Vec::new();
                    start.wait();
                    for k in 0..FRAMES {
                        if k % 32 == 0 {
                            published[me].store(h.admitted()[3], Ordering::Relaxed);
                            let mut others = [0; PRIORITIES];
                            others[3] = (0..THREADS)
                                .filter(|&w| w != me)
                                .map(|w| published[w].load(Ordering::Relaxed))
                                .sum();
                            h.refresh(&others, 1 << 3);
                        }
                        if h.on_frame(&prof, 3, 50_000, 1_000).sampled {
                            taken.push((h.seen[3].seq / 2, h.seen[3].next));
                        }
                    }
                    taken
                })
            })
            .collect();
        let mut taken: Vec<(u64, u64)> = threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        taken.sort_unstable();
        let n = shared.samples(3);
        assert!(n > 1_000, "{n} samples");
        let numbers: Vec<u64> = taken.iter().map(|t| t.0).collect();
        assert_eq!(numbers, (1..=n).collect::<Vec<_>>());
        let shortest = prof.sample_interval(63) * 85 / 100;
        let mut last = prof.sample_interval(0);
        for &(k, next) in &taken {
            assert!(next >= last + shortest, "sample {k}: {next} after {last}");
            last = next;
        }
    }
}
