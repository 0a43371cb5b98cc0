//! Configuration keys described once: the tables each parameter type keeps beside its struct
//! (`cp::red::KEYS`, `rp::dcqcn::KEYS`, ...), from which `quench presets --keys KIND` and
//! docs/config.md are generated and with whose ranges the validations check values
//! ([`Key::within`]). Tests hold each table to its struct: the same keys as the parser
//! accepts, the documented default equal to the code's, a value past the range refused.

use crate::param::{within, ParamError};

/// What a key holds, as written in TOML.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Type {
    Integer,
    Float,
    Bool,
    String,
    /// A rate with its unit, `"10gbit"` (`Rate::parse`).
    Rate,
    /// One of these words.
    OneOf(&'static [&'static str]),
    /// A list of integers.
    Integers,
    /// A list of strings.
    Strings,
    /// A table of its own (its keys are listed under its name).
    Table,
    /// An array of tables (`[[name]]`; its keys are listed under `name[]`).
    Tables,
}

impl Type {
    /// How the reference names it.
    pub fn describe(&self) -> String {
        match self {
            Type::Integer => "integer".into(),
            Type::Float => "float".into(),
            Type::Bool => "bool".into(),
            Type::String => "string".into(),
            Type::Rate => "rate (\"10gbit\")".into(),
            Type::OneOf(words) => words
                .iter()
                .map(|w| format!("\"{w}\""))
                .collect::<Vec<_>>()
                .join(" | "),
            Type::Integers => "list of integers".into(),
            Type::Strings => "list of strings".into(),
            Type::Table => "table".into(),
            Type::Tables => "array of tables".into(),
        }
    }
}

/// A key's default.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum KeyDefault {
    /// A TOML value that reads as the code's default (the tables' tests check it).
    Value(&'static str),
    /// A default that depends on the rest (the port's MAC, the congestion control): described.
    Text(&'static str),
    /// No default: the key must be given.
    Required,
    /// Absent means off, none or not set.
    None,
}

/// The values a key accepts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Range {
    /// Any value of its type.
    Any,
    /// An integer in `lo..=hi`, checked by [`Key::within`].
    Int(u64, u64),
    /// A number in `lo..=hi`.
    Float(f64, f64),
    /// A constraint on other keys too, in words (`<= kmax_bytes`).
    Text(&'static str),
}

/// One key of a configuration table.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Key {
    pub name: &'static str,
    pub ty: Type,
    /// `octets`, `us`, `Mb/s`, `1/1024`, ... ("" for none).
    pub unit: &'static str,
    pub default: KeyDefault,
    pub range: Range,
    /// One sentence.
    pub doc: &'static str,
}

impl Key {
    /// `value` checked against the key's integer range: the value, or an error naming the key.
    pub fn within(&self, value: u64) -> Result<u64, ParamError> {
        match self.range {
            Range::Int(lo, hi) => within(self.name, value, lo, hi),
            _ => Ok(value),
        }
    }

    /// `value` checked against the key's range (`Range::Float`, ends included): the value, or
    /// an error naming the key.
    pub fn within_f64(&self, value: f64) -> Result<f64, ParamError> {
        match self.range {
            Range::Float(lo, hi) if !(lo..=hi).contains(&value) => Err(ParamError::new(
                self.name,
                value,
                format!("must be in [{lo}, {hi}]"),
            )),
            _ => Ok(value),
        }
    }

    /// The default as the reference prints it.
    pub fn describe_default(&self) -> String {
        match self.default {
            KeyDefault::Value(v) => format!("`{v}`"),
            KeyDefault::Text(t) => t.to_string(),
            KeyDefault::Required => "required".into(),
            KeyDefault::None => "none".into(),
        }
    }

    /// The range as the reference prints it.
    pub fn describe_range(&self) -> String {
        match self.range {
            Range::Any => String::new(),
            Range::Int(lo, hi) => format!("{lo}..={hi}"),
            Range::Float(lo, hi) => format!("{lo}..={hi}"),
            Range::Text(t) => t.to_string(),
        }
    }
}

/// The key named `name` of `keys`, for the code that checks a value with it. Used in a `const`
/// (`const KMAX: &Key = key(KEYS, "kmax_bytes")`) it is evaluated at compile time, so a name
/// the table lacks does not compile.
pub const fn key(keys: &'static [Key], name: &str) -> &'static Key {
    let mut i = 0;
    while i < keys.len() {
        if str_eq(keys[i].name, name) {
            return &keys[i];
        }
        i += 1;
    }
    panic!("no such key in the table")
}

const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEYS: &[Key] = &[Key {
        name: "kmax_bytes",
        ty: Type::Integer,
        unit: "octets",
        default: KeyDefault::Value("200000"),
        range: Range::Int(1, 10),
        doc: "Kmax.",
    }];
    const KMAX: &Key = key(KEYS, "kmax_bytes");

    #[test]
    fn a_key_checks_its_range_and_describes_itself() {
        assert_eq!(KMAX.within(10), Ok(10));
        let e = KMAX.within(11).unwrap_err();
        assert_eq!(
            e.to_string(),
            "parameter `kmax_bytes` = 11: must be in 1..=10"
        );
        assert_eq!(KMAX.describe_range(), "1..=10");
        assert_eq!(KMAX.describe_default(), "`200000`");
        assert_eq!(
            Type::OneOf(&["mlx", "paper"]).describe(),
            "\"mlx\" | \"paper\""
        );
    }
}
