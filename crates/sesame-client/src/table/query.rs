//! The query language of tables, parsed by hand.
//!
//! ```text
//! expr      := and ( "or" and )*
//! and       := atom ( "and" atom )*
//! atom      := "(" expr ")" | FIELD op
//! op        := ("=" | "<" | "<=" | ">" | ">=") lit
//!            | "between" lit "and" lit          (both ends included)
//!            | "like" STRING                    (a prefix: "abc*")
//! lit       := NUMBER | STRING
//! FIELD     := [A-Za-z_][A-Za-z0-9_]*
//! NUMBER    := -?[0-9]+(\.[0-9]+)?
//! STRING    := "..." with \" and \\ as the only escapes
//! ```
//!
//! `and` binds tighter than `or`; both are left-associative. The words
//! `and`, `or`, `between` and `like` are case-insensitive and cannot name
//! a field. Input is limited (64 KiB, 256 predicates, parentheses 64
//! deep), so no input makes the parser run out of stack or time.

/// The longest query accepted, in bytes.
pub const MAX_QUERY_BYTES: usize = 64 << 10;
/// The most predicates in one query.
pub const MAX_PREDICATES: usize = 256;
/// The deepest nesting of parentheses.
pub const MAX_DEPTH: usize = 64;

/// A literal value as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Literal {
    /// A number, as written (`-2.5`).
    Number(String),
    /// A string, unescaped.
    Text(String),
}

/// A comparison.
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
    /// `between a and b`, both included.
    Between(Literal, Literal),
    /// `like "abc*"`: the prefix, without the `*`.
    Like(String),
}

/// A field and its comparison.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Predicate {
    /// The field's name.
    pub field: String,
    /// The comparison.
    pub op: Op,
}

/// A query.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expr {
    /// One predicate.
    Pred(Predicate),
    /// Both.
    And(Box<Expr>, Box<Expr>),
    /// Either.
    Or(Box<Expr>, Box<Expr>),
}

/// Why a query does not parse, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// What was wrong.
    pub message: String,
    /// Byte offset in the query.
    pub offset: usize,
}

impl ParseError {
    /// The query with a `^` under the place of the error.
    pub fn caret(&self, input: &str) -> String {
        let column = input
            .get(..self.offset.min(input.len()))
            .map_or(0, |s| s.chars().count());
        let shown: String = input
            .chars()
            .map(|c| if c == '\n' { ' ' } else { c })
            .collect();
        format!("  {shown}\n  {}^", " ".repeat(column))
    }
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at byte {}", self.message, self.offset + 1)
    }
}

impl std::error::Error for ParseError {}

impl Expr {
    /// The predicates, left to right.
    pub fn predicates(&self) -> Vec<&Predicate> {
        let mut out = Vec::new();
        let mut stack = vec![self];
        while let Some(e) = stack.pop() {
            match e {
                Expr::Pred(p) => out.push(p),
                Expr::And(a, b) | Expr::Or(a, b) => {
                    stack.push(b);
                    stack.push(a);
                }
            }
        }
        out
    }
}

fn write_literal(f: &mut std::fmt::Formatter<'_>, l: &Literal) -> std::fmt::Result {
    match l {
        Literal::Number(n) => f.write_str(n),
        Literal::Text(s) => write_string(f, s),
    }
}

fn write_string(f: &mut std::fmt::Formatter<'_>, s: &str) -> std::fmt::Result {
    f.write_str("\"")?;
    for c in s.chars() {
        if c == '"' || c == '\\' {
            f.write_str("\\")?;
        }
        write!(f, "{c}")?;
    }
    f.write_str("\"")
}

impl std::fmt::Display for Predicate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.field)?;
        let (op, l) = match &self.op {
            Op::Eq(l) => (" = ", l),
            Op::Lt(l) => (" < ", l),
            Op::Le(l) => (" <= ", l),
            Op::Gt(l) => (" > ", l),
            Op::Ge(l) => (" >= ", l),
            Op::Between(a, b) => {
                f.write_str(" between ")?;
                write_literal(f, a)?;
                f.write_str(" and ")?;
                return write_literal(f, b);
            }
            Op::Like(prefix) => {
                f.write_str(" like ")?;
                let mut pattern = prefix.clone();
                pattern.push('*');
                return write_string(f, &pattern);
            }
        };
        f.write_str(op)?;
        write_literal(f, l)
    }
}

impl std::fmt::Display for Expr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Expr::Pred(p) => write!(f, "{p}"),
            Expr::And(a, b) => {
                // An `or` inside an `and` needs its parentheses, on
                // either side; an `and` on the right does too, to keep
                // the tree's left association.
                let wrap_a = matches!(**a, Expr::Or(..));
                let wrap_b = matches!(**b, Expr::Or(..) | Expr::And(..));
                write_side(f, a, wrap_a)?;
                f.write_str(" and ")?;
                write_side(f, b, wrap_b)
            }
            Expr::Or(a, b) => {
                let wrap_b = matches!(**b, Expr::Or(..));
                write_side(f, a, false)?;
                f.write_str(" or ")?;
                write_side(f, b, wrap_b)
            }
        }
    }
}

fn write_side(f: &mut std::fmt::Formatter<'_>, e: &Expr, wrap: bool) -> std::fmt::Result {
    if wrap {
        write!(f, "({e})")
    } else {
        write!(f, "{e}")
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Token {
    Word(String),
    Number(String),
    Text(String),
    Open,
    Close,
    Eq,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Token {
    fn describe(&self) -> String {
        match self {
            Token::Word(w) => format!("{w:?}"),
            Token::Number(n) => format!("the number {n}"),
            Token::Text(_) => "a string".into(),
            Token::Open => "\"(\"".into(),
            Token::Close => "\")\"".into(),
            Token::Eq => "\"=\"".into(),
            Token::Lt => "\"<\"".into(),
            Token::Le => "\"<=\"".into(),
            Token::Gt => "\">\"".into(),
            Token::Ge => "\">=\"".into(),
        }
    }

    fn is_word(&self, word: &str) -> bool {
        matches!(self, Token::Word(w) if w.eq_ignore_ascii_case(word))
    }
}

const KEYWORDS: [&str; 4] = ["and", "or", "between", "like"];

fn error(message: impl Into<String>, offset: usize) -> ParseError {
    ParseError {
        message: message.into(),
        offset,
    }
}

/// Splits the input into tokens with their byte offsets.
fn tokens(input: &str) -> Result<Vec<(Token, usize)>, ParseError> {
    let mut out = Vec::new();
    let mut chars = input.char_indices().peekable();
    while let Some(&(at, c)) = chars.peek() {
        match c {
            c if c.is_whitespace() => {
                chars.next();
            }
            '(' | ')' | '=' => {
                chars.next();
                out.push((
                    match c {
                        '(' => Token::Open,
                        ')' => Token::Close,
                        _ => Token::Eq,
                    },
                    at,
                ));
            }
            '<' | '>' => {
                chars.next();
                let or_equal = chars.next_if(|&(_, c)| c == '=').is_some();
                out.push((
                    match (c, or_equal) {
                        ('<', false) => Token::Lt,
                        ('<', true) => Token::Le,
                        (_, false) => Token::Gt,
                        _ => Token::Ge,
                    },
                    at,
                ));
            }
            '"' => {
                chars.next();
                let mut text = String::new();
                loop {
                    match chars.next() {
                        None => return Err(error("unterminated string", at)),
                        Some((_, '"')) => break,
                        Some((escape, '\\')) => match chars.next() {
                            Some((_, c @ ('"' | '\\'))) => text.push(c),
                            _ => {
                                return Err(error(
                                    "unknown escape in a string (only \\\" and \\\\)",
                                    escape,
                                ))
                            }
                        },
                        Some((_, c)) => text.push(c),
                    }
                }
                out.push((Token::Text(text), at));
            }
            c if c == '-' || c.is_ascii_digit() => {
                let mut text = String::new();
                if c == '-' {
                    text.push('-');
                    chars.next();
                }
                let digits = |chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>,
                              text: &mut String| {
                    let mut n = 0;
                    while let Some((_, d)) = chars.next_if(|&(_, d)| d.is_ascii_digit()) {
                        text.push(d);
                        n += 1;
                    }
                    n
                };
                if digits(&mut chars, &mut text) == 0 {
                    return Err(error("a number needs digits", at));
                }
                if chars.next_if(|&(_, d)| d == '.').is_some() {
                    text.push('.');
                    if digits(&mut chars, &mut text) == 0 {
                        return Err(error("a number needs digits after its point", at));
                    }
                }
                if let Some(&(_, next)) = chars.peek() {
                    if next.is_alphanumeric() || next == '_' || next == '.' {
                        return Err(error(
                            "a malformed number (digits, an optional point and digits)",
                            at,
                        ));
                    }
                }
                out.push((Token::Number(text), at));
            }
            c if c.is_ascii_alphabetic() || c == '_' => {
                let mut word = String::new();
                while let Some((_, w)) =
                    chars.next_if(|&(_, w)| w.is_ascii_alphanumeric() || w == '_')
                {
                    word.push(w);
                }
                out.push((Token::Word(word), at));
            }
            other => {
                return Err(error(format!("unexpected character {other:?}"), at));
            }
        }
    }
    Ok(out)
}

struct Parser {
    tokens: Vec<(Token, usize)>,
    at: usize,
    end: usize,
    predicates: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at).map(|(t, _)| t)
    }

    fn offset(&self) -> usize {
        self.tokens.get(self.at).map_or(self.end, |(_, o)| *o)
    }

    fn next(&mut self) -> Option<Token> {
        let t = self.tokens.get(self.at).map(|(t, _)| t.clone());
        if t.is_some() {
            self.at += 1;
        }
        t
    }

    fn found(&self) -> String {
        self.peek()
            .map_or_else(|| "the end of the query".into(), Token::describe)
    }

    fn expr(&mut self, depth: usize) -> Result<Expr, ParseError> {
        let mut left = self.and(depth)?;
        while self.peek().is_some_and(|t| t.is_word("or")) {
            self.next();
            let right = self.and(depth)?;
            left = Expr::Or(Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn and(&mut self, depth: usize) -> Result<Expr, ParseError> {
        let mut left = self.atom(depth)?;
        while self.peek().is_some_and(|t| t.is_word("and")) {
            self.next();
            let right = self.atom(depth)?;
            left = Expr::And(Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn atom(&mut self, depth: usize) -> Result<Expr, ParseError> {
        let offset = self.offset();
        match self.peek() {
            Some(Token::Open) => {
                if depth >= MAX_DEPTH {
                    return Err(error(
                        format!("parentheses nested deeper than {MAX_DEPTH}"),
                        offset,
                    ));
                }
                self.next();
                let inner = self.expr(depth + 1)?;
                if self.peek() != Some(&Token::Close) {
                    return Err(error(
                        format!("expected \")\", found {}", self.found()),
                        self.offset(),
                    ));
                }
                self.next();
                Ok(inner)
            }
            Some(Token::Word(w)) if !KEYWORDS.iter().any(|k| w.eq_ignore_ascii_case(k)) => {
                let field = w.clone();
                self.next();
                self.predicates += 1;
                if self.predicates > MAX_PREDICATES {
                    return Err(error(
                        format!("more than {MAX_PREDICATES} predicates"),
                        offset,
                    ));
                }
                let op = self.op(&field)?;
                Ok(Expr::Pred(Predicate { field, op }))
            }
            _ => Err(error(
                format!("expected a field name or \"(\", found {}", self.found()),
                offset,
            )),
        }
    }

    fn op(&mut self, field: &str) -> Result<Op, ParseError> {
        let offset = self.offset();
        let Some(token) = self.next() else {
            return Err(error(
                format!("expected a comparison after {field:?} (=, <, <=, >, >=, between, like)"),
                offset,
            ));
        };
        match token {
            Token::Eq => Ok(Op::Eq(self.literal("=")?)),
            Token::Lt => Ok(Op::Lt(self.literal("<")?)),
            Token::Le => Ok(Op::Le(self.literal("<=")?)),
            Token::Gt => Ok(Op::Gt(self.literal(">")?)),
            Token::Ge => Ok(Op::Ge(self.literal(">=")?)),
            t if t.is_word("between") => {
                let low = self.literal("between")?;
                if !self.peek().is_some_and(|t| t.is_word("and")) {
                    return Err(error(
                        format!("expected \"and\" in \"between\", found {}", self.found()),
                        self.offset(),
                    ));
                }
                self.next();
                let high = self.literal("and")?;
                Ok(Op::Between(low, high))
            }
            t if t.is_word("like") => {
                let at = self.offset();
                match self.next() {
                    Some(Token::Text(pattern)) => {
                        let prefix = pattern.strip_suffix('*').unwrap_or(&pattern);
                        if !pattern.ends_with('*') || prefix.contains('*') || prefix.is_empty() {
                            return Err(error(
                                "a like pattern is a prefix and one trailing *, as \"abc*\"",
                                at,
                            ));
                        }
                        Ok(Op::Like(prefix.to_owned()))
                    }
                    _ => Err(error(
                        "expected a quoted pattern after \"like\", as \"abc*\"",
                        at,
                    )),
                }
            }
            other => Err(error(
                format!(
                    "expected a comparison after {field:?} (=, <, <=, >, >=, between, like), \
                     found {}",
                    other.describe()
                ),
                offset,
            )),
        }
    }

    fn literal(&mut self, after: &str) -> Result<Literal, ParseError> {
        let offset = self.offset();
        match self.next() {
            Some(Token::Number(n)) => Ok(Literal::Number(n)),
            Some(Token::Text(s)) => Ok(Literal::Text(s)),
            other => Err(error(
                format!(
                    "expected a value after {after:?} (a number or a quoted string), found {}",
                    other.map_or_else(|| "the end of the query".into(), |t| t.describe())
                ),
                offset,
            )),
        }
    }
}

/// Parses a query.
pub fn parse(input: &str) -> Result<Expr, ParseError> {
    if input.len() > MAX_QUERY_BYTES {
        return Err(error(
            format!("the query is longer than {MAX_QUERY_BYTES} bytes"),
            0,
        ));
    }
    let tokens = tokens(input)?;
    if tokens.is_empty() {
        return Err(error("empty query", 0));
    }
    let mut parser = Parser {
        tokens,
        at: 0,
        end: input.len(),
        predicates: 0,
    };
    let expr = parser.expr(0)?;
    if parser.peek().is_some() {
        return Err(error(
            format!(
                "expected \"and\", \"or\" or the end, found {}",
                parser.found()
            ),
            parser.offset(),
        ));
    }
    Ok(expr)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn pred(field: &str, op: Op) -> Expr {
        Expr::Pred(Predicate {
            field: field.into(),
            op,
        })
    }
    fn num(n: &str) -> Literal {
        Literal::Number(n.into())
    }
    fn text(s: &str) -> Literal {
        Literal::Text(s.into())
    }
    fn and(a: Expr, b: Expr) -> Expr {
        Expr::And(Box::new(a), Box::new(b))
    }
    fn or(a: Expr, b: Expr) -> Expr {
        Expr::Or(Box::new(a), Box::new(b))
    }
    fn ok(q: &str) -> Expr {
        parse(q).unwrap_or_else(|e| panic!("{q}: {e}"))
    }

    #[test]
    fn the_examples_parse() {
        assert_eq!(
            ok(r#"carrier = "UA" and dep_delay between 10 and 20"#),
            and(
                pred("carrier", Op::Eq(text("UA"))),
                pred("dep_delay", Op::Between(num("10"), num("20")))
            )
        );
        assert_eq!(
            ok(r#"origin = "JFK" and dest like "S*""#),
            and(
                pred("origin", Op::Eq(text("JFK"))),
                pred("dest", Op::Like("S".into()))
            )
        );
        assert_eq!(
            ok("dep_time >= 1200"),
            pred("dep_time", Op::Ge(num("1200")))
        );
        assert_eq!(
            ok(r#"(a = 1 or b < -2.5) and c like "x\"y*""#),
            and(
                or(pred("a", Op::Eq(num("1"))), pred("b", Op::Lt(num("-2.5")))),
                pred("c", Op::Like("x\"y".into()))
            )
        );
        assert_eq!(ok("a<=1"), pred("a", Op::Le(num("1"))));
        assert_eq!(ok("a>1"), pred("a", Op::Gt(num("1"))));
    }

    #[test]
    fn and_binds_tighter_than_or_and_parentheses_override() {
        let (a, b, c) = (
            pred("a", Op::Eq(num("1"))),
            pred("b", Op::Eq(num("2"))),
            pred("c", Op::Eq(num("3"))),
        );
        assert_eq!(
            ok("a = 1 or b = 2 and c = 3"),
            or(a.clone(), and(b.clone(), c.clone()))
        );
        assert_eq!(
            ok("(a = 1 or b = 2) and c = 3"),
            and(or(a.clone(), b.clone()), c.clone())
        );
        assert_eq!(
            ok("a = 1 AND b = 2 Or c = 3"),
            or(and(a.clone(), b.clone()), c.clone())
        );
        assert_eq!(
            ok("x BETWEEN 1 AND 2 and a = 1"),
            and(pred("x", Op::Between(num("1"), num("2"))), a)
        );
    }

    #[test]
    fn bad_queries_say_what_and_where() {
        for (q, word, offset) in [
            ("", "empty", Some(0)),
            ("a =", "expected a value", Some(3)),
            ("a = 1 b = 2", "expected \"and\"", Some(6)),
            ("(a = 1", "expected \")\"", Some(6)),
            ("a = 1)", "expected \"and\"", Some(5)),
            ("a = \"x", "unterminated", Some(4)),
            ("a = 1.", "after its point", Some(4)),
            ("a = --1", "needs digits", Some(4)),
            ("a = 1e5", "malformed number", Some(4)),
            ("a like \"abc\"", "trailing *", None),
            ("a like \"a*c*\"", "trailing *", None),
            ("a like \"*\"", "trailing *", None),
            ("a like abc", "quoted pattern", None),
            ("a = \"\\n\"", "escape", None),
            ("and = 1", "field name", Some(0)),
            ("a between 1 or 2", "expected \"and\"", None),
            ("a ! 1", "unexpected character", Some(2)),
            ("a", "expected a comparison", None),
        ] {
            let e = parse(q).unwrap_err();
            assert!(e.message.contains(word), "{q:?}: {e}");
            if let Some(o) = offset {
                assert_eq!(e.offset, o, "{q:?}: {e}");
            }
            assert!(!e.caret(q).is_empty());
        }
    }

    #[test]
    fn limits_are_errors_not_crashes() {
        let deep = format!("{}a = 1{}", "(".repeat(10_000), ")".repeat(10_000));
        assert!(parse(&deep).unwrap_err().message.contains("nested"));
        let many = vec!["a = 1"; MAX_PREDICATES + 1].join(" and ");
        assert!(parse(&many).unwrap_err().message.contains("predicates"));
        let long = format!("a = \"{}\"", "x".repeat(MAX_QUERY_BYTES));
        assert!(parse(&long).unwrap_err().message.contains("longer"));
        let fine = format!("{}a = 1{}", "(".repeat(MAX_DEPTH), ")".repeat(MAX_DEPTH));
        assert!(parse(&fine).is_ok());
    }

    #[test]
    fn predicates_are_listed_left_to_right() {
        let e = ok("a = 1 or (b = 2 and c = 3) or d = 4");
        let names: Vec<&str> = e.predicates().iter().map(|p| p.field.as_str()).collect();
        assert_eq!(names, ["a", "b", "c", "d"]);
    }

    fn literal() -> impl Strategy<Value = Literal> {
        prop_oneof![
            (any::<i32>(), proptest::option::of(0u32..1000)).prop_map(|(i, f)| Literal::Number(
                match f {
                    Some(f) => format!("{i}.{f}"),
                    None => i.to_string(),
                }
            )),
            "[a-z\"\\\\ *é]{0,8}".prop_map(Literal::Text),
        ]
    }

    fn predicate() -> impl Strategy<Value = Expr> {
        let field = "[a-z_][a-z0-9_]{0,5}"
            .prop_filter("not a keyword", |f| !KEYWORDS.contains(&f.as_str()));
        let op = prop_oneof![
            literal().prop_map(Op::Eq),
            literal().prop_map(Op::Lt),
            literal().prop_map(Op::Le),
            literal().prop_map(Op::Gt),
            literal().prop_map(Op::Ge),
            (literal(), literal()).prop_map(|(a, b)| Op::Between(a, b)),
            "[a-z\"\\\\ é]{1,6}".prop_map(Op::Like),
        ];
        (field, op).prop_map(|(field, op)| Expr::Pred(Predicate { field, op }))
    }

    fn expr() -> impl Strategy<Value = Expr> {
        predicate().prop_recursive(4, 24, 2, |inner| {
            prop_oneof![
                (inner.clone(), inner.clone()).prop_map(|(a, b)| and(a, b)),
                (inner.clone(), inner).prop_map(|(a, b)| or(a, b)),
            ]
        })
    }

    proptest! {
        #[test]
        fn printed_queries_parse_back_the_same(e in expr()) {
            let text = e.to_string();
            prop_assert_eq!(parse(&text).map_err(|e| e.to_string()), Ok(e), "{}", text);
        }

        #[test]
        fn no_input_panics(s in "\\PC{0,200}") {
            let _ = parse(&s);
        }

        #[test]
        fn query_like_input_does_not_panic(s in "[a-z()=<>\" .0-9*\\\\-]{0,120}") {
            let _ = parse(&s);
        }
    }
}
