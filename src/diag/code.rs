//! Stable diagnostic codes. A code is never reused for another fault; each one has a
//! one-line summary and a paragraph of documentation (rendered into docs/diagnostics.md
//! and checked by a test).

macro_rules! codes {
    ($( $(#[doc = $doc:literal])* $variant:ident = $code:literal, $summary:literal; )*) => {
        /// A diagnostic code: `E` for errors, `W` for warnings, then three digits.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum Code {
            $( $(#[doc = $doc])* $variant, )*
        }

        impl Code {
            /// Every code, in numeric order.
            pub const ALL: &'static [Code] = &[$(Code::$variant),*];

            /// The stable string, e.g. `"E021"`.
            pub fn as_str(self) -> &'static str {
                match self { $(Code::$variant => $code,)* }
            }

            /// One line saying what the code means.
            pub fn summary(self) -> &'static str {
                match self { $(Code::$variant => $summary,)* }
            }

            /// The documentation paragraph of the code.
            pub fn explanation(self) -> &'static str {
                match self { $(Code::$variant => concat!($($doc, "\n"),*),)* }
            }

            /// Looks a code up by its string.
            pub fn parse(s: &str) -> Option<Code> {
                Code::ALL.iter().copied().find(|c| c.as_str() == s)
            }
        }
    };
}

codes! {
    /// The file is not valid YAML (or JSON, for `.json` schema files). The position is
    /// where the parser gave up; the fault is often just before it.
    YamlSyntax = "E001", "syntax error";
    /// A mapping names the same key twice. YAML parsers that silently keep the last
    /// value hide typos and merge mistakes, so ragloop rejects them.
    DuplicateKey = "E002", "duplicate key";
    /// A key the spec format does not define. The message lists the keys allowed there.
    UnknownKey = "E003", "unknown key";
    /// A value has the wrong type or is outside its allowed values (for example a
    /// string where a number is required, or an unknown node `kind`).
    WrongType = "E004", "wrong type or value";
    /// A required key is missing, for example a node without `kind`, a `retrieve`
    /// node without `query`, or a `map` node without `over`.
    MissingKey = "E005", "missing required key";
    /// The `version` key is missing or names a format version this ragloop does not know.
    Version = "E006", "unsupported spec version";
    /// A file named on the command line or in a spec could not be read.
    FileUnreadable = "E007", "file cannot be read";
    /// A file is binary or not valid UTF-8.
    NotText = "E008", "file is not UTF-8 text";
    /// A resource limit was hit while loading: the file is too large, nested too
    /// deeply, or its anchors and aliases expand to too many values.
    TooLarge = "E009", "input exceeds a loader limit";
    /// A YAML feature the spec format does not accept: custom tags, several documents
    /// in one file, non-scalar mapping keys, non-finite numbers.
    YamlUnsupported = "E010", "unsupported YAML construct";

    /// The `entry` key names no node. The help lists the closest node name; the run
    /// would have nowhere to start.
    UnknownEntry = "E020", "entry node does not exist";
    /// An `edges` key names no node: usually a typo, or edges left behind after a
    /// node was renamed or removed.
    UnknownEdgeSource = "E021", "edge from an unknown node";
    /// An edge or branch leads to a node that does not exist (and is not `END`).
    UnknownEdgeTarget = "E022", "edge to an unknown node";
    /// An `llm` or `map` node names a model that is not declared under `models`.
    UnknownModel = "E023", "unknown model";
    /// A `retrieve` node names a retriever that is not declared under `retrievers`.
    UnknownRetriever = "E024", "unknown retriever";
    /// A `tool` node names a tool that is not declared under `tools` (the help lists
    /// the declared ones).
    UnknownTool = "E025", "unknown tool";
    /// A node has no outgoing edge. Every node needs an entry under `edges`
    /// (use `END` to stop after it).
    MissingEdge = "E026", "node has no outgoing edge";
    /// `END` and `START` are reserved and cannot name a node: `END` is the terminal
    /// every run finishes at, `START` marks the entry in exported graphs. Node names
    /// must also be identifiers (`[A-Za-z_][A-Za-z0-9_-]*`), since variants address
    /// nodes by dotted paths. `base` cannot name a variant: `ragloop eval` uses it for
    /// the spec without any variant.
    ReservedName = "E027", "reserved or invalid node or variant name";
    /// `output.answer` or `output.documents` names a field the state lacks, or
    /// `output.fallback` names a node that does not exist.
    UnknownOutput = "E028", "output names an unknown field or node";

    /// A file named by the spec (prompt, schema, corpus) does not exist or cannot be read.
    /// A `rust-docs:` corpus is looked for where the run looks, under
    /// `$(rustc --print sysroot)/share/doc/rust/html` (`$RUSTC` names the rustc): when
    /// the toolchain has no documentation the help says `rustup component add
    /// rust-docs`; a rustc that fails, prints no absolute path or does not answer
    /// within `$RAGLOOP_RUSTC_TIMEOUT_SECS` (default 10 s) is reported. Corpus checks are environment checks: `--no-environment` skips them.
    MissingFile = "E030", "referenced file not found";
    /// A referenced path leaves the project root (after resolving `..` and symlinks).
    PathEscapesRoot = "E031", "path escapes the project root";

    /// A JSON Schema file does not parse as JSON or YAML; the position is inside the
    /// schema file, with a label at the spec line that references it.
    SchemaSyntax = "E032", "schema file does not parse";
    /// A JSON Schema is not a valid schema (it fails the meta-schema or does not compile).
    InvalidSchema = "E033", "not a valid JSON Schema";
    /// A value under `state.initial` violates its field's schema (wrong type, out of
    /// range, not in the enum).
    InitialInvalid = "E034", "initial state violates the state schema";
    /// `state.initial` or `state.reducers` names a field the state schema lacks.
    UnknownStateField = "E035", "unknown state field";
    /// A reducer does not fit its field's type: `append` needs an array, `add` a
    /// number, `merge` an object.
    ReducerType = "E036", "reducer does not fit the field type";
    /// The state schema is not an object schema with `properties`: the state is a
    /// mapping of named fields, and the checks need to know them.
    StateShape = "E037", "state schema is not an object with properties";

    /// A template (a prompt, or a `retrieve`/`tool` query) does not compile, or uses
    /// an unknown filter, test or tag. The position is the token, inside a prompt file
    /// or a quoted or block scalar too; a block (`{% if %}`, `{% for %}`, ...) or tag
    /// left unclosed is reported at its opening, the innermost one when nested.
    TemplateSyntax = "E040", "template syntax error";
    /// A template reads a variable that is neither a state field nor a builtin
    /// available there (`item`, `index` in map nodes; `inputs` names), or a name that a
    /// `{% set %}` defined inside a `{% for %}`, `{% with %}` or `{% macro %}` block,
    /// read after the block ended (minijinja scopes it to the block, so the render
    /// fails). The position is the name's token.
    TemplateUnknownVar = "E041", "template reads an unknown variable";
    /// A branch predicate (`when`) does not compile as a minijinja expression.
    PredicateSyntax = "E042", "predicate syntax error";
    /// A branch predicate reads a variable that is not a state field.
    PredicateUnknownVar = "E043", "predicate reads an unknown variable";
    /// An `update`, `inputs` or `over` expression does not compile. Remember that a
    /// constant string must be quoted inside the expression: `"'text'"`.
    ExpressionSyntax = "E044", "expression syntax error";
    /// An `update` or `inputs` expression reads an unknown variable (`output` is
    /// available only on nodes that produce one).
    ExpressionUnknownVar = "E045", "expression reads an unknown variable";
    /// A node's `update` writes a field the state schema does not define; add the
    /// field to the state schema or fix the name.
    UnknownWrite = "E046", "node writes a field the state lacks";
    /// A predicate that reads no variable and is always false: its branch can never be
    /// taken, which is almost always a mistake.
    PredicateNeverTrue = "E047", "predicate can never be true";

    /// A branch list has no `else` arm. Without it a state that matches no `when`
    /// would have nowhere to go.
    MissingElse = "E050", "branch without else";
    /// A branch list is malformed: `else` not last, two `else` arms, an arm with both
    /// or neither of `when`/`else`, or `when` without `to`.
    BranchShape = "E051", "malformed branch list";
    /// A node cannot be reached from the entry node by any path of edges: it is dead
    /// configuration, or an edge to it is missing.
    Unreachable = "E052", "unreachable node";
    /// `END` cannot be reached from a node: once entered, the run could never finish.
    DeadEnd = "E053", "node cannot reach END";
    /// A cycle in the graph has no bound: no node on it has `max_visits`, and it passes
    /// no arm that the check can prove impossible once a counter (or a flag) that a node
    /// on it moves has passed its bound. Such a loop is stopped only by the global step
    /// limit. The exact rule, with accepted and rejected shapes, is "Bounded cycles" in
    /// docs/spec.md.
    UnboundedCycle = "E054", "unbounded cycle";

    /// A variant overlay names a path whose parent does not exist in the spec (or a
    /// path into `version`, `root` or `variants`, which variants cannot change).
    VariantPath = "E060", "variant patches a missing path";

    /// A node names a task the model's provider does not implement, or leaves out an
    /// input the task needs.
    UnsupportedTask = "E070", "task not supported by the provider";
    /// A model config cannot work with its provider: `openai` or `anthropic` without
    /// a `model` name, a `base_url` that is not an `http://` or `https://` address, an
    /// `api_key_env` that is not an environment variable name (the message never
    /// repeats the value: it may be a pasted key), or `params` that would replace a
    /// field ragloop builds (`model`, `messages`, `tools`, ...). Whether the key
    /// variable is set is not checked here: `ragloop run` reports a missing key
    /// before the run starts.
    ModelConfig = "E071", "model config unusable with its provider";
    /// One variant's `set` names a path and a path inside it (`retrievers.book` and
    /// `retrievers.book.top_k`): one value would silently replace part of the other,
    /// depending on the order. Set the inner value inside the outer one instead.
    VariantOverlap = "E072", "variant sets overlapping paths";
    /// The spec's `root` lies outside the directory ragloop runs in and outside the
    /// spec file's own directory (and the git work trees holding them): `root: /` would
    /// let a spec checked in CI read, and quote in error excerpts, any file of the
    /// machine. `--allow-outside-root` (on `validate`, `run`, `eval`, `graph`) lifts it.
    RootOutside = "E073", "project root outside the working tree";

    /// A template, predicate or expression reads a property that the JSON Schema of
    /// its value does not declare, at any depth (`answer_grade.grounde`,
    /// `document.contnet`), or an attribute of an array or string
    /// (`documents.lenght`; use the `length` filter). Run time would fail on the
    /// undefined value. The position is the attribute's token, also inside prompt
    /// files and block scalars; the help says "did you mean". Schemas that leave the
    /// properties open (no `properties`, `additionalProperties` true or a schema,
    /// `patternProperties`, no `type`, an unresolved `$ref`) are never reported.
    UnknownAttribute = "E082", "property the schema does not declare";
    /// A field whose schema has an `enum` (or `const`) of strings is compared with a
    /// string literal the enum lacks (`binary_score == 'Yes'` when the enum is
    /// `yes`/`no`; also `!=` and `in [...]`): the comparison has a fixed result and the
    /// branch is silently always or never taken.
    EnumLiteral = "E083", "comparison with a value outside the enum";
    /// An ordering (`<`, `<=`, `>`, `>=`) or arithmetic (`+`, `-`, `/`, `//`, `**`)
    /// between a number and a string, known from the schemas and the result types of
    /// filters (`documents | length > "3"`, `iterations >= '3'`). minijinja orders
    /// values of different kinds by kind, not by value, and refuses the arithmetic.
    IncompatibleOperands = "E084", "ordering or arithmetic between incompatible types";
    /// An `update` value cannot satisfy its state field's schema: a literal of the
    /// wrong type (`answer: 42` for a string field), an expression whose type cannot
    /// fit (`iterations: "'three'"`), or a string outside the field's `enum`. With a
    /// reducer the value is checked against what the reducer takes: an element or an
    /// array of elements for `append`, a number for `add`, an object for `merge`.
    /// A literal written by a `replace` update (a YAML value, or an expression that is
    /// only a literal: `"2.5"`) is validated against the field's whole schema
    /// (`minimum`, `integer`, a nested `enum`, `additionalProperties: false`,
    /// `format`, through `$ref`s) and reported at the literal, or at the nested value
    /// that violates it; other expressions only by their types.
    UpdateType = "E085", "update value cannot satisfy the field schema";
    /// A JSON Schema names a `format` that ragloop's validator does not know
    /// (`datetime` for `date-time`). Formats are asserted (a structured output whose
    /// `date-time` field holds `"yesterday"` is rejected and repaired), so an unknown
    /// name would silently check nothing; the message lists the known ones for the
    /// schema's draft.
    UnknownFormat = "E086", "unknown JSON Schema format";
    /// An `imports:` entry names a spec file that does not exist under the project
    /// root, or one whose project root (`root`) differs from the importing spec's (the
    /// paths inside imported nodes resolve against the root, so both must share it).
    ImportMissing = "E090", "imported spec not found";
    /// A spec imports itself, directly or through other specs (`a.yaml` imports
    /// `b.yaml`, which imports `a.yaml`); the message shows the chain. Chains deeper
    /// than 16 specs are refused the same way.
    ImportCycle = "E091", "import cycle";
    /// An imported node, model, retriever or tool has the name of one the spec
    /// already defines, or that an earlier import brought; the label points at the
    /// other definition. Write the entry inline instead of importing it to change it.
    ImportClash = "E092", "imported name already defined";
    /// An `imports:` entry lists a node, model, retriever or tool that the imported
    /// spec does not define (after its own imports); the help lists what it defines.
    ImportUnknown = "E093", "imported name not defined there";
    /// A retriever's `rerank.reranker` names no reranker: the built-in one is
    /// `offline`; an HTTP reranker is a mapping whose `kind` is `tei`, `cohere` or
    /// `jina`. The help lists them.
    UnknownReranker = "E094", "unknown reranker";
    /// A rerank stage keeps more documents than it retrieves: `rerank.candidates` is
    /// below `rerank.top_k` (or, without it, the retriever's `top_k`). The reranker
    /// only orders the candidates, so raise `candidates` or lower `top_k`.
    RerankCandidates = "E095", "rerank candidates fewer than top_k";
    /// A number of a rerank stage or an HTTP reranker is out of range:
    /// `candidates` and `top_k` between 1 and 1000, `timeout_secs` a positive number
    /// of seconds (at most a day), `retries` between 0 and 10.
    RerankNumber = "E096", "rerank number out of range";
    /// An HTTP reranker misses what it needs to be called: `base_url` for `tei` (no
    /// default server), `model` for `cohere` and `jina`, `api_key_env` for the
    /// official Cohere and Jina hosts; or its `base_url` is not an absolute http(s)
    /// URL, or `api_key_env` is not a variable name.
    RerankerSetting = "E097", "HTTP reranker setting missing or invalid";

    /// A branch arm after an always-true predicate can never be taken; remove it or
    /// fix the predicate before it.
    ShadowedArm = "W001", "branch arm can never be taken";
    /// The spec names no `output.answer` field, so no run can end with status
    /// `generated`: every run that reaches END counts as `exhausted`.
    NoAnswerField = "W002", "no output.answer";
    /// A branch arm's `when` is always true (it reads no state field and is truthy:
    /// `"true"`, `"1 == 1"`, `"'yes'"`), so every later arm of the branch, the `else`
    /// included, is never taken. The warning names the nodes that become unreachable
    /// through it; when a later `when` arm exists, its W001 says so instead (one
    /// warning per fault). A YAML boolean (`when: true`, unquoted) is a type error (E004) with a
    /// hint to quote it.
    DeadArms = "W003", "always-true arm makes later arms dead";
    /// A template reads a name that a `{% set %}` defines in only some branches of an
    /// `{% if %}` before it: when another branch ran, the render fails on the
    /// undefined name. Set it before the `{% if %}` or in every branch.
    MaybeUndefined = "W013", "variable may be undefined";
}

/// The code reference as Markdown (published as docs/diagnostics.md; a test keeps the
/// two in sync).
pub fn codes_markdown() -> String {
    let mut out = String::from(
        "# Diagnostic codes\n\n\
         Generated from `src/diag/code.rs` (`RAGLOOP_BLESS=1 cargo test --test integration docs::` rewrites it).\n\
         Codes are stable: a code is never reused for a different fault. `E` codes are errors\n\
         (`ragloop validate` exits 1), `W` codes are warnings (exit 1 only with `--deny-warnings`).\n\n\
         Every diagnostic points at the offending value: in the spec, or in the prompt or schema\n\
         file where the fault is. `tests/specs/invalid/` holds a spec for each error code.\n",
    );
    for code in Code::ALL {
        let text: Vec<&str> = code.explanation().lines().map(str::trim).collect();
        out.push_str(&format!(
            "\n## {} — {}\n\n{}\n",
            code.as_str(),
            code.summary(),
            text.join("\n").trim_end()
        ));
    }
    out
}
