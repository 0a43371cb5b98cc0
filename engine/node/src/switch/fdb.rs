//! The filtering database (802.1Q 8.8): MAC address -> port, from static entries and from
//! learning source addresses, with ageing.
//!
//! No clock reads: `now` comes from the worker. Learned entries expire `ageing` after they were
//! last seen (802.1Q 8.8.3, default ageing time 300 s); static entries never expire and are never
//! overwritten by learning. The table is bounded; when full, new addresses are not learned
//! (frames to them are flooded) and a counter says so.
//!
//! Speed (the per-frame path does one `learn` and one `lookup`): keys are the MAC as a `u64`,
//! hashed by one folded multiplication ([`MacHasher`]) instead of std's SipHash, which was a
//! quarter of the forwarding loop's time (perf on scripts/bench/bench-dpdk.sh); SipHash's defence
//! against chosen keys buys little here, since a flood of forged source MACs is bounded by the
//! table's capacity anyway. Consecutive frames mostly repeat recent addresses (a burst is one
//! flow or a few, and a worker polls a few ports in turn), so both calls first check a small
//! direct-mapped memo ([`MEMOS`] entries) and only then hash:
//! - `learn`: per ingress port (slot `port % MEMOS`), the last source whose learning was a
//!   no-op: a static entry, or a learned one whose `last_seen` was written less than
//!   [`REFRESH`] ago (refreshing it at most that often moves ageing by at most that much). When
//!   an entry moves, every learn memo of that address is dropped, so a move back is seen;
//! - `lookup`: per destination (slot `key % MEMOS`), the last known unicast answer, valid until
//!   the entry's age would reach the ageing time (for ever for a static entry). It is dropped
//!   when its entry moves; all memos go when the table gains a static entry or is swept, so a
//!   moved address is never served stale. A refresh of `last_seen` only makes a memo expire
//!   early (a hashed lookup then renews it).
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use quench_wire::MacAddr;
use units::{Duration, Instant};

/// A port index in the switch's port table.
pub type PortIdx = u16;

/// 802.1Q Table 8-6: recommended default ageing time, 300 s.
pub const DEFAULT_AGEING: Duration = Duration::from_secs(300);

/// Most learned entries the table holds.
pub const DEFAULT_CAPACITY: usize = 64 * 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    port: PortIdx,
    last_seen: Instant,
    is_static: bool,
}

/// How stale `last_seen` may get for a source that keeps sending on the same port.
pub const REFRESH: Duration = Duration::from_millis(1);

/// Hashes the `u64` form of a MAC address: one 64 x 64 -> 128-bit multiplication by an odd
/// constant, high and low halves folded, so both ends of the result depend on every key bit.
#[derive(Default)]
pub struct MacHasher(u64);

impl Hasher for MacHasher {
    fn finish(&self) -> u64 {
        let m = u128::from(self.0) * 0x9E37_79B9_7F4A_7C15;
        (m >> 64) as u64 ^ m as u64
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only reached for keys other than u64 (none here); kept correct anyway.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, k: u64) {
        self.0 = k;
    }
}

/// A MAC address as the table's key: its six octets, first octet most significant.
#[inline]
pub fn key(mac: MacAddr) -> u64 {
    let [a, b, c, d, e, f] = mac.octets();
    u64::from_be_bytes([0, 0, a, b, c, d, e, f])
}

/// The address of a [`key`].
pub fn mac(k: u64) -> MacAddr {
    let [_, _, a, b, c, d, e, f] = k.to_be_bytes();
    MacAddr(a, b, c, d, e, f)
}

/// The [`key`]s of the destination and source addresses in a frame's first 12 octets: two
/// loads instead of twelve octet moves.
#[inline]
pub fn header_keys(h: &[u8; 12]) -> (u64, u64) {
    let [d0, d1, d2, d3, d4, d5, s0, s1, s2, s3, s4, s5] = *h;
    let front = u64::from_be_bytes([d0, d1, d2, d3, d4, d5, s0, s1]);
    let back = u32::from_be_bytes([s2, s3, s4, s5]);
    (front >> 16, (front & 0xffff) << 32 | u64::from(back))
}

/// The address bits of a [`key`] or a learn memo key.
const ADDRESS: u64 = (1 << 48) - 1;

/// The I/G bit (802 clause 8.2) of a [`key`].
const GROUP_BIT: u64 = 1 << 40;

/// A memo key no address has (keys use 48 bits, and a learn memo with port 0xffff would need
/// the group address ff:ff:ff:ff:ff:ff, which is never learned).
const NO_MEMO: u64 = u64::MAX;

/// Entries of each memo (a power of two): with one, two ports polled in turn missed both memos
/// on every burst.
pub const MEMOS: usize = 4;

/// The learn memo's key: address and port in one word, so the hit test is one comparison.
#[inline]
fn learn_key(k: u64, port: PortIdx) -> u64 {
    k | u64::from(port) << 48
}

/// Result of a lookup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// Known unicast destination on this port.
    Port(PortIdx),
    /// Broadcast, multicast or unknown unicast: flood.
    Flood,
}

/// Counters of the table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FdbStats {
    pub learned: u64,
    pub moved: u64,
    pub aged: u64,
    pub full: u64,
}

/// The MAC table of one worker.
pub struct Fdb {
    map: HashMap<u64, Entry, BuildHasherDefault<MacHasher>>,
    /// `learn` of this [`learn_key`] before the instant is a no-op (see the module docs).
    learn_memo: [(u64, Instant); MEMOS],
    /// `lookup` of this key before the instant answers this port (see the module docs).
    lookup_memo: [(u64, PortIdx, Instant); MEMOS],
    ageing: Duration,
    capacity: usize,
    stats: FdbStats,
}

/// Group addresses (multicast and broadcast) have the I/G bit set (802 clause 8.2).
pub fn is_group(mac: MacAddr) -> bool {
    mac.0 & 1 == 1
}

impl Fdb {
    pub fn new(ageing: Duration, capacity: usize) -> Fdb {
        Fdb {
            map: HashMap::default(),
            learn_memo: [(NO_MEMO, Instant::ZERO); MEMOS],
            lookup_memo: [(NO_MEMO, 0, Instant::ZERO); MEMOS],
            ageing,
            capacity,
            stats: FdbStats::default(),
        }
    }

    /// Adds a static entry (configuration): never aged, never moved by learning.
    pub fn add_static(&mut self, mac: MacAddr, port: PortIdx) {
        self.forget_memos();
        self.map.insert(
            key(mac),
            Entry {
                port,
                last_seen: Instant::ZERO,
                is_static: true,
            },
        );
    }

    fn forget_memos(&mut self) {
        for m in &mut self.learn_memo {
            m.0 = NO_MEMO;
        }
        for m in &mut self.lookup_memo {
            m.0 = NO_MEMO;
        }
    }

    /// Entry `k` moved: no memo may still hold its old port.
    fn forget_address(&mut self, k: u64) {
        for m in &mut self.learn_memo {
            if m.0 & ADDRESS == k {
                m.0 = NO_MEMO;
            }
        }
        let m = &mut self.lookup_memo[k as usize % MEMOS];
        if m.0 == k {
            m.0 = NO_MEMO;
        }
    }

    fn set_learn_memo(&mut self, k: u64, port: PortIdx, until: Instant) {
        self.learn_memo[usize::from(port) % MEMOS] = (learn_key(k, port), until);
    }

    /// Learns that `src` was seen on `port` at `now`. Returns true when this created or moved
    /// an entry (the worker then tells the other workers).
    #[inline]
    pub fn learn(&mut self, now: Instant, src: MacAddr, port: PortIdx) -> bool {
        self.learn_key(now, key(src), port)
    }

    /// [`learn`](Self::learn) with the address as its [`key`].
    #[inline]
    pub fn learn_key(&mut self, now: Instant, k: u64, port: PortIdx) -> bool {
        if self.learn_is_noop(now, k, port) {
            return false;
        }
        self.learn_hashed(now, k, port)
    }

    /// Whether learning key `k` on `port` at `now` is known, from the learn memo alone, to
    /// change nothing (false: it may, or it is not known).
    #[inline]
    pub fn learn_is_noop(&self, now: Instant, k: u64, port: PortIdx) -> bool {
        let (mk, until) = self.learn_memo[usize::from(port) % MEMOS];
        learn_key(k, port) == mk && now < until
    }

    fn learn_hashed(&mut self, now: Instant, k: u64, port: PortIdx) -> bool {
        if k & GROUP_BIT != 0 {
            return false;
        }
        let len = self.map.len();
        match self.map.get_mut(&k) {
            Some(e) if e.is_static => {
                self.set_learn_memo(k, port, Instant::MAX);
                false
            }
            Some(e) => {
                e.last_seen = now;
                let moved = e.port != port;
                if moved {
                    e.port = port;
                    self.stats.moved += 1;
                    self.forget_address(k);
                }
                self.set_learn_memo(k, port, now + REFRESH);
                moved
            }
            None if len >= self.capacity => {
                self.stats.full += 1;
                false
            }
            None => {
                self.map.insert(
                    k,
                    Entry {
                        port,
                        last_seen: now,
                        is_static: false,
                    },
                );
                self.set_learn_memo(k, port, now + REFRESH);
                self.stats.learned += 1;
                true
            }
        }
    }

    /// Where to send a frame for `dst` at `now`. An entry older than the ageing time counts as
    /// absent even before [`age`](Self::age) removes it.
    #[inline]
    pub fn lookup(&mut self, now: Instant, dst: MacAddr) -> Lookup {
        self.lookup_key(now, key(dst))
    }

    /// [`lookup`](Self::lookup) with the address as its [`key`].
    #[inline]
    pub fn lookup_key(&mut self, now: Instant, k: u64) -> Lookup {
        let (mk, port, until) = self.lookup_memo[k as usize % MEMOS];
        if k == mk && now < until {
            return Lookup::Port(port);
        }
        self.lookup_hashed(now, k)
    }

    fn lookup_hashed(&mut self, now: Instant, k: u64) -> Lookup {
        if k & GROUP_BIT != 0 {
            return Lookup::Flood;
        }
        let (port, until) = match self.map.get(&k) {
            Some(e) if e.is_static => (e.port, Instant::MAX),
            Some(e) if now - e.last_seen < self.ageing => (e.port, e.last_seen + self.ageing),
            _ => return Lookup::Flood,
        };
        self.lookup_memo[k as usize % MEMOS] = (k, port, until);
        Lookup::Port(port)
    }

    /// Removes learned entries not seen for the ageing time. Returns how many were removed.
    pub fn age(&mut self, now: Instant) -> usize {
        let ageing = self.ageing;
        self.forget_memos();
        let before = self.map.len();
        self.map
            .retain(|_, e| e.is_static || now - e.last_seen < ageing);
        let n = before - self.map.len();
        self.stats.aged += n as u64;
        n
    }

    /// The port of `k` at `now`, as [`lookup`](Self::lookup) answers it (a static entry, or a
    /// learned one seen within the ageing time), without using or changing the memos.
    pub fn port_of(&self, now: Instant, k: u64) -> Option<PortIdx> {
        self.map
            .get(&k)
            .filter(|e| e.is_static || now - e.last_seen < self.ageing)
            .map(|e| e.port)
    }

    /// Every entry's key and port, static and learned (an aged one until the sweep).
    pub fn entries(&self) -> impl Iterator<Item = (u64, PortIdx)> + '_ {
        self.map.iter().map(|(&k, e)| (k, e.port))
    }

    /// Learned entry `k` at `port` was seen at `now` through a path that does not pass
    /// [`learn`](Self::learn) (the kernel fast path's hit marks, `switch::fastpath`). Nothing
    /// for a static entry, an absent one, or one now at another port (a refresh never moves
    /// an entry). A memo may expire early, as after any refresh.
    pub fn refresh(&mut self, now: Instant, k: u64, port: PortIdx) {
        if let Some(e) = self.map.get_mut(&k) {
            if !e.is_static && e.port == port && now > e.last_seen {
                e.last_seen = now;
            }
        }
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub fn stats(&self) -> FdbStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: MacAddr = MacAddr(2, 0, 0, 0, 0, 0xa);
    const B: MacAddr = MacAddr(2, 0, 0, 0, 0, 0xb);
    const BCAST: MacAddr = MacAddr(0xff, 0xff, 0xff, 0xff, 0xff, 0xff);

    fn t(s: u64) -> Instant {
        Instant::from_nanos(s * 1_000_000_000)
    }

    #[test]
    fn learns_moves_and_ages() {
        let mut f = Fdb::new(Duration::from_secs(10), 16);
        assert_eq!(f.lookup(t(0), A), Lookup::Flood);
        assert!(f.learn(t(1), A, 3));
        assert!(!f.learn(t(2), A, 3));
        assert_eq!(f.lookup(t(5), A), Lookup::Port(3));
        assert!(f.learn(t(6), A, 4));
        assert_eq!(f.lookup(t(7), A), Lookup::Port(4));
        // Last seen at 6 s, ageing 10 s: gone at 16 s, before and after the sweep.
        assert_eq!(f.lookup(t(16), A), Lookup::Flood);
        assert_eq!(f.age(t(15)), 0);
        assert_eq!(f.age(t(16)), 1);
        assert!(f.is_empty());
        assert_eq!(f.stats().moved, 1);
    }

    #[test]
    fn statics_stay_and_groups_flood() {
        let mut f = Fdb::new(Duration::from_secs(1), 1);
        f.add_static(B, 7);
        assert!(!f.learn(t(0), B, 1));
        assert_eq!(f.lookup(t(1000), B), Lookup::Port(7));
        assert_eq!(f.age(t(1000)), 0);
        assert!(!f.learn(t(0), BCAST, 1));
        assert_eq!(f.lookup(t(0), BCAST), Lookup::Flood);
        // Capacity 1 is taken by the static entry: A is not learned, and counted.
        assert!(!f.learn(t(0), A, 2));
        assert_eq!(f.stats().full, 1);
    }

    #[test]
    fn refresh_memo_bounds_staleness_and_never_hides_a_move() {
        let ms = |m: u64| Instant::from_nanos(m * 1_000_000);
        let mut f = Fdb::new(Duration::from_millis(100), 16);
        assert!(f.learn(ms(0), A, 1));
        // Within REFRESH the same (source, port) is skipped; a move never is.
        assert!(!f.learn(ms(0) + Duration::from_micros(500), A, 1));
        assert!(f.learn(ms(0) + Duration::from_micros(600), A, 2));
        assert_eq!(f.lookup(ms(1), A), Lookup::Port(2));
        // Seen every 0.5 ms for 300 ms: never aged (last_seen lags by < REFRESH).
        for k in 2..600 {
            f.learn(Instant::from_nanos(k * 500_000), A, 2);
        }
        assert_eq!(f.lookup(ms(300), A), Lookup::Port(2));
        assert_eq!(f.age(ms(300)), 0);
        // Silent from 299.5 ms: gone 100 ms (+ at most REFRESH) later.
        assert_eq!(f.lookup(ms(401), A), Lookup::Flood);
        // A different address is not served from the memo.
        assert!(f.learn(ms(402), B, 2));
        assert_eq!(f.len(), 2);
    }

    #[test]
    fn lookup_memo_never_serves_a_moved_aged_or_overridden_address() {
        let ms = |m: u64| Instant::from_nanos(m * 1_000_000);
        let mut f = Fdb::new(Duration::from_millis(100), 16);
        assert!(f.learn(ms(0), A, 1));
        assert_eq!(f.lookup(ms(1), A), Lookup::Port(1));
        // The second from the memo.
        assert_eq!(f.lookup(ms(1), A), Lookup::Port(1));
        // A move is seen by the next lookup, even within the learn memo's refresh window.
        assert!(f.learn(ms(1), A, 2));
        assert_eq!(f.lookup(ms(1), A), Lookup::Port(2));
        // Another address's lookup replaces the memo; A is still right afterwards.
        assert!(f.learn(ms(2), B, 3));
        assert_eq!(f.lookup(ms(2), B), Lookup::Port(3));
        assert_eq!(f.lookup(ms(2), A), Lookup::Port(2));
        // Last seen at 1 ms: the memo expires with the entry, at 101 ms, sweep or not.
        assert_eq!(f.lookup(ms(100), A), Lookup::Port(2));
        assert_eq!(f.lookup(ms(101), A), Lookup::Flood);
        // Refreshed while memoised: the memo runs out early and is renewed, never wrong.
        assert!(!f.learn(ms(50), B, 3));
        assert_eq!(f.lookup(ms(60), B), Lookup::Port(3));
        assert_eq!(f.lookup(ms(120), B), Lookup::Port(3));
        assert_eq!(f.lookup(ms(151), B), Lookup::Flood);
        // A static entry added for a memoised address wins at once.
        assert!(f.learn(ms(200), A, 4));
        assert_eq!(f.lookup(ms(200), A), Lookup::Port(4));
        f.add_static(A, 7);
        assert_eq!(f.lookup(ms(200), A), Lookup::Port(7));
        // Learning a static address is a no-op, memoised or not, and it never ages.
        assert!(!f.learn(ms(201), A, 4));
        assert!(!f.learn(ms(201), A, 4));
        assert_eq!(f.lookup(ms(10_000), A), Lookup::Port(7));
        // A sweep forgets the memos: a swept address floods, then is learned afresh.
        // (B is stale but not swept yet: seeing it again refreshes it, not a new entry.)
        assert!(!f.learn(ms(300), B, 3));
        assert_eq!(f.lookup(ms(300), B), Lookup::Port(3));
        assert_eq!(f.age(ms(400)), 1);
        assert_eq!(f.lookup(ms(400), B), Lookup::Flood);
        assert!(f.learn(ms(400), B, 3));
        assert_eq!(f.lookup(ms(400), B), Lookup::Port(3));
        assert_eq!((f.stats().learned, f.stats().moved), (3, 2));
    }

    #[test]
    fn memos_of_several_ports_never_hide_a_move_back() {
        let mut f = Fdb::new(Duration::from_secs(10), 16);
        // Two sources on two ports, seen in turn: both memoised.
        assert!(f.learn(t(1), A, 0));
        assert!(f.learn(t(1), B, 1));
        assert!(!f.learn(t(1), A, 0));
        assert!(!f.learn(t(1), B, 1));
        assert_eq!(f.lookup(t(1), A), Lookup::Port(0));
        assert_eq!(f.lookup(t(1), B), Lookup::Port(1));
        // A moves to port 1 and straight back: both moves are learned and looked up.
        assert!(f.learn(t(1), A, 1));
        assert_eq!(f.lookup(t(1), A), Lookup::Port(1));
        assert!(f.learn(t(1), A, 0));
        assert_eq!(f.lookup(t(1), A), Lookup::Port(0));
        assert!(f.learn(t(1), A, 1));
        assert_eq!(f.lookup(t(1), A), Lookup::Port(1));
        assert_eq!(f.lookup(t(1), B), Lookup::Port(1));
        assert_eq!(f.stats().moved, 3);
        // Ports sharing a memo slot (0 and MEMOS) replace each other's memo; still correct.
        let p = MEMOS as PortIdx;
        assert!(f.learn(t(2), B, p));
        assert!(!f.learn(t(2), A, 1));
        assert!(f.learn(t(2), A, p + 1));
        assert_eq!(f.lookup(t(2), A), Lookup::Port(p + 1));
        assert_eq!(f.lookup(t(2), B), Lookup::Port(p));
    }

    #[test]
    fn a_full_table_counts_every_refused_frame() {
        let mut f = Fdb::new(Duration::from_secs(10), 1);
        assert!(f.learn(t(0), A, 1));
        for _ in 0..3 {
            assert!(!f.learn(t(0), B, 1));
        }
        assert_eq!(f.stats().full, 3);
        assert_eq!(f.lookup(t(0), B), Lookup::Flood);
    }

    #[test]
    fn header_keys_match_key_and_mac_inverts_it() {
        let h = [2, 0xab, 3, 4, 5, 0xfe, 0xff, 1, 0x80, 9, 10, 0x11];
        let dst = MacAddr(2, 0xab, 3, 4, 5, 0xfe);
        let src = MacAddr(0xff, 1, 0x80, 9, 10, 0x11);
        assert_eq!(header_keys(&h), (key(dst), key(src)));
        assert_eq!((mac(key(dst)), mac(key(src))), (dst, src));
    }

    #[test]
    fn mac_hasher_spreads_neighbouring_addresses() {
        use std::hash::Hasher as _;
        let h = |k: u64| {
            let mut m = MacHasher::default();
            m.write_u64(k);
            m.finish()
        };
        // Consecutive addresses (as on a testbed) differ in their low and high bits.
        let hs: Vec<u64> = (0..64u64).map(|i| h(0x0200_0000_0000 | i)).collect();
        let low: std::collections::HashSet<u64> = hs.iter().map(|x| x & 63).collect();
        let high: std::collections::HashSet<u64> = hs.iter().map(|x| x >> 57).collect();
        assert!(
            low.len() > 32 && high.len() > 32,
            "low {} high {}",
            low.len(),
            high.len()
        );
    }

    /// Model-based: random learns (from a small and a large address pool, so both repeats and
    /// floods happen), lookups, sweeps and static entries, checked after every step against a
    /// plain map with the documented semantics: bounded size, statics kept and never moved,
    /// every refused learn counted, and every lookup as the model says (the memos included).
    #[test]
    fn random_operations_match_the_model() {
        use proptest::prelude::*;
        use std::collections::HashMap;

        #[derive(Clone, Debug)]
        enum Op {
            Learn(u64, PortIdx),
            Lookup(u64),
            Age,
            Static(u64, PortIdx),
            Wait(u64),
        }
        let addr = prop_oneof![
            (0u64..6).prop_map(|i| 0x0200_0000_0000 | i),
            (0u64..5000).prop_map(|i| 0x02ee_0000_0000 | i),
            Just(0x0100_5e00_0001u64),
        ];
        let op = prop_oneof![
            6 => (addr.clone(), 0u16..6).prop_map(|(a, p)| Op::Learn(a, p)),
            4 => addr.clone().prop_map(Op::Lookup),
            1 => Just(Op::Age),
            1 => (addr, 0u16..6).prop_map(|(a, p)| Op::Static(a, p)),
            2 => (0u64..40_000_000).prop_map(Op::Wait),
        ];
        let ageing = Duration::from_millis(50);
        let cap = 16;
        proptest!(ProptestConfig::with_cases(200), |(ops in proptest::collection::vec(op, 1..400))| {
            let mut f = Fdb::new(ageing, cap);
            // address -> (port, last_seen, static)
            let mut model: HashMap<u64, (PortIdx, Instant, bool)> = HashMap::new();
            // The learn memo as documented: slot `port % MEMOS` holds (address, port, until)
            // of the last learn it made a no-op; an entry's move drops its address's memos, a
            // sweep or a static entry drops them all.
            let mut memo: [Option<(u64, PortIdx, Instant)>; MEMOS] = [None; MEMOS];
            let mut full = 0u64;
            let mut now = Instant::from_nanos(1);
            for op in ops {
                match op {
                    Op::Wait(ns) => now += Duration::from_nanos(ns),
                    Op::Static(a, p) => {
                        f.add_static(mac(a), p);
                        model.insert(a, (p, Instant::ZERO, true));
                        memo = [None; MEMOS];
                    }
                    Op::Age => {
                        f.age(now);
                        model.retain(|_, e| e.2 || now - e.1 < ageing);
                        memo = [None; MEMOS];
                    }
                    Op::Learn(a, p) => {
                        f.learn(now, mac(a), p);
                        let slot = usize::from(p) % MEMOS;
                        let noop = memo[slot].is_some_and(|(ma, mp, until)| {
                            ma == a && mp == p && now < until
                        });
                        if a & GROUP_BIT == 0 && !noop {
                            let len = model.len();
                            match model.get_mut(&a) {
                                Some(e) if e.2 => memo[slot] = Some((a, p, Instant::MAX)),
                                Some(e) => {
                                    e.1 = now;
                                    if e.0 != p {
                                        e.0 = p;
                                        for m in memo.iter_mut() {
                                            if m.is_some_and(|(ma, _, _)| ma == a) {
                                                *m = None;
                                            }
                                        }
                                    }
                                    memo[slot] = Some((a, p, now + REFRESH));
                                }
                                None if len >= cap => full += 1,
                                None => {
                                    model.insert(a, (p, now, false));
                                    memo[slot] = Some((a, p, now + REFRESH));
                                }
                            }
                        }
                    }
                    Op::Lookup(a) => {
                        let want = match model.get(&a) {
                            _ if a & GROUP_BIT != 0 => Lookup::Flood,
                            Some(e) if e.2 || now - e.1 < ageing => Lookup::Port(e.0),
                            _ => Lookup::Flood,
                        };
                        prop_assert_eq!(f.lookup(now, mac(a)), want, "{:x}", a);
                    }
                }
                prop_assert_eq!(f.len(), model.len());
                prop_assert!(f.len() <= cap + model.values().filter(|e| e.2).count());
                prop_assert_eq!(f.stats().full, full);
            }
        });
    }
}
