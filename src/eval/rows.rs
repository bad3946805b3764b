//! The rows an eval keeps in memory for its summary and reports, bounded at any
//! dataset size (issue 16, 40,000 questions):
//!
//! - every row is [`slim`]med as soon as it is written (or read back): the answer,
//!   sources, path, retrievals and error text go (results.jsonl keeps them); what
//!   the aggregates, comparisons and plots read stays (status, iterations, usage,
//!   latency, per-row metrics);
//! - report.html's "Every run" table shows the first [`SHOWN_ROWS`] rows in its order
//!   (question id, then arm order, then repeat) and links to results.jsonl for the
//!   rest; both reports' "Failed runs" tables list the first [`SHOWN_FAILED`] failed
//!   runs in the same order. [`Capped`] keeps just those rows while the eval streams;
//! - a text cell is cut at [`CELL_CHARS`] characters.
use super::store::Row;
use crate::runtime::Status;
use std::collections::BTreeMap;

/// Rows of report.html's "Every run" table; the others are in results.jsonl.
pub const SHOWN_ROWS: usize = 1000;
/// Failed runs listed in the reports; the others are counted and in results.jsonl.
pub const SHOWN_FAILED: usize = 1000;
/// Longest answer or error shown in a report cell, characters.
pub const CELL_CHARS: usize = 2000;

/// The row without what only results.jsonl and the reports' row tables need.
pub fn slim(mut r: Row) -> Row {
    r.answer = None;
    r.sources = Vec::new();
    r.path = Vec::new();
    r.retrieved = Vec::new();
    r.error = None;
    if let Some(j) = r.metrics.judge.as_mut() {
        j.faithfulness.error = None;
        j.answer_relevancy.error = None;
    }
    r
}

/// `text` cut at [`CELL_CHARS`] characters, saying how much was left out.
pub fn cell(text: &str) -> std::borrow::Cow<'_, str> {
    match text.char_indices().nth(CELL_CHARS) {
        None => text.into(),
        Some((at, _)) => format!(
            "{}… ({} more characters in results.jsonl)",
            &text[..at],
            text[at..].chars().count()
        )
        .into(),
    }
}

/// A row's place in the reports' row tables: question id, arm position, repeat.
pub type Order = (String, usize, u32);

/// The first `cap` rows by [`Order`] among those offered, and how many were offered.
#[derive(Debug)]
pub struct Capped {
    cap: usize,
    kept: BTreeMap<Order, Row>,
    /// Rows offered.
    pub total: usize,
}

impl Capped {
    /// Keeps at most `cap` rows.
    pub fn new(cap: usize) -> Capped {
        Capped {
            cap,
            kept: BTreeMap::new(),
            total: 0,
        }
    }

    /// Offers a row at `order`: kept when among the first `cap` so far (a clone of
    /// it; the row with the last order is dropped when over the cap).
    pub fn offer(&mut self, order: Order, r: &Row) {
        self.total += 1;
        if self.cap == 0 {
            return;
        }
        if self.kept.len() >= self.cap {
            match self.kept.last_key_value() {
                Some((last, _)) if *last > order => {}
                _ => return,
            }
        }
        self.kept.insert(order, r.clone());
        if self.kept.len() > self.cap {
            self.kept.pop_last();
        }
    }

    /// The kept rows, in order.
    pub fn rows(&self) -> impl Iterator<Item = &Row> {
        self.kept.values()
    }

    /// Rows offered but not kept.
    pub fn left_out(&self) -> usize {
        self.total - self.kept.len()
    }
}

/// What the reports read besides the summary.
#[derive(Debug)]
pub struct ReportRows {
    /// Arms, in order (a row's [`Order`] position).
    pub arms: Vec<String>,
    /// Every selected row, [`slim`]med (latency plots).
    pub rows: Vec<Row>,
    /// The "Every run" table.
    pub shown: Capped,
    /// The failed runs.
    pub failed: Capped,
}

impl ReportRows {
    /// Empty, for `arms`.
    pub fn new(arms: &[String]) -> ReportRows {
        ReportRows {
            arms: arms.to_vec(),
            rows: Vec::new(),
            shown: Capped::new(SHOWN_ROWS),
            failed: Capped::new(SHOWN_FAILED),
        }
    }

    /// Takes a row in: offered to the tables, kept slim.
    pub fn push(&mut self, r: Row) {
        self.offer(&r);
        self.rows.push(slim(r));
    }

    /// Offers a row to the tables only (the caller keeps it, slim, itself).
    pub fn offer(&mut self, r: &Row) {
        let arm = self
            .arms
            .iter()
            .position(|a| *a == r.variant)
            .unwrap_or(usize::MAX);
        let order = (r.id.clone(), arm, r.repeat);
        if r.status == Status::Failed {
            self.failed.offer(order.clone(), r);
        }
        self.shown.offer(order, r);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capped_keeps_the_first_rows_by_order_whatever_the_arrival() {
        let row = |id: &str| Row {
            variant: "base".into(),
            id: id.into(),
            repeat: 0,
            kind: "k".into(),
            status: Status::Generated,
            answer: Some("a".into()),
            sources: vec![],
            path: vec![],
            iterations: 1,
            steps: 1,
            retrieved: vec![],
            retrieval: true,
            usage: Default::default(),
            latency_ms: 1.0,
            error: None,
            metrics: Default::default(),
        };
        let mut c = Capped::new(3);
        for id in ["q5", "q1", "q9", "q3", "q2", "q8"] {
            c.offer((id.into(), 0, 0), &row(id));
        }
        let ids: Vec<&str> = c.rows().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["q1", "q2", "q3"]);
        assert_eq!((c.total, c.left_out()), (6, 3));
        let long = "é".repeat(CELL_CHARS + 5);
        let cut = cell(&long);
        assert!(
            cut.ends_with("… (5 more characters in results.jsonl)"),
            "{cut}"
        );
        assert_eq!(cell("short"), "short");
        assert_eq!(slim(row("q1")).answer, None);
    }
}
