//! Latency across machines on the veth testbed (root): `quench send` measures the round trip of
//! the frames `quench recv --reflect` sends back through `quench switch`, and the receiver
//! reports one-way latency only when the sender's clock id is its own (a sender stamping
//! another clock id stands for another machine).
mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};

use common::{lock, netns_or_skip, Testbed};

/// `quench switch` between the testbed's ports, stopped (SIGTERM) on drop.
struct Switch(Child);

impl Drop for Switch {
    fn drop(&mut self) {
        // Safety: signalling our own child by its pid.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let _ = self.0.wait();
    }
}

fn start_switch(tb: &Testbed, dir: &Path) -> Switch {
    let mut cfg = format!(
        "control_socket = {:?}\n",
        dir.join("ctl.sock").display().to_string()
    );
    for name in ["s0", "r0"] {
        cfg += &format!(
            "[[ports]]\nname = \"{name}\"\niface = \"{}-sw-{name}\"\n",
            tb.prefix
        );
    }
    let path = dir.join("switch.toml");
    std::fs::write(&path, cfg).unwrap();
    let child = Command::new("ip")
        .args(["netns", "exec", &tb.ns("sw")])
        .arg(env!("CARGO_BIN_EXE_quench"))
        .args(["switch", "--config"])
        .arg(&path)
        .args(["--duration", "30s"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(700));
    Switch(child)
}

/// The last JSON line of `out` that has `key`.
fn json_with(out: &str, key: &str) -> serde_json::Value {
    out.lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .rfind(|v| v.get(key).is_some())
        .unwrap_or_else(|| panic!("no JSON line with {key:?} in:\n{out}"))
}

/// One run: `quench recv --reflect` in r0, `quench send` in s0 (`extra` arguments); returns
/// the receiver's summary and the sender's round-trip summary.
fn run(tb: &Testbed, dir: &Path, extra: &[&str]) -> (serde_json::Value, serde_json::Value) {
    let rtt_dir = dir.join("rtt");
    let recv = Command::new("ip")
        .args(["netns", "exec", &tb.ns("r0")])
        .arg(env!("CARGO_BIN_EXE_quench"))
        .args(["recv", "--iface", "eth0", "--no-cnp", "--reflect"])
        .args(["--duration", "3s"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let send = Command::new(env!("CARGO_BIN_EXE_quench"))
        .args(["send", "--iface", &format!("{}/eth0", tb.ns("s0"))])
        .args(["--cc", "none", "--rate", "20mbit", "--duration", "1s"])
        .arg("--out")
        .arg(&rtt_dir)
        .args(extra)
        .output()
        .unwrap();
    let sout = String::from_utf8_lossy(&send.stdout).to_string();
    assert!(
        send.status.success(),
        "{sout}\n{}",
        String::from_utf8_lossy(&send.stderr)
    );
    let r = recv.wait_with_output().unwrap();
    let rout = String::from_utf8_lossy(&r.stdout).to_string();
    assert!(r.status.success(), "{rout}");
    assert!(
        rout.contains("test frames reflected to their senders"),
        "{rout}"
    );
    // The sender's report directory says what it holds.
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(rtt_dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["latency_kind"], "rtt");
    let hgrm = std::fs::read_to_string(rtt_dir.join("rtt.hgrm")).unwrap();
    assert!(hgrm.contains("Total count"), "{hgrm}");
    let hlog = std::fs::read_to_string(rtt_dir.join("intervals.hlog")).unwrap();
    assert!(hlog.contains("lat.<flow> = rtt (ns)"), "{hlog}");
    assert!(sout.contains("== rtt "), "{sout}");
    let _ = std::fs::remove_dir_all(&rtt_dir);
    (
        json_with(&rout, "flows"),
        json_with(&sout, "rtt")["rtt"].clone(),
    )
}

#[test]
fn rtt_through_the_switch_and_one_way_only_on_a_shared_clock() {
    if !netns_or_skip("rtt_through_the_switch_and_one_way_only_on_a_shared_clock") {
        return;
    }
    let _l = lock();
    let tb = Testbed::up(format!("q{}l", std::process::id() % 1000), 1, 1);
    let dir = std::env::temp_dir().join(format!("{}-lat", tb.prefix));
    std::fs::create_dir_all(&dir).unwrap();
    let _sw = start_switch(&tb, &dir);

    // One host, one clock: the receiver reports one-way latency, the sender the round trip.
    let (recv, rtt) = run(&tb, &dir, &[]);
    let sent = recv["flows"][0]["frames"].as_u64().unwrap();
    assert!(sent > 100, "{recv}");
    assert_eq!(recv["latency_kind"], "one_way");
    assert!(recv.get("one_way_refused").is_none(), "{recv}");
    assert_eq!(recv["latency"]["count"].as_u64(), Some(sent), "{recv}");
    // AF_PACKET ports stamp every frame in the kernel (veth has no hardware stamps).
    let ts = &recv["rx_timestamps"];
    assert_eq!(ts["poll_loop"], 0, "{recv}");
    assert!(ts["software"].as_u64().unwrap() + ts["ring"].as_u64().unwrap() >= sent);
    assert_eq!(rtt["latency_kind"], "rtt");
    let back = rtt["flows"][0]["frames"].as_u64().unwrap();
    assert!(back > 100 && back <= sent, "{rtt}");
    assert_eq!(rtt["latency"]["count"].as_u64(), Some(back), "{rtt}");
    assert!(rtt["latency"]["p50_ns"].as_u64().unwrap() > 0);

    // Another clock (a sender standing for another machine): one-way refused with the reason,
    // the round trip still measured on the sender's own clock.
    let (recv, rtt) = run(&tb, &dir, &["--clock-id", "1193046"]);
    let why = recv["one_way_refused"]
        .as_str()
        .expect("one-way not refused");
    assert!(why.contains("clock 0x123456"), "{why}");
    assert!(why.contains("quench recv --reflect"), "{why}");
    assert_eq!(recv["latency"]["count"], 0, "{recv}");
    let f = &recv["flows"][0];
    assert_eq!(f["foreign_clock"], f["frames"], "{recv}");
    assert!(rtt["latency"]["count"].as_u64().unwrap() > 100, "{rtt}");
    let _ = std::fs::remove_dir_all(&dir);
}
