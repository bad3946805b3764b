//! The standard RAG tasks a node can name with `task:`. The `offline` provider
//! implements each of them with classical IR methods; LLM providers ignore the task
//! and follow the prompt. Source: the node contracts of seed 000 (retriever, grader,
//! rewriter, generator) and seed 004 (answer grader, adaptive routing).

/// A task and the `inputs` a node must provide for it.
#[derive(Clone, Copy, Debug)]
pub struct Task {
    /// Name used in specs.
    pub name: &'static str,
    /// Input names the node's `inputs` must define.
    pub inputs: &'static [&'static str],
    /// What the task returns.
    pub returns: &'static str,
}

/// Every task, in the order of a typical corrective-RAG loop.
pub const TASKS: &[Task] = &[
    Task {
        name: "grade_documents",
        inputs: &["question", "document"],
        returns: "{document_id, binary_score: yes|no, confidence: 0..1} for one document",
    },
    Task {
        name: "rewrite_query",
        inputs: &["question", "documents"],
        returns: "the rewritten query (text)",
    },
    Task {
        name: "generate_answer",
        inputs: &["question", "documents"],
        returns: "an answer whose sentences cite their documents as [source] (text)",
    },
    Task {
        name: "grade_answer",
        inputs: &["question", "documents", "answer"],
        returns: "{grounded: bool, addresses_question: bool}",
    },
    Task {
        name: "route_question",
        inputs: &["question"],
        returns: "{route: retrieve|direct}",
    },
    Task {
        name: "classify_question",
        inputs: &["question"],
        returns: "{complexity: simple|complex, reason} (adaptive routing: single-shot or the loop)",
    },
];

/// Looks a task up by name.
pub fn task(name: &str) -> Option<&'static Task> {
    TASKS.iter().find(|t| t.name == name)
}
