//! Worker threads: one per core, pinned, polling in a run-to-completion loop until told to
//! stop. The stop flag is the only shared state a worker reads every iteration (a relaxed
//! load); everything else it owns.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use units::Instant;

use quench_wire::time::Clock;

/// The cores this process may run on, in order (falls back to core 0 when unknown).
pub fn cores() -> Vec<core_affinity::CoreId> {
    let c = core_affinity::get_core_ids().unwrap_or_default();
    if c.is_empty() {
        vec![core_affinity::CoreId { id: 0 }]
    } else {
        c
    }
}

/// Spawns a thread named `name` pinned to the `index`-th usable core (wrapping around).
pub fn spawn_pinned<T: Send + 'static>(
    index: usize,
    name: String,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::io::Result<JoinHandle<T>> {
    let cores = cores();
    let core = cores[index % cores.len()];
    std::thread::Builder::new().name(name).spawn(move || {
        // Pinning can fail in a restricted cpuset; the worker then still runs, unpinned.
        let _ = core_affinity::set_for_current(core);
        f()
    })
}

/// Moves the calling thread (and the threads it spawns afterwards) off the cores that
/// [`spawn_pinned`] gives indices `0..workers`, onto the usable cores left, if any are left;
/// else it stays where it may run. For a process's threads that only wait and report (the
/// switch's main and control-socket threads): each wake-up on a worker's core preempts the
/// worker for tens of microseconds, the frames it holds waiting meanwhile. Returns whether the
/// thread moved.
pub fn keep_off_workers(workers: usize) -> bool {
    let rest: Vec<_> = cores().into_iter().skip(workers).collect();
    if rest.is_empty() {
        return false;
    }
    // Safety: a zeroed cpu_set_t is an empty set; CPU_SET writes inside it (ids come from the
    // kernel's own affinity mask, below CPU_SETSIZE); sched_setaffinity reads `size_of` bytes.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for c in &rest {
            libc::CPU_SET(c.id, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// Polls `step(state, now)` until `stop` is set, reading the clock once per iteration. `step`
/// returns the work it did; an idle iteration backs off as `idle` says, up to
/// `deadline(state, now)`, when the loop next has work that no received frame announces
/// (`None`: none known).
pub fn run_loop<S>(
    clock: &Clock,
    stop: &AtomicBool,
    idle: &mut Backoff,
    state: &mut S,
    mut step: impl FnMut(&mut S, Instant) -> usize,
    deadline: impl Fn(&S, Instant) -> Option<Instant>,
) {
    while !stop.load(Ordering::Relaxed) {
        let now = clock.now();
        let work = step(state, now);
        idle.after(work, || {
            deadline(state, now).map(|t| t.saturating_since(now))
        });
    }
}

/// The shortest sleep or wait in the kernel worth its system call and wake-up: a deadline
/// nearer than this yields instead.
pub const WAIT_MIN: std::time::Duration = std::time::Duration::from_micros(5);

/// The longest wait in the kernel of a loop with nothing due (`--idle wait`): how late it may
/// notice the stop flag, a signal's flag or a request on the control socket.
pub const IDLE_WAIT_MAX: std::time::Duration = std::time::Duration::from_millis(10);

/// What a poll loop does once it has been idle for [`Backoff::SPINS`] iterations in a row,
/// decided for one loop (before that it always spins, with a CPU relax hint but in
/// [`IdleMode::Spin`]: poll mode, a frame that arrives is seen within a microsecond).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IdleMode {
    /// Yield the CPU (`sched_yield`) on every further idle iteration. For a shared CPU: when
    /// busy-polling processes outnumber cores (the 2-core testbed runs a switch, two senders and
    /// a receiver), a loop that only spins holds the CPU its own frames are waiting for (the
    /// peer that would produce them cannot run). A yield costs a system call, about a
    /// microsecond, when no other task wants the CPU; when one does, the loop waits out that
    /// task's slice with frames in its rings.
    #[default]
    Yield,
    /// Keep spinning, never give the CPU up: for a loop with a core of its own (as DPDK's
    /// lcores), where a yield can only hand the CPU to someone whose time slice then delays
    /// the frames that arrive meanwhile. [`others_on`] says when a core is one's own. Its idle
    /// iterations carry no CPU relax hint (PAUSE), as DPDK's polling loops do not: in a VM
    /// the host counts PAUSEs executed close together (AMD's pause filter, Intel's pause-loop
    /// exiting) and stops a vCPU that runs such a loop on the grounds that it waits for a
    /// lock held by a descheduled vCPU; on the testbed VM a loop of clock reads with a PAUSE
    /// in each iteration had hundreds of 5-10 us stops a second that the same loop without
    /// it did not have (docs/design.md, "Switch runtime"; scripts/bench/spin-gaps.c).
    Spin,
    /// Sleep this long (at most until the loop's next deadline) on every further idle
    /// iteration: a yield returns at once when nobody else wants this CPU, so a yielding loop
    /// never lets its CPU go idle, and the scheduler only moves a runnable task there (from a
    /// busier CPU) at its periodic balancing, not at the moment it would go idle. On the
    /// 2-CPU testbed of scripts/testbed/appliance.sh the switch's yielding loop held one CPU while the
    /// appliance, the iperf3 senders and their softirqs queued on the other. The price is the
    /// sleep itself: a frame that arrives meanwhile waits up to the sleep (plus the timer's
    /// wake-up) in the receive ring.
    Sleep(std::time::Duration),
    /// Wait in the kernel until a frame arrives on the loop's ports or its next deadline, at
    /// most [`IDLE_WAIT_MAX`] ([`RxWait`]): its CPU goes idle as with a sleep, and a frame is
    /// seen at once. Only a loop that has its ports' descriptors can; one without any yields.
    Wait,
}

impl IdleMode {
    /// What a loop in this mode does when idle, for its start-up line: "spins", "sleeps 50us".
    pub fn what(&self) -> String {
        match self {
            IdleMode::Yield => "yields its CPU".into(),
            IdleMode::Spin => "spins".into(),
            IdleMode::Sleep(d) => format!("sleeps {d:?}"),
            IdleMode::Wait => "waits in the kernel for a frame".into(),
        }
    }
}

/// `--idle`, the one idle policy of every poll loop (the switch's workers, the appliance's
/// loop, `quench send`'s and `quench recv`'s): `auto`, `spin`, `yield`, `wait`, or a duration
/// (`50us`: sleep that long). `auto` spins where the loop's core is its own (no other
/// process's thread may run there: a CPU shielded by affinity, as scripts/testbed/cpu-shield.sh does,
/// or isolated) and elsewhere does what the loop finds best on a shared CPU
/// ([`Idle::for_workers`], [`Idle::for_this_thread`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Idle {
    #[default]
    Auto,
    Fixed(IdleMode),
}

/// The values `--idle` takes, for help texts and errors.
pub const IDLE_VALUES: &str = "auto|spin|yield|wait|DURATION";

impl std::str::FromStr for Idle {
    type Err = String;

    fn from_str(s: &str) -> Result<Idle, String> {
        Ok(match s.trim() {
            "auto" => Idle::Auto,
            "yield" => Idle::Fixed(IdleMode::Yield),
            "spin" => Idle::Fixed(IdleMode::Spin),
            "wait" => Idle::Fixed(IdleMode::Wait),
            "sleep" => {
                return Err(
                    "`sleep` takes its length now: a duration, e.g. `--idle 100us` \
                            (what `--idle sleep` slept at most)"
                        .into(),
                )
            }
            d => {
                let d = units::Duration::parse(d).map_err(|e| {
                    format!("expected auto, spin, yield, wait or a duration such as 50us: {e}")
                })?;
                if d == units::Duration::ZERO {
                    return Err(
                        "a sleep of 0: write `--idle yield` to give the CPU up without \
                                sleeping"
                            .into(),
                    );
                }
                Idle::Fixed(IdleMode::Sleep(std::time::Duration::from_nanos(
                    d.as_nanos(),
                )))
            }
        })
    }
}

impl std::fmt::Display for Idle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Idle::Auto => f.write_str("auto"),
            Idle::Fixed(IdleMode::Yield) => f.write_str("yield"),
            Idle::Fixed(IdleMode::Spin) => f.write_str("spin"),
            Idle::Fixed(IdleMode::Wait) => f.write_str("wait"),
            Idle::Fixed(IdleMode::Sleep(d)) => {
                write!(f, "{}", units::Duration::from_nanos(d.as_nanos() as u64))
            }
        }
    }
}

impl Idle {
    /// The mode of each of `workers` loops pinned by [`spawn_pinned`] (indices `0..workers`),
    /// and why. A fixed policy is every worker's; `auto` spins a worker whose core is its own,
    /// that is when the process has a core for its waiting threads besides one per worker
    /// ([`keep_off_workers`]) and no other process's user-space thread may run on the worker's
    /// core ([`others_on`]), else `shared`. Decided once, at start-up: a process started later
    /// with every CPU allowed may share a spinning worker's core.
    pub fn for_workers(self, workers: usize, shared: IdleMode) -> Vec<(IdleMode, String)> {
        let Idle::Auto = self else {
            return vec![(self.fixed(), "as --idle says".into()); workers];
        };
        let cores = cores();
        if cores.len() <= workers {
            let why = format!(
                "{} CPUs for {workers} workers and the waiting threads",
                cores.len()
            );
            return vec![(shared, why); workers];
        }
        let threads = match tenants() {
            Ok(t) => t,
            Err(e) => return vec![(shared, format!("reading /proc: {e}")); workers],
        };
        cores[..workers]
            .iter()
            .map(|c| match others_on(c.id, std::process::id(), &threads) {
                0 => (
                    IdleMode::Spin,
                    format!("no other process may run on CPU {}", c.id),
                ),
                n => (
                    shared,
                    format!("{n} threads of other processes may run on CPU {}", c.id),
                ),
            })
            .collect()
    }

    /// The mode of a loop on the calling thread, not pinned (it runs wherever its affinity
    /// lets it), and why: a fixed policy, or under `auto` spin when no other process's
    /// user-space thread may run on any CPU the thread may run on, else `shared`.
    pub fn for_this_thread(self, shared: IdleMode) -> (IdleMode, String) {
        let Idle::Auto = self else {
            return (self.fixed(), "as --idle says".into());
        };
        let threads = match tenants() {
            Ok(t) => t,
            Err(e) => return (shared, format!("reading /proc: {e}")),
        };
        let cpus: Vec<usize> = cores().iter().map(|c| c.id).collect();
        let others: usize = cpus
            .iter()
            .map(|&c| others_on(c, std::process::id(), &threads))
            .sum();
        let list = cpus
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(",");
        if others == 0 {
            (
                IdleMode::Spin,
                format!("no other process may run on CPUs {list}"),
            )
        } else {
            (shared, format!("other processes may run on CPUs {list}"))
        }
    }

    fn fixed(self) -> IdleMode {
        match self {
            Idle::Fixed(m) => m,
            Idle::Auto => IdleMode::default(),
        }
    }
}

/// A poll loop's idle back-off in one [`IdleMode`]: the first [`Backoff::SPINS`] idle
/// iterations in a row spin, every further one does what the mode says; an iteration that did
/// work starts the count again. Made in the loop's own thread (a sleeping or waiting mode sets
/// that thread's timer slack).
#[derive(Debug)]
pub struct Backoff {
    run: u32,
    mode: IdleMode,
    /// [`IdleMode::Wait`]'s waiter on the loop's receive descriptors.
    wait: Option<RxWait>,
    /// The longest wait in the kernel with nothing due.
    max_wait: std::time::Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff::new(IdleMode::default(), [])
    }
}

/// Sets the calling thread's timer slack to 1 us (prctl(2) PR_SET_TIMERSLACK): the default
/// 50 us would make every short sleep of a poll loop overshoot by up to that much.
pub fn fine_timer_slack() {
    // Safety: PR_SET_TIMERSLACK takes one integer argument and changes only this thread's
    // timer slack (prctl(2)).
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1_000 as libc::c_ulong) };
}

impl Backoff {
    /// Idle iterations in a row that spin before the loop does what its mode says.
    pub const SPINS: u32 = 64;

    /// A loop in `mode` that has not been idle yet; `fds` are its ports' receive descriptors
    /// ([`crate::Port::wait_handle`]), which [`IdleMode::Wait`] waits on (with none it yields).
    pub fn new(mode: IdleMode, fds: impl IntoIterator<Item = std::os::fd::RawFd>) -> Self {
        if matches!(mode, IdleMode::Sleep(_) | IdleMode::Wait) {
            fine_timer_slack();
        }
        let wait = match mode {
            IdleMode::Wait => RxWait::new(fds),
            _ => None,
        };
        Backoff {
            run: 0,
            mode,
            wait,
            max_wait: IDLE_WAIT_MAX,
        }
    }

    /// With `d` instead of [`IDLE_WAIT_MAX`] as the longest wait in the kernel.
    pub fn with_max_wait(self, d: std::time::Duration) -> Self {
        Backoff {
            max_wait: d,
            ..self
        }
    }

    /// The mode.
    pub fn mode(&self) -> IdleMode {
        self.mode
    }

    /// Whether the loop waits in the kernel when idle ([`IdleMode::Wait`] with descriptors).
    pub fn waits(&self) -> bool {
        self.wait.is_some()
    }

    /// Call once per iteration with the work it did (frames moved, timers run); `next` gives
    /// the time to the loop's next deadline (`None`: none known), asked only when the loop
    /// rests.
    pub fn after(&mut self, work: usize, next: impl FnOnce() -> Option<units::Duration>) {
        if work > 0 {
            self.run = 0;
        } else if self.idle() {
            self.rest(next());
        }
    }

    /// Counts one idle iteration: the first [`Backoff::SPINS`] in a row spin with a CPU relax
    /// hint ([`IdleMode::Spin`]: every one, with none). True when the loop is past them and
    /// should [`Backoff::rest`].
    fn idle(&mut self) -> bool {
        if self.mode == IdleMode::Spin {
            return false;
        }
        if self.run < Self::SPINS {
            self.run += 1;
            std::hint::spin_loop();
            return false;
        }
        true
    }

    /// Does what the mode says once, for at most `next` (the time to the loop's next deadline;
    /// `None`: none known): yields, sleeps, or waits in the kernel for a frame (at most
    /// [`IDLE_WAIT_MAX`] unless [`Backoff::with_max_wait`] says otherwise); a deadline nearer than [`WAIT_MIN`] yields instead.
    fn rest(&mut self, next: Option<units::Duration>) {
        let cap = match self.mode {
            IdleMode::Sleep(d) => d,
            IdleMode::Wait if self.wait.is_some() => self.max_wait,
            IdleMode::Spin => return,
            IdleMode::Yield | IdleMode::Wait => return std::thread::yield_now(),
        };
        let d = match next.map(|n| std::time::Duration::from_nanos(n.as_nanos())) {
            Some(n) if n < WAIT_MIN => return std::thread::yield_now(),
            Some(n) => n.min(cap),
            None => cap,
        };
        if let Some(w) = self.wait.as_mut() {
            w.wait(d);
        } else {
            std::thread::sleep(d);
        }
    }
}

/// CPU ids in the kernel's list format (`0-3,8,10-11`, as in /proc/PID/status
/// `Cpus_allowed_list` and /sys/devices/system/cpu/online); `None` if malformed.
pub fn parse_cpu_list(s: &str) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (a, b): (usize, usize) = (a.parse().ok()?, b.parse().ok()?);
        // A CPU id is below the kernel's NR_CPUS (8192 at most on x86-64).
        if b < a || b >= 1 << 16 {
            return None;
        }
        out.extend(a..=b);
    }
    Some(out)
}

/// One thread as [`others_on`] sees it: its process, whether it is a kernel thread, and the
/// CPUs it may run on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tenant {
    pub pid: u32,
    pub kernel: bool,
    pub cpus: Vec<usize>,
}

/// The user-space threads of processes other than `own_pid` that may run on `cpu`.
///
/// This is the test behind `quench switch --idle auto` (the default): a worker spins
/// ([`IdleMode::Spin`]) when its core is its own, that is when no other process's user-space
/// thread may be scheduled there by its affinity: the CPU was shielded (scripts/testbed/cpu-shield.sh,
/// `cset shield`, systemd's `CPUAffinity=`, a `taskset` around everything else) or isolated
/// (`isolcpus=`, which takes it out of every default affinity). Kernel threads do not count:
/// the per-CPU ones (ksoftirqd, per-CPU workqueue workers) are allowed on every CPU whatever
/// anyone's affinity, and one that wakes preempts a spinning worker (user space is always
/// preemptible) as it would a yielding one.
pub fn others_on(cpu: usize, own_pid: u32, threads: &[Tenant]) -> usize {
    threads
        .iter()
        .filter(|t| t.pid != own_pid && !t.kernel && t.cpus.contains(&cpu))
        .count()
}

/// The threads of the running system, from /proc/PID/task/TID/status (a thread that exits
/// meanwhile is left out). An error when /proc cannot be listed, or when the list lacks init
/// (pid 1): /proc mounted with `hidepid` shows a process only its own, and a partial list would
/// make every core look like the caller's own.
pub fn tenants() -> std::io::Result<Vec<Tenant>> {
    let mut out = Vec::new();
    for p in std::fs::read_dir("/proc")?.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(tasks) = std::fs::read_dir(p.path().join("task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let Ok(status) = std::fs::read_to_string(t.path().join("status")) else {
                continue;
            };
            if let Some(t) = tenant(pid, &status) {
                out.push(t);
            }
        }
    }
    if !out.iter().any(|t| t.pid == 1) {
        return Err(std::io::Error::other(
            "/proc does not show init (pid 1): other processes' threads are hidden",
        ));
    }
    Ok(out)
}

/// One thread from its /proc status text: `Kthread:` (kernel 6.0 and later) or, before, a
/// thread of kthreadd (PPid 2) or kthreadd itself; `Cpus_allowed_list:`.
fn tenant(pid: u32, status: &str) -> Option<Tenant> {
    let field = |k: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(k)?.strip_prefix(':').map(str::trim))
    };
    let kernel = match field("Kthread") {
        Some(k) => k == "1",
        None => pid == 2 || field("PPid") == Some("2"),
    };
    Some(Tenant {
        pid,
        kernel,
        cpus: parse_cpu_list(field("Cpus_allowed_list")?)?,
    })
}

/// Waiting in the kernel for frames: poll(2) on ports' wait handles ([`Port::wait_handle`])
/// with a timeout, so that a loop with nothing to do takes no CPU until a frame arrives or the
/// timeout (its next release or timer) passes, the way the kernel's AF_XDP sample (xdpsock's
/// `-p`) waits. Against a timed sleep the frame is seen at once; against a yield the CPU goes
/// idle, so the scheduler may run a waiting task there at once. The price is a wake-up through
/// the scheduler per wait that a frame ends (a few microseconds, paid by the frame).
///
/// [`Port::wait_handle`]: crate::Port::wait_handle
#[derive(Debug)]
pub struct RxWait {
    fds: Vec<libc::pollfd>,
}

impl RxWait {
    /// A waiter on `fds` (each port's [`crate::Port::wait_handle`]); `None` when there is
    /// none: nothing would end a wait but its timeout, so the loop had better sleep.
    pub fn new(fds: impl IntoIterator<Item = std::os::fd::RawFd>) -> Option<RxWait> {
        let fds: Vec<libc::pollfd> = fds
            .into_iter()
            .map(|fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        (!fds.is_empty()).then_some(RxWait { fds })
    }

    /// Waits until a descriptor is readable or `timeout` passes (a signal ends it early too).
    /// True when a descriptor is readable.
    pub fn wait(&mut self, timeout: std::time::Duration) -> bool {
        let ts = libc::timespec {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // Safety: `fds` is a live array of `len` pollfd structures that ppoll writes `revents`
        // of; `ts` is a valid timespec; a null signal mask leaves the thread's mask as it is.
        let n = unsafe {
            libc::ppoll(
                self.fds.as_mut_ptr(),
                self.fds.len() as libc::nfds_t,
                &ts,
                std::ptr::null(),
            )
        };
        n > 0
    }
}

/// Installs SIGINT and SIGTERM handlers that set the returned flag (and nothing else).
pub fn stop_on_signals() -> std::io::Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGINT, stop.clone())?;
    signal_hook::flag::register(signal_hook::consts::SIGTERM, stop.clone())?;
    Ok(stop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinned_loop_runs_until_stopped() {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let h = spawn_pinned(0, "t".into(), move || {
            let clock = Clock::monotonic();
            let mut n = 0u64;
            run_loop(
                &clock,
                &s,
                &mut Backoff::default(),
                &mut n,
                |n, _| {
                    *n += 1;
                    if *n == 1000 {
                        s.store(true, Ordering::Relaxed);
                    }
                    1
                },
                |_, _| None,
            );
            n
        })
        .unwrap();
        assert_eq!(h.join().unwrap(), 1000);
        assert!(stop.load(Ordering::Relaxed));
    }

    #[test]
    fn rx_wait_ends_at_its_timeout_or_when_a_descriptor_is_readable() {
        use std::os::fd::AsRawFd;
        assert!(RxWait::new([]).is_none());
        let (a, b) = std::os::unix::net::UnixDatagram::pair().unwrap();
        let mut w = RxWait::new([b.as_raw_fd()]).unwrap();
        assert!(!w.wait(std::time::Duration::from_micros(100)));
        a.send(b"frame").unwrap();
        assert!(w.wait(std::time::Duration::from_secs(5)));
        // Still readable until read; once read, the wait runs to its timeout again.
        assert!(w.wait(std::time::Duration::from_secs(5)));
        b.recv(&mut [0u8; 16]).unwrap();
        assert!(!w.wait(std::time::Duration::ZERO));
    }

    /// A loop with nothing but frames to wait for (no deadline, a wait of an hour) runs only
    /// because each frame ends its wait: three frames sent from another thread, one at a time
    /// after the loop took the one before, are all taken.
    #[test]
    fn a_waiting_loop_is_woken_by_each_frame() {
        use std::os::fd::AsRawFd;
        use std::sync::mpsc;
        let (tx, rx) = std::os::unix::net::UnixDatagram::pair().unwrap();
        rx.set_nonblocking(true).unwrap();
        let (took, took_rx) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let h = std::thread::spawn(move || {
            let clock = Clock::monotonic();
            let mut idle = Backoff::new(IdleMode::Wait, [rx.as_raw_fd()])
                .with_max_wait(std::time::Duration::from_secs(3600));
            assert!(idle.waits());
            let mut n = 0u32;
            run_loop(
                &clock,
                &s,
                &mut idle,
                &mut n,
                |n, _| {
                    if rx.recv(&mut [0u8; 8]).is_err() {
                        return 0;
                    }
                    *n += 1;
                    took.send(*n).unwrap();
                    if *n == 3 {
                        s.store(true, Ordering::Relaxed);
                    }
                    1
                },
                |_, _| None,
            );
            n
        });
        for k in 1..=3 {
            tx.send(b"frame").unwrap();
            assert_eq!(took_rx.recv().unwrap(), k);
        }
        assert_eq!(h.join().unwrap(), 3);
        assert!(stop.load(Ordering::Relaxed));
    }

    #[test]
    fn idle_spins_then_yields_and_work_resets_it() {
        let mut idle = Backoff::default();
        for _ in 0..Backoff::SPINS {
            idle.after(0, || None);
        }
        assert_eq!(idle.run, Backoff::SPINS);
        // Past the spin budget it yields and stays there until work is done.
        idle.after(0, || None);
        assert_eq!(idle.run, Backoff::SPINS);
        idle.after(3, || None);
        assert_eq!(idle.run, 0);
        // A spinning one never leaves the spin: it needs no count.
        let mut spin = Backoff::new(IdleMode::Spin, []);
        for _ in 0..Backoff::SPINS + 3 {
            assert!(!spin.idle());
        }
        assert_eq!(spin.run, 0);
        // A sleeping one spins the same budget, then stays past it (sleeping) until work.
        let mut nap = Backoff::new(IdleMode::Sleep(std::time::Duration::from_micros(1)), []);
        for _ in 0..Backoff::SPINS + 2 {
            nap.after(0, || Some(units::Duration::ZERO));
        }
        assert_eq!(nap.run, Backoff::SPINS);
        nap.after(1, || None);
        assert_eq!(nap.run, 0);
        // Waiting needs descriptors: without any the loop yields.
        assert!(!Backoff::new(IdleMode::Wait, []).waits());
    }

    /// `--idle` reads and writes the same values on every loop; the appliance's old `sleep`
    /// and a sleep of nothing are refused with the form to write instead.
    #[test]
    fn idle_values_parse_and_print_back() {
        for v in ["auto", "spin", "yield", "wait", "50us", "750us"] {
            let i: Idle = v.parse().unwrap();
            assert_eq!(i.to_string(), v);
        }
        assert_eq!(
            "100us".parse::<Idle>().unwrap(),
            Idle::Fixed(IdleMode::Sleep(std::time::Duration::from_micros(100)))
        );
        let e = "sleep".parse::<Idle>().unwrap_err();
        assert!(e.contains("--idle 100us"), "{e}");
        let e = "0us".parse::<Idle>().unwrap_err();
        assert!(e.contains("--idle yield"), "{e}");
        let e = "fast".parse::<Idle>().unwrap_err();
        assert!(e.contains("auto, spin, yield, wait or a duration"), "{e}");
        // A fixed policy is every loop's, whatever the cores.
        let fixed = Idle::Fixed(IdleMode::Wait);
        assert_eq!(fixed.for_this_thread(IdleMode::Yield).0, IdleMode::Wait);
        let w = fixed.for_workers(3, IdleMode::Yield);
        assert!(w
            .iter()
            .all(|(m, why)| *m == IdleMode::Wait && why == "as --idle says"));
    }

    #[test]
    fn cpu_lists_parse_as_the_kernel_writes_them() {
        assert_eq!(parse_cpu_list("0-1\n"), Some(vec![0, 1]));
        assert_eq!(parse_cpu_list("0,2-4,7"), Some(vec![0, 2, 3, 4, 7]));
        assert_eq!(parse_cpu_list("3"), Some(vec![3]));
        assert_eq!(parse_cpu_list(""), Some(vec![]));
        assert_eq!(parse_cpu_list("4-2"), None);
        assert_eq!(parse_cpu_list("a-b"), None);
        assert_eq!(parse_cpu_list("0-4294967295"), None);
    }

    #[test]
    fn a_core_is_a_workers_own_when_no_other_process_may_run_there() {
        let st = |kthread: &str, ppid: u32, cpus: &str| {
            format!("Name:\tx\n{kthread}PPid:\t{ppid}\nCpus_allowed_list:\t{cpus}\n")
        };
        // The switch itself (pid 10, its workers and waiting threads), a shielded shell, a
        // per-CPU kernel thread on CPU 0 (with and without the Kthread field), a user thread
        // allowed everywhere.
        let mut threads = vec![
            tenant(10, &st("", 1, "0-1")).unwrap(),
            tenant(10, &st("", 1, "0")).unwrap(),
            tenant(20, &st("Kthread:\t0\n", 1, "1")).unwrap(),
            tenant(30, &st("Kthread:\t1\n", 2, "0")).unwrap(),
            tenant(31, &st("", 2, "0")).unwrap(),
        ];
        assert!(threads[3].kernel && threads[4].kernel && !threads[2].kernel);
        assert_eq!(others_on(0, 10, &threads), 0);
        assert_eq!(others_on(1, 10, &threads), 1);
        threads.push(tenant(40, &st("Kthread:\t0\n", 1, "0-1")).unwrap());
        assert_eq!(others_on(0, 10, &threads), 1);
        // A status without an affinity line is not a tenant (not guessed as allowed anywhere).
        assert_eq!(tenant(50, "Name:\tx\n"), None);
    }
}
