//! Web search for `tool` nodes: a SearxNG-compatible JSON endpoint and Tavily's
//! search API, both answering a query with [`Document`]s.
//!
//! | engine | request | results |
//! |---|---|---|
//! | `searxng` | `GET {base_url}/search?q=QUERY&format=json` | `results[].{url, title, content, engine, score}` |
//! | `tavily` | `POST {base_url}/search` (default `https://api.tavily.com`), `Authorization: Bearer KEY`, body `{"query", "max_results"}` | `results[].{url, title, content, score}` |
//!
//! Results are mapped to documents by [`web_documents`]: `id` is the UUID v5 of the
//! url (namespace [`crate::retrieval::ID_NAMESPACE`], so the same page always has the
//! same id), `content` is the title, a blank line and the snippet, and `metadata`
//! holds `id`, `source` (the url), `title`, `engine` (the engine that found it:
//! SearxNG's per-result `engine`, else the tool's kind), `rank` (1-based position in
//! the server's list) and `score` when the server sent one. Results without a url are
//! skipped, repeated urls keep their first occurrence, and the list is cut to
//! `top_k`.
//!
//! Every call goes through [`crate::http::send`]: timeouts, connection failures, 408,
//! 429 (after `Retry-After`) and 5xx are retried; other 4xx fail at once with the
//! server's message. A body that is not the expected JSON (an HTML page, an empty
//! body, no `results` list, a 200 carrying an error object) fails at once: a retry
//! would get the same answer. Every message names the tool and the endpoint; the
//! Tavily key never appears in one.
use super::{Document, Retriever, SearchFuture, ID_NAMESPACE};
use crate::http::{self, CallPolicy, HttpError};
use serde_json::{Map, Value};
use std::time::Duration;

/// Tavily's public endpoint, used when a `tavily` tool names no `base_url`.
pub const TAVILY_BASE_URL: &str = "https://api.tavily.com";
/// Most results Tavily returns per call (its API caps `max_results` at 20).
pub const TAVILY_MAX_RESULTS: usize = 20;
/// Longest query Tavily accepts, in characters; longer queries are cut at a word
/// boundary before they are sent.
pub const TAVILY_MAX_QUERY_CHARS: usize = 400;
/// Timeout of one web-search attempt when the tool sets none, in seconds.
pub const DEFAULT_TIMEOUT_SECS: f64 = 20.0;
/// Retries of a transient web-search failure when the tool sets none.
pub const DEFAULT_RETRIES: u32 = 2;

/// Which API a [`WebSearch`] speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// SearxNG's JSON output (`/search?q=…&format=json`).
    Searxng,
    /// Tavily's `POST /search`.
    Tavily,
}

impl Engine {
    /// The engine's name as written in specs (`searxng`, `tavily`).
    pub fn as_str(self) -> &'static str {
        match self {
            Engine::Searxng => "searxng",
            Engine::Tavily => "tavily",
        }
    }
}

/// A web-search client for one tool of a spec. Cheap to share (`Send + Sync`).
pub struct WebSearch {
    tool: String,
    engine: Engine,
    endpoint: reqwest::Url,
    key: Option<String>,
    policy: CallPolicy,
}

impl std::fmt::Debug for WebSearch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebSearch")
            .field("tool", &self.tool)
            .field("engine", &self.engine)
            .field("endpoint", &self.endpoint.as_str())
            .field("key", &self.key.as_ref().map(|_| "[redacted]"))
            .finish()
    }
}

/// The call policy of a web-search tool: `timeout_secs` per attempt (default
/// [`DEFAULT_TIMEOUT_SECS`]) and `retries` (default [`DEFAULT_RETRIES`]).
pub fn tool_policy(timeout_secs: Option<f64>, retries: Option<u32>) -> CallPolicy {
    let timeout = timeout_secs
        .filter(|s| s.is_finite() && *s > 0.0)
        .unwrap_or(DEFAULT_TIMEOUT_SECS)
        .min(1e6);
    CallPolicy {
        retries: retries.unwrap_or(DEFAULT_RETRIES),
        timeout: Duration::from_secs_f64(timeout),
        ..CallPolicy::default()
    }
}

/// `{base}/{path}` as a URL, refusing anything but absolute http(s) URLs. A trailing
/// `/` on `base` is ignored, so `http://host/searx/` and `http://host/searx` agree.
///
/// # Errors
/// A [`BaseUrlError`] quoting the base URL.
pub fn endpoint(base: &str, path: &str) -> Result<reqwest::Url, BaseUrlError> {
    let trimmed = base.trim().trim_end_matches('/');
    let url =
        reqwest::Url::parse(&format!("{trimmed}/{path}")).map_err(|e| BaseUrlError::NotUrl {
            base: base.to_string(),
            reason: e.to_string(),
        })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(BaseUrlError::NotHttp {
            base: base.to_string(),
        });
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(BaseUrlError::QueryOrFragment {
            base: base.to_string(),
        });
    }
    Ok(url)
}

/// Why a tool's or embedding model's `base_url` is refused ([`endpoint`]); the
/// message quotes the URL (callers prefix whose it is).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BaseUrlError {
    /// The text does not parse as a URL (`reason`: the parser's).
    #[error("base_url `{base}` is not a valid URL: {reason}")]
    NotUrl {
        /// The `base_url` as written.
        base: String,
        /// Why it does not parse.
        reason: String,
    },
    /// Not http or https.
    #[error("base_url `{base}` must start with http:// or https://")]
    NotHttp {
        /// The `base_url` as written.
        base: String,
    },
    /// The URL carries a query or a fragment.
    #[error("base_url `{base}` must not carry a query or fragment")]
    QueryOrFragment {
        /// The `base_url` as written.
        base: String,
    },
}

/// Why a web-search tool cannot be built ([`WebSearch::searxng`],
/// [`WebSearch::tavily`]). The message names the tool.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    /// The tool's `base_url` is refused.
    #[error("tool `{tool}`: {source}")]
    BaseUrl {
        /// The tool's name in the spec.
        tool: String,
        /// What is wrong with the URL.
        #[source]
        source: BaseUrlError,
    },
    /// The Tavily key variable is unset or empty (its value is never shown).
    #[error("tool `{tool}`: the Tavily API key is missing: set the environment variable {var}")]
    MissingKey {
        /// The tool's name in the spec.
        tool: String,
        /// The tool's `api_key_env`.
        var: String,
    },
}

impl WebSearch {
    /// A SearxNG tool named `tool` at `base_url`.
    ///
    /// # Errors
    /// [`ToolError::BaseUrl`] (naming the tool) when `base_url` is not an http(s) URL.
    pub fn searxng(tool: &str, base_url: &str, policy: CallPolicy) -> Result<WebSearch, ToolError> {
        Ok(WebSearch {
            tool: tool.to_string(),
            engine: Engine::Searxng,
            endpoint: endpoint(base_url, "search").map_err(|source| ToolError::BaseUrl {
                tool: tool.to_string(),
                source,
            })?,
            key: None,
            policy,
        })
    }

    /// A Tavily tool named `tool`, with the key read from the environment variable
    /// `api_key_env` now (so a missing key is reported before a run starts), at
    /// `base_url` (default [`TAVILY_BASE_URL`]).
    ///
    /// # Errors
    /// [`ToolError::MissingKey`] naming the tool and the variable when the key is
    /// unset or empty; [`ToolError::BaseUrl`] when `base_url` is not an http(s) URL.
    pub fn tavily(
        tool: &str,
        api_key_env: &str,
        base_url: Option<&str>,
        policy: CallPolicy,
    ) -> Result<WebSearch, ToolError> {
        let key = crate::secret::read_env(api_key_env)
            .map(|k| k.expose().to_string())
            .map_err(|_| ToolError::MissingKey {
                tool: tool.to_string(),
                var: api_key_env.to_string(),
            })?;
        let endpoint =
            endpoint(base_url.unwrap_or(TAVILY_BASE_URL), "search").map_err(|source| {
                ToolError::BaseUrl {
                    tool: tool.to_string(),
                    source,
                }
            })?;
        let mut policy = policy;
        policy.secrets.push(key.clone());
        Ok(WebSearch {
            tool: tool.to_string(),
            engine: Engine::Tavily,
            endpoint,
            key: Some(key),
            policy,
        })
    }

    /// The engine this tool speaks.
    pub fn engine(&self) -> Engine {
        self.engine
    }

    /// The URL requests go to (`…/search`).
    pub fn endpoint(&self) -> &str {
        self.endpoint.as_str()
    }

    /// At most `top_k` documents for `query` (see the module docs for the mapping). A
    /// blank query or `top_k == 0` returns no documents without a request.
    ///
    /// # Errors
    /// A message naming the tool, the engine and the endpoint: HTTP failures (after
    /// retries for transient ones), bodies that are not the expected JSON.
    pub async fn search(&self, query: &str, top_k: usize) -> Result<Vec<Document>, String> {
        let query = query.trim();
        if query.is_empty() || top_k == 0 {
            return Ok(Vec::new());
        }
        let resp = match self.engine {
            Engine::Searxng => {
                let url = self.endpoint.clone();
                let q = query.to_string();
                http::send(
                    || {
                        http::client()
                            .get(url.clone())
                            .query(&[("q", q.as_str()), ("format", "json")])
                            .header(reqwest::header::ACCEPT, "application/json")
                    },
                    &self.policy,
                )
                .await
            }
            Engine::Tavily => {
                let body = serde_json::json!({
                    "query": clip_query(query, TAVILY_MAX_QUERY_CHARS),
                    "max_results": top_k.min(TAVILY_MAX_RESULTS),
                })
                .to_string();
                let key = self.key.clone().unwrap_or_default();
                http::send(
                    || {
                        http::client()
                            .post(self.endpoint.clone())
                            .bearer_auth(&key)
                            .header(reqwest::header::CONTENT_TYPE, "application/json")
                            .header(reqwest::header::ACCEPT, "application/json")
                            .body(body.clone())
                    },
                    &self.policy,
                )
                .await
            }
        }
        .map_err(|e| self.fail(&http_message(e, self.engine)))?;
        let results = parse_results(&resp.body, resp.content_type.as_deref(), self.engine)
            .map_err(|e| self.fail(&e))?;
        Ok(web_documents(self.engine, &results, top_k))
    }

    fn fail(&self, what: &str) -> String {
        self.policy.redact(&format!(
            "tool `{}`: {} at {}: {what}",
            self.tool,
            self.engine.as_str(),
            self.endpoint
        ))
    }
}

impl Retriever for WebSearch {
    fn search<'a>(&'a self, query: &'a str, top_k: usize) -> SearchFuture<'a> {
        Box::pin(async move {
            WebSearch::search(self, query, top_k)
                .await
                .map_err(super::SearchError::Backend)
        })
    }
}

fn http_message(e: HttpError, engine: Engine) -> String {
    let hint = match (&e, engine) {
        (HttpError::Permanent { status: Some(403), .. }, Engine::Searxng) => {
            " (SearxNG answers 403 when JSON output is disabled: add `json` to `search.formats` in its settings.yml)"
        }
        (HttpError::Permanent { status: Some(401), .. }, Engine::Tavily) => {
            " (check the Tavily API key)"
        }
        _ => "",
    };
    format!("{e}{hint}")
}

/// Cuts `q` to at most `max` characters, at the last space before the limit when
/// there is one.
fn clip_query(q: &str, max: usize) -> String {
    if q.chars().count() <= max {
        return q.to_string();
    }
    let cut: String = q.chars().take(max).collect();
    match cut.rfind(char::is_whitespace) {
        Some(i) if i > 0 => cut[..i].trim_end().to_string(),
        _ => cut,
    }
}

/// The `results` list of a search response body.
///
/// # Errors
/// A message saying what the body is instead: empty, HTML, not JSON, an error
/// object, JSON without a `results` list.
pub fn parse_results(
    body: &str,
    content_type: Option<&str>,
    engine: Engine,
) -> Result<Vec<Value>, String> {
    let trimmed = body.trim_start_matches('\u{feff}').trim();
    if trimmed.is_empty() {
        return Err("empty response body (expected JSON with a `results` list)".into());
    }
    let v: Value = match serde_json::from_str(trimmed) {
        Ok(v) => v,
        Err(e) => {
            let html = trimmed.starts_with('<')
                || content_type.is_some_and(|c| c.to_ascii_lowercase().contains("html"));
            let start = http::server_message(trimmed);
            return Err(if html {
                let hint = match engine {
                    Engine::Searxng => " (is `json` enabled in `search.formats` of the instance's settings.yml, and is base_url the SearxNG root?)",
                    Engine::Tavily => " (is base_url the API root?)",
                };
                format!("the server answered with an HTML page, not JSON{hint}: {start}")
            } else {
                format!("the response is not JSON ({e}): {start}")
            });
        }
    };
    let Some(obj) = v.as_object() else {
        return Err(format!(
            "the response is JSON but not an object with a `results` list: {}",
            http::server_message(trimmed)
        ));
    };
    match obj.get("results") {
        Some(Value::Array(a)) => Ok(a.clone()),
        Some(other) => Err(format!(
            "`results` is {}, not a list",
            crate::json::kind(other)
        )),
        None => {
            let error = obj
                .get("error")
                .or_else(|| obj.get("detail"))
                .or_else(|| obj.get("message"));
            Err(match error {
                Some(_) => format!(
                    "the server reported an error: {}",
                    http::server_message(trimmed)
                ),
                None => {
                    let keys: Vec<&str> = obj.keys().map(String::as_str).take(8).collect();
                    format!(
                        "the response has no `results` list (keys: {})",
                        if keys.is_empty() {
                            "none".to_string()
                        } else {
                            keys.join(", ")
                        }
                    )
                }
            })
        }
    }
}

/// The stable id of a web result: UUID v5 of its url in
/// [`crate::retrieval::ID_NAMESPACE`], hyphenated lowercase.
pub fn web_id(url: &str) -> String {
    uuid::Uuid::new_v5(&ID_NAMESPACE, url.as_bytes())
        .hyphenated()
        .to_string()
}

/// Maps the `results` of a search response to at most `top_k` documents (see the
/// module docs). Entries that are not objects or have no non-empty string `url` are
/// skipped; a url seen before is skipped.
pub fn web_documents(engine: Engine, results: &[Value], top_k: usize) -> Vec<Document> {
    let mut seen = std::collections::HashSet::new();
    let mut docs = Vec::new();
    for (i, r) in results.iter().enumerate() {
        if docs.len() >= top_k {
            break;
        }
        let Some(obj) = r.as_object() else { continue };
        let Some(url) = obj
            .get("url")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|u| !u.is_empty())
        else {
            continue;
        };
        if !seen.insert(url.to_string()) {
            continue;
        }
        let text = |k: &str| {
            obj.get(k)
                .and_then(Value::as_str)
                .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
                .unwrap_or_default()
        };
        let title = text("title");
        let snippet = text("content");
        let content = match (title.is_empty(), snippet.is_empty()) {
            (false, false) => format!("{title}\n\n{snippet}"),
            (false, true) => title.clone(),
            (true, false) => snippet,
            (true, true) => url.to_string(),
        };
        let id = web_id(url);
        let found_by = match engine {
            Engine::Searxng => obj
                .get("engine")
                .and_then(Value::as_str)
                .filter(|e| !e.is_empty())
                .unwrap_or("searxng"),
            Engine::Tavily => "tavily",
        };
        let mut metadata = Map::new();
        metadata.insert("id".into(), Value::String(id.clone()));
        metadata.insert("source".into(), Value::String(url.to_string()));
        metadata.insert("title".into(), Value::String(title));
        metadata.insert("engine".into(), Value::String(found_by.to_string()));
        metadata.insert("rank".into(), Value::from(i + 1));
        if let Some(s) = obj
            .get("score")
            .and_then(Value::as_f64)
            .filter(|s| s.is_finite())
        {
            metadata.insert("score".into(), Value::from(s));
        }
        docs.push(Document {
            id,
            content,
            metadata,
        });
    }
    docs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tool_constructors_fail_with_typed_errors_naming_the_tool() {
        let e = WebSearch::searxng("web", "ftp://h", CallPolicy::default()).unwrap_err();
        assert_eq!(
            e,
            ToolError::BaseUrl {
                tool: "web".into(),
                source: BaseUrlError::NotHttp {
                    base: "ftp://h".into()
                }
            }
        );
        assert_eq!(
            e.to_string(),
            "tool `web`: base_url `ftp://h` must start with http:// or https://"
        );
        std::env::remove_var("RAGLOOP_TEST_ERRORS_TAVILY_UNSET");
        let e = WebSearch::tavily(
            "t",
            "RAGLOOP_TEST_ERRORS_TAVILY_UNSET",
            None,
            CallPolicy::default(),
        )
        .unwrap_err();
        assert!(
            matches!(&e, ToolError::MissingKey { var, .. } if var == "RAGLOOP_TEST_ERRORS_TAVILY_UNSET")
        );
    }

    #[test]
    fn endpoints() {
        assert_eq!(
            endpoint("http://127.0.0.1:8888/", "search")
                .unwrap()
                .as_str(),
            "http://127.0.0.1:8888/search"
        );
        assert_eq!(
            endpoint("https://searx.example/searx", "search")
                .unwrap()
                .as_str(),
            "https://searx.example/searx/search"
        );
        assert!(endpoint("ftp://x", "search").is_err());
        assert!(endpoint("not a url", "search").is_err());
        assert!(endpoint("http://x/?a=1", "search").is_err());
    }

    #[test]
    fn mapping_skips_dedupes_and_truncates() {
        let results = vec![
            json!({"url": "https://a.example/x", "title": "A", "content": "alpha  text", "engine": "duckduckgo", "score": 2.5}),
            json!({"title": "no url"}),
            json!("not an object"),
            json!({"url": "  ", "title": "blank url"}),
            json!({"url": "https://a.example/x", "title": "A again"}),
            json!({"url": "https://b.example/", "content": "beta only"}),
            json!({"url": "https://c.example/"}),
        ];
        let docs = web_documents(Engine::Searxng, &results, 10);
        assert_eq!(docs.len(), 3);
        assert_eq!(docs[0].content, "A\n\nalpha text");
        assert_eq!(docs[0].metadata["source"], "https://a.example/x");
        assert_eq!(docs[0].metadata["engine"], "duckduckgo");
        assert_eq!(docs[0].metadata["rank"], 1);
        assert_eq!(docs[0].metadata["score"], 2.5);
        assert_eq!(docs[0].id, web_id("https://a.example/x"));
        assert_eq!(docs[1].content, "beta only");
        assert_eq!(docs[1].metadata["engine"], "searxng");
        assert_eq!(docs[2].content, "https://c.example/");
        assert_eq!(web_documents(Engine::Tavily, &results, 2).len(), 2);
        assert_eq!(
            web_documents(Engine::Tavily, &results, 1)[0].metadata["engine"],
            "tavily"
        );
    }

    #[test]
    fn ids_are_stable_uuid_v5() {
        let a = web_id("https://doc.rust-lang.org/book/");
        assert_eq!(a, web_id("https://doc.rust-lang.org/book/"));
        assert_ne!(a, web_id("https://doc.rust-lang.org/book"));
        assert_eq!(uuid::Uuid::parse_str(&a).unwrap().get_version_num(), 5);
    }

    #[test]
    fn bad_bodies() {
        let e = |b: &str, ct: Option<&str>| parse_results(b, ct, Engine::Searxng).unwrap_err();
        assert!(e("", None).contains("empty response body"));
        assert!(e("<!DOCTYPE html><html>x</html>", Some("text/html")).contains("HTML page"));
        assert!(e("{\"query\": \"x\"}", None).contains("no `results` list (keys: query)"));
        assert!(
            e("{\"error\": \"rate limited\"}", None).contains("reported an error: rate limited")
        );
        assert!(e("{\"results\": 3}", None).contains("`results` is a number"));
        assert!(e("[1,2]", None).contains("not an object"));
        assert!(e("{truncated", None).contains("not JSON"));
        assert_eq!(
            parse_results("{\"results\": []}", None, Engine::Tavily).unwrap(),
            Vec::<Value>::new()
        );
    }

    #[test]
    fn long_queries_are_clipped_at_a_word() {
        let q = "word ".repeat(100);
        let c = clip_query(&q, 400);
        assert!(c.chars().count() <= 400);
        assert!(c.ends_with("word"));
        assert_eq!(clip_query("short", 400), "short");
    }
}
