//! `{% set %}` scoping as minijinja renders it: which names a template has defined
//! at each point. An `{% if %}` defines after it what every branch defines (what only
//! some define "may be undefined"); `{% for %}`, `{% with %}`, `{% macro %}` and
//! `{% block %}` bodies keep their names; `{% filter %}` and `{% set %}` blocks, and a
//! loop's `{% else %}`, share the enclosing frame.
use super::schema::Ty;
use super::walk::{Walker, MAX_DEPTH};
use indexmap::IndexMap;
use minijinja::machinery::ast::{self, Expr, Stmt};

/// The block kinds whose `{% set %}` names end with the block.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Block {
    For,
    With,
    Macro,
    /// A `{% block %}`.
    Named,
}

impl Block {
    pub(super) fn tag(self) -> &'static str {
        match self {
            Block::For => "for",
            Block::With => "with",
            Block::Macro => "macro",
            Block::Named => "block",
        }
    }
}

/// Names a template defined so far (beyond the [`Vars`] it starts with).
#[derive(Clone, Debug, Default)]
pub(super) struct Frame {
    /// Set on every path to here.
    pub(super) defined: IndexMap<String, Ty>,
    /// Set on some paths only (an `{% if %}` branch).
    pub(super) maybe: IndexMap<String, Ty>,
    /// Set inside a block that has ended: not visible here.
    pub(super) gone: IndexMap<String, Block>,
}

impl Frame {
    fn define(&mut self, name: &str, ty: Ty) {
        self.maybe.shift_remove(name);
        self.gone.shift_remove(name);
        self.defined.insert(name.to_string(), ty);
    }

    /// The frame after an `{% if %}` whose branches left `a` and `b`.
    fn join(a: Frame, b: Frame) -> Frame {
        let mut out = Frame::default();
        for (k, t) in &a.defined {
            if let Some(u) = b.defined.get(k) {
                out.defined
                    .insert(k.clone(), Ty::union(t.clone(), u.clone()));
            }
        }
        for (k, t) in a
            .defined
            .iter()
            .chain(&b.defined)
            .chain(&a.maybe)
            .chain(&b.maybe)
        {
            if !out.defined.contains_key(k) {
                let prev = out.maybe.shift_remove(k);
                let t = match prev {
                    Some(p) => Ty::union(p, t.clone()),
                    None => t.clone(),
                };
                out.maybe.insert(k.clone(), t);
            }
        }
        for (k, blk) in a.gone.iter().chain(&b.gone) {
            if !out.defined.contains_key(k) && !out.maybe.contains_key(k) {
                out.gone.insert(k.clone(), *blk);
            }
        }
        out
    }

    /// Ends a scoped block entered at `outer`: what the block set is gone.
    fn close(outer: &mut Frame, inner: &Frame, blk: Block) {
        for k in inner.defined.keys().chain(inner.maybe.keys()) {
            if !outer.defined.contains_key(k) && !outer.maybe.contains_key(k) {
                outer.gone.insert(k.clone(), blk);
            }
        }
    }
}

impl Walker<'_> {
    /// Walks a whole template.
    pub(super) fn template(&mut self, root: &Stmt<'_>) {
        let mut frame = Frame::default();
        self.stmt(root, &mut frame, 0);
    }

    fn stmts(&mut self, body: &[Stmt<'_>], frame: &mut Frame, depth: usize) {
        for s in body {
            self.stmt(s, frame, depth + 1);
        }
    }

    fn scoped(
        &mut self,
        body: &[Stmt<'_>],
        frame: &mut Frame,
        inner: Frame,
        blk: Block,
        depth: usize,
    ) {
        let mut inner = inner;
        self.stmts(body, &mut inner, depth);
        Frame::close(frame, &inner, blk);
    }

    fn stmt(&mut self, s: &Stmt<'_>, frame: &mut Frame, depth: usize) {
        if depth > MAX_DEPTH {
            return;
        }
        match s {
            Stmt::Template(t) => self.stmts(&t.children, frame, depth),
            Stmt::EmitExpr(e) => {
                self.expr(&e.expr, frame, depth);
            }
            Stmt::EmitRaw(_) => {}
            Stmt::ForLoop(f) => {
                let iter = self.expr(&f.iter, frame, depth);
                let mut inner = frame.clone();
                self.bind(&f.target, iter.element(), &mut inner);
                inner.define("loop", Ty::Unknown);
                if let Some(filter) = &f.filter_expr {
                    self.expr(filter, &inner, depth);
                }
                self.scoped(&f.body, frame, inner, Block::For, depth);
                // `{% else %}` runs in the enclosing frame, only for an empty loop.
                if !f.else_body.is_empty() {
                    let mut b = frame.clone();
                    self.stmts(&f.else_body, &mut b, depth);
                    *frame = Frame::join(frame.clone(), b);
                }
            }
            Stmt::IfCond(i) => {
                self.expr(&i.expr, frame, depth);
                let mut a = frame.clone();
                // `{% if x is defined %}`: inside, a maybe-set `x` is set.
                if let Expr::Test(t) = &i.expr {
                    if let (Expr::Var(v), "defined") = (&t.expr, t.name) {
                        if let Some(ty) = a.maybe.shift_remove(v.id) {
                            a.defined.insert(v.id.to_string(), ty);
                        }
                    }
                }
                self.stmts(&i.true_body, &mut a, depth);
                let mut b = frame.clone();
                self.stmts(&i.false_body, &mut b, depth);
                *frame = Frame::join(a, b);
            }
            Stmt::WithBlock(w) => {
                let mut inner = frame.clone();
                for (target, value) in &w.assignments {
                    let t = self.expr(value, &inner, depth);
                    self.bind(target, t, &mut inner);
                }
                self.scoped(&w.body, frame, inner, Block::With, depth);
            }
            Stmt::Set(set) => {
                let t = self.expr(&set.expr, frame, depth);
                self.bind(&set.target, t, frame);
            }
            // A set block's body shares the frame (as minijinja renders it).
            Stmt::SetBlock(set) => {
                self.stmts(&set.body, frame, depth);
                let t = match &set.filter {
                    Some(f) => {
                        self.expr(f, frame, depth);
                        Ty::Unknown
                    }
                    None => Ty::string(),
                };
                self.bind(&set.target, t, frame);
            }
            Stmt::AutoEscape(a) => {
                self.expr(&a.enabled, frame, depth);
                self.stmts(&a.body, frame, depth);
            }
            // A filter block shares its frame: its names stay visible after it.
            Stmt::FilterBlock(f) => {
                self.expr(&f.filter, frame, depth);
                self.stmts(&f.body, frame, depth);
            }
            Stmt::Block(b) => {
                let inner = frame.clone();
                self.scoped(&b.body, frame, inner, Block::Named, depth);
            }
            Stmt::Import(i) => self.bind(&i.name, Ty::Unknown, frame),
            Stmt::FromImport(i) => {
                for (name, alias) in &i.names {
                    self.bind(alias.as_ref().unwrap_or(name), Ty::Unknown, frame);
                }
            }
            Stmt::Extends(_) | Stmt::Include(_) => {}
            Stmt::Macro(m) => {
                self.macro_body(m, frame, depth);
                frame.define(m.name, Ty::Unknown);
            }
            Stmt::CallBlock(c) => {
                self.call_args(&c.call.args, frame, depth);
                self.expr(&c.call.expr, frame, depth);
                self.macro_body(&c.macro_decl, frame, depth);
            }
            Stmt::Do(d) => {
                self.call_args(&d.call.args, frame, depth);
                self.expr(&d.call.expr, frame, depth);
            }
            #[allow(unreachable_patterns)]
            _ => {}
        }
    }

    fn macro_body(&mut self, m: &ast::Macro<'_>, frame: &mut Frame, depth: usize) {
        for d in &m.defaults {
            self.expr(d, frame, depth);
        }
        let mut inner = frame.clone();
        for a in &m.args {
            self.bind(a, Ty::Unknown, &mut inner);
        }
        for n in ["caller", "varargs", "kwargs"] {
            inner.define(n, Ty::Unknown);
        }
        // A macro's names never leave it.
        let mut scratch = frame.clone();
        self.scoped(&m.body, &mut scratch, inner, Block::Macro, depth);
    }

    fn bind(&mut self, target: &Expr<'_>, ty: Ty, frame: &mut Frame) {
        match target {
            Expr::Var(v) => frame.define(v.id, ty),
            Expr::List(l) => {
                for item in &l.items {
                    self.bind(item, Ty::Unknown, frame);
                }
            }
            // `{% set ns.x = ... %}`: an attribute of a namespace, not a name.
            _ => {}
        }
    }
}
