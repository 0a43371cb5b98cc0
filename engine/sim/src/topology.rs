//! Topologies in the HPCC ns-3 simulator's text format, and shortest-path ECMP routing.
//!
//! Format (../shared/reference/dcqcn.md, "Formats worth reading and writing"):
//! "topology: first line `nodes switches links`, second the switch ids, then
//! `src dst rate delay err`." Rates are ns-3 `DataRate` strings (`100Gbps`), delays ns-3 `Time`
//! strings (`0.001ms`, `1us`), `err` a per-packet loss probability.
//!
//! Routing follows the ns-3 scratch program (`CalculateRoute`): a breadth-first search by hop
//! count from every host that never passes through another host; every neighbour one hop closer
//! is an equal-cost next hop, listed in the order the search reached them (neighbours taken in
//! [`ns3_neighbour_order`], the order of ns-3's node map). A switch picks one as HPCC's
//! `SwitchNode::GetOutDev` does: Murmur3 (x86, 32 bit) of the packet's source and destination
//! addresses and ports, seeded with the switch's node id, modulo the number of next hops.

use std::fmt::Write as _;

use thiserror::Error;
use units::{Duration, Rate};

/// One bidirectional link.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkSpec {
    pub a: u32,
    pub b: u32,
    pub rate: Rate,
    pub delay: Duration,
    /// Per-packet loss probability (ns-3 `ERROR_RATE_PER_LINK` style), applied at reception.
    pub err: f64,
}

/// Nodes, which of them are switches, and the links between them.
#[derive(Clone, Debug, PartialEq)]
pub struct Topology {
    pub nodes: u32,
    pub is_switch: Vec<bool>,
    pub links: Vec<LinkSpec>,
}

#[derive(Debug, Error, PartialEq)]
pub enum TopologyError {
    #[error("line {line}: {what}")]
    Syntax { line: usize, what: String },
    #[error("line {line}: node {node} out of range (the header says {nodes} nodes)")]
    NodeOutOfRange { line: usize, node: u32, nodes: u32 },
    #[error("the header promises {expected} {what}, the file has {found}")]
    Count {
        what: &'static str,
        expected: usize,
        found: usize,
    },
    #[error(
        "line {line}: host {host} and host {other} are joined directly; hosts must hang off \
         switches"
    )]
    HostToHost { line: usize, host: u32, other: u32 },
}

/// Parses an ns-3 `Time` string: a decimal number and a unit `s`, `ms`, `us`, `ns` (no unit: s).
pub fn parse_ns3_time(s: &str) -> Option<Duration> {
    let s = s.trim();
    let split = s
        .find(|c: char| c.is_ascii_alphabetic() && c != 'e' && c != 'E')
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let v: f64 = num.parse().ok()?;
    let scale = match unit {
        "" | "s" => 1e9,
        "ms" => 1e6,
        "us" => 1e3,
        "ns" => 1.0,
        "ps" => 1e-3,
        _ => return None,
    };
    let ns = v * scale;
    if !ns.is_finite() || ns < 0.0 || ns > u64::MAX as f64 {
        return None;
    }
    Some(Duration::from_nanos(ns.round() as u64))
}

/// Formats a duration the way ns-3 reads it back (`1000ns`).
pub fn format_ns3_time(d: Duration) -> String {
    format!("{}ns", d.as_nanos())
}

/// Non-empty lines split into whitespace tokens, `#` comments removed, with 1-based line numbers.
pub(crate) fn tokens(text: &str) -> impl Iterator<Item = (usize, Vec<&str>)> {
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.split('#').next().unwrap_or("")))
        .map(|(i, l)| (i, l.split_whitespace().collect::<Vec<_>>()))
        .filter(|(_, t)| !t.is_empty())
}

fn num<T: std::str::FromStr>(line: usize, what: &str, s: &str) -> Result<T, TopologyError> {
    s.parse().map_err(|_| TopologyError::Syntax {
        line,
        what: format!("{what}: `{s}` is not a number"),
    })
}

/// Every problem of one input file, in line order: a reader of ns-3's files lists them all in
/// one pass instead of stopping at the first.
#[derive(Debug, PartialEq)]
pub struct Problems<E>(pub Vec<E>);

impl<E: std::fmt::Display> std::fmt::Display for Problems<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0.as_slice() {
            [one] => write!(f, "{one}"),
            all => {
                write!(f, "{} problems:", all.len())?;
                for p in all {
                    write!(f, "\n  {p}")?;
                }
                Ok(())
            }
        }
    }
}

impl<E: std::fmt::Debug + std::fmt::Display> std::error::Error for Problems<E> {}

/// What a reader set aside because ns-3 does not read it either, a sentence each (the CLI
/// prints them as warnings).
pub type Warnings = Vec<String>;

/// The warning for the lines `rest` that follow the `count` records a count said there are
/// (`noun` in the plural, counted by `counter`), if there are any: ns-3 reads no further.
pub(crate) fn ignored<'a>(
    rest: impl Iterator<Item = (usize, Vec<&'a str>)>,
    count: usize,
    noun: &str,
    counter: &str,
) -> Option<String> {
    let lines: Vec<usize> = rest.map(|(l, _)| l).collect();
    let first = *lines.first()?;
    let n = lines.len();
    let noun = if count == 1 {
        noun.strip_suffix('s').unwrap_or(noun)
    } else {
        noun
    };
    Some(format!(
        "{n} line{} from line {first} on ignored: ns-3 reads the {count} {noun} {counter} and \
         stops there",
        if n == 1 { "" } else { "s" }
    ))
}

/// One link line, `src dst rate delay [err]`: the link, or every problem of the line.
fn link(
    l: usize,
    t: &[&str],
    nodes: u32,
    is_switch: &[bool],
) -> Result<LinkSpec, Vec<TopologyError>> {
    if t.len() < 4 {
        return Err(vec![TopologyError::Syntax {
            line: l,
            what: "expected `src dst rate delay err`".into(),
        }]);
    }
    let mut errs = Vec::new();
    let mut end = |s: &str, what: &str| match num::<u32>(l, what, s) {
        Ok(n) if n < nodes => Some(n),
        Ok(n) => {
            errs.push(TopologyError::NodeOutOfRange {
                line: l,
                node: n,
                nodes,
            });
            None
        }
        Err(e) => {
            errs.push(e);
            None
        }
    };
    let (a, b) = (end(t[0], "src"), end(t[1], "dst"));
    let rate = Rate::parse_ns3(t[2]).map_err(|_| TopologyError::Syntax {
        line: l,
        what: format!("rate `{}` is not a rate such as 100Gbps", t[2]),
    });
    let delay = parse_ns3_time(t[3]).ok_or_else(|| TopologyError::Syntax {
        line: l,
        what: format!("delay `{}` is not a time such as 0.001ms", t[3]),
    });
    let err = match t.get(4) {
        Some(e) => num::<f64>(l, "err", e).and_then(|err| {
            if (0.0..=1.0).contains(&err) {
                Ok(err)
            } else {
                Err(TopologyError::Syntax {
                    line: l,
                    what: format!("err {err} is not a probability"),
                })
            }
        }),
        None => Ok(0.0),
    };
    if let (Some(a), Some(b)) = (a, b) {
        if !is_switch[a as usize] && !is_switch[b as usize] {
            errs.push(TopologyError::HostToHost {
                line: l,
                host: a,
                other: b,
            });
        }
    }
    match (a, b, rate, delay, err) {
        (Some(a), Some(b), Ok(rate), Ok(delay), Ok(err)) if errs.is_empty() => Ok(LinkSpec {
            a,
            b,
            rate,
            delay,
            err,
        }),
        (_, _, rate, delay, err) => {
            errs.extend([rate.err(), delay.err(), err.err()].into_iter().flatten());
            Err(errs)
        }
    }
}

impl Topology {
    /// Parses the ns-3 topology text (what it set aside is dropped: see [`Topology::read`]).
    pub fn parse(text: &str) -> Result<Topology, Problems<TopologyError>> {
        Topology::read(text).map(|(t, _)| t)
    }

    /// Parses the ns-3 topology text as ns-3's scratch program reads it: the header's link
    /// count says how many link lines there are, and lines after them (HPCC's own
    /// `mix/topology.txt` ends with a note on the format) are ignored with a warning. Every
    /// problem of the file is reported.
    pub fn read(text: &str) -> Result<(Topology, Warnings), Problems<TopologyError>> {
        let mut lines = tokens(text);
        let mut errs = Vec::new();
        let (l, head) = lines.next().ok_or(Problems(vec![TopologyError::Syntax {
            line: 1,
            what: "empty file".into(),
        }]))?;
        if head.len() < 3 {
            return Err(Problems(vec![TopologyError::Syntax {
                line: l,
                what: "expected `nodes switches links`".into(),
            }]));
        }
        let header = (
            num::<u32>(l, "nodes", head[0]),
            num::<usize>(l, "switches", head[1]),
            num::<usize>(l, "links", head[2]),
        );
        let (nodes, switches, nlinks) = match header {
            (Ok(n), Ok(s), Ok(k)) => (n, s, k),
            (a, b, c) => {
                let errs = [a.err(), b.err(), c.err()].into_iter().flatten().collect();
                return Err(Problems(errs));
            }
        };
        let mut is_switch = vec![false; nodes as usize];
        let mut seen = 0usize;
        // The switch ids may span several lines in hand-written files; read until we have them.
        while seen < switches {
            let Some((l, ids)) = lines.next() else {
                errs.push(TopologyError::Count {
                    what: "switch ids",
                    expected: switches,
                    found: seen,
                });
                return Err(Problems(errs));
            };
            for id in ids {
                seen += 1;
                match num::<u32>(l, "switch id", id) {
                    Ok(id) if id < nodes => is_switch[id as usize] = true,
                    Ok(id) => errs.push(TopologyError::NodeOutOfRange {
                        line: l,
                        node: id,
                        nodes,
                    }),
                    Err(e) => errs.push(e),
                }
            }
        }
        let mut links = Vec::with_capacity(nlinks.min(1 << 20));
        let mut read = 0usize;
        while read < nlinks {
            let Some((l, t)) = lines.next() else { break };
            read += 1;
            match link(l, &t, nodes, &is_switch) {
                Ok(link) => links.push(link),
                Err(e) => errs.extend(e),
            }
        }
        if read < nlinks {
            errs.push(TopologyError::Count {
                what: "links",
                expected: nlinks,
                found: read,
            });
        }
        let warnings = ignored(lines, nlinks, "links", "its header counts")
            .into_iter()
            .collect();
        if !errs.is_empty() {
            return Err(Problems(errs));
        }
        Ok((
            Topology {
                nodes,
                is_switch,
                links,
            },
            warnings,
        ))
    }

    /// Writes the topology back in the ns-3 format.
    pub fn to_ns3(&self) -> String {
        let mut s = String::new();
        let sw: Vec<String> = (0..self.nodes)
            .filter(|&n| self.is_switch[n as usize])
            .map(|n| n.to_string())
            .collect();
        let _ = writeln!(s, "{} {} {}", self.nodes, sw.len(), self.links.len());
        let _ = writeln!(s, "{}", sw.join(" "));
        for l in &self.links {
            let _ = writeln!(
                s,
                "{} {} {}bps {} {}",
                l.a,
                l.b,
                l.rate.as_bps(),
                format_ns3_time(l.delay),
                l.err
            );
        }
        s
    }

    /// Host node ids in increasing order.
    pub fn hosts(&self) -> Vec<u32> {
        (0..self.nodes)
            .filter(|&n| !self.is_switch[n as usize])
            .collect()
    }
}

/// Per-node, per-destination equal-cost next hops, as indices into each node's port list.
pub struct Routes {
    /// `table[node][host_index]` = (start, len) into `hops`.
    table: Vec<Vec<(u32, u16)>>,
    hops: Vec<u16>,
}

impl Routes {
    /// Breadth-first search from every host, never through another host.
    /// `ports[node]` lists each port's peer node, in port order.
    pub fn compute(topo: &Topology, ports: &[Vec<u32>], hosts: &[u32]) -> Routes {
        let n = topo.nodes as usize;
        let mut table = vec![vec![(0u32, 0u16); hosts.len()]; n];
        let mut hops = Vec::new();
        let mut dist = vec![u32::MAX; n];
        // Position of each node in the search's visiting order (ns-3 lists next hops so).
        let mut rank = vec![u32::MAX; n];
        let mut queue = std::collections::VecDeque::new();
        let by_id: Vec<Vec<u32>> = ports
            .iter()
            .map(|p| {
                let mut v = p.clone();
                v.sort_unstable_by_key(|&x| ns3_neighbour_order(topo, x));
                v.dedup();
                v
            })
            .collect();
        let mut closer: Vec<(u32, u16)> = Vec::new();
        for (hi, &h) in hosts.iter().enumerate() {
            dist.iter_mut().for_each(|d| *d = u32::MAX);
            rank.iter_mut().for_each(|r| *r = u32::MAX);
            dist[h as usize] = 0;
            queue.clear();
            queue.push_back(h);
            let mut visited = 0u32;
            while let Some(u) = queue.pop_front() {
                rank[u as usize] = visited;
                visited += 1;
                for &v in &by_id[u as usize] {
                    if dist[v as usize] == u32::MAX {
                        dist[v as usize] = dist[u as usize] + 1;
                        if topo.is_switch[v as usize] {
                            queue.push_back(v);
                        }
                    }
                }
            }
            for node in 0..n {
                if node as u32 == h || dist[node] == u32::MAX {
                    continue;
                }
                let start = hops.len() as u32;
                closer.clear();
                for (pi, &peer) in ports[node].iter().enumerate() {
                    let nearer = dist[peer as usize] != u32::MAX
                        && dist[peer as usize] + 1 == dist[node]
                        && (peer == h || topo.is_switch[peer as usize]);
                    if nearer {
                        closer.push((rank[peer as usize], pi as u16));
                    }
                }
                closer.sort_unstable();
                hops.extend(closer.iter().map(|&(_, pi)| pi));
                table[node][hi] = (start, (hops.len() as u32 - start) as u16);
            }
        }
        Routes { table, hops }
    }

    /// Equal-cost next-hop ports of `node` towards the host with index `host_index`.
    pub fn next_hops(&self, node: u32, host_index: u32) -> &[u16] {
        let (s, l) = self.table[node as usize][host_index as usize];
        &self.hops[s as usize..s as usize + l as usize]
    }
}

/// Where node `id` sorts among a node's neighbours in HPCC's route search: hosts first, in
/// increasing id, then switches in decreasing id.
///
/// Why: third.cc's `CalculateRoute` walks `nbr2if[now]`, a `std::map<Ptr<Node>, ...>`, which
/// orders nodes by their address in memory, and lists next hops in the order its search
/// dequeued them. The scratch program creates the nodes in id order. A host is a small `Node`
/// on the heap (ascending addresses); a `SwitchNode` holds `m_bytes[257][257][8]` of `uint32_t`
/// (2.1 MB), above glibc's mmap threshold (128 KiB), so each switch is its own mapping, and
/// Linux places each new mapping below the last (top-down mmap layout): the later a switch is
/// created, the lower its address, and all of them above the heap. On HPCC's fat tree this
/// order, and not increasing id, makes the per-port queue histograms of the two simulators
/// (`QLEN_MON_FILE`) agree port by port (docs/design.md, "Simulator and ns-3 compatibility").
pub fn ns3_neighbour_order(topo: &Topology, id: u32) -> (bool, std::cmp::Reverse<u32>, u32) {
    match topo.is_switch.get(id as usize) {
        Some(true) => (true, std::cmp::Reverse(id), 0),
        _ => (false, std::cmp::Reverse(0), id),
    }
}

/// What HPCC's switch hashes to choose a next hop: the 12 octets `sip`, `dip`,
/// `sport | dport << 16`, each a 32-bit word as the switch's buffer holds them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EcmpKey([u32; 3]);

impl EcmpKey {
    pub fn new(sip: u32, dip: u32, sport: u16, dport: u16) -> EcmpKey {
        EcmpKey([sip, dip, u32::from(sport) | u32::from(dport) << 16])
    }

    /// The key of the packets coming back (ACKs, NACKs, CNPs): addresses and ports swapped,
    /// as ns-3's receiver builds its ACK header.
    pub fn reverse(self) -> EcmpKey {
        let [sip, dip, ports] = self.0;
        EcmpKey([dip, sip, ports.rotate_left(16)])
    }
}

/// Murmur3 x86 32-bit over whole 32-bit words (Appleby's MurmurHash3_x86_32; HPCC's
/// `SwitchNode::EcmpHash` is this function on the 12-octet key).
fn murmur3_32(words: &[u32], seed: u32) -> u32 {
    const C1: u32 = 0xcc9e_2d51;
    const C2: u32 = 0x1b87_3593;
    let mut h = seed;
    for &w in words {
        let k = w.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2);
        h ^= k;
        h = h.rotate_left(13).wrapping_mul(5).wrapping_add(0xe654_6b64);
    }
    h ^= (words.len() * 4) as u32;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

/// The ECMP choice at switch `node` among `n` next hops (in [`Routes::next_hops`] order).
pub fn ecmp_pick(key: &EcmpKey, node: u32, n: usize) -> usize {
    if n <= 1 {
        return 0;
    }
    (murmur3_32(&key.0, node) % n as u32) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    const DUMBBELL: &str = "5 2 4\n3 4\n0 3 100Gbps 0.001ms 0\n1 3 100Gbps 0.001ms 0\n\
                            3 4 40Gbps 1us 0\n4 2 100Gbps 0.001ms 0\n";

    #[test]
    fn parses_the_ns3_example() {
        let t = Topology::parse(DUMBBELL).unwrap();
        assert_eq!(t.nodes, 5);
        assert_eq!(t.is_switch, vec![false, false, false, true, true]);
        assert_eq!(t.links.len(), 4);
        assert_eq!(t.links[0].rate, Rate::from_gbps(100));
        assert_eq!(t.links[0].delay, Duration::from_nanos(1000));
        assert_eq!(t.links[2].rate, Rate::from_gbps(40));
        assert_eq!(t.hosts(), vec![0, 1, 2]);
        // Round trip through the writer.
        assert_eq!(Topology::parse(&t.to_ns3()).unwrap(), t);
    }

    #[test]
    fn errors_name_the_line() {
        let e = Topology::parse("3 1 2\n2\n0 2 10Gbps 1us 0\n1 9 10Gbps 1us 0\n").unwrap_err();
        assert_eq!(
            e.0,
            [TopologyError::NodeOutOfRange {
                line: 4,
                node: 9,
                nodes: 3
            }]
        );
        let e = Topology::parse("3 1 1\n2\n0 2 fast 1us 0\n").unwrap_err();
        assert!(
            matches!(e.0[..], [TopologyError::Syntax { line: 3, .. }]),
            "{e}"
        );
        let e = Topology::parse("3 1 2\n2\n0 2 10Gbps 1us 0\n").unwrap_err();
        assert!(matches!(e.0[..], [TopologyError::Count { .. }]), "{e}");
    }

    #[test]
    fn every_problem_of_a_file_in_one_pass() {
        // Line 3: a bad rate and a bad delay; line 4: a node out of range; line 5: two hosts
        // joined; and one link short of the header's five.
        let text = "4 1 5\n3\n0 3 fast soon 0\n1 7 10Gbps 1us 0\n0 1 10Gbps 1us 0\n\
                    2 3 10Gbps 1us 0\n";
        let e = Topology::parse(text).unwrap_err();
        let m = e.to_string();
        assert!(m.starts_with("5 problems:"), "{m}");
        for want in [
            "line 3: rate `fast`",
            "line 3: delay `soon`",
            "line 4: node 7 out of range",
            "line 5: host 0 and host 1",
            "promises 5 links, the file has 4",
        ] {
            assert!(m.contains(want), "{want}: {m}");
        }
    }

    #[test]
    fn lines_past_the_link_count_are_ignored_with_a_warning() {
        // As HPCC's mix/topology.txt: a link count of 1, more links, then a note on the format
        // whose words are no link at all. ns-3 reads one link and stops.
        let text = "3 1 1\n2\n0 2 10Gbps 1us 0\n1 2 10Gbps 1us 0\n\
                    src0 dst0 rate delay error_rate\n...\n";
        let (t, warnings) = Topology::read(text).unwrap();
        assert_eq!(t.links.len(), 1);
        assert_eq!(
            warnings,
            ["3 lines from line 4 on ignored: ns-3 reads the 1 link its header counts and stops \
              there"]
        );
        assert!(Topology::read(DUMBBELL).unwrap().1.is_empty());
    }

    #[test]
    fn ns3_times() {
        assert_eq!(parse_ns3_time("0.001ms"), Some(Duration::from_nanos(1000)));
        assert_eq!(parse_ns3_time("1us"), Some(Duration::from_nanos(1000)));
        assert_eq!(parse_ns3_time("250ns"), Some(Duration::from_nanos(250)));
        assert_eq!(parse_ns3_time("1e-6s"), Some(Duration::from_nanos(1000)));
        assert_eq!(parse_ns3_time("soon"), None);
    }

    #[test]
    fn ecmp_routes_use_both_spines() {
        // Two leaves (4, 5), two spines (6, 7), hosts 0,1 under leaf 4 and 2,3 under leaf 5.
        let text = "8 4 8\n4 5 6 7\n0 4 10Gbps 1us 0\n1 4 10Gbps 1us 0\n2 5 10Gbps 1us 0\n\
                    3 5 10Gbps 1us 0\n4 6 10Gbps 1us 0\n4 7 10Gbps 1us 0\n5 6 10Gbps 1us 0\n\
                    5 7 10Gbps 1us 0\n";
        let t = Topology::parse(text).unwrap();
        let mut ports = vec![Vec::new(); 8];
        for l in &t.links {
            ports[l.a as usize].push(l.b);
            ports[l.b as usize].push(l.a);
        }
        let hosts = t.hosts();
        let r = Routes::compute(&t, &ports, &hosts);
        // Leaf 4 towards host 2 (index 2): both spine ports (ports 2 and 3 of node 4), spine 7
        // first: the search from host 2 reaches the higher switch id first.
        assert_eq!(r.next_hops(4, 2), &[3, 2]);
        // Leaf 4 towards its own host 1: the host port only.
        assert_eq!(r.next_hops(4, 1), &[1]);
        // Spine 6 towards host 3: leaf 5 only (its port 1).
        assert_eq!(r.next_hops(6, 3), &[1]);
        let picks: std::collections::BTreeSet<usize> = (0..64)
            .map(|p| ecmp_pick(&EcmpKey::new(1, 2, 10_000 + p, 100), 4, 2))
            .collect();
        assert_eq!(picks.len(), 2, "flow hashes spread over both paths");
    }

    #[test]
    fn murmur3_matches_the_reference_vectors() {
        // MurmurHash3_x86_32 published test values (SMHasher): "" seed 0 -> 0, "" seed 1 ->
        // 0x514E28B7, and the 4-octet key 0x00000000 seed 0 -> 0x2362F9DE.
        assert_eq!(murmur3_32(&[], 0), 0);
        assert_eq!(murmur3_32(&[], 1), 0x514E_28B7);
        assert_eq!(murmur3_32(&[0], 0), 0x2362_F9DE);
        // The reverse key swaps addresses and ports.
        let k = EcmpKey::new(0x0b00_0001, 0x0b00_0201, 10_000, 100);
        assert_eq!(
            k.reverse(),
            EcmpKey::new(0x0b00_0201, 0x0b00_0001, 100, 10_000)
        );
    }

    #[test]
    fn next_hops_in_search_order_not_port_order() {
        // Leaf 2 reaches host 0's leaf 1 through spines 3 and 4; its links list spine 3 first.
        // ns-3 lists next hops as its search from host 0 reached them, and its node map puts
        // switches in decreasing id: spine 4, then 3.
        let text = "6 4 6\n1 2 3 4\n0 1 10Gbps 1us 0\n5 2 10Gbps 1us 0\n2 3 10Gbps 1us 0\n\
                    2 4 10Gbps 1us 0\n1 3 10Gbps 1us 0\n1 4 10Gbps 1us 0\n";
        let t = Topology::parse(text).unwrap();
        let mut ports = vec![Vec::new(); 6];
        for l in &t.links {
            ports[l.a as usize].push(l.b);
            ports[l.b as usize].push(l.a);
        }
        let r = Routes::compute(&t, &ports, &t.hosts());
        // Node 2's ports: 0 -> host 5, 1 -> spine 3, 2 -> spine 4.
        assert_eq!(r.next_hops(2, 0), &[2, 1]);
        // Hosts sort before switches, in increasing id; switches in decreasing id.
        let mut order = vec![4, 0, 3, 5, 1, 2];
        order.sort_by_key(|&x| ns3_neighbour_order(&t, x));
        assert_eq!(order, vec![0, 5, 4, 3, 2, 1]);
    }
}
