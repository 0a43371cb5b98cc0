//! quench's interval log read by an independent HdrHistogram implementation: PyPI's
//! `hdrhistogram`, installed by scripts/hdrh-venv.sh into a venv under cargo's
//! `CARGO_TARGET_TMPDIR` (made once, reused by later runs).
//! A `quench send` with a `--sink` on the two ends of a veth pair (namespaces of its own) writes a
//! report directory; scripts/analysis/hlog-check.py merges the log's untagged (all-flows) histograms and
//! must find quench's `.hgrm` and summary percentiles in them.
//!
//! Needs root (network namespaces) and, the first time, python3-venv and access to PyPI; where
//! those are missing the test says why and is skipped.
use std::path::Path;
use std::process::Command;

mod common;

fn ip(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .status()
        .is_ok_and(|s| s.success())
}

/// Two namespaces joined by a veth pair, deleted on drop.
struct Pair {
    a: String,
    b: String,
}

impl Pair {
    fn up() -> Pair {
        let tag = std::process::id() % 10_000;
        let pair = Pair {
            a: format!("qh{tag}a"),
            b: format!("qh{tag}b"),
        };
        let (a, b) = (pair.a.as_str(), pair.b.as_str());
        assert!(ip(&["netns", "add", a]) && ip(&["netns", "add", b]));
        assert!(ip(&["link", "add", a, "type", "veth", "peer", "name", b]));
        assert!(ip(&["link", "set", a, "netns", a]) && ip(&["link", "set", b, "netns", b]));
        assert!(ip(&["-n", a, "link", "set", a, "up"]) && ip(&["-n", b, "link", "set", b, "up"]));
        pair
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        // Deleting a namespace deletes the veth end inside it, and with it the pair.
        ip(&["netns", "del", &self.a]);
        ip(&["netns", "del", &self.b]);
    }
}

#[test]
fn pypi_hdrhistogram_reads_the_interval_log_and_finds_the_hgrm_percentiles() {
    if !common::netns_or_skip("pypi_hdrhistogram_reads_the_interval_log") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("quench-hdrh-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let venv = Command::new(common::repo().join("scripts/hdrh-venv.sh"))
        .arg(Path::new(env!("CARGO_TARGET_TMPDIR")).join("hdrh-venv"))
        .output()
        .unwrap();
    if !venv.status.success() {
        println!(
            "SKIP: no venv with PyPI's hdrhistogram (python3-venv and network needed): {}",
            String::from_utf8_lossy(&venv.stderr)
        );
        return;
    }
    let python = String::from_utf8_lossy(&venv.stdout).trim().to_string();
    let report = dir.join("report");
    {
        let _l = common::lock();
        let pair = Pair::up();
        let out = Command::new(env!("CARGO_BIN_EXE_quench"))
            .current_dir("/")
            .args(["send", "--iface", &format!("{}/{}", pair.a, pair.a)])
            .args(["--sink", &format!("{}/{}", pair.b, pair.b), "--sink-no-cnp"])
            .args(["--cc", "none", "--rate", "50mbit", "--duration", "1s"])
            .arg("--sink-out")
            .arg(&report)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let check = Command::new(&python)
        .arg(common::repo().join("scripts/analysis/hlog-check.py"))
        .arg(&report)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&check.stdout).to_string();
    assert!(
        check.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&check.stderr)
    );
    let r: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
    // 50 Mbit/s of 1500-octet frames for 1 s is ~4,000 frames in ~10 intervals of 100 ms; a
    // loaded machine sends fewer, which changes nothing the check is about.
    assert!(r["count"].as_u64().unwrap() > 100, "{text}");
    assert!(r["untagged"].as_u64().unwrap() >= 3, "{text}");
    assert!(
        r["percentile_rows_checked"].as_u64().unwrap() > 10,
        "{text}"
    );
    // `quench report` reads the .hgrm back: the same count and median.
    let rep = Command::new(env!("CARGO_BIN_EXE_quench"))
        .arg("report")
        .arg(report.join("latency.hgrm"))
        .output()
        .unwrap();
    let line = String::from_utf8_lossy(&rep.stdout).to_string();
    assert!(
        line.starts_with(&format!("{} values; p50 ", r["count"])),
        "{line}"
    );
    let p50_us = r["p50_ns"].as_f64().unwrap() / 1e3;
    assert!(
        line.contains(&format!("p50 {p50_us:.1} us")),
        "{line} vs {text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
