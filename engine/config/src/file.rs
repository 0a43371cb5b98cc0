//! Reading TOML configuration files with one-line errors that name the file, the line and the key.
//!
//! toml's own error text is a multi-line source excerpt with a caret; a log line or a script's
//! `2>&1 | tail -1` loses the part that says what is wrong. [`from_str`] turns it into
//! `FILE:LINE: key `TABLE.KEY`: MESSAGE`, where MESSAGE is serde's (`invalid type: string "x",
//! expected u64`, `unknown field `x`, expected one of ...`): the accepted type or keys.
//! Every loader of a configuration kind (switch, send, simulator scenario, presets, replay)
//! parses through it.
use serde::de::DeserializeOwned;

/// Parses `text` (the contents of `file`) into `T`; the error is one line naming the file, the
/// line and, when it can be read off the text, the key.
pub fn from_str<T: DeserializeOwned>(text: &str, file: &str) -> Result<T, String> {
    toml::from_str(text).map_err(|e| one_line(file, text, &e))
}

/// Serde's `deserialize_with` for an IPv4 address, whose error names the accepted form (serde's
/// own says only "invalid IPv4 address syntax").
pub fn ipv4<'de, D: serde::Deserializer<'de>>(d: D) -> Result<std::net::Ipv4Addr, D::Error> {
    let s = <String as serde::Deserialize>::deserialize(d)?;
    s.parse().map_err(|_| {
        serde::de::Error::custom(format!(
            "{s:?}: expected an IPv4 address, four decimal octets like \"10.0.0.1\""
        ))
    })
}

/// `FILE:LINE: key `K`: MESSAGE` for a toml error on `text`.
pub fn one_line(file: &str, text: &str, e: &toml::de::Error) -> String {
    let message = e.message().trim().replace('\n', " ");
    let Some(span) = e.span() else {
        return format!("{file}: {message}");
    };
    let start = span.start.min(text.len());
    let end = span.end.clamp(start, text.len());
    let line_no = text[..start].matches('\n').count() + 1;
    match key_at(text, start, end) {
        Some(key) => format!("{file}:{line_no}: key `{key}`: {message}"),
        None => format!("{file}:{line_no}: {message}"),
    }
}

/// The dotted key whose key or value covers `start..end` of `text`: the enclosing `[table]` or
/// `[[array]]` header (with the array's index), then inline tables, then the key. `None` when
/// the span is not on a `key = value` line (a header, a value continued on a later line).
fn key_at(text: &str, start: usize, end: usize) -> Option<String> {
    let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[start..].find('\n').map_or(text.len(), |i| start + i);
    let line = &text[line_start..line_end];
    let col = start - line_start;
    let mut path: Vec<String> = Vec::new();
    // The table the line is in.
    let mut counts: std::collections::HashMap<String, usize> = Default::default();
    let mut table: Option<String> = None;
    for l in text[..line_start].lines() {
        let l = l.trim();
        if let Some(name) = l.strip_prefix("[[").and_then(|r| r.split("]]").next()) {
            let name = name.trim().to_string();
            let n = counts.entry(name.clone()).or_insert(0);
            table = Some(format!("{name}[{n}]"));
            *n += 1;
        } else if let Some(name) = l.strip_prefix('[').and_then(|r| r.split(']').next()) {
            table = Some(name.trim().to_string());
        }
    }
    path.extend(table);
    let before = &line[..col];
    if !before.contains('=') {
        // The span is on the key itself (`unknown field`): the key is the span's text.
        let k = text[start..end].split('=').next()?.trim();
        let k = k.trim_matches('"');
        if k.is_empty() || k.starts_with('[') {
            return (!path.is_empty()).then(|| path.join("."));
        }
        path.push(k.to_string());
        return Some(path.join("."));
    }
    // Inline tables opened before the span and not closed: `qcn = { a = 1, b = "x" }`.
    let mut depth_keys: Vec<usize> = Vec::new();
    for (i, c) in before.char_indices() {
        match c {
            '{' => depth_keys.push(i),
            '}' => {
                depth_keys.pop();
            }
            _ => {}
        }
    }
    for open in depth_keys {
        path.push(key_before_eq(&before[..open])?);
    }
    path.push(key_before_eq(before)?);
    Some(path.join("."))
}

/// The key of the last `key =` in `s`.
fn key_before_eq(s: &str) -> Option<String> {
    let eq = s.rfind('=')?;
    let k = s[..eq]
        .trim_end()
        .rsplit(|c: char| c == '{' || c == ',' || c.is_whitespace())
        .next()?
        .trim_matches('"');
    (!k.is_empty()).then(|| k.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Inner {
        a: Option<u64>,
        b: Option<u64>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Item {
        name: String,
        x: Option<Inner>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct File {
        workers: Option<u64>,
        #[serde(default)]
        ports: Vec<Item>,
        t: Option<Inner>,
    }

    fn err(text: &str) -> String {
        from_str::<File>(text, "f.toml").unwrap_err()
    }

    #[test]
    fn errors_name_file_line_and_key_on_one_line() {
        assert_eq!(
            err("workers = \"x\"\n"),
            "f.toml:1: key `workers`: invalid type: string \"x\", expected u64"
        );
        let e = err("workers = 1\n[[ports]]\nname = \"a\"\n[[ports]]\nname = \"b\"\nx = { a = 1, b = -2 }\n");
        assert!(
            e.starts_with("f.toml:6: key `ports[1].x.b`: invalid value"),
            "{e}"
        );
        let e = err("[t]\na = 1\nbogus = 2\n");
        assert!(
            e.starts_with("f.toml:3: key `t.bogus`: unknown field `bogus`, expected `a` or `b`"),
            "{e}"
        );
        let e = err("workers = [1,\n 2]\n");
        assert!(
            e.starts_with("f.toml:1: key `workers`: invalid type"),
            "{e}"
        );
        let e = err("workers = \n");
        assert!(e.starts_with("f.toml:1:") && !e.contains('\n'), "{e}");
    }
}
