//! Dead arms (W003): a branch arm whose `when` is always true (`"true"`, `"1 == 1"`,
//! `"'yes'"`: an expression that reads no variable and is truthy) makes every later
//! arm of its branch, the `else` included, impossible. The warning names those arms
//! and the nodes that only they lead to (unreachable once the dead arms are gone). When
//! a later `when` arm exists it already has W001 (from the template checks); that
//! warning is extended instead, so the fault is reported once.
use crate::diag::{Code, Diagnostic};
use crate::graph::analysis::reachable_from;
use crate::graph::Topology;
use crate::spec::types::Edge;
use crate::spec::LoadedSpec;

/// Whether a predicate reads nothing and is truthy.
fn always_true(env: &minijinja::Environment<'static>, when: &str) -> bool {
    // minijinja's expression compiler must not see template delimiters (it panics).
    if crate::jinja::check_expression_text(when).is_err() {
        return false;
    }
    let Ok(expr) = env.compile_expression(when) else {
        return false;
    };
    expr.undeclared_variables(false).is_empty() && expr.eval(()).is_ok_and(|v| v.is_true())
}

pub(super) fn check(ls: &LoadedSpec, topo: &Topology, diags: &mut Vec<Diagnostic>) {
    let Some(entry) = topo.entry else { return };
    let env = crate::jinja::environment();
    let full = reachable_from(&topo.graph, entry);
    for (from, edge) in &ls.spec.edges {
        let (Edge::Branch(arms), Some(&src)) = (edge, topo.index.get(from)) else {
            continue;
        };
        let Some(k) = arms
            .iter()
            .position(|a| a.when.as_deref().is_some_and(|w| always_true(&env, w)))
        else {
            continue;
        };
        if k + 1 >= arms.len() {
            continue;
        }
        // Reachability without the arms after `k` of this branch.
        let mut pruned = topo.graph.clone();
        pruned.retain_edges(|g, e| {
            g.edge_endpoints(e).is_none_or(|(s, _)| s != src) || g[e].arm.is_none_or(|i| i <= k)
        });
        let now = reachable_from(&pruned, entry);
        let lost: Vec<String> = topo
            .index
            .iter()
            .filter(|(_, ix)| full[ix.index()] && !now[ix.index()])
            .map(|(n, _)| format!("`{n}`"))
            .collect();
        let cut_off = if lost.is_empty() {
            String::new()
        } else {
            format!(
                "; {} become{} unreachable through it",
                lost.join(", "),
                if lost.len() == 1 { "s" } else { "" }
            )
        };
        let has_else = arms.last().is_some_and(|a| a.when.is_none());
        // Later `when` arms already get W001 (one per arm): the first of them also
        // says what else is lost, so one fault is not reported twice.
        let next = (k + 1).to_string();
        let next_when = ls.span(&["edges", from.as_str(), next.as_str(), "when"]);
        if arms[k + 1].when.is_some() {
            if let Some(d) = diags
                .iter_mut()
                .find(|d| d.code == Code::ShadowedArm && d.span == next_when && next_when.is_some())
            {
                if has_else {
                    d.message.push_str(", nor is the `else` after it");
                }
                d.message.push_str(&cut_off);
                continue;
            }
        }
        let later = if k + 2 == arms.len() && has_else {
            "the `else` arm is".to_string()
        } else if has_else {
            format!("arms {}–{} (the last is the `else`) are", k + 2, arms.len())
        } else {
            format!("arms {}–{} are", k + 2, arms.len())
        };
        let msg = format!(
            "edges of `{from}`: arm {} is always true, so {later} never taken{cut_off}",
            k + 1
        );
        let ix = k.to_string();
        diags.push(
            Diagnostic::new(Code::DeadArms, msg)
                .at(ls.span(&["edges", from.as_str(), ix.as_str(), "when"]))
                .help("a predicate that reads no state field has a fixed value: test a state field, or remove the arms after it"),
        );
    }
}
