//! Reading cassettes back: [`Cassette`] (answers by request key, for replay) and
//! [`Exchange`] (every field of a line, to explain a replay miss). Embedding lines
//! ([`super::EmbedLine`]) are indexed per text, by the key of a one-text call.
use super::embedding::{looks_like_embedding, EmbedLine, EMBEDDINGS};
use super::rerank::{looks_like_rerank, RecordedRerank, RerankLine, Reranks};
use super::{RecordedError, CASSETTE_VERSION};
use crate::providers::cache::{embedding_key, KeyConfig, RequestKey};
use crate::providers::{LlmResponse, Message, ProviderError, Usage};
use crate::retrieval::EmbedConfig;
use serde::Deserialize;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// One exchange as read back (every field).
#[derive(Clone, Debug, Deserialize)]
pub struct Exchange {
    /// Line format version.
    pub v: u32,
    /// Call order.
    #[serde(default)]
    pub seq: u64,
    /// The request key, 64 hex digits.
    pub key: String,
    /// The node that made the call.
    pub node: String,
    /// Item index in a map fan-out.
    #[serde(default)]
    pub item: Option<usize>,
    /// The model's name in the spec.
    pub model_name: String,
    /// The model configuration of the key.
    pub config: KeyConfig,
    /// The request messages.
    #[serde(default)]
    pub messages: Vec<Message>,
    /// The output schema.
    #[serde(default)]
    pub schema: Option<Value>,
    /// The offline task.
    #[serde(default)]
    pub task: Option<String>,
    /// The offline inputs.
    #[serde(default)]
    pub inputs: Option<Map<String, Value>>,
    /// The answer (absent when the call failed).
    #[serde(default)]
    pub output: Option<Value>,
    /// Usage of the call.
    #[serde(default)]
    pub usage: Usage,
    /// Whether the token counts were estimated (the server reported none).
    #[serde(default)]
    pub usage_estimated: bool,
    /// Whether the answer came from the response cache.
    #[serde(default)]
    pub cached: bool,
    /// The failure, if the call failed.
    #[serde(default)]
    pub error: Option<RecordedError>,
}

/// What loading needs of a line; the request body is skipped (read again only to
/// explain a replay miss).
#[derive(Deserialize)]
pub(super) struct LineIn {
    v: u32,
    #[serde(default)]
    pub(super) seq: u64,
    key: String,
    node: String,
    model_name: String,
    config: KeyConfig,
    #[serde(default)]
    output: Option<Value>,
    #[serde(default)]
    usage: Usage,
    #[serde(default)]
    usage_estimated: bool,
    #[serde(default)]
    error: Option<RecordedError>,
}

/// A recorded answer (or failure).
#[derive(Clone, Debug)]
struct Answer {
    output: Option<Value>,
    usage: Usage,
    usage_estimated: bool,
    error: Option<RecordedError>,
}

#[derive(Debug)]
struct Slot {
    /// Sorted by `seq`, ties in line order.
    answers: Vec<(u64, Answer)>,
    next: AtomicUsize,
}

/// A recorded embedding of one text.
#[derive(Clone, Debug)]
pub struct RecordedVector {
    /// The vector, as recorded (unit length when it came from a vector store).
    pub vector: Vec<f32>,
    /// The call's `usage.prompt_tokens`, for a text recorded alone (a query).
    pub input_tokens: Option<u64>,
}

/// What the embedding lines of a cassette hold.
#[derive(Debug, Default)]
struct Embeddings {
    /// By the key of a one-text call ([`embedding_key`] of `[text]`).
    vectors: HashMap<RequestKey, RecordedVector>,
    /// Recorded failures, by call key.
    errors: HashMap<RequestKey, String>,
    /// (model name, configuration, lines), in first-seen order.
    models: Vec<(String, EmbedConfig, usize)>,
    lines: usize,
}

// One value per line, taken apart at once: the size difference costs nothing.
#[allow(clippy::large_enum_variant)]
enum Line {
    Llm(LineIn),
    Embed(EmbedLine),
    Rerank(RerankLine),
}

fn parse_line(raw: &[u8]) -> Result<Line, serde_json::Error> {
    if looks_like_rerank(raw) {
        return serde_json::from_slice::<RerankLine>(raw).map(Line::Rerank);
    }
    let embed = || serde_json::from_slice::<EmbedLine>(raw).map(Line::Embed);
    let llm = || serde_json::from_slice::<LineIn>(raw).map(Line::Llm);
    if looks_like_embedding(raw) {
        embed().or_else(|e| llm().map_err(|_| e))
    } else {
        llm().or_else(|e| embed().map_err(|_| e))
    }
}

/// A cassette loaded for replay: recorded answers by request key.
#[derive(Debug)]
pub struct Cassette {
    path: PathBuf,
    slots: HashMap<RequestKey, Slot>,
    embeddings: Embeddings,
    reranks: Reranks,
    per_node: HashMap<String, usize>,
    configs: Vec<(String, KeyConfig)>,
    len: usize,
    truncated_tail: bool,
}

/// Why a cassette cannot be loaded ([`Cassette::load`]) or written
/// ([`super::CassetteWriter`]). Every message names the file.
#[derive(Debug, thiserror::Error)]
pub enum CassetteError {
    /// The file cannot be read.
    #[error("cannot read cassette {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The file cannot be created (`--record`).
    #[error("cannot create cassette {path}: {source}")]
    Create {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The file cannot be opened to append to, or its torn tail cut off (`--record`
    /// of a resumed eval).
    #[error("cannot open cassette {path}: {source}")]
    Open {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A line cannot be written.
    #[error("cannot write cassette {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A line cannot be encoded as JSON.
    #[error("{0}")]
    Encode(#[source] serde_json::Error),
    /// A writer thread panicked while holding the file.
    #[error("cassette writer is poisoned")]
    Poisoned,
    /// A line is not a valid exchange.
    #[error("{path}:{line}: {message}")]
    Line {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
}

impl Cassette {
    /// Reads a cassette. Blank lines are skipped. A last line without its newline that
    /// does not parse (a recording killed mid-write) is skipped and reported by
    /// [`Cassette::truncated_tail`].
    ///
    /// # Errors
    /// [`CassetteError::Io`], or [`CassetteError::Line`] with the line number of the
    /// first malformed line (not JSON, missing fields, another format version, a bad
    /// key); a file with no exchange at all (empty, blank, or one unparsable
    /// unterminated line such as binary data) is refused at line 1.
    pub fn load(path: &Path) -> Result<Cassette, CassetteError> {
        let bytes = std::fs::read(path).map_err(|source| CassetteError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Cassette::from_bytes(path, &bytes)
    }

    /// Reads a cassette from memory; `path` names it in messages.
    ///
    /// # Errors
    /// See [`Cassette::load`].
    pub fn from_bytes(path: &Path, bytes: &[u8]) -> Result<Cassette, CassetteError> {
        let mut c = Cassette {
            path: path.to_path_buf(),
            slots: HashMap::new(),
            embeddings: Embeddings::default(),
            reranks: Reranks::default(),
            per_node: HashMap::new(),
            configs: Vec::new(),
            len: 0,
            truncated_tail: false,
        };
        let bad = |line: usize, message: String| CassetteError::Line {
            path: path.to_path_buf(),
            line,
            message,
        };
        let mut start = 0usize;
        let mut lineno = 0usize;
        while start < bytes.len() {
            lineno += 1;
            let end = memchr_nl(&bytes[start..]).map(|i| start + i);
            let raw = &bytes[start..end.unwrap_or(bytes.len())];
            start = end.map_or(bytes.len(), |e| e + 1);
            let raw = raw.strip_prefix(b"\xef\xbb\xbf").unwrap_or(raw);
            if raw.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let parsed: LineIn = match parse_line(raw) {
                Ok(Line::Llm(l)) => l,
                Ok(Line::Embed(x)) => {
                    c.embeddings.add(x).map_err(|m| bad(lineno, m))?;
                    c.len += 1;
                    continue;
                }
                Ok(Line::Rerank(x)) => {
                    c.reranks
                        .add(x, CASSETTE_VERSION)
                        .map_err(|m| bad(lineno, m))?;
                    c.len += 1;
                    continue;
                }
                Err(_) if end.is_none() => {
                    c.truncated_tail = true;
                    break;
                }
                Err(e) => return Err(bad(lineno, format!("not a cassette exchange: {e}"))),
            };
            if parsed.v != CASSETTE_VERSION {
                return Err(bad(
                    lineno,
                    format!(
                        "format version {} (this ragloop reads version {CASSETTE_VERSION})",
                        parsed.v
                    ),
                ));
            }
            let key = RequestKey::from_hex(&parsed.key).map_err(|e| bad(lineno, e.to_string()))?;
            if parsed.output.is_none() && parsed.error.is_none() {
                return Err(bad(
                    lineno,
                    "the exchange has neither `output` nor `error`".into(),
                ));
            }
            *c.per_node.entry(parsed.node).or_default() += 1;
            if !c
                .configs
                .iter()
                .any(|(n, k)| *n == parsed.model_name && *k == parsed.config)
            {
                c.configs.push((parsed.model_name, parsed.config));
            }
            c.slots
                .entry(key)
                .or_insert_with(|| Slot {
                    answers: Vec::new(),
                    next: AtomicUsize::new(0),
                })
                .answers
                .push((
                    parsed.seq,
                    Answer {
                        output: parsed.output,
                        usage: parsed.usage,
                        usage_estimated: parsed.usage_estimated,
                        error: parsed.error,
                    },
                ));
            c.len += 1;
        }
        if c.len == 0 {
            // Nothing to replay: every call would miss. Say why now.
            return Err(bad(
                1,
                if c.truncated_tail {
                    "not a cassette: no complete exchange line (a JSON object per line, as --record writes)".into()
                } else {
                    "empty cassette: it holds no exchange".into()
                },
            ));
        }
        for s in c.slots.values_mut() {
            s.answers.sort_by_key(|(seq, _)| *seq);
            // A request recorded both failing and answered was rerun after the
            // failure (`eval --resume --retry-failed --record`, or a rerun appended to
            // the cassette): the answer supersedes the failure.
            if s.answers.iter().any(|(_, a)| a.error.is_none()) {
                s.answers.retain(|(_, a)| a.error.is_none());
            }
        }
        Ok(c)
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Number of lines read: LLM exchanges, embedding and rerank lines.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the cassette holds no exchange.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of distinct request keys.
    pub fn keys(&self) -> usize {
        self.slots.len()
    }

    /// Whether an unterminated, unparsable last line was skipped.
    pub fn truncated_tail(&self) -> bool {
        self.truncated_tail
    }

    /// Embedding lines (calls, and chunk vectors taken from a store) recorded.
    pub fn embedding_lines(&self) -> usize {
        self.embeddings.lines
    }

    /// The recorded embedding of `text` under `config` (from any line, whatever
    /// batch it was in); `None` when the cassette holds none.
    pub fn embedding(&self, config: &EmbedConfig, text: &str) -> Option<&RecordedVector> {
        self.embeddings.vectors.get(&embedding_key(
            config,
            std::slice::from_ref(&text.to_string()),
        ))
    }

    /// Rerank lines recorded.
    pub fn rerank_lines(&self) -> usize {
        self.reranks.lines
    }

    /// The recorded answer of a rerank call, by its key
    /// ([`super::rerank_key`]); `None` when the cassette holds none.
    pub fn rerank(&self, key: &RequestKey) -> Option<&RecordedRerank> {
        self.reranks.answers.get(key)
    }

    /// The recorded failure of an embedding call, by its key.
    pub fn embedding_error(&self, key: &RequestKey) -> Option<&str> {
        self.embeddings.errors.get(key).map(String::as_str)
    }

    /// The embedding models recorded: (name in the spec, configuration, lines), in
    /// first-seen order.
    pub fn embedding_models(&self) -> impl Iterator<Item = (&str, &EmbedConfig, usize)> {
        self.embeddings
            .models
            .iter()
            .map(|(n, c, k)| (n.as_str(), c, *k))
    }

    /// Exchanges recorded for a node.
    pub fn exchanges_for_node(&self, node: &str) -> usize {
        self.per_node.get(node).copied().unwrap_or(0)
    }

    /// The distinct (model name, configuration) pairs recorded, in first-seen order.
    pub fn configs(&self) -> &[(String, KeyConfig)] {
        &self.configs
    }

    /// The next recorded answer of `key`: the answers of a key recorded several times
    /// are served in recorded call order (`seq`), then the last one again and again;
    /// recorded failures of a key that was also answered are dropped at load (the
    /// answer came from a rerun). `None` when the key was never recorded. A recorded failure comes back as the
    /// same kind of [`ProviderError`].
    pub fn answer(&self, key: &RequestKey) -> Option<Result<LlmResponse, ProviderError>> {
        let slot = self.slots.get(key)?;
        let i = slot.next.fetch_add(1, Ordering::Relaxed);
        let (_, a) = slot
            .answers
            .get(i)
            .or_else(|| slot.answers.last())
            .expect("slots are never empty");
        Some(match (&a.error, &a.output) {
            (Some(e), _) => Err(e.to_error(crate::providers::Billed {
                usage: a.usage,
                usage_estimated: a.usage_estimated,
                cached: true,
            })),
            (None, Some(o)) => Ok(LlmResponse {
                output: o.clone(),
                usage: a.usage,
                cached: true,
                usage_estimated: a.usage_estimated,
                ..Default::default()
            }),
            (None, None) => Err(ProviderError::Permanent(
                "the recorded exchange has no output".into(),
            )),
        })
    }

    /// Every exchange of the file, with all its fields, skipping lines that do not
    /// parse (read again from disk; used to explain a replay miss).
    ///
    /// # Errors
    /// [`CassetteError::Io`].
    pub fn read_exchanges(path: &Path) -> Result<Vec<Exchange>, CassetteError> {
        let f = std::fs::File::open(path).map_err(|source| CassetteError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let mut out = Vec::new();
        for line in std::io::BufReader::new(f).split(b'\n') {
            let line = line.map_err(|source| CassetteError::Io {
                path: path.to_path_buf(),
                source,
            })?;
            if let Ok(x) = serde_json::from_slice::<Exchange>(&line) {
                out.push(x);
            }
        }
        Ok(out)
    }
}

impl Embeddings {
    /// Indexes one embedding line.
    fn add(&mut self, x: EmbedLine) -> Result<(), String> {
        if x.kind != EMBEDDINGS {
            return Err(format!(
                "unknown line kind `{}` (this ragloop reads LLM exchanges, `{EMBEDDINGS}` and `rerank`)",
                x.kind
            ));
        }
        if x.v != CASSETTE_VERSION {
            return Err(format!(
                "format version {} (this ragloop reads version {CASSETTE_VERSION})",
                x.v
            ));
        }
        let key = RequestKey::from_hex(&x.key).map_err(|e| e.to_string())?;
        match (&x.vectors, &x.error) {
            (None, None) => {
                return Err("the embedding line has neither `vectors` nor `error`".into())
            }
            (None, Some(e)) => {
                self.errors.insert(key, e.clone());
            }
            (Some(vs), _) => {
                if vs.len() != x.inputs.len() {
                    return Err(format!(
                        "the embedding line has {} vector(s) for {} input(s)",
                        vs.len(),
                        x.inputs.len()
                    ));
                }
                let dim = vs.first().map_or(0, Vec::len);
                if let Some(i) = vs.iter().position(|v| {
                    v.is_empty() || v.len() != dim || v.iter().any(|f| !f.is_finite())
                }) {
                    return Err(format!(
                        "vector {i} of the embedding line is empty, of another size than the first, or holds a value that is not a finite number"
                    ));
                }
                let alone = x.inputs.len() == 1;
                for (t, v) in x.inputs.iter().zip(vs) {
                    let k = embedding_key(&x.config, std::slice::from_ref(t));
                    self.vectors.entry(k).or_insert_with(|| RecordedVector {
                        vector: v.clone(),
                        input_tokens: if alone { x.input_tokens } else { None },
                    });
                }
            }
        }
        match self
            .models
            .iter_mut()
            .find(|(n, c, _)| *n == x.model_name && *c == x.config)
        {
            Some(m) => m.2 += 1,
            None => self.models.push((x.model_name, x.config, 1)),
        }
        self.lines += 1;
        Ok(())
    }
}

fn memchr_nl(b: &[u8]) -> Option<usize> {
    b.iter().position(|&c| c == b'\n')
}
