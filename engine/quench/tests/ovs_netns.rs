//! scripts/testbed/ovs.sh, the Open vSwitch the benchmarks measure quench against: its bridge of two
//! afxdp ports (the userspace datapath) forwards between the veth testbed's hosts with
//! actions=NORMAL, and `ovs_stop` leaves nothing behind even after ovs-vswitchd was killed:
//! no process, no directory, no XDP program on the veths. Needs root and Open vSwitch
//! (scripts/setup.sh installs it); skipped with a printed reason otherwise.
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

mod common;

use common::{collect, send, xdp_progs, Testbed, ETH_TEST};

const OVS_VSWITCHD: &str = "/usr/lib/openvswitch-switch/ovs-vswitchd";

fn frame(dst: [u8; 6], src: [u8; 6], seq: u8) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[..6].copy_from_slice(&dst);
    f[6..12].copy_from_slice(&src);
    f[12..14].copy_from_slice(&ETH_TEST);
    f[14] = seq;
    f
}

fn alive(pid: &str) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

#[test]
fn a_private_ovs_forwards_between_afxdp_ports_and_leaves_nothing_after_a_kill() {
    let test = "a_private_ovs_forwards_between_afxdp_ports_and_leaves_nothing_after_a_kill";
    if !common::netns_or_skip(test) {
        return;
    }
    if !std::path::Path::new(OVS_VSWITCHD).exists() {
        eprintln!(
            "skipping {test}: Open vSwitch not installed ({OVS_VSWITCHD}); run scripts/setup.sh"
        );
        return;
    }
    let _lock = common::lock();
    let tb = Testbed::up(format!("q{}o", std::process::id() % 1000), 1, 1);
    let sw = tb.ns("sw");
    // Starts the instance, prints its directory and pids, waits for a line on stdin, then kills
    // ovs-vswitchd (as a crash would) and stops the instance.
    let script = format!(
        r#"set -euo pipefail
. scripts/testbed/ovs.sh
trap ovs_stop EXIT
ovs_start --netns {sw} --cpus 0 pmd-cpu-mask=0x1
ovs_bridge ovsbr netdev
ovs_port ovsbr {sw}-s0 afxdp
ovs_port ovsbr {sw}-r0 afxdp
echo "$ovs_dir $ovs_sw_pid $ovs_db_pid"
read -r _
kill -KILL "$ovs_sw_pid"
"#
    );
    let mut sh = Command::new("bash")
        .args(["-c", &script])
        .current_dir(common::repo())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(sh.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let parts: Vec<String> = line.split_whitespace().map(String::from).collect();
    assert_eq!(parts.len(), 3, "ovs.sh did not start: {line:?}");
    assert_eq!(xdp_progs(&sw), 2, "each afxdp port loads its XDP program");

    // The receiver never sends: its frames are flooded to the one other port, the sender's
    // source learned.
    let src = [0x02, 0x71, 0x6e, 0x01, 0, 0];
    let dst = [0x02, 0x71, 0x6e, 0x02, 0, 0];
    let rx = collect(&tb.ns("r0"), 20, 3000);
    send(&tb.ns("s0"), (0..20).map(|k| frame(dst, src, k)).collect());
    let got = rx.join().unwrap();
    assert_eq!(got.len(), 20, "OVS forwarded {} of 20 frames", got.len());
    assert!(got.iter().all(|f| f[..12] == frame(dst, src, 0)[..12]));

    sh.stdin.take().unwrap().write_all(b"stop\n").unwrap();
    let st = sh.wait().unwrap();
    assert!(st.success(), "ovs.sh's instance did not stop cleanly");
    let [dir, vswitchd, db] = [&parts[0], &parts[1], &parts[2]];
    assert!(!std::path::Path::new(dir).exists(), "{dir} left behind");
    assert!(!alive(vswitchd), "ovs-vswitchd {vswitchd} still running");
    assert!(!alive(db), "ovsdb-server {db} still running");
    assert_eq!(xdp_progs(&sw), 0, "XDP programs left on the veths");
}
