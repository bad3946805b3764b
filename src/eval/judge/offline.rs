//! The `offline` judge: faithfulness and answer relevancy by classical text
//! matching, no model. An approximation (docs/eval.md "The offline judge"):
//!
//! - **Statements.** The answer is split into sentences: at `.`, `!` or `?` followed
//!   by white space or the end, and at line breaks; list markers (`-`, `*`, `1.`) and
//!   citation brackets (`[source]`) are dropped. A sentence with no content term
//!   (see below) is not a statement ("Sure.").
//! - **Content terms.** The retrieval index's analyzer (lowercase, English stop words
//!   removed, Snowball English stemming), minus question words (what, how, does,
//!   ...), distinct.
//! - **Supported.** A statement is supported when at least [`SUPPORT_SHARE`] of its
//!   content terms occur among the content terms of the run's context (the documents
//!   of the spec's `output.documents` field at the end of the run).
//! - **Answer relevancy.** The share of the question's content terms that occur in
//!   the answer (how much of what was asked the answer talks about); a question
//!   without content terms cannot be scored (a judge failure naming it).
use std::collections::HashSet;
use tantivy::tokenizer::{
    Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer, StopWordFilter, TextAnalyzer,
};

/// Share of a statement's content terms the context must hold for it to be
/// supported.
pub const SUPPORT_SHARE: f64 = 0.6;

/// Words that carry no content in a question or an answer, besides the analyzer's
/// English stop words.
#[rustfmt::skip]
const EXTRA_STOP: &[&str] = &[
    "what", "how", "why", "which", "when", "where", "who", "whom", "whose", "whether",
    "do", "does", "did", "doing", "done", "am", "have", "has", "had", "having",
    "can", "could", "would", "should", "shall", "may", "might", "must", "will",
    "i", "me", "my", "we", "our", "us", "you", "your", "them", "those", "these",
    "get", "gets", "want", "need", "needs", "just", "also", "use", "uses", "using",
    "yes", "sure", "ok", "okay", "well",
];

/// The classical judge (see the module docs). Cheap to clone.
#[derive(Clone)]
pub struct OfflineJudge {
    analyzer: TextAnalyzer,
    extra: HashSet<String>,
}

impl std::fmt::Debug for OfflineJudge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OfflineJudge")
    }
}

impl Default for OfflineJudge {
    fn default() -> Self {
        OfflineJudge::new()
    }
}

impl OfflineJudge {
    /// The judge with the index's analyzer.
    pub fn new() -> OfflineJudge {
        let builder = TextAnalyzer::builder(SimpleTokenizer::default())
            .filter(RemoveLongFilter::limit(40))
            .filter(LowerCaser);
        let analyzer = match StopWordFilter::new(Language::English) {
            Some(stop) => builder
                .filter(stop)
                .filter(Stemmer::new(Language::English))
                .build(),
            None => builder.filter(Stemmer::new(Language::English)).build(),
        };
        let mut j = OfflineJudge {
            analyzer,
            extra: HashSet::new(),
        };
        let mut extra = HashSet::new();
        for w in EXTRA_STOP {
            extra.extend(j.raw_terms(w));
            extra.insert((*w).to_string());
        }
        j.extra = extra;
        j
    }

    fn raw_terms(&self, text: &str) -> Vec<String> {
        let mut a = self.analyzer.clone();
        let mut stream = a.token_stream(text);
        let mut out = Vec::new();
        while stream.advance() {
            let t = &stream.token().text;
            if !t.is_empty() {
                out.push(t.clone());
            }
        }
        out
    }

    /// The distinct content terms of `text`, in order of first appearance.
    pub fn terms(&self, text: &str) -> Vec<String> {
        let mut seen = HashSet::new();
        self.raw_terms(text)
            .into_iter()
            .filter(|t| !self.extra.contains(t) && seen.insert(t.clone()))
            .collect()
    }

    /// The answer's statements (see the module docs), trimmed, in order.
    pub fn statements(&self, answer: &str) -> Vec<String> {
        split_sentences(answer)
            .into_iter()
            .filter(|s| !self.terms(s).is_empty())
            .collect()
    }

    /// Whether each statement is supported by the context (see the module docs).
    pub fn verdicts(&self, statements: &[String], context: &[String]) -> Vec<bool> {
        let mut known: HashSet<String> = HashSet::new();
        for c in context {
            known.extend(self.raw_terms(c));
        }
        statements
            .iter()
            .map(|s| {
                let t = self.terms(s);
                let found = t.iter().filter(|x| known.contains(*x)).count();
                !t.is_empty() && found as f64 >= SUPPORT_SHARE * t.len() as f64
            })
            .collect()
    }

    /// Answer relevancy: share of the question's content terms in the answer.
    ///
    /// # Errors
    /// The question has no content term.
    pub fn relevancy(&self, question: &str, answer: &str) -> Result<f64, String> {
        let q = self.terms(question);
        if q.is_empty() {
            return Err("offline judge: the question has no content term to look for".into());
        }
        let a: HashSet<String> = self.raw_terms(answer).into_iter().collect();
        let found = q.iter().filter(|t| a.contains(*t)).count();
        Ok(found as f64 / q.len() as f64)
    }
}

/// Splits text into sentences: at `.`, `!`, `?` followed by white space or the end,
/// and at line breaks; list markers and `[...]` citations removed, blanks dropped.
pub fn split_sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = strip_marker(line);
        let mut cur = String::new();
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            cur.push(c);
            if matches!(c, '.' | '!' | '?') && chars.peek().is_none_or(|n| n.is_whitespace()) {
                push_sentence(&mut out, &cur);
                cur.clear();
            }
        }
        push_sentence(&mut out, &cur);
    }
    out
}

fn push_sentence(out: &mut Vec<String>, raw: &str) {
    let mut s = String::with_capacity(raw.len());
    let mut depth = 0usize;
    for c in raw.chars() {
        match c {
            '[' => depth += 1,
            ']' if depth > 0 => depth -= 1,
            _ if depth == 0 => s.push(c),
            _ => {}
        }
    }
    let t = s.trim();
    if t.chars().any(char::is_alphabetic) {
        out.push(t.to_string());
    }
}

/// A line without its list marker (`-`, `*`, `•`, `1.`, `2)`).
fn strip_marker(line: &str) -> &str {
    let t = line.trim_start();
    for marker in ["- ", "* ", "• "] {
        if let Some(rest) = t.strip_prefix(marker) {
            return rest;
        }
    }
    let digits = t.chars().take_while(char::is_ascii_digit).count();
    if digits > 0 {
        let rest = &t[digits..];
        if let Some(r) = rest.strip_prefix(". ").or_else(|| rest.strip_prefix(") ")) {
            return r;
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_are_sentences_with_content() {
        let j = OfflineJudge::new();
        let s = j.statements(
            "Sure. `cargo check` compiles without producing a binary [ch01.html]. It is faster!\n- Use cargo build for 1.5x more.\n2. Done?",
        );
        assert_eq!(
            s,
            vec![
                "`cargo check` compiles without producing a binary .",
                "It is faster!",
                "Use cargo build for 1.5x more.",
            ]
        );
        assert!(j.statements("").is_empty());
        assert!(j.statements("   \n  ").is_empty());
        assert!(j.statements("Yes. It is.").is_empty(), "no content term");
    }

    #[test]
    fn a_statement_is_supported_by_its_content_terms_with_stemming() {
        let j = OfflineJudge::new();
        let ctx = vec!["The cargo check command quickly checks your code to make sure it compiles but doesn't produce an executable.".to_string()];
        let st = vec![
            "Cargo check checks that the code compiles.".to_string(),
            "Cargo check uploads crates to crates.io and signs them.".to_string(),
        ];
        assert_eq!(j.verdicts(&st, &ctx), vec![true, false]);
        // Nothing in the context: nothing is supported.
        assert_eq!(j.verdicts(&st, &[]), vec![false, false]);
    }

    #[test]
    fn relevancy_is_the_share_of_question_terms_answered() {
        let j = OfflineJudge::new();
        let q = "What does cargo check do?";
        let r = j
            .relevancy(q, "cargo check compiles the code without a binary")
            .unwrap();
        assert!((r - 1.0).abs() < 1e-12, "{r}");
        let r = j.relevancy(q, "Cargo is the package manager.").unwrap();
        assert!((r - 0.5).abs() < 1e-12, "{r}");
        assert_eq!(j.relevancy(q, "Ownership moves values.").unwrap(), 0.0);
        assert!(j.relevancy("What is it?", "x").is_err());
    }
}
