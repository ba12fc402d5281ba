//! SQL values and column types: how a table's fields appear to a
//! PostgreSQL client (integer → int8, decimal → numeric, timestamp →
//! timestamptz, string → text), and how values are compared, sorted and
//! written into result rows.

use std::cmp::Ordering;

use pgwire::api::results::{DataRowEncoder, FieldFormat};
use pgwire::api::Type;
use pgwire::error::PgWireResult;
use pgwire::types::format::FormatOptions;
use rust_decimal::Decimal;
use sesame_client::table::{Field, FieldType, Value};

/// The type of a result column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ColType {
    /// `int8`
    Int,
    /// `numeric`
    Numeric,
    /// `timestamptz`
    Timestamp,
    /// `text`
    Text,
    /// `bool`
    Bool,
    /// `float8`
    Float,
    /// `oid` (catalog columns)
    Oid,
}

impl ColType {
    /// The PostgreSQL type.
    pub(crate) fn pg(self) -> Type {
        match self {
            ColType::Int => Type::INT8,
            ColType::Numeric => Type::NUMERIC,
            ColType::Timestamp => Type::TIMESTAMPTZ,
            ColType::Text => Type::TEXT,
            ColType::Bool => Type::BOOL,
            ColType::Float => Type::FLOAT8,
            ColType::Oid => Type::OID,
        }
    }

    /// The column type of a table's field.
    pub(crate) fn of(field: &Field) -> ColType {
        match field.ty {
            FieldType::Integer => ColType::Int,
            FieldType::Decimal { .. } => ColType::Numeric,
            FieldType::Timestamp => ColType::Timestamp,
            FieldType::String => ColType::Text,
        }
    }

    /// The name `format_type` and `information_schema` give it.
    pub(crate) fn sql_name(self) -> &'static str {
        match self {
            ColType::Int => "bigint",
            ColType::Numeric => "numeric",
            ColType::Timestamp => "timestamp with time zone",
            ColType::Text => "text",
            ColType::Bool => "boolean",
            ColType::Float => "double precision",
            ColType::Oid => "oid",
        }
    }
}

/// A SQL value.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Datum {
    /// `NULL`
    Null,
    /// An integer.
    Int(i64),
    /// An exact decimal.
    Numeric(Decimal),
    /// Seconds since 1970-01-01T00:00:00Z.
    Timestamp(i64),
    /// Text.
    Text(String),
    /// A boolean.
    Bool(bool),
    /// A float.
    Float(f64),
}

impl Datum {
    /// A record's value of `field`.
    pub(crate) fn of(field: &Field, value: Option<&Value>) -> Datum {
        match (field.ty, value) {
            (_, None) => Datum::Null,
            (_, Some(Value::Text(s))) => Datum::Text(s.clone()),
            (FieldType::Decimal { scale }, Some(Value::Int(v))) => {
                Datum::Numeric(Decimal::new(*v, scale.min(28)))
            }
            (FieldType::Timestamp, Some(Value::Int(v))) => Datum::Timestamp(*v),
            (_, Some(Value::Int(v))) => Datum::Int(*v),
        }
    }

    /// As [`Datum::of`], taking the value (a string is moved, not
    /// copied).
    pub(crate) fn of_owned(field: &Field, value: Option<Value>) -> Datum {
        match value {
            Some(Value::Text(s)) => Datum::Text(s),
            other => Datum::of(field, other.as_ref()),
        }
    }

    /// Whether it is `NULL`.
    pub(crate) fn is_null(&self) -> bool {
        matches!(self, Datum::Null)
    }

    /// As a decimal, when it is a number.
    pub(crate) fn decimal(&self) -> Option<Decimal> {
        match self {
            Datum::Int(i) => Some(Decimal::from(*i)),
            Datum::Numeric(d) => Some(*d),
            Datum::Timestamp(t) => Some(Decimal::from(*t)),
            Datum::Float(f) => Decimal::try_from(*f).ok(),
            _ => None,
        }
    }

    /// The text a query of the table's language is given for this value
    /// on a field of type `ty`: numbers as written, timestamps as seconds.
    pub(crate) fn literal_text(&self) -> Option<String> {
        match self {
            Datum::Null => None,
            Datum::Int(i) | Datum::Timestamp(i) => Some(i.to_string()),
            Datum::Numeric(d) => Some(d.normalize().to_string()),
            Datum::Text(s) => Some(s.clone()),
            Datum::Bool(b) => Some(b.to_string()),
            Datum::Float(f) => Some(f.to_string()),
        }
    }

    /// The value as text (the text format of a result cell).
    pub(crate) fn text(&self) -> Option<String> {
        match self {
            Datum::Null => None,
            Datum::Timestamp(t) => Some(format_timestamp(*t)),
            Datum::Bool(b) => Some(if *b { "t" } else { "f" }.into()),
            other => other.literal_text(),
        }
    }

    /// SQL comparison: `None` when either side is `NULL` or the two do
    /// not compare.
    pub(crate) fn compare(&self, other: &Datum) -> Option<Ordering> {
        match (self, other) {
            (Datum::Null, _) | (_, Datum::Null) => None,
            (Datum::Text(a), Datum::Text(b)) => Some(a.cmp(b)),
            (Datum::Bool(a), Datum::Bool(b)) => Some(a.cmp(b)),
            (Datum::Int(a), Datum::Int(b)) => Some(a.cmp(b)),
            (Datum::Timestamp(a), Datum::Timestamp(b)) => Some(a.cmp(b)),
            (Datum::Float(a), b) => b.float().and_then(|b| a.partial_cmp(&b)),
            (a, Datum::Float(b)) => a.float().and_then(|a| a.partial_cmp(b)),
            (a, b) => Some(a.decimal()?.cmp(&b.decimal()?)),
        }
    }

    fn float(&self) -> Option<f64> {
        match self {
            Datum::Float(f) => Some(*f),
            Datum::Int(i) | Datum::Timestamp(i) => Some(*i as f64),
            Datum::Numeric(d) => d.to_string().parse().ok(),
            _ => None,
        }
    }

    /// The order of `ORDER BY`: `NULL` sorts after every value (as in
    /// PostgreSQL's default `NULLS LAST` for ascending order).
    pub(crate) fn sort_cmp(&self, other: &Datum) -> Ordering {
        match (self.is_null(), other.is_null()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            _ => self.compare(other).unwrap_or(Ordering::Equal),
        }
    }

    /// A key that groups equal values together (`GROUP BY`, `DISTINCT`).
    pub(crate) fn group_key(&self) -> String {
        match self {
            Datum::Null => "\0null".into(),
            Datum::Numeric(d) => format!("n{}", d.normalize()),
            Datum::Int(i) => format!("n{i}"),
            other => format!("{other:?}"),
        }
    }

    /// Writes the value into a result row as column type `ty`.
    pub(crate) fn encode(
        &self,
        ty: ColType,
        format: FieldFormat,
        enc: &mut DataRowEncoder,
    ) -> PgWireResult<()> {
        match (self, ty) {
            (Datum::Null, _) => enc.encode_field(&None::<i64>),
            (d, ColType::Int) => match d {
                Datum::Int(i) | Datum::Timestamp(i) => enc.encode_field(i),
                other => enc.encode_field(&other.decimal().and_then(|d| i64::try_from(d).ok())),
            },
            (d, ColType::Oid) => match d {
                Datum::Int(i) => enc.encode_field(&u32::try_from(*i).ok()),
                _ => enc.encode_field(&None::<u32>),
            },
            (d, ColType::Numeric) => enc.encode_field(&d.decimal()),
            // Text: as PostgreSQL writes it; binary: microseconds since
            // 2000-01-01 (the wire form of timestamptz).
            (Datum::Timestamp(t), ColType::Timestamp) => match format {
                FieldFormat::Text => enc.encode_field_with_type_and_format(
                    &TimestampText::of(*t).as_str(),
                    &Type::TEXT,
                    FieldFormat::Text,
                    &FormatOptions::default(),
                ),
                FieldFormat::Binary => enc.encode_field_with_type_and_format(
                    &t.saturating_sub(PG_EPOCH).saturating_mul(1_000_000),
                    &Type::INT8,
                    FieldFormat::Binary,
                    &FormatOptions::default(),
                ),
            },
            (Datum::Bool(b), ColType::Bool) => enc.encode_field(b),
            // Written from the value itself, not a copy.
            (Datum::Text(s), ColType::Text) => enc.encode_field(&s.as_str()),
            (d, ColType::Float) => enc.encode_field(&d.float()),
            (d, _) => enc.encode_field(&d.text()),
        }
    }
}

/// 2000-01-01T00:00:00Z in seconds since 1970.
const PG_EPOCH: i64 = 946_684_800;

/// A timestamp as PostgreSQL writes a `timestamptz` in UTC
/// (`2013-01-01 05:00:00+00`).
pub(crate) fn format_timestamp(secs: i64) -> String {
    TimestampText::of(secs).as_str().to_owned()
}

/// [`format_timestamp`]'s text, written into a buffer of its own (no
/// allocation per value for a year of four digits, the common case).
pub(crate) enum TimestampText {
    /// `YYYY-MM-DD HH:MM:SS+00`.
    Short([u8; 22]),
    /// Any other year.
    Long(String),
}

impl TimestampText {
    pub(crate) fn of(secs: i64) -> Self {
        let days = secs.div_euclid(86_400);
        let rem = secs.rem_euclid(86_400);
        let (y, m, d) = civil_from_days(days);
        if !(0..=9999).contains(&y) {
            return TimestampText::Long(long_timestamp(secs));
        }
        let mut out = *b"0000-00-00 00:00:00+00";
        let mut put = |at: usize, v: i64, width: usize| {
            let mut v = v;
            for i in (0..width).rev() {
                // `v` is in 0..10^width: each digit is 0..=9.
                out[at + i] = b'0' + u8::try_from(v % 10).unwrap_or(0);
                v /= 10;
            }
        };
        put(0, y, 4);
        put(5, m, 2);
        put(8, d, 2);
        put(11, rem / 3600, 2);
        put(14, (rem / 60) % 60, 2);
        put(17, rem % 60, 2);
        TimestampText::Short(out)
    }

    pub(crate) fn as_str(&self) -> &str {
        match self {
            // Only ASCII digits and separators are written.
            TimestampText::Short(b) => std::str::from_utf8(b).unwrap_or_default(),
            TimestampText::Long(s) => s,
        }
    }
}

fn long_timestamp(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}+00",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian date (H. Hinnant's
/// algorithm).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_print_as_postgresql_does() {
        assert_eq!(format_timestamp(0), "1970-01-01 00:00:00+00");
        assert_eq!(format_timestamp(1_357_016_400), "2013-01-01 05:00:00+00");
        assert_eq!(format_timestamp(-1), "1969-12-31 23:59:59+00");
    }

    #[test]
    fn timestamps_written_in_place_read_as_formatted() {
        // Years 0 to 9999 are written digit by digit; others by `format!`.
        let edges = [
            -62_167_219_200, // 0000-01-01 00:00:00
            -62_167_219_201, // the second before: year -1
            253_402_300_799, // 9999-12-31 23:59:59
            253_402_300_800, // 10000-01-01
            951_782_400,     // 2000-02-29
            i64::MAX / 1_000_000,
            i64::MIN / 1_000_000,
        ];
        let mut x: i64 = 88_172_645_463_325_252;
        let drawn = (0..2000).map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % 400_000_000_000
        });
        for t in edges.into_iter().chain(drawn) {
            assert_eq!(TimestampText::of(t).as_str(), long_timestamp(t), "{t}");
        }
    }

    #[test]
    fn numbers_compare_across_types_and_null_compares_to_nothing() {
        let half = Datum::Numeric(Decimal::new(5, 1));
        assert_eq!(Datum::Int(1).compare(&half), Some(Ordering::Greater));
        assert_eq!(Datum::Null.compare(&Datum::Int(1)), None);
        assert_eq!(Datum::Null.sort_cmp(&Datum::Int(1)), Ordering::Greater);
    }
}
