//! DCTCP reaction point (SIGCOMM 2010) for one flow, in the rate-based form the HPCC ns-3
//! simulator runs under `CC_MODE 8` (`rdma-hw.cc`: `HandleAckDctcp`; state in
//! `rdma-queue-pair.h`, `dctcp`).
//!
//! Switches mark ECN (RED with run.py's Kmin = Kmax and Pmax 1, a step); the receiver echoes
//! the mark in its ACK's CNP flag. Once per window of data (an ACK beyond `m_lastUpdateSeq`)
//! alpha takes the fraction of marked ACKs: `alpha = (1 - g) alpha + g F`, with the batch size
//! the packets that window held. A marked ACK outside congestion window reduction (CWR) cuts
//! the rate by `alpha / 2` and enters CWR until the ACKs pass what was sent then; each new
//! batch outside CWR adds `DCTCP_RATE_AI` (one MTU per RTT, as a rate).
//!
//! Sans-IO: [`DctcpState::on_ack`] takes the ACK's sequence number, its ECN echo and the
//! sender's `snd_nxt`.

use units::keys::{key, Key, KeyDefault, Range, Type};
use units::Rate;

use crate::hpcc::dr;
use crate::params::{self, ParamError};

/// DCTCP parameters, by their config.txt names.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct DctcpParams {
    /// EWMA_GAIN (`EwmaGain`), g. Default 0.0625 (`RdmaHw`'s 1/16; third.cc's own default,
    /// `1 / 16` in integer arithmetic, is 0).
    pub g: f64,
    /// DCTCP_RATE_AI (`DctcpRateAI`), Mb/s: the increase per batch. Default 1000.
    pub rate_ai: u64,
    /// MIN_RATE, Mb/s. Default 100.
    pub min_rate: u64,
    /// Rate ceiling, Mb/s; 0 (default) = the port speed.
    pub max_rate: u64,
    /// The payload per packet, octets (`Mtu` = PACKET_PAYLOAD_SIZE): counts a batch's packets.
    /// Default 1000.
    pub mtu: u64,
}

impl Default for DctcpParams {
    fn default() -> Self {
        DctcpParams {
            g: 0.0625,
            rate_ai: 1000,
            min_rate: 100,
            max_rate: 0,
            mtu: 1000,
        }
    }
}

/// The keys of [`DctcpParams`].
pub const KEYS: &[Key] = &[
    Key {
        name: "g",
        ty: Type::Float,
        unit: "",
        default: KeyDefault::Value("0.0625"),
        range: Range::Float(0.0, 1.0),
        doc: "The alpha gain (ns-3 EWMA_GAIN).",
    },
    Key {
        name: "rate_ai",
        ty: Type::Integer,
        unit: "Mb/s",
        default: KeyDefault::Value("1000"),
        range: Range::Int(0, 1 << 30),
        doc: "The additive increase per window of ACKs (ns-3 DCTCP_RATE_AI).",
    },
    params::MIN_RATE_KEY,
    params::MAX_RATE_KEY,
    Key {
        name: "mtu",
        ty: Type::Integer,
        unit: "octets",
        default: KeyDefault::Value("1000"),
        range: Range::Int(1, 1 << 20),
        doc: "The payload per packet, which counts a window's packets (ns-3 PACKET_PAYLOAD_SIZE).",
    },
];
const G: &Key = key(KEYS, "g");
const RATE_AI: &Key = key(KEYS, "rate_ai");
const MTU: &Key = key(KEYS, "mtu");

/// Validated DCTCP parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DctcpProfile {
    pub g: f64,
    pub rate_ai: Rate,
    pub min_rate: Rate,
    pub max_rate: Rate,
    pub mtu: u64,
}

impl DctcpParams {
    pub fn profile(&self, line_rate: Rate) -> Result<DctcpProfile, ParamError> {
        let (max_rate, min_rate) = params::rates(self.max_rate, self.min_rate, line_rate)?;
        Ok(DctcpProfile {
            g: G.within_f64(self.g)?,
            rate_ai: Rate::from_mbps(RATE_AI.within(self.rate_ai)?),
            min_rate,
            max_rate,
            mtu: MTU.within(self.mtu)?,
        })
    }
}

/// Per-flow DCTCP state (`RdmaQueuePair::dctcp` and `m_rate`).
#[derive(Clone, Debug, PartialEq)]
pub struct DctcpState {
    rate: u64,
    /// `m_lastUpdateSeq`.
    last_update_seq: u64,
    /// `m_caState == 1`: in congestion window reduction.
    cwr: bool,
    /// `m_highSeq`: CWR ends when an ACK passes it.
    high_seq: u64,
    alpha: f64,
    /// `m_ecnCnt`: marked ACKs in this batch.
    ecn_cnt: u32,
    /// `m_batchSizeOfAlpha`: packets in this batch.
    batch: u32,
}

impl DctcpState {
    /// A flow at the ceiling, alpha 1 (`RdmaQueuePair` constructor).
    pub fn new(p: &DctcpProfile) -> Self {
        DctcpState {
            rate: p.max_rate.as_bps(),
            last_update_seq: 0,
            cwr: false,
            high_seq: 0,
            alpha: 1.0,
            ecn_cnt: 0,
            batch: 0,
        }
    }

    pub fn rate(&self) -> Rate {
        Rate::from_bps(self.rate)
    }

    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    pub fn in_cwr(&self) -> bool {
        self.cwr
    }

    /// An ACK for `ack_seq`, `ecn` its CNP flag, while the sender's next sequence number is
    /// `snd_nxt` (`HandleAckDctcp`).
    pub fn on_ack(&mut self, p: &DctcpProfile, ack_seq: u64, snd_nxt: u64, ecn: bool) {
        let mut new_batch = false;
        // "update alpha"
        self.ecn_cnt += u32::from(ecn);
        if ack_seq > self.last_update_seq {
            new_batch = true;
            if self.last_update_seq == 0 {
                // first RTT
                self.last_update_seq = snd_nxt;
                self.batch = (snd_nxt / p.mtu + 1) as u32;
            } else {
                let frac = (f64::from(self.ecn_cnt) / f64::from(self.batch)).min(1.0);
                self.alpha = (1.0 - p.g) * self.alpha + p.g * frac;
                self.last_update_seq = snd_nxt;
                self.ecn_cnt = 0;
                self.batch = (snd_nxt.wrapping_sub(ack_seq) / p.mtu + 1) as u32;
            }
        }
        // "check cwr exit"
        if self.cwr && ack_seq > self.high_seq {
            self.cwr = false;
        }
        // "check if need to reduce rate: ECN and not in CWR"
        if ecn && !self.cwr {
            self.rate = dr(self.rate as f64 * (1.0 - self.alpha / 2.0)).max(p.min_rate.as_bps());
            self.cwr = true;
            self.high_seq = snd_nxt;
        }
        // "additive inc"
        if !self.cwr && new_batch {
            self.rate = (self.rate + p.rate_ai.as_bps()).min(p.max_rate.as_bps());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// run.py --cc dctcp at 100 Gb/s: EWMA_GAIN 0.0625, DCTCP_RATE_AI 615Mb/s, MIN_RATE
    /// 1000Mb/s, payload 1000.
    fn run_py_100g() -> DctcpProfile {
        DctcpParams {
            g: 0.0625,
            rate_ai: 615,
            min_rate: 1000,
            ..DctcpParams::default()
        }
        .profile(Rate::from_gbps(100))
        .unwrap()
    }

    /// Expected numbers: `HandleAckDctcp` step by step in IEEE doubles, and printed alike by
    /// ns-3's own `HandleAckDctcp` compiled in the harness described in `hpcc/tests.rs`
    /// (last rate 28_102_468_927).
    /// - ACK 1000 unmarked, snd_nxt 10000: first batch, batch = 11 packets; not in CWR and a
    ///   new batch: +615 Mb/s, capped at 100 Gb/s.
    /// - ACK 2000 marked: not a new batch (2000 <= 10000), ecn_cnt 1; cut by alpha/2 = 1/2:
    ///   50e9, CWR until an ACK passes snd_nxt 12000.
    /// - ACK 3000 marked: in CWR: only counted (ecn_cnt 2).
    /// - ACK 11000 unmarked, snd_nxt 30000: new batch: F = 2/11, alpha = 0.9375 + 0.0625 x
    ///   2/11; batch (30000 - 11000)/1000 + 1 = 20; still CWR (11000 <= 12000): no increase.
    /// - ACK 13000 unmarked: exits CWR; not a new batch: the rate stays.
    /// - ACK 31000 unmarked, snd_nxt 50000: F = 0, alpha x 0.9375; +615 Mb/s.
    #[test]
    fn follows_handle_ack_dctcp() {
        let p = run_py_100g();
        let mut s = DctcpState::new(&p);
        s.on_ack(&p, 1000, 10_000, false);
        assert_eq!(s.rate(), Rate::from_gbps(100));
        s.on_ack(&p, 2000, 12_000, true);
        assert_eq!(s.rate().as_bps(), 50_000_000_000);
        assert!(s.in_cwr());
        s.on_ack(&p, 3000, 13_000, true);
        assert_eq!(s.rate().as_bps(), 50_000_000_000);
        s.on_ack(&p, 11_000, 30_000, false);
        let a1 = (1.0 - 0.0625) * 1.0 + 0.0625 * (2.0 / 11.0);
        assert_eq!(s.alpha(), a1);
        assert!(s.in_cwr());
        assert_eq!(s.rate().as_bps(), 50_000_000_000);
        s.on_ack(&p, 13_000, 31_000, false);
        assert!(!s.in_cwr());
        assert_eq!(s.rate().as_bps(), 50_000_000_000);
        s.on_ack(&p, 31_000, 50_000, false);
        assert_eq!(s.alpha(), (1.0 - 0.0625) * a1);
        assert_eq!(s.rate().as_bps(), 50_615_000_000);
        // A mark now cuts by alpha/2 of the current rate, truncated.
        s.on_ack(&p, 32_000, 51_000, true);
        let a2 = (1.0 - 0.0625) * a1;
        assert_eq!(
            s.rate().as_bps(),
            (50_615_000_000f64 * (1.0 - a2 / 2.0)) as u64
        );
        assert_eq!(s.rate().as_bps(), 28_102_468_927);
    }

    #[test]
    fn cut_stops_at_the_floor() {
        let p = run_py_100g();
        let mut s = DctcpState::new(&p);
        let mut seq = 0;
        for _ in 0..40 {
            seq += 100_000;
            s.on_ack(&p, seq, seq + 1000, true);
            assert!(s.rate() >= p.min_rate);
        }
        assert_eq!(s.rate(), p.min_rate);
    }
}
