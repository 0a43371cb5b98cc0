//! QCN congestion point (IEEE 802.1Qau), after seed 000 lines 145-188 and seed 001.
//!
//! # Method groups and call order
//! 1. Configure: [`QcnCpParams`] (config, IEEE8021-CN-MIB names and defaults) ->
//!    [`QcnCpProfile::new`] once per class of congestion points (errors name the parameter).
//! 2. Create: [`QcnCp::new`] per congestion-point queue (16 octets of state).
//! 3. Per frame admitted to the queue, after the frame has been counted in the queue:
//!    [`QcnCp::on_frame`]`(&profile, queue_bytes, frame_bytes, rng)` -> [`QcnDecision`]: Fb and
//!    QntzFb, whether the frame was sampled, its DE bit, and an optional [`QcnFeedback`] that the
//!    engine turns into a CNM (adding the CPID it chose, the sampled frame's priority, DA and
//!    first octets).
//!
//! The queue belongs to the caller: it hands its length in, in octets, including the arriving
//! frame (seed line 21: "qlen ... incremented upon packet arrivals and decremented upon packet
//! departures"). QCN samples by arriving bytes, not by time: there is no clock and no timer.
//!
//! Departures from the seed, each also written at the line that makes it:
//! - Queue lengths are octets, not pages (seed lines 21-22 say "in pages"): the IEEE MIB gives Qeq
//!   in octets (protocols.md).
//! - The seed's `qntz_Fb = -Fb(most significant bits)` is made exact as
//!   `floor(-Fb * 63 / Fbmax)` (the vendor formula, HPE FlexFabric 5940 manual: "QntzFb = -Fb x
//!   63/(Qeq x (2 x w + 1))"), so -Fb = Fbmax maps to 63 and the result always fits 6 bits.
//! - A CNM is generated when the frame is sampled and QntzFb > 0 (the seed says Fb < 0, line 170):
//!   an Fb in (-Fbmax/63, 0) quantises to 0, and a CNM carrying QntzFb 0 is ignored by every RP
//!   (seed lines 19 and 32: "if (FBFrame.fb != 0)"), so it would be pure overhead.
//! - Sampling: the seed's per-frame probability `BASE_PROBABILITY + C * qntz_Fb` (line 168) is one
//!   [`SamplingMode`]; the other, the default, is the byte interval indexed by QntzFb/8 that
//!   802.1Qau implementations use (protocols.md).
use rand_core::RngCore;

use units::keys::{key, Key, KeyDefault, Range, Type};

use crate::{uniform_inclusive, urand, ParamError};

/// Units of the CNM's cnmQOffset and cnmQDelta fields, in octets.
///
/// Unconfirmed (protocols.md tags it U: "likely 64-octet pages"). Every conversion between
/// octets and these fields goes through this constant.
pub const CNM_QUEUE_UNIT_OCTETS: i64 = 64;

/// Largest QntzFb: the field is 6 bits wide.
pub const QNTZ_FB_MAX: u8 = 63;

/// The sampling intervals indexed by QntzFb/8, as a fraction of MinSampleBase, in 1/300ths:
/// {150, 75, 50, 37.5, 30, 25, 21.5, 18.5} KB at MinSampleBase = 150 KB (protocols.md, S: one
/// implementation), i.e. {300, 150, 100, 75, 60, 50, 43, 37} / 300, exact at the default.
const SAMPLE_INTERVAL_PER_300: [u64; 8] = [300, 150, 100, 75, 60, 50, 43, 37];

/// Queue lengths above this are treated as this (2^48 octets = 256 TiB), so the Fb arithmetic
/// in i64 can never overflow whatever the caller hands in.
const QUEUE_CAP: u64 = 1 << 48;

/// How the CP decides which frames to sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum SamplingMode {
    /// 802.1Qau practice: sample one frame every `interval[QntzFb/8]` octets of arrivals, the
    /// interval scaled by `min_sample_base` and jittered by `sample_jitter_percent`.
    #[default]
    ByteInterval,
    /// Seed 000 line 168: sample each frame with probability
    /// `base_probability + probability_per_qntz_fb * qntz_Fb`.
    Probability,
}

/// QCN CP parameters as users write them; names and defaults from IEEE8021-CN-MIB
/// (`ieee8021CnCpQueueSizeSetPoint`, `ieee8021CnCpFeedbackWeight`, `ieee8021CnCpMinSampleBase`).
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields, default))]
pub struct QcnCpParams {
    /// Qeq, the queue set point, octets (MIB default 26000).
    pub queue_size_set_point: u64,
    /// The MIB's FeedbackWeight (`ieee8021CnCpFeedbackWeight`), an exponent, not w itself:
    /// the weight of the queue's change in Fb = -(Q - Qeq) - w (Q - Qold) is
    /// w = 2^feedback_weight. Range -10..=10 (w from 1/1024 to 1024); MIB default 1, so w = 2;
    /// `feedback_weight = 0` gives w = 1.
    pub feedback_weight: i8,
    /// MinSampleBase, octets: the sampling interval when QntzFb < 8 (MIB default 150000,
    /// MIB range from 10000).
    pub min_sample_base: u64,
    /// `byte_interval` (default) or `probability`.
    pub sampling: SamplingMode,
    /// Byte-interval mode: each new interval is drawn uniformly from
    /// [interval * (1 - j/100), interval * (1 + j/100)]. Default 15 (U: the usual 802.1Qau
    /// figure, not confirmed against the standard's text); 0 samples at exact intervals.
    pub sample_jitter_percent: u8,
    /// Probability mode: BASE_PROBABILITY of seed line 168 (default 0.01, seed 001's "minimum
    /// sampling probability at the CP is 1 %").
    pub base_probability: f64,
    /// Probability mode: C of seed line 168 (default 0.09/63, so QntzFb 63 samples 10 %).
    pub probability_per_qntz_fb: f64,
}

impl Default for QcnCpParams {
    fn default() -> Self {
        QcnCpParams {
            queue_size_set_point: 26_000,
            feedback_weight: 1,
            min_sample_base: 150_000,
            sampling: SamplingMode::ByteInterval,
            sample_jitter_percent: 15,
            base_probability: 0.01,
            probability_per_qntz_fb: 0.09 / 63.0,
        }
    }
}

/// The keys of [`QcnCpParams`], as the configuration reference lists them; the validation checks the
/// integer and float ranges given here.
pub const KEYS: &[Key] = &[
    Key {
        name: "queue_size_set_point",
        ty: Type::Integer,
        unit: "octets",
        default: KeyDefault::Value("26000"),
        range: Range::Int(1, 1 << 32),
        doc: "Qeq, the queue set point (IEEE8021-CN-MIB ieee8021CnCpQueueSizeSetPoint).",
    },
    Key {
        name: "feedback_weight",
        ty: Type::Integer,
        unit: "log2",
        default: KeyDefault::Value("1"),
        range: Range::Text("-10..=10"),
        doc: "The MIB's FeedbackWeight, an exponent: w = 2^feedback_weight weighs the queue's \
              change in Fb = -(Q - Qeq) - w (Q - Qold).",
    },
    Key {
        name: "min_sample_base",
        ty: Type::Integer,
        unit: "octets",
        default: KeyDefault::Value("150000"),
        range: Range::Int(10000, 1 << 40),
        doc: "MinSampleBase: the sampling interval while QntzFb < 8 (the MIB's range starts at \
              10000).",
    },
    Key {
        name: "sampling",
        ty: Type::OneOf(&["byte_interval", "probability"]),
        unit: "",
        default: KeyDefault::Value("\"byte_interval\""),
        range: Range::Any,
        doc: "Sample one frame per interval of arrived octets (802.1Qau practice), or each frame \
              with a probability (seed 000 line 168).",
    },
    Key {
        name: "sample_jitter_percent",
        ty: Type::Integer,
        unit: "percent",
        default: KeyDefault::Value("15"),
        range: Range::Int(0, 50),
        doc: "Byte-interval mode: each interval is drawn uniformly within this share around its \
              nominal value; 0 samples at exact intervals.",
    },
    Key {
        name: "base_probability",
        ty: Type::Float,
        unit: "",
        default: KeyDefault::Value("0.01"),
        range: Range::Float(0.0, 1.0),
        doc: "Probability mode: the sampling probability at QntzFb 0 (seed 001's 1 %).",
    },
    Key {
        name: "probability_per_qntz_fb",
        ty: Type::Float,
        unit: "",
        default: KeyDefault::Text("0.09 / 63 (QntzFb 63 samples 10 %)"),
        range: Range::Text("base_probability + 63 x it <= 1"),
        doc: "Probability mode: the probability added per unit of QntzFb.",
    },
];
const QUEUE_SIZE_SET_POINT: &Key = key(KEYS, "queue_size_set_point");
const MIN_SAMPLE_BASE: &Key = key(KEYS, "min_sample_base");
const SAMPLE_JITTER_PERCENT: &Key = key(KEYS, "sample_jitter_percent");
const BASE_PROBABILITY: &Key = key(KEYS, "base_probability");

#[derive(Clone, Copy, Debug, PartialEq)]
enum Sampling {
    ByteInterval { jitter_percent: u64 },
    Probability { base: f64, per_qntz_fb: f64 },
}

/// Validated QCN CP parameters with everything precomputed.
#[derive(Clone, Debug, PartialEq)]
pub struct QcnCpProfile {
    qeq: i64,
    /// log2(w).
    w_log2: i8,
    /// Fbmax = Qeq(2w + 1), octets.
    fb_max: i64,
    /// Sampling intervals indexed by QntzFb/8, octets, before jitter.
    intervals: [u64; 8],
    sampling: Sampling,
}

/// x * w with w = 2^w_log2; for w < 1 the product is rounded down (arithmetic shift).
fn mul_w(x: i64, w_log2: i8) -> i64 {
    if w_log2 >= 0 {
        x << w_log2
    } else {
        x >> (-w_log2)
    }
}

impl QcnCpProfile {
    pub fn new(p: &QcnCpParams) -> Result<Self, ParamError> {
        QUEUE_SIZE_SET_POINT.within(p.queue_size_set_point)?;
        if !(-10..=10).contains(&p.feedback_weight) {
            return Err(ParamError::new(
                "feedback_weight",
                p.feedback_weight,
                "must be in -10..=10 (w = 2^feedback_weight)",
            ));
        }
        MIN_SAMPLE_BASE.within(p.min_sample_base)?;
        SAMPLE_JITTER_PERCENT.within(p.sample_jitter_percent.into())?;
        // Checked in either mode: a bad value is a mistake whichever mode reads it.
        BASE_PROBABILITY.within_f64(p.base_probability)?;
        let sampling = match p.sampling {
            SamplingMode::ByteInterval => Sampling::ByteInterval {
                jitter_percent: u64::from(p.sample_jitter_percent),
            },
            SamplingMode::Probability => {
                let top = p.base_probability + p.probability_per_qntz_fb * 63.0;
                if !(p.probability_per_qntz_fb >= 0.0 && top <= 1.0) {
                    return Err(ParamError::new(
                        "probability_per_qntz_fb",
                        p.probability_per_qntz_fb,
                        format!("must be >= 0 with base_probability + 63 * it <= 1 (is {top})"),
                    ));
                }
                Sampling::Probability {
                    base: p.base_probability,
                    per_qntz_fb: p.probability_per_qntz_fb,
                }
            }
        };
        let qeq = p.queue_size_set_point as i64;
        let w_log2 = p.feedback_weight;
        // Fbmax = Qeq * (2w + 1) = Qeq + (2 Qeq) * w.
        let fb_max = qeq + mul_w(2 * qeq, w_log2);
        let intervals = SAMPLE_INTERVAL_PER_300.map(|k| p.min_sample_base * k / 300);
        Ok(QcnCpProfile {
            qeq,
            w_log2,
            fb_max,
            intervals,
            sampling,
        })
    }

    /// Fbmax = Qeq(2w + 1), octets: the largest |Fb|.
    pub fn fb_max(&self) -> i64 {
        self.fb_max
    }

    /// The un-jittered sampling interval (octets) for a QntzFb.
    pub fn sample_interval(&self, qntz_fb: u8) -> u64 {
        self.intervals[usize::from(qntz_fb.min(QNTZ_FB_MAX) / 8)]
    }

    /// Fb for a queue of `q` octets with `q_old` at the last sample, clamped (seed lines
    /// 154-159).
    pub fn fb(&self, q: u64, q_old: u64) -> i64 {
        let q = q.min(QUEUE_CAP) as i64;
        let q_old = q_old.min(QUEUE_CAP) as i64;
        // Seed line 154: "Fb = (Q_EQ - qlen) - W * (qlen - qlen_old);"
        let fb = (self.qeq - q) - mul_w(q - q_old, self.w_log2);
        // Seed lines 155-159: "if (Fb < -Q_EQ * (2 * W + 1)) then Fb = -Q_EQ * (2 * W + 1);
        // elseif (Fb > 0) then Fb = 0;"
        fb.clamp(-self.fb_max, 0)
    }

    /// QntzFb of a clamped Fb: `floor(-Fb * 63 / Fbmax)`, in 0..=63.
    ///
    /// Seed line 164: "qntz_Fb = -Fb(most significant bits);" with lines 161-162: "the maximum
    /// value of -Fb determines the number of bits that Fb uses. uniform quantization of -Fb,
    /// qntz_Fb, uses most significant bits of -Fb." Made exact with the vendor formula
    /// (HPE 5940: "QntzFb = -Fb x 63/(Qeq x (2 x w + 1))"), rounding down.
    pub fn quantize(&self, fb: i64) -> u8 {
        let neg = (-fb).clamp(0, self.fb_max) as i128;
        let q = neg * i128::from(QNTZ_FB_MAX) / self.fb_max as i128;
        q as u8
    }

    fn next_interval(&self, qntz_fb: u8, rng: &mut impl RngCore) -> u64 {
        let base = self.sample_interval(qntz_fb);
        match self.sampling {
            Sampling::ByteInterval { jitter_percent } if jitter_percent > 0 => {
                let spread = base * jitter_percent / 100;
                base - spread + uniform_inclusive(rng, 2 * spread)
            }
            _ => base,
        }
    }

    /// Whether frames are sampled by a byte interval (the default), not a per-frame coin.
    pub fn samples_by_octets(&self) -> bool {
        matches!(self.sampling, Sampling::ByteInterval { .. })
    }

    /// Byte-interval mode with the counter and Qold kept by the caller (the engine's port-wide
    /// sampling state when several workers' queues make one port): a frame the caller's
    /// counter did not sample. The queue holds `queue_bytes` octets with the frame; `q_old` is
    /// Qold. Seed lines 153-164 and 176-179, as [`QcnCp::on_frame`] decides them.
    pub fn on_unsampled(&self, queue_bytes: u64, q_old: u64) -> QcnDecision {
        let q = queue_bytes.min(QUEUE_CAP);
        let fb = self.fb(q, q_old);
        self.decision(q, q_old, fb, self.quantize(fb), false)
    }

    /// As [`on_unsampled`](Self::on_unsampled), for a frame that reached the caller's sample
    /// point: the decision, and the caller's new Qold and the next interval (octets, >= 1),
    /// drawn from `rng` as [`QcnCp::on_frame`] draws it (one draw with jitter, none without).
    pub fn on_sampled(
        &self,
        queue_bytes: u64,
        q_old: u64,
        rng: &mut impl RngCore,
    ) -> (QcnDecision, QcnSample) {
        let q = queue_bytes.min(QUEUE_CAP);
        let fb = self.fb(q, q_old);
        let qntz_fb = self.quantize(fb);
        let next_interval = self.next_interval(qntz_fb, rng).max(1);
        let d = self.decision(q, q_old, fb, qntz_fb, true);
        (
            d,
            QcnSample {
                q_old: q,
                next_interval,
            },
        )
    }

    /// The decision for a frame with Fb `fb` (QntzFb `qntz_fb`) at a queue of `q` octets
    /// (capped), `q_old` being Qold before it. Seed lines 166-179.
    fn decision(&self, q: u64, q_old: u64, fb: i64, qntz_fb: u8, sampled: bool) -> QcnDecision {
        let mut feedback = None;
        // Line 170: "if (Fb < 0) then generate_fb_frame = 1;" -- here QntzFb > 0 (see the
        // module doc: a CNM with QntzFb 0 is ignored by the RP).
        if sampled && qntz_fb > 0 {
            let q = q as i64;
            feedback = Some(QcnFeedback {
                qntz_fb,
                qoffset: to_cnm_units(q - self.qeq),
                qdelta: to_cnm_units(q - q_old.min(QUEUE_CAP) as i64),
            });
        }
        QcnDecision {
            fb,
            qntz_fb,
            sampled,
            // Lines 176-179: "if (Fb < 0) then IncomingFrame.DE = 1;"
            discard_eligible: fb < 0,
            feedback,
        }
    }
}

/// The congestion information for one CNM. The engine adds the CPID (protocols.md: CP MAC +
/// 2-octet queue id, U), the encapsulated priority, DA and MSDU of the sampled frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QcnFeedback {
    /// Quantised -Fb, 1..=63 (6 bits).
    pub qntz_fb: u8,
    /// cnmQOffset = Q - Qeq in units of [`CNM_QUEUE_UNIT_OCTETS`], rounded toward zero and
    /// saturated to i16 (seed 001: "Qoff = Q - Qeq").
    pub qoffset: i16,
    /// cnmQDelta = Q - Qold (Qold before this sample updated it) in units of
    /// [`CNM_QUEUE_UNIT_OCTETS`], rounded toward zero and saturated to i16 (seed 001:
    /// "Q_delta = Q - Qold").
    pub qdelta: i16,
}

/// What the CP decided about one arriving frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QcnDecision {
    /// Fb after clamping, in [-Fbmax, 0], octets.
    pub fb: i64,
    /// Quantised -Fb, 0..=63.
    pub qntz_fb: u8,
    /// This frame was a sample: Qold was set to the current queue length.
    pub sampled: bool,
    /// Seed lines 176-179: set the frame's DE bit (Fb < 0).
    pub discard_eligible: bool,
    /// Send a CNM to the frame's source.
    pub feedback: Option<QcnFeedback>,
}

/// A sample taken by a counter the caller keeps ([`QcnCpProfile::on_sampled`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QcnSample {
    /// Qold from now on: the queue length at this sample (seed line 173: "qlen_old = qlen;").
    pub q_old: u64,
    /// Octets to arrive before the next sample, >= 1 (the remainder is not carried over).
    pub next_interval: u64,
}

/// Per-queue QCN CP state: Qold and the octets still to arrive before the next sample.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QcnCp {
    q_old: u64,
    bytes_until_sample: u64,
}

fn to_cnm_units(octets: i64) -> i16 {
    (octets / CNM_QUEUE_UNIT_OCTETS).clamp(i64::from(i16::MIN), i64::from(i16::MAX)) as i16
}

impl QcnCp {
    /// Seed lines 145-149: "qlen = 0; qlen_old = 0;". The first sample comes after
    /// MinSampleBase octets (no jitter on the first interval: construction takes no RNG).
    pub fn new(profile: &QcnCpProfile) -> Self {
        QcnCp {
            q_old: 0,
            bytes_until_sample: profile.intervals[0],
        }
    }

    /// Queue length at the last sample, octets.
    pub fn q_old(&self) -> u64 {
        self.q_old
    }

    /// Octets still to arrive before the next sample (byte-interval mode).
    pub fn bytes_until_sample(&self) -> u64 {
        self.bytes_until_sample
    }

    /// One frame of `frame_bytes` octets arrived; the queue now holds `queue_bytes` octets,
    /// this frame included. Seed lines 151-188, `foreach (IncomingFrame)`.
    pub fn on_frame(
        &mut self,
        profile: &QcnCpProfile,
        queue_bytes: u64,
        frame_bytes: u32,
        rng: &mut impl RngCore,
    ) -> QcnDecision {
        let q = queue_bytes.min(QUEUE_CAP);
        // Lines 153-159: Fb, clamped to [-Qeq(2w+1), 0].
        let fb = profile.fb(q, self.q_old);
        // Lines 161-164: quantisation.
        let qntz_fb = profile.quantize(fb);
        // Lines 166-174: "if (urand() < (BASE_PROBABILITY + C * qntz_Fb)) then ... qlen_old =
        // qlen;" -- or, in byte-interval mode, the interval indexed by qntz_Fb/8 ran out.
        let sampled = match profile.sampling {
            Sampling::Probability { base, per_qntz_fb } => {
                urand(rng) < base + per_qntz_fb * f64::from(qntz_fb)
            }
            Sampling::ByteInterval { .. } => {
                let bytes = u64::from(frame_bytes);
                if bytes >= self.bytes_until_sample {
                    // The remainder is not carried over: the next interval starts now.
                    self.bytes_until_sample = profile.next_interval(qntz_fb, rng).max(1);
                    true
                } else {
                    self.bytes_until_sample -= bytes;
                    false
                }
            }
        };
        let d = profile.decision(q, self.q_old, fb, qntz_fb, sampled);
        if sampled {
            // Line 173: "qlen_old = qlen;"
            self.q_old = q;
        }
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand_xoshiro::rand_core::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    fn rng() -> Xoshiro256PlusPlus {
        Xoshiro256PlusPlus::seed_from_u64(0x5eed)
    }

    #[test]
    fn defaults_are_the_mib_values() {
        let p = QcnCpProfile::new(&QcnCpParams::default()).unwrap();
        // Fbmax = 26000 * (2*2 + 1) = 130000.
        assert_eq!(p.fb_max(), 130_000);
        // MinSampleBase 150000 scaled by {300,150,100,75,60,50,43,37}/300.
        let want = [
            150_000, 75_000, 50_000, 37_500, 30_000, 25_000, 21_500, 18_500,
        ];
        for (i, w) in want.iter().enumerate() {
            assert_eq!(p.sample_interval(i as u8 * 8), *w);
            assert_eq!(p.sample_interval(i as u8 * 8 + 7), *w);
        }
    }

    #[test]
    fn validation_names_the_parameter() {
        let bad = |f: fn(&mut QcnCpParams)| {
            let mut p = QcnCpParams::default();
            f(&mut p);
            QcnCpProfile::new(&p).unwrap_err().param
        };
        assert_eq!(bad(|p| p.queue_size_set_point = 0), "queue_size_set_point");
        assert_eq!(bad(|p| p.feedback_weight = 11), "feedback_weight");
        assert_eq!(bad(|p| p.min_sample_base = 9_999), "min_sample_base");
        assert_eq!(
            bad(|p| p.sample_jitter_percent = 51),
            "sample_jitter_percent"
        );
        assert_eq!(
            bad(|p| {
                p.sampling = SamplingMode::Probability;
                p.base_probability = 1.5;
            }),
            "base_probability"
        );
        assert_eq!(
            bad(|p| {
                p.sampling = SamplingMode::Probability;
                p.probability_per_qntz_fb = 0.1;
            }),
            "probability_per_qntz_fb"
        );
    }

    #[test]
    fn fb_and_quantisation_by_hand() {
        let p = QcnCpProfile::new(&QcnCpParams::default()).unwrap();
        // Q below Qeq and not growing: Fb = (26000 - 10000) - 2*0 = 16000 > 0 -> clamped to 0.
        assert_eq!(p.fb(10_000, 10_000), 0);
        // Q = 40000, Qold = 0: Fb = (26000-40000) - 2*(40000-0) = -14000 - 80000 = -94000;
        // QntzFb = floor(94000 * 63 / 130000) = floor(45.55) = 45.
        assert_eq!(p.fb(40_000, 0), -94_000);
        assert_eq!(p.quantize(-94_000), 45);
        // Q = 100000, Qold = 0: -74000 - 200000 = -274000 < -130000 -> clamped to -130000 -> 63.
        assert_eq!(p.fb(100_000, 0), -130_000);
        assert_eq!(p.quantize(-130_000), 63);
        // Shrinking queue above Qeq: Q = 30000, Qold = 40000: -4000 - 2*(-10000) = 16000 -> 0.
        assert_eq!(p.fb(30_000, 40_000), 0);
        // -Fb just below one step (130000/63 = 2063.49): 2063 -> 0; 2064 -> 1.
        assert_eq!(p.quantize(-2_063), 0);
        assert_eq!(p.quantize(-2_064), 1);
        // w = 2^-1 = 0.5 (feedback_weight -1): Fbmax = 26000 + 52000*0.5 = 52000; Q = 27001,
        // Qold = 0: -1001 - floor(27001/2) = -1001 - 13500 = -14501.
        let half = QcnCpProfile::new(&QcnCpParams {
            feedback_weight: -1,
            ..QcnCpParams::default()
        })
        .unwrap();
        assert_eq!(half.fb_max(), 52_000);
        assert_eq!(half.fb(27_001, 0), -14_501);
    }

    /// Walks seed lines 151-188 in byte-interval mode, no jitter, MinSampleBase 10000 (the MIB
    /// minimum) so that samples come every few frames. Intervals: 10000*{300,150,100,75,60,50,
    /// 43,37}/300 = {10000, 5000, 3333, 2500, 2000, 1666, 1433, 1233}.
    #[test]
    fn byte_interval_trace_by_hand() {
        let p = QcnCpProfile::new(&QcnCpParams {
            min_sample_base: 10_000,
            sample_jitter_percent: 0,
            ..QcnCpParams::default()
        })
        .unwrap();
        let mut cp = QcnCp::new(&p);
        let mut r = rng();
        assert_eq!(cp.bytes_until_sample(), 10_000);
        let mut q = 0u64;
        let mut step = |cp: &mut QcnCp, q: &mut u64| {
            *q += 2_000;
            cp.on_frame(&p, *q, 2_000, &mut r)
        };
        // Frames 1-4 (2000 octets each): Q = 2000..8000 < Qeq, Fb = (26000 - Q) - 2Q > 0
        // for Q < 8666 -> Fb = 0, no DE; counter 10000 -> 8000, 6000, 4000, 2000.
        for i in 1..=4u64 {
            let d = step(&mut cp, &mut q);
            assert_eq!((d.fb, d.qntz_fb, d.sampled), (0, 0, false), "frame {i}");
            assert!(!d.discard_eligible);
            assert_eq!(cp.bytes_until_sample(), 10_000 - 2_000 * i);
        }
        // Frame 5: Q = 10000. Fb = 16000 - 2*10000 = -4000 -> DE. QntzFb = floor(4000*63/130000)
        // = floor(1.94) = 1. 2000 >= 2000 remaining -> sampled; Qold = 10000; feedback:
        // qoffset = (10000-26000)/64 = -250, qdelta = (10000-0)/64 = 156.25 -> 156. Next
        // interval: index 1/8 = 0 -> 10000.
        let d = step(&mut cp, &mut q);
        assert_eq!((d.fb, d.qntz_fb, d.sampled), (-4_000, 1, true));
        assert!(d.discard_eligible);
        assert_eq!(
            d.feedback,
            Some(QcnFeedback {
                qntz_fb: 1,
                qoffset: -250,
                qdelta: 156
            })
        );
        assert_eq!((cp.q_old(), cp.bytes_until_sample()), (10_000, 10_000));
        // Frames 6-9: Q = 12000..18000, Qold = 10000. Frame 9: Q = 18000: Fb = 8000 - 2*8000 =
        // -8000, QntzFb = floor(8000*63/130000) = 3; not sampled (2000 left of 10000).
        for _ in 6..=9 {
            step(&mut cp, &mut q);
        }
        assert_eq!(cp.bytes_until_sample(), 2_000);
        // Frame 10: Q = 20000: Fb = 6000 - 2*10000 = -14000; QntzFb = floor(14000*63/130000) =
        // floor(6.78) = 6 -> sampled; qoffset = -6000/64 = -93.75 -> -93; qdelta = 10000/64 ->
        // 156. Next interval still index 0 (6/8 = 0): 10000.
        let d = step(&mut cp, &mut q);
        assert_eq!((d.fb, d.qntz_fb, d.sampled), (-14_000, 6, true));
        assert_eq!(
            d.feedback,
            Some(QcnFeedback {
                qntz_fb: 6,
                qoffset: -93,
                qdelta: 156
            })
        );
        // A burst: one 30000-octet frame, Q = 50000, Qold = 20000: Fb = -24000 - 2*30000 =
        // -84000; QntzFb = floor(84000*63/130000) = floor(40.7) = 40 -> sampled (30000 >=
        // 10000); next interval = intervals[40/8 = 5] = 1666.
        let d = cp.on_frame(&p, 50_000, 30_000, &mut r);
        assert_eq!((d.fb, d.qntz_fb, d.sampled), (-84_000, 40, true));
        assert_eq!(d.feedback.unwrap().qdelta, 468); // 30000/64 = 468.75 -> 468
        assert_eq!(cp.bytes_until_sample(), 1_666);
        // Queue drains to 0 while frames of 1000 arrive: Q = 1000, Qold = 50000: Fb = 25000 -
        // 2*(-49000) > 0 -> 0. Counter 1666 -> 666, then the next frame samples with QntzFb 0:
        // Qold = 2000 (line 173 updates Qold on every sample) and no CNM (QntzFb 0).
        let d = cp.on_frame(&p, 1_000, 1_000, &mut r);
        assert_eq!((d.fb, d.sampled, cp.bytes_until_sample()), (0, false, 666));
        let d = cp.on_frame(&p, 2_000, 1_000, &mut r);
        assert_eq!((d.fb, d.sampled, d.feedback), (0, true, None));
        assert_eq!((cp.q_old(), cp.bytes_until_sample()), (2_000, 10_000));
    }

    /// Seed line 168 in probability mode: with base 0 and C = 1/63, QntzFb 63 samples every
    /// frame (p = 1) and QntzFb 0 never does (p = 0), whatever the RNG says.
    #[test]
    fn probability_mode_extremes() {
        let p = QcnCpProfile::new(&QcnCpParams {
            sampling: SamplingMode::Probability,
            base_probability: 0.0,
            probability_per_qntz_fb: 1.0 / 63.0,
            ..QcnCpParams::default()
        })
        .unwrap();
        let mut cp = QcnCp::new(&p);
        let mut r = rng();
        // Q = 200000 from Qold 0: clamped, QntzFb 63, p = 63/63 = 1.0 > any urand in [0,1).
        let d = cp.on_frame(&p, 200_000, 1_500, &mut r);
        assert_eq!((d.qntz_fb, d.sampled), (63, true));
        assert_eq!(
            d.feedback.unwrap().qoffset,
            ((200_000 - 26_000) / 64) as i16
        );
        // Q = 1000 < Qeq, Qold = 200000: Fb > 0 -> 0, p = 0: never sampled.
        for _ in 0..1000 {
            assert!(!cp.on_frame(&p, 1_000, 1_500, &mut r).sampled);
        }
        assert_eq!(cp.q_old(), 200_000);
    }

    /// With the default 1 %..10 % the sample rate at QntzFb 0 is near 1 % (seed 001).
    #[test]
    fn probability_mode_rate_at_base() {
        let p = QcnCpProfile::new(&QcnCpParams {
            sampling: SamplingMode::Probability,
            ..QcnCpParams::default()
        })
        .unwrap();
        let mut cp = QcnCp::new(&p);
        let mut r = rng();
        let n = 100_000;
        let hits = (0..n)
            .filter(|_| cp.on_frame(&p, 0, 1_500, &mut r).sampled)
            .count();
        // Binomial(100000, 0.01): mean 1000, sd 31.5; +-6 sd.
        assert!((810..=1190).contains(&hits), "{hits}");
    }

    #[test]
    fn jitter_stays_in_band() {
        let p = QcnCpProfile::new(&QcnCpParams::default()).unwrap();
        let mut r = rng();
        let (mut lo, mut hi) = (u64::MAX, 0);
        for _ in 0..10_000 {
            let i = p.next_interval(0, &mut r);
            lo = lo.min(i);
            hi = hi.max(i);
        }
        // 150000 +- 15 % = [127500, 172500], and the draws spread over most of it.
        assert!(lo >= 127_500 && hi <= 172_500, "{lo} {hi}");
        assert!(lo < 130_000 && hi > 170_000, "{lo} {hi}");
    }

    #[test]
    fn cnm_fields_saturate() {
        assert_eq!(to_cnm_units(i64::MAX), i16::MAX);
        assert_eq!(to_cnm_units(-(1 << 40)), i16::MIN);
        assert_eq!(to_cnm_units(-63), 0);
    }

    #[derive(Clone, Debug)]
    enum Ev {
        Enqueue(u32),
        Dequeue(u32),
    }

    fn ev() -> impl Strategy<Value = Ev> {
        prop_oneof![
            (64u32..=9_000).prop_map(Ev::Enqueue),
            (64u32..=9_000).prop_map(Ev::Dequeue),
        ]
    }

    fn params() -> impl Strategy<Value = QcnCpParams> {
        (
            1_000u64..200_000,
            -3i8..=4,
            10_000u64..300_000,
            any::<bool>(),
            0u8..=50,
        )
            .prop_map(|(qeq, fw, msb, prob, jit)| QcnCpParams {
                queue_size_set_point: qeq,
                feedback_weight: fw,
                min_sample_base: msb,
                sampling: if prob {
                    SamplingMode::Probability
                } else {
                    SamplingMode::ByteInterval
                },
                sample_jitter_percent: jit,
                ..QcnCpParams::default()
            })
    }

    proptest! {
        /// Model-based: a queue driven by random enqueue/dequeue; every decision keeps Fb in
        /// [-Fbmax, 0], QntzFb in 6 bits and consistent with Fb, DE iff Fb < 0, feedback only
        /// on samples with QntzFb > 0, and Qold equal to the queue at the last sample.
        #[test]
        fn invariants_hold(p in params(), seed in any::<u64>(), evs in prop::collection::vec(ev(), 1..400)) {
            let prof = QcnCpProfile::new(&p).unwrap();
            let mut cp = QcnCp::new(&prof);
            let mut r = Xoshiro256PlusPlus::seed_from_u64(seed);
            let mut q = 0u64;
            let mut last_sample_q = 0u64;
            for e in evs {
                match e {
                    Ev::Dequeue(b) => q = q.saturating_sub(u64::from(b)),
                    Ev::Enqueue(b) => {
                        q += u64::from(b);
                        let before = cp.bytes_until_sample();
                        let d = cp.on_frame(&prof, q, b, &mut r);
                        prop_assert!(d.fb <= 0 && d.fb >= -prof.fb_max());
                        prop_assert!(d.qntz_fb <= QNTZ_FB_MAX);
                        prop_assert_eq!(d.qntz_fb, prof.quantize(d.fb));
                        prop_assert_eq!(d.discard_eligible, d.fb < 0);
                        if let Some(f) = d.feedback {
                            prop_assert!(d.sampled && f.qntz_fb == d.qntz_fb && f.qntz_fb > 0);
                        } else {
                            prop_assert!(!d.sampled || d.qntz_fb == 0);
                        }
                        if d.sampled {
                            last_sample_q = q;
                        }
                        prop_assert_eq!(cp.q_old(), last_sample_q);
                        if p.sampling == SamplingMode::ByteInterval {
                            prop_assert_eq!(d.sampled, u64::from(b) >= before);
                            prop_assert!(cp.bytes_until_sample() >= 1);
                        }
                    }
                }
            }
        }

        /// A counter and Qold kept outside ([`QcnCpProfile::on_sampled`] / `on_unsampled`, the
        /// engine's port-wide sampling) decide every frame as [`QcnCp::on_frame`] does, with
        /// the same draws: the sample point is the first frame whose arrival reaches the last
        /// sample's position plus the interval.
        #[test]
        fn a_counter_kept_outside_decides_as_on_frame(p in params(), seed in any::<u64>(), evs in prop::collection::vec(ev(), 1..400)) {
            let p = QcnCpParams { sampling: SamplingMode::ByteInterval, ..p };
            let prof = QcnCpProfile::new(&p).unwrap();
            prop_assert!(prof.samples_by_octets());
            let mut cp = QcnCp::new(&prof);
            let (mut r1, mut r2) = (Xoshiro256PlusPlus::seed_from_u64(seed), Xoshiro256PlusPlus::seed_from_u64(seed));
            let (mut q, mut pos, mut next, mut q_old) = (0u64, 0u64, prof.sample_interval(0), 0u64);
            for e in evs {
                match e {
                    Ev::Dequeue(b) => q = q.saturating_sub(u64::from(b)),
                    Ev::Enqueue(b) => {
                        q += u64::from(b);
                        pos += u64::from(b);
                        let d = cp.on_frame(&prof, q, b, &mut r1);
                        let outside = if pos >= next {
                            let (d, s) = prof.on_sampled(q, q_old, &mut r2);
                            (next, q_old) = (pos + s.next_interval, s.q_old);
                            d
                        } else {
                            prof.on_unsampled(q, q_old)
                        };
                        prop_assert_eq!(d, outside);
                        prop_assert_eq!(q_old, cp.q_old());
                    }
                }
            }
        }

        /// QntzFb is monotone in -Fb and always fits 6 bits.
        #[test]
        fn quantize_monotone(a in -10_000_000i64..=0, b in -10_000_000i64..=0) {
            let prof = QcnCpProfile::new(&QcnCpParams::default()).unwrap();
            let (fa, fb) = (a.max(-prof.fb_max()), b.max(-prof.fb_max()));
            prop_assert!(prof.quantize(fa) <= 63);
            if fa <= fb {
                prop_assert!(prof.quantize(fa) >= prof.quantize(fb));
            }
        }
    }
}
