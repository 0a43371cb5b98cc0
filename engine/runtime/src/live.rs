//! Live figures of a single-threaded poll loop (the appliance's, the sender's, the receiver's)
//! for other threads: a handle's `stats()`, a control socket. The loop owns its state, so no
//! other thread reads it: the asker raises `wanted` and waits; the loop, between two
//! iterations, builds the value and hands it over. The loop's cost is one relaxed load per
//! iteration while nobody asks.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};

/// The loop's answers (see the module docs).
pub struct Published<T> {
    wanted: AtomicBool,
    /// (generation, the last value).
    latest: Mutex<(u64, T)>,
    fresh: Condvar,
}

/// How long an asker waits for the loop's value before it takes the last one (the loop has
/// ended, or is descheduled).
pub const ANSWER_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

impl<T: Clone> Published<T> {
    /// Answers `first` until the loop publishes.
    pub fn new(first: T) -> Self {
        Published {
            wanted: AtomicBool::new(false),
            latest: Mutex::new((0, first)),
            fresh: Condvar::new(),
        }
    }

    /// Asker: a value the loop made after this call, or the last one.
    pub fn ask(&self) -> T {
        let g = self.latest.lock().unwrap_or_else(PoisonError::into_inner);
        let seen = g.0;
        self.wanted.store(true, Ordering::Release);
        let (g, _) = self
            .fresh
            .wait_timeout_while(g, ANSWER_WAIT, |l| l.0 == seen)
            .unwrap_or_else(PoisonError::into_inner);
        g.1.clone()
    }

    /// Loop: true when a value is wanted (then call [`Published::publish`]).
    #[inline]
    pub fn wanted(&self) -> bool {
        self.wanted.load(Ordering::Relaxed) && self.wanted.swap(false, Ordering::Acquire)
    }

    /// Loop: hands `value` to the askers.
    pub fn publish(&self, value: T) {
        let mut g = self.latest.lock().unwrap_or_else(PoisonError::into_inner);
        g.0 += 1;
        g.1 = value;
        self.fresh.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn an_asker_gets_what_the_loop_publishes_after_it_asked() {
        let p = Arc::new(Published::new(0u64));
        let asker = {
            let p = p.clone();
            std::thread::spawn(move || p.ask())
        };
        let mut answered = 0;
        while !asker.is_finished() {
            if p.wanted() {
                answered += 1;
                p.publish(41 + answered);
            }
            std::thread::yield_now();
        }
        assert_eq!(asker.join().unwrap(), 42);
        assert_eq!(answered, 1);
        assert!(!p.wanted(), "nobody asks any more");
    }
}
