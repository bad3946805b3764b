//! The judge, grader-calibration and iteration-delta sections of report.md and
//! report.html ([`super::judge`]), built once as tables ([`sections`]) and rendered
//! by both. All values shown are shares: percentages, differences in percentage
//! points.
use super::summary::Summary;
use super::svg::esc;
use std::fmt::Write;

fn show(_: &str, v: Option<f64>) -> String {
    share(v)
}

fn signed(x: f64) -> String {
    let s = format!("{x:+.1}");
    if s[1..].chars().all(|c| c == '0' || c == '.') {
        format!("+{}", &s[1..])
    } else {
        s
    }
}

fn show_diff(_: &str, v: Option<f64>) -> String {
    v.map_or("-".into(), |x| format!("{} pp", signed(100.0 * x)))
}

fn show_ci(_: &str, ci: Option<[f64; 2]>) -> String {
    ci.map_or("-".into(), |[lo, hi]| {
        format!("[{}, {}] pp", signed(100.0 * lo), signed(100.0 * hi))
    })
}

/// One report section: a title, a paragraph, tables, warnings.
#[derive(Debug, Default)]
pub struct Section {
    /// Heading text.
    pub title: String,
    /// One paragraph under it.
    pub intro: String,
    /// (header, rows).
    pub tables: Vec<(Vec<String>, Vec<Vec<String>>)>,
    /// Warnings, one line each.
    pub warnings: Vec<String>,
}

fn share(v: Option<f64>) -> String {
    v.map_or("-".into(), |x| format!("{:.1}%", 100.0 * x))
}

/// The sections for a summary (the judge one always; calibration when some arm's
/// runs graded documents; the iteration delta when there is a single-shot arm and
/// another arm).
pub fn sections(s: &Summary) -> Vec<Section> {
    let mut out = Vec::new();
    let judge = s
        .results
        .values()
        .find_map(|r| r.overall.judge.judge.clone())
        .unwrap_or_else(|| "none".into());
    let mut sec = Section {
        title: "Judge metrics (faithfulness, answer relevancy)".into(),
        intro: format!(
            "Judge: `{judge}`{}. Only scored answers enter the means; the others are counted apart.",
            if judge == "offline" {
                " (classical approximation: statements are sentences, supported when 60% of their stemmed content terms occur in the context; relevancy is the share of the question's content terms in the answer; see docs/eval.md)"
            } else {
                ""
            }
        ),
        ..Section::default()
    };
    let mut head = vec![
        "variant".to_string(),
        "metric".to_string(),
        "mean".to_string(),
    ];
    let statuses = [
        "scored",
        "no_answer",
        "refusal",
        "no_statements",
        "judge_failed",
    ];
    head.extend(statuses.iter().map(|x| (*x).to_string()));
    let mut rows = Vec::new();
    let mut agree = Vec::new();
    for (v, r) in &s.results {
        for m in ["faithfulness", "answer_relevancy"] {
            let per = r.overall.judge.statuses.get(m);
            let mut row = vec![v.clone(), m.to_string(), show(m, r.overall.get(m))];
            for st in statuses {
                row.push(
                    per.and_then(|p| p.get(st))
                        .map_or("-".into(), |n| n.to_string()),
                );
            }
            rows.push(row);
            if let Some(per) = per {
                let failed = per.get("judge_failed").copied().unwrap_or(0);
                if failed > 0 {
                    sec.warnings.push(format!(
                        "{v}: the judge failed on {failed} of {} answer(s) for {m} (see `metrics.judge` in results.jsonl)",
                        r.overall.n
                    ));
                }
            }
        }
        if let Some(a) = &r.overall.judge.agreement {
            agree.push(vec![
                v.clone(),
                a.samples.to_string(),
                a.verdict_rows.to_string(),
                share(a.verdicts),
                show_diff("faithfulness", a.faithfulness_spread).replace('+', ""),
                show_diff("answer_relevancy", a.relevancy_spread).replace('+', ""),
            ]);
        }
    }
    sec.tables.push((head, rows));
    if !agree.is_empty() {
        sec.tables.push((
            [
                "variant",
                "samples",
                "rows",
                "verdict agreement",
                "faithfulness spread",
                "relevancy spread",
            ]
            .map(String::from)
            .to_vec(),
            agree,
        ));
    }
    out.push(sec);

    let mut cal = Section {
        title: "Grader calibration (document grader vs labelled sources)".into(),
        intro: "Every yes/no verdict of a map step over documents; a document is relevant when its source is one of the question's labelled sources. Precision = yes on relevant / yes; recall = yes on relevant / relevant.".into(),
        ..Section::default()
    };
    let mut rows = Vec::new();
    for (v, r) in &s.results {
        if let Some(c) = &r.overall.grader {
            rows.push(vec![
                v.clone(),
                c.rows.to_string(),
                c.verdicts.to_string(),
                share(c.yes_rate),
                c.labelled_verdicts.to_string(),
                share(c.precision),
                share(c.recall),
            ]);
            if let Some(w) = &c.warning {
                cal.warnings.push(format!("{v}: {w}"));
            }
        }
    }
    if !rows.is_empty() {
        cal.tables.push((
            [
                "variant",
                "rows graded",
                "verdicts",
                "yes-rate",
                "labelled verdicts",
                "precision",
                "recall",
            ]
            .map(String::from)
            .to_vec(),
            rows,
        ));
        out.push(cal);
    }

    let l = &s.loop_metrics;
    if let Some(single) = &l.single_shot {
        if !l.deltas.is_empty() {
            let mut sec = Section {
                title: "Iteration delta (questions where the loop took 2+ iterations)".into(),
                intro: format!(
                    "Against the single-shot arm `{single}` ({}), on the same questions: per-question difference arm − single-shot, bootstrap 95% CI.",
                    l.chosen_by.as_deref().unwrap_or("")
                ),
                ..Section::default()
            };
            let mut rows = Vec::new();
            for d in &l.deltas {
                for m in &d.metrics {
                    rows.push(vec![
                        d.arm.clone(),
                        d.questions.to_string(),
                        m.metric.clone(),
                        m.n.to_string(),
                        show(&m.metric, m.single_shot),
                        show(&m.metric, m.arm),
                        show_diff(&m.metric, m.diff),
                        show_ci(&m.metric, m.ci),
                    ]);
                }
            }
            sec.tables.push((
                [
                    "arm",
                    "looped questions",
                    "metric",
                    "n",
                    "single-shot",
                    "arm",
                    "arm − single-shot",
                    "95% CI",
                ]
                .map(String::from)
                .to_vec(),
                rows,
            ));
            out.push(sec);
        }
    }
    out
}

/// The sections as Markdown (`##` headings).
pub fn markdown(s: &Summary) -> String {
    let mut o = String::new();
    for sec in sections(s) {
        let _ = writeln!(o, "## {}\n\n{}\n", sec.title, sec.intro);
        for w in &sec.warnings {
            let _ = writeln!(o, "> **Warning** {}\n", crate::text::escape_line(w));
        }
        for (head, rows) in &sec.tables {
            let _ = writeln!(o, "| {} |", head.join(" | "));
            let _ = writeln!(
                o,
                "|{}",
                (0..head.len())
                    .map(|i| if i == 0 { " --- |" } else { " ---: |" })
                    .collect::<String>()
            );
            for r in rows {
                let cells: Vec<String> = r
                    .iter()
                    .map(|c| crate::text::escape_line(c).replace('|', "\\|"))
                    .collect();
                let _ = writeln!(o, "| {} |", cells.join(" | "));
            }
            o.push('\n');
        }
    }
    o
}

/// The sections as HTML (`<h2>` headings, escaped).
pub fn html(s: &Summary) -> String {
    let mut o = String::new();
    for sec in sections(s) {
        let _ = write!(o, "<h2>{}</h2><p>{}</p>", esc(&sec.title), esc(&sec.intro));
        for w in &sec.warnings {
            let _ = write!(o, "<p class=\"fail\">Warning: {}</p>", esc(w));
        }
        for (head, rows) in &sec.tables {
            o.push_str("<div class=\"wrap\"><table><thead><tr>");
            for h in head {
                let _ = write!(o, "<th>{}</th>", esc(h));
            }
            o.push_str("</tr></thead><tbody>");
            for r in rows {
                o.push_str("<tr>");
                for c in r {
                    let _ = write!(o, "<td>{}</td>", esc(c));
                }
                o.push_str("</tr>");
            }
            o.push_str("</tbody></table></div>");
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use crate::eval::dataset::Item;
    use crate::eval::store::Row;
    use crate::runtime::Status;

    #[test]
    fn the_iteration_delta_section_shows_each_arm_against_the_single_shot_one() {
        let items: Vec<Item> = (0..10)
            .map(|i| Item {
                id: format!("q{i}"),
                question: "What does cargo check do?".into(),
                answer: None,
                must_contain: vec!["check".into()],
                sources: vec![],
                kind: "direct".into(),
                line: i + 1,
                hard: None,
            })
            .collect();
        let mut rows = Vec::new();
        for it in &items {
            for (arm, answer, iterations) in [("single", "no", 1), ("loop", "check", 2)] {
                let mut r = Row {
                    variant: arm.into(),
                    id: it.id.clone(),
                    kind: it.kind.clone(),
                    status: Status::Generated,
                    answer: Some(answer.into()),
                    sources: vec![],
                    path: vec![],
                    iterations,
                    steps: 1,
                    retrieved: vec![],
                    usage: Default::default(),
                    latency_ms: 1.0,
                    error: None,
                    metrics: Default::default(),
                    repeat: 0,
                    retrieval: true,
                };
                r.metrics = crate::eval::metrics::row_metrics(it, &r);
                rows.push(r);
            }
        }
        let arms = vec!["single".to_string(), "loop".to_string()];
        let mut s = crate::eval::summary::summarize("s", "d", &items, &[], &arms, &rows);
        s.loop_metrics = crate::eval::judge::delta::loop_metrics(&arms, &items, &rows, None);
        let md = super::markdown(&s);
        assert!(md.contains("## Iteration delta"), "{md}");
        assert!(
            md.contains("Against the single-shot arm `single` (at most one iteration)"),
            "{md}"
        );
        assert!(
            md.contains("| loop | 10 | must_contain | 10 | 0.0% | 100.0% | +100.0 pp | [+100.0, +100.0] pp |"),
            "{md}"
        );
        // No judge ran on these rows: every one counted apart, none scored.
        assert!(
            md.contains("| single | faithfulness | - | 0 | 0 | 0 | 0 | 10 |"),
            "{md}"
        );
        let html = super::html(&s);
        assert!(html.contains("<h2>Iteration delta"), "{html}");
    }
}
