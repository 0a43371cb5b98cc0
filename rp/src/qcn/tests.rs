//! Hand-computed traces of seed 000 (QCN RP) and model-based property tests.

use super::*;
use proptest::prelude::*;

const C10G: u64 = 10_000_000_000;
const F: FlowId = FlowId(7);

/// Current rate after each of the five fast-recovery cycles that follow a QntzFb-63 CNM at
/// 10 Gb/s (worked out in `cnm_63_at_10g_then_fast_recovery_ai_and_hai`).
const FR_AFTER_CNM_63: [u64; 5] = [
    7_539_062_500,
    8_769_531_250,
    9_384_765_625,
    9_692_382_812,
    9_846_191_406,
];

fn ms(m: u64) -> Instant {
    Instant::from_nanos(m * 1_000_000)
}

fn rp_10g(params: QcnParams) -> QcnRp {
    QcnRp::new(params.profile(Rate::from_gbps(10)).unwrap())
}

/// Sends 1500-octet frames (queue never empty) until a byte-counter cycle completes; returns
/// how many frames that took.
fn send_until_cycle(rp: &mut QcnRp, now: Instant) -> u32 {
    for n in 1..=1000 {
        match rp.on_tx(now, F, 1500, false) {
            TxOutcome::Increased => return n,
            TxOutcome::Counted => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    panic!("no cycle in 1000 frames");
}

fn rates(rp: &QcnRp) -> (u64, u64) {
    (rp.rate(F).as_bps(), rp.target_rate(F).as_bps())
}

#[test]
fn defaults_are_the_ieee_mib_values() {
    let p = QcnParams::default().profile(Rate::from_gbps(10)).unwrap();
    assert_eq!(p.max_rate, Rate::from_gbps(10));
    assert_eq!(p.min_rate, Rate::from_mbps(5));
    assert_eq!(p.ai_rate, Rate::from_mbps(5));
    assert_eq!(p.hai_rate, Rate::from_mbps(50));
    assert_eq!(p.time_reset, Duration::from_millis(15));
    assert_eq!(p.byte_reset, 150_000);
    assert_eq!(p.threshold, 5);
    assert_eq!(p.gd_shift, 7);
    assert_eq!(p.min_dec_pct, 50);
}

/// The trace the issue asks for: one CNM with QntzFb 63 at 10 Gb/s, fast recovery cycle by
/// cycle, then active and hyper-active increase. IEEE defaults (Gd = 1/128, byte cycle 150000
/// octets, timer 15 ms, threshold 5, A = 5 Mb/s, B = 50 Mb/s). Every number below is computed by
/// hand from the seed lines quoted, in integer bit/s with division rounding down.
#[test]
fn cnm_63_at_10g_then_fast_recovery_ai_and_hai() {
    let mut rp = rp_10g(QcnParams::default());
    assert_eq!(rp.rate(F), Rate::from_gbps(10), "no limiter: C");

    // CNM, QntzFb 63 (000:50-54 as corrected): factor 1 - 63/128 = 65/128 (> min 1/2), so
    // crate = 10e9 * 65 / 128 = 5_078_125_000; trate = C = 10e9 (000:40); timer at 15 ms.
    let out = rp.on_cnm(ms(0), F, 63).unwrap();
    assert_eq!(
        out,
        CnmOutcome::Decreased {
            new_limiter: true,
            rate: Rate::from_bps(5_078_125_000)
        }
    );
    assert_eq!(rates(&rp), (5_078_125_000, C10G));
    assert_eq!(rp.next_deadline(), Some(ms(15)));

    // Fast recovery (000:79 Ri = 0, 000:91 crate = (trate + crate)/2). A cycle ends when
    // tx_bcount > 150000 (000:120), i.e. on the 101st 1500-octet frame (100 frames = 150000,
    // not greater).
    //   cycle 1: (10e9 + 5_078_125_000)/2 = 7_539_062_500
    //   cycle 2: (10e9 + 7_539_062_500)/2 = 8_769_531_250
    //   cycle 3: (10e9 + 8_769_531_250)/2 = 9_384_765_625
    //   cycle 4: (10e9 + 9_384_765_625)/2 = 9_692_382_812 (.5 dropped)
    //   cycle 5: (10e9 + 9_692_382_812)/2 = 9_846_191_406
    for (i, want) in FR_AFTER_CNM_63.into_iter().enumerate() {
        assert_eq!(send_until_cycle(&mut rp, ms(1)), 101, "cycle {}", i + 1);
        assert_eq!(rates(&rp), (want, C10G), "fast recovery cycle {}", i + 1);
        assert_eq!(rp.snapshot(F).unwrap().si_count, i as u32 + 1);
    }

    // si_count = 5 is no longer < 5 (000:115), so the byte cycle halves to 75000 octets: the
    // 51st frame (76500 > 75000) ends it. si_count = 6 > 5, timer_scount = 0: active increase
    // (000:76 Ri = A = 5 Mb/s): trate = 10_005_000_000; crate = (10_005_000_000 +
    // 9_846_191_406)/2 = 9_925_595_703.
    assert_eq!(send_until_cycle(&mut rp, ms(2)), 51);
    assert_eq!(rates(&rp), (9_925_595_703, 10_005_000_000));

    // Timer (000:128-141), nothing due before 15 ms: a spurious call does nothing.
    rp.on_timeout(ms(14));
    assert_eq!(rates(&rp), (9_925_595_703, 10_005_000_000));
    // 15 ms: timer_scount = 1; si_count 6 > 5 -> AI: trate = 10_010_000_000;
    // crate = (10_010_000_000 + 9_925_595_703)/2 = 9_967_797_851. Next period: 1 < 5 -> 15 ms.
    rp.on_timeout(ms(15));
    assert_eq!(rates(&rp), (9_967_797_851, 10_010_000_000));
    assert_eq!(rp.next_deadline(), Some(ms(30)));
    // 30 ms: ts = 2, AI: trate 10_015_000_000; crate (10_015_000_000 + 9_967_797_851)/2 =
    // 9_991_398_925.
    rp.on_timeout(ms(30));
    assert_eq!(rates(&rp), (9_991_398_925, 10_015_000_000));
    // 45 ms: ts = 3, AI: trate 10_020_000_000; (10_020_000_000 + 9_991_398_925)/2 =
    // 10_005_699_462 > C, saturated at C (000:94-95).
    rp.on_timeout(ms(45));
    assert_eq!(rates(&rp), (C10G, 10_020_000_000));
    // 60 ms ts = 4 and 75 ms ts = 5: AI twice more (ts = 5 is not > 5): trate 10_030_000_000.
    // After ts = 5 the period halves (000:136-139 with TIMER_PERIOD): next at 82.5 ms.
    rp.on_timeout(ms(75)); // a late caller: both the 60 ms and the 75 ms timers run
    assert_eq!(rates(&rp), (C10G, 10_030_000_000));
    assert_eq!(rp.snapshot(F).unwrap().timer_scount, 5);
    assert_eq!(rp.next_deadline(), Some(Instant::from_nanos(82_500_000)));

    // One more byte cycle (half length, 51 frames): si = 7, ts = 5 -> only one stage past the
    // threshold: AI, trate 10_035_000_000, crate stays at C.
    assert_eq!(send_until_cycle(&mut rp, ms(80)), 51);
    assert_eq!(rates(&rp), (C10G, 10_035_000_000));

    // 82.5 ms: ts = 6. Both stages > 5: hyper-active increase (000:73) with
    // to_count = min(7, 6) = 6: Ri = 50 Mb/s * (6 - 5) = 50 Mb/s: trate 10_085_000_000.
    rp.on_timeout(Instant::from_nanos(82_500_000));
    assert_eq!(rates(&rp), (C10G, 10_085_000_000));
    assert_eq!(rp.next_deadline(), Some(ms(90)));
    // Next byte cycle: si = 8, to_count = min(8, 6) = 6: Ri = 50 Mb/s again: 10_135_000_000.
    assert_eq!(send_until_cycle(&mut rp, ms(85)), 51);
    assert_eq!(rates(&rp), (C10G, 10_135_000_000));
    // 90 ms: ts = 7, to_count = min(8, 7) = 7: Ri = 50 Mb/s * 2 = 100 Mb/s: 10_235_000_000.
    rp.on_timeout(ms(90));
    assert_eq!(rates(&rp), (C10G, 10_235_000_000));

    // At C with the queue empty the limiter goes back to the pool (000:103-110).
    assert_eq!(rp.on_tx(ms(91), F, 1500, true), TxOutcome::Released);
    assert_eq!(rp.active(), 0);
    assert_eq!(rp.next_deadline(), None);
    assert_eq!(rp.rate(F), Rate::from_gbps(10));
    let c = rp.counters();
    assert_eq!((c.assigned, c.released, c.decreases), (1, 1, 1));
    // Byte cycles: 5 fast recovery + 3 half-length; timer cycles: 15, 30, 45, 60, 75, 82.5, 90 ms.
    assert_eq!((c.byte_cycles, c.timer_cycles), (8, 7));
}

#[test]
fn timer_alone_walks_fast_recovery_then_halves_its_period() {
    // No frames sent: the timer does fast recovery on its own (001: "the timer allows the RL to
    // rapidly increase when its sending rate is very low"). Same averages as the byte cycles.
    let mut rp = rp_10g(QcnParams::default());
    rp.on_cnm(ms(0), F, 63).unwrap();
    for (i, want) in FR_AFTER_CNM_63.into_iter().enumerate() {
        let t = ms(15 * (i as u64 + 1));
        assert_eq!(rp.next_deadline(), Some(t));
        rp.on_timeout(t);
        assert_eq!(rates(&rp), (want, C10G), "timer cycle {}", i + 1);
    }
    // ts = 5: the period halves to 7.5 ms; at ts = 6 only the timer stage is past 5: AI.
    assert_eq!(rp.next_deadline(), Some(Instant::from_nanos(82_500_000)));
    rp.on_timeout(Instant::from_nanos(82_500_000));
    assert_eq!(rates(&rp), (9_925_595_703, 10_005_000_000));
}

#[test]
fn second_cnm_resets_target_stages_and_timer() {
    let mut rp = rp_10g(QcnParams::default());
    rp.on_cnm(ms(0), F, 63).unwrap();
    send_until_cycle(&mut rp, ms(1)); // crate 7_539_062_500, si 1
                                      // QntzFb 32: factor 1 - 32/128 = 96/128 = 3/4: 7_539_062_500 * 96 / 128 = 5_654_296_875.
                                      // trate = crate before the cut (000:40) = 7_539_062_500.
    let out = rp.on_cnm(ms(3), F, 32).unwrap();
    assert_eq!(
        out,
        CnmOutcome::Decreased {
            new_limiter: false,
            rate: Rate::from_bps(5_654_296_875)
        }
    );
    assert_eq!(rates(&rp), (5_654_296_875, 7_539_062_500));
    let s = rp.snapshot(F).unwrap();
    assert_eq!((s.si_count, s.timer_scount, s.tx_bcount), (0, 0, 0));
    assert_eq!(rp.next_deadline(), Some(ms(18)));
}

#[test]
fn min_dec_factor_and_min_rate_bound_the_cut() {
    // Gd = 1/64 (rpg_gd 6): 1 - 63/64 = 1/64 < 50 %: the cut stops at half.
    let mut rp = rp_10g(QcnParams {
        rpg_gd: 6,
        ..QcnParams::default()
    });
    rp.on_cnm(ms(0), F, 63).unwrap();
    assert_eq!(rp.rate(F).as_bps(), 5_000_000_000);
    // Repeated cuts never go below rpg_min_rate = 5 Mb/s (000:55-56).
    for i in 0..20 {
        rp.on_cnm(ms(i), F, 63).unwrap();
    }
    assert_eq!(rp.rate(F), Rate::from_mbps(5));
}

#[test]
fn extra_fast_recovery_keeps_target_in_first_cycle_and_divides_it_by_8() {
    // rpg_min_dec_fac 0 and Gd = 1/64 so that QntzFb 63 leaves 1/64 of the rate:
    // crate = 10e9 / 64 = 156_250_000; trate = 10e9.
    let params = QcnParams {
        rpg_gd: 6,
        rpg_min_dec_fac: 0,
        extra_fast_recovery: true,
        ..QcnParams::default()
    };
    let mut rp = rp_10g(params);
    rp.on_cnm(ms(0), F, 63).unwrap();
    assert_eq!(rates(&rp), (156_250_000, C10G));
    // A second CNM while si_count == 0 (first cycle): 000:38-39 keep trate and tx_bcount.
    rp.on_tx(ms(0), F, 1500, false);
    rp.on_cnm(ms(0), F, 1).unwrap(); // factor 63/64: 156_250_000 * 63 / 64 = 153_808_593
    assert_eq!(rates(&rp), (153_808_593, C10G));
    assert_eq!(rp.snapshot(F).unwrap().tx_bcount, 1500);
    // End of the first cycle (si_count 1), trate > 10 * crate: trate = 10e9/8 = 1_250_000_000
    // (000:87); crate = (1_250_000_000 + 153_808_593)/2 = 701_904_296.
    assert_eq!(send_until_cycle(&mut rp, ms(1)), 100); // 1500 already counted
    assert_eq!(rates(&rp), (701_904_296, 1_250_000_000));
}

#[test]
fn zero_feedback_disabled_bad_feedback_and_pool_full() {
    let mut rp = rp_10g(QcnParams {
        rppp_max_rps: 2,
        ..QcnParams::default()
    });
    assert_eq!(rp.on_cnm(ms(0), F, 0), Ok(CnmOutcome::Ignored));
    assert_eq!(rp.active(), 0);
    assert_eq!(rp.on_cnm(ms(0), F, 64), Err(CnmError::FbOutOfRange(64)));
    assert_eq!(rp.counters().cnm_bad_fb, 1);
    rp.on_cnm(ms(0), FlowId(1), 10).unwrap();
    rp.on_cnm(ms(0), FlowId(2), 10).unwrap();
    assert_eq!(rp.on_cnm(ms(0), FlowId(2), 0), Ok(CnmOutcome::NoChange));
    assert_eq!(rp.on_cnm(ms(0), FlowId(3), 10), Ok(CnmOutcome::PoolFull));
    assert_eq!(rp.counters().cnm_pool_full, 1);
    assert_eq!(rp.rate(FlowId(3)), Rate::from_gbps(10));
    assert_eq!(
        rp.on_tx(ms(0), FlowId(3), 1500, true),
        TxOutcome::NotLimited
    );
    // Not at C: no release even with an empty queue.
    assert_eq!(rp.on_tx(ms(0), FlowId(1), 1500, true), TxOutcome::Counted);

    let mut off = rp_10g(QcnParams {
        rpg_enable: false,
        ..QcnParams::default()
    });
    assert_eq!(off.on_cnm(ms(0), F, 63), Ok(CnmOutcome::Disabled));
    assert_eq!(off.active(), 0);
}

#[test]
fn validation_names_the_parameter() {
    let g = Rate::from_gbps(10);
    let bad = |p: QcnParams| p.profile(g).unwrap_err().param;
    assert_eq!(
        bad(QcnParams {
            rpg_time_reset: 0,
            ..QcnParams::default()
        }),
        "rpg_time_reset"
    );
    assert_eq!(
        bad(QcnParams {
            rppp_max_rps: 0,
            ..QcnParams::default()
        }),
        "rppp_max_rps"
    );
    assert_eq!(
        bad(QcnParams {
            rpg_min_rate: 20_000,
            ..QcnParams::default()
        }),
        "rpg_min_rate"
    );
    assert_eq!(
        bad(QcnParams {
            rpg_min_dec_fac: 101,
            ..QcnParams::default()
        }),
        "rpg_min_dec_fac"
    );
    assert_eq!(
        QcnParams::default().profile(Rate::ZERO).unwrap_err().param,
        "line_rate"
    );
    // rpg_max_rate caps C below the port speed.
    let p = QcnParams {
        rpg_max_rate: 4_000,
        ..QcnParams::default()
    }
    .profile(g)
    .unwrap();
    assert_eq!(p.max_rate, Rate::from_gbps(4));
    let msg = QcnParams {
        rpg_gd: 40,
        ..QcnParams::default()
    }
    .profile(g)
    .unwrap_err()
    .to_string();
    assert!(msg.contains("rpg_gd"), "{msg}");
}

#[derive(Clone, Debug)]
enum Ev {
    Cnm { flow: u32, fb: u8 },
    Tx { flow: u32, bytes: u64, empty: bool },
    Advance { us: u64 },
}

fn ev() -> impl Strategy<Value = Ev> {
    prop_oneof![
        (0u32..6, 0u8..70).prop_map(|(flow, fb)| Ev::Cnm { flow, fb }),
        (0u32..6, 64u64..9000, any::<bool>()).prop_map(|(flow, bytes, empty)| Ev::Tx {
            flow,
            bytes,
            empty
        }),
        (0u64..20_000).prop_map(|us| Ev::Advance { us }),
    ]
}

proptest! {
    /// Random CNM / frame / time sequences against a model of the pool's membership:
    /// limiters are assigned on the first non-zero QntzFb while a slot is free and released
    /// only at C with an empty queue; rates stay in [min rate, C]; the pool never exceeds its
    /// size; timers never lie in the past after on_timeout.
    #[test]
    fn pool_and_rates_stay_within_bounds(
        pool in 1u32..4,
        efr in any::<bool>(),
        time_reset in 50u64..20_000,
        events in proptest::collection::vec(ev(), 1..400),
    ) {
        let params = QcnParams {
            rppp_max_rps: pool,
            extra_fast_recovery: efr,
            rpg_time_reset: time_reset,
            rpg_byte_reset: 20_000,
            ..QcnParams::default()
        };
        let profile = params.profile(Rate::from_gbps(10)).unwrap();
        let mut rp = QcnRp::new(profile);
        let mut model: std::collections::BTreeSet<u32> = Default::default();
        let mut now = Instant::ZERO;
        for e in events {
            match e {
                Ev::Cnm { flow, fb } => {
                    let r = rp.on_cnm(now, FlowId(flow), fb);
                    if fb > 63 {
                        prop_assert!(r.is_err());
                    } else if fb != 0 && !model.contains(&flow) {
                        if model.len() < pool as usize {
                            model.insert(flow);
                            prop_assert!(
                                matches!(r, Ok(CnmOutcome::Decreased { new_limiter: true, .. })),
                                "{:?}", r
                            );
                        } else {
                            prop_assert_eq!(r, Ok(CnmOutcome::PoolFull));
                        }
                    }
                }
                Ev::Tx { flow, bytes, empty } => {
                    let at_c = rp.rate(FlowId(flow)) == profile.max_rate;
                    let r = rp.on_tx(now, FlowId(flow), bytes, empty);
                    if model.contains(&flow) && at_c && empty {
                        model.remove(&flow);
                        prop_assert_eq!(r, TxOutcome::Released);
                    }
                }
                Ev::Advance { us } => {
                    now += Duration::from_micros(us);
                    rp.on_timeout(now);
                    if let Some(d) = rp.next_deadline() {
                        prop_assert!(d > now);
                    }
                }
            }
            prop_assert!(rp.active() <= pool as usize);
            let flows: std::collections::BTreeSet<u32> = rp.limited_flows().map(|f| f.0).collect();
            prop_assert_eq!(&flows, &model);
            for f in 0..6 {
                let r = rp.rate(FlowId(f));
                prop_assert!(r >= profile.min_rate && r <= profile.max_rate, "rate {}", r);
            }
        }
    }
}
