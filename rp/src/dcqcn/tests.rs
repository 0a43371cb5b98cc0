//! DCQCN traces against the ns-3 HPCC event flow and the paper variant, plus property tests.

use super::*;
use proptest::prelude::*;

fn us(u: u64) -> Instant {
    Instant::from_nanos(u * 1_000)
}

/// `mix/run.py --cc dcqcn` at 100 Gb/s (dcqcn.md): g 1/256, alpha every 1 us, decrease check
/// every 4 us, increase timer 300 us, F = 1, R_AI 20 Mb/s, R_HAI 200 Mb/s, min rate 1000 Mb/s,
/// no target clamp, alpha = 1 on the first CNP, rate kept on the first CNP.
fn hpcc_run_py() -> DcqcnParams {
    DcqcnParams {
        variant: Variant::Mlx,
        dce_tcp_g: 1020,
        dce_tcp_rtt: 1,
        initial_alpha_value: 1024,
        rate_to_set_on_first_cnp: 0,
        rate_reduce_monitor_period: 4,
        clamp_tgt_rate: false,
        clamp_tgt_rate_after_time_inc: true,
        rpg_time_reset: 300,
        rpg_threshold: 1,
        rpg_ai_rate: 20,
        rpg_hai_rate: 200,
        rpg_gd: 11,
        rpg_min_dec_fac: 50,
        rpg_min_rate: 1000,
        ..DcqcnParams::default()
    }
}

/// Drives `rp` through CNPs at `cnps` (ns) until `end`, running timers at their deadlines, and
/// records (time_ns, rate, target) whenever rate or target changed.
fn drive(rp: &mut DcqcnRp, cnps: &[u64], end: u64) -> Vec<(u64, u64, u64)> {
    let mut log = Vec::new();
    let mut last = (rp.rate().as_bps(), rp.target_rate().as_bps());
    let mut cnps = cnps.iter().copied().peekable();
    loop {
        let deadline = rp.next_deadline().map(Instant::as_nanos);
        let cnp = cnps.peek().copied();
        // Timers first when they fall at or before the next CNP.
        let (t, is_cnp) = match (deadline, cnp) {
            (Some(d), Some(c)) => (d.min(c), c < d),
            (Some(d), None) => (d, false),
            (None, Some(c)) => (c, true),
            (None, None) => break,
        };
        if t > end {
            break;
        }
        if is_cnp {
            cnps.next();
            rp.on_cnp(Instant::from_nanos(t));
        } else {
            rp.on_timeout(Instant::from_nanos(t));
        }
        let now = (rp.rate().as_bps(), rp.target_rate().as_bps());
        if now != last {
            log.push((t, now.0, now.1));
            last = now;
        }
    }
    log
}

/// The ns-3 HPCC "mlx" event flow, step for step, on CNPs at 0, 400.5 us and 1002.5 us.
///
/// How the expected trace was written: from dcqcn.md steps 3-6 and rdma-hw.cc
/// (`cnp_received_mlx`, `UpdateAlphaMlx`, `CheckRateDecreaseMlx`, `RateIncEventTimerMlx`,
/// `FastRecoveryMlx`, `ActiveIncreaseMlx`, `HyperIncreaseMlx`), with ns-3's scheduler rule that
/// events at the same time run in the order they were scheduled. Alpha values are the ns-3
/// formula evaluated in IEEE double precision (a 40-line Python event-queue model of those
/// functions, written for this test, produced the alpha digits; the integer steps are checked
/// by hand below).
///
/// - 0: first CNP: alpha = 1 (flag cleared), alpha timer every 1 us from 1 us, decrease check
///   at 4 us + 1 ns and every 4 us after; R_T = R_C = 100e9 (rate kept).
/// - 1..4 us: no CNP seen: alpha = (255/256)^4 = 0.98446631454862654...
/// - 4.001 us: decrease: stage 0 and no clamp, so R_T stays 100e9;
///   R_C = floor(100e9 * (1 - alpha/2)) = floor(100e9 * 4361683967 / 8589934592)
///   = 50_776_684_272. Increase timer at 304.001 us.
/// - 304.001 us: stage 0 < F = 1: fast recovery R_C = 50_776_684_272/2 + 100e9/2
///   = 25_388_342_136 + 50_000_000_000 = 75_388_342_136; stage 1.
/// - 400.5 us: CNP (flags only). 401 us: alpha = (1-g) alpha + g.
/// - 404.001 us: decrease: stage 1 != 0, so clamp R_T = R_C = 75_388_342_136; R_C = R_C *
///   (1 - alpha/2) = 67_488_187_594 (alpha 0.20958557563306326); stage 0; the increase timer
///   due at 604.001 us is replaced by one at 704.001 us.
/// - 704.001 us: fast recovery: 67_488_187_594/2 + 75_388_342_136/2 = 33_744_093_797 +
///   37_694_171_068 = 71_438_264_865; stage 1.
/// - 1002.5 us: CNP. 1004.001 us: two events at the same nanosecond. The increase (armed at
///   704.001 us) runs before the decrease check (armed at 1000.001 us): additive increase
///   (stage 1 == F): R_T = 75_388_342_136 + 20e6 = 75_408_342_136, R_C = 71_438_264_865/2 +
///   75_408_342_136/2 = 35_719_132_432 + 37_704_171_068 = 73_423_303_500, stage 2; then the
///   decrease sees stage 2 != 0: R_T = 73_423_303_500, R_C = 72_545_446_856 (alpha
///   0.02391220776250556). Running the check first would have left R_T at 75_388_342_136.
/// - 1304.001 us: fast recovery: 36_272_723_428 + 36_711_651_750 = 72_984_375_178.
/// - 1604.001 us: additive: R_T = 73_443_303_500; R_C = 36_492_187_589 + 36_721_651_750 =
///   73_213_839_339.
/// - 1904.001 us: hyper (stage 2 > F): R_T = 73_643_303_500; R_C = 36_606_919_669 +
///   36_821_651_750 = 73_428_571_419.
#[test]
fn mlx_reproduces_the_ns3_hpcc_event_flow() {
    let profile = hpcc_run_py().profile(Rate::from_gbps(100)).unwrap();
    let mut rp = DcqcnRp::new(profile);
    assert_eq!(
        rp.next_deadline(),
        None,
        "nothing armed before the first CNP"
    );
    let log = drive(&mut rp, &[0, 400_500, 1_002_500], 2_000_000);
    let want: Vec<(u64, u64, u64)> = vec![
        (4_001, 50_776_684_272, 100_000_000_000),
        (304_001, 75_388_342_136, 100_000_000_000),
        (404_001, 67_488_187_594, 75_388_342_136),
        (704_001, 71_438_264_865, 75_388_342_136),
        (1_004_001, 72_545_446_856, 73_423_303_500),
        (1_304_001, 72_984_375_178, 73_423_303_500),
        (1_604_001, 73_213_839_339, 73_443_303_500),
        (1_904_001, 73_428_571_419, 73_643_303_500),
    ];
    assert_eq!(log, want);
}

#[test]
fn mlx_alpha_matches_ns3_bit_for_bit() {
    let profile = hpcc_run_py().profile(Rate::from_gbps(100)).unwrap();
    let mut rp = DcqcnRp::new(profile);
    rp.on_cnp(us(0));
    assert_eq!(rp.snapshot().alpha, 1.0);
    assert_eq!(rp.snapshot().next_alpha_update, Some(us(1)));
    assert_eq!(
        rp.snapshot().next_decrease_check,
        Some(Instant::from_nanos(4_001))
    );
    rp.on_timeout(us(4));
    // (255/256)^4, exact in binary: 4228250625 / 4294967296.
    assert_eq!(rp.snapshot().alpha, 4_228_250_625.0 / 4_294_967_296.0);
    assert_eq!(
        rp.rate(),
        Rate::from_gbps(100),
        "the cut waits for the check at 4.001 us"
    );
    rp.on_timeout(Instant::from_nanos(4_001));
    assert_eq!(rp.rate().as_bps(), 50_776_684_272);
    // The values printed by the reference model at the decrease checks of the trace above.
    drive(&mut rp, &[400_500], 404_001);
    assert_eq!(rp.snapshot().alpha, 0.20958557563306326);
    assert_eq!(rp.rate().as_bps(), 67_488_187_594);
}

#[test]
fn mlx_idle_flow_stops_asking_for_wakeups() {
    // After one CNP the flow recovers to the fixed point of R_C = R_C/2 + R_T/2 with R_T at
    // line rate; from then on only quiet timers remain and next_deadline() is None.
    let profile = hpcc_run_py().profile(Rate::from_gbps(100)).unwrap();
    let mut rp = DcqcnRp::new(profile);
    rp.on_cnp(us(0));
    let mut wakeups = 0;
    while let Some(d) = rp.next_deadline() {
        rp.on_timeout(d);
        wakeups += 1;
        assert!(wakeups < 200, "still waking at {d:?}");
    }
    // 1 cut + increases (FR, AI, then HAI 200 Mb/s steps until R_T is at line rate and R_C at
    // its fixed point).
    assert!(rp.rate().as_bps() >= 99_999_999_999, "{}", rp.rate());
    assert_eq!(rp.target_rate(), Rate::from_gbps(100));
    // The quiet timers still exist and run exactly when a later call reaches them.
    assert!(rp.next_timer().is_some());
}

#[test]
fn mlx_spurious_timeout_and_cnp_burst() {
    let profile = hpcc_run_py().profile(Rate::from_gbps(100)).unwrap();
    let mut rp = DcqcnRp::new(profile);
    rp.on_timeout(us(50)); // nothing armed: nothing happens
    assert_eq!(rp.rate(), Rate::from_gbps(100));
    rp.on_cnp(us(100));
    let before = rp.clone();
    rp.on_timeout(Instant::from_nanos(100_500)); // nothing due yet
    assert_eq!(rp, before);
    // Many CNPs within one check period cause one cut.
    rp.on_cnp(us(101));
    rp.on_cnp(us(102));
    rp.on_timeout(Instant::from_nanos(104_001));
    let once = rp.rate();
    rp.on_timeout(Instant::from_nanos(108_001));
    assert_eq!(rp.rate(), once);
    assert!(!rp.snapshot().cnp_pending);
}

#[test]
fn mlx_rate_on_first_cnp_and_clamp_always() {
    let p = DcqcnParams {
        rate_to_set_on_first_cnp: 40_000,
        clamp_tgt_rate: true,
        ..hpcc_run_py()
    }
    .profile(Rate::from_gbps(100))
    .unwrap();
    let mut rp = DcqcnRp::new(p);
    rp.on_cnp(us(0));
    assert_eq!(rp.rate(), Rate::from_gbps(40));
    assert_eq!(rp.target_rate(), Rate::from_gbps(40));
    rp.on_timeout(Instant::from_nanos(4_001));
    // Clamp always: R_T = R_C = 40e9 before the cut even at stage 0.
    assert_eq!(rp.target_rate(), Rate::from_gbps(40));
    assert!(rp.rate() < Rate::from_gbps(40));
}

/// The paper variant's byte counter, by hand. 10 Gb/s, alpha 1 (initial_alpha_value 1024),
/// g = 1/2 (dce_tcp_g 512), B = 10000 octets, F = 2, R_AI 100 Mb/s, R_HAI 500 Mb/s, timer
/// 1000 us, target clamped on every CNP (the paper's R_T = R_C).
#[test]
fn paper_byte_counter_by_hand() {
    let p = DcqcnParams {
        variant: Variant::Paper,
        dce_tcp_g: 512,
        dce_tcp_rtt: 55,
        initial_alpha_value: 1024,
        clamp_tgt_rate: true,
        rpg_time_reset: 1000,
        rpg_byte_reset: 10_000,
        rpg_threshold: 2,
        rpg_ai_rate: 100,
        rpg_hai_rate: 500,
        ..DcqcnParams::default()
    }
    .profile(Rate::from_gbps(10))
    .unwrap();
    let mut rp = DcqcnRp::new(p);
    let t0 = us(0);
    let rt = |rp: &DcqcnRp| (rp.rate().as_bps(), rp.target_rate().as_bps());
    rp.on_tx(t0, 50_000); // before any CNP the counter does not run
    assert_eq!(rp.snapshot().byte_stage, 0);
    // CNP: R_T = R_C = 10e9; R_C = 10e9 * (1 - 1/2) = 5e9; alpha = 1/2 * 1 + 1/2 = 1.
    rp.on_cnp(t0);
    assert_eq!(rt(&rp), (5_000_000_000, 10_000_000_000));
    assert_eq!(rp.snapshot().alpha, 1.0);
    rp.on_tx(t0, 9_999);
    assert_eq!(rt(&rp), (5_000_000_000, 10_000_000_000), "9999 < B");
    // Byte stage 1 (<= F): fast recovery 5e9/2 + 10e9/2 = 7.5e9.
    rp.on_tx(t0, 1);
    assert_eq!(rt(&rp), (7_500_000_000, 10_000_000_000));
    // Byte stage 2 (<= F): 3.75e9 + 5e9 = 8.75e9.
    rp.on_tx(t0, 10_000);
    assert_eq!(rt(&rp), (8_750_000_000, 10_000_000_000));
    // Second CNP: R_T = 8.75e9, R_C = 4.375e9; stages back to 0.
    rp.on_cnp(t0);
    assert_eq!(rt(&rp), (4_375_000_000, 8_750_000_000));
    // Bytes: stage 1 FR 2.1875e9 + 4.375e9 = 6.5625e9; stage 2 FR 3.28125e9 + 4.375e9 =
    // 7.65625e9; stage 3 > F with the timer stage 0: additive, R_T = 8.85e9, R_C =
    // 3.828125e9 + 4.425e9 = 8.253125e9.
    rp.on_tx(t0, 10_000);
    assert_eq!(rt(&rp), (6_562_500_000, 8_750_000_000));
    rp.on_tx(t0, 10_000);
    assert_eq!(rt(&rp), (7_656_250_000, 8_750_000_000));
    rp.on_tx(t0, 10_000);
    assert_eq!(rt(&rp), (8_253_125_000, 8_850_000_000));
    // Timer at 1000 us: timer stage 1, byte stage 3: one past F: additive: R_T 8.95e9,
    // R_C = 4.1265625e9 + 4.475e9 = 8.6015625e9. (Alpha timers ran meanwhile: no effect here.)
    rp.on_timeout(us(1000));
    assert_eq!(rt(&rp), (8_601_562_500, 8_950_000_000));
    rp.on_timeout(us(2000)); // timer stage 2: additive: 4.30078125e9 + 4.525e9
    assert_eq!(rt(&rp), (8_825_781_250, 9_050_000_000));
    // Timer stage 3, byte stage 3: both past F: hyper by R_HAI * (3 - 2): R_T 9.55e9;
    // R_C = 4.412890625e9 + 4.775e9 = 9.187890625e9.
    rp.on_timeout(us(3000));
    assert_eq!(rt(&rp), (9_187_890_625, 9_550_000_000));
    // Byte stage 4: min(3, 4) - 2 = 1: R_T 10.05e9 capped at 10e9; R_C = 4_593_945_312 + 5e9.
    rp.on_tx(us(3000), 10_000);
    assert_eq!(rt(&rp), (9_593_945_312, 10_000_000_000));
    let s = rp.snapshot();
    assert_eq!((s.time_stage, s.byte_stage, s.byte_count), (3, 4, 0));
    // Alpha decayed once per 55 us without a CNP since the last CNP at 0: 54 times by 3000 us.
    assert_eq!(s.alpha, 0.5f64.powi(54));
}

#[test]
fn ue_hold_blocks_increases_within_the_window() {
    let p = DcqcnParams {
        ue_reaction: UeReaction::Hold,
        ue_hold_window: 500,
        ..hpcc_run_py()
    }
    .profile(Rate::from_gbps(100))
    .unwrap();
    let mut rp = DcqcnRp::new(p);
    rp.on_cnp(us(0));
    rp.on_timeout(Instant::from_nanos(4_001));
    let cut = rp.rate();
    rp.on_ue(us(10));
    // The increase at 304.001 us is inside [10 us, 510 us): held; the one at 604.001 us runs
    // fast recovery from stage 0.
    rp.on_timeout(Instant::from_nanos(304_001));
    assert_eq!(rp.rate(), cut);
    assert_eq!(rp.snapshot().held_increases, 1);
    assert_eq!(rp.snapshot().time_stage, 0);
    rp.on_timeout(Instant::from_nanos(604_001));
    assert_eq!(rp.rate().as_bps(), cut.as_bps() / 2 + 50_000_000_000);

    // Ignore: the same UE changes nothing.
    let mut ig = DcqcnRp::new(hpcc_run_py().profile(Rate::from_gbps(100)).unwrap());
    ig.on_cnp(us(0));
    ig.on_ue(us(10));
    ig.on_timeout(Instant::from_nanos(304_001));
    assert_eq!(ig.snapshot().held_increases, 0);
    assert_eq!(ig.snapshot().time_stage, 1);
}

#[test]
fn defaults_and_validation() {
    let p = DcqcnParams::default()
        .profile(Rate::from_gbps(100))
        .unwrap();
    assert_eq!(p.g, 5.0 / 1024.0);
    assert_eq!(p.dec_scale, 0.5);
    assert_eq!(p.initial_alpha, 1023.0 / 1024.0);
    assert_eq!(p.min_rate, Rate::from_mbps(1));
    assert_eq!(p.decrease_interval, Duration::from_micros(4));
    assert_eq!(p.time_reset, Duration::from_micros(300));
    let bad = |d: DcqcnParams| d.profile(Rate::from_gbps(100)).unwrap_err().param;
    // 1024 is g = 0 (third.cc's EWMA_GAIN default, `1 / 16` in integers): alpha never moves.
    let still = DcqcnParams {
        dce_tcp_g: 1024,
        ..DcqcnParams::default()
    };
    assert_eq!(still.profile(Rate::from_gbps(100)).unwrap().g, 0.0);
    assert_eq!(
        bad(DcqcnParams {
            dce_tcp_g: 1025,
            ..DcqcnParams::default()
        }),
        "dce_tcp_g"
    );
    assert_eq!(
        bad(DcqcnParams {
            dce_tcp_rtt: 0,
            ..DcqcnParams::default()
        }),
        "dce_tcp_rtt"
    );
    assert_eq!(
        bad(DcqcnParams {
            ue_reaction: UeReaction::Hold,
            ue_hold_window: 0,
            ..DcqcnParams::default()
        }),
        "ue_hold_window"
    );
    assert_eq!(
        bad(DcqcnParams {
            initial_alpha_value: 2000,
            ..DcqcnParams::default()
        }),
        "initial_alpha_value"
    );
}

#[derive(Clone, Debug)]
enum Ev {
    Cnp,
    Tx(u64),
    Ue,
    Advance(u64),
}

fn ev() -> impl Strategy<Value = Ev> {
    prop_oneof![
        2 => Just(Ev::Cnp),
        3 => (64u64..20_000).prop_map(Ev::Tx),
        1 => Just(Ev::Ue),
        3 => (0u64..400_000).prop_map(Ev::Advance),
    ]
}

proptest! {
    /// Random CNP / frame / UE / time sequences, both variants, random gains and periods:
    /// the rate stays in [min rate, max rate], the target never exceeds the max rate, alpha
    /// stays in [0, 1], and after on_timeout(now) no timer is left at or before now.
    #[test]
    fn rates_stay_within_bounds(
        paper in any::<bool>(),
        hold in any::<bool>(),
        g in 0u32..1024,
        alpha_us in 5u64..100,
        dec_us in 1u64..100,
        inc_us in 5u64..500,
        threshold in 0u32..6,
        first in prop_oneof![Just(0u64), 1u64..200_000],
        min_mbps in 1u64..5_000,
        events in proptest::collection::vec(ev(), 1..150),
    ) {
        let params = DcqcnParams {
            variant: if paper { Variant::Paper } else { Variant::Mlx },
            dce_tcp_g: g,
            dce_tcp_rtt: alpha_us,
            rate_reduce_monitor_period: dec_us,
            rpg_time_reset: inc_us,
            rpg_threshold: threshold,
            rpg_byte_reset: 30_000,
            rate_to_set_on_first_cnp: first,
            rpg_min_rate: min_mbps,
            rpg_hai_rate: 5_000,
            ue_reaction: if hold { UeReaction::Hold } else { UeReaction::Ignore },
            ..DcqcnParams::default()
        };
        let profile = params.profile(Rate::from_gbps(100)).unwrap();
        let mut rp = DcqcnRp::new(profile);
        let mut now = Instant::ZERO;
        for e in events {
            match e {
                Ev::Cnp => rp.on_cnp(now),
                Ev::Tx(b) => rp.on_tx(now, b),
                Ev::Ue => rp.on_ue(now),
                Ev::Advance(ns) => {
                    now += Duration::from_nanos(ns);
                    rp.on_timeout(now);
                    if let Some(d) = rp.next_deadline() {
                        prop_assert!(d > now);
                    }
                }
            }
            let s = rp.snapshot();
            prop_assert!(s.rate >= profile.min_rate && s.rate <= profile.max_rate, "{:?}", s);
            prop_assert!(s.target_rate <= profile.max_rate, "{:?}", s);
            prop_assert!((0.0..=1.0).contains(&s.alpha), "{:?}", s);
        }
    }
}

proptest! {
    /// Waking only at `next_deadline()` (quiet timers run lazily) gives exactly the state of
    /// waking at every timer (`next_timer()`, ns-3's way), after every input.
    #[test]
    fn quiet_timers_change_nothing_observable(
        paper in any::<bool>(),
        hold in any::<bool>(),
        threshold in 0u32..4,
        events in proptest::collection::vec(ev(), 1..120),
    ) {
        let params = DcqcnParams {
            variant: if paper { Variant::Paper } else { Variant::Mlx },
            dce_tcp_g: 1020,
            dce_tcp_rtt: 3,
            rpg_time_reset: 20,
            rpg_threshold: threshold,
            rpg_byte_reset: 30_000,
            rpg_hai_rate: 20_000,
            ue_reaction: if hold { UeReaction::Hold } else { UeReaction::Ignore },
            ue_hold_window: 30,
            ..hpcc_run_py()
        };
        let profile = params.profile(Rate::from_gbps(100)).unwrap();
        let mut lazy = DcqcnRp::new(profile);
        let mut dense = DcqcnRp::new(profile);
        let mut now = Instant::ZERO;
        let mut lazy_wakeups = 0u32;
        let mut dense_wakeups = 0u32;
        for e in events {
            if let Ev::Advance(ns) = e {
                now += Duration::from_nanos(ns);
            }
            while let Some(d) = lazy.next_deadline().filter(|&d| d <= now) {
                lazy.on_timeout(d);
                lazy_wakeups += 1;
            }
            while let Some(d) = dense.next_timer().filter(|&d| d <= now) {
                dense.on_timeout(d);
                dense_wakeups += 1;
            }
            prop_assert_eq!(lazy.rate(), dense.rate());
            prop_assert_eq!(lazy.target_rate(), dense.target_rate());
            match e {
                Ev::Cnp => { lazy.on_cnp(now); dense.on_cnp(now); }
                Ev::Tx(b) => { lazy.on_tx(now, b); dense.on_tx(now, b); }
                Ev::Ue => { lazy.on_ue(now); dense.on_ue(now); }
                Ev::Advance(_) => { lazy.on_timeout(now); dense.on_timeout(now); }
            }
            prop_assert_eq!(lazy.state(), dense.state());
        }
        prop_assert!(lazy_wakeups <= dense_wakeups);
    }
}
