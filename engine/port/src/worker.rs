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

/// Polls `step(now)` until `stop` is set, reading the clock once per iteration. `step` returns
/// the work it did; idle iterations back off as [`Idle`] says.
pub fn run_loop(
    clock: &Clock,
    stop: &AtomicBool,
    mut idle: Idle,
    mut step: impl FnMut(Instant) -> usize,
) {
    while !stop.load(Ordering::Relaxed) {
        let now = clock.now();
        idle.after(step(now));
    }
}

/// [`run_loop`] for a loop that may wait in the kernel: past [`Idle::SPINS`] idle iterations in
/// a row it waits on `wait` until `deadline(state, now)` (at most `max`; `None`: `max`), or
/// yields when that is less than [`WAIT_MIN`] away (a PFC pause, a release due at once).
pub fn run_loop_waiting<S>(
    clock: &Clock,
    stop: &AtomicBool,
    wait: &mut RxWait,
    max: std::time::Duration,
    state: &mut S,
    mut step: impl FnMut(&mut S, Instant) -> usize,
    deadline: impl Fn(&S, Instant) -> Option<Instant>,
) {
    let mut idle = Idle::new(IdleMode::Wait);
    while !stop.load(Ordering::Relaxed) {
        let now = clock.now();
        if !idle.past_spins(step(state, now)) {
            continue;
        }
        let d = deadline(state, now).map_or(max, |t| {
            std::time::Duration::from_nanos(t.saturating_since(now).as_nanos()).min(max)
        });
        if d >= WAIT_MIN {
            wait.wait(d);
        } else {
            std::thread::yield_now();
        }
    }
}

/// The shortest wait in the kernel worth its system call and wake-up ([`run_loop_waiting`]).
pub const WAIT_MIN: std::time::Duration = std::time::Duration::from_micros(5);

/// The longest wait in the kernel of a loop with nothing queued (`--idle wait`, the switch's
/// workers and the appliance's loop): how late it may notice the stop flag, a signal's flag or
/// a request on the control socket.
pub const IDLE_WAIT_MAX: std::time::Duration = std::time::Duration::from_millis(10);

/// What a poll loop does once it has been idle for [`Idle::SPINS`] iterations in a row (before
/// that it always spins, with a CPU relax hint but in [`IdleMode::Spin`]: poll mode, a frame
/// that arrives is seen within a microsecond).
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
    /// it did not have (docs/design.md, "Switch runtime"; scripts/spin-gaps.c).
    Spin,
    /// Sleep this long on every further idle iteration: a yield returns at once when nobody
    /// else wants this CPU, so a yielding loop never lets its CPU go idle, and the scheduler
    /// only moves a runnable task there (from a busier CPU) at its periodic balancing, not at
    /// the moment it would go idle. On the 2-CPU testbed of scripts/appliance.sh the switch's
    /// yielding loop held one CPU while the appliance, the iperf3 senders and their softirqs
    /// queued on the other. The price is the sleep itself: a frame that arrives meanwhile
    /// waits up to the sleep (plus the timer's wake-up) in the receive ring. Call
    /// [`fine_timer_slack`] in the loop's thread for sleeps of tens of microseconds.
    Sleep(std::time::Duration),
    /// Wait in the kernel until a frame arrives on the loop's ports or its next deadline
    /// ([`RxWait`], [`run_loop_waiting`]): its CPU goes idle as with a sleep, and a frame is seen
    /// at once. Only a loop that has its ports' descriptors can; [`Idle::after`], which has
    /// none, yields.
    Wait,
}

/// Idle back-off for poll loops: the first [`Idle::SPINS`] idle iterations in a row spin, every
/// further one does what its [`IdleMode`] says; an iteration that did work starts the count
/// again.
#[derive(Debug, Default)]
pub struct Idle {
    run: u32,
    mode: IdleMode,
}

/// Sets the calling thread's timer slack to 1 us (prctl(2) PR_SET_TIMERSLACK): the default
/// 50 us would make every short sleep of a poll loop overshoot by up to that much.
pub fn fine_timer_slack() {
    // Safety: PR_SET_TIMERSLACK takes one integer argument and changes only this thread's
    // timer slack (prctl(2)).
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1_000 as libc::c_ulong) };
}

impl Idle {
    /// Idle iterations in a row that spin before the loop does what its mode says.
    pub const SPINS: u32 = 64;

    /// A loop that has not been idle yet.
    pub fn new(mode: IdleMode) -> Self {
        Idle { run: 0, mode }
    }

    /// Call once per iteration with the work it did (frames moved, timers run).
    pub fn after(&mut self, work: usize) {
        if !self.past_spins(work) {
            return;
        }
        match self.mode {
            IdleMode::Sleep(d) => std::thread::sleep(d),
            IdleMode::Yield | IdleMode::Spin | IdleMode::Wait => std::thread::yield_now(),
        }
    }

    /// Counts one iteration: work starts the idle run again; the first [`Idle::SPINS`] idle
    /// iterations in a row spin with a CPU relax hint ([`IdleMode::Spin`]: every one, with
    /// none). True when the loop is past them and does what its mode says.
    fn past_spins(&mut self, work: usize) -> bool {
        if work > 0 {
            self.run = 0;
            return false;
        }
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
/// thread may be scheduled there by its affinity: the CPU was shielded (scripts/cpu-shield.sh,
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

/// Waiting in the kernel for frames: poll(2) on ports' receive descriptors ([`Port::rx_fds`])
/// with a timeout, so that a loop with nothing to do takes no CPU until a frame arrives or the
/// timeout (its next release or timer) passes, the way the kernel's AF_XDP sample (xdpsock's
/// `-p`) waits. Against a timed sleep the frame is seen at once; against a yield the CPU goes
/// idle, so the scheduler may run a waiting task there at once. The price is a wake-up through
/// the scheduler per wait that a frame ends (a few microseconds, paid by the frame).
///
/// [`Port::rx_fds`]: crate::Port::rx_fds
#[derive(Debug)]
pub struct RxWait {
    fds: Vec<libc::pollfd>,
}

impl RxWait {
    /// A waiter on `fds` (each port's [`crate::Port::rx_fds`]); `None` when there is
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
            run_loop(&clock, &s, Idle::default(), |_| {
                n += 1;
                if n == 1000 {
                    s.store(true, Ordering::Relaxed);
                }
                1
            });
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
            let mut wait = RxWait::new([rx.as_raw_fd()]).unwrap();
            let mut n = 0u32;
            run_loop_waiting(
                &clock,
                &s,
                &mut wait,
                std::time::Duration::from_secs(3600),
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
        let mut idle = Idle::default();
        for _ in 0..Idle::SPINS {
            idle.after(0);
        }
        assert_eq!(idle.run, Idle::SPINS);
        // Past the spin budget it yields and stays there until work is done.
        idle.after(0);
        assert_eq!(idle.run, Idle::SPINS);
        idle.after(3);
        assert_eq!(idle.run, 0);
        // A spinning one never leaves the spin: it needs no count.
        let mut spin = Idle::new(IdleMode::Spin);
        for _ in 0..Idle::SPINS + 3 {
            assert!(!spin.past_spins(0));
        }
        assert_eq!(spin.run, 0);
        // A sleeping one spins the same budget, then stays past it (sleeping) until work.
        let mut nap = Idle::new(IdleMode::Sleep(std::time::Duration::from_micros(1)));
        for _ in 0..Idle::SPINS + 2 {
            nap.after(0);
        }
        assert_eq!(nap.run, Idle::SPINS);
        nap.after(1);
        assert_eq!(nap.run, 0);
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
