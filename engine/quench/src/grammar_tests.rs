//! The command line's grammar, held for every subcommand: placeholders that say what a value is,
//! rates and durations that reach their parser with a minus sign (so `-5ms` is refused as
//! negative, not taken for a flag), shell completion that offers the bundled names and none of
//! the retired flags, and the retired flags refused with what replaced them.
use clap::{CommandFactory as _, Parser as _};

use super::{retired, Cli, RETIRED};

/// Every (subcommand, argument) pair that takes a value.
fn valued_args() -> Vec<(String, clap::Arg)> {
    let cmd = Cli::command();
    let mut out = Vec::new();
    for sub in cmd.get_subcommands() {
        for a in sub.get_arguments() {
            if a.get_action().takes_values() && a.get_id() != "help" && a.get_id() != "version" {
                out.push((sub.get_name().to_string(), a.clone()));
            }
        }
    }
    out
}

/// Placeholders that are kinds of value, whatever the argument is called.
const KINDS: &[&str] = &[
    "DURATION", "RATE", "IFACE", "FILE", "DIR", "PATH", "N", "NAME",
];

/// A placeholder is a kind of value (FILE, DIR, RATE, DURATION, N, NAME|FILE, ...), never the
/// argument's own name in capitals (`<NS3_CONFIG>`), unless the choices are listed.
#[test]
fn every_value_has_a_placeholder_that_says_its_kind() {
    let mut bad = Vec::new();
    for (sub, a) in valued_args() {
        let names: Vec<String> = a
            .get_value_names()
            .map(|v| v.iter().map(|s| s.to_string()).collect())
            .unwrap_or_default();
        let id = a.get_id().as_str().to_ascii_uppercase();
        let enumerated = !a.get_possible_values().is_empty() && !a.is_hide_possible_values_set();
        let kind = KINDS.contains(&id.as_str());
        if names.is_empty() || (names.contains(&id) && !enumerated && !kind) {
            bad.push(format!("{sub} --{}: {names:?}", a.get_id()));
        }
    }
    assert!(bad.is_empty(), "placeholders to name: {bad:#?}");
}

/// A rate or duration option lets its value start with `-`, so the unit parser, not clap's
/// "unexpected argument", says what is wrong with `-5ms`.
#[test]
fn rates_and_durations_reach_their_parser_with_a_minus_sign() {
    let mut bad = Vec::new();
    for (sub, a) in valued_args() {
        let kind = a
            .get_value_names()
            .and_then(|v| v.first().map(|s| s.to_string()))
            .unwrap_or_default();
        if (kind == "RATE" || kind == "DURATION") && !a.is_allow_hyphen_values_set() {
            bad.push(format!("{sub} --{}", a.get_id()));
        }
    }
    assert!(bad.is_empty(), "without allow_hyphen_values: {bad:?}");
    let err = Cli::try_parse_from([
        "quench",
        "sim",
        "--scenario",
        "incast",
        "--out",
        "x",
        "--stop",
        "-5ms",
    ])
    .err()
    .expect("a negative duration is refused");
    assert!(err.to_string().contains("`-5ms` is negative"), "{err}");
}

#[test]
fn bash_completion_offers_bundled_names_and_no_retired_flag() {
    let mut buf = Vec::new();
    clap_complete::generate(
        clap_complete::Shell::Bash,
        &mut Cli::command(),
        "quench",
        &mut buf,
    );
    let text = String::from_utf8(buf).expect("utf-8");
    for (_, flag, _) in RETIRED {
        // The subcommand-specific ones (`sim --config`, `frames --pcap`) exist elsewhere.
        if matches!(*flag, "--config" | "--pcap") {
            continue;
        }
        assert!(
            !text.contains(&format!("{flag} ")),
            "completion offers {flag}"
        );
    }
    for name in [
        "nvidia",
        "dcqcn-paper",
        "hpcc-dcqcn",
        "incast",
        "switch-qcn",
    ] {
        assert!(text.contains(name), "completion lacks {name}");
    }
}

#[test]
fn retired_flags_name_their_replacement() {
    let args = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
    assert_eq!(
        retired(&args("stats --interval-ms 100")).as_deref(),
        Some("--interval-ms is gone: write --interval with its unit, e.g. --interval 100ms")
    );
    assert!(
        retired(&args("sim --config f.toml --out x")).is_some_and(|m| m.contains("--overrides"))
    );
    assert!(retired(&args("switch --config switch-qcn")).is_none());
    assert!(retired(&args("frames --pcap=f.pcap")).is_some_and(|m| m.contains("--out")));
    assert!(retired(&args("blast --iface a --pcap f")).is_some_and(|m| m.contains("--from-pcap")));
    assert!(retired(&args("switch --config x -- --busy-poll")).is_none());
    assert!(retired(&[]).is_none());
}

#[test]
fn version_names_the_commit_and_the_features() {
    let v = Cli::command().render_version();
    assert!(v.contains("(commit ") && v.contains("features: "), "{v}");
}

#[test]
fn bw_takes_a_rate_of_whole_gigabits() {
    use crate::cli::sim::bw_arg;
    assert_eq!(bw_arg("100gbit"), Ok(100));
    assert_eq!(bw_arg("25Gb/s"), Ok(25));
    assert_eq!(bw_arg("100"), Ok(100));
    assert!(bw_arg("2.5gbit").is_err());
    assert!(bw_arg("0gbit").is_err());
    assert!(bw_arg("100mbps").is_err());
}
