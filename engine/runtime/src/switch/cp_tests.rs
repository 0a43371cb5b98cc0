//! Tests of the switch core's congestion points ([`quench_node::switch::cp`]) with the switch's own
//! frames and configuration files.
mod tests {
    use crate::switch::egress::Classified;
    use cp::red::{RedParams, RedProfile};
    use cp::tcd::{TcdParams, TcdProfile};
    use quench_node::switch::core::{CpProfiles, PortCp};
    use quench_node::switch::core::{Event, SwitchCore};
    use quench_node::switch::cp::*;
    use quench_node::switch::queue::{Class, QueueLimits};
    use quench_port::heap::HeapFrame;
    use quench_port::Frame;
    use quench_wire::cnm;
    use quench_wire::frame::{decode, Body};
    use quench_wire::ipv4::Ecn;
    use quench_wire::MacAddr;
    use rand_xoshiro::rand_core::SeedableRng;
    use units::{Duration, Instant, Rate};

    type Core = SwitchCore<Classified<HeapFrame>>;

    fn frame(ecn: Ecn, rpid: Option<u16>) -> Vec<u8> {
        quench_wire::frame::test_frame(5, 0, 0, ecn, rpid)
    }

    fn hook(toml_text: &str) -> CpHook {
        let c: CongestionConfig = toml::from_str(toml_text).unwrap();
        CpHook::from_config(0, &c, MacAddr::new(2, 0, 0, 0, 0, 0xcc)).unwrap()
    }

    /// A one-port switch core whose port has the congestion points of `toml_text`.
    fn core(toml_text: &str) -> Core {
        let mut c = Core::new(1);
        let limits = QueueLimits {
            data_bytes: 10_000_000,
            control_bytes: 64 * 1024,
        };
        c.attach(0, limits, hook(toml_text), Rate::from_gbps(1));
        c
    }

    fn push(c: &mut Core, now: Instant, prio: u8, bytes: &[u8]) {
        let f = Classified::classify(HeapFrame::copy_of(bytes).unwrap());
        c.handle_frame(now, 0, 0, Class::Data(prio), f);
    }

    fn pop(c: &mut Core, now: Instant) -> Option<(Class, Vec<u8>)> {
        c.poll_transmit(now, 0)
            .map(|(class, f)| (class, f.frame.data().to_vec()))
    }

    fn counters(c: &Core) -> CpCounters {
        c.queue(0).unwrap().hook().counters()
    }

    #[test]
    fn qcn_sends_cnms_to_the_source_with_the_cn_tag() {
        let mut c = core("port = \"p\"\npriorities = [3]\nqcn = { sample_jitter_percent = 0 }");
        let f = frame(Ecn::NotEct, Some(0x1234));
        // 400 frames of 1000 octets, nothing dequeued: the queue passes Qeq = 26000 quickly.
        for _ in 0..400 {
            push(&mut c, Instant::ZERO, 3, &f);
        }
        let n = counters(&c);
        assert!(n.cnms > 0, "{n:?}");
        let mut cnms = Vec::new();
        while let Some(ev) = c.poll_event() {
            match ev {
                Event::Cnm { port: 0, cnm } => cnms.push(cnm),
                e => panic!("{e:?}"),
            }
        }
        assert_eq!(cnms.len() as u64, n.cnms);
        let d = decode(&cnms[0]).unwrap();
        assert_eq!(d.l2.dst, MacAddr::new(2, 0, 0, 0, 1, 1));
        assert_eq!(d.l2.src, MacAddr::new(2, 0, 0, 0, 0, 0xcc));
        assert_eq!(d.l2.rpid, Some(0x1234));
        let Body::Cnm(cnm) = d.body else { panic!() };
        assert!(cnm.qntz_fb > 0);
        assert_eq!(cnm.cpid, cnm::cpid(MacAddr::new(2, 0, 0, 0, 0, 0xcc), 3));
        assert_eq!(cnm.encap_da, MacAddr::new(2, 0, 0, 0, 9, 1));
        assert_eq!(cnm.encap_msdu.len(), 64);
        assert_eq!(cnm.encap_msdu, &f[12..76]);
    }

    /// A test frame of `len` octets with an empty INT header (hops mode).
    fn int_frame(len: usize) -> Vec<u8> {
        use quench_wire::frame::{emit_test_frame_int, Ipv4UdpHeaders};
        use quench_wire::int::{IntRepr, Mode};
        let h = Ipv4UdpHeaders {
            l2: quench_wire::ethernet::L2Repr::new(
                MacAddr::new(2, 0, 0, 0, 9, 1),
                MacAddr::new(2, 0, 0, 0, 1, 1),
                quench_wire::ethernet::ethertype::IPV4,
            ),
            src: "10.0.0.1".parse().unwrap(),
            dst: "10.0.0.2".parse().unwrap(),
            dscp: 0,
            ecn: Ecn::Ect0,
            src_port: 40_000,
            dst_port: quench_wire::testhdr::UDP_PORT,
        };
        let hdr = quench_wire::testhdr::TestHdrRepr::new(units::FlowId(1), 0, Instant::ZERO);
        let mut buf = vec![0u8; 2048];
        let n = emit_test_frame_int(&h, &hdr, Some(&IntRepr::empty(Mode::Hops)), len, &mut buf)
            .unwrap();
        buf.truncate(n);
        buf
    }

    #[test]
    fn int_stamps_time_octets_sent_queue_and_rate_on_dequeue() {
        use quench_wire::int::{IntData, IntRepr};
        // A 1 Gb/s port stamps 25 Gb/s (the smallest rate a hop names) and scales its octets by
        // 25: the utilisation a reaction point reads is the one at 1 Gb/s.
        let c: CongestionConfig = toml::from_str("port = \"p\"\nint = true").unwrap();
        let mac = MacAddr::new(2, 0, 0, 0, 0, 0xcc);
        let e = CpHook::from_config(0, &c, mac)
            .unwrap()
            .with_int_config(0, &c, None)
            .unwrap_err();
        assert_eq!(e.key, "int");
        let h = CpHook::from_config(0, &c, mac)
            .unwrap()
            .with_int_config(0, &c, Some(Rate::from_gbps(1)))
            .unwrap();
        let mut core = Core::new(1);
        let limits = QueueLimits {
            data_bytes: 10_000_000,
            control_bytes: 64 * 1024,
        };
        core.attach(0, limits, h, Rate::from_gbps(1));
        let f = int_frame(1000);
        let plain = frame(Ecn::Ect0, None);
        for _ in 0..3 {
            push(&mut core, Instant::ZERO, 0, &f);
        }
        push(&mut core, Instant::ZERO, 0, &plain);
        let mut hops = Vec::new();
        // Dequeued at one `now`: each frame's time is the one before it plus its 8 us at 1 Gb/s.
        let now = Instant::ZERO;
        let l3 = 14;
        while let Some((_, out)) = pop(&mut core, now) {
            // decode verifies the UDP checksum the stamp kept.
            decode(&out).unwrap();
            if let Some(at) = quench_wire::frame::int_offset(&out, l3) {
                let r = IntRepr::parse(&out[at..]).unwrap();
                assert_eq!(r.nhop, 1);
                let IntData::Hops(w) = r.data else { panic!() };
                hops.push(rp::IntHop(w[0]));
            }
        }
        assert_eq!(hops.len(), 3);
        let n = counters(&core);
        assert_eq!((n.int_stamps, n.int_absent), (3, 1));
        for (i, h) in hops.iter().enumerate() {
            assert_eq!(h.line_rate(), 25_000_000_000);
            // Octets sent before it, and the queue after it left (two, one, then the plain
            // frame's), x 25, in units of 128 and 80.
            assert_eq!(h.bytes(1), (i as u64 * 1000 * 25) / 128 * 128);
            let left = (2 - i as u64) * 1000 + plain.len() as u64;
            assert_eq!(u64::from(h.qlen(1)), left * 25 / 80 * 80);
            assert_eq!(h.time(), i as u64 * 8000);
        }
    }

    #[test]
    fn red_marks_ect_frames_above_kmax_and_leaves_other_priorities() {
        let mut c = core(
            "port = \"p\"\npriorities = [3]\nred = { kmin_bytes = 1000, kmax_bytes = 2000, pmax = 0.2 }",
        );
        for _ in 0..10 {
            push(&mut c, Instant::ZERO, 3, &frame(Ecn::Ect0, None));
            push(&mut c, Instant::ZERO, 2, &frame(Ecn::Ect0, None));
            push(&mut c, Instant::ZERO, 3, &frame(Ecn::NotEct, None));
        }
        let mut ce = [0u32; 8];
        while let Some((class, f)) = pop(&mut c, Instant::ZERO) {
            let Class::Data(p) = class else { continue };
            // decode verifies the IPv4 checksum the incremental update kept.
            if let Body::Ipv4 { ip, .. } = decode(&f).unwrap().body {
                if ip.ecn == Ecn::Ce {
                    ce[p as usize] += 1;
                }
            }
        }
        // Priority 3 dequeues with > 2000 octets behind them are marked: at least 7 ECT frames.
        assert!(ce[3] >= 7, "{ce:?}");
        assert_eq!(ce[2], 0);
        assert_eq!(counters(&c).ce_marks, u64::from(ce[3]));
    }

    fn ecn_of(f: &[u8]) -> Ecn {
        match decode(f).unwrap().body {
            Body::Ipv4 { ip, .. } => ip.ecn,
            b => panic!("{b:?}"),
        }
    }

    /// A one-port core with PFC on priority 3 (static thresholds) and `watchdog_ms`.
    fn pfc_core(watchdog_ms: u64) -> Core {
        let mut c = core("port = \"p\"\npriorities = [3]\nqcn = {}");
        let params = ::cp::pfc::PfcParams {
            ports: 1,
            lossless_priorities: vec![3],
            threshold: ::cp::pfc::ThresholdMode::Static,
            link_rate: Rate::from_gbps(1),
            watchdog_ms,
            watchdog_restore_ms: 200,
            ..Default::default()
        };
        c.set_pfc(::cp::pfc::PfcProfile::new(&params).unwrap());
        c
    }

    /// A host pausing priority 3 of port 0 from `from` to `to`, refreshing every 10 ms (0xFFFF
    /// quanta at 1 Gbit/s last 33.5 ms), the core's timers run as a driver runs them; returns
    /// whether the last PAUSE was honoured and frames sent in that time.
    fn storm(c: &mut Core, from: u64, to: u64) -> (bool, usize) {
        let (mut honoured, mut sent) = (false, 0);
        for ms in (from..to).step_by(10) {
            let now = Instant::from_nanos(ms * 1_000_000);
            while let Some(t) = c.next_deadline().filter(|&t| t <= now) {
                c.handle_timeout(t);
            }
            honoured = c.handle_pause(now, 0, 3, 0xFFFF);
            while pop(c, now).is_some() {
                sent += 1;
            }
        }
        (honoured, sent)
    }

    #[test]
    fn pfc_watchdog_stops_honouring_a_pause_storm_and_restores_after_it() {
        let f = frame(Ecn::NotEct, None);
        // Off by default: a second of PAUSE holds the queue.
        let mut c = pfc_core(0);
        push(&mut c, Instant::ZERO, 3, &f);
        assert_eq!(storm(&mut c, 0, 1000), (true, 0));
        assert_eq!(c.pfc_counters(0).watchdog_storms, 0);

        // 100 ms: pauses of 50 ms with breaks are honoured and are no storm.
        let mut c = pfc_core(100);
        for k in 0..5 {
            push(&mut c, Instant::ZERO, 3, &f);
            assert_eq!(storm(&mut c, 100 * k, 100 * k + 50), (true, 0), "pause {k}");
            let resume = Instant::from_nanos((100 * k + 50) * 1_000_000);
            assert!(!c.handle_pause(resume, 0, 3, 0));
            assert!(pop(&mut c, resume).is_some());
        }
        assert_eq!(c.pfc_counters(0).watchdog_storms, 0);

        // An unbroken storm from 1 s: honoured for 100 ms, then ignored; the queue drains.
        for _ in 0..3 {
            push(&mut c, Instant::from_nanos(1_000_000_000), 3, &f);
        }
        assert_eq!(storm(&mut c, 1000, 1100), (true, 0));
        let (honoured, sent) = storm(&mut c, 1100, 1400);
        assert!(!honoured);
        assert_eq!(sent, 3);
        let n = c.pfc_counters(0);
        assert_eq!(n.watchdog_storms, 1);
        assert_eq!(n.watchdog_ignored, 30, "{n:?}");
        // No PAUSE since 1.39 s: at 1.59 s the storm is over and PAUSE is honoured again.
        let after = Instant::from_nanos(1_600_000_000);
        c.handle_timeout(after);
        push(&mut c, after, 3, &f);
        assert!(c.handle_pause(after, 0, 3, 0xFFFF));
        assert!(pop(&mut c, after).is_none());
    }

    const TCD: &str = "port = \"p\"\npriorities = [3]\ntcd = { link_rate = \"1gbit\", congestion_threshold_bytes = 20000, non_congestion_threshold_bytes = 5000 }";

    #[test]
    fn tcd_marks_ue_on_a_paused_port_and_ce_on_a_congested_one() {
        // A port paused on and off (short ON periods): UE, never CE.
        let mut c = core(TCD);
        let mut ue = 0;
        for i in 0..50u64 {
            let t = Instant::from_nanos(1_000_000 + i * 20_000);
            push(&mut c, t, 3, &frame(Ecn::TCD_CAPABLE, None));
            assert!(c.handle_pause(t, 0, 3, 0xFFFF));
            assert!(!c.handle_pause(t + Duration::from_micros(5), 0, 3, 0));
            let (_, f) = pop(&mut c, t + Duration::from_micros(6)).unwrap();
            let e = ecn_of(&f);
            assert_ne!(e, Ecn::TCD_CONGESTED);
            ue += u32::from(e == Ecn::TCD_UNDETERMINED);
        }
        assert!(ue > 40, "{ue}");
        // A never-paused port whose queue keeps growing past the threshold: CE.
        let mut c = core(TCD);
        let mut ce = 0;
        for i in 0..200u64 {
            let t = Instant::from_nanos(1_000_000 + i * 1_000);
            push(&mut c, t, 3, &frame(Ecn::TCD_CAPABLE, None));
            push(&mut c, t, 3, &frame(Ecn::TCD_CAPABLE, None));
            let (_, f) = pop(&mut c, t).unwrap();
            let e = ecn_of(&f);
            assert_ne!(e, Ecn::TCD_UNDETERMINED);
            ce += u32::from(e == Ecn::TCD_CONGESTED);
        }
        assert!(ce > 100, "{ce}");
        assert_eq!(counters(&c).tcd_ce, ce as u64);
    }

    #[test]
    fn with_tcd_red_does_not_mark() {
        // seed 004 Table 1: TCD owns the code points; RED would turn a non-congested port's
        // frames CE. A short queue far above RED's Kmax, never congested for TCD.
        let mut c = core(TCD);
        let mut prof = CpProfiles {
            prio_mask: 1 << 3,
            ..CpProfiles::none()
        };
        let tcd: TcdParams = toml::from_str(
            "link_rate = \"1gbit\"\ncongestion_threshold_bytes = 20000\nnon_congestion_threshold_bytes = 5000",
        )
        .unwrap();
        prof.tcd = Some(TcdProfile::new(&tcd).unwrap());
        prof.red = Some(
            RedProfile::new(&RedParams {
                kmin_bytes: 1,
                kmax_bytes: 2,
                pmax: 1.0,
                ..Default::default()
            })
            .unwrap(),
        );
        let limits = QueueLimits {
            data_bytes: 10_000_000,
            control_bytes: 64 * 1024,
        };
        c.set_cp(0, limits, PortCp::new(&prof, SeedableRng::seed_from_u64(1)));
        for i in 0..20u64 {
            let t = Instant::from_nanos(1_000_000 + i * 1_000);
            push(&mut c, t, 3, &frame(Ecn::TCD_CAPABLE, None));
            push(&mut c, t, 3, &frame(Ecn::TCD_CAPABLE, None));
            let (_, f) = pop(&mut c, t).unwrap();
            assert_eq!(ecn_of(&f), Ecn::TCD_CAPABLE);
        }
        assert_eq!(counters(&c).ce_marks, 0);
        assert_eq!(counters(&c).marks, 0);
    }

    #[test]
    fn config_errors_name_the_key() {
        let c: CongestionConfig =
            toml::from_str("port = \"p\"\nred = { kmin_bytes = 5, kmax_bytes = 1 }").unwrap();
        let e = CpHook::from_config(2, &c, MacAddr::zero()).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("congestion[2] (port \"p\").red.kmin_bytes"),
            "{e}"
        );
        assert!(toml::from_str::<CongestionConfig>("port = \"p\"\nbogus = 1").is_err());
        let both = format!("{TCD}\nred = {{ kmin_bytes = 1000, kmax_bytes = 2000 }}");
        let c: CongestionConfig = toml::from_str(&both).unwrap();
        let e = CpHook::from_config(0, &c, MacAddr::zero()).unwrap_err();
        assert!(e.to_string().contains(".red: RED and TCD"), "{e}");
    }
}

mod config_tests {
    use crate::switch::config::SwitchConfig;

    #[test]
    fn shipped_switch_configs_carry_their_congestion_points() {
        let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../configs");
        for (f, qcn) in [("switch-qcn.toml", true), ("switch-dcqcn.toml", false)] {
            let p = SwitchConfig::load(&dir.join(f)).unwrap();
            let r0 = p.ports.iter().find(|p| p.name == "r0").unwrap();
            let c = r0.congestion.as_ref().unwrap();
            assert_eq!(c.qcn.is_some(), qcn, "{f}");
            assert_eq!(c.red.is_some(), !qcn, "{f}");
        }
    }

    #[test]
    fn congestion_errors_name_the_key_and_file() {
        let base = "[[ports]]\nname = \"r0\"\niface = \"x\"\n";
        let e = SwitchConfig::parse(&format!("{base}[[congestion]]\nport = \"r9\"\n"), "t.toml")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("t.toml") && e.contains("congestion[0].port"),
            "{e}"
        );
        let e = SwitchConfig::parse(
            &format!("{base}[[congestion]]\nport = \"r0\"\nred = {{ pmax = 2.0 }}\n"),
            "t.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("congestion[0].red.pmax"), "{e}");
    }
}
