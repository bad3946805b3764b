//! report.html: one self-contained file (inline CSS and SVG, no script, no external
//! resource) with the summary's plots and tables, the failed runs and the first
//! [`SHOWN_ROWS`] runs (the others linked to results.jsonl, see [`super::rows`]), so
//! its size is bounded whatever the dataset's. Every string that comes from the
//! dataset, the spec or a run is HTML-escaped.
use super::files::RESULTS;
use super::metrics::{columns, Table};
use super::report_md::{show, show_ci, show_diff, show_p};
use super::rows::{cell, ReportRows, SHOWN_FAILED, SHOWN_ROWS};
use super::summary::Summary;
use super::svg::{box_plots, count_axis_max, esc, grouped_bars, Bar, BoxData};
use std::fmt::Write;

const STYLE: &str =
    "body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1200px}\
table{border-collapse:collapse;margin:8px 0 20px;font-size:13px}\
th,td{border:1px solid #ccc;padding:3px 7px;text-align:right;vertical-align:top}\
th:first-child,td:first-child{text-align:left}td.t{text-align:left;max-width:520px}\
h2{margin-top:32px;border-bottom:1px solid #ddd}.fail{color:#b00;font-weight:bold}.pass{color:#070}\
.wrap{overflow-x:auto}.better{color:#070}.worse{color:#b00}details{margin:4px 0}code{font-size:12px}";

fn table(out: &mut String, head: &[&str], rows: &[Vec<String>]) {
    out.push_str("<div class=\"wrap\"><table><thead><tr>");
    for h in head {
        // Long metric names may break after their underscores, so the wide tables
        // fit a 1200 px page without scrolling.
        let _ = write!(out, "<th>{}</th>", esc(h).replace('_', "_<wbr>"));
    }
    out.push_str("</tr></thead><tbody>");
    for r in rows {
        out.push_str("<tr>");
        for c in r {
            let _ = write!(out, "<td>{}</td>", esc(c));
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table></div>");
}

fn pct_tick(v: f64) -> String {
    format!("{:.0}%", 100.0 * v)
}

/// Renders report.html.
pub fn render(s: &Summary, report: &ReportRows) -> String {
    let mut o = String::new();
    let rows = &report.rows;
    let failed_total = report.failed.total;
    let _ = write!(
        o,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>ragloop eval: {}</title><style>{STYLE}</style></head><body>",
        esc(&s.spec)
    );
    let _ = write!(
        o,
        "<h1>ragloop eval</h1><p>Spec <code>{}</code>, dataset <code>{}</code>: {} question(s), {} bad line(s); {}: {}; {}.</p>",
        esc(&s.spec),
        esc(&s.dataset),
        s.questions,
        s.dataset_errors.len(),
        if s.arms.is_empty() { "variants" } else { "arms" },
        esc(&s.variants.join(", ")),
        if failed_total == 0 {
            "no failed run".to_string()
        } else {
            format!(
                "<a class=\"fail\" href=\"#failed\">{failed_total} failed run(s)</a>"
            )
        }
    );
    let _ = write!(
        o,
        "<p>Settings: <code>{}</code>.</p>",
        esc(&s.settings.describe())
    );
    if let Some(i) = &s.interrupted {
        let _ = write!(
            o,
            "<p class=\"fail\"><strong>Partial results: the eval was interrupted.</strong> {}.</p>",
            esc(&i.describe())
        );
    } else if s.partial {
        let missing: usize = s.results.values().map(|r| r.missing).sum();
        let _ = write!(
            o,
            "<p class=\"fail\"><strong>Partial results:</strong> {missing} (variant, question) pair(s) have no row; rerun with --resume to run them.</p>"
        );
    }
    let _ = write!(
        o,
        "<h2>Cost and quality per arm{}</h2><p>{}</p>",
        if s.repeats > 1 {
            format!(" ({} repeats per question)", s.repeats)
        } else {
            String::new()
        },
        esc(&format!(
            "{}{}",
            super::report_md::cost_legend(&s.hard_kinds),
            super::report_md::ci_note(s)
        ))
    );
    let head = super::report_md::cost_header();
    let head: Vec<&str> = head.iter().map(String::as_str).collect();
    table(&mut o, &head, &super::report_md::cost_rows(&s.table));
    if !s.comparisons.is_empty() {
        o.push_str(&format!("<h2>Paired comparisons</h2><p>Per-question difference b − a, bootstrap 95% CI (percentile method), McNemar's test on binary outcomes; verdict for b at α = 0.05; “insufficient data” below {} paired questions.{}</p>", super::stats::MIN_PAIRED, esc(&super::report_md::ci_note(s))));
        for c in &s.comparisons {
            let _ = write!(o, "<h3>{} (b) vs {} (a)</h3>", esc(&c.b), esc(&c.a));
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
                            format!("{} (b={}, c={})", show_p(t.p), t.b, t.c)
                        }),
                        m.verdict.clone(),
                    ]
                })
                .collect();
            table(
                &mut o,
                &[
                    "metric",
                    "n",
                    "a",
                    "b",
                    "b − a",
                    "95% CI",
                    "McNemar p",
                    "verdict",
                ],
                &rows,
            );
        }
    }
    if !s.spread.is_empty() {
        let _ = write!(
            o,
            "<h2>Repeats: per-question spread</h2><p>{} runs per question. Over questions with at least two repeats: questions whose must_contain outcome differs between repeats, and the mean per-question standard deviation (and latency range) across repeats.</p>",
            s.repeats
        );
        let rows = super::spread::table_rows(&s.spread);
        table(&mut o, &super::spread::COLUMNS, &rows);
    }
    if !s.gates.is_empty() {
        o.push_str("<h2>Gates</h2><ul>");
        for g in &s.gates {
            let _ = write!(
                o,
                "<li><span class=\"{}\">{}</span> <code>{}</code>: {}</li>",
                if g.passed { "pass" } else { "fail" },
                if g.passed { "pass" } else { "FAIL" },
                esc(&g.gate),
                esc(&g.reason)
            );
        }
        o.push_str("</ul>");
    }
    let series: Vec<String> = s.variants.clone();
    o.push_str("<h2>Plots</h2>");
    let bar_metrics = columns(Table::Bars);
    let groups: Vec<(String, Vec<Bar>)> = bar_metrics
        .iter()
        .map(|m| {
            (
                (*m).to_string(),
                s.results
                    .values()
                    .map(|r| {
                        let mv = r.overall.metrics.get(*m);
                        Bar {
                            value: mv.and_then(|x| x.value),
                            ci: mv.and_then(|x| x.ci),
                        }
                    })
                    .collect(),
            )
        })
        .collect();
    o.push_str(&grouped_bars(
        "Quality per variant (bars: mean; whiskers: bootstrap 95% CI)",
        &groups,
        &series,
        1.0,
        pct_tick,
    ));
    // Iterations histogram.
    let max_it = s
        .results
        .values()
        .flat_map(|r| r.overall.iterations_histogram.iter().map(|(i, _)| *i))
        .max()
        .unwrap_or(0);
    let max_count = s
        .results
        .values()
        .flat_map(|r| r.overall.iterations_histogram.iter().map(|(_, n)| *n))
        .max()
        .unwrap_or(1);
    let hist: Vec<(String, Vec<Bar>)> = (0..=max_it)
        .map(|i| {
            (
                format!("{i} iteration(s)"),
                s.results
                    .values()
                    .map(|r| Bar {
                        value: Some(
                            r.overall
                                .iterations_histogram
                                .iter()
                                .find(|(k, _)| *k == i)
                                .map_or(0, |(_, n)| *n) as f64,
                        ),
                        ci: None,
                    })
                    .collect(),
            )
        })
        .collect();
    o.push_str(&grouped_bars(
        "Iterations per question (number of questions)",
        &hist,
        &series,
        count_axis_max(max_count),
        |v| format!("{v:.0}"),
    ));
    // Per-iteration recall.
    let max_pass = s
        .results
        .values()
        .map(|r| r.overall.per_iteration.len())
        .max()
        .unwrap_or(0);
    if max_pass > 0 {
        let groups: Vec<(String, Vec<Bar>)> = (0..max_pass)
            .map(|i| {
                let ns: Vec<String> = s
                    .results
                    .values()
                    .map(|r| {
                        r.overall
                            .per_iteration
                            .get(i)
                            .map_or(0, |p| p.n)
                            .to_string()
                    })
                    .collect();
                (
                    format!("pass {} (n {})", i + 1, ns.join("/")),
                    s.results
                        .values()
                        .map(|r| Bar {
                            value: r.overall.per_iteration.get(i).map(|p| p.recall),
                            ci: None,
                        })
                        .collect(),
                )
            })
            .collect();
        o.push_str(&grouped_bars(
            "recall@k per retrieval pass (questions that reached it)",
            &groups,
            &series,
            1.0,
            pct_tick,
        ));
    }
    let lat: Vec<BoxData> = s
        .variants
        .iter()
        .map(|v| BoxData {
            values: rows
                .iter()
                .filter(|r| &r.variant == v)
                .map(|r| r.latency_ms)
                .collect(),
        })
        .collect();
    o.push_str(&box_plots("Latency per run", &series, &lat, "ms"));

    o.push_str("<h2>Answer and retrieval quality</h2>");
    let mut head = vec!["variant", "n"];
    let quality = columns(Table::Quality);
    head.extend(&quality);
    let rq: Vec<Vec<String>> = s
        .results
        .iter()
        .map(|(v, r)| {
            let mut row = vec![v.clone(), r.overall.n.to_string()];
            row.extend(quality.iter().map(|m| show(m, r.overall.get(m))));
            row
        })
        .collect();
    table(&mut o, &head, &rq);
    o.push_str("<h2>Loop, usage and latency</h2>");
    let mut head = vec!["variant", "n"];
    let loop_cols = columns(Table::Loop);
    head.extend(&loop_cols);
    head.extend(["p50 ms", "p95 ms", "p99 ms"]);
    let rl: Vec<Vec<String>> = s
        .results
        .iter()
        .map(|(v, r)| {
            let a = &r.overall;
            let mut row = vec![v.clone(), a.n.to_string()];
            row.extend(loop_cols.iter().map(|m| show(m, a.get(m))));
            row.extend(
                [a.latency_ms.p50, a.latency_ms.p95, a.latency_ms.p99]
                    .map(|x| show("latency_ms", x)),
            );
            row
        })
        .collect();
    table(&mut o, &head, &rl);
    o.push_str("<h2>By question kind</h2>");
    let cols = columns(Table::ByKind);
    let mut head = vec!["variant / kind", "n"];
    head.extend(&cols);
    let mut rk = Vec::new();
    for (v, r) in &s.results {
        for (k, a) in &r.by_kind {
            let mut row = vec![format!("{v} / {k}"), a.n.to_string()];
            row.extend(cols.iter().map(|m| show(m, a.get(m))));
            rk.push(row);
        }
    }
    table(&mut o, &head, &rk);
    o.push_str(&super::judge_report::html(s));
    if !s.dataset_errors.is_empty() {
        o.push_str("<h2>Dataset lines skipped</h2>");
        let rows: Vec<Vec<String>> = s
            .dataset_errors
            .iter()
            .map(|e| vec![format!("{}:{}", s.dataset, e.line), e.message.clone()])
            .collect();
        table(&mut o, &["line", "problem"], &rows);
    }
    if failed_total > 0 {
        let _ = write!(o, "<h2 id=\"failed\">Failed runs ({failed_total})</h2>");
        let rows: Vec<Vec<String>> = report
            .failed
            .rows()
            .map(|r| {
                vec![
                    r.variant.clone(),
                    super::report_md::shown_id(r),
                    cell(r.error.as_deref().unwrap_or_default()).into_owned(),
                ]
            })
            .collect();
        table(&mut o, &["variant", "id", "error"], &rows);
        if report.failed.left_out() > 0 {
            let _ = write!(
                o,
                "<p>The first {SHOWN_FAILED} failed runs (by question id, arm, repeat) are listed; the other {} are in <a href=\"{RESULTS}\">{RESULTS}</a>.</p>",
                report.failed.left_out()
            );
        }
    }
    o.push_str("<h2>Every run</h2>");
    // By question, then variants in evaluation order (not by name); the first
    // SHOWN_ROWS only (the rest are in results.jsonl).
    if report.shown.left_out() > 0 {
        let _ = write!(
            o,
            "<p>The first {SHOWN_ROWS} of {} runs (by question id, arm, repeat); every run is in <a href=\"{RESULTS}\">{RESULTS}</a>.</p>",
            report.shown.total
        );
    }
    let sorted = report.shown.rows();
    o.push_str("<div class=\"wrap\"><table><thead><tr><th>id</th><th>variant</th><th>kind</th><th>status</th><th>iter.</th><th>must_contain</th><th>F1</th><th>recall per pass</th><th>ms</th><th>answer / error</th></tr></thead><tbody>");
    for r in sorted {
        let recall: Vec<String> = r
            .metrics
            .recall
            .iter()
            .map(|x| format!("{:.0}%", 100.0 * x))
            .collect();
        let text = match (&r.answer, &r.error) {
            (_, Some(e)) => format!("error: {e}"),
            (Some(a), None) => a.clone(),
            (None, None) => String::new(),
        };
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.2}</td><td>{}</td><td>{:.1}</td><td class=\"t\">{}</td></tr>",
            esc(&super::report_md::shown_id(r)),
            esc(&r.variant),
            esc(&r.kind),
            esc(r.status.as_str()),
            r.iterations,
            r.metrics.must_contain_hit.map_or("-", |h| if h { "yes" } else { "no" }),
            r.metrics.f1,
            esc(&recall.join(" → ")),
            r.latency_ms,
            esc(&cell(&text))
        );
    }
    o.push_str("</tbody></table></div></body></html>\n");
    o
}
