//! The appliance started as a library ([`ApplianceLoop::start`]), without the `quench` binary:
//! on two veth pairs in a network namespace of the test's own, a host's flow sent into the
//! inside port comes out of the outside port, the handle's live stats and the control socket
//! show it, and stop and join end the loop with its report. Needs root (namespaces, veth
//! pairs); skipped with a printed reason otherwise.
mod common;

use common::{receive, wait_for, Netns};
use quench_runtime::appliance::config::ApplianceConfig;
use quench_runtime::appliance::runtime::{ApplianceLoop, ApplianceOptions};
use quench_runtime::switch::control;
use quench_wire::frame::test_frame;

#[test]
fn an_appliance_started_as_a_library_paces_reports_live_and_stops() {
    if let Some(why) = common::cannot_run() {
        eprintln!("skipping an_appliance_started_as_a_library: {why}");
        return;
    }
    // hi (the host) - ai | the appliance | ao - ho (the network).
    let ns = Netns::with_veths("appl", &[("hi", "ai"), ("ao", "ho")]);
    let dir = std::env::temp_dir().join(format!("{}-appl", ns.name));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("ctl.sock");
    let text = format!(
        "cc = \"qcn\"\ncontrol_socket = {:?}\n",
        sock.display().to_string()
    );
    let cfg = ApplianceConfig::parse(&text).unwrap();
    let options = ApplianceOptions {
        pairs: vec![(ns.port("ai"), ns.port("ao"))],
        origin: "lib.toml".into(),
        ..Default::default()
    };
    let app = ApplianceLoop::start(cfg, options).unwrap();
    assert!(
        app.notes()
            .iter()
            .any(|n| n.starts_with("1 pair(s), role Rp, cc Qcn")),
        "{:?}",
        app.notes()
    );
    let mut rx = ns.open("ho");
    let frames: Vec<Vec<u8>> = (0..20)
        .map(|seq| test_frame(1, seq, 0, units::Ecn::NotEct, None))
        .collect();
    ns.send("hi", &frames);
    // QCN adds a CN-TAG (EtherType 0x22e9 after the VLAN tag): the flow's frames, paced.
    let got = receive(&mut rx, frames.len(), |f| {
        f.len() > 1000 && f[16..18] == [0x22, 0xe9]
    });
    assert_eq!(
        got.len(),
        frames.len(),
        "the flow's frames leave by the outside port"
    );
    let live = wait_for(|| app.stats(), |s| s.pairs[0].table.released_frames >= 20);
    let pair = &live.pairs[0];
    assert_eq!(pair.label, format!("{}<->{}", ns.port("ai"), ns.port("ao")));
    assert!(pair.counters.inside_frames >= 20, "{live:?}");
    assert_eq!(pair.table.released_frames, 20, "{live:?}");
    assert_eq!(pair.flows, 1, "{live:?}");
    let queried = control::query_json(&sock).unwrap();
    assert_eq!(queried["appliance"][0]["table"]["released_frames"], 20);
    assert!(!app.is_stopped() && !app.is_finished());
    app.stop();
    let report = app.join().unwrap();
    assert_eq!(report.stats.pairs[0].table.released_frames, 20);
    assert_eq!(report.summary["appliance"][0]["flows_held"], 1);
    assert!(report.summary["scheduling"]["stalls"].is_u64());
    assert!(!sock.exists(), "control socket left behind");
    let _ = std::fs::remove_dir_all(&dir);
}
