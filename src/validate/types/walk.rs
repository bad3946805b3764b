//! The walker: infers the [`Ty`] of every expression of minijinja's AST, reports
//! what is known to fail or misbehave (a missing property, a string outside an enum,
//! an ordering or arithmetic between a number and a string); names come from the
//! [`Vars`] and from the `scope` module's frames.
use super::schema::Ty;
use super::scope::Frame;
use super::{Finding, Vars};
use crate::diag::Code;
use indexmap::IndexMap;
use minijinja::machinery::ast::{self, BinOpKind, CallArg, Expr, UnaryOpKind};
use minijinja::machinery::Span as JSpan;

/// Deepest AST nesting walked; deeper parts are typed [`Ty::Unknown`] unchecked.
/// (minijinja's parser bounds nesting too; this keeps the walker safe on its own.)
pub(super) const MAX_DEPTH: usize = 256;

/// Walks one template or expression.
pub(super) struct Walker<'v> {
    vars: &'v Vars,
    /// The checked text, to quote an expression that is not a plain path
    /// (`(grades | first)`) as written.
    src: &'v str,
    /// Report names that are not defined (templates; expressions' names are checked
    /// by the caller already).
    report_names: bool,
    pub(super) findings: Vec<Finding>,
}

/// Where an expression's text starts: minijinja's span of a filter, test, attribute
/// or operator starts at the operator, not at its left operand.
fn leftmost(e: &Expr<'_>, depth: usize) -> u32 {
    if depth > 64 {
        return e.span().start_offset;
    }
    let start = match e {
        Expr::Filter(f) => f.expr.as_ref().map(|x| leftmost(x, depth + 1)),
        Expr::Test(t) => Some(leftmost(&t.expr, depth + 1)),
        Expr::GetAttr(g) => Some(leftmost(&g.expr, depth + 1)),
        Expr::GetItem(g) => Some(leftmost(&g.expr, depth + 1)),
        Expr::BinOp(b) => Some(leftmost(&b.left, depth + 1)),
        _ => None,
    };
    start.map_or(e.span().start_offset, |s| s.min(e.span().start_offset))
}

fn range(s: JSpan) -> std::ops::Range<usize> {
    s.start_offset as usize..s.end_offset as usize
}

const FILTER_NAMES: &[&str] = &[
    "length", "count", "first", "last", "lower", "upper", "trim", "join", "list", "default",
    "sort", "unique", "reverse", "map", "select", "reject", "int", "float", "string", "tojson",
];

impl<'v> Walker<'v> {
    pub(super) fn new(vars: &'v Vars, src: &'v str, report_names: bool) -> Self {
        Walker {
            vars,
            src,
            report_names,
            findings: Vec::new(),
        }
    }

    /// An expression as written in the source (parenthesised), or "the value" when its
    /// span does not map onto the text.
    fn written(&self, e: &Expr<'_>) -> String {
        let r = leftmost(e, 0) as usize..e.span().end_offset as usize;
        match self.src.get(r) {
            Some(t) if !t.trim().is_empty() && t.len() <= 80 => {
                let t = t.trim();
                if t.starts_with('(') && t.ends_with(')') {
                    t.to_string()
                } else {
                    format!("({t})")
                }
            }
            _ => "the value".into(),
        }
    }

    pub(super) fn push(&mut self, code: Code, at: JSpan, message: String, help: Option<String>) {
        self.findings.push(Finding {
            code,
            message,
            help,
            range: range(at),
        });
    }

    /// Walks a whole template.
    pub(super) fn call_args(
        &mut self,
        args: &[CallArg<'_>],
        frame: &Frame,
        depth: usize,
    ) -> Vec<Ty> {
        args.iter()
            .map(|a| match a {
                CallArg::Pos(e)
                | CallArg::Kwarg(_, e)
                | CallArg::PosSplat(e)
                | CallArg::KwargSplat(e) => self.expr(e, frame, depth),
            })
            .collect()
    }

    /// Walks a standalone expression.
    pub(super) fn expression(&mut self, e: &Expr<'_>) -> Ty {
        self.expr(e, &Frame::default(), 0)
    }

    /// `lenient`: read under `is defined`, `default`, ...: a name set in only some
    /// branches is what the test is for (no W013).
    fn var(&mut self, v: &ast::Var<'_>, span: JSpan, frame: &Frame, lenient: bool) -> Ty {
        let name = v.id;
        if let Some(t) = frame.defined(name) {
            return t.clone();
        }
        if let Some(t) = self.vars.get(name) {
            return t.clone();
        }
        if crate::jinja::GLOBAL_NAMES.contains(&name) {
            return Ty::Unknown;
        }
        if let Some(t) = frame.maybe(name) {
            if self.report_names && !lenient {
                self.push(
                    Code::MaybeUndefined,
                    span,
                    format!("`{name}` may be undefined here: a block before sets it on some paths only (some branches of an `{{% if %}}`, or a loop's `{{% else %}}`, which runs only for an empty list)"),
                    Some("set it before the block, or on every path (every `{% if %}` branch, `{% else %}` included); or test it with `is defined`".into()),
                );
            }
            return t.clone();
        }
        if self.report_names && !self.vars.open {
            if let Some(blk) = frame.gone(name) {
                let tag = blk.tag();
                self.push(
                    Code::TemplateUnknownVar,
                    span,
                    format!("`{name}` is set inside a `{{% {tag} %}}` block and is not visible after it"),
                    Some(format!(
                        "a `{{% set %}}` inside `{{% {tag} %}}` ends with the block (as at run time); use a `namespace()` to carry a value out of a loop"
                    )),
                );
            } else {
                let mut names: Vec<String> = self.vars.names();
                names.extend(frame.defined_names().cloned());
                self.push(
                    Code::TemplateUnknownVar,
                    span,
                    format!("reads `{name}`, which is not a state field or a builtin here"),
                    Some(crate::validate::refs::suggest(name, names)),
                );
            }
        }
        Ty::Unknown
    }

    /// The type of `e`. `lenient`: a missing attribute is not a fault here (under
    /// `default`, `is defined`, ...).
    pub(super) fn expr(&mut self, e: &Expr<'_>, frame: &Frame, depth: usize) -> Ty {
        self.expr_in(e, frame, depth, false)
    }

    fn expr_in(&mut self, e: &Expr<'_>, frame: &Frame, depth: usize, lenient: bool) -> Ty {
        if depth > MAX_DEPTH {
            return Ty::Unknown;
        }
        let d = depth + 1;
        match e {
            Expr::Var(v) => self.var(v, v.span(), frame, lenient),
            Expr::Const(c) => const_ty(&c.value),
            Expr::Slice(s) => {
                let base = self.expr(&s.expr, frame, d);
                for part in [&s.start, &s.stop, &s.step].into_iter().flatten() {
                    self.expr(part, frame, d);
                }
                match base {
                    t @ (Ty::Array(_) | Ty::Str(_)) => t,
                    _ => Ty::Unknown,
                }
            }
            Expr::UnaryOp(u) => {
                let t = self.expr(&u.expr, frame, d);
                match u.op {
                    UnaryOpKind::Not => Ty::Bool,
                    UnaryOpKind::Neg if t.is_numeric() => t,
                    UnaryOpKind::Neg => Ty::Unknown,
                }
            }
            Expr::BinOp(b) => self.binop(b, frame, d),
            Expr::Compare(c) => {
                let mut left_e = &c.expr;
                let mut left = self.expr(left_e, frame, d);
                for op in &c.ops {
                    let right = self.expr(&op.expr, frame, d);
                    let kind = match op.op {
                        ast::CompareOpKind::Eq => BinOpKind::Eq,
                        ast::CompareOpKind::Ne => BinOpKind::Ne,
                        ast::CompareOpKind::Lt => BinOpKind::Lt,
                        ast::CompareOpKind::Lte => BinOpKind::Lte,
                        ast::CompareOpKind::Gt => BinOpKind::Gt,
                        ast::CompareOpKind::Gte => BinOpKind::Gte,
                        ast::CompareOpKind::In | ast::CompareOpKind::NotIn => BinOpKind::In,
                    };
                    self.compare(kind, left_e, &left, &op.expr, &right);
                    left_e = &op.expr;
                    left = right;
                }
                Ty::Bool
            }
            Expr::IfExpr(i) => {
                self.expr(&i.test_expr, frame, d);
                let t = self.expr_in(&i.true_expr, frame, d, lenient);
                match &i.false_expr {
                    Some(f) => {
                        let f = self.expr_in(f, frame, d, lenient);
                        Ty::union(t, f)
                    }
                    None => Ty::Unknown,
                }
            }
            Expr::Filter(f) => self.filter(f, frame, d, lenient),
            Expr::Test(t) => {
                let lenient = matches!(t.name, "defined" | "undefined" | "none");
                self.expr_in(&t.expr, frame, d, lenient);
                self.call_args(&t.args, frame, d);
                Ty::Bool
            }
            Expr::GetAttr(g) => {
                let base = self.expr_in(&g.expr, frame, d, lenient);
                let name_at = name_span(g.span(), g.name);
                self.attr(&g.expr, &base, g.name, name_at, lenient)
            }
            Expr::GetItem(g) => {
                let base = self.expr_in(&g.expr, frame, d, lenient);
                let sub = self.expr(&g.subscript_expr, frame, d);
                match &g.subscript_expr {
                    Expr::Const(c) if c.value.as_str().is_some() => {
                        let key = c.value.as_str().unwrap_or_default().to_string();
                        self.attr(&g.expr, &base, &key, c.span(), lenient)
                    }
                    _ if sub.is_numeric() => base.element_of_array(),
                    _ => Ty::Unknown,
                }
            }
            Expr::Call(c) => {
                // A method call (`x.items()`): the callee's attribute is not a property.
                match &c.expr {
                    Expr::GetAttr(g) => {
                        self.expr(&g.expr, frame, d);
                    }
                    other => {
                        self.expr(other, frame, d);
                    }
                }
                self.call_args(&c.args, frame, d);
                match &c.expr {
                    Expr::Var(v) if v.id == "range" => Ty::Array(Box::new(Ty::Int)),
                    Expr::Var(v) if v.id == "dict" => Ty::open_object(),
                    _ => Ty::Unknown,
                }
            }
            Expr::List(l) => {
                let items: Vec<Ty> = l.items.iter().map(|i| self.expr(i, frame, d)).collect();
                Ty::Array(Box::new(if items.is_empty() {
                    Ty::Unknown
                } else {
                    Ty::union_all(items)
                }))
            }
            Expr::Map(m) => {
                let mut props = IndexMap::new();
                let mut open = false;
                for (k, v) in m.keys.iter().zip(&m.values) {
                    self.expr(k, frame, d);
                    let t = self.expr(v, frame, d);
                    match k {
                        Expr::Const(c) if c.value.as_str().is_some() => {
                            props.insert(c.value.as_str().unwrap_or_default().to_string(), t);
                        }
                        _ => open = true,
                    }
                }
                Ty::Object { props, open }
            }
        }
    }

    /// The type of attribute `name` of `base`; reports a property the schema lacks.
    fn attr(&mut self, base_e: &Expr<'_>, base: &Ty, name: &str, at: JSpan, lenient: bool) -> Ty {
        let members = base.non_null();
        if members.is_empty() || members.iter().any(|t| **t == Ty::Unknown) {
            return Ty::Unknown;
        }
        let mut found = Vec::new();
        let mut open = false;
        for t in &members {
            if let Ty::Object { props, open: o } = t {
                match props.get(name) {
                    Some(p) => found.push(p.clone()),
                    None if *o => open = true,
                    None => {}
                }
            }
        }
        if open {
            return Ty::Unknown;
        }
        if !found.is_empty() {
            return Ty::union_all(found);
        }
        if lenient {
            return Ty::Unknown;
        }
        let path = path_text(base_e).unwrap_or_else(|| self.written(base_e));
        let props: Vec<String> = members
            .iter()
            .flat_map(|t| match t {
                Ty::Object { props, .. } => props.keys().cloned().collect::<Vec<_>>(),
                _ => Vec::new(),
            })
            .collect();
        let all_objects = members.iter().all(|t| matches!(t, Ty::Object { .. }));
        let (message, help) = if all_objects {
            let help = match crate::jinja::closest(name, &props) {
                Some(c) => format!("did you mean `{path}.{c}`?"),
                None if props.is_empty() => "the schema declares no properties".to_string(),
                None => format!("its properties: {}", props.join(", ")),
            };
            (
                format!("`{path}.{name}`: the schema of `{path}` has no property `{name}`"),
                help,
            )
        } else {
            let help = match crate::jinja::closest(name, FILTER_NAMES) {
                Some(f) => format!("did you mean the filter `{path} | {f}`?"),
                None => format!("a {} has no attributes", base.name()),
            };
            (
                format!(
                    "`{path}.{name}`: `{path}` is {} {}, which has no attribute `{name}`",
                    article(&base.name()),
                    base.name()
                ),
                help,
            )
        };
        self.push(Code::UnknownAttribute, at, message, Some(help));
        Ty::Unknown
    }

    fn filter(&mut self, f: &ast::Filter<'_>, frame: &Frame, d: usize, lenient: bool) -> Ty {
        let input = match &f.expr {
            Some(e) => self.expr_in(e, frame, d, lenient || f.name == "default" || f.name == "d"),
            None => Ty::Unknown,
        };
        let args = self.call_args(&f.args, frame, d);
        match f.name {
            "length" | "count" | "wordcount" | "count_graded" => Ty::Int,
            "int" => Ty::Int,
            "float" => Ty::Num,
            "bool" => Ty::Bool,
            "lower" | "upper" | "trim" | "title" | "capitalize" | "string" | "join" | "replace"
            | "escape" | "e" | "safe" | "striptags" | "truncate" | "format" | "indent"
            | "urlencode" | "tojson" | "pprint" | "cite" | "center" => Ty::string(),
            "first" | "last" | "min" | "max" | "random" => input.element(),
            "list" => Ty::Array(Box::new(input.element())),
            "sort" | "unique" | "reverse" | "select" | "reject" | "selectattr" | "rejectattr"
            | "select_graded" => match input {
                t @ (Ty::Array(_) | Ty::Str(_)) => t,
                _ => Ty::Unknown,
            },
            "abs" if input.is_numeric() => input,
            "round" if input.is_numeric() => Ty::Num,
            "default" | "d" => match args.into_iter().next() {
                Some(a) => Ty::union(input, a),
                None => Ty::Unknown,
            },
            // Unknown filters (reported elsewhere) and the rest: unknown type.
            _ => Ty::Unknown,
        }
    }

    fn binop(&mut self, b: &ast::BinOp<'_>, frame: &Frame, d: usize) -> Ty {
        let left = self.expr(&b.left, frame, d);
        let right = self.expr(&b.right, frame, d);
        match b.op {
            BinOpKind::ScAnd | BinOpKind::ScOr => Ty::union(left, right),
            BinOpKind::Eq
            | BinOpKind::Ne
            | BinOpKind::Lt
            | BinOpKind::Lte
            | BinOpKind::Gt
            | BinOpKind::Gte
            | BinOpKind::In => {
                self.compare(b.op, &b.left, &left, &b.right, &right);
                Ty::Bool
            }
            BinOpKind::Concat => Ty::string(),
            BinOpKind::Add
            | BinOpKind::Sub
            | BinOpKind::Div
            | BinOpKind::FloorDiv
            | BinOpKind::Pow
            | BinOpKind::Mul
            | BinOpKind::Rem => self.arith(b, &left, &right),
        }
    }

    fn arith(&mut self, b: &ast::BinOp<'_>, left: &Ty, right: &Ty) -> Ty {
        let op = match b.op {
            BinOpKind::Add => "+",
            BinOpKind::Sub => "-",
            BinOpKind::Div => "/",
            BinOpKind::FloorDiv => "//",
            BinOpKind::Pow => "**",
            BinOpKind::Mul => "*",
            _ => "%",
        };
        if left.is_numeric() && right.is_numeric() {
            let both_int = left
                .non_null()
                .iter()
                .chain(right.non_null().iter())
                .all(|t| **t == Ty::Int);
            return match b.op {
                BinOpKind::Div => Ty::Num,
                _ if both_int => Ty::Int,
                _ => Ty::Num,
            };
        }
        // `*` repeats a string and `%` may format one: only `+ - / // **` are refused.
        let mixed =
            (left.is_numeric() && right.is_string()) || (left.is_string() && right.is_numeric());
        if mixed && !matches!(b.op, BinOpKind::Mul | BinOpKind::Rem) {
            let (bad_e, bad_t) = if right.is_string() {
                (&b.right, right)
            } else {
                (&b.left, left)
            };
            let (lt, rt) = (left.name(), right.name());
            self.push(
                Code::IncompatibleOperands,
                bad_e.span(),
                format!(
                    "`{op}` between {} {lt} and {} {rt} fails at run time",
                    article(&lt),
                    article(&rt)
                ),
                Some(hint_for(bad_e, bad_t)),
            );
            return Ty::Unknown;
        }
        if matches!(b.op, BinOpKind::Add) && left.is_string() && right.is_string() {
            return Ty::string();
        }
        Ty::Unknown
    }

    fn compare(&mut self, op: BinOpKind, le: &Expr<'_>, lt: &Ty, re: &Expr<'_>, rt: &Ty) {
        match op {
            BinOpKind::Eq | BinOpKind::Ne => {
                self.enum_literal(lt, le, re);
                self.enum_literal(rt, re, le);
            }
            BinOpKind::In => {
                // `field in ['a', 'b']`: every listed string must be allowed.
                if let Expr::List(l) = re {
                    for item in &l.items {
                        self.enum_literal(lt, le, item);
                    }
                }
            }
            _ => {
                let mixed =
                    (lt.is_numeric() && rt.is_string()) || (lt.is_string() && rt.is_numeric());
                if mixed {
                    // Point at the literal when there is one, else at the right operand.
                    let (bad_e, bad_t) =
                        if matches!(re, Expr::Const(_)) || !matches!(le, Expr::Const(_)) {
                            (re, rt)
                        } else {
                            (le, lt)
                        };
                    let (ln, rn) = (lt.name(), rt.name());
                    self.push(
                        Code::IncompatibleOperands,
                        bad_e.span(),
                        format!(
                            "ordering between {} {ln} and {} {rn}: minijinja compares them by kind, not by value",
                            article(&ln),
                            article(&rn)
                        ),
                        Some(hint_for(bad_e, bad_t)),
                    );
                }
            }
        }
    }

    /// `field == 'Yes'` where `field`'s enum lacks `Yes`.
    fn enum_literal(&mut self, field: &Ty, field_e: &Expr<'_>, lit: &Expr<'_>) {
        let Expr::Const(c) = lit else { return };
        // Two constants: a fixed comparison, not a field against its enum.
        if matches!(field_e, Expr::Const(_)) {
            return;
        }
        let Some(s) = c.value.as_str() else { return };
        let Some(allowed) = field.string_enum() else {
            return;
        };
        if allowed.iter().any(|a| a == s) {
            return;
        }
        let path = path_text(field_e).unwrap_or_else(|| self.written(field_e));
        let shown: Vec<String> = allowed.iter().map(|a| format!("'{a}'")).collect();
        let help = match crate::jinja::closest(s, &allowed) {
            Some(c) => format!("did you mean '{c}'? allowed: {}", shown.join(", ")),
            None => format!("allowed: {}", shown.join(", ")),
        };
        self.push(
            Code::EnumLiteral,
            c.span(),
            format!(
                "`{path}` is never '{s}': its schema allows only {}",
                shown.join(", ")
            ),
            Some(help),
        );
    }
}

impl Ty {
    /// The element of an array type (for `x[0]`), else unknown.
    fn element_of_array(&self) -> Ty {
        match self {
            Ty::Array(e) => (**e).clone(),
            _ => Ty::Unknown,
        }
    }
}

fn const_ty(v: &minijinja::Value) -> Ty {
    use minijinja::value::ValueKind;
    match v.kind() {
        ValueKind::None | ValueKind::Undefined => Ty::Null,
        ValueKind::Bool => Ty::Bool,
        ValueKind::Number => {
            if v.as_i64().is_some() && !v.to_string().contains(['.', 'e', 'E']) {
                Ty::Int
            } else {
                Ty::Num
            }
        }
        ValueKind::String => Ty::Str(v.as_str().map(|s| vec![s.to_string()])),
        _ => Ty::Unknown,
    }
}

fn article(name: &str) -> &'static str {
    if name.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    }
}

fn hint_for(e: &Expr<'_>, t: &Ty) -> String {
    match e {
        Expr::Const(c) if c.value.as_str().is_some() => {
            let s = c.value.as_str().unwrap_or_default();
            if s.trim().parse::<f64>().is_ok() {
                format!("write the number without quotes: {}", s.trim())
            } else {
                "compare a number with a number".to_string()
            }
        }
        _ if t.is_string() => "convert it first: `| int` or `| float`".to_string(),
        _ => "convert the other operand: `| int`, `| float` or `| string`".to_string(),
    }
}

/// The span of an attribute's name: the end of a `GetAttr` span.
fn name_span(whole: JSpan, name: &str) -> JSpan {
    let len = name.len() as u32;
    let start = whole.end_offset.saturating_sub(len).max(whole.start_offset);
    JSpan {
        start_line: whole.end_line,
        start_col: whole.end_col.saturating_sub(len as u16),
        start_offset: start,
        ..whole
    }
}

/// `a.b.c` for a dotted path, `None` for other expressions.
fn path_text(e: &Expr<'_>) -> Option<String> {
    match e {
        Expr::Var(v) => Some(v.id.to_string()),
        Expr::GetAttr(g) => path_text(&g.expr).map(|p| format!("{p}.{}", g.name)),
        Expr::GetItem(g) => {
            let base = path_text(&g.expr)?;
            match &g.subscript_expr {
                Expr::Const(c) => Some(format!("{base}[{}]", c.value)),
                _ => Some(format!("{base}[...]")),
            }
        }
        _ => None,
    }
}
