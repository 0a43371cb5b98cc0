//! The documents describe what is: docs/design.md stays a design a reader can take in (at most
//! [`DESIGN_MAX_LINES`] lines), no tracked file of the source, scripts or docs speaks of how
//! the project was worked on (the words of [`banned`]: numbered work passes and stops, the
//! people who helped, the checkouts they worked in, one machine's paths), and every citation of
//! a section of docs/design.md or docs/style.md names a section that exists.
//!
//! The words are built from pieces so that this file does not match itself.
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

const DESIGN_MAX_LINES: usize = 600;
/// Where the words are looked for, from the repository's root.
const SCOPE: &[&str] = &[
    "docs",
    "engine",
    "scripts",
    "cp",
    "rp",
    "np",
    "units",
    "configs",
    "fuzz",
    "tools",
    "README.md",
];

/// The repository's root: the first directory above this crate holding docs/design.md.
fn root() -> PathBuf {
    let mut dir = Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf();
    while !dir.join("docs/design.md").is_file() {
        assert!(
            dir.pop(),
            "no docs/design.md above {}",
            env!("CARGO_MANIFEST_DIR")
        );
    }
    dir
}

/// The tracked files in [`SCOPE`] (`git ls-files`), or, without git, every file there outside
/// build output and hidden directories.
fn files(root: &Path) -> Vec<PathBuf> {
    let listed = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["ls-files", "-z", "--"])
        .args(SCOPE)
        .output();
    if let Ok(out) = listed {
        if out.status.success() && !out.stdout.is_empty() {
            return out
                .stdout
                .split(|&b| b == 0)
                .filter(|p| !p.is_empty())
                .map(|p| root.join(String::from_utf8_lossy(p).as_ref()))
                .filter(|p| p.is_file())
                .collect();
        }
    }
    let mut out = Vec::new();
    let mut todo: Vec<PathBuf> = SCOPE.iter().map(|s| root.join(s)).collect();
    while let Some(p) = todo.pop() {
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if p.is_dir() {
            if name.starts_with('.') || name == "target" || name == "corpus" || name == "artifacts"
            {
                continue;
            }
            for e in std::fs::read_dir(&p).unwrap() {
                todo.push(e.unwrap().path());
            }
        } else if p.is_file() {
            out.push(p);
        }
    }
    out
}

/// The words, lower case, each chosen so that no legitimate phrase of the tree matches: the
/// word for halting only with a number right after it (the tree writes a halt's length with a
/// word between, never a digit), an ordinal from the third on only before the word for a pass.
fn banned(line: &str) -> Option<String> {
    let l = line.to_lowercase();
    let help = ["hel", "per"].concat();
    let tree = ["work", "tree"].concat();
    let path = ["/wo", "rk/"].concat();
    for w in [&help, &tree, &path] {
        if l.contains(w.as_str()) {
            return Some(w.clone());
        }
    }
    let stop = ["st", "op"].concat();
    let b = l.as_bytes();
    for (i, _) in l.match_indices(stop.as_str()) {
        let after = &b[i + stop.len()..];
        // Not a flag or a key (`--stop` with a duration, `stop_ms`): those are the product's words.
        let word_start = i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b"-_".contains(&b[i - 1]));
        if word_start
            && after.len() >= 2
            && (after[0] == b' ' || after[0] == b'-')
            && after[1].is_ascii_digit()
        {
            return Some(format!("{stop} N"));
        }
    }
    let pass = [" pa", "ss"].concat();
    for (i, _) in l.match_indices(pass.as_str()) {
        let word: String = l[..i]
            .chars()
            .rev()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        if is_ordinal(&word) {
            return Some(format!("{word}{pass}"));
        }
    }
    None
}

/// `third`, `fourth` ... `twelfth`, `4th`, `10-th`: a count of work passes (`first` and
/// `second pass` are also the names of an algorithm's passes over a burst, and stay).
fn is_ordinal(w: &str) -> bool {
    const WORDS: &[&str] = &[
        "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth", "eleventh",
        "twelfth",
    ];
    if WORDS.contains(&w) {
        return true;
    }
    let w = w.trim_end_matches("th").trim_end_matches('-');
    w.len() < 4 && !w.is_empty() && w.chars().all(|c| c.is_ascii_digit())
}

#[test]
fn design_md_is_at_most_600_lines() {
    let text = std::fs::read_to_string(root().join("docs/design.md")).unwrap();
    let n = text.lines().count();
    assert!(
        n <= DESIGN_MAX_LINES,
        "docs/design.md has {n} lines, more than {DESIGN_MAX_LINES}"
    );
}

#[test]
fn no_file_speaks_of_how_the_project_was_worked_on() {
    let root = root();
    let mut hits = Vec::new();
    let all = files(&root);
    assert!(
        all.len() > 100,
        "found only {} files under {}",
        all.len(),
        root.display()
    );
    for f in all {
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        for (n, line) in text.lines().enumerate() {
            if let Some(w) = banned(line) {
                let rel = f.strip_prefix(&root).unwrap_or(&f).display().to_string();
                hits.push(format!("{rel}:{}: `{w}`: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(
        hits.is_empty(),
        "state the invariant or the source instead (docs/style.md, \"Comments\"):\n{}",
        hits.join("\n")
    );
}

/// The `## ` and `### ` titles of a document, lower case.
fn sections(path: &Path) -> BTreeSet<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix("### ").or_else(|| l.strip_prefix("## ")))
        .map(|t| t.trim().to_lowercase())
        .collect()
}

/// A file's text with comment markers and line breaks folded to single spaces, so that a
/// citation wrapped over two comment lines reads as one.
fn folded(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let mut l = line.trim_start();
        for m in ["//!", "///", "//", "#", "*"] {
            if let Some(rest) = l.strip_prefix(m) {
                l = rest;
                break;
            }
        }
        out.push_str(l.trim());
        out.push(' ');
    }
    out
}

/// Every citation of a section of `doc` in `text`: the document's name, a comma or nothing, a
/// space, and the section's title in double quotes.
fn citations<'a>(text: &'a str, doc: &str) -> Vec<&'a str> {
    let mut out = Vec::new();
    for (i, _) in text.match_indices(doc) {
        let rest = &text[i + doc.len()..];
        let rest = rest.strip_prefix(',').unwrap_or(rest);
        let Some(rest) = rest.strip_prefix(" \"") else {
            continue;
        };
        if let Some(end) = rest.find('"') {
            if end <= 80 {
                out.push(&rest[..end]);
            }
        }
    }
    out
}

#[test]
fn cited_sections_of_design_md_and_style_md_exist() {
    let root = root();
    let docs = [
        ("design.md", sections(&root.join("docs/design.md"))),
        ("style.md", sections(&root.join("docs/style.md"))),
    ];
    let mut missing = Vec::new();
    let mut seen = 0;
    for f in files(&root) {
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        let text = folded(&text);
        for (doc, titles) in &docs {
            for c in citations(&text, doc) {
                seen += 1;
                if !titles.contains(&c.to_lowercase()) {
                    let rel = f.strip_prefix(&root).unwrap_or(&f).display().to_string();
                    missing.push(format!("{rel}: {doc}, \"{c}\""));
                }
            }
        }
    }
    assert!(
        seen > 10,
        "found only {seen} citations: is the citation reader broken?"
    );
    assert!(
        missing.is_empty(),
        "cited sections that do not exist:\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_words_are_found_where_they_are_and_not_elsewhere() {
    let stop = ["st", "op"].concat();
    let pass = ["pa", "ss"].concat();
    for bad in [
        format!("the {stop} 29 figures"),
        format!("({stop}-27)"),
        format!("the eighth {pass}"),
        format!("a 4th {pass}"),
        format!("a {}{}", "hel", "per's branch"),
        format!("/{}/notes", "work"),
        format!("git {}{} add", "work", "tree"),
    ] {
        assert!(banned(&bad).is_some(), "{bad}");
    }
    for good in [
        format!("a worker {stop}s at the end"),
        format!("{stop} the switch, then {stop}ped 2 s later"),
        format!("both {pass} through"),
        format!("`--{stop} 10s` ends the run"),
        format!("a first {pass} in frame order, then the second {pass}"),
        format!("the egress depth {pass}es the threshold"),
        "the working directory".to_string(),
    ] {
        assert!(banned(&good).is_none(), "{good}");
    }
    assert_eq!(
        citations(
            r#"see docs/design.md, "Switch runtime" and style.md "Time""#,
            "design.md"
        ),
        ["Switch runtime"]
    );
    assert_eq!(citations(r#"docs/style.md "Time""#, "style.md"), ["Time"]);
}
