//! When a station that otherwise never transmits (a receiver: `quench recv`, `quench send
//! --sink`, the appliance in front of one) tells the bridges where it is, with
//! `quench_wire::frame::announce_frame`. A bridge forgets a learned address after its ageing
//! time (802.1Q 8.8.3; Table 8-6: default 300 s, range 10 s to 1,000,000 s), and until it
//! learns it again floods every frame for the station out of every port: each other host gets
//! the flow's frames, with the live fields of their headers. One frame at start and one every
//! [`ANNOUNCE_EVERY`] keep the entry through any ageing time 802.1Q allows, even with a frame
//! lost.
use units::{Duration, Instant};

/// A third of 802.1Q's shortest ageing time (10 s).
pub const ANNOUNCE_EVERY: Duration = Duration::from_secs(3);

/// When the next announcement is due; no clock reads (`now` comes from the driver).
#[derive(Clone, Copy, Debug, Default)]
pub struct Announcer {
    /// `None` until the first announcement.
    next: Option<Instant>,
    sent: u64,
}

impl Announcer {
    /// Whether to announce at `now`: at the first call, then once [`ANNOUNCE_EVERY`] has passed
    /// since the last announcement.
    pub fn due(&mut self, now: Instant) -> bool {
        if self.next.is_some_and(|t| now < t) {
            return false;
        }
        self.next = Some(now + ANNOUNCE_EVERY);
        self.sent += 1;
        true
    }

    /// When [`Announcer::due`] next says yes; `None` before the first announcement (due at
    /// once).
    pub fn next_deadline(&self) -> Option<Instant> {
        self.next
    }

    /// Announcements made.
    pub fn sent(&self) -> u64 {
        self.sent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn announces_at_start_then_once_every_interval() {
        let mut a = Announcer::default();
        let t0 = Instant::from_nanos(5);
        assert!(a.due(t0));
        assert!(!a.due(t0));
        assert_eq!(a.next_deadline(), Some(t0 + ANNOUNCE_EVERY));
        let sent: u64 = (1..=1000)
            .map(|ms| u64::from(a.due(t0 + Duration::from_millis(10 * ms))))
            .sum();
        // 10 s after the first: at 3, 6 and 9 s.
        assert_eq!((sent, a.sent()), (3, 4));
        assert!(ANNOUNCE_EVERY + ANNOUNCE_EVERY + ANNOUNCE_EVERY <= Duration::from_secs(10));
    }
}
