//! Rows grouped by question: with `--repeats N` a question has up to N rows per
//! arm, and its per-question value of a metric is the mean over them.
use super::dataset::Item;
use super::metrics::{MetricDef, Question};
use super::stats::mean;
use super::store::Row;
use std::collections::HashMap;

/// Rows paired with their items.
pub type Pairs<'a> = [(&'a Row, &'a Item)];

/// Rows grouped by question, questions in first-seen order: with `--repeats N` a
/// question has up to N rows (one per repeat), else one.
pub fn by_question<'a>(rows: &Pairs<'a>) -> Vec<(&'a Item, Vec<&'a Row>)> {
    let mut index: HashMap<&str, usize> = HashMap::new();
    let mut out: Vec<(&Item, Vec<&Row>)> = Vec::new();
    for (r, it) in rows {
        match index.get(it.id.as_str()) {
            Some(&i) => out[i].1.push(r),
            None => {
                index.insert(it.id.as_str(), out.len());
                out.push((it, vec![r]));
            }
        }
    }
    out
}

/// The per-question values of a metric: for each question, the mean of its
/// repeats' values (the value itself with one repeat); questions where it applies
/// to no repeat are left out.
pub fn question_values(d: &MetricDef, grouped: &[(&Item, Vec<&Row>)]) -> Vec<f64> {
    grouped
        .iter()
        .filter_map(|(it, rs)| {
            let q = Question::of(it);
            let xs: Vec<f64> = rs.iter().filter_map(|r| (d.value)(r, q)).collect();
            mean(&xs)
        })
        .collect()
}
