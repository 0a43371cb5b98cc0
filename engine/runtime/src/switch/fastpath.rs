//! The switch's side of the kernel fast path ([`quench_port::kfp`], on by default: `quench
//! switch --fast-path auto`): one worker (worker 0) programs the kernel's MAC table from its own
//! [`Fdb`], the one authority on where an address is; every worker's learns reach that table
//! through the learning notices (`switch::rings::Learned`).
//!
//! Invariants, each kept by the worker's calls (see [`super::forward`]):
//! - the kernel table holds address `k` at port `p` only while the FDB holds `k` at `p` and
//!   `p` is plain ([`FastPath::new`]'s `plain`): a learn that creates or moves an entry marks the
//!   address ([`FastPath::learned`]) and the worker brings it up to date before its next
//!   receive ([`FastPath::sync_dirty`]); the ageing sweep's removals are found by a full
//!   comparison right after it ([`FastPath::sync_all`]);
//! - a host whose frames all take the fast path is seen only through the program's hit marks:
//!   before each ageing sweep the worker reads them and refreshes those entries in the FDB
//!   ([`FastPath::refresh`]) and, by notice, in the other workers' tables, so they age as if its
//!   frames had reached a worker (at most one sweep period late);
//! - a port stays plain only while its device sends what is redirected to it: a device that sent
//!   none of the frames redirected to it in a check period ([`silent_egress`]) leaves the fast
//!   path ([`FastPath::publish`]): its entries are removed and its frames take the workers' path.
//!
//! Group addresses are never learned (`Fdb::learn`), so they are never installed.
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use units::Instant;

use super::stats::PortCounters;
use quench_node::switch::fdb::{Fdb, PortIdx};
use quench_port::kfp::{FastProgram, FastTable};
use quench_port::PortError;

/// What the worker needs of the kernel's table (an in-memory one in the tests).
pub trait Offload {
    /// Installs (or moves) address `k` at `port`.
    fn install(&mut self, k: u64, port: PortIdx) -> Result<(), PortError>;
    /// Removes address `k` (absent: nothing).
    fn remove(&mut self, k: u64);
    /// Whether `k` was marked hit since the last call (clearing the mark); `None` if absent.
    fn take_hit(&mut self, k: u64) -> Option<bool>;
    /// Takes `port` out of the redirect targets: a frame for it goes to the worker.
    fn drop_port(&mut self, port: PortIdx);
}

impl Offload for Arc<FastTable> {
    fn install(&mut self, k: u64, port: PortIdx) -> Result<(), PortError> {
        FastTable::install(self, k, u32::from(port))
    }
    fn remove(&mut self, k: u64) {
        FastTable::remove(self, k)
    }
    fn take_hit(&mut self, k: u64) -> Option<bool> {
        FastTable::take_hit(self, k)
    }
    fn drop_port(&mut self, port: PortIdx) {
        FastTable::remove_device(self, u32::from(port))
    }
}

/// The fast path as the worker that programs it drives it.
pub struct FastPath {
    table: Box<dyn Offload + Send>,
    /// Per port: its program (every plain port carries one), for the counts.
    programs: Arc<Vec<Option<FastProgram>>>,
    /// Per port: where its fast counts are published (this worker's counters of the port).
    counters: Vec<Arc<PortCounters>>,
    /// Per port: whether frames to and from it may bypass the switch core.
    plain: Vec<bool>,
    /// What the kernel table holds, as this side wrote it.
    installed: HashMap<u64, PortIdx>,
    /// Addresses learned or moved since the last [`FastPath::sync_dirty`].
    dirty: Vec<u64>,
    /// Installs the kernel refused (its table full: the address stays on the core's path).
    pub refused: u64,
    /// Scratch for the counts of one program, by egress port.
    counts: Vec<(u64, u64)>,
    /// Per port on the fast path: its device, for the silent-egress check ([`silent_egress`]),
    /// with the redirects to it and the device's `tx_packets` at the last check.
    egress: Vec<Option<EgressCheck>>,
}

struct EgressCheck {
    name: String,
    iface: String,
    last: Option<(u64, u64)>,
}

/// Redirects to a port counted between two checks (at least this many) for [`silent_egress`]
/// to judge whether its device sends them.
const SILENT_MIN: u64 = 10;

/// Whether a device dropped the fast path's frames unsent: `redirected` frames went to it since
/// the last check and its `tx_packets` moved by `sent`. A veth drops every frame redirected to
/// it, without counting it anywhere, while its peer has neither GRO on nor an XDP program
/// (`veth_xdp_xmit` finds no NAPI on the peer's queue; docs/design.md, "The kernel fast path",
/// has the measurement on 6.18). A frame the device does send counts in its `tx_packets` (on a
/// veth, as the peer's XDP receive), microseconds after the redirect, beside what the workers
/// send there; so fewer sent than half the redirects, with at least [`SILENT_MIN`] redirected,
/// means they do not get through (the frames in flight at a check are a NAPI batch, far below
/// half of a period's at any rate that gives [`SILENT_MIN`]).
pub fn silent_egress(redirected: u64, sent: u64) -> bool {
    redirected >= SILENT_MIN && sent.saturating_mul(2) < redirected
}

impl FastPath {
    /// `plain[p]`: port `p` has nothing the core does to a frame beyond forwarding it (see
    /// docs/design.md, "The kernel fast path"); `programs[p]`: its program, if it has one;
    /// `counters[p]`: where its fast counts go.
    pub fn new(
        table: Box<dyn Offload + Send>,
        programs: Arc<Vec<Option<FastProgram>>>,
        plain: Vec<bool>,
        counters: Vec<Arc<PortCounters>>,
    ) -> FastPath {
        let n = plain.len();
        FastPath {
            table,
            programs,
            counters,
            plain,
            installed: HashMap::new(),
            dirty: Vec::new(),
            refused: 0,
            counts: vec![(0, 0); n],
            egress: (0..n).map(|_| None).collect(),
        }
    }

    /// Watches port `port` (`name`)'s device `iface` for frames redirected to it and not sent
    /// ([`silent_egress`]: the port then leaves the fast path, said on standard error).
    pub fn watch_egress(&mut self, port: usize, name: &str, iface: &str) {
        if let Some(slot) = self.egress.get_mut(port) {
            *slot = Some(EgressCheck {
                name: name.to_string(),
                iface: iface.to_string(),
                last: None,
            });
        }
    }

    /// Whether port `p` is (still) on the fast path.
    pub fn is_plain(&self, p: usize) -> bool {
        self.plain.get(p).copied().unwrap_or(false)
    }

    /// Takes port `p` off the fast path: no entry at it stays in the kernel table, and no
    /// frame is redirected to it any more.
    pub fn leave(&mut self, p: usize) {
        let Some(slot) = self.plain.get_mut(p) else {
            return;
        };
        *slot = false;
        self.table.drop_port(p as PortIdx);
        let at: Vec<u64> = (self.installed.iter())
            .filter(|(_, &q)| usize::from(q) == p)
            .map(|(&k, _)| k)
            .collect();
        for k in at {
            self.set(k, None);
        }
        if let Some(c) = self.egress.get_mut(p) {
            *c = None;
        }
    }

    /// Address `k` was learned or moved (`Fdb::learn` returned true).
    #[inline]
    pub fn learned(&mut self, k: u64) {
        self.dirty.push(k);
    }

    /// Whether any learned address waits for [`FastPath::sync_dirty`].
    #[inline]
    pub fn has_dirty(&self) -> bool {
        !self.dirty.is_empty()
    }

    /// Entries the kernel table holds.
    pub fn installed(&self) -> usize {
        self.installed.len()
    }

    /// Brings the learned addresses up to date in the kernel table.
    pub fn sync_dirty(&mut self, now: Instant, fdb: &Fdb) {
        let dirty = std::mem::take(&mut self.dirty);
        for &k in &dirty {
            self.set(k, fdb.port_of(now, k));
        }
        self.dirty = dirty;
        self.dirty.clear();
    }

    /// Brings every address up to date (after the ageing sweep: what it removed goes).
    pub fn sync_all(&mut self, now: Instant, fdb: &Fdb) {
        let gone: Vec<u64> = self
            .installed
            .keys()
            .copied()
            .filter(|&k| fdb.port_of(now, k).is_none())
            .collect();
        for k in gone {
            self.set(k, None);
        }
        for (k, _) in fdb.entries() {
            self.set(k, fdb.port_of(now, k));
        }
        self.dirty.clear();
    }

    /// Refreshes in `fdb` each installed address the program marked hit; returns them (address
    /// and port), for the other workers' tables.
    pub fn refresh(&mut self, now: Instant, fdb: &mut Fdb) -> Vec<(u64, PortIdx)> {
        let mut hits = Vec::new();
        for (&k, &p) in &self.installed {
            if self.table.take_hit(k) == Some(true) {
                fdb.refresh(now, k, p);
                hits.push((k, p));
            }
        }
        hits
    }

    /// Makes the kernel table hold `k` at `at` if that port is plain, else not at all.
    fn set(&mut self, k: u64, at: Option<PortIdx>) {
        let want = at.filter(|&p| self.plain.get(usize::from(p)).copied().unwrap_or(false));
        let have = self.installed.get(&k).copied();
        if want == have {
            return;
        }
        match want {
            Some(p) => match self.table.install(k, p) {
                Ok(()) => {
                    self.installed.insert(k, p);
                }
                Err(_) => {
                    // Not installed: the address stays on the core's path (an old entry at
                    // another port must not stay either).
                    self.refused += 1;
                    self.table.remove(k);
                    self.installed.remove(&k);
                }
            },
            None => {
                self.table.remove(k);
                self.installed.remove(&k);
            }
        }
    }

    /// Publishes what the programs forwarded: port `p`'s `fast_rx_*` (what its program
    /// redirected) and `fast_tx_*` (what every program redirected to it), totals since start;
    /// then checks each watched egress ([`silent_egress`]).
    pub fn publish(&mut self) {
        let n = self.plain.len();
        let mut rx = vec![(0u64, 0u64); n];
        let mut tx = vec![(0u64, 0u64); n];
        for (i, prog) in self.programs.iter().enumerate() {
            let Some(prog) = prog else { continue };
            prog.counts(&mut self.counts);
            for (e, &(f, b)) in self.counts.iter().enumerate() {
                rx[i].0 += f;
                rx[i].1 += b;
                tx[e].0 += f;
                tx[e].1 += b;
            }
        }
        for (p, c) in self.counters.iter().enumerate().take(n) {
            let st = |a: &std::sync::atomic::AtomicU64, v| a.store(v, Ordering::Relaxed);
            st(&c.fast_rx_pkts, rx[p].0);
            st(&c.fast_rx_bytes, rx[p].1);
            st(&c.fast_tx_pkts, tx[p].0);
            st(&c.fast_tx_bytes, tx[p].1);
        }
        for (p, (frames, _)) in tx.into_iter().enumerate() {
            self.check_egress(p, frames);
        }
    }

    /// Port `p`'s egress check (at every publish, 100 ms): `redirected` frames to it so far.
    fn check_egress(&mut self, p: usize, redirected: u64) {
        let Some(check) = self.egress.get_mut(p).and_then(Option::as_mut) else {
            return;
        };
        let Some(sent) = quench_port::device_tx_packets(&check.iface) else {
            return;
        };
        let last = check.last.replace((redirected, sent));
        let Some((r0, s0)) = last else { return };
        let (r, s) = (redirected.saturating_sub(r0), sent.saturating_sub(s0));
        if silent_egress(r, s) {
            eprintln!(
                "quench switch: port {} ({}): the kernel fast path redirected {r} frames to it and \
                 the device sent {s}; its frames go through the workers from now on (a veth \
                 takes redirected frames only while its peer has GRO on, `ethtool -K PEER gro \
                 on`, or an XDP program)",
                check.name, check.iface
            );
            self.leave(p);
        }
    }
}

/// Frames of the start-up check ([`sends_redirected`]): more than a device sends of its own
/// (IPv6 neighbour discovery as a link comes up) in the check's time.
pub const PROBE_FRAMES: u32 = 64;

/// Whether device `iface` sends frames redirected to it by XDP (`ndo_xdp_xmit`, as the fast
/// path's redirects are): [`PROBE_FRAMES`] frames of 60 octets, from and to `mac` with EtherType
/// 0x88B6 (IEEE 802 local experimental; a host drops them as not its own), replayed into the
/// device by `BPF_PROG_TEST_RUN` in live-frames mode ([`quench_port::live`]), and the device's
/// `tx_packets` watched for up to 100 ms for as many more. A veth whose peer has neither GRO on
/// nor an XDP program drops them without a counter ([`silent_egress`]). `Err`: the check could
/// not run.
pub fn sends_redirected(iface: &str, mac: [u8; 6]) -> Result<bool, PortError> {
    let sent = || quench_port::device_tx_packets(iface);
    let mut frame = Vec::with_capacity(60);
    frame.extend_from_slice(&mac);
    frame.extend_from_slice(&mac);
    frame.extend_from_slice(&[0x88, 0xb6]);
    frame.resize(60, 0);
    let before = sent().ok_or_else(|| PortError::Unsupported {
        name: iface.to_string(),
        what: "no tx_packets (/proc/thread-self/net/dev) to check the fast path's redirects by"
            .into(),
    })?;
    quench_port::live::LiveTx::open(iface, frame)?.send(PROBE_FRAMES)?;
    for _ in 0..100 {
        if sent().is_some_and(|s| s >= before + u64::from(PROBE_FRAMES)) {
            return Ok(true);
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use quench_node::switch::fdb::key;
    use quench_wire::MacAddr;
    use std::sync::Mutex;
    use units::Duration;

    /// The kernel table as a map, shared with the test.
    #[derive(Clone, Default)]
    struct MemTable(Arc<Mutex<HashMap<u64, (PortIdx, bool)>>>);

    impl Offload for MemTable {
        fn install(&mut self, k: u64, port: PortIdx) -> Result<(), PortError> {
            self.0.lock().unwrap().insert(k, (port, false));
            Ok(())
        }
        fn remove(&mut self, k: u64) {
            self.0.lock().unwrap().remove(&k);
        }
        fn take_hit(&mut self, k: u64) -> Option<bool> {
            let mut t = self.0.lock().unwrap();
            let e = t.get_mut(&k)?;
            Some(std::mem::replace(&mut e.1, false))
        }
        fn drop_port(&mut self, _port: PortIdx) {}
    }

    fn fast_path(mem: &MemTable, plain: Vec<bool>) -> FastPath {
        let counters = plain.iter().map(|_| Arc::default()).collect();
        FastPath::new(Box::new(mem.clone()), Arc::new(vec![]), plain, counters)
    }

    fn ms(n: u64) -> Instant {
        Instant::from_nanos(n * 1_000_000)
    }

    const A: MacAddr = MacAddr(2, 0, 0, 0, 0, 0xa);
    const B: MacAddr = MacAddr(2, 0, 0, 0, 0, 0xb);

    /// Ports 0 and 1 plain, port 2 not (a congestion point): only entries at 0 and 1 are
    /// installed; a move to 2 removes the entry, a move back installs it again.
    #[test]
    fn only_entries_at_plain_ports_are_installed_and_moves_follow() {
        let mem = MemTable::default();
        let mut fp = fast_path(&mem, vec![true, true, false]);
        let mut fdb = Fdb::new(Duration::from_secs(300), 16);
        let t = |k| mem.0.lock().unwrap().get(&key(k)).map(|e| e.0);
        for (mac, port) in [(A, 0), (B, 2)] {
            if fdb.learn(ms(1), mac, port) {
                fp.learned(key(mac));
            }
        }
        fp.sync_dirty(ms(1), &fdb);
        assert_eq!((t(A), t(B)), (Some(0), None));
        // A moves to the congestion-point port: out of the kernel table.
        assert!(fdb.learn(ms(2), A, 2));
        fp.learned(key(A));
        fp.sync_dirty(ms(2), &fdb);
        assert_eq!(t(A), None);
        // And back to a plain one.
        assert!(fdb.learn(ms(3), A, 1));
        fp.learned(key(A));
        fp.sync_dirty(ms(3), &fdb);
        assert_eq!(t(A), Some(1));
        assert_eq!(fp.installed(), 1);
    }

    /// An entry hit by the program is refreshed in the FDB and outlives the ageing time; one
    /// not hit ages out of both tables at the sweep.
    #[test]
    fn hits_keep_entries_alive_and_the_sweep_removes_the_rest() {
        let mem = MemTable::default();
        let mut fp = fast_path(&mem, vec![true, true]);
        let mut fdb = Fdb::new(Duration::from_secs(1), 16);
        for (mac, port) in [(A, 0), (B, 1)] {
            assert!(fdb.learn(ms(0), mac, port));
            fp.learned(key(mac));
        }
        fp.sync_dirty(ms(0), &fdb);
        assert_eq!(fp.installed(), 2);
        // A's frames take the fast path (the program marks it), B sends nothing.
        for sweep in 1..=3u64 {
            mem.0.lock().unwrap().get_mut(&key(A)).unwrap().1 = true;
            let now = ms(sweep * 900);
            assert_eq!(fp.refresh(now, &mut fdb), vec![(key(A), 0)]);
            fdb.age(now);
            fp.sync_all(now, &fdb);
        }
        let t = mem.0.lock().unwrap().clone();
        assert!(t.contains_key(&key(A)), "hit entry aged out");
        assert!(!t.contains_key(&key(B)), "idle entry kept");
        assert_eq!(fdb.port_of(ms(2700), key(A)), Some(0));
        assert_eq!(fdb.port_of(ms(2700), key(B)), None);
    }

    /// A device that sent fewer than half the frames redirected to it drops them (what the
    /// workers send there counts too); too few redirects to tell are not judged.
    #[test]
    fn silent_egress_needs_redirects_and_too_few_frames_sent() {
        assert!(silent_egress(SILENT_MIN, 0));
        assert!(silent_egress(25_000, 0));
        assert!(silent_egress(25_000, 12_499));
        assert!(!silent_egress(25_000, 12_500));
        assert!(!silent_egress(25_000, 40_000));
        assert!(!silent_egress(SILENT_MIN - 1, 0));
        assert!(!silent_egress(0, 0));
    }

    /// A port that leaves the fast path takes its entries out of the kernel table, and a later
    /// learn at it installs nothing; the other ports' entries stay.
    #[test]
    fn a_port_that_leaves_keeps_no_entry_and_gets_none_again() {
        let mem = MemTable::default();
        let mut fp = fast_path(&mem, vec![true, true]);
        let mut fdb = Fdb::new(Duration::from_secs(300), 16);
        for (mac, port) in [(A, 0), (B, 1)] {
            assert!(fdb.learn(ms(1), mac, port));
            fp.learned(key(mac));
        }
        fp.sync_dirty(ms(1), &fdb);
        assert_eq!(fp.installed(), 2);
        fp.leave(1);
        assert!(!fp.is_plain(1) && fp.is_plain(0));
        let t = |k| mem.0.lock().unwrap().get(&key(k)).map(|e| e.0);
        assert_eq!((t(A), t(B)), (Some(0), None));
        assert!(fdb.learn(ms(2), A, 1));
        fp.learned(key(A));
        fp.sync_dirty(ms(2), &fdb);
        fp.sync_all(ms(3), &fdb);
        assert_eq!((t(A), t(B), fp.installed()), (None, None, 0));
    }

    /// A refresh never moves an entry: a hit read for the old port after a move changes
    /// nothing.
    #[test]
    fn a_hit_for_an_old_port_does_not_move_the_entry_back() {
        let mut fdb = Fdb::new(Duration::from_secs(1), 16);
        assert!(fdb.learn(ms(0), A, 0));
        assert!(fdb.learn(ms(10), A, 1));
        fdb.refresh(ms(20), key(A), 0);
        assert_eq!(fdb.port_of(ms(20), key(A)), Some(1));
        // ... and does not renew it either: it ages from its last real sighting.
        assert_eq!(fdb.port_of(ms(1011), key(A)), None);
    }
}
