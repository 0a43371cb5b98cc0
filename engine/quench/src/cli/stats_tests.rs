//! The switch table's columns and how it reports the frames' split.

use super::*;

#[test]
fn the_table_shows_pfc_headroom_drops_and_flooded_unicast_beside_the_other_drops() {
    let snap: Snapshot = serde_json::from_str(
        r#"{"uptime_ns": 1000000000, "fdb_entries": 2, "ports": [{
            "name": "s0", "iface": "qn-sw-s0", "kind": "af_packet", "mode": "tpacket_v2",
            "worker": 0, "rate_bps": null, "rx_pkts": 401948, "rx_bytes": 602922000,
            "tx_pkts": 16539, "tx_bytes": 1000, "rx_drops": 3, "tx_drops": 4,
            "queue_drops": 5, "flooded": 9, "flooded_unicast": 7, "queue_depth_bytes": 0,
            "queues": [],
            "pfc_headroom_drops": 41, "rx_kernel_drops": 100}]}"#,
    )
    .unwrap();
    let t = table(&snap, None);
    let lines: Vec<&str> = t.lines().collect();
    let header: Vec<&str> = lines[2].split_whitespace().collect();
    let row: Vec<&str> = lines[3].split_whitespace().collect();
    let col = |name: &str| row[header.iter().position(|h| *h == name).unwrap()];
    assert_eq!(col("drops"), "107");
    assert_eq!(col("q-drops"), "5");
    assert_eq!(col("pfc-drops"), "41");
    assert_eq!(col("flood-uc"), "7");
}

/// How the frames split: the kernel fast path's share and the workers', in total and per
/// port (the fast share is part of rx-pkts / tx-pkts).
#[test]
fn the_table_says_how_frames_split_between_the_fast_path_and_the_workers() {
    let port = |name: &str, rx: u64, tx: u64, frx: u64, ftx: u64| {
        format!(
            r#"{{"name": "{name}", "iface": "x", "kind": "af_xdp", "mode": "native/copy",
            "worker": 0, "rate_bps": null, "rx_pkts": {rx}, "rx_bytes": 0, "tx_pkts": {tx},
            "tx_bytes": 0, "rx_drops": 0, "tx_drops": 0, "queue_drops": 0, "flooded": 0,
            "queue_depth_bytes": 0, "queues": [], "fast_rx_pkts": {frx},
            "fast_tx_pkts": {ftx}}}"#
        )
    };
    let json = format!(
        r#"{{"uptime_ns": 1, "fdb_entries": 2, "ports": [{}, {}]}}"#,
        port("a", 1000, 30, 900, 20),
        port("b", 40, 1010, 20, 900)
    );
    let t = table(&serde_json::from_str(&json).unwrap(), None);
    assert!(
        t.lines().nth(1) == Some("frames sent: 920 by the kernel fast path, 120 by the workers"),
        "{t}"
    );
    assert!(
        t.contains("kernel fast path: 900 rx, 20 tx; through the workers: 100 rx, 10 tx"),
        "{t}"
    );
}
