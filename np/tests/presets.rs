//! Every `[np]` section in configs/ parses and validates.

use std::path::PathBuf;

use np::{CnpMode, NpParams};

fn np_section(file: &str) -> Option<NpParams> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../configs")
        .join(file);
    let table: toml::Table = toml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let v = table.get("np")?;
    Some(
        v.clone()
            .try_into::<NpParams>()
            .unwrap_or_else(|e| panic!("{file} [np]: {e}")),
    )
}

#[test]
fn every_np_section_parses_into_a_profile() {
    let mut n = 0;
    for entry in
        std::fs::read_dir(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../configs")).unwrap()
    {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let file = path.file_name().unwrap().to_str().unwrap().to_owned();
        if let Some(p) = np_section(&file) {
            p.profile().unwrap_or_else(|e| panic!("{file} [np]: {e}"));
            n += 1;
        }
    }
    assert!(n >= 3, "nvidia, dcqcn-paper, hpcc-ns3: {n}");
}

#[test]
fn np_presets_hold_their_sources_values() {
    assert_eq!(np_section("nvidia.toml").unwrap(), NpParams::default());
    let paper = np_section("dcqcn-paper.toml").unwrap().profile().unwrap();
    assert_eq!(
        (paper.mode, paper.interval.as_nanos()),
        (CnpMode::Interval, 50_000)
    );
    let ns3 = np_section("hpcc-ns3.toml").unwrap().profile().unwrap();
    assert_eq!(ns3.mode, CnpMode::PerPacket);
}

#[test]
fn unknown_np_keys_are_rejected_by_name() {
    let t: toml::Table = toml::from_str("[np]\nmin_time_between_cnp = 4\n").unwrap();
    let e = t["np"]
        .clone()
        .try_into::<NpParams>()
        .unwrap_err()
        .to_string();
    assert!(e.contains("min_time_between_cnp"), "{e}");
}
