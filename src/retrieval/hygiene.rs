//! Corpus hygiene: pages that would only crowd the top-k out, found by their content
//! (never by their names), skipped when [`IndexOptions::hygiene`] is on (the default
//! for `rust-docs:` corpora).
//!
//! Each page's extracted text is cut into paragraphs (blocks separated by a blank
//! line; heading lines left out). A paragraph found on [`TEMPLATE_PAGES`] or more pages
//! is *template text* (a site's footer, a "no longer distributed" notice). Then, in
//! this order:
//! 1. **duplicate**: the same extracted text as a page earlier in path order (which is
//!    kept): `index.html` repeating `title-page.html` (duplicates are then left out of
//!    the paragraph counts);
//! 2. **placeholder**: a page with less than [`PLACEHOLDER_MAX_OWN`] bytes of its own
//!    (non-template) text and at least as much template text: an old-edition stub, an
//!    "old link" page, a footer-only page;
//! 3. **aggregate**: a page at least [`AGGREGATE_SHARE`] of whose own paragraphs (of
//!    [`MIN_PARAGRAPH`] bytes or more) are found on other kept pages, drawn from at
//!    least [`AGGREGATE_MIN_SOURCES`] of them: an all-in-one page such as mdBook's
//!    `print.html`, which repeats every chapter.
//!
//! With hygiene on, files are read and extracted in a first pass (the extracted texts
//! are kept for the second pass up to [`KEEP_BUDGET`] bytes, then read again), so
//! memory stays bounded on large corpora.

use std::collections::{HashMap, HashSet};

use super::extracted::Extracted;
use super::ingest::{extract_file, Candidate};
use super::skips::{SkipReason, Skips};
use super::IndexOptions;

/// A paragraph found on this many pages or more is template text.
pub const TEMPLATE_PAGES: usize = 3;
/// A page with less own text than this (bytes; a third of the default chunk target)
/// and at least as much template text is a placeholder.
pub const PLACEHOLDER_MAX_OWN: usize = 400;
/// Share of a page's own paragraph bytes found on other pages that makes it an
/// aggregate.
pub const AGGREGATE_SHARE: f64 = 0.8;
/// Distinct other pages an aggregate must repeat.
pub const AGGREGATE_MIN_SOURCES: usize = 3;
/// Paragraphs shorter than this (bytes) do not count towards the aggregate measure
/// (`}` or `Filename: src/main.rs` lines repeat everywhere).
pub const MIN_PARAGRAPH: usize = 24;
/// Bytes of extracted text kept between the two passes.
pub const KEEP_BUDGET: usize = 64 << 20;

/// One page's paragraphs: (hash of the whitespace-normalized text, length in bytes).
struct Signature {
    whole: blake3::Hash,
    paragraphs: Vec<(u64, usize)>,
}

fn signature(e: &Extracted) -> Signature {
    let heading_starts: HashSet<usize> = e.headings.iter().map(|h| h.start).collect();
    let mut paragraphs = Vec::new();
    let mut seen = HashSet::new();
    let mut offset = 0usize;
    for block in e.text.split("\n\n") {
        let start = offset + (block.len() - block.trim_start().len());
        offset += block.len() + 2;
        let norm = block.split_whitespace().collect::<Vec<_>>().join(" ");
        if norm.is_empty() || heading_starts.contains(&start) {
            continue;
        }
        let h = blake3::hash(norm.as_bytes());
        let mut b = [0u8; 8];
        b.copy_from_slice(&h.as_bytes()[..8]);
        let key = u64::from_le_bytes(b);
        // A paragraph repeated within one page counts once.
        if seen.insert(key) {
            paragraphs.push((key, norm.len()));
        }
    }
    Signature {
        whole: blake3::hash(e.text.as_bytes()),
        paragraphs,
    }
}

/// The hygiene verdict for every page (`None`: kept), with a detail for the report.
fn judge(sigs: &[(&str, Signature)]) -> Vec<Option<(SkipReason, String)>> {
    let mut verdict: Vec<Option<(SkipReason, String)>> = vec![None; sigs.len()];
    let mut first_with: HashMap<blake3::Hash, usize> = HashMap::new();
    for (i, (_, s)) in sigs.iter().enumerate() {
        match first_with.get(&s.whole) {
            Some(&j) => {
                verdict[i] = Some((SkipReason::Duplicate, format!("same text as {}", sigs[j].0)))
            }
            None => {
                first_with.insert(s.whole, i);
            }
        }
    }
    // Paragraph -> the distinct (non-duplicate) pages holding it.
    let mut pages_of: HashMap<u64, Vec<usize>> = HashMap::new();
    for (i, (_, s)) in sigs.iter().enumerate() {
        if verdict[i].is_none() {
            for (h, _) in &s.paragraphs {
                pages_of.entry(*h).or_default().push(i);
            }
        }
    }
    let template = |h: &u64| pages_of.get(h).map_or(0, Vec::len) >= TEMPLATE_PAGES;
    for (i, (_, s)) in sigs.iter().enumerate() {
        if verdict[i].is_some() {
            continue;
        }
        let (mut own, mut shared) = (0usize, 0usize);
        for (h, len) in &s.paragraphs {
            if template(h) {
                shared += len;
            } else {
                own += len;
            }
        }
        if shared > 0 && own < PLACEHOLDER_MAX_OWN && shared >= own {
            verdict[i] = Some((
                SkipReason::Placeholder,
                format!("{own} bytes of its own text, {shared} of template text"),
            ));
        }
    }
    let kept: Vec<bool> = verdict.iter().map(Option::is_none).collect();
    let mut aggregate = Vec::new();
    for (i, (_, s)) in sigs.iter().enumerate() {
        if !kept[i] {
            continue;
        }
        let (mut total, mut covered) = (0usize, 0usize);
        let mut sources: HashSet<usize> = HashSet::new();
        for (h, len) in s
            .paragraphs
            .iter()
            .filter(|(h, len)| *len >= MIN_PARAGRAPH && !template(h))
        {
            total += len;
            let others: Vec<usize> = pages_of
                .get(h)
                .into_iter()
                .flatten()
                .copied()
                .filter(|&j| j != i && kept[j])
                .collect();
            if !others.is_empty() {
                covered += len;
                sources.extend(others);
            }
        }
        if total > 0
            && covered as f64 >= AGGREGATE_SHARE * total as f64
            && sources.len() >= AGGREGATE_MIN_SOURCES
        {
            aggregate.push((
                i,
                format!(
                    "{:.0}% of its text repeats {} other pages",
                    100.0 * covered as f64 / total as f64,
                    sources.len()
                ),
            ));
        }
    }
    for (i, detail) in aggregate {
        verdict[i] = Some((SkipReason::Aggregate, detail));
    }
    verdict
}

/// Calls `f` with every candidate that is read, extracted and (with `opts.hygiene`)
/// kept by the rules above, in candidate order; skips are recorded in `skips` and
/// unexpected ones warned about. Stops at the first error of `f`.
pub(crate) fn for_each_kept<E>(
    candidates: &[Candidate],
    opts: &IndexOptions,
    skips: &mut Skips,
    warnings: &mut Vec<String>,
    mut f: impl FnMut(&Candidate, Extracted, &mut Skips) -> Result<(), E>,
) -> Result<(), E> {
    if !opts.hygiene {
        for cand in candidates {
            if let Some(e) = extract_file(cand, std::fs::read(&cand.path), skips, warnings) {
                f(cand, e, skips)?;
            }
        }
        return Ok(());
    }
    // Pass 1: extract everything, keep texts up to the budget, sign every page.
    let mut kept_text: Vec<Option<Extracted>> = Vec::with_capacity(candidates.len());
    let mut sigs: Vec<(&str, Signature)> = Vec::new();
    let mut sig_of: Vec<Option<usize>> = Vec::with_capacity(candidates.len());
    let mut budget = KEEP_BUDGET;
    for cand in candidates {
        match extract_file(cand, std::fs::read(&cand.path), skips, warnings) {
            Some(e) => {
                sig_of.push(Some(sigs.len()));
                sigs.push((cand.rel.as_str(), signature(&e)));
                if e.text.len() <= budget {
                    budget -= e.text.len();
                    kept_text.push(Some(e));
                } else {
                    budget = 0;
                    kept_text.push(None);
                }
            }
            None => {
                sig_of.push(None);
                kept_text.push(None);
            }
        }
    }
    let verdict = judge(&sigs);
    // Pass 2: the kept pages, in order.
    for ((cand, text), sig) in candidates.iter().zip(kept_text).zip(sig_of) {
        let Some(sig) = sig else { continue };
        if let Some((reason, detail)) = &verdict[sig] {
            skips.push(&cand.rel, *reason, Some(detail.clone()));
            continue;
        }
        let text = match text {
            Some(t) => Some(t),
            // Read again (past the budget); a file changed in between is still judged
            // by its first reading.
            None => extract_file(cand, std::fs::read(&cand.path), skips, warnings),
        };
        if let Some(e) = text {
            f(cand, e, skips)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retrieval::Heading;

    fn page(title: &str, body: &str) -> Extracted {
        Extracted {
            title: Some(title.to_string()),
            text: format!("{title}\n\n{body}"),
            headings: vec![Heading {
                level: 1,
                text: title.to_string(),
                start: 0,
            }],
        }
    }

    fn verdicts(pages: &[(&str, Extracted)]) -> Vec<Option<SkipReason>> {
        let sigs: Vec<(&str, Signature)> = pages.iter().map(|(n, e)| (*n, signature(e))).collect();
        judge(&sigs)
            .into_iter()
            .map(|v| v.map(|(r, _)| r))
            .collect()
    }

    const NOTICE: &str =
        "This edition of the guide is no longer published here; see the current one.";

    #[test]
    fn placeholders_duplicates_and_aggregates() {
        let long = |w: &str| {
            format!("{w} explains how the {w} machinery works in practice, with examples. ")
                .repeat(6)
        };
        let a = long("alpha");
        let b = long("beta");
        let c = long("gamma");
        let pages = vec![
            ("a.html", page("Alpha", &a)),
            (
                "all.html",
                page("Everything", &format!("{a}\n\n{b}\n\n{c}")),
            ),
            ("b.html", page("Beta", &b)),
            ("c.html", page("Gamma", &c)),
            ("copy.html", page("Alpha", &a)),
            ("old/1.html", page("One", NOTICE)),
            ("old/2.html", page("Two", NOTICE)),
            (
                "old/3.html",
                page("Three", &format!("{NOTICE}\n\nA short line of its own.")),
            ),
            (
                "short.html",
                page(
                    "Short",
                    "A genuine short page with one paragraph of its own.",
                ),
            ),
        ];
        assert_eq!(
            verdicts(&pages),
            vec![
                None,
                Some(SkipReason::Aggregate),
                None,
                None,
                Some(SkipReason::Duplicate),
                Some(SkipReason::Placeholder),
                Some(SkipReason::Placeholder),
                Some(SkipReason::Placeholder),
                None,
            ]
        );
    }

    #[test]
    fn a_page_quoting_two_others_is_kept() {
        let a = "A paragraph long enough to be counted by the aggregate rule, about alpha.";
        let b = "A paragraph long enough to be counted by the aggregate rule, about beta.";
        let pages = vec![
            ("a.html", page("A", a)),
            ("b.html", page("B", b)),
            ("both.html", page("Both", &format!("{a}\n\n{b}"))),
        ];
        assert_eq!(verdicts(&pages), vec![None, None, None]);
    }
}
