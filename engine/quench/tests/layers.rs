//! The crates' layers, as `cargo metadata` reports them: every crate of the workspace depends only
//! on crates of lower layers (docs/design.md, "Layers"). A dev-dependency may also reach a crate
//! of its own layer (the simulator's equivalence tests run the runtime's workers), never one above.
use std::collections::BTreeMap;
use std::process::Command;

/// Each workspace crate and its layer, bottom first.
const LAYERS: &[(&str, u32)] = &[
    ("units", 0),
    ("cp", 1),
    ("rp", 1),
    ("np", 1),
    ("quench-wire", 2),
    ("quench-config", 2),
    ("quench-report", 2),
    ("quench-port", 3),
    ("quench-node", 4),
    ("quench-runtime", 5),
    ("quench-sim", 5),
    ("quench", 6),
];

fn metadata() -> serde_json::Value {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .output()
        .expect("run cargo metadata");
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("cargo metadata's JSON")
}

#[test]
fn every_crate_depends_only_on_lower_layers() {
    let layer: BTreeMap<&str, u32> = LAYERS.iter().copied().collect();
    let meta = metadata();
    let packages = meta["packages"].as_array().unwrap();
    let names: Vec<&str> = packages
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    for n in &names {
        assert!(
            layer.contains_key(n),
            "crate {n} has no layer: add it to LAYERS"
        );
    }
    let mut wrong = Vec::new();
    for p in packages {
        let name = p["name"].as_str().unwrap();
        let own = layer[name];
        for d in p["dependencies"].as_array().unwrap() {
            let dep = d["name"].as_str().unwrap();
            let Some(&theirs) = layer.get(dep) else {
                continue; // not a crate of this workspace
            };
            let dev = d["kind"].as_str() == Some("dev");
            let ok = if dev { theirs <= own } else { theirs < own };
            if !ok {
                wrong.push(format!(
                    "{name} (layer {own}) -> {dep} (layer {theirs}){}",
                    if dev { " as a dev-dependency" } else { "" }
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "dependencies that run up: {wrong:#?}");
}
