//! Congestion points: QCN CP, DCQCN RED/ECN marking, PFC accounting, TCD ternary detection.
//!
//! Sans-IO: fed `(now, event)`, returns decisions; never reads a clock, a socket or a random
//! source it was not handed.
//!
//! Every module follows the same shape (docs/style.md, "Parameters, profiles, state"): a
//! `*Params` struct as users write it in a config (serde `Deserialize` behind this crate's
//! `serde` feature, `deny_unknown_fields`), validated once into a `*Profile` (errors name the
//! parameter), and a small per-queue or per-port state whose methods take `&Profile`.
//!
//! | module | what | seed / reference |
//! |---|---|---|
//! | [`qcn`] | 802.1Qau congestion point: Fb, QntzFb, sampling, DE, CNM feedback | seed 000 lines 145-188, seed 001 |
//! | [`red`] | DCQCN switch: RED/ECN marking on egress queue bytes (Kmin, Kmax, Pmax) | seed 003, dcqcn.md |
//! | [`pfc`] | 802.1Qbb: ingress XOFF/XON accounting with headroom, egress paused state | protocols.md, dcqcn.md |
//! | [`tcd`] | Ternary congestion detection: ON-OFF tracking, max(Ton), UE/CE marking | seed 004, tcd.md |
//!
//! Invariants shared by all modules: the queue belongs to the caller, which hands its length in
//! (octets); a decision is a meaning-level value (a [`Mark`](red::Mark), a
//! [`QcnFeedback`](qcn::QcnFeedback), a [`PfcAction`](pfc::PfcAction), a
//! [`TcdCodepoint`](tcd::TcdCodepoint)), never bytes; absurd inputs saturate, never panic.
#![forbid(unsafe_code)]

pub mod pfc;
pub mod qcn;
pub mod red;
pub mod tcd;

use rand_core::RngCore;

/// The ECN field (one type across quench: `units::Ecn`).
pub use units::Ecn;

/// A parameter failed validation (one type across quench: `units::ParamError`).
pub use units::ParamError;

/// A uniform draw in [0, 1) (`units::unit_interval`).
fn urand(rng: &mut impl RngCore) -> f64 {
    units::unit_interval(rng.next_u64())
}

/// A uniform integer in [0, n] (inclusive). The modulo bias is below n / 2^64, far under any
/// effect QCN or RED could show.
fn uniform_inclusive(rng: &mut impl RngCore, n: u64) -> u64 {
    if n == u64::MAX {
        rng.next_u64()
    } else {
        rng.next_u64() % (n + 1)
    }
}

#[cfg(feature = "serde")]
mod de {
    //! Deserializers for values `units` keeps free of serde.
    use serde::{Deserialize, Deserializer};

    /// A rate with its unit, as [`units::Rate::parse`] reads it: `"10gbit"`, `"100mbit"`.
    pub fn rate<'de, D: Deserializer<'de>>(d: D) -> Result<units::Rate, D::Error> {
        let s = String::deserialize(d)?;
        units::Rate::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_xoshiro::rand_core::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    #[test]
    fn urand_is_in_unit_interval() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        for _ in 0..10_000 {
            let u = urand(&mut rng);
            assert!((0.0..1.0).contains(&u));
        }
    }

    #[test]
    fn uniform_inclusive_reaches_both_ends() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        let (mut lo, mut hi) = (false, false);
        for _ in 0..1_000 {
            let v = uniform_inclusive(&mut rng, 3);
            assert!(v <= 3);
            lo |= v == 0;
            hi |= v == 3;
        }
        assert!(lo && hi);
        assert_eq!(uniform_inclusive(&mut rng, 0), 0);
    }
}
