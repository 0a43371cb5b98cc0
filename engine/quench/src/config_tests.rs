//! Every key of every shipped configuration file, broken two ways, must get a one-line error
//! naming the file, the key and what is accepted; random TOML must never panic a loader.
//!
//! Kinds and the loader each command runs at start: switch (`configs/switch*.toml`,
//! [`SwitchConfig::load`]), send (`configs/send.toml`: the file and its reaction-point tables),
//! presets (every other `configs/*.toml`, as `quench sim` reads them,
//! for QCN and DCQCN) and `quench replay` files (`configs/replay/*.toml`, every algorithm's
//! table). Scenario files reuse the preset sections and the send/replay tables' crates.
use std::path::{Path, PathBuf};

use proptest::prelude::*;

use quench_runtime::switch::config::SwitchConfig;

fn configs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs")
}

/// A configuration kind: its files and the start-up loader of the command that reads them.
struct Kind {
    name: &'static str,
    files: Vec<PathBuf>,
    load: fn(&Path) -> anyhow::Result<()>,
}

fn load_switch(p: &Path) -> anyhow::Result<()> {
    SwitchConfig::load(p)?;
    Ok(())
}

fn load_send(p: &Path) -> anyhow::Result<()> {
    let src = quench_config::bundled::open(
        &p.display().to_string(),
        quench_config::bundled::Kind::Send,
        None,
    )?;
    let cfg = quench_runtime::send::config::load(&src)?;
    let file = p.display();
    let line = units::Rate::parse(&cfg.line_rate)
        .map_err(|e| anyhow::anyhow!("{file}: key `line_rate`: {e}"))?;
    if let Some(q) = &cfg.qcn_rp {
        q.profile(line)
            .map_err(|e| anyhow::anyhow!("{file}: [qcn_rp] {e}"))?;
    }
    if let Some(d) = &cfg.dcqcn_rp {
        d.profile(line)
            .map_err(|e| anyhow::anyhow!("{file}: [dcqcn_rp] {e}"))?;
    }
    // The flows, as `quench send` builds them before it opens a port.
    let mut rng =
        <rand_xoshiro::Xoshiro256PlusPlus as rand_xoshiro::rand_core::SeedableRng>::seed_from_u64(
            cfg.seed,
        );
    let dir = p.parent().unwrap_or(Path::new("."));
    quench_node::flowgen::schedule(&cfg.flows, dir, 1, &mut rng)
        .map_err(|e| anyhow::anyhow!("{file}: {e}"))?;
    Ok(())
}

fn load_preset(p: &Path) -> anyhow::Result<()> {
    use quench_sim::cc::{CcKind, CcSections, CcSetup};
    let file = p.display().to_string();
    let text = std::fs::read_to_string(p)?;
    let s: CcSections = quench_config::file::from_str(&text, &file).map_err(anyhow::Error::msg)?;
    for kind in [CcKind::Qcn, CcKind::Dcqcn] {
        CcSetup::new(kind, &s, &file)?;
    }
    Ok(())
}

fn load_replay(p: &Path) -> anyhow::Result<()> {
    quench_runtime::replay::ReplayConfig::load(p)?.check(&p.display().to_string())
}

fn kinds() -> Vec<Kind> {
    let dir = configs();
    let mut switch: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("switch"))
        })
        .collect();
    switch.sort();
    // Every other configs/*.toml is a preset, so a new one is walked without being named here.
    let mut presets: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let n = p
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .to_string();
            // appliance.toml is `quench appliance`'s own kind (quench_runtime::appliance::config tests its keys).
            n.ends_with(".toml")
                && !n.starts_with("switch")
                && n != "send.toml"
                && n != "appliance.toml"
        })
        .collect();
    presets.sort();
    let mut replay: Vec<PathBuf> = std::fs::read_dir(dir.join("replay"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    replay.sort();
    vec![
        Kind {
            name: "switch",
            files: switch,
            load: load_switch,
        },
        Kind {
            name: "send",
            files: vec![dir.join("send.toml")],
            load: load_send,
        },
        Kind {
            name: "preset",
            files: presets,
            load: load_preset,
        },
        Kind {
            name: "replay",
            files: replay,
            load: load_replay,
        },
    ]
}

/// Every leaf key of `t` as a path of table keys and array indices.
#[derive(Clone, Debug)]
enum Step {
    Key(String),
    Index(usize),
}

fn leaves(v: &toml::Value, at: &mut Vec<Step>, out: &mut Vec<(Vec<Step>, toml::Value)>) {
    match v {
        toml::Value::Table(t) => {
            for (k, v) in t {
                at.push(Step::Key(k.clone()));
                leaves(v, at, out);
                at.pop();
            }
        }
        toml::Value::Array(a) if a.iter().all(|x| x.is_table()) && !a.is_empty() => {
            for (i, v) in a.iter().enumerate() {
                at.push(Step::Index(i));
                leaves(v, at, out);
                at.pop();
            }
        }
        _ => out.push((at.clone(), v.clone())),
    }
}

fn set(v: &mut toml::Value, path: &[Step], new: toml::Value) {
    let mut cur = v;
    for s in path {
        cur = match s {
            Step::Key(k) => cur.get_mut(k.as_str()).unwrap(),
            Step::Index(i) => cur.get_mut(*i).unwrap(),
        };
    }
    *cur = new;
}

fn leaf_name(path: &[Step]) -> &str {
    path.iter()
        .rev()
        .find_map(|s| match s {
            Step::Key(k) => Some(k.as_str()),
            Step::Index(_) => None,
        })
        .unwrap_or("?")
}

/// A value of another type than `v`.
fn wrong_type(v: &toml::Value) -> toml::Value {
    match v {
        toml::Value::String(_) => toml::Value::Integer(7),
        toml::Value::Array(_) => toml::Value::String("x".into()),
        _ => toml::Value::String("x".into()),
    }
}

/// Values outside every sensible range of a key holding `v`, if the type has such values.
fn out_of_range(v: &toml::Value) -> Vec<toml::Value> {
    match v {
        toml::Value::Integer(_) => vec![toml::Value::Integer(1 << 62)],
        toml::Value::Float(_) => vec![toml::Value::Float(1e300), toml::Value::Float(f64::NAN)],
        toml::Value::Array(a) if a.iter().all(|x| x.is_integer()) => {
            vec![toml::Value::Array(vec![toml::Value::Integer(99)])]
        }
        toml::Value::String(_) => vec![toml::Value::String("no-such-value-7".into())],
        _ => vec![],
    }
}

/// Keys whose every value of the type is accepted (named on purpose: a new key must either
/// be range-checked or be listed here with its reason).
fn accepts_any(kind: &str, key: &str, v: &toml::Value) -> bool {
    match (kind, key) {
        // Seeds of the random generators: any u64.
        (_, "seed") => !matches!(v, toml::Value::Integer(i) if *i < 0),
        // Names and interfaces are free text (interfaces are checked when opened).
        ("switch", "name" | "port" | "iface") => matches!(v, toml::Value::String(_)),
        // Paths: checked when bound.
        ("switch", "control_socket") => true,
        // Rate ceilings and the first-CNP rate are clamped to the line rate (rp::params).
        (_, "rpg_max_rate" | "rate_to_set_on_first_cnp") => true,
        _ => false,
    }
}

/// Keys whose out-of-range values are still accepted or answered without the key's own range,
/// each with the reason; the test fails when one of them is fixed, so the list stays true.
/// Empty: octet and time parameters are bounded (`units::MAX_BUFFER_BYTES`,
/// `units::MAX_TIME_NS`), `quench send`'s flows are checked as it loads them, and IPv4 keys name
/// the accepted form.
const KNOWN_GAPS: &[(&str, &str, &str)] = &[];

/// The checks every error must pass.
fn check_error(
    kind: &str,
    file: &Path,
    key: &str,
    what: &str,
    err: &str,
    failures: &mut Vec<String>,
) {
    let fname = file.file_name().unwrap().to_string_lossy();
    let mut bad = Vec::new();
    if err.contains('\n') {
        bad.push("spans lines");
    }
    if !err.contains(fname.as_ref()) {
        bad.push("no file");
    }
    if !err.contains(key) {
        bad.push("no key");
    }
    // What names the accepted values: serde's "expected u32", toml's "wanted string", ranges.
    let accepted = [
        "expected", "wanted", "must", "..", "one of", ">=", "<=", "at least", "at most",
    ];
    if !accepted.iter().any(|a| err.contains(a)) {
        bad.push("no accepted range");
    }
    if !bad.is_empty() {
        failures.push(format!(
            "{kind} {fname} `{key}` {what}: {}: {err}",
            bad.join(", ")
        ));
    }
}

#[test]
fn every_key_of_every_kind_broken_gets_a_one_line_error() {
    let dir = std::env::temp_dir().join(format!("quench-cfgwalk-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut failures = Vec::new();
    let mut probes = 0;
    for kind in kinds() {
        assert!(!kind.files.is_empty(), "{}: no files", kind.name);
        for file in &kind.files {
            (kind.load)(file)
                .unwrap_or_else(|e| panic!("{}: shipped file fails: {e:#}", kind.name));
            let text = std::fs::read_to_string(file).unwrap();
            let doc: toml::Value = toml::from_str(&text).unwrap();
            let mut keys = Vec::new();
            leaves(&doc, &mut Vec::new(), &mut keys);
            // Written under the shipped file's name, so errors must name it.
            let probe_file = dir.join(file.file_name().unwrap());
            for (path, v) in &keys {
                let key = leaf_name(path);
                let mut tries = vec![("wrong type", wrong_type(v))];
                if !accepts_any(kind.name, key, v) {
                    tries.extend(out_of_range(v).into_iter().map(|x| ("out of range", x)));
                }
                for (what, new) in tries {
                    let mut d = doc.clone();
                    set(&mut d, path, new.clone());
                    std::fs::write(&probe_file, toml::to_string(&d).unwrap()).unwrap();
                    probes += 1;
                    match (kind.load)(&probe_file) {
                        Ok(()) => failures.push(format!(
                            "{} {} `{key}` = {new}: {what} accepted",
                            kind.name,
                            file.display()
                        )),
                        Err(e) => check_error(
                            kind.name,
                            file,
                            key,
                            &format!("= {new} ({what})"),
                            &format!("{e:#}"),
                            &mut failures,
                        ),
                    }
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    let gap = |f: &str| {
        KNOWN_GAPS
            .iter()
            .any(|(k, key, _)| f.starts_with(&format!("{k} ")) && f.contains(&format!("`{key}`")))
    };
    let (known, new): (Vec<String>, Vec<String>) = failures.into_iter().partition(|f| gap(f));
    assert!(
        new.is_empty(),
        "{} of {probes} probes:\n{}",
        new.len(),
        new.join("\n")
    );
    for (k, key, why) in KNOWN_GAPS {
        assert!(
            known
                .iter()
                .any(|f| f.starts_with(&format!("{k} ")) && f.contains(&format!("`{key}`"))),
            "{k} `{key}` ({why}) is fixed: remove it from KNOWN_GAPS"
        );
    }
}

/// Random TOML documents built from the shipped files' keys and random values, and random
/// bytes, never panic a loader.
#[test]
fn random_toml_never_panics_a_loader() {
    let dir = std::env::temp_dir().join(format!("quench-cfgfuzz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kinds = kinds();
    let mut keys: Vec<(usize, usize, Vec<Step>)> = Vec::new();
    let mut docs = Vec::new();
    for (ki, k) in kinds.iter().enumerate() {
        for f in &k.files {
            let doc: toml::Value = toml::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
            let mut l = Vec::new();
            leaves(&doc, &mut Vec::new(), &mut l);
            let di = docs.len();
            docs.push((ki, f.file_name().unwrap().to_owned(), doc));
            keys.extend(l.into_iter().map(|(p, _)| (ki, di, p)));
        }
    }
    let value = prop_oneof![
        any::<i64>().prop_map(toml::Value::Integer),
        any::<f64>().prop_map(toml::Value::Float),
        any::<bool>().prop_map(toml::Value::Boolean),
        "[a-z0-9:./ -]{0,12}".prop_map(toml::Value::String),
        proptest::collection::vec(any::<i64>().prop_map(toml::Value::Integer), 0..4)
            .prop_map(toml::Value::Array),
    ];
    let case = (
        proptest::collection::vec((0..keys.len(), value), 1..6),
        proptest::collection::vec(any::<u8>(), 0..200),
    );
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 64,
        ..ProptestConfig::default()
    });
    runner
        .run(&case, |(edits, junk)| {
            let (_, di, _) = &keys[edits[0].0];
            let (ki, name, doc) = &docs[*di];
            let mut d = doc.clone();
            for (k, v) in &edits {
                let (kk, dd, path) = &keys[*k];
                if kk == ki && dd == di {
                    set(&mut d, path, v.clone());
                }
            }
            let path = dir.join(name);
            std::fs::write(&path, toml::to_string(&d).unwrap()).unwrap();
            let _ = (kinds[*ki].load)(&path);
            std::fs::write(&path, &junk).unwrap();
            let _ = (kinds[*ki].load)(&path);
            Ok(())
        })
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
