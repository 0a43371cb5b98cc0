//! Live progress of the long-running commands (`switch`, `send`, `recv`, `appliance`, `sim`).
//!
//! - On a terminal (standard error is a tty), without `--json`: one status line on standard
//!   error, rewritten in place once per interval (rates, frames, drops, feedback, pauses), and
//!   cleared at the end, so the report that follows starts on a clean line.
//! - With `--json`: one JSON object per interval on standard output,
//!   `{"type": "progress", "progress": {"command": ..., "t_ns": ..., ...}}` (`t_ns`: wall time
//!   since the start), and the human report on standard error
//!   ([`super::human_to_stderr`]); the final summary lines stay on standard output.
//! - Otherwise (a pipe or a file without `--json`): nothing, as before.
//!
//! The commands call [`Progress::due`] once per loop iteration (a comparison) and build the
//! status only when it returns true. Rates are over the interval just ended ([`Delta`]).
use std::io::{IsTerminal as _, Write as _};

use units::{Duration, Instant};

use quench_wire::time::Ticker;

/// How often the status is shown.
pub const INTERVAL: Duration = Duration::from_secs(1);

/// How long a command that watches a runtime's thread waits for its end between two looks at
/// whether progress is due (the runtime's loop does the work; its end is seen at once).
pub const WATCH_NAP: std::time::Duration = std::time::Duration::from_millis(250);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Off,
    Line,
    Json,
}

/// The status line / JSON lines of one command (see the module docs).
pub struct Progress {
    command: &'static str,
    mode: Mode,
    start: Instant,
    tick: Ticker,
    last: Instant,
    /// Width of the last status line, to blank it out.
    drawn: usize,
}

impl Progress {
    /// Progress of `command` from `start` (a time of the clock later passed to [`due`]):
    /// JSON lines with `json`, else a status line when standard error is a terminal.
    ///
    /// [`due`]: Progress::due
    pub fn new(command: &'static str, json: bool, start: Instant) -> Progress {
        let mode = if json {
            Mode::Json
        } else if std::io::stderr().is_terminal() {
            Mode::Line
        } else {
            Mode::Off
        };
        Progress {
            command,
            mode,
            start,
            tick: Ticker::new(start, INTERVAL),
            last: start,
            drawn: 0,
        }
    }

    /// True once per interval when progress is shown at all; the caller then calls
    /// [`Progress::show`].
    #[inline]
    pub fn due(&self, now: Instant) -> bool {
        self.mode != Mode::Off && self.tick.due(now)
    }

    /// Shows the status at `now`: `fields` (a JSON object) as a JSON line, or `line` as the
    /// status line. Returns the seconds since the last show (the interval the rates are over).
    pub fn show(
        &mut self,
        now: Instant,
        line: impl FnOnce(f64) -> String,
        fields: impl FnOnce(f64) -> serde_json::Value,
    ) -> std::io::Result<()> {
        let dt = now.saturating_since(self.last).as_secs_f64().max(1e-9);
        let t = now.saturating_since(self.start).as_secs_f64();
        self.last = now;
        self.tick.take(now);
        match self.mode {
            Mode::Off => Ok(()),
            Mode::Json => {
                let mut v = fields(dt);
                if let Some(o) = v.as_object_mut() {
                    o.insert("command".into(), self.command.into());
                    o.insert(
                        "t_ns".into(),
                        now.saturating_since(self.start).as_nanos().into(),
                    );
                }
                let mut out = std::io::stdout().lock();
                writeln!(
                    out,
                    "{}",
                    serde_json::json!({ "type": "progress", "progress": v })
                )?;
                out.flush()
            }
            Mode::Line => {
                let text = format!("{} {:>6.1}s  {}", self.command, t, line(dt));
                let pad = self.drawn.saturating_sub(text.chars().count());
                self.drawn = text.chars().count();
                let mut err = std::io::stderr().lock();
                write!(err, "\r{text}{:pad$}", "")?;
                err.flush()
            }
        }
    }

    /// Clears the status line (before the report is printed).
    pub fn done(&mut self) {
        if self.mode == Mode::Line && self.drawn > 0 {
            let _ = write!(std::io::stderr(), "\r{:w$}\r", "", w = self.drawn);
            self.drawn = 0;
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.done();
    }
}

/// A counter's change between two shows, for rates over the interval.
#[derive(Clone, Copy, Debug, Default)]
pub struct Delta {
    last: u64,
}

impl Delta {
    /// The increase since the last call (0 if the counter went down, e.g. after a reset).
    pub fn step(&mut self, now: u64) -> u64 {
        let d = now.saturating_sub(self.last);
        self.last = now;
        d
    }
}

/// `n` per second over `dt` seconds, in the unit `scale` (1e6 for Mb/s from bits).
pub fn per_s(n: u64, dt: f64, scale: f64) -> f64 {
    n as f64 / dt / scale
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_once_per_interval_and_deltas() {
        let t0 = Instant::from_nanos(5_000_000_000);
        let mut p = Progress::new("test", true, t0);
        assert!(!p.due(t0 + Duration::from_millis(999)));
        assert!(p.due(t0 + INTERVAL));
        // A late show (2.5 intervals) is followed by the next at 3 intervals.
        p.tick.take(t0 + Duration::from_millis(2_500));
        assert!(!p.due(t0 + Duration::from_millis(2_999)));
        assert!(p.due(t0 + Duration::from_secs(3)));
        let off = Progress {
            mode: Mode::Off,
            ..Progress::new("test", true, t0)
        };
        assert!(!off.due(t0 + Duration::from_secs(10)));
        let mut d = Delta::default();
        assert_eq!((d.step(10), d.step(25), d.step(3)), (10, 15, 0));
        assert_eq!(per_s(2_000_000, 2.0, 1e6), 1.0);
    }
}
