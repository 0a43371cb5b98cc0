//! In-band network telemetry (INT) as the HPCC ns-3 simulator carries it, which the HPCC and
//! HPCC-PINT reaction points read: per hop a 64-bit word of line rate, timestamp, bytes sent and
//! queue length (`src/network/utils/int-header.h`, class `IntHop`), up to five hops
//! (`IntHeader::maxHop`), and PINT's one logarithmic utilisation number
//! (`src/point-to-point/model/pint.cc`).
//!
//! The word packs, from its least significant bit (GCC's bit-field order of `IntHop`'s struct
//! on a little-endian machine): line-rate code 3 bits, time 24 bits (ns), bytes 20 bits (units of
//! 128 x multi octets), queue length 17 bits (units of 80 x multi octets). `multi` is
//! `IntHop::multi`, config.txt's `INT_MULTI`. Every field is stored modulo its width, as the
//! bit-field assignment in `IntHop::Set` does; the deltas of time and bytes wrap once as
//! `GetTimeDelta` / `GetBytesDelta` do.

use units::Rate;

/// `IntHeader::maxHop`.
pub const MAX_HOPS: usize = 5;
const RATE_BITS: u32 = 3;
const TIME_BITS: u32 = 24;
const BYTES_BITS: u32 = 20;
const QLEN_BITS: u32 = 17;
/// `IntHop::byteUnit`.
pub const BYTE_UNIT: u64 = 128;
/// `IntHop::qlenUnit`.
pub const QLEN_UNIT: u64 = 80;
/// `IntHop::lineRateValues`: the speeds a hop can report, by code.
pub const LINE_RATES: [u64; 8] = [
    25_000_000_000,
    50_000_000_000,
    100_000_000_000,
    200_000_000_000,
    400_000_000_000,
    0,
    0,
    0,
];

const fn mask(bits: u32) -> u64 {
    (1 << bits) - 1
}

/// One hop's telemetry word (`IntHop`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct IntHop(pub u64);

impl IntHop {
    /// `IntHop::Set(time, bytes, qlen, rate)`: `None` for a line rate without a code (ns-3
    /// prints "IntHeader unknown rate" and keeps the slot's old code; quench refuses such a
    /// network before it runs).
    pub fn new(time_ns: u64, bytes: u64, qlen: u32, rate: Rate, multi: u32) -> Option<IntHop> {
        let code = LINE_RATES[..5].iter().position(|&r| r == rate.as_bps())? as u64;
        let multi = u64::from(multi.max(1));
        // `bytes = _bytes / (byteUnit * multi)`: a u64 division; `qlen = _qlen / (qlenUnit *
        // multi)`: a u32 division. Both then cut to their widths.
        let b = (bytes / (BYTE_UNIT * multi)) & mask(BYTES_BITS);
        let q = (u64::from(qlen) / (QLEN_UNIT * multi)) & mask(QLEN_BITS);
        let t = time_ns & mask(TIME_BITS);
        Some(IntHop(
            code | t << RATE_BITS
                | b << (RATE_BITS + TIME_BITS)
                | q << (RATE_BITS + TIME_BITS + BYTES_BITS),
        ))
    }

    fn field(self, shift: u32, bits: u32) -> u64 {
        (self.0 >> shift) & mask(bits)
    }

    /// `GetLineRate`, bit/s (0 for the unused codes 5-7).
    pub fn line_rate(self) -> u64 {
        LINE_RATES[self.field(0, RATE_BITS) as usize]
    }

    /// `GetTime`: the timestamp modulo 2^24 ns.
    pub fn time(self) -> u64 {
        self.field(RATE_BITS, TIME_BITS)
    }

    fn bytes_raw(self) -> u64 {
        self.field(RATE_BITS + TIME_BITS, BYTES_BITS)
    }

    fn qlen_raw(self) -> u64 {
        self.field(RATE_BITS + TIME_BITS + BYTES_BITS, QLEN_BITS)
    }

    /// `GetBytes`: octets sent, in steps of 128 x multi.
    pub fn bytes(self, multi: u32) -> u64 {
        self.bytes_raw() * BYTE_UNIT * u64::from(multi)
    }

    /// `GetQlen`: the queue, octets in steps of 80 x multi (a u32 product, as ns-3's).
    pub fn qlen(self, multi: u32) -> u32 {
        (self.qlen_raw() as u32)
            .wrapping_mul(QLEN_UNIT as u32)
            .wrapping_mul(multi)
    }

    /// `GetBytesDelta(prev)`: octets sent since `prev`, one wrap of the 20-bit counter allowed.
    pub fn bytes_delta(self, prev: IntHop, multi: u32) -> u64 {
        let (now, then) = (self.bytes_raw(), prev.bytes_raw());
        let d = if now >= then {
            now - then
        } else {
            now + (1 << BYTES_BITS) - then
        };
        d * BYTE_UNIT * u64::from(multi)
    }

    /// `GetTimeDelta(prev)`: ns since `prev`, one wrap of the 24-bit clock allowed.
    pub fn time_delta(self, prev: IntHop) -> u64 {
        let (now, then) = (self.time(), prev.time());
        if now >= then {
            now - then
        } else {
            now + (1 << TIME_BITS) - then
        }
    }

    /// The 8 octets `IntHeader::Serialize` writes for the hop: `WriteU32(buf[0])` then
    /// `WriteU32(buf[1])`, the word's low half first, each in network order.
    pub fn to_bytes(self) -> [u8; 8] {
        let mut b = [0; 8];
        b[..4].copy_from_slice(&(self.0 as u32).to_be_bytes());
        b[4..].copy_from_slice(&((self.0 >> 32) as u32).to_be_bytes());
        b
    }

    pub fn from_bytes(b: [u8; 8]) -> IntHop {
        let lo = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        let hi = u32::from_be_bytes([b[4], b[5], b[6], b[7]]);
        IntHop(u64::from(lo) | u64::from(hi) << 32)
    }
}

/// The hops a packet collected (`IntHeader` in its `NORMAL` mode): 42 octets on the wire.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct IntHops {
    pub hops: [IntHop; MAX_HOPS],
    /// Hops pushed; past [`MAX_HOPS`] the slots are reused (`nhop % maxHop`) and the reaction
    /// point ignores the header (`ih.nhop <= IntHeader::maxHop` in `UpdateRateHp`).
    pub nhop: u16,
}

/// `IntHeader::GetStaticSize` in `NORMAL` mode: five words and the count.
pub const INT_HOPS_BYTES: u32 = MAX_HOPS as u32 * 8 + 2;

impl IntHops {
    /// `IntHeader::PushHop`.
    pub fn push(&mut self, hop: IntHop) {
        self.hops[usize::from(self.nhop) % MAX_HOPS] = hop;
        self.nhop = self.nhop.wrapping_add(1);
    }

    /// The hops a reaction point reads: `None` past [`MAX_HOPS`].
    pub fn valid(&self) -> Option<&[IntHop]> {
        let n = usize::from(self.nhop);
        (n <= MAX_HOPS).then(|| &self.hops[..n])
    }
}

/// PINT's utilisation code (`class Pint`): a power of `log_base`, sent in `bytes` octets.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pint {
    pub log_base: f64,
    /// `Pint::log_factor` = 1 / ln(log_base).
    pub log_factor: f64,
    /// `IntHeader::pint_bytes` = `Pint::get_n_bytes()`: 1 or 2 (a 1-octet code keeps the low
    /// octet of the power, as `SetPower` does).
    pub bytes: u32,
}

/// `Pint::max_concurrent`.
const MAX_CONCURRENT: u32 = 512;

impl Pint {
    /// `Pint::set_log_base`; `None` unless `log_base > 1` and the code fits two octets.
    pub fn new(log_base: f64) -> Option<Pint> {
        if !(log_base > 1.0 && log_base.is_finite()) {
            return None;
        }
        let log_factor = 1.0 / log_base.ln();
        // get_n_bits: ceil(log2(ln(512 * 512) * log_factor)); get_n_bytes: (bits - 1) / 8 + 1.
        let max_value = f64::from(MAX_CONCURRENT * MAX_CONCURRENT).ln() * log_factor;
        let bits = max_value.log2().ceil() as i64;
        let bytes = if bits <= 0 { 0 } else { (bits - 1) / 8 + 1 };
        (1..=2).contains(&bytes).then_some(Pint {
            log_base,
            log_factor,
            bytes: bytes as u32,
        })
    }

    /// `Pint::encode_u(u)`, with `coin` = `rand() % 65536`: the power rounds up with the
    /// probability that makes its expectation u (random rounding between two powers).
    pub fn encode(&self, u: f64, coin: u32) -> u16 {
        let mut u_int = (u * f64::from(MAX_CONCURRENT)).ceil() as u32;
        if u_int == 0 {
            u_int = 1;
        }
        let power = f64::from(u_int).ln() * self.log_factor;
        let (p_upper, p_lower) = (power.ceil() as u16, power.floor() as u16);
        let mut upper = self.log_base.powf(f64::from(p_upper));
        let lower = self.log_base.powf(f64::from(p_lower));
        if p_upper == p_lower {
            upper *= self.log_base;
        }
        let up = f64::from(coin) < (f64::from(u_int) - lower) / (upper - lower) * 65536.0;
        self.stored(if up { p_upper } else { p_lower })
    }

    /// What the header keeps of a power: its low octet with a 1-octet code.
    pub fn stored(&self, power: u16) -> u16 {
        if self.bytes == 1 {
            power & 0xff
        } else {
            power
        }
    }

    /// `Pint::decode_u(p)`.
    pub fn decode(&self, power: u16) -> f64 {
        self.log_base.powf(f64::from(power)) / f64::from(MAX_CONCURRENT)
    }
}

/// A switch egress's state for PINT's utilisation estimate (ns-3 `SwitchNode`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PintPort {
    /// ns since the port's previous packet, at most `max_rtt`.
    pub dt: u64,
    /// ns-3's `MaxRtt` (third.cc's `maxRtt`), ns.
    pub max_rtt: u64,
    pub line_rate: Rate,
    /// Octets queued at the port after this packet left.
    pub qlen: u64,
    /// The previous packet's size (`m_lastPktSize`).
    pub last_size: u32,
    /// The previous estimate (`m_u`).
    pub u: f64,
}

/// `SwitchNode::log2apprx(x, 20, 16, 20)`: log2(x) x 2^15 from the top 16 bits of `x`, the cut
/// bits rounding up with the probability they stand for (`rand() & mask`, a coin of 31 bits).
fn log2apprx(x: i64, coin: &mut dyn FnMut() -> u32) -> i64 {
    const M: i64 = 16;
    const SHIFT: i32 = 15; // logres_shift(20, 20) = 20 - data[20] = 15
    if x <= 0 {
        // log2(0) is -inf; GCC's int conversion of it (and of what follows) is INT_MIN.
        return i64::from(i32::MIN);
    }
    let x0 = x;
    let mut x = x;
    let msb = (x as f64).log2() as i64 + 1;
    if msb > M {
        let cut = msb - M;
        x = x >> cut << cut;
        let mask = (1i64 << cut) - 1;
        if (x0 & mask) > (i64::from(coin() & 0x7fff_ffff) & mask) {
            x += 1 << cut;
        }
    }
    ((x as f64).log2() * f64::from(1 << SHIFT)) as i32 as i64
}

/// The utilisation a switch egress folds into a packet under HPCC-PINT (`SwitchNode::
/// SwitchNotifyDequeue`, `CC_MODE 10`, its "approximate calc"): the EWMA over `max_rtt` of
/// queue and transmit rate, `dt x qlen x 1e9 / (B x T^2) + size x 1e9 / (B x T) + (T - dt) x
/// u / T` with B the line rate in octets/s, each product taken in logarithms rounded as
/// [`log2apprx`] does. `coin` is ns-3's `rand()`.
pub fn pint_switch_u(coin: &mut dyn FnMut() -> u32, p: PintPort) -> f64 {
    let fct = f64::from(1 << 15);
    let b = (p.line_rate.as_bps() / 8) as f64;
    let log_t = (p.max_rtt as f64).log2() * fct;
    let log_b = b.log2() * fct;
    let log_1e9 = 1e9f64.log2() * fct;
    let (mut qterm, mut byte_term, mut u_term) = (0.0, 0.0, 0.0);
    if (p.qlen >> 8) > 0 {
        let log_dt = log2apprx(p.dt as i32 as i64, coin) as f64;
        let log_qlen = log2apprx((p.qlen >> 8) as i32 as i64, coin) as f64;
        qterm = 2f64.powf((log_dt + log_qlen + log_1e9 - log_b - 2.0 * log_t) / fct) * 256.0;
    }
    if p.last_size > 0 {
        let log_byte = log2apprx(i64::from(p.last_size as i32), coin) as f64;
        byte_term = 2f64.powf((log_byte + log_1e9 - log_b - log_t) / fct);
    }
    if p.max_rtt > p.dt && p.u > 0.0 {
        let log_t_dt = log2apprx((p.max_rtt - p.dt) as i32 as i64, coin) as f64;
        let log_u = log2apprx((p.u * 8192.0).round() as i32 as i64, coin) as f64;
        u_term = 2f64.powf((log_t_dt + log_u - log_t) / fct) / 8192.0;
    }
    qterm + byte_term + u_term
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_packs_as_ns3_bit_fields() {
        // 100G (code 2), t = 0x123456 ns, 128 x 5 octets, 80 x 3 octets.
        let h = IntHop::new(0x0123_4567, 640, 240, Rate::from_gbps(100), 1).unwrap();
        assert_eq!(h.line_rate(), 100_000_000_000);
        assert_eq!(h.time(), 0x23_4567, "24 bits of the time");
        assert_eq!(h.bytes(1), 640);
        assert_eq!(h.qlen(1), 240);
        assert_eq!(h.0, 2 | 0x23_4567 << 3 | 5 << 27 | 3 << 47);
        assert_eq!(IntHop::from_bytes(h.to_bytes()), h);
        // Units scale with INT_MULTI: 4 x 128 octets per step.
        let h4 = IntHop::new(0, 512 * 10, 320 * 2, Rate::from_gbps(400), 4).unwrap();
        assert_eq!(
            (h4.bytes(4), h4.qlen(4), h4.line_rate()),
            (5120, 640, 400e9 as u64)
        );
        assert!(IntHop::new(0, 0, 0, Rate::from_gbps(40), 1).is_none());
    }

    #[test]
    fn deltas_wrap_once() {
        let r = Rate::from_gbps(25);
        let a = IntHop::new((1 << 24) - 10, ((1 << 20) - 2) * 128, 0, r, 1).unwrap();
        let b = IntHop::new((1 << 24) + 5, ((1 << 20) + 3) * 128, 0, r, 1).unwrap();
        assert_eq!(b.time_delta(a), 15);
        assert_eq!(b.bytes_delta(a, 1), 5 * 128);
    }

    #[test]
    fn push_reuses_slots_past_five() {
        let mut ih = IntHops::default();
        for t in 0..6 {
            ih.push(IntHop::new(t, 0, 0, Rate::from_gbps(100), 1).unwrap());
        }
        assert_eq!(ih.nhop, 6);
        assert_eq!(ih.hops[0].time(), 5);
        assert!(ih.valid().is_none());
    }

    #[test]
    fn pint_code_width_and_decode() {
        // log base 1.05: ln(2^18) / ln(1.05) = 255.6, 8 bits; 1.01: 1253, 11 bits.
        assert_eq!(Pint::new(1.05).unwrap().bytes, 1);
        assert_eq!(Pint::new(1.01).unwrap().bytes, 2);
        assert!(Pint::new(1.0).is_none());
        let p = Pint::new(1.01).unwrap();
        // u = 1: u_int 512, power ln(512)/ln(1.01) = 626.96: 626 or 627.
        assert_eq!(p.encode(1.0, 0), 627);
        assert_eq!(p.encode(1.0, 65535), 626);
        assert!((p.decode(627) - 1.01f64.powf(627.0) / 512.0).abs() < 1e-12);
    }

    #[test]
    fn pint_estimate_tracks_the_exact_formula() {
        // 100G, T = 4160 ns, a 1048-octet packet every 84 ns (line rate) and 100 KB queued:
        // exact u = dt qlen 1e9 / (B T^2) + size 1e9 / (B T) + (T - dt) u / T.
        let mut coin = || 0x1234_5678u32;
        let p = PintPort {
            dt: 84,
            max_rtt: 4160,
            line_rate: Rate::from_gbps(100),
            qlen: 100_000,
            last_size: 1048,
            u: 1.0,
        };
        let b = 12.5e9;
        let exact = 84.0 * 100_000.0 * 1e9 / (b * 4160.0 * 4160.0)
            + 1048.0 * 1e9 / (b * 4160.0)
            + (4160.0 - 84.0) * 1.0 / 4160.0;
        let got = pint_switch_u(&mut coin, p);
        assert!((got - exact).abs() / exact < 0.01, "{got} vs {exact}");
        // Nothing queued, nothing sent before, no history: 0.
        let idle = PintPort {
            qlen: 0,
            last_size: 0,
            u: 0.0,
            ..p
        };
        assert_eq!(pint_switch_u(&mut coin, idle), 0.0);
    }
}
