//! The query language of encrypted tables, with a hand-written parser.
//!
//! A query is a boolean combination of predicates over a record's fields:
//!
//! ```text
//! expr      := or
//! or        := and ( "or" and )*
//! and       := atom ( "and" atom )*
//! atom      := "(" expr ")" | predicate
//! predicate := FIELD op
//! op        := "=" lit | "<" lit | "<=" lit | ">" lit | ">=" lit
//!            | "between" lit "and" lit          (both ends included)
//!            | "like" STRING                    (a prefix pattern: "abc*")
//!            | "is" "null"                      (the field has no value)
//!            | "is" "not" "null"                (the field has a value)
//! lit       := NUMBER | STRING
//! FIELD     := [A-Za-z_][A-Za-z0-9_]*
//! NUMBER    := -?[0-9]+(\.[0-9]+)?
//! STRING    := "..." where \" and \\ are the only escapes
//! ```
//!
//! - `and` binds tighter than `or`; both are left-associative, so
//!   `a = 1 or b = 2 or c = 3` is `(a = 1 or b = 2) or c = 3`.
//! - The `and` right after `between x` belongs to the `between`:
//!   `d between 1 and 5 and e = 2` is `(d between 1 and 5) and e = 2`.
//! - The keywords `and`, `or`, `between` and `like` are case-insensitive
//!   and cannot name a field (`is`, `not` and `null` are words only after
//!   a field, and may name one). Field names are case-sensitive.
//! - A `like` pattern ends with one `*`, has no other `*`, and has at
//!   least one character before it. [`Op::Like`] holds the prefix.
//! - Whitespace between tokens is free.
//!
//! Input is limited: at most [`MAX_QUERY_BYTES`] bytes,
//! [`MAX_PREDICATES`] predicates and [`MAX_DEPTH`] levels of
//! parentheses. Anything else is an error with a byte offset
//! ([`ParseError`]); no input makes the parser panic or overflow its
//! stack.
//!
//! [`Expr`] prints (with `Display`) in a canonical form that parses back
//! to the same tree.

use std::fmt;

/// The longest query accepted, in bytes.
pub const MAX_QUERY_BYTES: usize = 65_536;
/// The most predicates one query may hold.
pub const MAX_PREDICATES: usize = 256;
/// The deepest nesting of parentheses accepted.
pub const MAX_DEPTH: usize = 64;

/// The words that cannot name a field (compared case-insensitively).
const KEYWORDS: [&str; 4] = ["and", "or", "between", "like"];

/// A literal value in a predicate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Literal {
    /// A number, kept as written (for example `-2.5`).
    Number(String),
    /// A string, with its escapes removed.
    Text(String),
}

/// The comparison of a predicate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// `= v`
    Eq(Literal),
    /// `< v`
    Lt(Literal),
    /// `<= v`
    Le(Literal),
    /// `> v`
    Gt(Literal),
    /// `>= v`
    Ge(Literal),
    /// `between a and b`, both ends included.
    Between(Literal, Literal),
    /// `like "abc*"`: holds the prefix, without the `*`.
    Like(String),
    /// `is null`: the field has no value.
    IsNull,
    /// `is not null`: the field has a value.
    IsNotNull,
}

/// One comparison on one field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Predicate {
    /// The field's name, as written.
    pub field: String,
    /// The comparison.
    pub op: Op,
}

/// A parsed query.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expr {
    /// A single predicate.
    Pred(Predicate),
    /// Both sides match.
    And(Box<Expr>, Box<Expr>),
    /// Either side matches.
    Or(Box<Expr>, Box<Expr>),
}

/// Why a query does not parse, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// What was wrong, naming what was expected.
    pub message: String,
    /// Byte offset into the input where the problem is.
    pub offset: usize,
    /// 1-based line of `offset` (only shown when above 1).
    line: usize,
    /// 1-based character column of `offset` within its line.
    column: usize,
}

impl ParseError {
    /// Builds an error at `offset` of `input`, working out its line and
    /// column.
    fn new(input: &str, message: impl Into<String>, offset: usize) -> Self {
        let (line, column) = locate(input, offset);
        ParseError {
            message: message.into(),
            offset,
            line,
            column,
        }
    }

    /// The line of `input` holding the error, and under it a second line
    /// with a `^` below the offending column.
    #[must_use]
    pub fn caret(&self, input: &str) -> String {
        let end = char_floor(input, self.offset);
        let before = input.get(..end).unwrap_or("");
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let line_end = input
            .get(end..)
            .and_then(|rest| rest.find('\n'))
            .map_or(input.len(), |i| end + i);
        let line = input
            .get(line_start..line_end)
            .unwrap_or("")
            .trim_end_matches('\r');
        // Keep tabs as tabs so the caret lines up in a terminal.
        let pad: String = before
            .get(line_start..)
            .unwrap_or("")
            .chars()
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        format!("{line}\n{pad}^")
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 1 {
            write!(
                f,
                "{} at line {}, column {}",
                self.message, self.line, self.column
            )
        } else {
            write!(f, "{} at column {}", self.message, self.column)
        }
    }
}

impl std::error::Error for ParseError {}

/// The largest char boundary of `input` at or before `offset`.
fn char_floor(input: &str, offset: usize) -> usize {
    let mut end = offset.min(input.len());
    while end > 0 && !input.is_char_boundary(end) {
        end -= 1;
    }
    end
}

/// The 1-based line and character column of a byte offset.
fn locate(input: &str, offset: usize) -> (usize, usize) {
    let before = input.get(..char_floor(input, offset)).unwrap_or("");
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before.get(line_start..).unwrap_or("").chars().count() + 1;
    (line, column)
}

impl Expr {
    /// The predicates of the query, left to right.
    #[must_use]
    pub fn predicates(&self) -> Vec<&Predicate> {
        let mut out = Vec::new();
        let mut stack = vec![self];
        while let Some(e) = stack.pop() {
            match e {
                Expr::Pred(p) => out.push(p),
                Expr::And(a, b) | Expr::Or(a, b) => {
                    // Right first, so the left side is popped first.
                    stack.push(b);
                    stack.push(a);
                }
            }
        }
        out
    }
}

/// Writes a string literal, quoted and escaped.
fn write_quoted(f: &mut fmt::Formatter<'_>, s: &str) -> fmt::Result {
    f.write_str("\"")?;
    for c in s.chars() {
        if c == '"' || c == '\\' {
            f.write_str("\\")?;
        }
        write!(f, "{c}")?;
    }
    f.write_str("\"")
}

impl fmt::Display for Literal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Literal::Number(n) => f.write_str(n),
            Literal::Text(s) => write_quoted(f, s),
        }
    }
}

impl fmt::Display for Predicate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let field = &self.field;
        match &self.op {
            Op::Eq(v) => write!(f, "{field} = {v}"),
            Op::Lt(v) => write!(f, "{field} < {v}"),
            Op::Le(v) => write!(f, "{field} <= {v}"),
            Op::Gt(v) => write!(f, "{field} > {v}"),
            Op::Ge(v) => write!(f, "{field} >= {v}"),
            Op::Between(a, b) => write!(f, "{field} between {a} and {b}"),
            Op::Like(prefix) => {
                write!(f, "{field} like ")?;
                write_quoted(f, &format!("{prefix}*"))
            }
            Op::IsNull => write!(f, "{field} is null"),
            Op::IsNotNull => write!(f, "{field} is not null"),
        }
    }
}

/// Writes one side of an `and`/`or`, in parentheses when asked.
fn write_side(f: &mut fmt::Formatter<'_>, e: &Expr, wrap: bool) -> fmt::Result {
    if wrap {
        write!(f, "({e})")
    } else {
        write!(f, "{e}")
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A child of the other kind is always wrapped. A right child of
        // the same kind is wrapped too, since chains read left-associative.
        match self {
            Expr::Pred(p) => write!(f, "{p}"),
            Expr::And(a, b) => {
                write_side(f, a, matches!(**a, Expr::Or(..)))?;
                f.write_str(" and ")?;
                write_side(f, b, !matches!(**b, Expr::Pred(_)))
            }
            Expr::Or(a, b) => {
                write_side(f, a, matches!(**a, Expr::And(..)))?;
                f.write_str(" or ")?;
                write_side(f, b, !matches!(**b, Expr::Pred(_)))
            }
        }
    }
}

/// A comparison symbol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cmp {
    Eq,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Cmp {
    fn symbol(self) -> &'static str {
        match self {
            Cmp::Eq => "=",
            Cmp::Lt => "<",
            Cmp::Le => "<=",
            Cmp::Gt => ">",
            Cmp::Ge => ">=",
        }
    }
}

/// What the lexer produces.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Tok<'a> {
    Open,
    Close,
    Cmp(Cmp),
    /// A field name or a keyword.
    Word(&'a str),
    Number(&'a str),
    /// A string, unescaped.
    Str(String),
    End,
}

/// A token and the byte offset where it starts.
#[derive(Clone, Debug)]
struct Token<'a> {
    tok: Tok<'a>,
    offset: usize,
}

fn is_keyword(word: &str) -> bool {
    KEYWORDS.iter().any(|k| word.eq_ignore_ascii_case(k))
}

fn is_word(tok: &Tok<'_>, keyword: &str) -> bool {
    matches!(tok, Tok::Word(w) if w.eq_ignore_ascii_case(keyword))
}

/// Splits the input into tokens, one at a time, so that the first error
/// reported is the first one in the text.
struct Lexer<'a> {
    src: &'a str,
    pos: usize,
}

impl<'a> Lexer<'a> {
    fn error(&self, message: impl Into<String>, offset: usize) -> ParseError {
        ParseError::new(self.src, message, offset)
    }

    fn byte(&self, i: usize) -> Option<u8> {
        self.src.as_bytes().get(i).copied()
    }

    fn slice(&self, from: usize, to: usize) -> Result<&'a str, ParseError> {
        self.src
            .get(from..to)
            .ok_or_else(|| self.error("internal error: bad token bounds", from))
    }

    fn next_token(&mut self) -> Result<Token<'a>, ParseError> {
        let rest = self.src.get(self.pos..).unwrap_or("");
        let trimmed = rest.trim_start();
        self.pos += rest.len() - trimmed.len();
        let start = self.pos;
        let mut chars = trimmed.chars();
        let Some(c) = chars.next() else {
            return Ok(Token {
                tok: Tok::End,
                offset: start,
            });
        };
        let tok = match c {
            '(' => {
                self.pos += 1;
                Tok::Open
            }
            ')' => {
                self.pos += 1;
                Tok::Close
            }
            '=' => {
                self.pos += 1;
                Tok::Cmp(Cmp::Eq)
            }
            '<' | '>' => {
                let or_equal = chars.next() == Some('=');
                self.pos += if or_equal { 2 } else { 1 };
                Tok::Cmp(match (c, or_equal) {
                    ('<', false) => Cmp::Lt,
                    ('<', true) => Cmp::Le,
                    (_, false) => Cmp::Gt,
                    (_, true) => Cmp::Ge,
                })
            }
            '"' => Tok::Str(self.string(start)?),
            '-' | '0'..='9' => Tok::Number(self.number(start)?),
            c if c == '_' || c.is_ascii_alphabetic() => {
                let mut end = start;
                while self
                    .byte(end)
                    .is_some_and(|b| b == b'_' || b.is_ascii_alphanumeric())
                {
                    end += 1;
                }
                self.pos = end;
                Tok::Word(self.slice(start, end)?)
            }
            other => {
                return Err(self.error(
                    format!(
                    "expected a field name, a value, an operator or a parenthesis, found {other:?}"
                ),
                    start,
                ))
            }
        };
        Ok(Token { tok, offset: start })
    }

    /// Reads `-?[0-9]+(\.[0-9]+)?` starting at `start`.
    fn number(&mut self, start: usize) -> Result<&'a str, ParseError> {
        let digits = |from: usize| {
            let mut i = from;
            while self.byte(i).is_some_and(|b| b.is_ascii_digit()) {
                i += 1;
            }
            i
        };
        let mut i = start;
        if self.byte(i) == Some(b'-') {
            i += 1;
        }
        let end = digits(i);
        if end == i {
            return Err(self.error("expected a digit after \"-\"", i));
        }
        i = end;
        if self.byte(i) == Some(b'.') {
            i += 1;
            let end = digits(i);
            if end == i {
                return Err(self.error("expected a digit after the decimal point", i));
            }
            i = end;
        }
        // A number must end cleanly: no `1e5`, `1.2.3` or `1-2`.
        if let Some(c) = self.src.get(i..).and_then(|rest| rest.chars().next()) {
            if c.is_alphanumeric() || matches!(c, '_' | '.' | '-') {
                return Err(self.error(
                    format!("expected a digit or the end of the number, found {c:?}"),
                    i,
                ));
            }
        }
        self.pos = i;
        self.slice(start, i)
    }

    /// Reads a double-quoted string whose opening quote is at `start`.
    fn string(&mut self, start: usize) -> Result<String, ParseError> {
        let body_start = start + 1;
        let body = self.src.get(body_start..).unwrap_or("");
        let unterminated = || self.error("unterminated string: expected a closing '\"'", start);
        let mut out = String::new();
        let mut chars = body.char_indices();
        loop {
            match chars.next() {
                None => return Err(unterminated()),
                Some((i, '"')) => {
                    self.pos = body_start + i + 1;
                    return Ok(out);
                }
                Some((i, '\\')) => match chars.next() {
                    Some((_, c @ ('"' | '\\'))) => out.push(c),
                    Some((_, c)) => {
                        return Err(self.error(
                            format!("unknown escape \"\\{c}\": expected \\\" or \\\\"),
                            body_start + i,
                        ))
                    }
                    None => return Err(unterminated()),
                },
                Some((_, c)) => out.push(c),
            }
        }
    }
}

/// A recursive-descent parser over the lexer, with one token of
/// look-ahead.
struct Parser<'a> {
    lexer: Lexer<'a>,
    ahead: Option<Token<'a>>,
    predicates: usize,
}

impl<'a> Parser<'a> {
    fn error(&self, message: impl Into<String>, offset: usize) -> ParseError {
        self.lexer.error(message, offset)
    }

    fn peek(&mut self) -> Result<&Token<'a>, ParseError> {
        let token = match self.ahead.take() {
            Some(t) => t,
            None => self.lexer.next_token()?,
        };
        Ok(self.ahead.insert(token))
    }

    fn bump(&mut self) -> Result<Token<'a>, ParseError> {
        match self.ahead.take() {
            Some(t) => Ok(t),
            None => self.lexer.next_token(),
        }
    }

    /// Consumes the next token if it is the given keyword.
    fn eat_word(&mut self, keyword: &str) -> Result<bool, ParseError> {
        let found = is_word(&self.peek()?.tok, keyword);
        if found {
            self.bump()?;
        }
        Ok(found)
    }

    /// `or := and ( "or" and )*`; `depth` is the number of open
    /// parentheses around it.
    fn or(&mut self, depth: usize) -> Result<Expr, ParseError> {
        let mut left = self.and(depth)?;
        while self.eat_word("or")? {
            let right = self.and(depth)?;
            left = Expr::Or(Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    /// `and := atom ( "and" atom )*`
    fn and(&mut self, depth: usize) -> Result<Expr, ParseError> {
        let mut left = self.atom(depth)?;
        while self.eat_word("and")? {
            let right = self.atom(depth)?;
            left = Expr::And(Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    /// `atom := "(" expr ")" | FIELD op`
    fn atom(&mut self, depth: usize) -> Result<Expr, ParseError> {
        let t = self.bump()?;
        match t.tok {
            Tok::Open => {
                // Checked before descending, so the stack stays shallow.
                if depth >= MAX_DEPTH {
                    return Err(self.error(
                        format!("parentheses nested too deep: expected at most {MAX_DEPTH} levels"),
                        t.offset,
                    ));
                }
                let inner = self.or(depth + 1)?;
                let close = self.bump()?;
                if close.tok == Tok::Close {
                    Ok(inner)
                } else {
                    let (_, column) = locate(self.lexer.src, t.offset);
                    Err(self.error(
                        format!("expected \")\" to close the \"(\" at column {column}"),
                        close.offset,
                    ))
                }
            }
            Tok::Word(word) if !is_keyword(word) => {
                if self.predicates >= MAX_PREDICATES {
                    return Err(self.error(
                        format!("too many predicates: expected at most {MAX_PREDICATES}"),
                        t.offset,
                    ));
                }
                self.predicates += 1;
                let op = self.op(word)?;
                Ok(Expr::Pred(Predicate {
                    field: word.to_string(),
                    op,
                }))
            }
            Tok::Word(word) => Err(self.error(
                format!("expected a field name or \"(\", found the keyword \"{word}\""),
                t.offset,
            )),
            Tok::End => Err(self.error(
                "expected a field name or \"(\", found the end of the query",
                t.offset,
            )),
            _ => Err(self.error("expected a field name or \"(\"", t.offset)),
        }
    }

    /// The comparison after a field name.
    fn op(&mut self, field: &str) -> Result<Op, ParseError> {
        let t = self.bump()?;
        match t.tok {
            Tok::Cmp(cmp) => {
                let v = self.literal(cmp.symbol())?;
                Ok(match cmp {
                    Cmp::Eq => Op::Eq(v),
                    Cmp::Lt => Op::Lt(v),
                    Cmp::Le => Op::Le(v),
                    Cmp::Gt => Op::Gt(v),
                    Cmp::Ge => Op::Ge(v),
                })
            }
            Tok::Word(w) if w.eq_ignore_ascii_case("between") => {
                let low = self.literal("between")?;
                let t = self.bump()?;
                if !is_word(&t.tok, "and") {
                    return Err(self.error(
                        "expected \"and\" between the two bounds of \"between\"",
                        t.offset,
                    ));
                }
                let high = self.literal("between ... and")?;
                Ok(Op::Between(low, high))
            }
            Tok::Word(w) if w.eq_ignore_ascii_case("like") => {
                let t = self.bump()?;
                match t.tok {
                    Tok::Str(pattern) => self.like(pattern, t.offset),
                    _ => Err(self.error(
                        "expected a quoted pattern such as \"abc*\" after \"like\"",
                        t.offset,
                    )),
                }
            }
            Tok::Word(w) if w.eq_ignore_ascii_case("is") => {
                let t = self.bump()?;
                if is_word(&t.tok, "null") {
                    return Ok(Op::IsNull);
                }
                if !is_word(&t.tok, "not") {
                    return Err(self.error("expected \"null\" or \"not null\" after \"is\"", t.offset));
                }
                let t = self.bump()?;
                if is_word(&t.tok, "null") {
                    Ok(Op::IsNotNull)
                } else {
                    Err(self.error("expected \"null\" after \"is not\"", t.offset))
                }
            }
            _ => Err(self.error(
                format!(
                    "expected an operator (=, <, <=, >, >=, between, like, is null or is not null) after the field \"{field}\""
                ),
                t.offset,
            )),
        }
    }

    /// Checks a `like` pattern (whose string starts at `offset`) and
    /// returns its prefix.
    fn like(&self, mut pattern: String, offset: usize) -> Result<Op, ParseError> {
        if pattern == "*" {
            return Err(self.error(
                "expected at least one character before \"*\" in the like pattern",
                offset,
            ));
        }
        if pattern.pop() != Some('*') {
            return Err(self.error("expected the like pattern to end with \"*\"", offset));
        }
        if pattern.contains('*') {
            return Err(self.error(
                "expected only one \"*\", at the end of the like pattern",
                offset,
            ));
        }
        Ok(Op::Like(pattern))
    }

    /// A number or a string, after the word or symbol `after`.
    fn literal(&mut self, after: &str) -> Result<Literal, ParseError> {
        let t = self.bump()?;
        match t.tok {
            Tok::Number(n) => Ok(Literal::Number(n.to_string())),
            Tok::Str(s) => Ok(Literal::Text(s)),
            _ => Err(self.error(format!("expected a value after \"{after}\""), t.offset)),
        }
    }
}

/// Parses a query.
///
/// Errors name what was expected and carry the byte offset of the
/// problem; see [`ParseError::caret`] to show it.
///
/// # Errors
///
/// Any input outside the grammar or over the limits given in the module
/// documentation.
pub fn parse(input: &str) -> Result<Expr, ParseError> {
    if input.len() > MAX_QUERY_BYTES {
        return Err(ParseError::new(
            input,
            format!(
                "query too long ({} bytes): expected at most {MAX_QUERY_BYTES} bytes",
                input.len()
            ),
            char_floor(input, MAX_QUERY_BYTES),
        ));
    }
    if input.trim().is_empty() {
        return Err(ParseError::new(
            input,
            "empty query: expected a field name or \"(\"",
            0,
        ));
    }
    let mut parser = Parser {
        lexer: Lexer { src: input, pos: 0 },
        ahead: None,
        predicates: 0,
    };
    let expr = parser.or(0)?;
    let t = parser.bump()?;
    match t.tok {
        Tok::End => Ok(expr),
        Tok::Close => Err(parser.error(
            "unmatched \")\": expected \"and\", \"or\" or the end of the query",
            t.offset,
        )),
        _ => Err(parser.error("expected \"and\", \"or\" or the end of the query", t.offset)),
    }
}

#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pred(field: &str, op: Op) -> Expr {
        Expr::Pred(Predicate {
            field: field.to_string(),
            op,
        })
    }

    fn num(n: &str) -> Literal {
        Literal::Number(n.to_string())
    }

    fn text(s: &str) -> Literal {
        Literal::Text(s.to_string())
    }

    fn and(a: Expr, b: Expr) -> Expr {
        Expr::And(Box::new(a), Box::new(b))
    }

    fn or(a: Expr, b: Expr) -> Expr {
        Expr::Or(Box::new(a), Box::new(b))
    }

    fn eq(field: &str, v: Literal) -> Expr {
        pred(field, Op::Eq(v))
    }

    fn err(q: &str) -> ParseError {
        match parse(q) {
            Err(e) => e,
            Ok(e) => panic!("{q:?} parsed as {e:?}"),
        }
    }

    /// Asserts that `q` fails with a message containing `word`, and
    /// returns the error.
    fn fails(q: &str, word: &str) -> ParseError {
        let e = err(q);
        assert!(
            e.message.contains(word),
            "{q:?}: message {:?} lacks {word:?}",
            e.message
        );
        e
    }

    #[test]
    fn the_examples_parse() {
        assert_eq!(
            parse(r#"carrier = "UA" and dep_delay between 10 and 20"#),
            Ok(and(
                eq("carrier", text("UA")),
                pred("dep_delay", Op::Between(num("10"), num("20"))),
            ))
        );
        assert_eq!(
            parse(r#"origin = "JFK" and dest like "S*""#),
            Ok(and(
                eq("origin", text("JFK")),
                pred("dest", Op::Like("S".to_string())),
            ))
        );
        assert_eq!(
            parse("dep_time >= 1200"),
            Ok(pred("dep_time", Op::Ge(num("1200"))))
        );
        assert_eq!(
            parse(r#"(a = 1 or b < -2.5) and c like "x\"y*""#),
            Ok(and(
                or(eq("a", num("1")), pred("b", Op::Lt(num("-2.5")))),
                pred("c", Op::Like("x\"y".to_string())),
            ))
        );
    }

    #[test]
    fn every_operator_parses() {
        assert_eq!(parse("a<1"), Ok(pred("a", Op::Lt(num("1")))));
        assert_eq!(parse("a<=1"), Ok(pred("a", Op::Le(num("1")))));
        assert_eq!(parse("a>1"), Ok(pred("a", Op::Gt(num("1")))));
        assert_eq!(parse("a>=-0.50"), Ok(pred("a", Op::Ge(num("-0.50")))));
        assert_eq!(parse(r#"a="b\\c""#), Ok(eq("a", text("b\\c"))));
        assert_eq!(parse(r#"_x9 = """#), Ok(eq("_x9", text(""))));
        assert_eq!(
            parse("\n\t a \r\n between\t\"p\"and\"q\" "),
            Ok(pred("a", Op::Between(text("p"), text("q"))))
        );
        assert_eq!(parse("city IS Null"), Ok(pred("city", Op::IsNull)));
        assert_eq!(parse("is is null"), Ok(pred("is", Op::IsNull)));
        assert_eq!(fails("a is nul", "null").offset, 5);
        assert_eq!(parse("city is NOT null"), Ok(pred("city", Op::IsNotNull)));
        assert_eq!(parse("not is not null"), Ok(pred("not", Op::IsNotNull)));
        assert_eq!(fails("a is not nul", "after \"is not\"").offset, 9);
        assert_eq!(fails("a is not", "after \"is not\"").offset, 8);
    }

    #[test]
    fn and_binds_tighter_than_or() {
        let (a, b, c) = (eq("a", num("1")), eq("b", num("2")), eq("c", num("3")));
        assert_eq!(
            parse("a = 1 or b = 2 and c = 3"),
            Ok(or(a.clone(), and(b.clone(), c.clone())))
        );
        assert_eq!(
            parse("a = 1 and b = 2 or c = 3"),
            Ok(or(and(a.clone(), b.clone()), c.clone()))
        );
        assert_eq!(
            parse("(a = 1 or b = 2) and c = 3"),
            Ok(and(or(a.clone(), b.clone()), c.clone()))
        );
        assert_eq!(
            parse("a = 1 and (b = 2 or c = 3)"),
            Ok(and(a.clone(), or(b.clone(), c.clone())))
        );
        assert_eq!(parse("((a = 1))"), Ok(a));
    }

    #[test]
    fn chains_are_left_associative() {
        let (a, b, c) = (eq("a", num("1")), eq("b", num("2")), eq("c", num("3")));
        assert_eq!(
            parse("a = 1 or b = 2 or c = 3"),
            Ok(or(or(a.clone(), b.clone()), c.clone()))
        );
        assert_eq!(
            parse("a = 1 and b = 2 and c = 3"),
            Ok(and(and(a.clone(), b.clone()), c.clone()))
        );
        assert_eq!(parse("a = 1 or (b = 2 or c = 3)"), Ok(or(a, or(b, c))));
    }

    #[test]
    fn keywords_are_case_insensitive_fields_are_not() {
        assert_eq!(
            parse(r#"A = 1 AND a LIKE "x*" Or b BeTwEeN 1 aNd 2"#),
            Ok(or(
                and(eq("A", num("1")), pred("a", Op::Like("x".to_string()))),
                pred("b", Op::Between(num("1"), num("2"))),
            ))
        );
        // Words that merely start with a keyword are fields.
        assert_eq!(parse("andy = 1"), Ok(eq("andy", num("1"))));
        assert_eq!(parse("order = 1"), Ok(eq("order", num("1"))));
        for kw in ["and", "OR", "Between", "lIKE"] {
            fails(&format!("{kw} = 1"), "keyword");
        }
    }

    #[test]
    fn between_keeps_its_own_and() {
        let x = eq("x", num("1"));
        let d = pred("d", Op::Between(num("1"), num("5")));
        let e = eq("e", num("2"));
        assert_eq!(
            parse("d between 1 and 5 and e = 2"),
            Ok(and(d.clone(), e.clone()))
        );
        assert_eq!(
            parse("x = 1 and d between 1 and 5 and e = 2"),
            Ok(and(and(x.clone(), d.clone()), e.clone()))
        );
        assert_eq!(
            parse("x = 1 or d between 1 and 5 and e = 2"),
            Ok(or(x, and(d, e)))
        );
        fails("d between 1 or 5", "\"and\" between the two bounds");
        fails("d between 1 and", "value after \"between ... and\"");
        fails("d between and 5", "value after \"between\"");
    }

    #[test]
    fn error_cases_name_what_was_expected() {
        assert_eq!(fails("", "empty").offset, 0);
        assert_eq!(fails("   \n ", "empty").offset, 0);
        assert_eq!(fails("a = 1 b = 2", "end of the query").offset, 6);
        assert_eq!(fails("(a = 1", "to close").offset, 6);
        assert_eq!(fails("a = 1)", "unmatched").offset, 5);
        assert_eq!(fails("(a = 1))", "unmatched").offset, 7);
        assert_eq!(fails("()", "field name").offset, 1);
        assert_eq!(fails(r#"a = "abc"#, "unterminated").offset, 4);
        assert_eq!(fails(r#"a = "abc\"#, "unterminated").offset, 4);
        assert_eq!(fails(r#"a = "a\nb""#, "escape").offset, 6);
        assert_eq!(fails("a = 1.", "decimal point").offset, 6);
        assert_eq!(fails("a = 1. and b = 2", "decimal point").offset, 6);
        assert_eq!(fails("a = --1", "digit after \"-\"").offset, 5);
        assert_eq!(fails("a = -", "digit after \"-\"").offset, 5);
        assert_eq!(fails("a = 1e5", "end of the number").offset, 5);
        assert_eq!(fails("a = 1.5.2", "end of the number").offset, 7);
        assert_eq!(fails(r#"a like "abc""#, "end with").offset, 7);
        assert_eq!(fails(r#"a like """#, "end with").offset, 7);
        assert_eq!(fails(r#"a like "a*b*""#, "only one").offset, 7);
        assert_eq!(fails(r#"a like "**""#, "only one").offset, 7);
        assert_eq!(fails(r#"a like "*""#, "at least one character").offset, 7);
        assert_eq!(fails("a like 12", "quoted pattern").offset, 7);
        assert_eq!(fails("a", "operator").offset, 1);
        assert_eq!(fails("a == 1", "value").offset, 3);
        assert_eq!(fails("a != 1", "found '!'").offset, 2);
        assert_eq!(fails("a = 1 and", "end of the query").offset, 9);
        assert_eq!(fails("a = 1 or or b = 2", "keyword").offset, 9);
    }

    #[test]
    fn error_display_shows_the_column() {
        assert_eq!(
            err("a = ").to_string(),
            "expected a value after \"=\" at column 5"
        );
        // The column counts characters; the offset counts bytes.
        let q = "x = \"é\" or y = ";
        let e = err(q);
        assert_eq!(e.offset, 16);
        assert_eq!(e.to_string(), "expected a value after \"=\" at column 16");
        let e = err("a = 1 and\nb = ");
        assert_eq!(
            e.to_string(),
            "expected a value after \"=\" at line 2, column 5"
        );
        let boxed: Box<dyn std::error::Error> = Box::new(err("x"));
        assert!(boxed.to_string().contains("operator"));
    }

    #[test]
    fn caret_points_at_the_column() {
        let q = "carrier = and x = 1";
        assert_eq!(
            err(q).caret(q),
            "carrier = and x = 1\n          ^".to_string()
        );
        let q = "x = \"é\" or y = ";
        assert_eq!(err(q).caret(q), "x = \"é\" or y = \n               ^");
        let q = "a = 1 and\n\tb = ";
        assert_eq!(err(q).caret(q), "\tb = \n\t    ^");
        // An offset that is out of range or inside a character is clamped.
        let e = ParseError::new("é", "x", 1);
        assert_eq!(e.caret("é"), "é\n^");
        assert_eq!(err("x").caret(""), "\n^");
    }

    #[test]
    fn predicates_are_listed_left_to_right() {
        let e =
            parse(r#"(a = 1 or b < 2) and (c like "x*" or d between 1 and 2) and e > 0"#).unwrap();
        let fields: Vec<&str> = e.predicates().iter().map(|p| p.field.as_str()).collect();
        assert_eq!(fields, ["a", "b", "c", "d", "e"]);
    }

    #[test]
    fn display_is_canonical() {
        let shown = |q: &str| parse(q).unwrap().to_string();
        assert_eq!(
            shown("A=1 OR b<2 AND c LIKE \"x\\\\\\\"*\""),
            "A = 1 or (b < 2 and c like \"x\\\\\\\"*\")"
        );
        assert_eq!(
            shown("a=1 and b=2 and (c=3 or d=4)"),
            "a = 1 and b = 2 and (c = 3 or d = 4)"
        );
        assert_eq!(shown("a=1 or (b=2 or c=3)"), "a = 1 or (b = 2 or c = 3)");
        assert_eq!(
            shown("x between -1.5 and \"z\""),
            "x between -1.5 and \"z\""
        );
    }

    #[test]
    fn limits_are_errors() {
        // Predicates.
        let many = |n: usize| vec!["a = 1"; n].join(" or ");
        assert_eq!(
            parse(&many(MAX_PREDICATES)).unwrap().predicates().len(),
            256
        );
        let e = fails(&many(MAX_PREDICATES + 1), "too many predicates");
        assert_eq!(e.offset, 256 * "a = 1 or ".len());
        // Depth.
        let nested = |n: usize| format!("{}a = 1{}", "(".repeat(n), ")".repeat(n));
        assert!(parse(&nested(MAX_DEPTH)).is_ok());
        assert_eq!(fails(&nested(MAX_DEPTH + 1), "too deep").offset, 64);
        // Length.
        let padded = |n: usize| format!("a = 1{}", " ".repeat(n - 5));
        assert!(parse(&padded(MAX_QUERY_BYTES)).is_ok());
        let e = fails(&padded(MAX_QUERY_BYTES + 1), "too long");
        assert_eq!(e.offset, MAX_QUERY_BYTES);
        // A long input cut inside a character still gives a valid offset.
        let e = fails(&"é".repeat(40_000), "too long");
        assert!("é".repeat(40_000).is_char_boundary(e.offset));
    }

    #[test]
    fn ten_thousand_parentheses_are_an_error_not_a_crash() {
        let q = format!("{}a=1{}", "(".repeat(10_000), ")".repeat(10_000));
        assert_eq!(fails(&q, "too deep").offset, MAX_DEPTH);
        let open = "(".repeat(10_000);
        fails(&open, "too deep");
    }

    fn field() -> impl Strategy<Value = String> {
        "[A-Za-z_][A-Za-z0-9_]{0,6}".prop_filter("not a keyword", |f| !is_keyword(f))
    }

    fn literal() -> impl Strategy<Value = Literal> {
        prop_oneof![
            "-?[0-9]{1,6}(\\.[0-9]{1,4})?".prop_map(Literal::Number),
            "[a-z\"\\\\* é]{0,8}".prop_map(Literal::Text),
            any::<String>().prop_map(Literal::Text),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            literal().prop_map(Op::Eq),
            literal().prop_map(Op::Lt),
            literal().prop_map(Op::Le),
            literal().prop_map(Op::Gt),
            literal().prop_map(Op::Ge),
            (literal(), literal()).prop_map(|(a, b)| Op::Between(a, b)),
            "[a-z\"\\\\ é]{1,8}".prop_map(Op::Like),
            Just(Op::IsNull),
            Just(Op::IsNotNull),
        ]
    }

    fn expr() -> impl Strategy<Value = Expr> {
        let leaf = (field(), op()).prop_map(|(field, op)| Expr::Pred(Predicate { field, op }));
        leaf.prop_recursive(4, 16, 2, |inner| {
            prop_oneof![
                (inner.clone(), inner.clone()).prop_map(|(a, b)| and(a, b)),
                (inner.clone(), inner).prop_map(|(a, b)| or(a, b)),
            ]
        })
    }

    /// Checks that an error (if any) points inside the input.
    fn check_error(s: &str) {
        if let Err(e) = parse(s) {
            assert!(e.offset <= s.len());
            assert!(s.is_char_boundary(e.offset));
            assert!(!e.message.is_empty());
            let _ = e.caret(s);
        }
    }

    proptest! {
        #[test]
        fn printed_queries_parse_back_the_same(e in expr()) {
            let shown = e.to_string();
            prop_assert_eq!(parse(&shown), Ok(e), "printed as {}", shown);
        }

        #[test]
        fn any_string_never_panics(s in proptest::collection::vec(any::<char>(), 0..=200)) {
            let s: String = s.into_iter().collect();
            check_error(&s);
        }

        #[test]
        fn query_like_strings_never_panic(s in "[ab() =<>\"\\\\.0-9*-]{0,80}|(and|or|between|like| |a|1|\\(|\\)|=|\"x\\*\"){0,40}") {
            check_error(&s);
        }
    }
}
