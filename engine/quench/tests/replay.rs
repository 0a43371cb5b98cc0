//! `quench replay` on the examples in configs/replay/, checked against hand-computed traces.
use std::collections::HashMap;
use std::path::PathBuf;

use quench_runtime::replay::{replay_to_string, Algo};

fn example(name: &str) -> (String, String) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../configs/replay");
    let read = |ext: &str| {
        std::fs::read_to_string(dir.join(format!("{name}.{ext}")))
            .unwrap_or_else(|e| panic!("{name}.{ext}: {e}"))
    };
    (read("toml"), read("csv"))
}

/// The output as rows of column -> cell.
fn run(algo: Algo, name: &str, seed: u64) -> Vec<HashMap<String, String>> {
    let (cfg, events) = example(name);
    let out = replay_to_string(algo, &cfg, &events, seed).unwrap();
    let mut lines = out.lines();
    let header: Vec<String> = lines.next().unwrap().split(',').map(String::from).collect();
    assert_eq!(&header[..3], ["time_ns", "event", "value"]);
    lines
        .map(|l| {
            let cells: Vec<&str> = l.split(',').collect();
            assert_eq!(cells.len(), header.len(), "{l}");
            header
                .iter()
                .cloned()
                .zip(cells.iter().map(|c| c.to_string()))
                .collect()
        })
        .collect()
}

/// Checks `cols` of `row` against `want` (same order).
fn check(rows: &[HashMap<String, String>], i: usize, cols: &str, want: &str) {
    let got: Vec<&str> = cols.split(',').map(|c| rows[i][c].as_str()).collect();
    let want: Vec<&str> = want.split(',').collect();
    assert_eq!(got, want, "row {i} ({}) columns {cols}", rows[i]["time_ns"]);
}

#[test]
fn qcn_cp_example() {
    let r = run(Algo::QcnCp, "qcn-cp", 1);
    assert_eq!(r.len(), 10);
    let c = "queue_bytes,q_old,fb,qntz_fb,sampled,de,cnm_qntz_fb,cnm_qoffset,cnm_qdelta,bytes_until_sample";
    // Q = 8000: Fb = (26000-8000) - 2*8000 = 2000 > 0 -> 0; counter 10000 - 4*2000 = 2000.
    check(&r, 3, c, "8000,0,0,0,0,0,,,,2000");
    // Q = 10000: Fb = 16000 - 2*10000 = -4000; QntzFb = floor(4000*63/130000) = 1; the 2000
    // octets exhaust the counter -> sample, CNM qoffset (10000-26000)/64 = -250, qdelta
    // 10000/64 -> 156; next interval index 1/8 = 0 -> 10000.
    check(&r, 4, c, "10000,10000,-4000,1,1,1,1,-250,156,10000");
    // Dequeue 1500: queue 8500, nothing else moves.
    check(&r, 5, c, "8500,10000,,,,,,,,10000");
    // Enqueue 30000: Q = 38500, Fb = -12500 - 2*28500 = -69500, QntzFb = floor(69500*63/130000)
    // = floor(33.68) = 33; sampled (30000 >= 10000); qoffset 12500/64 -> 195, qdelta 28500/64
    // -> 445; next interval index 33/8 = 4 -> 10000*60/300 = 2000.
    check(&r, 6, c, "38500,38500,-69500,33,1,1,33,195,445,2000");
    // Q = 19500 < Qold: Fb > 0 -> 0; counter 2000 -> 1000.
    check(&r, 8, c, "19500,38500,0,0,0,0,,,,1000");
    // Q = 20500: counter runs out -> sample with QntzFb 0: Qold = 20500, no CNM.
    check(&r, 9, c, "20500,20500,0,0,1,0,,,,10000");
}

#[test]
fn dcqcn_cp_example() {
    let r = run(Algo::DcqcnCp, "dcqcn-cp", 1);
    let p = |i: usize| r[i]["probability"].parse::<f64>().unwrap();
    // Marking at dequeue: the enqueue row never marks.
    check(&r, 0, "queue_bytes,ecn_out", "500000,ect0");
    // 450000 > Kmax 400000: always CE.
    check(&r, 1, "queue_bytes,probability,ecn_out", "450000,1,ce");
    // 250000: p = 0.2 * (250000-100000)/(400000-100000) = 0.1; 175000: 0.2 * 0.25 = 0.05.
    assert!((p(2) - 0.1).abs() < 1e-12 && (p(3) - 0.05).abs() < 1e-12);
    // At or below Kmin: never.
    check(&r, 4, "queue_bytes,probability,ecn_out", "100000,0,ect0");
    check(&r, 5, "queue_bytes,probability,ecn_out", "0,0,ect0");
    // Same seed, same marks; the random rows are one of the two outcomes.
    assert_eq!(r, run(Algo::DcqcnCp, "dcqcn-cp", 1));
    for i in [2, 3] {
        assert!(["ce", "ect0"].contains(&r[i]["ecn_out"].as_str()));
    }
}

#[test]
fn pfc_example() {
    let r = run(Algo::Pfc, "pfc", 1);
    let c = "time_ns,event,ingress_bytes,headroom_bytes,paused,sent,upstream_paused_mask,upstream_paused_until_ns";
    check(&r, 0, c, "0,enqueue,5000,0,0,,0,");
    // Held 10000 = XOFF -> PAUSE with 1000 quanta (51200 ns at 10 Gb/s).
    check(&r, 1, c, "1000,enqueue,10000,0,1,pause:1000,0,");
    // 3000 above XOFF fill the headroom; one more octet is dropped.
    check(&r, 2, c, "2000,enqueue,10000,3000,1,,0,");
    check(&r, 3, c, "3000,enqueue,10000,3000,1,drop,0,");
    // Refresh at 1000 + 50 % of 51200 = 26600, still congested -> PAUSE again.
    check(&r, 4, c, "26600,timer,10000,3000,1,pause:1000,0,");
    // 13000 - 4000 = 9000 > XON 7000: nothing; - 2000 = 7000 <= XON: resume.
    check(&r, 5, c, "30000,dequeue,9000,0,1,,0,");
    check(&r, 6, c, "40000,dequeue,7000,0,0,resume,0,");
    // Upstream side: PAUSE 100 quanta at 50000 -> 51200 bits at 10 Gb/s = 5120 ns -> 55120;
    // priority 3 = mask 8; it expires by itself at 55120.
    check(&r, 7, c, "50000,pause,7000,0,0,,8,55120");
    check(&r, 8, c, "55120,timer,7000,0,0,,0,");
    // 0xFFFF quanta = 3355392 ns at 10 Gb/s -> 3415392; an explicit resume ends it early.
    check(&r, 9, c, "60000,pause,7000,0,0,,8,3415392");
    check(&r, 10, c, "70000,resume,7000,0,0,,0,");
    assert_eq!(r.len(), 12);
}

#[test]
fn tcd_example() {
    let r = run(Algo::Tcd, "tcd", 1);
    let c = "time_ns,event,queue_bytes,state,off,ton_ns,codepoint_out";
    // max(Ton) = (2*3000*8 + 8e-6*40e9)/(2*0.05*40e9) + 8 us = 92 + 8 = 100 us.
    assert!(r.iter().all(|row| row["max_ton_ns"] == "100000"));
    check(&r, 1, c, "5000,dequeue,59000,non_congestion,0,,01");
    // Period 0..50 us: queue grew 0 -> 59000 > 40000 -> congestion; packets leave CE.
    check(&r, 2, c, "50000,timer,59000,congestion,0,,");
    check(&r, 3, c, "60000,dequeue,58000,congestion,0,,11");
    // OFF at 70 us, ON at 80 us; a dequeue 10 us later: Ton 10 us < 100 -> undetermined, UE.
    check(&r, 4, c, "70000,pause,58000,congestion,1,,");
    check(&r, 6, c, "90000,dequeue,57000,undetermined,0,10000,10");
    // Trend checks inside the ON-OFF window decide nothing.
    check(&r, 7, c, "100000,timer,57000,undetermined,0,20000,");
    check(&r, 8, c, "150000,timer,57000,undetermined,0,70000,");
    check(&r, 9, c, "179000,dequeue,56000,undetermined,0,99000,10");
    // 200 us: Ton 120 us, out of the pattern; the queue fell (57000 -> 56000) but is above the
    // low threshold: still undetermined (draining).
    check(&r, 10, c, "200000,timer,56000,undetermined,0,120000,");
    check(&r, 11, c, "210000,dequeue,6000,undetermined,0,130000,10");
    // 250 us: 6000 <= 10000 -> non-congestion; packets pass unmarked.
    check(&r, 12, c, "250000,timer,6000,non_congestion,0,170000,");
    check(&r, 13, c, "260000,dequeue,5000,non_congestion,0,180000,01");
}

#[test]
fn qcn_rp_example() {
    let r = run(Algo::QcnRp, "qcn-rp", 1);
    let c = "time_ns,event,rate_bps,target_rate_bps,si_count,timer_scount,outcome";
    // CNM 63 at C = 10 Gb/s: TR = C; CR = C * (1 - 63/128) = 10e9 * 65/128 = 5078125000.
    check(&r, 0, c, "0,cnm,5078125000,10000000000,0,0,Decreased+new");
    // Byte-counter cycles (> 150000 octets): CR = (CR + TR)/2 = 7539062500, then 8769531250.
    check(&r, 1, c, "1000,tx,7539062500,10000000000,1,0,Increased");
    check(&r, 2, c, "2000,tx,8769531250,10000000000,2,0,Increased");
    check(&r, 3, c, "3000,tx,8769531250,10000000000,2,0,Counted");
    check(&r, 4, c, "4000,cnm,8769531250,10000000000,2,0,NoChange");
    // Timer cycles every 15 ms: (8769531250 + 10e9)/2 = 9384765625; then 9692382812 (floor).
    check(&r, 6, c, "15000000,timer,9384765625,10000000000,2,1,");
    check(&r, 7, c, "30000000,timer,9692382812,10000000000,2,2,");
    // CNM 32: TR = CR = 9692382812; CR = CR * 96/128 = 7269287109; timer re-armed +15 ms.
    check(&r, 9, c, "32000000,cnm,7269287109,9692382812,0,0,Decreased");
    assert_eq!(r[9]["next_deadline_ns"], "47000000");
}

#[test]
fn dcqcn_rp_example() {
    let r = run(Algo::DcqcnRp, "dcqcn-rp", 1);
    let c = "time_ns,event,rate_bps,target_rate_bps,alpha,time_stage,cnp_pending,next_deadline_ns";
    // dcqcn.md steps 1-6 (ns-3 rdma-hw.cc "mlx"), 100 Gb/s, F = 1, timers: decrease check 4 us
    // (the first one 1 ns later, as ns-3 ScheduleDecreaseRateMlx(q, 1)), increase 10 us. rp
    // reports only timers that can move the rates, so idle decrease checks print no row.
    // First CNP: alpha = 1, R_T = R_C = 100G (rate_to_set_on_first_cnp 0 = keep); flag set.
    check(&r, 0, c, "0,cnp,100000000000,100000000000,1,0,1,4001");
    // 4001: the check sees the flag; stage 0 and clamp_tgt_rate off -> no clamp; R_C = 100G *
    // (1 - 1/2) = 50G; the increase timer restarts (4001 + 10000 = 14001).
    check(&r, 1, c, "4001,timer,50000000000,100000000000,1,0,0,14001");
    // 14001: stage 0 < F -> fast recovery R_C = 50G/2 + 100G/2 = 75G; stage 1.
    check(&r, 2, c, "14001,timer,75000000000,100000000000,1,1,0,24001");
    // Second CNP at 18 us: the next check (16001 + 4000 = 20001) is due; at 20001 stage 1 != 0
    // -> clamp R_T = R_C = 75G; alpha is still 1 (its first update is at 55 us) -> R_C =
    // 37.5G; stage 0; increase at 30001.
    check(&r, 3, c, "18000,cnp,75000000000,100000000000,1,1,1,20001");
    check(&r, 4, c, "20001,timer,37500000000,75000000000,1,0,0,30001");
    // 30001: fast recovery 37.5G/2 + 75G/2 = 56.25G; stage 1.
    check(&r, 5, c, "30001,timer,56250000000,75000000000,1,1,0,40001");
    // 40001: stage 1 == F -> additive: R_T = 75G + 20 Mb/s = 75.02G; R_C = 56.25G/2 +
    // 75.02G/2 = 65.635G; stage 2.
    check(&r, 6, c, "40001,timer,65635000000,75020000000,1,2,0,50001");
    check(&r, 7, c, "45000,tick,65635000000,75020000000,1,2,0,50001");
    assert_eq!(r.len(), 8);
}

/// TCD UE with `ue_reaction = "hold"`: increases inside the hold window are consumed.
#[test]
fn dcqcn_rp_holds_increases_after_ue() {
    let r = run(Algo::DcqcnRp, "dcqcn-rp-ue", 1);
    let c = "time_ns,event,rate_bps,target_rate_bps,time_stage,held_increases,next_deadline_ns";
    // As dcqcn_rp_example: the CNP at 0 sets the flag, the check at 4001 cuts 100G -> 50G and
    // restarts the increase timer (14001).
    check(&r, 0, c, "0,cnp,100000000000,100000000000,0,0,4001");
    check(&r, 1, c, "4001,timer,50000000000,100000000000,0,0,14001");
    // UE at 5 us: nothing moves; the hold window runs to 5 + 25 = 30 us.
    check(&r, 2, c, "5000,ue,50000000000,100000000000,0,0,14001");
    // 14001 and 24001 < 30000: the timer re-arms, the rates and the stage stay, held += 1.
    check(&r, 3, c, "14001,timer,50000000000,100000000000,0,1,24001");
    check(&r, 4, c, "24001,timer,50000000000,100000000000,0,2,34001");
    // 34001 >= 30000: stage 0 < F = 1 -> fast recovery 50G/2 + 100G/2 = 75G; stage 1.
    check(&r, 5, c, "34001,timer,75000000000,100000000000,1,2,44001");
    // 44001: stage 1 == F -> additive R_T = min(100G + 20 Mb/s, line rate 100G) = 100G;
    // R_C = 75G/2 + 100G/2 = 87.5G; stage 2.
    check(&r, 6, c, "44001,timer,87500000000,100000000000,2,2,54001");
    assert_eq!(r.len(), 8);
    // The same events with the shipped example (ue_reaction = "ignore") recover at 14001.
    let (cfg, _) = example("dcqcn-rp");
    let ignore = replay_to_string(
        Algo::DcqcnRp,
        &cfg,
        "time_ns,event,value\n0,cnp,\n5000,ue,\n15000,tick,\n",
        1,
    )
    .unwrap();
    assert!(
        ignore
            .lines()
            .any(|l| l.starts_with("14001,timer,,75000000000,")),
        "{ignore}"
    );
}

#[test]
fn np_example() {
    let r = run(Algo::Np, "np", 1);
    let c = "time_ns,mark,decision,cnps,ue_sent,suppressed";
    // Interval 50 us, TCD on: CE and UE are spaced independently per flow.
    check(&r, 0, c, "0,Ce,SendCnp,1,0,0");
    check(&r, 1, c, "10000,Ce,CnpSuppressed,1,0,1");
    check(&r, 2, c, "20000,Unmarked,Nothing,1,0,1");
    check(&r, 3, c, "30000,Ue,SendUe,1,1,1");
    // Exactly 50 us after the first CNP: allowed again.
    check(&r, 4, c, "50000,Ce,SendCnp,2,1,1");
    check(&r, 5, c, "60000,Ue,UeSuppressed,2,1,2");
    check(&r, 6, c, "80000,Ue,SendUe,2,2,2");
}

/// The binary: a good run prints CSV; a bad event names its line and column.
#[test]
fn cli_reports_bad_event_position() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../configs/replay");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_quench"))
        .args(["replay", "--algo", "qcn-cp", "--config"])
        .arg(dir.join("qcn-cp.toml"))
        .arg("--events")
        .arg(dir.join("qcn-cp.csv"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout.lines().count(), 11);
    let tmp = std::env::temp_dir().join(format!("quench-replay-{}.csv", std::process::id()));
    std::fs::write(
        &tmp,
        "time_ns,event,value\n0,enqueue,100\n10,enqueue,lots\n",
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_quench"))
        .args(["replay", "--algo", "qcn-cp", "--config"])
        .arg(dir.join("qcn-cp.toml"))
        .arg("--events")
        .arg(&tmp)
        .output()
        .unwrap();
    std::fs::remove_file(&tmp).unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("line 3, column 12"), "{stderr}");
}
