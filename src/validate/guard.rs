//! A small parser for the boolean structure of branch predicates (`when`) and the
//! shape of `update` expressions, for the bounded-cycle check (E054) and the dead-arm
//! check. It understands `or`, `and`, `not`, parentheses, and comparisons
//! (`== != < <= > >=`) between simple terms: a state field, `field | length`, a
//! number, a string, `true`/`false`/`none`. Everything else is an opaque term or an
//! opaque boolean atom, compared by its token text: two equal texts in one decision
//! have the same value (every arm of a branch reads the same state), anything else is
//! a free boolean. List and dict literals are opaque terms (`verdict in ['yes', 'maybe']`
//! is one atom). An expression the parser does not follow (a ternary `if`/`else`, a
//! tuple, unbalanced brackets) is one opaque atom as a whole. So the
//! reasoning can only lose precision, never claim what the expression does not say.
use std::collections::BTreeMap;

/// A term compared in a predicate.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Term {
    /// A bare state field: `iterations`.
    Field(String),
    /// `field | length`.
    Len(String),
    /// A number literal.
    Num(f64),
    /// A string literal (without quotes).
    Str(String),
    /// `true` / `false`.
    Bool(bool),
    /// `none`.
    None,
    /// Anything else, by its canonical token text.
    Other(String),
}

/// A comparison operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Op {
    fn parse(s: &str) -> Option<Op> {
        Some(match s {
            "==" => Op::Eq,
            "!=" => Op::Ne,
            "<" => Op::Lt,
            "<=" => Op::Le,
            ">" => Op::Gt,
            ">=" => Op::Ge,
            _ => return None,
        })
    }

    /// The operator with its operands swapped (`a < b` ⇔ `b > a`).
    pub(crate) fn flip(self) -> Op {
        match self {
            Op::Eq => Op::Eq,
            Op::Ne => Op::Ne,
            Op::Lt => Op::Gt,
            Op::Le => Op::Ge,
            Op::Gt => Op::Lt,
            Op::Ge => Op::Le,
        }
    }
}

/// The boolean structure of a predicate.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Pred {
    And(Box<Pred>, Box<Pred>),
    Or(Box<Pred>, Box<Pred>),
    Not(Box<Pred>),
    /// A comparison of two terms.
    Cmp(Op, Term, Term),
    /// A term used for its truthiness.
    Truthy(Term),
}

/// Parses a predicate. Never fails: what it cannot follow becomes an opaque atom.
pub(crate) fn parse(text: &str) -> Pred {
    let toks = tokens(text);
    let opaque = || Pred::Truthy(Term::Other(toks.join(" ")));
    if toks.is_empty()
        || !balanced(&toks)
        || toks.iter().any(|t| is_unsupported(t))
        || has_top_level_separator(&toks)
    {
        return opaque();
    }
    let mut p = Parser { t: &toks, i: 0 };
    match p.or() {
        Some(pred) if p.i == toks.len() => pred,
        _ => opaque(),
    }
}

/// Tokens that make the parser give up on the whole expression: a ternary
/// `if`/`else` (its operands may contain `and`/`or` that do not combine the
/// predicate's own atoms). List and dict literals (`verdict in ['yes', 'maybe']`) are
/// followed: everything between balanced brackets belongs to one opaque term.
fn is_unsupported(t: &str) -> bool {
    matches!(t, "if" | "else")
}

/// Whether a `,` or `:` stands outside every bracket (a tuple or slice the parser
/// does not follow).
fn has_top_level_separator(t: &[String]) -> bool {
    let mut depth = 0i32;
    t.iter().any(|x| {
        match x.as_str() {
            "(" | "[" | "{" => depth += 1,
            ")" | "]" | "}" => depth -= 1,
            _ => {}
        }
        depth == 0 && matches!(x.as_str(), "," | ":")
    })
}

/// Whether every `(`, `[` and `{` is closed by its own kind, in order.
fn balanced(t: &[String]) -> bool {
    let mut open = Vec::new();
    for x in t {
        match x.as_str() {
            "(" | "[" | "{" => open.push(x.as_str()),
            ")" | "]" | "}" => {
                let want = match x.as_str() {
                    ")" => "(",
                    "]" => "[",
                    _ => "{",
                };
                if open.pop() != Some(want) {
                    return false;
                }
            }
            _ => {}
        }
    }
    open.is_empty()
}

struct Parser<'a> {
    t: &'a [String],
    i: usize,
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<&str> {
        self.t.get(self.i).map(String::as_str)
    }

    fn or(&mut self) -> Option<Pred> {
        let mut left = self.and()?;
        while self.peek() == Some("or") {
            self.i += 1;
            let right = self.and()?;
            left = Pred::Or(Box::new(left), Box::new(right));
        }
        Some(left)
    }

    fn and(&mut self) -> Option<Pred> {
        let mut left = self.not()?;
        while self.peek() == Some("and") {
            self.i += 1;
            let right = self.not()?;
            left = Pred::And(Box::new(left), Box::new(right));
        }
        Some(left)
    }

    fn not(&mut self) -> Option<Pred> {
        if self.peek() == Some("not") {
            self.i += 1;
            return Some(Pred::Not(Box::new(self.not()?)));
        }
        self.cmp()
    }

    /// A term, optionally compared with another. A term wrapped in parentheses as a
    /// whole is a nested predicate.
    fn cmp(&mut self) -> Option<Pred> {
        let left = self.term()?;
        let Some(op) = self.peek().and_then(Op::parse) else {
            return Some(match left {
                TermToks::Paren(inner) => parse_inner(inner),
                TermToks::Plain(t) => Pred::Truthy(classify(t)),
            });
        };
        self.i += 1;
        let right = self.term()?;
        if self.peek().and_then(Op::parse).is_some() {
            // A chained comparison: not followed.
            return None;
        }
        Some(Pred::Cmp(op, left.term(), right.term()))
    }

    /// The tokens of one term: up to the next depth-0 comparison, `and`, `or` or `)`.
    /// `not` inside a term (`x is not none`, `a not in b`) belongs to it.
    fn term(&mut self) -> Option<TermToks<'a>> {
        let start = self.i;
        let mut depth = 0usize;
        while let Some(t) = self.peek() {
            if depth == 0 && (matches!(t, "and" | "or" | ")") || Op::parse(t).is_some()) {
                break;
            }
            match t {
                "(" | "[" | "{" => depth += 1,
                ")" | "]" | "}" => depth -= 1,
                _ => {}
            }
            self.i += 1;
        }
        let all: &'a [String] = self.t;
        let toks = &all[start..self.i];
        if toks.is_empty() {
            return None;
        }
        let wrapped =
            toks.len() >= 2 && toks[0] == "(" && toks[toks.len() - 1] == ")" && closes_at_end(toks);
        Some(if wrapped {
            TermToks::Paren(&toks[1..toks.len() - 1])
        } else {
            TermToks::Plain(toks)
        })
    }
}

/// Whether the `(` at the start of `toks` is closed by its last token.
fn closes_at_end(toks: &[String]) -> bool {
    let mut depth = 0;
    for (i, t) in toks.iter().enumerate() {
        match t.as_str() {
            "(" => depth += 1,
            ")" => {
                depth -= 1;
                if depth == 0 {
                    return i == toks.len() - 1;
                }
            }
            _ => {}
        }
    }
    false
}

enum TermToks<'a> {
    Paren(&'a [String]),
    Plain(&'a [String]),
}

impl TermToks<'_> {
    fn term(self) -> Term {
        match self {
            TermToks::Paren(t) => classify(t),
            TermToks::Plain(t) => classify(t),
        }
    }
}

fn parse_inner(toks: &[String]) -> Pred {
    if has_top_level_separator(toks) {
        return Pred::Truthy(Term::Other(toks.join(" ")));
    }
    let mut p = Parser { t: toks, i: 0 };
    match p.or() {
        Some(pred) if p.i == toks.len() => pred,
        _ => Pred::Truthy(Term::Other(toks.join(" "))),
    }
}

fn is_ident(s: &str) -> bool {
    s.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

const KEYWORDS: &[&str] = &[
    "and", "or", "not", "in", "is", "if", "else", "true", "false", "True", "False", "none", "None",
    "loop", "self",
];

fn classify(t: &[String]) -> Term {
    let s: Vec<&str> = t.iter().map(String::as_str).collect();
    match s.as_slice() {
        ["true" | "True"] => Term::Bool(true),
        ["false" | "False"] => Term::Bool(false),
        ["none" | "None"] => Term::None,
        [x] if is_ident(x) && !KEYWORDS.contains(x) => Term::Field(x.to_string()),
        [x] if x.starts_with(['"', '\'']) && x.len() >= 2 => {
            Term::Str(x[1..x.len() - 1].to_string())
        }
        [x] if x.chars().next().is_some_and(|c| c.is_ascii_digit()) => x
            .replace('_', "")
            .parse::<f64>()
            .map(Term::Num)
            .unwrap_or_else(|_| Term::Other(x.to_string())),
        ["-", x] if x.chars().next().is_some_and(|c| c.is_ascii_digit()) => x
            .parse::<f64>()
            .map(|v| Term::Num(-v))
            .unwrap_or_else(|_| Term::Other(s.join(" "))),
        [x, "|", "length"] if is_ident(x) && !KEYWORDS.contains(x) => Term::Len(x.to_string()),
        _ => Term::Other(s.join(" ")),
    }
}

/// A known value of a term, for evaluating atoms.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Known {
    /// Larger than any constant (a counter that keeps growing).
    PlusInf,
    /// Smaller than any constant (a counter that keeps shrinking).
    MinusInf,
    /// A fixed JSON scalar.
    Scalar(serde_json::Value),
}

/// What an evaluation may assume: terms with known values, and which terms are
/// constants a counter at ±∞ compares as bigger / smaller than (number literals are
/// always such constants).
#[derive(Default)]
pub(crate) struct Assume<'a> {
    /// Term → its value (counters at ±∞, latches at their one value).
    pub known: Vec<(Term, Known)>,
    /// Fields whose value is a number that does not change (bounds).
    pub constant_numbers: &'a [String],
}

impl Assume<'_> {
    fn value(&self, t: &Term) -> Option<Known> {
        if let Some((_, k)) = self.known.iter().find(|(x, _)| x == t) {
            return Some(k.clone());
        }
        match t {
            Term::Num(n) => serde_json::Number::from_f64(*n)
                .map(|n| Known::Scalar(serde_json::Value::Number(n))),
            Term::Str(s) => Some(Known::Scalar(serde_json::Value::String(s.clone()))),
            Term::Bool(b) => Some(Known::Scalar(serde_json::Value::Bool(*b))),
            Term::None => Some(Known::Scalar(serde_json::Value::Null)),
            _ => None,
        }
    }

    fn is_finite_number(&self, t: &Term) -> bool {
        match t {
            Term::Num(_) => true,
            Term::Field(f) => self.constant_numbers.iter().any(|c| c == f),
            _ => false,
        }
    }

    /// The value of an atom, when the assumptions fix it.
    fn atom(&self, p: &Pred) -> Option<bool> {
        match p {
            Pred::Truthy(t) => match self.value(t)? {
                Known::PlusInf | Known::MinusInf => Some(true),
                Known::Scalar(v) => Some(truthy(&v)),
            },
            Pred::Cmp(op, a, b) => {
                let (va, vb) = (self.value(a), self.value(b));
                match (va, vb) {
                    (Some(Known::Scalar(x)), Some(Known::Scalar(y))) => {
                        compare_scalars(*op, &x, &y)
                    }
                    (Some(inf @ (Known::PlusInf | Known::MinusInf)), _)
                        if self.is_finite_number(b) =>
                    {
                        Some(infinite_vs_finite(*op, inf == Known::PlusInf))
                    }
                    (_, Some(inf @ (Known::PlusInf | Known::MinusInf)))
                        if self.is_finite_number(a) =>
                    {
                        Some(infinite_vs_finite(op.flip(), inf == Known::PlusInf))
                    }
                    _ => None,
                }
            }
            _ => None,
        }
    }
}

fn infinite_vs_finite(op: Op, plus: bool) -> bool {
    match op {
        Op::Eq => false,
        Op::Ne => true,
        Op::Lt | Op::Le => !plus,
        Op::Gt | Op::Ge => plus,
    }
}

/// Jinja truthiness of a JSON scalar.
pub(crate) fn truthy(v: &serde_json::Value) -> bool {
    use serde_json::Value as V;
    match v {
        V::Null => false,
        V::Bool(b) => *b,
        V::Number(n) => n.as_f64().is_some_and(|x| x != 0.0),
        V::String(s) => !s.is_empty(),
        V::Array(a) => !a.is_empty(),
        V::Object(o) => !o.is_empty(),
    }
}

/// Comparison of two scalars where Jinja's result is clear: equality of values of the
/// same kind, ordering of numbers. Otherwise unknown.
fn compare_scalars(op: Op, a: &serde_json::Value, b: &serde_json::Value) -> Option<bool> {
    use serde_json::Value as V;
    match (a, b) {
        (V::Number(x), V::Number(y)) => {
            let (x, y) = (x.as_f64()?, y.as_f64()?);
            Some(match op {
                Op::Eq => x == y,
                Op::Ne => x != y,
                Op::Lt => x < y,
                Op::Le => x <= y,
                Op::Gt => x > y,
                Op::Ge => x >= y,
            })
        }
        (V::String(_), V::String(_)) | (V::Bool(_), V::Bool(_)) | (V::Null, V::Null) => match op {
            Op::Eq => Some(a == b),
            Op::Ne => Some(a != b),
            _ => None,
        },
        _ => None,
    }
}

/// Whether `pred` can be true under `assume`, every atom it does not fix being a free
/// boolean (equal atoms share one). `None` when there are too many free atoms to
/// enumerate (callers then assume "yes", the conservative answer).
pub(crate) fn satisfiable(pred: &Pred, assume: &Assume<'_>) -> Option<bool> {
    // Three-valued (Kleene) evaluation first: a conjunct fixed false by the
    // assumptions settles it however many free atoms the rest has (a counter past its
    // bound beside 17 free exit conditions was "unknown", hence E054).
    if let Some(v) = eval3(pred, assume) {
        return Some(v);
    }
    let mut atoms: Vec<&Pred> = Vec::new();
    collect_atoms(pred, assume, &mut atoms);
    if atoms.len() > MAX_FREE_ATOMS {
        return None;
    }
    let n = atoms.len();
    for bits in 0u32..(1u32 << n) {
        let free: BTreeMap<usize, bool> = (0..n).map(|i| (i, bits & (1 << i) != 0)).collect();
        if eval(pred, assume, &atoms, &free) {
            return Some(true);
        }
    }
    Some(false)
}

/// Most free atoms [`satisfiable`] enumerates (2^16 assignments).
pub(crate) const MAX_FREE_ATOMS: usize = 16;

fn collect_atoms<'p>(p: &'p Pred, assume: &Assume<'_>, out: &mut Vec<&'p Pred>) {
    match p {
        Pred::And(a, b) | Pred::Or(a, b) => {
            collect_atoms(a, assume, out);
            collect_atoms(b, assume, out);
        }
        Pred::Not(a) => collect_atoms(a, assume, out),
        atom => {
            if assume.atom(atom).is_none() && !out.contains(&atom) {
                out.push(atom);
            }
        }
    }
}

/// The value of `p` when the assumptions fix it whatever the free atoms are
/// (`None`: it depends on them). Sound: `And` is false as soon as one side is,
/// `Or` true as soon as one side is.
fn eval3(p: &Pred, assume: &Assume<'_>) -> Option<bool> {
    match p {
        Pred::And(a, b) => match (eval3(a, assume), eval3(b, assume)) {
            (Some(false), _) | (_, Some(false)) => Some(false),
            (Some(true), Some(true)) => Some(true),
            _ => None,
        },
        Pred::Or(a, b) => match (eval3(a, assume), eval3(b, assume)) {
            (Some(true), _) | (_, Some(true)) => Some(true),
            (Some(false), Some(false)) => Some(false),
            _ => None,
        },
        Pred::Not(a) => eval3(a, assume).map(|v| !v),
        atom => assume.atom(atom),
    }
}

fn eval(p: &Pred, assume: &Assume<'_>, atoms: &[&Pred], free: &BTreeMap<usize, bool>) -> bool {
    match p {
        Pred::And(a, b) => eval(a, assume, atoms, free) && eval(b, assume, atoms, free),
        Pred::Or(a, b) => eval(a, assume, atoms, free) || eval(b, assume, atoms, free),
        Pred::Not(a) => !eval(a, assume, atoms, free),
        atom => assume.atom(atom).unwrap_or_else(|| {
            let i = atoms.iter().position(|x| *x == atom).unwrap_or(0);
            free.get(&i).copied().unwrap_or(false)
        }),
    }
}

/// The condition under which arm `i` of a branch is chosen: every earlier `when` is
/// false and its own is true (`None` for the `else`: only the earlier ones count).
pub(crate) fn choice(earlier: &[Pred], own: Option<&Pred>) -> Pred {
    let mut acc: Option<Pred> = own.cloned();
    for p in earlier.iter().rev() {
        let neg = Pred::Not(Box::new(p.clone()));
        acc = Some(match acc {
            None => neg,
            Some(a) => Pred::And(Box::new(neg), Box::new(a)),
        });
    }
    acc.unwrap_or(Pred::Truthy(Term::Bool(true)))
}

/// How an update expression changes a numeric field, when it is of a shape the bound
/// check knows: `field + N`, `N + field`, `field - N` (N a positive number literal).
/// Returns the signed step.
pub(crate) fn self_step(field: &str, expr: &str) -> Option<f64> {
    let t = tokens(expr);
    let s: Vec<&str> = t.iter().map(String::as_str).collect();
    let num = |x: &str| x.parse::<f64>().ok().filter(|v| *v > 0.0 && v.is_finite());
    match s.as_slice() {
        [f, "+", n] if *f == field => num(n),
        [n, "+", f] if *f == field => num(n),
        [f, "-", n] if *f == field => num(n).map(|v| -v),
        _ => None,
    }
}

/// A number an `add` update adds, when it is a literal (JSON number or an expression
/// that is just a number).
pub(crate) fn literal_number(v: &serde_json::Value) -> Option<f64> {
    match v {
        serde_json::Value::Number(n) => n.as_f64(),
        serde_json::Value::String(s) => match classify(&tokens(s)) {
            Term::Num(n) => Some(n),
            _ => None,
        },
        _ => None,
    }
}

/// The constant value an update writes, when it is a literal: a JSON scalar in the
/// YAML, or an expression that is only a literal (`true`, `'escalated'`, `3`, `none`).
pub(crate) fn literal_value(v: &serde_json::Value) -> Option<serde_json::Value> {
    use serde_json::Value as V;
    match v {
        V::String(s) => match classify(&tokens(s)) {
            Term::Num(n) => serde_json::Number::from_f64(n).map(V::Number),
            Term::Str(s) => Some(V::String(s)),
            Term::Bool(b) => Some(V::Bool(b)),
            Term::None => Some(V::Null),
            _ => None,
        },
        V::Null | V::Bool(_) | V::Number(_) => Some(v.clone()),
        _ => None,
    }
}

/// Whether an expression's value is certainly not an array (so the `append` reducer
/// adds exactly one item): a scalar literal, or a `~` string concatenation at the top
/// level.
pub(crate) fn never_array(v: &serde_json::Value) -> bool {
    match v {
        serde_json::Value::String(s) => {
            let t = tokens(s);
            if !balanced(&t) {
                return false;
            }
            if literal_value(v).is_some() {
                return true;
            }
            let mut depth = 0i32;
            t.iter().any(|x| {
                match x.as_str() {
                    "(" | "[" | "{" => depth += 1,
                    ")" | "]" | "}" => depth -= 1,
                    _ => {}
                }
                depth == 0 && x == "~"
            }) && !t.iter().any(|x| x == "if")
        }
        serde_json::Value::Null | serde_json::Value::Bool(_) | serde_json::Value::Number(_) => true,
        serde_json::Value::Object(_) => true,
        serde_json::Value::Array(_) => false,
    }
}

/// Tokens of an expression: identifiers, numbers, strings (kept whole, with their
/// quotes), two-character operators, and single characters.
pub(crate) fn tokens(s: &str) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric()
                    || chars[i] == '_'
                    || (chars[i] == '.'
                        && chars[start].is_ascii_digit()
                        && chars.get(i + 1).is_some_and(char::is_ascii_digit)))
            {
                i += 1;
            }
            out.push(chars[start..i].iter().collect());
        } else if c == '"' || c == '\'' {
            let start = i;
            i += 1;
            while i < chars.len() && chars[i] != c {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i = (i + 1).min(chars.len());
            out.push(chars[start..i].iter().collect());
        } else {
            let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
            if matches!(two.as_str(), ">=" | "<=" | "==" | "!=" | "//" | "**") {
                out.push(two);
                i += 2;
            } else {
                out.push(c.to_string());
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(s: &str) -> Term {
        Term::Field(s.into())
    }

    #[test]
    fn a_list_literal_is_one_opaque_term_not_the_whole_predicate() {
        let p = parse("n >= 3 or verdict in ['yes', 'maybe']");
        assert_eq!(
            p,
            Pred::Or(
                Box::new(Pred::Cmp(Op::Ge, f("n"), Term::Num(3.0))),
                Box::new(Pred::Truthy(Term::Other(
                    "verdict in [ 'yes' , 'maybe' ]".into()
                )))
            )
        );
        // `and`/`or` inside brackets never split the predicate.
        assert!(matches!(
            parse("n < 3 and x in [a or b]"),
            Pred::And(_, r) if matches!(*r, Pred::Truthy(Term::Other(_)))
        ));
        // A tuple, a ternary, mismatched brackets: opaque as a whole.
        for t in ["a, b", "(a, b)", "a if b else c", "(a]"] {
            assert!(matches!(parse(t), Pred::Truthy(Term::Other(_))), "{t}");
        }
    }

    #[test]
    fn parses_boolean_structure() {
        assert_eq!(
            parse("n >= max and question == 'never'"),
            Pred::And(
                Box::new(Pred::Cmp(Op::Ge, f("n"), f("max"))),
                Box::new(Pred::Cmp(Op::Eq, f("question"), Term::Str("never".into())))
            )
        );
        assert_eq!(
            parse("not (a or b)"),
            Pred::Not(Box::new(Pred::Or(
                Box::new(Pred::Truthy(f("a"))),
                Box::new(Pred::Truthy(f("b")))
            )))
        );
        assert_eq!(
            parse("history | length > 5"),
            Pred::Cmp(Op::Gt, Term::Len("history".into()), Term::Num(5.0))
        );
        assert_eq!(
            parse("x is not none"),
            Pred::Truthy(Term::Other("x is not none".into()))
        );
        // A ternary is followed no further.
        assert!(matches!(
            parse("a if n < 3 else b"),
            Pred::Truthy(Term::Other(_))
        ));
        assert!(matches!(parse("a < b < c"), Pred::Truthy(Term::Other(_))));
        assert!(matches!(parse("(a"), Pred::Truthy(Term::Other(_))));
    }

    #[test]
    fn counter_at_infinity() {
        let bounds = vec!["max".to_string()];
        let assume = Assume {
            known: vec![(f("n"), Known::PlusInf)],
            constant_numbers: &bounds,
        };
        let stay = choice(&[parse("n >= max and q")], None);
        assert_eq!(satisfiable(&stay, &assume), Some(true));
        let stay = choice(&[], Some(&parse("n < max and answer | length < 20")));
        assert_eq!(satisfiable(&stay, &assume), Some(false));
        let stay = choice(&[parse("n >= max or q")], None);
        assert_eq!(satisfiable(&stay, &assume), Some(false));
        // `other` is not a known constant: no conclusion.
        let stay = choice(&[], Some(&parse("n < other")));
        assert_eq!(satisfiable(&stay, &assume), Some(true));
    }

    #[test]
    fn update_shapes() {
        assert_eq!(self_step("n", "n + 1"), Some(1.0));
        assert_eq!(self_step("n", "2+n"), Some(2.0));
        assert_eq!(self_step("n", "n - 1"), Some(-1.0));
        assert_eq!(self_step("n", "m + 1"), None);
        assert_eq!(self_step("n", "n + 1 * 0"), None);
        assert_eq!(literal_number(&serde_json::json!("1")), Some(1.0));
        assert_eq!(
            literal_value(&serde_json::json!("true")),
            Some(serde_json::json!(true))
        );
        assert!(never_array(&serde_json::json!("'rewrote: ' ~ output")));
        assert!(!never_array(&serde_json::json!("output")));
        assert!(!never_array(&serde_json::json!(
            "[output] ~ 'x' if a else []"
        )));
    }
}
