//! `ragloop eval merge DIR... --out DIR`: the output directories of the N shards of
//! one eval (`--shard 1/N` to `N/N`, see [`super::shard`]) combined into the
//! unsharded eval's results.jsonl, settings.json, summary.json, report.md and
//! report.html.
//!
//! The summary and reports are built by the same code from the same rows as an
//! unsharded eval's ([`super::finish`]), so they are byte-identical to the reports
//! of an unsharded eval that got the same rows. Two real evals (sharded or not)
//! differ only where their runs did: each run's wall time (`latency_ms`) and what
//! is computed from it (the `latency_ms` metric, its CI and comparison, latency
//! percentiles, the latency plot and spread); results.jsonl holds the shards' rows
//! (each line as the shard wrote it) shard by shard, where an unsharded eval writes
//! them in completion order.
//!
//! Refused (a usage error, exit 2, nothing written): a directory without
//! shard.json; shards of different evals (specs or their files, dataset path or
//! contents, arms, repeats, hard kinds, gates, settings, shard count: each
//! difference named); a shard given twice or missing; a row in a shard it does not
//! belong to, or in two shards; a shard that lacks rows of its slice (interrupted:
//! `--resume` it first); a dataset whose contents changed since the shards ran;
//! an `--out` that is one of the shards or already holds results.
use super::dataset;
use super::finish::{self, Finish};
use super::rows::ReportRows;
use super::shard::{Manifest, Shard};
use super::store::Row;
use super::{files, gates, settings, EvalError, Outcome};
use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::path::PathBuf;

/// What `ragloop eval merge` needs.
#[derive(Clone, Debug, Default)]
pub struct MergeConfig {
    /// The shards' output directories, in any order.
    pub dirs: Vec<PathBuf>,
    /// The merged output directory (created).
    pub out: PathBuf,
    /// The dataset, when not at the path the shards recorded (its contents must be
    /// the same).
    pub dataset: Option<PathBuf>,
}

fn usage(m: impl Into<String>) -> EvalError {
    EvalError::Usage(m.into())
}

/// The shards' manifests, checked to belong together and complete, in shard order.
fn manifests(dirs: &[PathBuf]) -> Result<Vec<(Manifest, PathBuf)>, EvalError> {
    if dirs.is_empty() {
        return Err(usage("no shard directory given"));
    }
    let mut got: Vec<(Manifest, PathBuf)> = Vec::new();
    for d in dirs {
        let m = super::shard::read(d)
            .map_err(|e| usage(format!("{e}")))?
            .ok_or_else(|| {
                usage(format!(
                    "{}: no {}: not the output directory of `ragloop eval --shard I/N`",
                    d.display(),
                    files::SHARD
                ))
            })?;
        got.push((m, d.clone()));
    }
    let (first, first_dir) = (&got[0].0, &got[0].1);
    for (m, d) in &got[1..] {
        let diff = first.differences(m);
        if !diff.is_empty() {
            return Err(usage(format!(
                "{} and {} are shards of different evals ({} vs {}):\n  {}",
                first_dir.display(),
                d.display(),
                first_dir.display(),
                d.display(),
                diff.join("\n  ")
            )));
        }
    }
    let count = first.shard.count;
    let mut by_index: HashMap<u32, &PathBuf> = HashMap::new();
    for (m, d) in &got {
        if let Some(other) = by_index.insert(m.shard.index, d) {
            return Err(usage(format!(
                "shard {} given twice: {} and {}",
                m.shard,
                other.display(),
                d.display()
            )));
        }
    }
    let missing: Vec<String> = (1..=count)
        .filter(|i| !by_index.contains_key(i))
        .map(|i| Shard { index: i, count }.to_string())
        .collect();
    if !missing.is_empty() {
        return Err(usage(format!(
            "missing shard(s) {} of the {count}: give every shard's directory",
            missing.join(", ")
        )));
    }
    got.sort_by_key(|(m, _)| m.shard.index);
    Ok(got)
}

/// Merges the shards (see the module docs).
///
/// # Errors
/// [`EvalError::Usage`] for every refusal of the module docs (nothing written);
/// [`EvalError::Failed`] / [`EvalError::Store`] when the output cannot be written.
pub fn merge(cfg: &MergeConfig) -> Result<Outcome, EvalError> {
    let started = std::time::Instant::now();
    let shards = manifests(&cfg.dirs)?;
    let m = &shards[0].0;
    if cfg.out.exists() && !cfg.out.is_dir() {
        return Err(usage(format!(
            "--out {}: not a directory",
            cfg.out.display()
        )));
    }
    for (_, d) in &shards {
        if crate::paths::same_file(&cfg.out, d) {
            return Err(usage(format!(
                "--out {} is one of the shards: choose another directory",
                cfg.out.display()
            )));
        }
    }
    // The dataset: its contents as the shards saw them.
    let ds_path = cfg
        .dataset
        .clone()
        .unwrap_or_else(|| PathBuf::from(&m.dataset.path));
    let now = settings::fingerprint(std::slice::from_ref(&ds_path));
    if now != m.dataset.fingerprint {
        return Err(usage(format!(
            "the dataset {} is not the one the shards ran on (fingerprint {} now, {} then){}",
            ds_path.display(),
            &now[..12],
            &m.dataset.fingerprint[..m.dataset.fingerprint.len().min(12)],
            if cfg.dataset.is_none() {
                "; pass --dataset FILE with the shards' dataset"
            } else {
                ""
            }
        )));
    }
    let ds = dataset::load(&ds_path)?;
    let variants: Vec<String> = m.arms.iter().map(|a| a.name.clone()).collect();
    let reference = if m.several {
        variants[0].as_str()
    } else {
        super::runner::BASE
    };
    let mut gate_list = Vec::new();
    for g in &m.fail_under {
        gate_list.push(gates::parse_bound(g, false, &variants)?);
    }
    for g in &m.fail_over {
        gate_list.push(gates::parse_bound(g, true, &variants)?);
    }
    for v in &m.fail_if_worse {
        gate_list.push(gates::parse_not_worse_of(v, reference, &variants)?);
    }
    std::fs::create_dir_all(&cfg.out)
        .map_err(|e| EvalError::Failed(format!("cannot create {}: {e}", cfg.out.display())))?;
    let _lock = super::lock_out(&cfg.out)?;
    let results_path = cfg.out.join(files::RESULTS);
    if super::store::non_empty(&results_path) {
        return Err(usage(format!(
            "{} already holds results: choose another --out",
            results_path.display()
        )));
    }
    let arm_of: HashMap<&str, u32> = variants
        .iter()
        .enumerate()
        .map(|(i, v)| (v.as_str(), i as u32))
        .collect();
    let item_of: HashMap<&str, u32> = ds
        .items
        .iter()
        .enumerate()
        .map(|(i, it)| (it.id.as_str(), i as u32))
        .collect();
    // Written to a temporary file, renamed into place once every check passed.
    let tmp = cfg.out.join(format!(".{}.merge.tmp", files::RESULTS));
    let out_file = std::fs::File::create(&tmp).map_err(|error| super::store::StoreError::Open {
        path: tmp.clone(),
        error,
    })?;
    let mut out = std::io::BufWriter::new(out_file);
    let result = (|| -> Result<ReportRows, EvalError> {
        let mut report = ReportRows::new(&variants);
        let mut holder: HashMap<(u32, u32, u32), u32> = HashMap::new();
        for (sm, dir) in &shards {
            let path = dir.join(files::RESULTS);
            let f = std::fs::File::open(&path)
                .map_err(|error| usage(format!("cannot read {}: {error}", path.display())))?;
            for (n, line) in std::io::BufReader::new(f).lines().enumerate() {
                let line =
                    line.map_err(|e| usage(format!("cannot read {}: {e}", path.display())))?;
                if line.trim().is_empty() {
                    continue;
                }
                let r: Row = serde_json::from_str(&line).map_err(|e| {
                    usage(format!(
                        "{}:{}: not a result row ({e}); rerun that shard with --resume",
                        path.display(),
                        n + 1
                    ))
                })?;
                // Rows outside the eval are ignored, as `ragloop eval` does.
                let (Some(&a), Some(&q)) =
                    (arm_of.get(r.variant.as_str()), item_of.get(r.id.as_str()))
                else {
                    continue;
                };
                if r.repeat >= m.repeats {
                    continue;
                }
                let belongs = Shard::of(&r.variant, &r.id, r.repeat, sm.shard.count);
                let pair = || {
                    format!(
                        "{}/{}{}",
                        r.variant,
                        r.id,
                        if r.repeat > 0 {
                            format!(" (repeat {})", r.repeat)
                        } else {
                            String::new()
                        }
                    )
                };
                if belongs != sm.shard.index {
                    return Err(usage(format!(
                        "{}:{}: the pair {} belongs to shard {belongs}/{}, not {}: the shards overlap (were they run with the same ragloop and --shard count?)",
                        path.display(),
                        n + 1,
                        pair(),
                        sm.shard.count,
                        sm.shard
                    )));
                }
                match holder.get(&(a, q, r.repeat)) {
                    Some(i) if *i == sm.shard.index => continue,
                    Some(i) => {
                        return Err(usage(format!(
                            "the pair {} is in shard {i} and in shard {} ({}): overlapping shards",
                            pair(),
                            sm.shard,
                            dir.display()
                        )))
                    }
                    None => {
                        holder.insert((a, q, r.repeat), sm.shard.index);
                    }
                }
                out.write_all(line.as_bytes())
                    .and_then(|()| out.write_all(b"\n"))
                    .map_err(|error| super::store::StoreError::Write {
                        path: tmp.clone(),
                        error,
                    })?;
                report.push(r);
            }
        }
        // Every pair of every shard's slice has its row.
        let mut lacking: Vec<(u32, usize, String)> = Vec::new();
        for (vi, v) in variants.iter().enumerate() {
            for (qi, it) in ds.items.iter().enumerate() {
                for rep in 0..m.repeats {
                    if !holder.contains_key(&(vi as u32, qi as u32, rep)) {
                        let s = Shard::of(v, &it.id, rep, m.shard.count);
                        match lacking.iter_mut().find(|(i, _, _)| *i == s) {
                            Some(l) => l.1 += 1,
                            None => lacking.push((s, 1, format!("{v}/{}", it.id))),
                        }
                    }
                }
            }
        }
        if !lacking.is_empty() {
            lacking.sort();
            let lines: Vec<String> = lacking
                .iter()
                .map(|(s, n, eg)| {
                    format!(
                        "shard {s}/{} ({}): {n} pair(s) without a row (e.g. {eg})",
                        m.shard.count,
                        shards[(*s - 1) as usize].1.display()
                    )
                })
                .collect();
            return Err(usage(format!(
                "incomplete shard(s); rerun each with the same command and --resume:\n  {}",
                lines.join("\n  ")
            )));
        }
        Ok(report)
    })();
    let report = match result.and_then(|r| {
        out.flush().map_err(|error| {
            EvalError::Store(super::store::StoreError::Write {
                path: tmp.clone(),
                error,
            })
        })?;
        Ok(r)
    }) {
        Ok(r) => r,
        Err(e) => {
            drop(out);
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
    };
    drop(out);
    std::fs::rename(&tmp, &results_path).map_err(|error| {
        let _ = std::fs::remove_file(&tmp);
        super::store::StoreError::Rewrite {
            path: results_path.clone(),
            error,
        }
    })?;
    let mut merged_settings = m.settings.clone();
    merged_settings.shard = None;
    settings::write(&cfg.out, &merged_settings)?;
    let arms = if m.several {
        m.arms
            .iter()
            .map(|a| super::summary::ArmInfo {
                name: a.name.clone(),
                spec: a.spec.clone(),
                variant: a.variant.clone(),
            })
            .collect()
    } else {
        Vec::new()
    };
    let summary = finish::summarize(
        &Finish {
            spec_label: m
                .specs
                .iter()
                .map(|s| s.path.clone())
                .collect::<Vec<_>>()
                .join(", "),
            dataset_label: m.dataset.path.clone(),
            items: &ds.items,
            dataset_errors: &ds.errors,
            variants: &variants,
            arms,
            repeats: m.repeats,
            hard_kinds: m.hard_kinds.clone(),
            shard: None,
            settings: merged_settings,
            single_shot: m.single_shot.as_deref(),
            gates: &gate_list,
        },
        &report.rows,
    );
    let warnings = ds
        .errors
        .iter()
        .map(|e| format!("{}:{}: {}", ds_path.display(), e.line, e.message))
        .collect();
    let report_errors = super::write_reports(&cfg.out, &summary, &report)
        .err()
        .unwrap_or_default();
    Ok(Outcome {
        failed_runs: report.failed.total,
        resumed_rows: report.rows.len(),
        new_rows: 0,
        run_seconds: 0.0,
        report_seconds: started.elapsed().as_secs_f64(),
        summary,
        warnings,
        report_errors,
        interrupted: false,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn no_directory_is_a_usage_error() {
        let e = super::merge(&super::MergeConfig::default()).unwrap_err();
        assert!(
            e.is_usage() && e.to_string().contains("no shard directory"),
            "{e}"
        );
    }
    // The refusals are tested end to end in tests/eval_shard.rs.
}
