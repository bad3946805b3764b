//! report.md: the summary as Markdown tables.
use super::metrics::{columns, scale, Scale, Table};
use super::store::Row;
use super::summary::{Aggregate, Summary};
use std::fmt::Write;

/// Formats an optional metric value by its [`Scale`]: shares as percentages,
/// differences of shares signed in percentage points, numbers with their decimals
/// (`-` when absent).
pub(super) fn show(name: &str, v: Option<f64>) -> String {
    let Some(x) = v else { return "-".into() };
    match scale(name) {
        Scale::ShareDiff => show_diff(name, v),
        Scale::Share => format!("{:.1}%", 100.0 * x),
        Scale::Number(decimals) => format!("{x:.decimals$}"),
    }
}

/// Whether a metric is a 0..1 share shown as a percentage (see
/// [`super::metrics::is_share`]).
pub(super) fn is_share(name: &str) -> bool {
    super::metrics::is_share(name)
}

/// Formats a signed difference (percentage points for shares).
pub(super) fn show_diff(name: &str, v: Option<f64>) -> String {
    let Some(x) = v else { return "-".into() };
    if is_share(name) {
        format!("{} pp", signed(100.0 * x, 1))
    } else {
        signed(x, 2)
    }
}

/// `x` with an explicit sign and `decimals` decimals; a value that rounds to zero is
/// `+0.0`, never `-0.0`.
pub(super) fn signed(x: f64, decimals: usize) -> String {
    let s = format!("{x:+.decimals$}");
    if s[1..].chars().all(|c| c == '0' || c == '.') {
        format!("+{}", &s[1..])
    } else {
        s
    }
}

/// A p-value with 4 decimals; below 0.0001 it is `<0.0001` (never `0.0000`).
pub(super) fn show_p(p: f64) -> String {
    if p < 1e-4 {
        "<0.0001".into()
    } else {
        format!("{p:.4}")
    }
}

/// Formats a CI.
pub(super) fn show_ci(name: &str, ci: Option<[f64; 2]>) -> String {
    match ci {
        None => "-".into(),
        Some([lo, hi]) if is_share(name) => {
            format!("[{}, {}] pp", signed(100.0 * lo, 1), signed(100.0 * hi, 1))
        }
        Some([lo, hi]) => format!("[{}, {}]", signed(lo, 2), signed(hi, 2)),
    }
}

fn cell(a: &Aggregate, name: &str) -> String {
    let v = a.metrics.get(name);
    match v {
        Some(m) if m.n > 0 => show(name, m.value),
        _ => "-".into(),
    }
}

fn table(out: &mut String, head: &[String], rows: &[Vec<String>]) {
    let _ = writeln!(out, "| {} |", head.join(" | "));
    let _ = writeln!(
        out,
        "|{}",
        head.iter()
            .enumerate()
            .map(|(i, _)| if i == 0 { " --- |" } else { " ---: |" })
            .collect::<String>()
    );
    for r in rows {
        let cells: Vec<String> = r
            .iter()
            .map(|c| c.replace('|', "\\|").replace('\n', " "))
            .collect();
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
    out.push('\n');
}

fn heads(first: &str, cols: &[&str]) -> Vec<String> {
    std::iter::once(first.to_string())
        .chain(std::iter::once("n".to_string()))
        .chain(cols.iter().map(|c| c.to_string()))
        .collect()
}

/// `text` as a Markdown code span, fenced with more backticks than it holds in a
/// row (and padded when it starts or ends with one); control characters escaped.
fn md_code(text: &str) -> String {
    let text = crate::text::escape_line(text);
    let (mut run, mut longest) = (0usize, 0usize);
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat(longest + 1);
    if longest > 0 {
        format!("{fence} {text} {fence}")
    } else {
        format!("{fence}{text}{fence}")
    }
}

/// A cost-table cell for people: `n/a`, or the value (shares as percentages)
/// followed by its CI (`41.2% [30.0, 52.5]`, `3.60 [3.40, 3.80]`).
pub(super) fn cost_cell(format: super::table::Format, c: &super::table::Cell) -> String {
    let Some(v) = c.value.filter(|v| v.is_finite()) else {
        return "n/a".into();
    };
    let share = matches!(format, super::table::Format::Metric(m) if is_share(m));
    let d = match format {
        super::table::Format::Decimals(d) => d,
        super::table::Format::Metric(m) => match scale(m) {
            Scale::Number(d) => d,
            Scale::Share | Scale::ShareDiff => 1,
        },
    };
    let (k, unit) = if share { (100.0, "%") } else { (1.0, "") };
    let value = format!("{:.d$}{unit}", k * v);
    match c.ci {
        None => value,
        Some([lo, hi]) => format!("{value} [{:.d$}, {:.d$}]", k * lo, k * hi),
    }
}

/// The header cells: `arm`, `n`, then [`super::table::COLUMNS`].
pub(super) fn cost_header() -> Vec<String> {
    ["arm", "n"]
        .into_iter()
        .chain(super::table::COLUMNS.iter().map(|(h, _, _)| *h))
        .map(str::to_string)
        .collect()
}

/// The table's rows as text cells (see [`show`]), in arm order.
pub(super) fn cost_rows(rows: &[super::table::CostRow]) -> Vec<Vec<String>> {
    rows.iter()
        .map(|r| {
            let mut out = vec![r.arm.clone(), r.questions.to_string()];
            out.extend(
                super::table::COLUMNS
                    .iter()
                    .map(|(_, m, get)| cost_cell(*m, &get(r))),
            );
            out
        })
        .collect()
}

/// The sentence added under the CI legends when some interval may be closed-form
/// (more than [`super::stats::BOOTSTRAP_MAX_N`] questions); empty otherwise.
pub(super) fn ci_note(s: &Summary) -> String {
    if s.questions > super::stats::BOOTSTRAP_MAX_N {
        format!(
            " Intervals over more than {} questions are closed-form: Wilson for 0/1 values, Newcombe's paired score interval for their differences, the normal interval otherwise (docs/eval.md).",
            super::stats::BOOTSTRAP_MAX_N
        )
    } else {
        String::new()
    }
}

/// One sentence under the table: what the columns are.
pub(super) fn cost_legend(hard_kinds: &[String]) -> String {
    format!(
        "Per question; mean with bootstrap 95% CI in brackets (percentage points for shares); n/a: the metric is not computed or applies to no question. recall (hard): recall_final on the hard subset (`hard: true` items, else kinds {}).",
        if hard_kinds.is_empty() {
            "none".to_string()
        } else {
            hard_kinds.join(", ")
        }
    )
}

/// A row's question id, with its repeat index after the first repeat
/// (`q3 (repeat 2)`).
pub(super) fn shown_id(r: &Row) -> String {
    if r.repeat == 0 {
        r.id.clone()
    } else {
        format!("{} (repeat {})", r.id, r.repeat)
    }
}

/// Renders report.md: the header, seed 004's cost-and-quality table per arm
/// ([`super::table`]), the paired comparisons, the spread across repeats (with
/// `--repeats`), then the detail tables.
pub fn render(s: &Summary, rows: &super::rows::ReportRows) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# ragloop eval: {}\n", s.spec);
    let _ = writeln!(
        out,
        "Dataset `{}`: {} question(s){}; {}: {}.\n",
        s.dataset,
        s.questions,
        if s.dataset_errors.is_empty() {
            String::new()
        } else {
            format!(", {} bad line(s) skipped", s.dataset_errors.len())
        },
        if s.arms.is_empty() {
            "variants"
        } else {
            "arms"
        },
        s.variants.join(", ")
    );
    let _ = writeln!(out, "Settings: {}.\n", md_code(&s.settings.describe()));
    if let Some(i) = &s.interrupted {
        let _ = writeln!(
            out,
            "> **Partial results: the eval was interrupted.** {}.\n",
            i.describe()
        );
    } else if s.partial {
        let missing: usize = s.results.values().map(|r| r.missing).sum();
        let _ = writeln!(
            out,
            "> **Partial results:** {missing} (variant, question) pair(s) have no row; rerun with --resume to run them.\n"
        );
    }
    let _ = writeln!(
        out,
        "## Cost and quality per arm{}\n",
        if s.repeats > 1 {
            format!(" ({} repeats per question)", s.repeats)
        } else {
            String::new()
        }
    );
    let _ = writeln!(out, "{}{}\n", cost_legend(&s.hard_kinds), ci_note(s));
    table(&mut out, &cost_header(), &cost_rows(&s.table));
    if !s.comparisons.is_empty() {
        let _ = writeln!(
            out,
            "## Paired comparisons\n\nDifference b − a per question; 95% bootstrap CI (percentile, {} resamples); McNemar's test on binary metrics (exact below 25 discordant pairs); verdict for b at α = 0.05; `insufficient data` below {} paired questions.{}\n",
            super::stats::RESAMPLES,
            super::stats::MIN_PAIRED,
            ci_note(s)
        );
        for c in &s.comparisons {
            let _ = writeln!(out, "### {} (b) vs {} (a)\n", c.b, c.a);
            let rows: Vec<Vec<String>> = c
                .metrics
                .iter()
                .map(|m| {
                    vec![
                        m.metric.clone(),
                        m.n.to_string(),
                        show(&m.metric, m.mean_a),
                        show(&m.metric, m.mean_b),
                        show_diff(&m.metric, m.diff),
                        show_ci(&m.metric, m.ci),
                        m.mcnemar.map_or("-".into(), |t| {
                            format!(
                                "{} (b={}, c={}{})",
                                show_p(t.p),
                                t.b,
                                t.c,
                                if t.exact { ", exact" } else { "" }
                            )
                        }),
                        m.verdict.clone(),
                    ]
                })
                .collect();
            table(
                &mut out,
                &[
                    "metric",
                    "n",
                    "a",
                    "b",
                    "b − a",
                    "95% CI",
                    "McNemar p",
                    "verdict",
                ]
                .map(String::from),
                &rows,
            );
        }
    }
    if !s.spread.is_empty() {
        let _ = writeln!(
            out,
            "## Repeats: per-question spread ({} runs per question)\n\nOver questions with at least two repeats: questions whose must_contain outcome differs between repeats, and the mean per-question standard deviation (and latency range) across repeats.\n",
            s.repeats
        );
        let rows = super::spread::table_rows(&s.spread);
        table(&mut out, &super::spread::COLUMNS.map(String::from), &rows);
    }
    let _ = writeln!(out, "## Answer and retrieval quality\n");
    let (quality, by_kind, loop_cols) = (
        columns(Table::Quality),
        columns(Table::ByKind),
        columns(Table::Loop),
    );
    let mut rows_q = Vec::new();
    let mut rows_l = Vec::new();
    for (v, r) in &s.results {
        let a = &r.overall;
        let mut q = vec![v.clone(), a.n.to_string()];
        q.extend(quality.iter().map(|m| cell(a, m)));
        rows_q.push(q);
        let mut l = vec![v.clone(), a.n.to_string()];
        l.extend(loop_cols.iter().map(|m| cell(a, m)));
        l.push(show("latency_p50_ms", a.latency_ms.p50));
        l.push(show("latency_p95_ms", a.latency_ms.p95));
        l.push(show("latency_p99_ms", a.latency_ms.p99));
        rows_l.push(l);
    }
    table(&mut out, &heads("variant", &quality), &rows_q);
    let _ = writeln!(
        out,
        "## Loop, usage and latency (per question; latency in ms)\n"
    );
    let mut h = heads("variant", &loop_cols);
    h.extend(["p50".to_string(), "p95".to_string(), "p99".to_string()]);
    table(&mut out, &h, &rows_l);

    let _ = writeln!(
        out,
        "## Retrieval per iteration (labelled questions that reached the pass)\n"
    );
    let mut it_rows = Vec::new();
    for (v, r) in &s.results {
        for p in &r.overall.per_iteration {
            it_rows.push(vec![
                v.clone(),
                p.iteration.to_string(),
                p.n.to_string(),
                show("recall_first", Some(p.recall)),
                show("precision_first", Some(p.precision)),
            ]);
        }
    }
    table(
        &mut out,
        &["variant", "iteration", "n", "recall@k", "context precision"].map(String::from),
        &it_rows,
    );

    let _ = writeln!(out, "## By question kind\n");
    let kind_cols = &by_kind;
    let mut k_rows = Vec::new();
    for (v, r) in &s.results {
        for (k, a) in &r.by_kind {
            let mut row = vec![format!("{v} / {k}"), a.n.to_string()];
            row.extend(kind_cols.iter().map(|m| cell(a, m)));
            k_rows.push(row);
        }
    }
    table(&mut out, &heads("variant / kind", kind_cols), &k_rows);

    let _ = writeln!(out, "## Iterations histogram\n");
    let max_it = s
        .results
        .values()
        .flat_map(|r| r.overall.iterations_histogram.iter().map(|(i, _)| *i))
        .max()
        .unwrap_or(0);
    let mut head = vec!["variant".to_string()];
    head.extend((0..=max_it).map(|i| format!("{i} iter.")));
    let hist_rows: Vec<Vec<String>> = s
        .results
        .iter()
        .map(|(v, r)| {
            let mut row = vec![v.clone()];
            row.extend((0..=max_it).map(|i| {
                r.overall
                    .iterations_histogram
                    .iter()
                    .find(|(k, _)| *k == i)
                    .map_or(0, |(_, n)| *n)
                    .to_string()
            }));
            row
        })
        .collect();
    table(&mut out, &head, &hist_rows);

    out.push_str(&super::judge_report::markdown(s));
    if rows.failed.total > 0 {
        let _ = writeln!(out, "## Failed runs ({})\n", rows.failed.total);
        let listed: Vec<Vec<String>> = rows
            .failed
            .rows()
            .map(|r| {
                vec![
                    r.variant.clone(),
                    shown_id(r),
                    super::rows::cell(r.error.as_deref().unwrap_or_default()).into_owned(),
                ]
            })
            .collect();
        table(
            &mut out,
            &["variant", "id", "error"].map(String::from),
            &listed,
        );
        if rows.failed.left_out() > 0 {
            let _ = writeln!(
                out,
                "The first {} failed runs (by question id, arm, repeat) are listed; the other {} are in results.jsonl (`\"status\":\"failed\"`).\n",
                super::rows::SHOWN_FAILED,
                rows.failed.left_out()
            );
        }
    }
    if !s.dataset_errors.is_empty() {
        let _ = writeln!(out, "## Dataset lines skipped\n");
        let rows: Vec<Vec<String>> = s
            .dataset_errors
            .iter()
            .map(|e| vec![format!("{}:{}", s.dataset, e.line), e.message.clone()])
            .collect();
        table(&mut out, &["line", "problem"].map(String::from), &rows);
    }
    if !s.gates.is_empty() {
        let _ = writeln!(out, "## Gates\n");
        let rows: Vec<Vec<String>> = s
            .gates
            .iter()
            .map(|g| {
                vec![
                    g.gate.clone(),
                    if g.passed { "pass" } else { "FAIL" }.into(),
                    g.reason.clone(),
                ]
            })
            .collect();
        table(
            &mut out,
            &["gate", "result", "reason"].map(String::from),
            &rows,
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_negative_zero_and_tiny_p_values() {
        assert_eq!(signed(-0.0004, 1), "+0.0");
        assert_eq!(signed(-0.0, 2), "+0.00");
        assert_eq!(signed(-0.06, 1), "-0.1");
        assert_eq!(show_ci("f1", Some([-0.000_01, 0.029])), "[+0.0, +2.9] pp");
        assert_eq!(show_diff("iterations", Some(-0.001)), "+0.00");
        assert_eq!(show_p(0.000_01), "<0.0001");
        assert_eq!(show_p(0.5), "0.5000");
    }
}
