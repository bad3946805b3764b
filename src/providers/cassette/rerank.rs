//! The rerank lines of a cassette (`"kind": "rerank"`): one per HTTP rerank call of
//! a retriever's rerank stage, as the stage sees it (after the HTTP retries; cache
//! hits included), so `--replay` answers rerank calls with no server.
use crate::providers::cache::{canonical_bytes, RequestKey, KEY_VERSION};
use crate::retrieval::rerank::{RerankConfig, RerankUsage};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// The `kind` of a rerank line.
pub const RERANK: &str = "rerank";

/// The request key of a rerank call: blake3 of the canonical JSON of the reranker's
/// configuration (shape, model, base URL), the query and the documents in order.
pub fn rerank_key(config: &RerankConfig, query: &str, documents: &[String]) -> RequestKey {
    let doc = serde_json::json!({
        "config": config,
        "query": query,
        "documents": documents,
        "kind": RERANK,
        "v": KEY_VERSION,
    });
    RequestKey(blake3::hash(&canonical_bytes(&doc)))
}

/// A rerank line as written (borrowed).
#[derive(Serialize)]
pub(crate) struct RerankLineOut<'a> {
    pub v: u32,
    pub kind: &'static str,
    pub seq: u64,
    pub key: String,
    pub config: &'a RerankConfig,
    pub query: &'a str,
    pub documents: &'a [String],
    pub scores: Option<&'a [f64]>,
    #[serde(skip_serializing_if = "is_default")]
    pub usage: RerankUsage,
    pub cached: bool,
    pub error: Option<&'a str>,
}

fn is_default(u: &RerankUsage) -> bool {
    *u == RerankUsage::default()
}

/// A rerank line as read back.
#[derive(Clone, Debug, Deserialize)]
pub struct RerankLine {
    /// Line format version.
    pub v: u32,
    /// Always `rerank`.
    pub kind: String,
    /// Call order (shared with the other lines).
    #[serde(default)]
    pub seq: u64,
    /// [`rerank_key`] of the call, 64 hex digits.
    pub key: String,
    /// Shape, model, base URL.
    pub config: RerankConfig,
    /// The query.
    pub query: String,
    /// The documents' texts, in the order sent.
    pub documents: Vec<String>,
    /// One score per document (absent when the call failed).
    #[serde(default)]
    pub scores: Option<Vec<f64>>,
    /// What the server billed.
    #[serde(default)]
    pub usage: RerankUsage,
    /// The scores came from the response cache.
    #[serde(default)]
    pub cached: bool,
    /// The failure message, when the call failed.
    #[serde(default)]
    pub error: Option<String>,
}

/// A recorded rerank answer: scores and usage, or the failure message.
pub type RecordedRerank = Result<(Vec<f64>, RerankUsage), String>;

/// The rerank lines of a cassette, by key.
#[derive(Debug, Default)]
pub(super) struct Reranks {
    pub(super) answers: HashMap<RequestKey, RecordedRerank>,
    pub(super) lines: usize,
}

/// Whether a line, as our writer writes it, is a rerank line.
pub(super) fn looks_like_rerank(raw: &[u8]) -> bool {
    const MARK: &[u8] = br#""kind":"rerank""#;
    let head = &raw[..raw.len().min(48)];
    head.windows(MARK.len()).any(|w| w == MARK)
}

impl Reranks {
    /// Indexes one rerank line (the first answer of a key wins).
    pub(super) fn add(&mut self, x: RerankLine, version: u32) -> Result<(), String> {
        if x.v != version {
            return Err(format!(
                "format version {} (this ragloop reads version {version})",
                x.v
            ));
        }
        let key = RequestKey::from_hex(&x.key).map_err(|e| e.to_string())?;
        let answer = match (x.scores, x.error) {
            (None, None) => return Err("the rerank line has neither `scores` nor `error`".into()),
            (None, Some(e)) => Err(e),
            (Some(s), _) => {
                if s.len() != x.documents.len() {
                    return Err(format!(
                        "the rerank line has {} score(s) for {} document(s)",
                        s.len(),
                        x.documents.len()
                    ));
                }
                Ok((s, x.usage))
            }
        };
        self.answers.entry(key).or_insert(answer);
        self.lines += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::cassette::Cassette;
    use std::path::Path;

    fn config() -> RerankConfig {
        RerankConfig {
            kind: "tei".into(),
            model: None,
            base_url: "http://127.0.0.1:1".into(),
        }
    }

    fn line(scores: &str) -> String {
        let docs = vec!["a".to_string(), "b".to_string()];
        format!(
            r#"{{"v":1,"kind":"rerank","seq":0,"key":"{}","config":{},"query":"q","documents":["a","b"],{scores}"cached":false}}"#,
            rerank_key(&config(), "q", &docs).hex(),
            serde_json::to_string(&config()).unwrap()
        )
    }

    #[test]
    fn rerank_lines_are_read_by_key_and_malformed_ones_refused() {
        let docs = vec!["a".to_string(), "b".to_string()];
        let text = format!("{}\n", line(r#""scores":[0.5,0.25],"usage":{"tokens":3},"#));
        let c = Cassette::from_bytes(Path::new("c.jsonl"), text.as_bytes()).unwrap();
        assert_eq!((c.len(), c.rerank_lines()), (1, 1));
        let got = c.rerank(&rerank_key(&config(), "q", &docs)).unwrap();
        assert_eq!(got.as_ref().unwrap().0, vec![0.5, 0.25]);
        assert_eq!(got.as_ref().unwrap().1.tokens, Some(3));
        assert!(c.rerank(&rerank_key(&config(), "other", &docs)).is_none());
        assert_ne!(
            rerank_key(&config(), "q", &docs),
            rerank_key(&config(), "q", &["b".to_string(), "a".to_string()]),
            "document order is part of the key"
        );
        for (bad, msg) in [
            (line(""), "neither `scores` nor `error`"),
            (line(r#""scores":[0.5],"#), "1 score(s) for 2 document(s)"),
            (line(r#""scores":[0.5,null],"#), "not a cassette exchange"),
            (
                line(r#""error":"boom","#).replace("\"v\":1", "\"v\":2"),
                "format version 2",
            ),
        ] {
            let e = Cassette::from_bytes(Path::new("c.jsonl"), format!("{bad}\n").as_bytes())
                .unwrap_err()
                .to_string();
            assert!(
                e.starts_with("c.jsonl:1: ") && e.contains(msg),
                "{msg}: {e}"
            );
        }
    }
}
