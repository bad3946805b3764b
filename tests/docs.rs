//! Documentation that is generated from code stays in sync with it.
use ragloop::diag::{codes_markdown, Code};
use std::collections::HashSet;
use std::path::Path;

#[test]
fn codes_are_unique_well_formed_and_documented() {
    let mut seen = HashSet::new();
    for code in Code::ALL {
        let s = code.as_str();
        assert!(seen.insert(s), "{s} is used twice");
        assert!(
            s.len() == 4
                && (s.starts_with('E') || s.starts_with('W'))
                && s[1..].chars().all(|c| c.is_ascii_digit()),
            "{s}"
        );
        assert!(
            code.explanation().trim().len() > 30,
            "{s} needs a paragraph of documentation"
        );
        assert!(!code.summary().is_empty());
        assert_eq!(Code::parse(s), Some(*code));
    }
}

#[test]
fn diagnostics_reference_is_up_to_date() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/diagnostics.md");
    let generated = codes_markdown();
    if std::env::var_os("RAGLOOP_BLESS").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    assert!(
        std::fs::read_to_string(&path).unwrap_or_default() == generated,
        "docs/diagnostics.md is stale; rerun with RAGLOOP_BLESS=1"
    );
}

#[test]
fn spec_reference_documents_every_construct() {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/spec.md"))
        .unwrap();
    for construct in [
        "version:",
        "root:",
        "state:",
        "initial:",
        "reducers:",
        "append",
        "add",
        "merge",
        "replace",
        "models:",
        "provider:",
        "api_key_env",
        "price:",
        "retrievers:",
        "top_k",
        "tools:",
        "kind: hybrid",
        "dense",
        "embedding:",
        "dimensions:",
        "batch_size:",
        "rrf_k:",
        "kind: searxng",
        "kind: tavily",
        "base_url:",
        "timeout_secs:",
        "entry:",
        "limits:",
        "max_steps",
        "max_visits",
        "kind: retrieve",
        "kind: llm",
        "kind: map",
        "over:",
        "concurrency:",
        "kind: update",
        "kind: tool",
        "inputs:",
        "prompt:",
        "schema:",
        "repair_attempts",
        "update:",
        "edges:",
        "when:",
        "else:",
        "END",
        "output:",
        "fallback",
        "variants:",
        "set:",
        "select_graded",
        "count_graded",
        "cite",
    ] {
        assert!(
            doc.contains(construct),
            "docs/spec.md does not mention `{construct}`"
        );
    }
}
