//! From rows to summary.json: the one path both `ragloop eval` ([`super::run_eval`])
//! and `ragloop eval merge` ([`super::merge`]) take, so a merge of shards gives the
//! unsharded eval's summary and reports from the same rows.
use super::dataset::{Item, LineError};
use super::gates::Gate;
use super::settings::Settings;
use super::shard::Shard;
use super::store::Row;
use super::summary::{self, ArmInfo, Summary};

/// Everything the summary reads besides the rows.
#[derive(Debug)]
pub struct Finish<'a> {
    /// The specs as given, `, `-joined.
    pub spec_label: String,
    /// The dataset as given.
    pub dataset_label: String,
    /// The usable questions, in dataset order.
    pub items: &'a [Item],
    /// The bad dataset lines.
    pub dataset_errors: &'a [LineError],
    /// The arms, in order.
    pub variants: &'a [String],
    /// With several specs: each arm's spec and variant (empty with one).
    pub arms: Vec<ArmInfo>,
    /// `--repeats`, at least 1.
    pub repeats: u32,
    /// The hard subset's kinds.
    pub hard_kinds: Vec<String>,
    /// The slice of the pairs the rows cover (`None`: all).
    pub shard: Option<Shard>,
    /// The CLI settings (summary.json `settings`).
    pub settings: Settings,
    /// `--single-shot`.
    pub single_shot: Option<&'a str>,
    /// The gates, evaluated only without a shard (a slice's figures would trip or
    /// pass them wrongly: the merge evaluates them).
    pub gates: &'a [Gate],
}

/// The summary of `rows` (the selected ones: arms, questions and repeats of
/// `f`; others are ignored), loop metrics and gates included.
pub fn summarize(f: &Finish<'_>, rows: &[Row]) -> Summary {
    let mut s = summary::summarize_with(
        &f.spec_label,
        &f.dataset_label,
        f.items,
        f.dataset_errors,
        f.variants,
        rows,
        &summary::Options {
            repeats: f.repeats,
            hard_kinds: f.hard_kinds.clone(),
            shard: f.shard,
        },
    );
    s.arms = f.arms.clone();
    s.settings = f.settings.clone();
    s.shard = f.shard;
    s.loop_metrics = super::judge::delta::loop_metrics(f.variants, f.items, rows, f.single_shot);
    if f.shard.is_none() {
        s.gates = super::gates::check(f.gates, &s);
    }
    s
}
