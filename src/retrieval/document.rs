//! The document type every retriever returns, its stable ids, and the one rule for
//! a document's source.
use serde_json::Value;

/// The namespace of every chunk id (UUID v5). Fixed forever: changing it changes
/// every id ever handed out.
pub const ID_NAMESPACE: uuid::Uuid =
    uuid::Uuid::from_u128(0x6c1f_7a52_3b0e_4d8e_9a55_1f2e_8c4d_b7a3);

/// One retrievable chunk: what the index stores and what [`Index::search`] returns.
///
/// `metadata` always holds these keys:
/// - `id` (string): same as [`Document::id`];
/// - `source` (string): the file path relative to the corpus root, `/`-separated;
/// - `title` (string): the page title (first `h1`, else the HTML `<title>`, else the
///   file name);
/// - `heading_path` (array of strings): the headings enclosing the chunk, outermost
///   first;
/// - `chunk_index` (integer): ordinal of the chunk within its file, from 0;
/// - `byte_range` (array `[start, end]`): byte offsets into the extracted text of the
///   file, end exclusive; `extracted[start..end] == content`;
/// - `score` (number, only in search results): the BM25 score of the chunk for the
///   query.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Document {
    /// Stable id: UUID v5 (namespace [`ID_NAMESPACE`]) of
    /// `"{source}\0{chunk_index}\0{blake3 hex of content}"`, hyphenated lowercase.
    pub id: String,
    /// The chunk text, verbatim: exactly the text that was indexed.
    pub content: String,
    /// Metadata, see the type documentation for the keys.
    pub metadata: serde_json::Map<String, serde_json::Value>,
}

/// The stable id of a chunk: UUID v5 in [`ID_NAMESPACE`] of
/// `"{source}\0{chunk_index}\0{blake3 hex of content}"`.
pub fn chunk_id(source: &str, chunk_index: usize, content: &str) -> String {
    let name = format!(
        "{source}\u{0}{chunk_index}\u{0}{}",
        blake3::hash(content.as_bytes()).to_hex()
    );
    uuid::Uuid::new_v5(&ID_NAMESPACE, name.as_bytes())
        .hyphenated()
        .to_string()
}

/// The source of a document given as JSON (`{id, content, metadata}`, as the runtime
/// holds documents in the state): `metadata.source` when it is a non-blank string,
/// else `id` when it is a non-empty string or a number; `None` otherwise. The one
/// rule for "where a document comes from", used by the `cite` filter, the run
/// result's `sources`, eval's per-row sources and the offline provider.
pub fn source_of(doc: &Value) -> Option<String> {
    if let Some(s) = doc
        .pointer("/metadata/source")
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
    {
        return Some(s.to_string());
    }
    match doc.get("id") {
        Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    }
}

impl Document {
    /// The document's source: `metadata.source` when it is a non-blank string, else
    /// its id (see [`source_of`]).
    pub fn source(&self) -> &str {
        self.metadata
            .get("source")
            .and_then(Value::as_str)
            .filter(|s| !s.trim().is_empty())
            .unwrap_or(&self.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn source_is_metadata_source_else_id() {
        assert_eq!(
            source_of(&json!({"id": "a", "metadata": {"source": "x.md"}})).as_deref(),
            Some("x.md")
        );
        assert_eq!(
            source_of(&json!({"id": "a", "metadata": {"source": "  "}})).as_deref(),
            Some("a")
        );
        assert_eq!(
            source_of(&json!({"id": 7, "metadata": {}})).as_deref(),
            Some("7")
        );
        assert_eq!(source_of(&json!({"id": "", "content": "c"})), None);
        assert_eq!(source_of(&json!("not a document")), None);
    }
}
