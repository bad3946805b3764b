//! Text analysis shared by the offline tasks: the BM25 analyzer (same pipeline as
//! the retrieval index), an extra list of question words, IDF weights, document
//! views and sentence splitting.

use std::collections::{HashMap, HashSet};

use serde_json::Value;
use tantivy::tokenizer::{
    Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer, StopWordFilter, TextAnalyzer,
};

use crate::retrieval::Index;

/// Words that carry no topic in a question, on top of the analyzer's English stop
/// words: interrogatives, auxiliaries, pronouns, filler, and `rust` itself (every page
/// of the corpus is about Rust). Stemmed at construction so they match analyzed terms.
#[rustfmt::skip]
const QUESTION_WORDS: &[&str] = &[
    // interrogatives and auxiliaries
    "what", "how", "why", "which", "when", "where", "who", "whom", "whose", "whether",
    "do", "does", "did", "doing", "done", "am", "have", "has", "had", "having",
    "can", "could", "would", "should", "shall", "may", "might", "must", "will",
    // pronouns
    "i", "me", "my", "mine", "myself", "we", "our", "us", "you", "your", "them", "those", "these",
    // filler and function words the analyzer keeps
    "get", "got", "gets", "want", "need", "needs", "just", "also", "instead", "anything", "something",
    "thing", "things", "way", "ways", "so", "only", "out", "from", "any", "about", "other", "some",
    "more", "most", "too", "very", "same", "each", "all", "both", "own", "again", "now", "then",
    "than", "up", "down", "off", "over", "there", "here", "like", "still", "even", "e", "g", "etc",
    "s", "t", "m", "re", "ve", "ll", "d", "one", "two",
    // every page of the corpus is about Rust
    "rust",
];

/// Most distinct question terms considered (a longer question is cut, so a 1 MB
/// question costs no more than a long paragraph).
pub(crate) const MAX_QUESTION_TERMS: usize = 256;

/// One analyzed token: its term and its byte range in the original text.
#[derive(Debug, Clone)]
pub(crate) struct Tok {
    pub term: String,
    pub from: usize,
    pub to: usize,
}

/// The analyzer plus the stemmed question words.
#[derive(Clone)]
pub(crate) struct Analyzer {
    inner: TextAnalyzer,
    extra_stop: HashSet<String>,
}

impl std::fmt::Debug for Analyzer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Analyzer")
            .field("extra_stop", &self.extra_stop.len())
            .finish()
    }
}

impl Analyzer {
    /// Same pipeline as the index: simple tokenizer, drop tokens over 40 bytes,
    /// lowercase, English stop words, English (Snowball) stemming.
    pub fn new() -> Analyzer {
        let builder = TextAnalyzer::builder(SimpleTokenizer::default())
            .filter(RemoveLongFilter::limit(40))
            .filter(LowerCaser);
        let inner = match StopWordFilter::new(Language::English) {
            Some(stop) => builder
                .filter(stop)
                .filter(Stemmer::new(Language::English))
                .build(),
            None => builder.filter(Stemmer::new(Language::English)).build(),
        };
        let mut a = Analyzer {
            inner,
            extra_stop: HashSet::new(),
        };
        let mut extra = HashSet::new();
        for w in QUESTION_WORDS {
            for t in a.raw_tokens(w) {
                extra.insert(t.term);
            }
            extra.insert((*w).to_string());
        }
        a.extra_stop = extra;
        a
    }

    fn raw_tokens(&self, text: &str) -> Vec<Tok> {
        let mut analyzer = self.inner.clone();
        let mut stream = analyzer.token_stream(text);
        let mut out = Vec::new();
        while stream.advance() {
            let t = stream.token();
            if !t.text.is_empty() {
                out.push(Tok {
                    term: t.text.clone(),
                    from: t.offset_from,
                    to: t.offset_to,
                });
            }
        }
        out
    }

    /// Every content token of `text`, in order, repeats kept: analyzer output minus
    /// the question words.
    pub fn tokens(&self, text: &str) -> Vec<Tok> {
        let mut v = self.raw_tokens(text);
        v.retain(|t| !self.extra_stop.contains(&t.term));
        v
    }

    /// Distinct content terms of `text` in order of first appearance.
    pub fn distinct(&self, text: &str) -> Vec<String> {
        let mut seen = HashSet::new();
        self.tokens(text)
            .into_iter()
            .filter(|t| seen.insert(t.term.clone()))
            .map(|t| t.term)
            .collect()
    }

    /// The distinct content terms of a question, at most [`MAX_QUESTION_TERMS`].
    pub fn question_terms(&self, question: &str) -> Vec<String> {
        let mut v = self.distinct(question);
        v.truncate(MAX_QUESTION_TERMS);
        v
    }

    /// `true` if `term` (analyzed) is one of the question words.
    pub fn is_question_word(&self, term: &str) -> bool {
        self.extra_stop.contains(term)
    }
}

/// Where term weights come from.
pub(crate) enum Idf<'a> {
    /// Corpus statistics of the retrieval index.
    Index(&'a Index, f64),
    /// Document frequencies over the documents of the call.
    Local { n: f64, df: HashMap<String, usize> },
    /// Every term weighs 1.
    Uniform,
}

impl<'a> Idf<'a> {
    /// Index statistics when there is an index; else statistics of `docs` when there
    /// are at least two; else uniform weights.
    pub fn new(index: Option<&'a Index>, docs: &[DocView]) -> Idf<'a> {
        if let Some(ix) = index {
            let n = ix.num_chunks() as f64;
            if n > 0.0 {
                return Idf::Index(ix, n);
            }
        }
        if docs.len() >= 2 {
            let mut df: HashMap<String, usize> = HashMap::new();
            for d in docs {
                for t in d.all_terms.keys() {
                    *df.entry(t.clone()).or_default() += 1;
                }
            }
            return Idf::Local {
                n: docs.len() as f64,
                df,
            };
        }
        Idf::Uniform
    }

    /// BM25 IDF of an analyzed term: `ln(1 + (N - df + 0.5) / (df + 0.5))`, > 0.
    pub fn idf(&self, term: &str) -> f64 {
        let (n, df) = match self {
            Idf::Index(ix, n) => (*n, ix.doc_freq(term) as f64),
            Idf::Local { n, df } => (*n, df.get(term).copied().unwrap_or(0) as f64),
            Idf::Uniform => return 1.0,
        };
        (1.0 + (n - df + 0.5).max(0.0) / (df + 0.5)).ln().max(1e-3)
    }

    /// IDF of every term of `terms`.
    pub fn weights(&self, terms: &[String]) -> Vec<f64> {
        terms.iter().map(|t| self.idf(t)).collect()
    }
}

/// A document of the inputs, analyzed once.
#[derive(Debug, Clone)]
pub(crate) struct DocView {
    /// The document id (string, or a number written out).
    pub id: String,
    /// What a citation names: `metadata.source`, else the id, else `doc N`.
    pub source: String,
    /// The content, verbatim.
    pub content: String,
    /// Term frequencies of the content.
    pub content_tf: HashMap<String, usize>,
    /// Terms of the title and heading path.
    pub heading_terms: HashSet<String>,
    /// Term frequencies of content, title and headings together.
    pub all_terms: HashMap<String, usize>,
    /// Number of content tokens.
    pub len: usize,
    /// Title and heading path, one per line.
    pub heading_text: String,
}

/// Reads a document object `{id, content, metadata}`; `Err` names what is wrong.
pub(crate) fn doc_view(an: &Analyzer, v: &Value, ordinal: usize) -> Result<DocView, String> {
    let obj = v
        .as_object()
        .ok_or_else(|| format!("is not an object (got {})", type_name(v)))?;
    let content = match obj.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(other) => return Err(format!("has a non-string `content` ({})", type_name(other))),
        None => return Err("has no `content`".to_string()),
    };
    let id = match obj.get("id") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    };
    let meta = obj.get("metadata").and_then(Value::as_object);
    let source = crate::retrieval::source_of(v).unwrap_or_else(|| format!("doc {}", ordinal + 1));
    let mut heading_text = String::new();
    if let Some(m) = meta {
        // The heading path starts with the page's own heading; the title is used only
        // without one (HTML titles often carry a site-wide suffix such as
        // "- The Rust Programming Language" that would match every page).
        if let Some(Value::Array(hs)) = m.get("heading_path") {
            for h in hs.iter().filter_map(Value::as_str) {
                heading_text.push_str(h);
                heading_text.push('\n');
            }
        }
        if heading_text.is_empty() {
            if let Some(Value::String(t)) = m.get("title") {
                heading_text.push_str(t);
                heading_text.push('\n');
            }
        }
    }
    let toks = an.tokens(&content);
    let mut content_tf: HashMap<String, usize> = HashMap::new();
    for t in &toks {
        *content_tf.entry(t.term.clone()).or_default() += 1;
    }
    let heading_terms: HashSet<String> = an.distinct(&heading_text).into_iter().collect();
    let mut all_terms = content_tf.clone();
    for t in &heading_terms {
        *all_terms.entry(t.clone()).or_default() += 1;
    }
    Ok(DocView {
        id,
        source,
        content,
        content_tf,
        heading_terms,
        all_terms,
        len: toks.len(),
        heading_text,
    })
}

/// JSON type name for error messages.
pub(crate) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Relevance of a document to question terms, 0..1: IDF-weighted coverage of the
/// question terms, each matched term counting `tf / (tf + 0.3)` where a title or
/// heading match adds 2 to its content frequency. Also returns the number of distinct
/// question terms the document contains.
pub(crate) fn coverage(doc: &DocView, q: &[String], w: &[f64]) -> (f64, usize) {
    let total: f64 = w.iter().sum();
    if total <= 0.0 {
        return (0.0, 0);
    }
    let mut got = 0.0;
    let mut matched = 0;
    for (t, wt) in q.iter().zip(w) {
        let tf = doc.content_tf.get(t).copied().unwrap_or(0) as f64
            + if doc.heading_terms.contains(t) {
                2.0
            } else {
                0.0
            };
        if tf > 0.0 {
            matched += 1;
            got += wt * tf / (tf + 0.3);
        }
    }
    ((got / total).clamp(0.0, 1.0), matched)
}

/// A sentence of a document.
#[derive(Debug, Clone)]
pub(crate) struct Sentence<'a> {
    pub text: &'a str,
}

/// Splits text into sentences: every line is split after `.`, `!` or `?` followed
/// by whitespace; pieces are trimmed, empty ones dropped.
pub(crate) fn sentences(text: &str) -> Vec<Sentence<'_>> {
    let mut out = Vec::new();
    for line in text.split_inclusive('\n') {
        let mut start = 0;
        let bytes = line.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            if (b == b'.' || b == b'!' || b == b'?')
                && i + 1 < bytes.len()
                && (bytes[i + 1] == b' ' || bytes[i + 1] == b'\t')
            {
                push_sentence(&mut out, line, start, i + 1);
                start = i + 1;
            }
            i += 1;
        }
        push_sentence(&mut out, line, start, line.len());
    }
    out
}

fn push_sentence<'a>(out: &mut Vec<Sentence<'a>>, line: &'a str, from: usize, to: usize) {
    // `from`/`to` are at ASCII bytes or the line's ends, so they are char boundaries.
    let Some(piece) = line.get(from..to) else {
        return;
    };
    let trimmed = piece.trim();
    if trimmed.is_empty() {
        return;
    }
    out.push(Sentence { text: trimmed });
}

/// `true` if an answer is the offline generator's refusal (or any answer that starts
/// like one).
pub(crate) fn is_refusal(answer: &str) -> bool {
    let a = answer.trim_start().to_lowercase();
    a.starts_with("i could not find")
        || a.starts_with("i couldn't find")
        || a.starts_with("i cannot find")
}

/// The refusal the generator answers when no document covers the question.
pub(crate) const REFUSAL: &str =
    "I could not find an answer to this question in the provided documents.";
