//! DCQCN congestion point: RED/ECN marking on an egress queue's bytes (seed 003, dcqcn.md).
//!
//! # Method groups and call order
//! 1. Configure: [`RedParams`] (Kmin, Kmax, Pmax, where to mark) -> [`RedProfile::new`].
//! 2. Per packet, with the egress (port, queue) length the caller keeps, in octets:
//!    - at enqueue, after the packet was added: [`RedProfile::on_enqueue`];
//!    - at dequeue, after the packet was removed (as ns-3 HPCC `SwitchNotifyDequeue` does:
//!      `RemoveFromEgressAdmission` then `ShouldSendCN`): [`RedProfile::on_dequeue`].
//!
//!    Each returns a [`Mark`]; only the one matching [`MarkPoint`] ever marks, the other
//!    returns [`Mark::Keep`] without drawing from the RNG, so the engine may call both.
//!
//! The marker keeps no per-queue state: the queue belongs to the caller and RED as ns-3 HPCC
//! runs it uses the instantaneous length (no average).
//!
//! Departures from ns-3 HPCC `SwitchMmu::ShouldSendCN`: it marks any packet, ECT or not (all its
//! RDMA packets are ECT); here Not-ECT packets are never marked and never draw from the RNG
//! (RFC 3168). Its `qIndex == 0` exclusion (the control queue) is the engine's business: it simply
//! does not call the marker for that queue.
use rand_core::RngCore;

use units::keys::{key, Key, KeyDefault, Range, Type};

use crate::{urand, Ecn, ParamError};

/// Where the switch applies RED.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum MarkPoint {
    /// As ns-3 HPCC (`SwitchNotifyDequeue`): the queue length after the packet left.
    #[default]
    Dequeue,
    /// Classic RED: the queue length after the packet was added.
    Enqueue,
}

/// RED/ECN parameters as users write them.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields, default))]
pub struct RedParams {
    /// Kmin, octets: no marking at or below it. Default 5000 (DCQCN paper, 5 KB).
    pub kmin_bytes: u64,
    /// Kmax, octets: always mark above it. Default 200000 (DCQCN paper, 200 KB).
    pub kmax_bytes: u64,
    /// Pmax: the marking probability reached at Kmax. Default 0.01 (DCQCN paper, 1 %).
    pub pmax: f64,
    /// `dequeue` (default, ns-3 HPCC) or `enqueue`.
    pub mark_at: MarkPoint,
}

impl Default for RedParams {
    fn default() -> Self {
        RedParams {
            kmin_bytes: 5_000,
            kmax_bytes: 200_000,
            pmax: 0.01,
            mark_at: MarkPoint::Dequeue,
        }
    }
}

/// The keys of [`RedParams`], as the configuration reference lists them; the validation
/// checks the ranges given here.
pub const KEYS: &[Key] = &[
    Key {
        name: "kmin_bytes",
        ty: Type::Integer,
        unit: "octets",
        default: KeyDefault::Value("5000"),
        range: Range::Text("<= kmax_bytes"),
        doc: "Kmin: no marking at or below it (DCQCN paper, 5 KB).",
    },
    Key {
        name: "kmax_bytes",
        ty: Type::Integer,
        unit: "octets",
        default: KeyDefault::Value("200000"),
        range: Range::Int(0, units::MAX_BUFFER_BYTES),
        doc: "Kmax: always mark above it (DCQCN paper, 200 KB).",
    },
    Key {
        name: "pmax",
        ty: Type::Float,
        unit: "",
        default: KeyDefault::Value("0.01"),
        range: Range::Float(0.0, 1.0),
        doc: "Pmax: the marking probability reached at Kmax (DCQCN paper, 1 %).",
    },
    Key {
        name: "mark_at",
        ty: Type::OneOf(&["dequeue", "enqueue"]),
        unit: "",
        default: KeyDefault::Value("\"dequeue\""),
        range: Range::Any,
        doc: "Where the queue is read: after the packet left (ns-3 HPCC) or after it was added \
              (classic RED).",
    },
];
const KMAX_BYTES: &Key = key(KEYS, "kmax_bytes");
const PMAX: &Key = key(KEYS, "pmax");

/// Validated RED parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct RedProfile {
    kmin: u64,
    kmax: u64,
    pmax: f64,
    mark_at: MarkPoint,
}

/// The marking decision for one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mark {
    /// Leave the ECN field as it is.
    Keep,
    /// Set CE.
    Ce,
}

impl Mark {
    /// The ECN codepoint the packet leaves with. Marking only ever raises an ECT packet to CE;
    /// nothing is ever lowered (a CE packet stays CE) and Not-ECT stays Not-ECT.
    pub fn apply(self, ecn: Ecn) -> Ecn {
        match (self, ecn) {
            (Mark::Ce, Ecn::Ect0 | Ecn::Ect1) => Ecn::Ce,
            (_, e) => e,
        }
    }
}

impl RedProfile {
    pub fn new(p: &RedParams) -> Result<Self, ParamError> {
        KMAX_BYTES.within(p.kmax_bytes)?;
        if p.kmin_bytes > p.kmax_bytes {
            return Err(ParamError::new(
                "kmin_bytes",
                p.kmin_bytes,
                format!("must not exceed kmax_bytes ({})", p.kmax_bytes),
            ));
        }
        PMAX.within_f64(p.pmax)?;
        Ok(RedProfile {
            kmin: p.kmin_bytes,
            kmax: p.kmax_bytes,
            pmax: p.pmax,
            mark_at: p.mark_at,
        })
    }

    pub fn mark_at(&self) -> MarkPoint {
        self.mark_at
    }

    /// The marking probability at a queue of `queue_bytes` octets (1.0 above Kmax, 0.0 at or
    /// below Kmin).
    pub fn probability(&self, queue_bytes: u64) -> f64 {
        // ns-3 HPCC SwitchMmu::ShouldSendCN:
        // "if (egress_bytes[ifindex][qIndex] > kmax[ifindex]) return true;"
        if queue_bytes > self.kmax {
            1.0
        // "if (egress_bytes[ifindex][qIndex] > kmin[ifindex]){ double p = pmax[ifindex] *
        //  double(egress_bytes[ifindex][qIndex] - kmin[ifindex]) / (kmax[ifindex] -
        //  kmin[ifindex]);" (kmin < q <= kmax here, so kmax > kmin.)
        } else if queue_bytes > self.kmin {
            self.pmax * (queue_bytes - self.kmin) as f64 / (self.kmax - self.kmin) as f64
        } else {
            0.0
        }
    }

    /// The decision for an ECN codepoint at a queue of `queue_bytes` octets, whichever the
    /// marking point. Draws one RNG value exactly when an ECT packet sees Kmin < q <= Kmax.
    pub fn decide(&self, queue_bytes: u64, ecn: Ecn, rng: &mut impl RngCore) -> Mark {
        match ecn {
            // RFC 3168: Not-ECT is never marked; CE needs no marking and is never lowered.
            Ecn::NotEct | Ecn::Ce => Mark::Keep,
            Ecn::Ect0 | Ecn::Ect1 => {
                if queue_bytes > self.kmax {
                    Mark::Ce
                } else if queue_bytes > self.kmin {
                    // "if (UniformVariable(0, 1).GetValue() < p) return true;"
                    if urand(rng) < self.probability(queue_bytes) {
                        Mark::Ce
                    } else {
                        Mark::Keep
                    }
                } else {
                    Mark::Keep
                }
            }
        }
    }

    /// A packet was added to the egress queue, which now holds `queue_bytes` octets.
    pub fn on_enqueue(&self, queue_bytes: u64, ecn: Ecn, rng: &mut impl RngCore) -> Mark {
        match self.mark_at {
            MarkPoint::Enqueue => self.decide(queue_bytes, ecn, rng),
            MarkPoint::Dequeue => Mark::Keep,
        }
    }

    /// A packet left the egress queue, which now holds `queue_bytes` octets.
    pub fn on_dequeue(&self, queue_bytes: u64, ecn: Ecn, rng: &mut impl RngCore) -> Mark {
        match self.mark_at {
            MarkPoint::Dequeue => self.decide(queue_bytes, ecn, rng),
            MarkPoint::Enqueue => Mark::Keep,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand_core::RngCore;
    use rand_xoshiro::rand_core::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    /// An RNG whose `urand()` is a chosen value, to walk the threshold comparison exactly.
    struct Fixed(u64);
    impl RngCore for Fixed {
        fn next_u32(&mut self) -> u32 {
            self.next_u64() as u32
        }
        fn next_u64(&mut self) -> u64 {
            self.0
        }
        fn fill_bytes(&mut self, d: &mut [u8]) {
            d.fill(0)
        }
        fn try_fill_bytes(&mut self, d: &mut [u8]) -> Result<(), rand_core::Error> {
            d.fill(0);
            Ok(())
        }
    }
    /// The u64 whose urand() is `u` (u a multiple of 2^-53).
    fn fixed(u: f64) -> Fixed {
        Fixed(((u * (1u64 << 53) as f64) as u64) << 11)
    }

    fn hpcc_25g() -> RedProfile {
        // ns-3 HPCC mix/config.txt at 25G: Kmin 100 KB, Kmax 400 KB (x1000), Pmax 0.2.
        RedProfile::new(&RedParams {
            kmin_bytes: 100_000,
            kmax_bytes: 400_000,
            pmax: 0.2,
            mark_at: MarkPoint::Dequeue,
        })
        .unwrap()
    }

    #[test]
    fn probability_by_hand() {
        let p = hpcc_25g();
        // At or below Kmin: 0.
        assert_eq!(p.probability(100_000), 0.0);
        // q = 175000: 0.2 * (175000-100000)/(400000-100000) = 0.2 * 0.25 = 0.05.
        assert!((p.probability(175_000) - 0.05).abs() < 1e-12);
        // q = 400000 = Kmax (not above): 0.2 * 1 = 0.2.
        assert!((p.probability(400_000) - 0.2).abs() < 1e-12);
        // Above Kmax: always.
        assert_eq!(p.probability(400_001), 1.0);
    }

    /// Walks ShouldSendCN step by step with chosen uniform draws.
    #[test]
    fn decisions_by_hand() {
        let p = hpcc_25g();
        // q = 175000, p = 0.05: draw 0.04 < 0.05 -> CE; draw 0.0625 >= 0.05 -> keep.
        assert_eq!(p.on_dequeue(175_000, Ecn::Ect0, &mut fixed(0.04)), Mark::Ce);
        assert_eq!(
            p.on_dequeue(175_000, Ecn::Ect0, &mut fixed(0.0625)),
            Mark::Keep
        );
        // q = 400001 > Kmax: CE whatever the draw (0.999).
        assert_eq!(
            p.on_dequeue(400_001, Ecn::Ect1, &mut fixed(0.999)),
            Mark::Ce
        );
        // q = 100000 = Kmin: never, even with draw 0.
        assert_eq!(
            p.on_dequeue(100_000, Ecn::Ect0, &mut fixed(0.0)),
            Mark::Keep
        );
        // Not-ECT is never marked, even above Kmax.
        assert_eq!(
            p.on_dequeue(1_000_000, Ecn::NotEct, &mut fixed(0.0)),
            Mark::Keep
        );
        // Marking point is dequeue: enqueue never marks.
        assert_eq!(
            p.on_enqueue(1_000_000, Ecn::Ect0, &mut fixed(0.0)),
            Mark::Keep
        );
        assert_eq!(Mark::Ce.apply(Ecn::Ect0), Ecn::Ce);
        assert_eq!(Mark::Ce.apply(Ecn::NotEct), Ecn::NotEct);
        assert_eq!(Mark::Keep.apply(Ecn::Ce), Ecn::Ce);
    }

    #[test]
    fn enqueue_point() {
        let p = RedProfile::new(&RedParams {
            mark_at: MarkPoint::Enqueue,
            ..RedParams::default()
        })
        .unwrap();
        let mut r = Xoshiro256PlusPlus::seed_from_u64(3);
        assert_eq!(p.on_enqueue(200_001, Ecn::Ect0, &mut r), Mark::Ce);
        assert_eq!(p.on_dequeue(200_001, Ecn::Ect0, &mut r), Mark::Keep);
    }

    #[test]
    fn validation_names_the_parameter() {
        let e = RedProfile::new(&RedParams {
            kmin_bytes: 10,
            kmax_bytes: 5,
            ..RedParams::default()
        })
        .unwrap_err();
        assert_eq!(e.param, "kmin_bytes");
        let e = RedProfile::new(&RedParams {
            pmax: 1.5,
            ..RedParams::default()
        })
        .unwrap_err();
        assert_eq!(e.param, "pmax");
        // Kmin = Kmax is a step at Kmax.
        let step = RedProfile::new(&RedParams {
            kmin_bytes: 1_000,
            kmax_bytes: 1_000,
            pmax: 0.5,
            mark_at: MarkPoint::Dequeue,
        })
        .unwrap();
        assert_eq!(step.probability(1_000), 0.0);
        assert_eq!(step.probability(1_001), 1.0);
    }

    /// The empirical marking rate matches p at a mid-range queue (DCQCN paper defaults):
    /// q = 102500: p = 0.01 * 97500/195000 = 0.005.
    #[test]
    fn empirical_rate() {
        let p = RedProfile::new(&RedParams::default()).unwrap();
        let mut r = Xoshiro256PlusPlus::seed_from_u64(11);
        let n = 200_000;
        let marks = (0..n)
            .filter(|_| p.on_dequeue(102_500, Ecn::Ect0, &mut r) == Mark::Ce)
            .count();
        // Binomial(200000, 0.005): mean 1000, sd 31.5; +-6 sd.
        assert!((810..=1190).contains(&marks), "{marks}");
    }

    fn ecn() -> impl Strategy<Value = Ecn> {
        prop_oneof![
            Just(Ecn::NotEct),
            Just(Ecn::Ect0),
            Just(Ecn::Ect1),
            Just(Ecn::Ce)
        ]
    }

    proptest! {
        /// Model-based: a queue under random enqueue/dequeue with random codepoints. CE is
        /// never lowered, Not-ECT is never marked, nothing is marked at or below Kmin, every ECT
        /// packet above Kmax is marked, and only the configured point marks.
        #[test]
        fn invariants_hold(
            kmin in 0u64..100_000,
            span in 0u64..400_000,
            pmax in 0.0f64..=1.0,
            at_enqueue in any::<bool>(),
            seed in any::<u64>(),
            evs in prop::collection::vec((any::<bool>(), 64u64..9_000, ecn()), 1..300),
        ) {
            let prof = RedProfile::new(&RedParams {
                kmin_bytes: kmin,
                kmax_bytes: kmin + span,
                pmax,
                mark_at: if at_enqueue { MarkPoint::Enqueue } else { MarkPoint::Dequeue },
            }).unwrap();
            let mut r = Xoshiro256PlusPlus::seed_from_u64(seed);
            let mut q = 0u64;
            for (enq, bytes, e) in evs {
                let m = if enq {
                    q += bytes;
                    prof.on_enqueue(q, e, &mut r)
                } else {
                    q = q.saturating_sub(bytes);
                    prof.on_dequeue(q, e, &mut r)
                };
                let out = m.apply(e);
                if e == Ecn::Ce { prop_assert_eq!(out, Ecn::Ce); }
                if e == Ecn::NotEct { prop_assert_eq!(out, Ecn::NotEct); }
                if enq != at_enqueue || q <= kmin { prop_assert_eq!(m, Mark::Keep); }
                if enq == at_enqueue && q > kmin + span && e.is_capable() {
                    prop_assert_eq!(out, Ecn::Ce);
                }
            }
        }
    }
}
