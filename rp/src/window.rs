//! The sender's window, as the HPCC ns-3 simulator bounds a flow's bytes in flight beside its
//! rate (`rdma-queue-pair.cc`: `GetWin`, `IsWinBound`; `qbb-net-device.cc` sends from a queue
//! pair only while `!qp->IsWinBound()`).
//!
//! config.txt's `HAS_WIN 1` gives each flow a window of one BDP (with `GLOBAL_T 1` the largest
//! of any host pair, third.cc's `maxBdp`); `VAR_WIN 1` scales it with the flow's current rate:
//! `w = win x rate / max_rate`, at least 1 octet. HPCC, DCTCP, HPCC-PINT and the windowed
//! DCQCN (run.py's `dcqcn_vwin`) run with both; the rate-based DCQCN and TIMELY without.
//! The window follows `m_rate`, the rate the sender paces at, for every algorithm (ns-3's
//! `HpGetCurWin`, which would follow HPCC's reference rate, is never called).

use units::Rate;

/// A flow's window setting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Window {
    /// `m_win`, octets; 0: no window (`HAS_WIN 0`).
    pub bytes: u64,
    /// `m_var_win` (`VAR_WIN`): the window scales with the rate.
    pub var: bool,
}

impl Window {
    /// `GetWin()`: the bound on bytes in flight at `rate`, or `None` without a window.
    pub fn limit(&self, rate: Rate, max_rate: Rate) -> Option<u64> {
        if self.bytes == 0 {
            return None;
        }
        if !self.var {
            return Some(self.bytes);
        }
        // "w = m_win * m_rate.GetBitRate() / m_max_rate.GetBitRate(); if (w == 0) w = 1;"
        // (a u64 product in ns-3; wide here, the same below 2^64).
        let w = u128::from(self.bytes) * u128::from(rate.as_bps())
            / u128::from(max_rate.as_bps().max(1));
        Some((w as u64).max(1))
    }

    /// `IsWinBound()`: with `in_flight` = `snd_nxt - snd_una`, may the flow not send now?
    pub fn is_bound(&self, in_flight: u64, rate: Rate, max_rate: Rate) -> bool {
        self.limit(rate, max_rate).is_some_and(|w| in_flight >= w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_variable_and_none() {
        let line = Rate::from_gbps(100);
        let none = Window::default();
        assert_eq!(none.limit(line, line), None);
        assert!(!none.is_bound(u64::MAX, line, line));
        let fixed = Window {
            bytes: 104_000,
            var: false,
        };
        assert_eq!(fixed.limit(Rate::from_gbps(1), line), Some(104_000));
        let var = Window {
            bytes: 104_000,
            var: true,
        };
        assert_eq!(var.limit(Rate::from_gbps(25), line), Some(26_000));
        // 104000 x 1 / 1e11 truncates to 0: at least one octet.
        assert_eq!(var.limit(Rate::from_bps(1), line), Some(1));
        assert!(var.is_bound(26_000, Rate::from_gbps(25), line));
        assert!(!var.is_bound(25_999, Rate::from_gbps(25), line));
    }
}
