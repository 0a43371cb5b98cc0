//! The sender appliance's flows, sans-IO: a bounded flow table in front of the host core
//! ([`HostCore`] with a [`Queued`] source per flow: one octet-bounded queue, one reaction point
//! and the one scheduler per flow).
//!
//! Call order: [`FlowTable::on_inside`] (or [`FlowTable::slot_for`] then
//! [`FlowTable::enqueue`]) per classified data frame; [`FlowTable::poll_release`] in a loop
//! with the burst's `now` until `None`; [`FlowTable::on_cnm`] / [`FlowTable::on_cnp`] per
//! validated feedback; [`FlowTable::on_timeout`] when [`FlowTable::next_deadline`] has passed
//! (a spurious call does nothing); [`FlowTable::on_housekeeping`] once per poll (bounded idle
//! eviction).
//!
//! - **Bounded table** ([`TableConfig::max_flows`], default 1M). Flows with an empty queue that
//!   saw no frame for [`TableConfig::idle_timeout`] are evicted by a clock hand that looks at a
//!   bounded number of entries per call. When the table is full, a new flow first tries to take
//!   the slot of an idle flow (empty queue) the hand finds within [`FULL_SCAN`] entries; if
//!   there is none, [`TableConfig::when_full`] decides: `bypass` sends the frame at once,
//!   unpaced (a NIC that runs out of rate limiters sends at line rate: seed 001, "(iv) Sources
//!   start at the line rate"), `drop` drops it. Both are counted.
//! - **Per-flow queues are bounded in octets** ([`TableConfig::queue_bytes`]); a frame that does
//!   not fit is dropped and counted: the appliance stands where a NIC's send queue would be.
//! - **Release and reaction points**: the host core's (host/core.rs): each flow's frames leave
//!   on its pacer's schedule at its RP rate, a late loop catching up at most [`MAX_CATCH_UP`];
//!   feedback and RP timers re-time the release a flow waits for, rises included. Each flow's
//!   reaction-point id is a [`FlowId`] unique over the table's lifetime, so a recycled slot never
//!   inherits QCN's limiter; DCQCN's state is the core's per flow.
//!
//! Memory per flow: [`FlowTable::bytes_per_flow`] (the core's slot with the flow's
//! [`TableFlow`] in it, the rest of the table's slot, one entry in each index, no frames
//! queued).
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::net::Ipv4Addr;

use units::{Duration, FlowId, Instant, Rate};

use super::classify::{CnpKey, FlowKey};
use quench_node::host::core::{
    Flow, FlowHandle, FlowSpec, HostCore, PacingConfig, Queued, Source, Transmit,
};
use quench_node::host::rp::{Feedback, HostRp, Refused};
use quench_node::wheel::WheelError;
use quench_wire::MacAddr;

/// Entries the clock hand looks at for an idle slot when the table is full.
pub const FULL_SCAN: usize = 64;
/// The default of [`TableConfig::max_catch_up`]: the rate limiter's burst tolerance, as `quench
/// send`'s `max_catch_up_us` default.
pub const MAX_CATCH_UP: Duration = Duration::from_micros(50);
/// Entries the clock hand looks at per [`FlowTable::on_housekeeping`] call for idle eviction.
pub const IDLE_SCAN: usize = 16;

/// Hashes the keys of the table's feedback maps (CNP keys, RPIDs): per 8 octets a rotate, an
/// exclusive or and a multiplication by an odd constant (FxHash's step), then one
/// 64 x 64 -> 128-bit multiplication with the halves folded, so every key bit reaches the bits
/// hashbrown uses. Flow keys, hashed per frame, have their own [`key_hash`]. std's SipHash was
/// the largest share of the per-frame cost in perf on `cargo bench --bench appliance`; its
/// defence against chosen keys buys little here, since the hosts behind the appliance choose
/// their flows anyway and the table is bounded.
#[derive(Default)]
pub struct FlowHasher(u64);

/// 2^64 / golden ratio, odd.
const FLOW_HASH_K: u64 = 0x9E37_79B9_7F4A_7C15;

impl FlowHasher {
    #[inline]
    fn add(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(FLOW_HASH_K);
    }
}

impl Hasher for FlowHasher {
    #[inline]
    fn finish(&self) -> u64 {
        let m = u128::from(self.0) * u128::from(FLOW_HASH_K);
        (m >> 64) as u64 ^ m as u64
    }
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            let mut b = [0u8; 8];
            b.copy_from_slice(w);
            self.add(u64::from_le_bytes(b));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut b = [0u8; 8];
            b[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(b) ^ ((rest.len() as u64) << 56));
        }
    }
    #[inline]
    fn write_u8(&mut self, v: u8) {
        self.add(u64::from(v));
    }
    #[inline]
    fn write_u16(&mut self, v: u16) {
        self.add(u64::from(v));
    }
    #[inline]
    fn write_u32(&mut self, v: u32) {
        self.add(u64::from(v));
    }
    #[inline]
    fn write_u64(&mut self, v: u64) {
        self.add(v);
    }
    #[inline]
    fn write_usize(&mut self, v: usize) {
        self.add(v as u64);
    }
}

/// A map keyed through [`FlowHasher`].
type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FlowHasher>>;

/// The table's slots by flow key: open addressing with linear probing over a power-of-two array
/// of at least twice `max_flows` entries, allocated once (the table is bounded, so it never
/// grows and a probe always ends at an empty entry). An entry is the key hash's high half
/// (which also gives its home position) and the slot + 1; 0 is empty. A lookup compares the
/// hash half first and the key (in the slot) only when it matches. Removal moves later entries
/// of the run back into the hole (Knuth, TAOCP vol. 3, 6.4, Algorithm R), so there are no
/// tombstones. A frame's lookup touches one entry's cache line, which a driver can ask for
/// ahead of time ([`FlowTable::prefetch`]), unlike a hashbrown map's.
struct KeyIndex {
    entries: Vec<u64>,
    mask: u32,
}

impl KeyIndex {
    fn new(max_flows: usize) -> Self {
        let n = (max_flows.max(8) * 2).next_power_of_two().min(1 << 32);
        let entries = vec![0; n];
        quench_port::cache::advise_huge_pages(&entries);
        KeyIndex {
            entries,
            mask: (n - 1) as u32,
        }
    }

    #[inline]
    fn home(&self, tag: u32) -> u32 {
        tag & self.mask
    }

    /// The slot whose entry carries `hash` and for which `is` holds.
    #[inline]
    fn find(&self, hash: u64, is: impl Fn(u32) -> bool) -> Option<u32> {
        let tag = (hash >> 32) as u32;
        let mut pos = self.home(tag);
        loop {
            let e = self.entries[pos as usize];
            if e == 0 {
                return None;
            }
            if (e >> 32) as u32 == tag && is(e as u32 - 1) {
                return Some(e as u32 - 1);
            }
            pos = (pos + 1) & self.mask;
        }
    }

    /// Adds `slot` under `hash` (its key must not be in the index).
    fn insert(&mut self, hash: u64, slot: u32) {
        let tag = (hash >> 32) as u32;
        let mut pos = self.home(tag);
        while self.entries[pos as usize] != 0 {
            pos = (pos + 1) & self.mask;
        }
        self.entries[pos as usize] = (u64::from(tag) << 32) | u64::from(slot + 1);
    }

    /// Removes `slot`'s entry (added under `hash`).
    fn remove(&mut self, hash: u64, slot: u32) {
        let Some(mut hole) = self.position(hash, slot) else {
            return;
        };
        let mut pos = hole;
        loop {
            pos = (pos + 1) & self.mask;
            let e = self.entries[pos as usize];
            if e == 0 {
                break;
            }
            // The entry may fill the hole if its home is not cyclically within (hole, pos].
            let home = self.home((e >> 32) as u32);
            if pos.wrapping_sub(home) & self.mask >= pos.wrapping_sub(hole) & self.mask {
                self.entries[hole as usize] = e;
                hole = pos;
            }
        }
        self.entries[hole as usize] = 0;
    }

    fn position(&self, hash: u64, slot: u32) -> Option<u32> {
        let mut pos = self.home((hash >> 32) as u32);
        loop {
            let e = self.entries[pos as usize];
            if e == 0 {
                return None;
            }
            if e as u32 == slot + 1 {
                return Some(pos);
            }
            pos = (pos + 1) & self.mask;
        }
    }

    /// The entry a lookup of `hash` starts at, for [`quench_port::cache::prefetch`].
    #[inline]
    fn first(&self, hash: u64) -> &u64 {
        &self.entries[self.home((hash >> 32) as u32) as usize]
    }
}

/// The odd constants [`key_hash`] XORs its words with and folds by (fractional digits of pi,
/// the low bit set).
const KEY_K: [u64; 6] = [
    0x243F_6A88_85A3_08D3,
    0x1319_8A2E_0370_7345,
    0xA409_3822_299F_31D1,
    0x082E_FA98_EC4E_6C89,
    0x4528_21E6_38D0_1377,
    0xBE54_66CF_34E9_0C6D,
];

/// 64 x 64 -> 128-bit multiplication, the halves folded by exclusive or.
#[inline(always)]
fn fold_mul(a: u64, b: u64) -> u64 {
    let m = u128::from(a) * u128::from(b);
    (m >> 64) as u64 ^ m as u64
}

/// The hash [`FlowTable`] indexes `key` by, once per frame. A key is fixed size, so it is read
/// as five 64-bit words (the variant in the top octet of the last), each XORed with its own
/// odd constant so that a zero word (the top half of an IPv4-mapped address) does not zero a
/// product, multiplied in pairs (wyhash's "mum": three multiplications that do not wait for
/// one another, where a hasher fed field by field chains one per field) and folded by one
/// more. Every key bit reaches both halves of the result: the index takes its tag and home
/// position from the high half.
#[inline]
pub fn key_hash(key: &FlowKey) -> u64 {
    let w = key_words(key);
    let a = fold_mul(w[0] ^ KEY_K[0], w[1] ^ KEY_K[1]);
    let b = fold_mul(w[2] ^ KEY_K[2], w[3] ^ KEY_K[3]);
    let c = fold_mul(w[4] ^ KEY_K[4], KEY_K[5]);
    fold_mul(a ^ KEY_K[5], b ^ c)
}

/// A flow key as five words: two keys are equal exactly when their words are.
#[inline]
fn key_words(key: &FlowKey) -> [u64; 5] {
    let word = |b: &[u8]| {
        let mut w = [0u8; 8];
        w.copy_from_slice(b);
        u64::from_le_bytes(w)
    };
    match *key {
        FlowKey::CnTag { src, rpid } => {
            let MacAddr(a, b, c, d, e, f) = src;
            let mac = u64::from_le_bytes([a, b, c, d, e, f, 0, 0]);
            [mac, 0, 0, 0, u64::from(rpid)]
        }
        FlowKey::RoceQp { src, dst, qp } => [
            u64::from(u32::from(src)),
            u64::from(u32::from(dst)),
            0,
            0,
            u64::from(qp) | 1 << 56,
        ],
        FlowKey::Ip(t) => [
            word(&t.src[..8]),
            word(&t.src[8..]),
            word(&t.dst[..8]),
            word(&t.dst[8..]),
            u64::from(t.protocol)
                | u64::from(t.src_port) << 8
                | u64::from(t.dst_port) << 24
                | 2 << 56,
        ],
    }
}

/// What to do with a new flow's frame when the table is full of busy flows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WhenFull {
    /// Send it at once, unpaced (counted `bypass_frames`).
    #[default]
    Bypass,
    /// Drop it (counted `full_drops`).
    Drop,
}

/// Limits of the flow table.
#[derive(Clone, Copy, Debug)]
pub struct TableConfig {
    pub max_flows: usize,
    /// Octets each flow may queue.
    pub queue_bytes: u32,
    /// A flow with an empty queue and no frame for this long is evicted.
    pub idle_timeout: Duration,
    pub when_full: WhenFull,
    /// Wheel resolution (a power of two nanoseconds).
    pub tick: Duration,
    /// The RPs' line rate C: a flow never leaves faster.
    pub line_rate: Rate,
    /// Give each flow a 16-bit RPID for the CN-TAG the appliance adds (QCN).
    pub rpids: bool,
    /// How far behind its schedule a flow may fall (the loop was late) and still catch up by
    /// sending what it owes at once; beyond it, sending time is given up (counted per flow).
    pub max_catch_up: Duration,
}

impl Default for TableConfig {
    fn default() -> Self {
        TableConfig {
            max_flows: 1 << 20,
            // 1 MiB: 8 ms at 1 Gb/s.
            queue_bytes: 1 << 20,
            idle_timeout: Duration::from_secs(10),
            when_full: WhenFull::Bypass,
            tick: Duration::from_nanos(256),
            line_rate: Rate::from_gbps(1),
            rpids: false,
            max_catch_up: MAX_CATCH_UP,
        }
    }
}

/// Counters of the flow table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct TableCounters {
    pub queued_frames: u64,
    pub released_frames: u64,
    pub released_bytes: u64,
    /// Frames that did not fit their flow's queue.
    pub queue_drops: u64,
    /// Frames sent unpaced because the table was full of busy flows (`when_full = bypass`).
    pub bypass_frames: u64,
    /// Frames dropped because the table was full of busy flows (`when_full = drop`).
    pub full_drops: u64,
    pub flows_created: u64,
    /// Flows evicted after `idle_timeout`.
    pub idle_evictions: u64,
    /// Idle flows whose slot a new flow took because the table was full.
    pub full_evictions: u64,
    /// Flows that got no RPID (all 65,535 in use): their frames leave without a CN-TAG.
    pub no_rpid: u64,
    pub cnms: u64,
    pub cnps: u64,
    /// Feedback the RP refused (QntzFb out of range, QCN limiter pool full).
    pub refused_feedback: u64,
}

/// What [`FlowTable::on_inside`] did with a frame.
#[derive(Debug, PartialEq, Eq)]
pub enum Admitted<F> {
    /// Queued for the flow (the slot index).
    Queued(u32),
    /// The flow was idle and its pacer allows the frame now: released at once, as
    /// [`FlowTable::poll_release`] would have released it next ([`HostCore::wake_and_transmit`]).
    Released(Release<F>),
    /// The flow's queue is full: the frame is handed back to be freed.
    Dropped(F),
    /// The table is full of busy flows and the policy is `bypass`: send the frame now.
    Bypass(F),
    /// The table is full of busy flows and the policy is `drop`.
    Refused(F),
}

/// A frame the table releases.
#[derive(Debug, PartialEq, Eq)]
pub struct Release<F> {
    pub slot: u32,
    pub len: u32,
    /// When it entered the appliance (for the latency the appliance adds).
    pub arrived: Instant,
    pub frame: F,
}

/// One flow as the host core holds it (the table's slot `i` is the core's flow
/// [`FlowHandle`]`(i)`): its queue, which is what the core releases ([`Source`]), and what
/// each of its frames reads besides (the key a lookup compares, the RPID of the CN-TAG, the
/// idle clock). It lives in the core's flow slot, so a frame's flow is the hot lines of one
/// slot on one page (three of four lines, `host::core::Flow`), where a slot of the table's own
/// (one line) and the core's (three) were on two: at a million flows each page a frame touches
/// costs a page walk before its lines can come (docs/design.md, "Sender appliance").
/// [`SlotCold`] holds the rest.
#[derive(Debug)]
pub struct TableFlow<F> {
    queue: Queued<F>,
    key: FlowKey,
    rpid: Option<u16>,
    last_active: Instant,
}

impl<F> TableFlow<F> {
    /// The flow's key.
    pub fn key(&self) -> &FlowKey {
        &self.key
    }

    /// The flow's queue.
    pub fn queue(&self) -> &Queued<F> {
        &self.queue
    }
}

impl<F> Source for TableFlow<F> {
    /// When the frame arrived, and the frame.
    type Item = (Instant, F);

    #[inline]
    fn peek(&self) -> Option<u32> {
        self.queue.peek()
    }

    #[inline]
    fn take(&mut self) -> (Instant, F) {
        self.queue.take()
    }

    fn backlogged(&self) -> bool {
        self.queue.backlogged()
    }
}

/// The rest of slot `i` (`FlowTable::cold`), read on feedback, drops, eviction and reports.
struct SlotCold {
    src_mac: MacAddr,
    dst_mac: MacAddr,
    /// The next flow holding the same DestQP for the same source (the CNP index's chain), as
    /// its slot + 1, 0 for none: four octets where an `Option<u32>` takes eight
    /// ([`SlotCold::cnp_next`]).
    cnp_next: u32,
    drops: u64,
}

impl SlotCold {
    /// The next flow in the CNP index's chain.
    fn cnp_next(&self) -> Option<u32> {
        self.cnp_next.checked_sub(1)
    }

    fn set_cnp_next(&mut self, next: Option<u32>) {
        // A slot is below `max_flows` (at most 2^24): slot + 1 fits.
        self.cnp_next = next.map_or(0, |n| n + 1);
    }
}

/// A flow's figures, for the control socket and the report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowView {
    pub key: FlowKey,
    pub fid: FlowId,
    pub rpid: Option<u16>,
    pub rate: Rate,
    pub queued_bytes: u32,
    pub sent_bytes: u64,
    pub sent_frames: u64,
    pub drops: u64,
}

/// The flow table. See the module docs.
pub struct FlowTable<F> {
    cfg: TableConfig,
    core: HostCore<TableFlow<F>>,
    /// Indexed as the core's flows: slot `i` belongs to [`FlowHandle`]`(i)`, so a slot freed in
    /// the core is the one the core hands the next new flow. As long as the core's slots.
    cold: Vec<SlotCold>,
    by_key: KeyIndex,
    /// Per (DestQP, flow source) a CNP can name, the first flow holding it; the others are
    /// chained through [`SlotCold::cnp_next`]. Flows to different destinations may hold the same
    /// QP number (each destination numbers its own), so the chain is usually one long.
    by_cnp: FastMap<(u32, Ipv4Addr), u32>,
    by_rpid: FastMap<u16, u32>,
    hand: usize,
    /// [`FlowTable::set_release_on_arrival`].
    release_on_arrival: bool,
    next_fid: u32,
    next_rpid: u16,
    live: usize,
    counters: TableCounters,
}

impl<F> FlowTable<F> {
    pub fn new(cfg: TableConfig, rp: HostRp) -> Result<Self, WheelError> {
        // A flow's priority is paused while PFC PAUSE frames from the network say so
        // ([`FlowTable::on_pause`]); its schedule moves on by the pause (the default
        // `pause_shifts_schedule`), so it owes nothing for it.
        let pacing = PacingConfig {
            tick: cfg.tick,
            max_catch_up: cfg.max_catch_up,
            catch_up_speed: None,
            ..PacingConfig::default()
        };
        // The flows' slots at their final size at once, on huge pages
        // (`cache::advise_huge_pages`): a frame's flow is one of up to `max_flows` at random,
        // and on 4 KiB pages each of its lines would also cost a TLB miss. Only what the flows
        // touch is ever resident; without the address space for all of them at once
        // (`max_flows` up to 16M: 4 GiB), the slots grow with the flows, on normal pages.
        let mut core = HostCore::new(pacing, rp, None)?;
        core.reserve_flows(cfg.max_flows);
        Ok(FlowTable {
            cfg,
            core,
            cold: Vec::new(),
            by_key: KeyIndex::new(cfg.max_flows),
            by_cnp: FastMap::default(),
            by_rpid: FastMap::default(),
            hand: 0,
            release_on_arrival: true,
            next_fid: 0,
            next_rpid: 0,
            live: 0,
            counters: TableCounters::default(),
        })
    }

    pub fn counters(&self) -> TableCounters {
        self.counters
    }

    /// The flows' reaction points.
    pub fn rp(&self) -> &HostRp {
        self.core.host_rp()
    }

    /// The host core the flows are released by (for the pacing audit).
    pub fn core(&self) -> &HostCore<TableFlow<F>> {
        &self.core
    }

    /// Frames queued on all flows.
    pub fn backlog(&self) -> u64 {
        self.counters.queued_frames - self.counters.released_frames
    }

    /// Flows held.
    pub fn flows(&self) -> usize {
        self.live
    }

    /// Octets of memory one flow costs with nothing queued: the core's slot (the flow with its
    /// queue, key, RPID and idle clock, as allocated: [`HostCore::bytes_per_slot`]), the rest
    /// of the table's slot ([`SlotCold`]), two key index entries (the index holds twice
    /// `max_flows`), and the entries in the CNP and core id indexes (a hashbrown entry is the
    /// key, the value and one control octet, at a load factor of at most 7/8).
    pub fn bytes_per_flow() -> usize {
        let entry = |k: usize| (k + 4 + 1) * 8 / 7;
        HostCore::<TableFlow<F>>::bytes_per_slot()
            + std::mem::size_of::<SlotCold>()
            + 2 * 8
            + entry(std::mem::size_of::<(u32, Ipv4Addr)>())
            + entry(std::mem::size_of::<FlowId>())
    }

    fn flow(&self, i: u32) -> Option<&Flow<TableFlow<F>>> {
        self.core.flow(FlowHandle(i))
    }

    /// Slot `i`'s flow as the table holds it, if live.
    #[inline]
    fn entry(&self, i: u32) -> Option<&TableFlow<F>> {
        self.core.flow(FlowHandle(i)).map(|f| &f.source)
    }

    /// The flow's current rate: its RP's, capped at the line rate.
    fn rate(&self, i: u32) -> Rate {
        self.core.rate(FlowHandle(i))
    }

    /// Asks the cache for the key index entry a lookup of `hash` ([`key_hash`]) starts at: the
    /// first stage of a burst's lookups, [`FlowTable::prefetch_flow`] the second.
    #[inline]
    pub fn prefetch(&self, hash: u64) {
        quench_port::cache::prefetch(self.by_key.first(hash), 1);
    }

    /// Asks the cache for the state of the flow whose index entry carries `hash` (the core's
    /// slot, the key in it), reading the index entry [`FlowTable::prefetch`] asked for.
    #[inline]
    pub fn prefetch_flow(&self, hash: u64) {
        if let Some(i) = self.by_key.find(hash, |_| true) {
            self.core.prefetch(FlowHandle(i));
        }
    }

    fn alloc_rpid(&mut self) -> Option<u16> {
        if self.by_rpid.len() >= usize::from(u16::MAX) {
            return None;
        }
        loop {
            self.next_rpid = self.next_rpid.wrapping_add(1).max(1);
            if !self.by_rpid.contains_key(&self.next_rpid) {
                return Some(self.next_rpid);
            }
        }
    }

    /// Removes slot `i`'s flow from the indexes and the core (the slot must be idle).
    fn unlink(&mut self, i: u32) {
        let Some((key, rpid)) = self.entry(i).map(|e| (e.key, e.rpid)) else {
            return;
        };
        if let Some(k) = key.cnp_key() {
            self.cnp_unlink(i, (k.qp, k.src));
        }
        self.by_key.remove(key_hash(&key), i);
        if let Some(r) = rpid {
            self.by_rpid.remove(&r);
        }
        self.core.remove_flow(FlowHandle(i));
        self.live -= 1;
    }

    /// Slot `i` holds a flow with nothing queued.
    fn idle(&self, i: u32) -> bool {
        self.entry(i).is_some_and(|e| e.queue.is_empty())
    }

    /// Advances the clock hand over at most `n` slots; the first for which `pick` holds.
    fn sweep(&mut self, n: usize, pick: impl Fn(&Self, u32) -> bool) -> Option<u32> {
        let len = self.cold.len();
        for _ in 0..n.min(len) {
            self.hand = (self.hand + 1) % len;
            if pick(self, self.hand as u32) {
                return Some(self.hand as u32);
            }
        }
        None
    }

    /// Makes room for a new flow when the table is full: the slot of an idle flow the clock
    /// hand finds, freed in the core (which hands it to the next flow it adds).
    fn make_room(&mut self) -> bool {
        if self.live < self.cfg.max_flows {
            return true;
        }
        let Some(i) = self.sweep(FULL_SCAN, Self::idle) else {
            return false;
        };
        self.unlink(i);
        self.counters.full_evictions += 1;
        true
    }

    /// Adds flow `key` (key hash `hash`); `None` when the table is full of busy flows.
    fn create(
        &mut self,
        now: Instant,
        hash: u64,
        key: FlowKey,
        priority: u8,
        macs: [MacAddr; 2],
    ) -> Option<u32> {
        if !self.make_room() {
            return None;
        }
        self.next_fid = self.next_fid.wrapping_add(1);
        let spec = FlowSpec {
            id: FlowId(self.next_fid),
            // The priority of its first frame: what PFC pauses (802.1Qbb pauses a priority,
            // and a flow's frames share one).
            priority,
            cap: self.cfg.line_rate,
            start: now,
        };
        let flow = TableFlow {
            queue: Queued::new(),
            key,
            rpid: None,
            last_active: now,
        };
        // A flow id still held after 2^32 flows: no flow (the slot stays free in the core).
        let handle = self.core.add_flow(spec, flow).ok()?;
        let i = handle.0;
        let rpid = if self.cfg.rpids {
            let r = self.alloc_rpid();
            if r.is_none() {
                self.counters.no_rpid += 1;
            }
            r
        } else {
            None
        };
        if let Some(e) = self.core.source_mut(handle) {
            e.rpid = rpid;
        }
        let cold = SlotCold {
            src_mac: macs[0],
            dst_mac: macs[1],
            cnp_next: 0,
            drops: 0,
        };
        // The core reuses a freed slot or adds one at the end: the table's cold part follows.
        if (i as usize) < self.cold.len() {
            self.cold[i as usize] = cold;
        } else {
            debug_assert_eq!(i as usize, self.cold.len());
            self.cold.push(cold);
        }
        self.by_key.insert(hash, i);
        if let Some(k) = key.cnp_key() {
            let head = self.by_cnp.insert((k.qp, k.src), i);
            self.cold[i as usize].set_cnp_next(head);
        }
        if let Some(r) = rpid {
            self.by_rpid.insert(r, i);
        }
        self.live += 1;
        self.counters.flows_created += 1;
        Some(i)
    }

    /// The slot of flow `key` (802.1p priority `priority`, source and destination MACs `src`,
    /// `dst`), created if new; when the table is full of busy flows, the policy that applies
    /// (counted here).
    pub fn slot_for(
        &mut self,
        now: Instant,
        key: FlowKey,
        priority: u8,
        src: MacAddr,
        dst: MacAddr,
    ) -> Result<u32, WhenFull> {
        self.slot_for_hashed(now, key_hash(&key), key, priority, src, dst)
    }

    /// [`FlowTable::slot_for`] with the key's [`key_hash`] already computed (for a burst whose
    /// lookups were prefetched with it).
    pub fn slot_for_hashed(
        &mut self,
        now: Instant,
        hash: u64,
        key: FlowKey,
        priority: u8,
        src: MacAddr,
        dst: MacAddr,
    ) -> Result<u32, WhenFull> {
        if let Some(i) = self.find_hashed(hash, &key) {
            return Ok(i);
        }
        self.create(now, hash, key, priority, [src, dst])
            .ok_or_else(|| {
                match self.cfg.when_full {
                    WhenFull::Bypass => self.counters.bypass_frames += 1,
                    WhenFull::Drop => self.counters.full_drops += 1,
                }
                self.cfg.when_full
            })
    }

    /// Queues a frame of `len` octets on the flow in `slot` (from [`FlowTable::slot_for`]).
    pub fn enqueue(&mut self, now: Instant, slot: u32, len: u32, frame: F) -> Admitted<F> {
        let h = FlowHandle(slot);
        let Some(flow) = self.core.source_mut(h) else {
            return Admitted::Dropped(frame);
        };
        flow.last_active = now;
        if let Err(frame) = flow.queue.push(len, now, frame, self.cfg.queue_bytes) {
            self.cold[slot as usize].drops += 1;
            self.counters.queue_drops += 1;
            return Admitted::Dropped(frame);
        }
        self.counters.queued_frames += 1;
        // An idle flow keeps no credit: its first frame goes at once, the next on its rate.
        if !self.release_on_arrival {
            self.core.wake(now, h);
            return Admitted::Queued(slot);
        }
        match self.core.wake_and_transmit(now, h) {
            Some(tx) => Admitted::Released(self.released(tx)),
            None => Admitted::Queued(slot),
        }
    }

    /// Whether [`FlowTable::enqueue`] may release a frame at once (default: yes). A driver
    /// whose transmit backlog is full says no: the frames then wait on their flows.
    pub fn set_release_on_arrival(&mut self, yes: bool) {
        self.release_on_arrival = yes;
    }

    /// A data frame of `len` octets of flow `key` (an untagged frame: priority 0) entered the
    /// inside port: [`FlowTable::slot_for`] then [`FlowTable::enqueue`].
    pub fn on_inside(
        &mut self,
        now: Instant,
        key: FlowKey,
        src: MacAddr,
        dst: MacAddr,
        len: u32,
        frame: F,
    ) -> Admitted<F> {
        match self.slot_for(now, key, 0, src, dst) {
            Ok(i) => self.enqueue(now, i, len, frame),
            Err(WhenFull::Bypass) => Admitted::Bypass(frame),
            Err(WhenFull::Drop) => Admitted::Refused(frame),
        }
    }

    /// A PFC frame from the network, on a link of `link_rate`: the flows of each priority it
    /// pauses release nothing
    /// until the pause ends. Their frames wait in their queues and their schedules move on by
    /// the pause ([`HostCore::handle_pfc`]).
    pub fn on_pfc(&mut self, now: Instant, link_rate: Rate, pfc: &quench_wire::pfc::PfcRepr) {
        self.core.handle_pfc(now, link_rate, pfc);
    }

    /// The next frame due at `now`, if any.
    pub fn poll_release(&mut self, now: Instant) -> Option<Release<F>> {
        let tx = self.core.poll_transmit(now)?;
        Some(self.released(tx))
    }

    /// Counts a frame the core released.
    fn released(&mut self, tx: Transmit<(Instant, F)>) -> Release<F> {
        let slot = tx.handle.0;
        self.counters.released_frames += 1;
        self.counters.released_bytes += u64::from(tx.len);
        let (arrived, frame) = tx.item;
        Release {
            slot,
            len: tx.len,
            arrived,
            frame,
        }
    }

    /// Takes slot `i` out of the CNP chain of `at`.
    fn cnp_unlink(&mut self, i: u32, at: (u32, Ipv4Addr)) {
        let next = self.cold[i as usize].cnp_next();
        self.cold[i as usize].set_cnp_next(None);
        let Some(&head) = self.by_cnp.get(&at) else {
            return;
        };
        if head == i {
            match next {
                Some(n) => self.by_cnp.insert(at, n),
                None => self.by_cnp.remove(&at),
            };
            return;
        }
        let mut cur = head;
        while let Some(n) = self.cold[cur as usize].cnp_next() {
            if n == i {
                self.cold[cur as usize].set_cnp_next(next);
                return;
            }
            cur = n;
        }
    }

    /// The slot of the flow with `key`, if held.
    pub fn find(&self, key: &FlowKey) -> Option<u32> {
        self.find_hashed(key_hash(key), key)
    }

    fn find_hashed(&self, hash: u64, key: &FlowKey) -> Option<u32> {
        self.by_key
            .find(hash, |i| self.entry(i).is_some_and(|e| e.key == *key))
    }

    /// The flows a CNP for queue pair `qp` addressed to `src` may answer (those holding `qp`
    /// with source `src`), each with its slot and its own (QP, source, destination); which one
    /// it answers, if any, is [`quench_node::host::validate::check_cnp`]'s to say.
    pub fn cnp_flows(&self, qp: u32, src: Ipv4Addr) -> impl Iterator<Item = (u32, CnpKey)> + '_ {
        let mut next = self.by_cnp.get(&(qp, src)).copied();
        std::iter::from_fn(move || {
            let i = next?;
            next = self.cold[i as usize].cnp_next();
            Some((i, self.entry(i)?.key.cnp_key()?))
        })
    }

    /// The slot of the flow the appliance gave `rpid`, if held.
    pub fn find_rpid(&self, rpid: u16) -> Option<u32> {
        self.by_rpid.get(&rpid).copied()
    }

    /// The flow's key and MACs (source, destination); `None` for a slot without a flow.
    pub fn addresses(&self, slot: u32) -> Option<(FlowKey, MacAddr, MacAddr)> {
        let c = self.cold.get(slot as usize)?;
        Some((self.entry(slot)?.key, c.src_mac, c.dst_mac))
    }

    /// The RPID the appliance gave the flow (for the CN-TAG it adds).
    #[inline]
    pub fn rpid(&self, slot: u32) -> Option<u16> {
        self.entry(slot)?.rpid
    }

    fn feedback(&mut self, now: Instant, slot: u32, fb: Feedback) {
        if self.core.handle_feedback(now, FlowHandle(slot), fb) == Err(Refused::Rejected) {
            self.counters.refused_feedback += 1;
        }
    }

    /// A validated CNM for the flow in `slot` with quantised feedback `qntz_fb`.
    pub fn on_cnm(&mut self, now: Instant, slot: u32, qntz_fb: u8) {
        self.counters.cnms += 1;
        self.feedback(now, slot, Feedback::Cnm(qntz_fb));
    }

    /// A validated CNP for the flow in `slot`.
    pub fn on_cnp(&mut self, now: Instant, slot: u32) {
        self.counters.cnps += 1;
        self.feedback(now, slot, Feedback::Cnp);
    }

    /// Runs the reaction points' timers due at `now`.
    pub fn on_timeout(&mut self, now: Instant) {
        self.core.handle_timeout(now);
    }

    /// When a release or a reaction point's timer is next due.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.core.next_deadline()
    }

    /// Bounded idle eviction: looks at [`IDLE_SCAN`] slots.
    pub fn on_housekeeping(&mut self, now: Instant) {
        let timeout = self.cfg.idle_timeout;
        if let Some(i) = self.sweep(IDLE_SCAN, |t, i| {
            t.entry(i).is_some_and(|e| {
                e.queue.is_empty() && now.saturating_since(e.last_active) >= timeout
            })
        }) {
            self.unlink(i);
            self.counters.idle_evictions += 1;
        }
    }

    /// The flow in `slot`, if it holds one.
    pub fn view(&self, slot: u32) -> Option<FlowView> {
        let f = self.flow(slot)?;
        Some(FlowView {
            key: f.source.key,
            fid: f.spec.id,
            rpid: f.source.rpid,
            rate: self.rate(slot),
            queued_bytes: f.source.queue.bytes() as u32,
            sent_bytes: f.bytes_sent,
            sent_frames: f.seq,
            drops: self.cold[slot as usize].drops,
        })
    }

    /// The `n` flows that have sent the most octets, most first: one pass over the table
    /// (a selection, not a sort of every flow).
    pub fn top(&self, n: usize) -> Vec<FlowView> {
        let mut v: Vec<(u64, u32)> = self
            .core
            .flows()
            .map(|(h, f)| (f.bytes_sent, h.0))
            .collect();
        if v.len() > n && n > 0 {
            v.select_nth_unstable_by(n - 1, |a, b| b.cmp(a));
        }
        v.truncate(n);
        v.sort_unstable_by(|a, b| b.cmp(a));
        v.into_iter().filter_map(|(_, i)| self.view(i)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quench_wire::classify::FiveTuple;

    const M1: MacAddr = MacAddr(2, 0, 0, 0, 0, 1);
    const M2: MacAddr = MacAddr(2, 0, 0, 0, 0, 2);

    fn tuple(sport: u16) -> FlowKey {
        FlowKey::Ip(FiveTuple::v4(
            Ipv4Addr::new(10, 0, 0, 1),
            Ipv4Addr::new(10, 0, 0, 2),
            17,
            sport,
            9,
        ))
    }

    fn table(cfg: TableConfig) -> FlowTable<u32> {
        FlowTable::new(cfg, HostRp::None).unwrap()
    }

    /// Releases everything due by `at`: a flow's first poll puts it on the wheel at that
    /// poll's time, so a second poll a tick later takes what the first started.
    fn drain(t: &mut FlowTable<u32>, at: Instant) {
        for now in [at, at + Duration::from_micros(1)] {
            while t.poll_release(now).is_some() {}
        }
    }

    fn queued(a: Admitted<u32>) -> u32 {
        match a {
            Admitted::Queued(i) => i,
            other => panic!("{other:?}"),
        }
    }

    /// The key index against a map, through random inserts and removals in a small array
    /// where runs wrap around the end and hashes share home positions and tags.
    #[test]
    fn key_index_agrees_with_a_map_through_inserts_and_removals() {
        let mut idx = KeyIndex::new(8);
        assert_eq!(idx.entries.len(), 16);
        let mut model: HashMap<u32, u64> = HashMap::new();
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let slot = (x % 12) as u32;
            // Tags whose home positions collide (15 and 31 at 15, 0 and 16 at 0; 15's run wraps).
            let hash = [15u64, 31, 0, 16, 14, 7][(x >> 8) as usize % 6] << 32 | (x >> 40);
            match model.get(&slot) {
                Some(&h) if x & 1 == 0 => {
                    idx.remove(h, slot);
                    model.remove(&slot);
                }
                None if model.len() < 8 => {
                    idx.insert(hash, slot);
                    model.insert(slot, hash);
                }
                _ => {}
            }
            for s in 0..12u32 {
                let got = model.get(&s).and_then(|&h| idx.find(h, |i| i == s));
                assert_eq!(got, model.get(&s).map(|_| s), "slot {s}");
            }
            assert_eq!(idx.entries.iter().filter(|&&e| e != 0).count(), model.len());
        }
    }

    /// The flow key hash spreads keys that differ in a few bits (consecutive ports, addresses,
    /// QPs, RPIDs): over 65,536 such keys, their index tags (the hash's high half) almost
    /// never collide (0.5 pairs expected of a uniform 32-bit hash) and their home positions in
    /// an index of 2^17 entries cover the share a uniform hash does (1 - e^-0.5 = 39.3 %); a
    /// hash that left some key bits out of the high half fails both.
    #[test]
    fn flow_keys_spread_over_the_index() {
        let a = |n: u32| Ipv4Addr::from(0x0a00_0000 | n);
        let keys: Vec<FlowKey> = (0..1u32 << 16)
            .map(|k| match k % 4 {
                0 => FlowKey::Ip(FiveTuple::v4(
                    a(1),
                    a(2),
                    17,
                    k as u16,
                    0x4000 | (k >> 8) as u16,
                )),
                1 => FlowKey::Ip(FiveTuple::v4(a(k), a(2), 6, 80, 443)),
                2 => FlowKey::RoceQp {
                    src: a(1),
                    dst: a(k >> 8),
                    qp: k,
                },
                _ => FlowKey::CnTag {
                    src: MacAddr(2, 0, 0, 0, (k >> 8) as u8, k as u8),
                    rpid: (k >> 4) as u16,
                },
            })
            .collect();
        let hashes: Vec<u64> = keys.iter().map(key_hash).collect();
        let mut tags: Vec<u32> = hashes.iter().map(|h| (h >> 32) as u32).collect();
        tags.sort_unstable();
        let same = tags.windows(2).filter(|w| w[0] == w[1]).count();
        assert!(same <= 4, "{same} tag collisions");
        let mut homes: Vec<u32> = tags.iter().map(|t| t & ((1 << 17) - 1)).collect();
        homes.sort_unstable();
        homes.dedup();
        let expect = (1u32 << 17) as f64 * (1.0 - (-0.5f64).exp());
        assert!(
            homes.len() as f64 > 0.97 * expect,
            "{} homes, {expect:.0} expected",
            homes.len()
        );
    }

    /// What a frame reads of its flow (the key a lookup compares, of any kind, IPv6 included;
    /// the RPID, the idle clock; the core's flow with its queue holding a frame inline) is one
    /// slot of the core: four cache lines for a frame handle of up to 16 octets (the bench's
    /// pooled buffer and its length), five for the drivers' `AnyFrame` (48 octets), as many
    /// octets as the table's own slot (one line) and the core's (three, or four) took apart.
    /// A frame that leaves at once or on its schedule touches only the slot's hot lines
    /// (`host::core::Flow`'s order): three of the four, four of the five.
    #[test]
    fn a_flows_slot_is_four_cache_lines_or_five_with_the_drivers_frames() {
        fn slot<F>() -> (usize, usize) {
            (
                HostCore::<TableFlow<F>>::bytes_per_slot(),
                HostCore::<TableFlow<F>>::hot_lines(),
            )
        }
        assert_eq!(slot::<u32>(), (4 * 64, 3));
        assert_eq!(slot::<(Box<[u8; 2048]>, usize)>(), (4 * 64, 3));
        let (any, hot) = slot::<quench_port::any::AnyFrame>();
        assert!(
            any <= 5 * 64 && hot < any / 64,
            "{any} octets, {hot} hot lines"
        );
    }

    #[test]
    fn releases_each_flow_at_its_line_rate_in_order() {
        let mut t = table(TableConfig {
            line_rate: Rate::from_mbps(100),
            ..TableConfig::default()
        });
        let t0 = Instant::from_nanos(1_000_000);
        for n in 0..100u32 {
            queued(t.on_inside(t0, tuple(1), M1, M2, 1000, n));
            queued(t.on_inside(t0, tuple(2), M1, M2, 500, 1000 + n));
        }
        // 100 Mb/s: 80 us per 1000-octet frame, 40 us per 500-octet frame.
        let mut got: HashMap<u32, Vec<(u64, u32)>> = HashMap::new();
        let mut now = t0.as_nanos();
        while now < t0.as_nanos() + 2_000_000 {
            while let Some(r) = t.poll_release(Instant::from_nanos(now)) {
                got.entry(r.slot).or_default().push((now, r.frame));
            }
            now += 1_000;
        }
        // In 2 ms: frames at t0, t0 + 80 us, ..., t0 + 1920 us = 25; and 50 of the other flow.
        let a = &got[&0];
        let b = &got[&1];
        assert_eq!(a.len(), 25);
        assert_eq!(b.len(), 50);
        assert!(a.windows(2).all(|w| w[0].1 < w[1].1));
        // Never before its release time, at most one 1 us poll step after it.
        for (k, (at, _)) in a.iter().enumerate() {
            let due = t0.as_nanos() + 80_000 * k as u64;
            assert!(
                *at >= due && *at < due + 1_256,
                "frame {k} at {at}, due {due}"
            );
        }
        assert_eq!(t.counters().released_frames, 75);
    }

    /// The pacing audit `quench send` has, on the appliance's queued flows: a flow kept
    /// backlogged is within 1 % of its rate's integral in every window; a flow whose queue ran
    /// dry is left out (it sent less than its rate by design).
    #[test]
    fn backlogged_flows_are_audited_and_flows_that_ran_dry_are_not() {
        use quench_node::host::audit::PaceAudit;
        let line = Rate::from_mbps(100);
        let mut t = table(TableConfig {
            line_rate: line,
            ..TableConfig::default()
        });
        let mut audit = PaceAudit::new(Duration::from_millis(100), MAX_CATCH_UP);
        let t0 = Instant::from_nanos(1_000_000);
        let busy = queued(t.on_inside(t0, tuple(1), M1, M2, 1000, 0));
        // Backlogged when the first window opens, dry 400 us later.
        for _ in 0..5 {
            queued(t.on_inside(t0, tuple(2), M1, M2, 1000, 0));
        }
        let mut sent = [0u32; 2];
        let mut now = t0;
        while now < t0 + Duration::from_millis(350) {
            if t.view(busy).unwrap().queued_bytes < 3000 {
                queued(t.on_inside(now, tuple(1), M1, M2, 1000, 0));
            }
            let core = t.core();
            audit.sample(now, core, |id| {
                core.find(id).map_or(Rate::ZERO, |h| core.rate(h))
            });
            while let Some(r) = t.poll_release(now) {
                sent[usize::from(r.slot != busy)] += 1;
            }
            now += Duration::from_micros(1);
        }
        assert_eq!(sent[1], 5);
        // 100 Mb/s: a 1000-octet frame every 80 us.
        assert!((4370..=4380).contains(&sent[0]), "{sent:?}");
        assert_eq!(audit.deviations.len(), 3, "{:?}", audit.deviations);
        assert_eq!(audit.within(0.01), Some(1.0), "{:?}", audit.deviations);
    }

    #[test]
    fn per_flow_queue_is_bounded_in_octets() {
        let mut t = table(TableConfig {
            queue_bytes: 2500,
            ..TableConfig::default()
        });
        let now = Instant::ZERO;
        queued(t.on_inside(now, tuple(1), M1, M2, 1000, 1));
        queued(t.on_inside(now, tuple(1), M1, M2, 1000, 2));
        assert_eq!(
            t.on_inside(now, tuple(1), M1, M2, 1000, 3),
            Admitted::Dropped(3)
        );
        queued(t.on_inside(now, tuple(1), M1, M2, 500, 4));
        assert_eq!(t.counters().queue_drops, 1);
        assert_eq!(t.view(0).unwrap().drops, 1);
        assert_eq!(t.view(0).unwrap().queued_bytes, 2500);
    }

    #[test]
    fn full_table_recycles_an_idle_flow_then_applies_the_policy() {
        for policy in [WhenFull::Bypass, WhenFull::Drop] {
            let mut t = table(TableConfig {
                max_flows: 2,
                when_full: policy,
                ..TableConfig::default()
            });
            let t0 = Instant::from_nanos(10);
            queued(t.on_inside(t0, tuple(1), M1, M2, 100, 1));
            queued(t.on_inside(t0, tuple(2), M1, M2, 100, 2));
            // Both busy: the policy decides.
            let got = t.on_inside(t0, tuple(3), M1, M2, 100, 3);
            match policy {
                WhenFull::Bypass => assert_eq!(got, Admitted::Bypass(3)),
                WhenFull::Drop => assert_eq!(got, Admitted::Refused(3)),
            }
            // Drain both: idle; the new flow takes a slot and the old key is gone.
            let t1 = Instant::from_nanos(1_000_000);
            drain(&mut t, t1);
            queued(t.on_inside(t1, tuple(3), M1, M2, 100, 4));
            let c = t.counters();
            assert_eq!(c.full_evictions, 1);
            assert_eq!(c.bypass_frames + c.full_drops, 1);
            assert_eq!(t.flows(), 2);
            assert_eq!(
                [tuple(1), tuple(2)]
                    .iter()
                    .filter(|k| t.find(k).is_some())
                    .count(),
                1
            );
        }
    }

    #[test]
    fn idle_flows_are_evicted_after_the_timeout_only() {
        let mut t = table(TableConfig {
            idle_timeout: Duration::from_millis(5),
            ..TableConfig::default()
        });
        let t0 = Instant::from_nanos(1_000);
        for p in 0..8 {
            queued(t.on_inside(t0, tuple(p), M1, M2, 100, 0));
        }
        let t1 = t0 + Duration::from_millis(1);
        drain(&mut t, t1);
        for _ in 0..100 {
            t.on_housekeeping(t0 + Duration::from_millis(4));
        }
        assert_eq!(t.flows(), 8);
        for _ in 0..100 {
            t.on_housekeeping(t0 + Duration::from_millis(6));
        }
        assert_eq!(t.flows(), 0);
        assert_eq!(t.counters().idle_evictions, 8);
        // Freed slots are reused before the table grows.
        queued(t.on_inside(t0, tuple(99), M1, M2, 100, 0));
        assert_eq!(t.cold.len(), 8);
    }

    #[test]
    fn cnp_index_lists_every_flow_holding_a_qp_as_flows_come_and_go() {
        // Flows from one source to different destinations may hold the same QP number.
        let src = Ipv4Addr::new(10, 0, 0, 1);
        let roce = |dst: u8, qp: u32| FlowKey::RoceQp {
            src,
            dst: Ipv4Addr::new(10, 0, 0, dst),
            qp,
        };
        let mut t = table(TableConfig {
            max_flows: 3,
            ..TableConfig::default()
        });
        let mut keys = vec![roce(2, 7), roce(3, 7), roce(2, 8)];
        let mut now = Instant::from_nanos(10);
        for (n, &k) in keys.iter().enumerate() {
            queued(t.on_inside(now, k, M1, M2, 100, n as u32));
        }
        // Each new flow to another destination with QP 7 takes the slot of an idle one (the
        // head, the middle or the tail of a chain): the index keeps naming exactly the flows
        // held.
        for dst in 10..30 {
            for qp in [7, 8] {
                let mut want: Vec<(u32, CnpKey)> = keys
                    .iter()
                    .filter_map(|k| Some((t.find(k)?, k.cnp_key()?)))
                    .filter(|(_, c)| c.qp == qp)
                    .collect();
                let mut got: Vec<(u32, CnpKey)> = t.cnp_flows(qp, src).collect();
                want.sort_by_key(|w| w.0);
                got.sort_by_key(|g| g.0);
                assert_eq!(got, want, "qp {qp} before flow to .{dst}");
            }
            assert_eq!(t.cnp_flows(7, Ipv4Addr::new(10, 0, 0, 99)).count(), 0);
            now += Duration::from_millis(1);
            drain(&mut t, now);
            let k = roce(dst, if dst % 4 == 0 { 8 } else { 7 });
            queued(t.on_inside(now, k, M1, M2, 100, u32::from(dst)));
            keys.push(k);
        }
        assert_eq!(t.counters().full_evictions, 20);
    }

    #[test]
    fn dcqcn_cnp_cuts_only_the_named_flow_and_timers_recover_it() {
        let line = Rate::from_gbps(1);
        let p = rp::DcqcnParams::default().profile(line).unwrap();
        let mut t: FlowTable<u32> = FlowTable::new(
            TableConfig {
                line_rate: line,
                ..TableConfig::default()
            },
            HostRp::Dcqcn(p),
        )
        .unwrap();
        let t0 = Instant::from_nanos(1_000);
        let a = queued(t.on_inside(t0, tuple(1), M1, M2, 1000, 0));
        let b = queued(t.on_inside(t0, tuple(2), M1, M2, 1000, 0));
        let k = tuple(1).cnp_key().unwrap();
        assert_eq!(t.cnp_flows(k.qp, k.src).collect::<Vec<_>>(), [(a, k)]);
        t.on_cnp(t0, a);
        // DCQCN (mlx) cuts at the decrease check the CNP armed (within its 4 us default).
        let check = t0 + Duration::from_micros(50);
        t.on_timeout(check);
        let cut = t.view(a).unwrap().rate;
        assert!(cut < line, "{cut}");
        assert_eq!(t.view(b).unwrap().rate, line);
        let mut now = check;
        for _ in 0..100 {
            now += Duration::from_micros(100);
            t.on_timeout(now);
        }
        assert!(t.view(a).unwrap().rate > cut, "{}", t.view(a).unwrap().rate);
    }

    #[test]
    fn rpids_are_unique_among_held_flows_and_freed_with_them() {
        let mut t = table(TableConfig {
            rpids: true,
            idle_timeout: Duration::from_nanos(1),
            ..TableConfig::default()
        });
        let t0 = Instant::from_nanos(1_000);
        let a = queued(t.on_inside(t0, tuple(1), M1, M2, 100, 0));
        let b = queued(t.on_inside(t0, tuple(2), M1, M2, 100, 0));
        let (ra, rb) = (t.rpid(a).unwrap(), t.rpid(b).unwrap());
        assert_ne!(ra, rb);
        assert_eq!(t.find_rpid(ra), Some(a));
        drain(&mut t, t0 + Duration::from_millis(1));
        for _ in 0..10 {
            t.on_housekeeping(t0 + Duration::from_millis(2));
        }
        assert_eq!(t.find_rpid(ra), None);
    }
}
