//! Live figures of a single-threaded poll loop (the appliance's, the sender's, the receiver's)
//! for other threads: a handle's `stats()`, a control socket. The loop owns its state, so no
//! other thread reads it: the asker raises `wanted` and waits; the loop, between two
//! iterations, builds the value and hands it over. The loop's cost is one relaxed load per
//! iteration while nobody asks. [`LoopHandle`] runs such a loop on a thread of its own.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;

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

/// A poll loop running on a thread of its own: live stats `S` (asked of the loop), stop, join
/// (its report `R`). The appliance's, the sender's and the receiver's handles.
pub struct LoopHandle<S, R> {
    stop: Arc<AtomicBool>,
    stats: Arc<Published<S>>,
    thread: JoinHandle<anyhow::Result<R>>,
    /// Disconnected when the thread ends (its sender dropped, also on a panic).
    done: mpsc::Receiver<()>,
    notes: Vec<String>,
    /// The loop, in errors ("the sender's loop").
    what: &'static str,
}

impl<S: Clone + Default + Send + 'static, R: Send + 'static> LoopHandle<S, R> {
    /// Starts thread `name`: `prepare` (open the ports, decide; its state and its notes), then
    /// `run` with the stop flag (`stop`, or its own) and the stats to answer. Returns once
    /// `prepare` is done, or with its error (the thread joined: nothing left running).
    pub fn spawn<P: 'static>(
        name: &str,
        what: &'static str,
        stop: Option<Arc<AtomicBool>>,
        prepare: impl FnOnce() -> anyhow::Result<(P, Vec<String>)> + Send + 'static,
        run: impl FnOnce(P, &AtomicBool, &Published<S>) -> anyhow::Result<R> + Send + 'static,
    ) -> anyhow::Result<Self> {
        let stop = stop.unwrap_or_default();
        let stats = Arc::new(Published::new(S::default()));
        let (ready_tx, ready_rx) = mpsc::channel();
        let (done_tx, done) = mpsc::channel::<()>();
        let (s, st) = (stop.clone(), stats.clone());
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let _done = done_tx;
                let (state, notes) = match prepare() {
                    Ok(p) => p,
                    Err(e) => {
                        let _ = ready_tx.send(Err(format!("{e:#}")));
                        return Err(e);
                    }
                };
                let _ = ready_tx.send(Ok(notes));
                run(state, &s, &st)
            })?;
        let notes = match ready_rx.recv() {
            Ok(Ok(notes)) => notes,
            Ok(Err(e)) => {
                let _ = thread.join();
                anyhow::bail!(e)
            }
            Err(_) => anyhow::bail!("{what} panicked at its start"),
        };
        Ok(LoopHandle {
            stop,
            stats,
            thread,
            done,
            notes,
            what,
        })
    }

    /// The loop's figures now (it answers between two iterations; once it has ended, its last
    /// answer).
    pub fn stats(&self) -> S {
        self.stats.ask()
    }

    /// What the start decided, one line each (the idle mode and why, ...).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Whether the loop was told to stop.
    pub fn is_stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Whether the loop has ended (stopped, its duration over, or an error).
    pub fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }

    /// Waits up to `timeout` for the loop to end; true once it has returned (its thread may
    /// still be leaving: [`LoopHandle::join`] waits for that).
    pub fn wait(&self, timeout: std::time::Duration) -> bool {
        let ended = self.done.recv_timeout(timeout);
        matches!(ended, Err(mpsc::RecvTimeoutError::Disconnected))
    }

    /// Tells the loop to stop; [`LoopHandle::join`] waits for it.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Waits until the loop has ended and returns its report, or the error that ended it.
    pub fn join(self) -> anyhow::Result<R> {
        let what = self.what;
        (self.thread.join()).map_err(|_| anyhow::anyhow!("{what} panicked"))?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn a_loop_handle_starts_answers_stops_and_joins() {
        let e = LoopHandle::<u64, ()>::spawn(
            "t",
            "the test loop",
            None,
            || anyhow::bail!("no port"),
            |(), _, _: &Published<u64>| Ok(()),
        );
        assert_eq!(e.err().unwrap().to_string(), "no port");
        let h = LoopHandle::spawn(
            "t",
            "the test loop",
            None,
            || Ok((5u64, vec!["ready".into()])),
            |n, stop: &AtomicBool, stats: &Published<u64>| {
                while !stop.load(Ordering::Relaxed) {
                    if stats.wanted() {
                        stats.publish(n);
                    }
                    std::thread::yield_now();
                }
                Ok(n * 2)
            },
        )
        .unwrap();
        assert_eq!(h.notes(), ["ready"]);
        assert_eq!(h.stats(), 5);
        assert!(!h.wait(std::time::Duration::from_millis(1)) && !h.is_stopped());
        h.stop();
        assert!(h.wait(std::time::Duration::from_secs(60)));
        assert_eq!(h.join().unwrap(), 10);
    }
}
