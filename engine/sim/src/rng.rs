//! All randomness of a run comes from one seed, split per component.
//!
//! Each component (a switch port's congestion point, a link's loss process, the traffic
//! generator, a flow's reaction point) gets its own `Xoshiro256PlusPlus` seeded from
//! `mix64(seed, kind, index)`. A component's stream therefore depends only on the run seed and the
//! component's identity, never on the order in which other components drew numbers, so adding a
//! flow does not perturb the marks a switch makes for the others.

use rand_core::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

/// The simulator's generator type.
pub type SimRng = Xoshiro256PlusPlus;

/// SplitMix64's finaliser: a bijective 64-bit mix.
pub fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Component kinds, part of each stream's identity.
#[derive(Clone, Copy, Debug)]
pub enum Stream {
    Port = 1,
    Link = 2,
    Traffic = 3,
    Flow = 4,
    Receiver = 5,
    /// HPCC-PINT's coins (switch rounding, sender sampling).
    Pint = 6,
}

/// The generator of component `index` of `kind` in a run seeded with `seed`.
pub fn stream(seed: u64, kind: Stream, index: u64) -> SimRng {
    let s = mix64(mix64(seed ^ mix64(kind as u64)) ^ index);
    SimRng::seed_from_u64(s)
}

/// A uniform draw in [0, 1) (`units::unit_interval`).
pub fn unit(rng: &mut SimRng) -> f64 {
    use rand_core::RngCore;
    units::unit_interval(rng.next_u64())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_core::RngCore;

    #[test]
    fn streams_are_reproducible_and_distinct() {
        let a1 = stream(7, Stream::Port, 3).next_u64();
        let a2 = stream(7, Stream::Port, 3).next_u64();
        let b = stream(7, Stream::Port, 4).next_u64();
        let c = stream(7, Stream::Link, 3).next_u64();
        let d = stream(8, Stream::Port, 3).next_u64();
        assert_eq!(a1, a2);
        assert!(a1 != b && a1 != c && a1 != d);
        let mut r = stream(1, Stream::Traffic, 0);
        for _ in 0..1000 {
            let u = unit(&mut r);
            assert!((0.0..1.0).contains(&u));
        }
    }
}
