//! The README's commands, run as written: every line of every `sh` block of README.md (read from
//! the file, not copied here), so a README command that breaks fails the suite.
//!
//! How a line runs:
//! - `quench ...` lines run with `bash -c` exactly as written, with this build's binary first on
//!   `PATH` (as `cargo install` puts it; `QUENCH_README_INSTALL=1` runs the README's
//!   `cargo install` line itself into a scratch `HOME` and uses what it installed) and `HOME` a
//!   scratch directory. The working directory is `/`, or, for a line that names or writes a file
//!   relative to it (`./two-nics.toml`, `topo.txt`), a scratch directory outside the checkout
//!   that holds a small ns-3 `topo.txt` and `flows.txt` (the user's files in the README).
//! - Real interfaces (`--iface eth0`, a switch between `eth1` and `eth2`) are veth pairs in two
//!   network namespaces of the test's own: a line commented "on the receiver" / "on the far
//!   machine" runs in one, every other in the other ("this machine"). Those lines start in the
//!   background (the other machine runs while this one does) and get SIGINT when the next line
//!   of this machine has ended. A line ending in `&` runs in the background until the block
//!   ends. A line still running after its budget gets SIGINT, as a user's Ctrl-C, and must then
//!   end cleanly.
//! - `scripts/testbed/testbed.sh` lines run from the checkout (the quick start needs the testbed; torn
//!   down after the block). Other `scripts/` lines (installing packages, the whole test suite,
//!   benchmarks) and `cargo install` must name files that exist; they do not run here.
//! - `tshark` lines marked "in the repository" run from the checkout.
//! - Lines that change the system (`sudo setcap`, `ulimit`) are skipped with that reason.
//!
//! Lines that need root (ports, namespaces) are skipped, with the reason, when not root.
mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use quench_wire::time::Clock;

/// How long a foreground line may run before it gets SIGINT.
const BUDGET: Duration = Duration::from_secs(12);
/// How long a `cargo install` line may run (a release build from scratch on two cores).
const INSTALL_BUDGET: Duration = Duration::from_secs(30 * 60);
/// How long a line may take to end after SIGINT.
const GRACE: Duration = Duration::from_secs(15);

/// One command of a block: its text as written (a here-document spans lines) and its comment.
#[derive(Debug)]
struct Line {
    text: String,
    comment: String,
}

/// The `sh` blocks of the README, each as its lines.
fn blocks(readme: &str) -> Vec<Vec<Line>> {
    let mut out = Vec::new();
    let mut lines = readme.lines();
    while let Some(l) = lines.next() {
        if l.trim() != "```sh" {
            continue;
        }
        let mut block = Vec::new();
        while let Some(l) = lines.next() {
            if l.trim_start().starts_with("```") {
                break;
            }
            if l.trim().is_empty() || l.trim_start().starts_with('#') {
                continue;
            }
            let mut text = l.to_string();
            if let Some(at) = l.find("<<'") {
                let tag = l[at + 3..].trim_end_matches('\'').to_string();
                for body in lines.by_ref() {
                    text.push('\n');
                    text.push_str(body);
                    if body == tag {
                        break;
                    }
                }
            }
            let comment = match text.find(" # ").or_else(|| text.find("  #")) {
                Some(at) if !text.contains('\n') => text[at..].trim().to_string(),
                _ => String::new(),
            };
            block.push(Line { text, comment });
        }
        out.push(block);
    }
    out
}

fn is_root() -> bool {
    // Safety: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn sh(args: &[&str]) -> bool {
    Command::new(args[0])
        .args(&args[1..])
        .status()
        .is_ok_and(|s| s.success())
}

/// "This machine" and "the other machine": two namespaces with veth pairs eth0, eth1, eth2
/// between them; deleted on drop.
struct Machines {
    here: String,
    there: String,
}

impl Machines {
    fn up() -> Machines {
        let tag = std::process::id() % 10_000;
        let m = Machines {
            here: format!("qrm{tag}a"),
            there: format!("qrm{tag}b"),
        };
        assert!(sh(&["ip", "netns", "add", &m.here]) && sh(&["ip", "netns", "add", &m.there]));
        for dev in ["eth0", "eth1", "eth2"] {
            assert!(sh(&[
                "ip", "link", "add", "name", dev, "netns", &m.here, "type", "veth", "peer", "name",
                dev, "netns", &m.there,
            ]));
            for ns in [&m.here, &m.there] {
                assert!(sh(&["ip", "-n", ns, "link", "set", dev, "up"]));
            }
        }
        m
    }
}

impl Drop for Machines {
    fn drop(&mut self) {
        for ns in [&self.here, &self.there] {
            let _ = sh(&["ip", "netns", "del", ns]);
        }
    }
}

/// Where and how the test runs the README.
struct Env {
    repo: PathBuf,
    scratch: PathBuf,
    home: PathBuf,
    path: String,
    machines: Option<Machines>,
}

impl Env {
    fn new() -> Env {
        let base = std::env::temp_dir().join(format!("quench-readme-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let (scratch, home, bin) = (base.join("work"), base.join("home"), base.join("bin"));
        for d in [&scratch, &home, &bin] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_quench"), bin.join("quench")).unwrap();
        // The user's ns-3 files: a 2:1 incast at 100 Gb/s (HPCC ns-3 formats).
        std::fs::write(
            scratch.join("topo.txt"),
            "4 1 3\n3\n0 3 100Gbps 0.001ms 0\n1 3 100Gbps 0.001ms 0\n2 3 100Gbps 0.001ms 0\n",
        )
        .unwrap();
        std::fs::write(
            scratch.join("flows.txt"),
            "2\n0 2 3 100 300000 2\n1 2 3 100 300000 2\n",
        )
        .unwrap();
        let installed = home.join(".local/bin");
        let path = format!(
            "{}:{}:{}",
            installed.display(),
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        Env {
            repo: common::repo().canonicalize().unwrap(),
            scratch,
            home,
            path,
            machines: None,
        }
    }

    /// `bash -c TEXT` in `cwd`, inside namespace `ns` when given.
    fn spawn(&self, text: &str, cwd: &Path, ns: Option<&str>) -> Child {
        let mut c = match ns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns, "bash", "-c", text]);
                c
            }
            None => {
                let mut c = Command::new("bash");
                c.args(["-c", text]);
                c
            }
        };
        // Its own process group: SIGINT reaches the command and whatever bash started for it.
        std::os::unix::process::CommandExt::process_group(&mut c, 0);
        c.current_dir(cwd)
            .env("PATH", &self.path)
            .env("HOME", &self.home)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }
}

/// Ends `c` (SIGINT after `budget` if it still runs) and says how it went: `Err` with its
/// output when it failed.
fn finish(mut c: Child, budget: Duration) -> Result<String, String> {
    let clock = Clock::monotonic();
    let start = clock.now();
    let mut interrupted = false;
    loop {
        if let Some(_st) = c.try_wait().unwrap() {
            break;
        }
        let limit = if interrupted { budget + GRACE } else { budget };
        if (clock.now() - start).as_nanos() >= limit.as_nanos() as u64 {
            if interrupted {
                let _ = c.kill();
                let out = c.wait_with_output().unwrap();
                return Err(format!(
                    "did not end within {GRACE:?} of SIGINT\n{}",
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
            // Safety: signalling the process group of our own child (it leads it).
            unsafe { libc::kill(-(c.id() as i32), libc::SIGINT) };
            interrupted = true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = c.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() {
        Ok(text)
    } else {
        Err(format!("{}\n{text}", out.status))
    }
}

/// What the test does with a line.
enum Plan {
    Run { ns: Option<String>, cwd: PathBuf },
    Skip(String),
}

fn plan(env: &Env, line: &Line, install: bool) -> Plan {
    let t = line.text.trim();
    let root = is_root();
    if t.starts_with("sudo ") || t.starts_with("ulimit ") {
        return Plan::Skip("changes the system (capabilities, shell limits)".into());
    }
    if let Some(rest) = t.strip_prefix("cargo install ") {
        if !install {
            return Plan::Skip(format!(
                "slow; the built binary stands in for it (QUENCH_README_INSTALL=1 runs it): {rest}"
            ));
        }
        return Plan::Run {
            ns: None,
            cwd: env.repo.clone(),
        };
    }
    if let Some(script) = t.strip_prefix("scripts/") {
        let file = script.split_whitespace().next().unwrap_or_default();
        let path = env.repo.join("scripts").join(file);
        let meta = std::fs::metadata(&path);
        assert!(
            meta.as_ref().is_ok_and(
                |m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 != 0
            ),
            "README names scripts/{file}, which is not an executable file in the checkout"
        );
        if file != "testbed/testbed.sh" {
            return Plan::Skip(format!(
                "repository script scripts/{file} (exists, executable)"
            ));
        }
        if !root {
            return Plan::Skip("needs root (network namespaces)".into());
        }
        return Plan::Run {
            ns: None,
            cwd: env.repo.clone(),
        };
    }
    if t.starts_with("tshark ") {
        if !sh(&["tshark", "--version"]) {
            return Plan::Skip("tshark not installed (scripts/setup.sh)".into());
        }
        return Plan::Run {
            ns: None,
            cwd: if line.comment.contains("in the repository") {
                env.repo.clone()
            } else {
                "/".into()
            },
        };
    }
    let ports = t.contains("--iface") || t.contains("--inside") || t.contains("quench switch");
    let needs_root = ports || t.contains("quench stats") || t.contains("quench appliance");
    if needs_root && !root {
        return Plan::Skip("needs root (ports, network namespaces)".into());
    }
    let relative = t.contains("./") || t.contains("<<") || t.contains("topo.txt");
    let cwd = if relative {
        env.scratch.clone()
    } else {
        "/".into()
    };
    let m = env.machines.as_ref();
    let ns =
        if t.contains("--iface eth") || t.contains("quench switch") || t.contains("quench stats") {
            m.map(|m| {
                if other_machine(line) {
                    m.there.clone()
                } else {
                    m.here.clone()
                }
            })
        } else {
            None
        };
    Plan::Run { ns, cwd }
}

/// A line the README says runs on another machine.
fn other_machine(line: &Line) -> bool {
    line.comment.contains("on the receiver") || line.comment.contains("on the far machine")
}

#[test]
fn every_readme_command_runs_as_written() {
    let _l = is_root().then(common::lock);
    let readme = std::fs::read_to_string(common::repo().join("README.md")).unwrap();
    let blocks = blocks(&readme);
    assert!(blocks.len() >= 5, "README has {} sh blocks", blocks.len());
    let install = std::env::var_os("QUENCH_README_INSTALL").is_some();
    let mut env = Env::new();
    if is_root() {
        env.machines = Some(Machines::up());
    }
    let (mut ran, mut failures) = (0, Vec::new());
    for block in &blocks {
        let mut other: Vec<(String, Child)> = Vec::new();
        let mut background: Vec<(String, Child)> = Vec::new();
        let mut testbed = false;
        for line in block {
            let text = line.text.trim();
            let (ns, cwd) = match plan(&env, line, install) {
                Plan::Skip(why) => {
                    eprintln!("skipped: {text}\n  ({why})");
                    continue;
                }
                Plan::Run { ns, cwd } => (ns, cwd),
            };
            eprintln!(
                "running: {text}  [cwd {}{}]",
                cwd.display(),
                ns.as_deref()
                    .map(|n| format!(", netns {n}"))
                    .unwrap_or_default()
            );
            ran += 1;
            testbed |= text.starts_with("scripts/testbed/testbed.sh up");
            // A trailing `&` is the test's to honour: the command runs in the background here,
            // so that the test can stop it (bash would leave it running on its own).
            let cmd = line.text.trim_end().trim_end_matches('&');
            let child = env.spawn(cmd, &cwd, ns.as_deref());
            if other_machine(line) {
                other.push((text.to_string(), child));
                // As a user starts the receiver first: it is up before the sender sends.
                std::thread::sleep(Duration::from_millis(1500));
                continue;
            }
            if text.ends_with('&') {
                background.push((text.to_string(), child));
                std::thread::sleep(Duration::from_secs(3));
                continue;
            }
            let budget = if text.starts_with("cargo install ") {
                INSTALL_BUDGET
            } else {
                BUDGET
            };
            if let Err(e) = finish(child, budget) {
                failures.push(format!("{text}: {e}"));
            }
            // This machine's run is over: the other machine's commands are stopped (Ctrl-C),
            // so their reports exist for the lines that read them.
            for (t, c) in other.drain(..) {
                if let Err(e) = finish(c, Duration::ZERO) {
                    failures.push(format!("{t} (other machine): {e}"));
                }
            }
        }
        for (t, c) in other.drain(..).chain(background.drain(..)) {
            if let Err(e) = finish(c, Duration::ZERO) {
                failures.push(format!("{t} (background): {e}"));
            }
        }
        if testbed {
            let _ = Command::new(env.repo.join("scripts/testbed/testbed.sh"))
                .arg("down")
                .output();
        }
    }
    assert!(ran >= 8, "only {ran} README lines ran");
    assert!(
        failures.is_empty(),
        "README lines that failed:\n{}",
        failures.join("\n\n")
    );
}
