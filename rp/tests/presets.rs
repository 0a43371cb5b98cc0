//! Every preset in configs/ parses into rp's parameter structs and validates into profiles.
//! Each file's other sections belong to other crates and are skipped here.

use std::path::PathBuf;

use rp::{DcqcnParams, QcnParams, UeReaction, Variant};
use units::Rate;

fn configs() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../configs")
}

/// The port speed each preset's values assume (written in each file's header).
fn line_rate(file: &str) -> Rate {
    match file {
        "ieee-8021qau.toml" => Rate::from_gbps(10),
        "dcqcn-paper.toml" => Rate::from_gbps(40),
        "testbed-1g.toml" => Rate::from_gbps(1),
        _ => Rate::from_gbps(100),
    }
}

/// Deserialises `[section]` of `file`, with errors naming the file and the section.
fn section<T: serde::de::DeserializeOwned>(
    file: &str,
    table: &toml::Table,
    name: &str,
) -> Option<Result<T, String>> {
    let v = table.get(name)?;
    Some(
        v.clone()
            .try_into::<T>()
            .map_err(|e| format!("{file} [{name}]: {e}")),
    )
}

#[test]
fn every_preset_parses_into_profiles() {
    let mut qcn = 0;
    let mut dcqcn = 0;
    let mut files: Vec<_> = std::fs::read_dir(configs())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    for path in files {
        let file = path.file_name().unwrap().to_str().unwrap().to_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        let table: toml::Table = toml::from_str(&text).unwrap_or_else(|e| panic!("{file}: {e}"));
        if let Some(p) = section::<QcnParams>(&file, &table, "qcn_rp") {
            let p = p.unwrap();
            p.profile(line_rate(&file))
                .unwrap_or_else(|e| panic!("{file} [qcn_rp]: {e}"));
            qcn += 1;
        }
        if let Some(p) = section::<DcqcnParams>(&file, &table, "dcqcn_rp") {
            let p = p.unwrap();
            p.profile(line_rate(&file))
                .unwrap_or_else(|e| panic!("{file} [dcqcn_rp]: {e}"));
            dcqcn += 1;
        }
    }
    assert_eq!(
        (qcn, dcqcn),
        (2, 4),
        "ieee-8021qau, testbed-1g; nvidia, dcqcn-paper, hpcc-ns3, testbed-1g"
    );
}

fn load(file: &str) -> toml::Table {
    toml::from_str(&std::fs::read_to_string(configs().join(file)).unwrap()).unwrap()
}

#[test]
fn presets_hold_their_sources_values() {
    // The IEEE preset is exactly the compiled-in defaults (defaults defined once).
    let ieee: QcnParams = section("ieee-8021qau.toml", &load("ieee-8021qau.toml"), "qcn_rp")
        .unwrap()
        .unwrap();
    assert_eq!(ieee, QcnParams::default());
    // So is the NVIDIA preset.
    let nv: DcqcnParams = section("nvidia.toml", &load("nvidia.toml"), "dcqcn_rp")
        .unwrap()
        .unwrap();
    assert_eq!(nv, DcqcnParams::default());

    let paper: DcqcnParams = section("dcqcn-paper.toml", &load("dcqcn-paper.toml"), "dcqcn_rp")
        .unwrap()
        .unwrap();
    assert_eq!(paper.variant, Variant::Paper);
    let pp = paper.profile(Rate::from_gbps(40)).unwrap();
    assert_eq!(pp.g, 1.0 / 256.0);
    assert_eq!(pp.time_reset.as_nanos(), 55_000);
    assert_eq!(pp.byte_reset, 10_000_000);
    assert_eq!((pp.threshold, pp.ai_rate), (5, Rate::from_mbps(40)));

    let ns3: DcqcnParams = section("hpcc-ns3.toml", &load("hpcc-ns3.toml"), "dcqcn_rp")
        .unwrap()
        .unwrap();
    let np3 = ns3.profile(Rate::from_gbps(100)).unwrap();
    assert_eq!(np3.g, 1.0 / 256.0);
    assert_eq!(np3.initial_alpha, 1.0);
    assert_eq!(np3.min_rate, Rate::from_mbps(1000));
    assert_eq!(np3.ue_reaction, UeReaction::Ignore);
}

#[test]
fn unknown_keys_are_rejected_by_name() {
    let t: toml::Table = toml::from_str("[qcn_rp]\nrpg_time_rest = 10\n").unwrap();
    let e = section::<QcnParams>("typo.toml", &t, "qcn_rp")
        .unwrap()
        .unwrap_err();
    assert!(
        e.contains("typo.toml [qcn_rp]") && e.contains("rpg_time_rest"),
        "{e}"
    );
    let t: toml::Table = toml::from_str("[dcqcn_rp]\nvariant = \"fast\"\n").unwrap();
    let e = section::<DcqcnParams>("v.toml", &t, "dcqcn_rp")
        .unwrap()
        .unwrap_err();
    assert!(e.contains("fast"), "{e}");
}
