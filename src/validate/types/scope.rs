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
    /// A `{% block %}`.
    Named,
}

impl Block {
    pub(super) fn tag(self) -> &'static str {
        match self {
            Block::For => "for",
            Block::With => "with",
            Block::Named => "block",
        }
    }
}

/// What a template has done with a name so far.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Named {
    /// Set on every path to here.
    Defined(Ty),
    /// Set on some paths only (an `{% if %}` branch).
    Maybe(Ty),
    /// Set inside a block that has ended: not visible here.
    Gone(Block),
}

/// Names a template defined so far (beyond the [`Vars`] it starts with).
///
/// One map, changed in place; every change is logged with the value it replaced, so
/// a branch or a scoped block is walked on the frame itself and undone after
/// ([`Frame::undo_to`]), and an `{% if %}` joins only the names its branches changed.
/// A template's walk is linear in its statements times their nesting depth (a copy
/// of the frame per branch made `N` partial `{% set %}` quadratic, and the joins cubic).
#[derive(Clone, Debug, Default)]
pub(super) struct Frame {
    names: IndexMap<String, Named>,
    /// `(name, value before the change)`, oldest first.
    log: Vec<(String, Option<Named>)>,
}

#[cfg(test)]
thread_local! {
    /// Name entries the frames touched on this thread (changes, undos, joins, closes):
    /// tests bound a template's scope work by it.
    pub(super) static STEPS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

fn step() {
    #[cfg(test)]
    STEPS.with(|c| c.set(c.get() + 1));
}

/// The names a walk changed since a mark, with their values after it.
type Delta = IndexMap<String, Option<Named>>;

impl Frame {
    /// The type of a name set on every path to here.
    pub(super) fn defined(&self, name: &str) -> Option<&Ty> {
        match self.names.get(name) {
            Some(Named::Defined(t)) => Some(t),
            _ => None,
        }
    }

    /// The type of a name set on some paths only.
    pub(super) fn maybe(&self, name: &str) -> Option<&Ty> {
        match self.names.get(name) {
            Some(Named::Maybe(t)) => Some(t),
            _ => None,
        }
    }

    /// The block a name was set in, when that block has ended.
    pub(super) fn gone(&self, name: &str) -> Option<Block> {
        match self.names.get(name) {
            Some(Named::Gone(b)) => Some(*b),
            _ => None,
        }
    }

    /// The names set on every path to here.
    pub(super) fn defined_names(&self) -> impl Iterator<Item = &String> {
        self.names
            .iter()
            .filter(|(_, n)| matches!(n, Named::Defined(_)))
            .map(|(k, _)| k)
    }

    fn put(&mut self, name: &str, value: Option<Named>) {
        step();
        if self.names.get(name) == value.as_ref() {
            return;
        }
        let before = match value {
            Some(v) => self.names.insert(name.to_string(), v),
            None => self.names.swap_remove(name),
        };
        self.log.push((name.to_string(), before));
    }

    fn define(&mut self, name: &str, ty: Ty) {
        self.put(name, Some(Named::Defined(ty)));
    }

    fn mark(&self) -> usize {
        self.log.len()
    }

    /// Undoes every change since `mark`; returns the names changed and their values
    /// before the undo, in the order first changed.
    fn undo_to(&mut self, mark: usize) -> Delta {
        let mut after: Delta = IndexMap::new();
        for (name, _) in &self.log[mark..] {
            step();
            if !after.contains_key(name) {
                after.insert(name.clone(), self.names.get(name).cloned());
            }
        }
        while self.log.len() > mark {
            let Some((name, before)) = self.log.pop() else {
                break;
            };
            step();
            match before {
                Some(v) => {
                    self.names.insert(name, v);
                }
                None => {
                    self.names.swap_remove(&name);
                }
            }
        }
        after
    }

    /// After an `{% if %}` whose branches changed `a` and `b` (from this frame):
    /// set on both paths is set, on one only "maybe", gone when gone on one and unset
    /// on the other.
    fn join(&mut self, a: Delta, b: Delta) {
        let mut names: Vec<String> = a.keys().cloned().collect();
        names.extend(b.keys().filter(|k| !a.contains_key(*k)).cloned());
        for name in names {
            step();
            let before = self.names.get(&name).cloned();
            let sa = a.get(&name).cloned().unwrap_or_else(|| before.clone());
            let sb = b.get(&name).cloned().unwrap_or(before);
            let joined = join_one(sa, sb);
            self.put(&name, joined);
        }
    }

    /// Ends a scoped block whose walk changed `inner` (from this frame): what the
    /// block set is gone.
    fn close(&mut self, inner: Delta, blk: Block) {
        for (name, after) in inner {
            step();
            let set_inside = matches!(after, Some(Named::Defined(_) | Named::Maybe(_)));
            let visible = matches!(
                self.names.get(&name),
                Some(Named::Defined(_) | Named::Maybe(_))
            );
            if set_inside && !visible {
                self.put(&name, Some(Named::Gone(blk)));
            }
        }
    }
}

/// One name after an `{% if %}` whose branches left it `a` and `b` (types joined in
/// the order: set on every path of a, of b, then set on some paths of a, of b).
fn join_one(a: Option<Named>, b: Option<Named>) -> Option<Named> {
    use Named::{Defined, Gone, Maybe};
    match (a, b) {
        (Some(Defined(t)), Some(Defined(u))) => Some(Defined(Ty::union(t, u))),
        (Some(Maybe(t)), Some(Defined(u))) => Some(Maybe(Ty::union(u, t))),
        (Some(Defined(t) | Maybe(t)), Some(Maybe(u))) => Some(Maybe(Ty::union(t, u))),
        (Some(Defined(t) | Maybe(t)), _) | (_, Some(Defined(t) | Maybe(t))) => Some(Maybe(t)),
        (_, Some(Gone(g))) | (Some(Gone(g)), None) => Some(Gone(g)),
        (None, None) => None,
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

    /// Walks a scoped block's body on `frame` from `mark` (the block's own names
    /// already bound since), then ends the block.
    fn scoped(
        &mut self,
        body: &[Stmt<'_>],
        frame: &mut Frame,
        mark: usize,
        blk: Block,
        depth: usize,
    ) {
        self.stmts(body, frame, depth);
        let inner = frame.undo_to(mark);
        frame.close(inner, blk);
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
                let mark = frame.mark();
                self.bind(&f.target, iter.element(), frame);
                frame.define("loop", Ty::Unknown);
                if let Some(filter) = &f.filter_expr {
                    self.expr(filter, frame, depth);
                }
                self.scoped(&f.body, frame, mark, Block::For, depth);
                // `{% else %}` runs in the enclosing frame, only for an empty loop.
                if !f.else_body.is_empty() {
                    let mark = frame.mark();
                    self.stmts(&f.else_body, frame, depth);
                    let b = frame.undo_to(mark);
                    frame.join(Delta::new(), b);
                }
            }
            Stmt::IfCond(i) => {
                self.expr(&i.expr, frame, depth);
                let mark = frame.mark();
                // `{% if x is defined %}`: inside, a maybe-set `x` is set.
                if let Expr::Test(t) = &i.expr {
                    if let (Expr::Var(v), "defined") = (&t.expr, t.name) {
                        if let Some(ty) = frame.maybe(v.id).cloned() {
                            frame.define(v.id, ty);
                        }
                    }
                }
                self.stmts(&i.true_body, frame, depth);
                let a = frame.undo_to(mark);
                self.stmts(&i.false_body, frame, depth);
                let b = frame.undo_to(mark);
                frame.join(a, b);
            }
            Stmt::WithBlock(w) => {
                let mark = frame.mark();
                for (target, value) in &w.assignments {
                    let t = self.expr(value, frame, depth);
                    self.bind(target, t, frame);
                }
                self.scoped(&w.body, frame, mark, Block::With, depth);
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
                let mark = frame.mark();
                self.scoped(&b.body, frame, mark, Block::Named, depth);
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
        let mark = frame.mark();
        for a in &m.args {
            self.bind(a, Ty::Unknown, frame);
        }
        for n in ["caller", "varargs", "kwargs"] {
            frame.define(n, Ty::Unknown);
        }
        // A macro's names never leave it.
        self.stmts(&m.body, frame, depth);
        frame.undo_to(mark);
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
