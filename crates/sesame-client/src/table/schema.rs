//! A table's schema: its fields, their types, the queries each answers and
//! the scheme bound to each query kind; and the values of each type, with
//! the order-preserving encodings that carry them into a range protocol.
//!
//! A schema is written in TOML:
//!
//! ```toml
//! key = "id"                 # optional: the field that names a record
//! equality = "diana"         # the keyword scheme of every equality and
//!                            # prefix field (optional, default "diana")
//! nulls = ["", "NA"]         # cell texts read as "no value" (default [""])
//! # insecure = true          # benchmarks only: admit insecure baselines
//!
//! [fields.carrier]
//! type = "string"
//! index = ["equality"]
//!
//! [fields.dest]
//! type = "string"
//! index = ["equality", "prefix"]
//! prefix_max = 4             # longest prefix answered (default 8)
//!
//! [fields.dep_delay]
//! type = "integer"
//! index = ["range", "equality"]
//! range = "bplus-lewi-wu"    # the range protocol (default: bplus-lewi-wu)
//! bits = 16                  # values in [-2^15, 2^15) (default 32)
//!
//! [fields.air_time]
//! type = "decimal"
//! scale = 1                  # one digit after the point
//!
//! [fields.time_hour]
//! type = "timestamp"         # RFC 3339 or seconds since 1970
//! index = ["range"]
//! range = { scheme = "pope", params = { } }
//! ```
//!
//! A verified group (optional) names fields whose equalities are
//! answered together, with proofs, by a conjunctive scheme:
//!
//! ```toml
//! [verified]
//! fields = ["carrier", "origin"]
//! scheme = "si-sse-rv"       # default
//! ```
//!
//! A `[verified]` scheme must return proofs the client checks (the
//! registry's conjunctive schemes that support verifiable queries:
//! SI-SSE-RV); the baselines without proofs (GSW04, BKM05, BLL06, WWP08)
//! are refused. Insecure baselines (a name with `plain` or `insecure`,
//! or a registry entry that says INSECURE, such as `bplus-plain`) are
//! refused, naming the scheme, unless the schema says `insecure = true`.
//!
//! Field names are `[A-Za-z_][A-Za-z0-9_]*`. A field without `index` is
//! stored in the record but answers no query.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use sesame_core::{Params, QueryKind};

use crate::error::{ClientError, Result};

/// The default keyword scheme of a table's equality and prefix fields
/// (Diana: FAST's leakage in 26-byte entries; `docs/tables.md`).
pub const DEFAULT_EQUALITY: &str = "diana";
/// The default scheme of a verified group.
pub const DEFAULT_VERIFIED: &str = "si-sse-rv";
/// The default range protocol of a range field.
pub const DEFAULT_RANGE: &str = "bplus-lewi-wu";
/// The default width of a range field's encoded values, in bits.
pub const DEFAULT_BITS: u32 = 32;
/// The default width of a timestamp range field (seconds; about 17,000
/// years either side of 1970).
pub const DEFAULT_TIMESTAMP_BITS: u32 = 40;
/// The default longest prefix a prefix field answers.
pub const DEFAULT_PREFIX_MAX: usize = 8;
/// The most fields a table may have.
pub const MAX_FIELDS: usize = 256;

/// The type of a field's values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FieldType {
    /// A signed 64-bit integer.
    Integer,
    /// A point in time, in whole seconds since 1970-01-01T00:00:00Z
    /// (written as RFC 3339 text or as a number of seconds).
    Timestamp,
    /// A decimal with a fixed number of digits after the point, kept as
    /// an integer count of `10^-scale`.
    Decimal {
        /// Digits after the point.
        scale: u32,
    },
    /// UTF-8 text.
    String,
}

impl std::fmt::Display for FieldType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FieldType::Integer => f.write_str("integer"),
            FieldType::Timestamp => f.write_str("timestamp"),
            FieldType::Decimal { scale } => write!(f, "decimal (scale {scale})"),
            FieldType::String => f.write_str("string"),
        }
    }
}

/// A value of a field, as stored in a record.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Value {
    /// Integers, timestamps (seconds) and decimals (units of
    /// `10^-scale`).
    Int(i64),
    /// Strings.
    Text(String),
}

/// A scheme with its parameters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Binding {
    /// The registry name.
    pub scheme: String,
    /// Its parameters, as `name=value,...` text.
    pub params: String,
}

impl Binding {
    fn new(scheme: &str) -> Self {
        Binding {
            scheme: scheme.to_owned(),
            params: String::new(),
        }
    }

    /// The parameters, parsed.
    pub fn params(&self) -> Result<Params> {
        Params::parse(&self.params).map_err(|e| ClientError::InvalidArgument(e.to_string()))
    }
}

/// One field of a table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Field {
    /// Its name.
    pub name: String,
    /// Its type.
    pub ty: FieldType,
    /// Answers `=` through the table's keyword index.
    pub equality: bool,
    /// Answers `like "abc*"` for prefixes up to this many characters.
    pub prefix: Option<usize>,
    /// Answers `<`, `<=`, `>`, `>=`, `between` (and `=`, when it has no
    /// equality index) through this range protocol.
    pub range: Option<Binding>,
    /// Width of the encoded values of a range field, in bits.
    pub bits: u32,
    /// Answers `=` through the table's verified group (see
    /// [`Schema::verified`]).
    pub verified: bool,
}

impl Field {
    /// The query kinds it answers, for messages.
    pub fn kinds(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.verified {
            out.push("= (verified)");
        } else if self.equality || self.range.is_some() {
            out.push("=");
        }
        if self.range.is_some() {
            out.push("<, <=, >, >=, between");
        }
        if self.prefix.is_some() {
            out.push("like \"prefix*\"");
        }
        out
    }

    /// Reads a cell's text as a value of this field (`None`: no value).
    pub fn parse(&self, text: &str, nulls: &[String]) -> Result<Option<Value>> {
        if nulls.iter().any(|n| n == text) {
            return Ok(None);
        }
        self.parse_literal(text).map(Some)
    }

    /// Reads a literal of a query or a cell as a value of this field.
    pub fn parse_literal(&self, text: &str) -> Result<Value> {
        let bad = |why: &str| {
            ClientError::InvalidArgument(format!(
                "field {:?} ({}): {text:?} {why}",
                self.name, self.ty
            ))
        };
        match self.ty {
            FieldType::String => Ok(Value::Text(text.to_owned())),
            FieldType::Integer => text
                .trim()
                .parse::<i64>()
                .map(Value::Int)
                .map_err(|_| bad("is not an integer")),
            FieldType::Decimal { scale } => parse_decimal(text.trim(), scale)
                .map(Value::Int)
                .ok_or_else(|| {
                    bad(&format!(
                        "is not a decimal with at most {scale} digits after the point"
                    ))
                }),
            FieldType::Timestamp => {
                let t = text.trim();
                t.parse::<i64>()
                    .ok()
                    .or_else(|| parse_timestamp(t))
                    .map(Value::Int)
                    .ok_or_else(|| {
                        bad(
                            "is not a timestamp (RFC 3339, such as 2013-01-01T05:00:00Z, \
                             or seconds since 1970)",
                        )
                    })
            }
        }
    }

    /// A value as people read it.
    pub fn display(&self, value: &Value) -> String {
        match (self.ty, value) {
            (_, Value::Text(s)) => s.clone(),
            (FieldType::Decimal { scale }, Value::Int(v)) => format_decimal(*v, scale),
            (FieldType::Timestamp, Value::Int(v)) => format_timestamp(*v),
            (_, Value::Int(v)) => v.to_string(),
        }
    }

    /// A value as JSON (numbers stay numbers where they are exact).
    pub fn json(&self, value: &Value) -> serde_json::Value {
        match (self.ty, value) {
            (FieldType::Integer, Value::Int(v)) => serde_json::Value::from(*v),
            _ => serde_json::Value::from(self.display(value)),
        }
    }

    /// The value's position in the range protocol's domain `0..2^bits`:
    /// the signed value shifted up by `2^(bits-1)`, so order is kept. A
    /// value outside `[-2^(bits-1), 2^(bits-1))` is an error naming the
    /// field's limits.
    pub fn encode(&self, value: &Value) -> Result<u64> {
        let Value::Int(v) = value else {
            return Err(ClientError::InvalidArgument(format!(
                "field {:?} has no order-preserving encoding for text",
                self.name
            )));
        };
        let (lo, hi) = self.limits();
        if *v < lo || *v > hi {
            return Err(ClientError::InvalidArgument(format!(
                "field {:?}: {} is outside the range index's domain [{}, {}] ({} bits; \
                 set `bits` higher in the schema)",
                self.name,
                self.display(value),
                self.display(&Value::Int(lo)),
                self.display(&Value::Int(hi)),
                self.bits
            )));
        }
        Ok((i128::from(*v) - i128::from(lo)) as u64)
    }

    /// The smallest and largest values the range encoding holds.
    pub fn limits(&self) -> (i64, i64) {
        let half = 1i128 << (self.bits.clamp(1, 64) - 1);
        ((-half) as i64, (half - 1) as i64)
    }

    /// The keyword of `field is null` in the keyword index (module
    /// `padding`: no value's or prefix's keyword can equal it).
    pub fn null_keyword(&self) -> String {
        format!("{}!null", self.name)
    }

    /// The keyword of `field = value` in the keyword index.
    pub fn equality_keyword(&self, value: &Value) -> String {
        match value {
            Value::Int(v) => format!("{}={v}", self.name),
            Value::Text(s) => format!("{}={s}", self.name),
        }
    }

    /// A value as the verified group's field value: a tag byte (1 for a
    /// value, 0 for none) and the value's canonical text.
    pub fn group_value(&self, value: Option<&Value>) -> Vec<u8> {
        match value {
            None => vec![0],
            Some(v) => {
                let mut out = vec![1];
                match v {
                    Value::Int(i) => out.extend_from_slice(i.to_string().as_bytes()),
                    Value::Text(t) => out.extend_from_slice(t.as_bytes()),
                }
                out
            }
        }
    }

    /// The keyword of `field like "prefix*"` in the keyword index.
    pub fn prefix_keyword(&self, prefix: &str) -> String {
        format!("{}^{prefix}", self.name)
    }

    /// The keywords a value of this field gives the keyword index.
    pub fn keywords(&self, value: &Value, out: &mut Vec<String>) {
        if self.equality {
            out.push(self.equality_keyword(value));
        }
        if let (Some(max), Value::Text(s)) = (self.prefix, value) {
            let mut prefix = String::new();
            for c in s.chars().take(max) {
                prefix.push(c);
                out.push(self.prefix_keyword(&prefix));
            }
        }
    }
}

/// A table's schema.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Schema {
    /// The field whose value names a record (a record with the same key
    /// replaces the old one); without it records are named by their
    /// position in the file they were imported from.
    pub key: Option<String>,
    /// The keyword scheme of the equality and prefix fields.
    pub equality: Binding,
    /// Cell texts read as "no value".
    pub nulls: Vec<String>,
    /// The fields, in the order written.
    pub fields: Vec<Field>,
    /// A group of fields whose equality predicates are answered together,
    /// and verified, by a conjunctive scheme (SI-SSE-RV).
    pub verified: Option<VerifiedGroup>,
    /// The schema opts in to insecure schemes (benchmark baselines such as
    /// `bplus-plain`, which hand the server values and records in the
    /// clear); without it they are refused. `table show` and `--explain`
    /// say INSECURE for such a table.
    pub insecure: bool,
}

/// A verified group: fields and the conjunctive scheme that answers
/// conjunctions of equalities over them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifiedGroup {
    /// The fields, in the group's order.
    pub fields: Vec<String>,
    /// The conjunctive scheme (default [`DEFAULT_VERIFIED`]).
    pub binding: Binding,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSchema {
    key: Option<String>,
    equality: Option<RawBinding>,
    nulls: Option<Vec<String>>,
    fields: toml::map::Map<String, toml::Value>,
    verified: Option<RawVerified>,
    insecure: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawVerified {
    fields: Vec<String>,
    scheme: Option<RawBinding>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawBinding {
    Name(String),
    Full {
        scheme: String,
        #[serde(default)]
        params: toml::map::Map<String, toml::Value>,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawField {
    #[serde(rename = "type")]
    ty: String,
    #[serde(default)]
    index: Vec<String>,
    scale: Option<u32>,
    range: Option<RawBinding>,
    bits: Option<u32>,
    prefix_max: Option<usize>,
}

impl RawBinding {
    fn resolve(self, what: &str) -> Result<Binding> {
        match self {
            RawBinding::Name(scheme) => Ok(Binding::new(&scheme)),
            RawBinding::Full { scheme, params } => {
                let mut parts = Vec::new();
                for (k, v) in params {
                    let v = match v {
                        toml::Value::String(s) => s,
                        toml::Value::Integer(i) => i.to_string(),
                        toml::Value::Float(f) => f.to_string(),
                        toml::Value::Boolean(b) => b.to_string(),
                        _ => {
                            return Err(ClientError::InvalidArgument(format!(
                                "{what}: parameter {k:?} must be a string, number or boolean"
                            )))
                        }
                    };
                    parts.push(format!("{k}={v}"));
                }
                Ok(Binding {
                    scheme,
                    params: parts.join(","),
                })
            }
        }
    }
}

fn valid_field_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name.len() <= 64
        && !["and", "or", "between", "like"].contains(&name.to_ascii_lowercase().as_str())
}

impl Schema {
    /// Parses a schema from TOML text and checks it (names, types, query
    /// kinds, that every scheme named exists in the registry and is of
    /// the right family). The schemes' parameters are checked when the
    /// table is created.
    pub fn from_toml(text: &str) -> Result<Schema> {
        let raw: RawSchema = toml::from_str(text)
            .map_err(|e| ClientError::InvalidArgument(format!("schema: {}", e.message())))?;
        let equality = match raw.equality {
            Some(b) => b.resolve("equality")?,
            None => Binding::new(DEFAULT_EQUALITY),
        };
        let mut fields = Vec::new();
        for (name, value) in raw.fields {
            if !valid_field_name(&name) {
                return Err(ClientError::InvalidArgument(format!(
                    "schema: field name {name:?} must be a letter or _ then letters, digits \
                     or _ (at most 64, not and/or/between/like)"
                )));
            }
            let f: RawField = value.try_into().map_err(|e: toml::de::Error| {
                ClientError::InvalidArgument(format!("schema: field {name:?}: {}", e.message()))
            })?;
            fields.push(Self::read_field(name, f)?);
        }
        let verified = match raw.verified {
            Some(g) => Some(VerifiedGroup {
                fields: g.fields,
                binding: match g.scheme {
                    Some(b) => b.resolve("verified")?,
                    None => Binding::new(DEFAULT_VERIFIED),
                },
            }),
            None => None,
        };
        if let Some(g) = &verified {
            for f in fields.iter_mut() {
                f.verified = g.fields.contains(&f.name);
            }
        }
        let schema = Schema {
            key: raw.key,
            equality,
            nulls: raw.nulls.unwrap_or_else(|| vec![String::new()]),
            fields,
            verified,
            insecure: raw.insecure.unwrap_or(false),
        };
        schema.check()?;
        Ok(schema)
    }

    fn read_field(name: String, f: RawField) -> Result<Field> {
        let bad =
            |why: String| ClientError::InvalidArgument(format!("schema: field {name:?}: {why}"));
        let ty = match (f.ty.as_str(), f.scale) {
            ("integer", None) => FieldType::Integer,
            ("timestamp", None) => FieldType::Timestamp,
            ("string", None) => FieldType::String,
            ("decimal", Some(scale)) if scale <= 18 => FieldType::Decimal { scale },
            ("decimal", _) => return Err(bad("a decimal needs `scale`, 0 to 18".into())),
            ("integer" | "timestamp" | "string", Some(_)) => {
                return Err(bad("only a decimal has a `scale`".into()))
            }
            (other, _) => {
                return Err(bad(format!(
                    "type {other:?} is not one of integer, timestamp, decimal, string"
                )))
            }
        };
        let kinds: BTreeSet<&str> = f.index.iter().map(String::as_str).collect();
        for k in &kinds {
            if !["equality", "range", "prefix"].contains(k) {
                return Err(bad(format!(
                    "index kind {k:?} is not one of equality, range, prefix"
                )));
            }
        }
        let wants_range = kinds.contains("range");
        if !wants_range && (f.range.is_some() || f.bits.is_some()) {
            return Err(bad("`range` and `bits` need \"range\" in `index`".into()));
        }
        if wants_range && ty == FieldType::String {
            return Err(bad(
                "a string has no order-preserving encoding here: index it by equality or prefix"
                    .into(),
            ));
        }
        let wants_prefix = kinds.contains("prefix");
        if wants_prefix && ty != FieldType::String {
            return Err(bad("only a string answers prefix queries".into()));
        }
        if !wants_prefix && f.prefix_max.is_some() {
            return Err(bad("`prefix_max` needs \"prefix\" in `index`".into()));
        }
        let bits = f.bits.unwrap_or(if ty == FieldType::Timestamp {
            DEFAULT_TIMESTAMP_BITS
        } else {
            DEFAULT_BITS
        });
        if !(2..=64).contains(&bits) {
            return Err(bad(format!("`bits` must be 2 to 64, not {bits}")));
        }
        let range = if wants_range {
            Some(match f.range {
                Some(b) => b.resolve(&format!("field {name:?}"))?,
                None => Binding::new(DEFAULT_RANGE),
            })
        } else {
            None
        };
        let prefix = if wants_prefix {
            let max = f.prefix_max.unwrap_or(DEFAULT_PREFIX_MAX);
            if !(1..=64).contains(&max) {
                return Err(bad(format!("`prefix_max` must be 1 to 64, not {max}")));
            }
            Some(max)
        } else {
            None
        };
        Ok(Field {
            name,
            ty,
            equality: kinds.contains("equality"),
            prefix,
            range,
            bits,
            verified: false,
        })
    }

    /// Checks what a schema read from anywhere must hold.
    pub fn check(&self) -> Result<()> {
        let bad = |why: String| ClientError::InvalidArgument(format!("schema: {why}"));
        if self.fields.is_empty() {
            return Err(bad(
                "a table needs at least one field ([fields.NAME])".into()
            ));
        }
        if self.fields.len() > MAX_FIELDS {
            return Err(bad(format!("at most {MAX_FIELDS} fields")));
        }
        if let Some(key) = &self.key {
            if self.field(key).is_none() {
                return Err(bad(format!("the key {key:?} is not a field")));
            }
        }
        let keyword = sesame_schemes::get(&self.equality.scheme);
        match keyword {
            Some(sesame_schemes::Scheme::Keyword(_)) => {}
            Some(other) => {
                return Err(bad(format!(
                    "equality scheme {:?} is a {} scheme, not a keyword scheme",
                    self.equality.scheme,
                    other.family()
                )))
            }
            None => {
                return Err(bad(format!(
                    "equality scheme {:?} is not in the registry (see `sesame schemes`)",
                    self.equality.scheme
                )))
            }
        }
        if let Some(g) = &self.verified {
            if g.fields.is_empty() {
                return Err(bad("[verified] needs at least one field".into()));
            }
            let mut seen = BTreeSet::new();
            for name in &g.fields {
                if !seen.insert(name) {
                    return Err(bad(format!("[verified] names {name:?} twice")));
                }
                if self.field(name).is_none() {
                    return Err(bad(format!("[verified] field {name:?} is not a field")));
                }
            }
            match sesame_schemes::get(&g.binding.scheme) {
                Some(sesame_schemes::Scheme::Conjunctive(e))
                    if e.descriptor.supports(QueryKind::Verifiable) => {}
                Some(sesame_schemes::Scheme::Conjunctive(_)) => {
                    return Err(bad(format!(
                        "[verified] scheme {:?} returns no proof, so the client could not \
                         verify its answers; use a conjunctive scheme whose answers are \
                         verified ({})",
                        g.binding.scheme,
                        verifiable_conjunctive().join(", ")
                    )))
                }
                Some(other) => {
                    return Err(bad(format!(
                        "[verified] scheme {:?} is a {} scheme, not a conjunctive scheme",
                        g.binding.scheme,
                        other.family()
                    )))
                }
                None => {
                    return Err(bad(format!(
                        "[verified] scheme {:?} is not in the registry (see `sesame schemes`)",
                        g.binding.scheme
                    )))
                }
            }
        }
        if !self.insecure {
            if let Some(name) = self.insecure_schemes().first() {
                return Err(bad(format!(
                    "{name:?} is an INSECURE baseline kept for benchmarks (the server would \
                     see values or records in the clear); choose a real scheme (see \
                     `sesame schemes`), or write `insecure = true` at the top of the schema \
                     to measure it anyway"
                )));
            }
        }
        for f in &self.fields {
            if let Some(b) = &f.range {
                match sesame_schemes::get(&b.scheme) {
                    Some(sesame_schemes::Scheme::Range(_)) => {}
                    Some(other) => {
                        return Err(bad(format!(
                            "field {:?}: {:?} is a {} scheme, not a range protocol",
                            f.name,
                            b.scheme,
                            other.family()
                        )))
                    }
                    None => {
                        return Err(bad(format!(
                            "field {:?}: range protocol {:?} is not in the registry \
                             (see `sesame schemes`)",
                            f.name, b.scheme
                        )))
                    }
                }
            }
        }
        Ok(())
    }

    /// The insecure schemes the schema names (benchmark baselines: a name
    /// with `plain` or `insecure` in it, or a registry entry that says
    /// INSECURE), in schema order.
    pub fn insecure_schemes(&self) -> Vec<String> {
        let mut names = vec![&self.equality.scheme];
        names.extend(
            self.fields
                .iter()
                .filter_map(|f| f.range.as_ref().map(|b| &b.scheme)),
        );
        names.extend(self.verified.as_ref().map(|g| &g.binding.scheme));
        let mut out: Vec<String> = Vec::new();
        for name in names {
            if is_insecure_scheme(name) && !out.contains(name) {
                out.push(name.clone());
            }
        }
        out
    }

    /// The field named `name`.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// The keywords of a record (its values, in field order).
    pub fn keywords(&self, values: &[Option<Value>]) -> Vec<String> {
        let mut out = Vec::new();
        for (f, v) in self.fields.iter().zip(values) {
            if let Some(v) = v {
                f.keywords(v, &mut out);
            }
        }
        out.sort();
        out.dedup();
        out
    }

    /// The most keywords a record gives the keyword index: one per
    /// equality field, plus `prefix_max` per prefix field. Records of a
    /// table with an incarnation are padded to it (module `padding`).
    pub fn keyword_slots(&self) -> usize {
        self.fields
            .iter()
            .map(|f| usize::from(f.equality) + f.prefix.unwrap_or(0))
            .sum()
    }

    /// The position of field `name` in the verified group.
    pub fn group_position(&self, name: &str) -> Option<u32> {
        self.verified
            .as_ref()
            .and_then(|g| g.fields.iter().position(|f| f == name))
            .and_then(|p| u32::try_from(p).ok())
    }

    /// Whether any field is answered by the keyword index.
    pub fn has_keywords(&self) -> bool {
        self.fields.iter().any(|f| f.equality || f.prefix.is_some())
    }
}

/// Whether scheme `name` is an insecure baseline: its name says `plain`
/// or `insecure`, or its registry entry says INSECURE.
pub fn is_insecure_scheme(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower.contains("plain")
        || lower.contains("insecure")
        || sesame_schemes::get(name).is_some_and(|s| {
            let d = s.descriptor();
            d.title.contains("INSECURE") || d.leakage.contains("INSECURE")
        })
}

/// The conjunctive schemes of the registry whose answers the client
/// verifies.
pub fn verifiable_conjunctive() -> Vec<&'static str> {
    sesame_sse::conjunctive::entries()
        .into_iter()
        .filter(|e| e.descriptor.supports(QueryKind::Verifiable))
        .map(|e| e.descriptor.name)
        .collect()
}

/// Parses `-?digits(.digits)?` into units of `10^-scale`; `None` when it
/// is not such a number, has more digits after the point than `scale`, or
/// does not fit 64 bits.
fn parse_decimal(text: &str, scale: u32) -> Option<i64> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let (whole, frac) = match digits.split_once('.') {
        Some((w, f)) => (w, f),
        None => (digits, ""),
    };
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() && frac.is_empty()
        || !all_digits(whole)
        || !all_digits(frac)
        || frac.len() > scale as usize
        || (digits.contains('.') && frac.is_empty())
    {
        return None;
    }
    let mut v: i128 = 0;
    for b in whole.bytes().chain(frac.bytes()) {
        v = v.checked_mul(10)?.checked_add(i128::from(b - b'0'))?;
        if v > i128::from(i64::MAX) + 1 {
            return None;
        }
    }
    for _ in frac.len()..scale as usize {
        v = v.checked_mul(10)?;
    }
    let v = if negative { -v } else { v };
    i64::try_from(v).ok()
}

fn format_decimal(v: i64, scale: u32) -> String {
    if scale == 0 {
        return v.to_string();
    }
    let unit = 10u128.pow(scale);
    let abs = i128::from(v).unsigned_abs();
    let sign = if v < 0 { "-" } else { "" };
    format!(
        "{sign}{}.{:0width$}",
        abs / unit,
        abs % unit,
        width = scale as usize
    )
}

/// Days since 1970-01-01 of a date of the proleptic Gregorian calendar.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day counted from 1970-01-01.
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn days_in_month(year: i64, month: i64) -> i64 {
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Parses `YYYY-MM-DD`, `YYYY-MM-DDTHH:MM[:SS]` (or with a space), with
/// an optional `Z` or `±HH:MM` offset (none: UTC), into seconds since
/// 1970. Fractions of a second are refused.
fn parse_timestamp(text: &str) -> Option<i64> {
    let num = |s: &str, len: usize| -> Option<i64> {
        (s.len() == len && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
    };
    let (date, time) = match text.find(['T', 't', ' ']) {
        Some(i) => (text.get(..i)?, Some(text.get(i + 1..)?)),
        None => (text, None),
    };
    let mut parts = date.split('-');
    let year = num(parts.next()?, 4)?;
    let month = num(parts.next()?, 2)?;
    let day = num(parts.next()?, 2)?;
    if parts.next().is_some() || !(1..=12).contains(&month) {
        return None;
    }
    if day < 1 || day > days_in_month(year, month) {
        return None;
    }
    let mut seconds = days_from_civil(year, month, day) * 86_400;
    if let Some(time) = time {
        let (clock, offset) = if let Some(c) = time.strip_suffix(['Z', 'z']) {
            (c, 0)
        } else if let Some(i) = time.rfind(['+', '-']) {
            let (c, o) = (time.get(..i)?, time.get(i..)?);
            let sign = if o.starts_with('-') { -1 } else { 1 };
            let (h, m) = o.get(1..)?.split_once(':')?;
            let (h, m) = (num(h, 2)?, num(m, 2)?);
            if h > 23 || m > 59 {
                return None;
            }
            (c, sign * (h * 3600 + m * 60))
        } else {
            (time, 0)
        };
        let mut hms = clock.split(':');
        let h = num(hms.next()?, 2)?;
        let m = num(hms.next()?, 2)?;
        let s = match hms.next() {
            Some(s) => num(s, 2)?,
            None => 0,
        };
        if hms.next().is_some() || h > 23 || m > 59 || s > 60 {
            return None;
        }
        seconds += h * 3600 + m * 60 + s - offset;
    }
    Some(seconds)
}

/// `seconds` since 1970-01-01 (UTC) as `YYYY-MM-DDTHH:MM:SSZ`, as a
/// timestamp field displays it.
pub fn format_timestamp(seconds: i64) -> String {
    let days = seconds.div_euclid(86_400);
    let rest = seconds.rem_euclid(86_400);
    let (y, mo, d) = civil_from_days(days);
    format!(
        "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const FLIGHTS: &str = r#"
nulls = ["", "NA"]
[fields.carrier]
type = "string"
index = ["equality"]
[fields.dest]
type = "string"
index = ["equality", "prefix"]
prefix_max = 3
[fields.dep_delay]
type = "integer"
index = ["range"]
bits = 16
[fields.air_time]
type = "decimal"
scale = 1
index = ["range"]
range = { scheme = "log-brc-2lev" }
[fields.time_hour]
type = "timestamp"
index = ["range", "equality"]
range = "pope"
"#;

    fn schema() -> Schema {
        Schema::from_toml(FLIGHTS).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_schema_keeps_field_order_kinds_and_bindings() {
        let s = schema();
        let names: Vec<&str> = s.fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            ["carrier", "dest", "dep_delay", "air_time", "time_hour"]
        );
        assert_eq!(s.equality.scheme, DEFAULT_EQUALITY);
        let dest = s.field("dest").unwrap_or_else(|| unreachable!());
        assert!(dest.equality);
        assert_eq!(dest.prefix, Some(3));
        let delay = s.field("dep_delay").unwrap_or_else(|| unreachable!());
        assert_eq!(
            delay.range.as_ref().map(|b| b.scheme.as_str()),
            Some(DEFAULT_RANGE)
        );
        assert_eq!(delay.bits, 16);
        let air = s.field("air_time").unwrap_or_else(|| unreachable!());
        assert_eq!(air.ty, FieldType::Decimal { scale: 1 });
        assert_eq!(
            air.range.as_ref().map(|b| b.scheme.as_str()),
            Some("log-brc-2lev")
        );
        let th = s.field("time_hour").unwrap_or_else(|| unreachable!());
        assert_eq!(th.bits, DEFAULT_TIMESTAMP_BITS);
        assert!(th.equality);
    }

    #[test]
    fn bad_schemas_say_what_is_wrong() {
        let cases = [
            ("[fields.a]\ntype = \"float\"", "not one of integer"),
            ("[fields.a]\ntype = \"decimal\"", "needs `scale`"),
            (
                "[fields.a]\ntype = \"string\"\nindex = [\"range\"]",
                "no order-preserving",
            ),
            (
                "[fields.a]\ntype = \"integer\"\nindex = [\"prefix\"]",
                "only a string",
            ),
            (
                "[fields.a]\ntype = \"integer\"\nindex = [\"range\"]\nrange = \"fast\"",
                "not a range protocol",
            ),
            (
                "[fields.a]\ntype = \"integer\"\nindex = [\"range\"]\nrange = \"nope\"",
                "not in the registry",
            ),
            (
                "equality = \"pope\"\n[fields.a]\ntype = \"integer\"",
                "not a keyword scheme",
            ),
            (
                "key = \"b\"\n[fields.a]\ntype = \"integer\"",
                "is not a field",
            ),
            ("[fields.and]\ntype = \"integer\"", "field name"),
            (
                "[fields.a]\ntype = \"integer\"\nindex = [\"range\"]\nbits = 65",
                "2 to 64",
            ),
            (
                "[fields.a]\ntype = \"integer\"\ncolour = 1",
                "unknown field",
            ),
            ("fields = {}", "at least one field"),
            ("[fields.a\n", "schema"),
        ];
        for (text, want) in cases {
            let e = Schema::from_toml(text).map(drop).unwrap_err().to_string();
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn values_parse_display_and_encode_in_order() {
        let s = schema();
        let air = s.field("air_time").unwrap_or_else(|| unreachable!());
        assert_eq!(air.parse_literal("12.5").ok(), Some(Value::Int(125)));
        assert_eq!(air.parse_literal("-3").ok(), Some(Value::Int(-30)));
        assert!(air.parse_literal("1.25").is_err());
        assert!(air.parse_literal("1.").is_err());
        assert_eq!(air.display(&Value::Int(-5)), "-0.5");
        let th = s.field("time_hour").unwrap_or_else(|| unreachable!());
        let t = th.parse_literal("2013-01-01T10:00:00Z").ok();
        assert_eq!(t, Some(Value::Int(1_357_034_400)));
        assert_eq!(th.parse_literal("2013-01-01T12:00:00+02:00").ok(), t);
        assert_eq!(th.parse_literal("1357034400").ok(), t);
        assert!(th.parse_literal("2013-02-29").is_err());
        assert_eq!(
            th.display(&Value::Int(1_357_034_400)),
            "2013-01-01T10:00:00Z"
        );
        assert_eq!(th.display(&Value::Int(-1)), "1969-12-31T23:59:59Z");
        let delay = s.field("dep_delay").unwrap_or_else(|| unreachable!());
        assert_eq!(delay.limits(), (-32768, 32767));
        let mut last = None;
        for v in [-32768i64, -5, 0, 7, 32767] {
            let e = delay
                .encode(&Value::Int(v))
                .unwrap_or_else(|e| panic!("{e}"));
            assert!(e < 1 << 16);
            assert!(last.is_none_or(|l| l < e));
            last = Some(e);
        }
        let e = delay.encode(&Value::Int(40_000)).unwrap_err().to_string();
        assert!(e.contains("outside") && e.contains("bits"), "{e}");
        assert_eq!(delay.parse("NA", &s.nulls).ok(), Some(None));
    }

    #[test]
    fn timestamps_round_trip_over_centuries() {
        for t in [
            -62_135_596_800i64,
            -1,
            0,
            951_782_400,
            1_357_034_400,
            4_102_444_799,
        ] {
            let text = format_timestamp(t);
            assert_eq!(parse_timestamp(&text), Some(t), "{text}");
        }
    }

    #[test]
    fn keywords_cover_equality_and_prefixes() {
        let s = schema();
        let values = vec![
            Some(Value::Text("UA".into())),
            Some(Value::Text("SFO".into())),
            Some(Value::Int(3)),
            None,
            Some(Value::Int(10)),
        ];
        assert_eq!(
            s.keywords(&values),
            [
                "carrier=UA",
                "dest=SFO",
                "dest^S",
                "dest^SF",
                "dest^SFO",
                "time_hour=10"
            ]
        );
    }
}
