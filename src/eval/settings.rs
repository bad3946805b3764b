//! settings.json: the CLI settings an eval's rows were run under, so a report says
//! what produced it and `--resume` never mixes rows of different settings.
//!
//! Shape (one JSON object, written at the start of every eval, before any run):
//!
//! | key | type | meaning |
//! | --- | --- | --- |
//! | `overrides` | [string] | `--override PATH=VALUE`, in command-line order |
//! | `models` | [string] | `--model` values, in order |
//! | `timeout_secs` | number or null | `--timeout` |
//! | `retries` | integer or null | `--retries` |
//! | `corpus` | string or null | `--corpus`, as given |
//! | `specs` | [{`path`, `fingerprint`}] | with several specs only: each spec as given and the blake3 of its files (the spec, then the prompts and schemas it reads) |
//! | `repeats` | integer | `--repeats`, only when above 1 |
//! | `judge` | string (absent: the offline judge) | `--judge` |
//! | `judge_repeats` | integer (absent: 1) | `--judge-repeats` |
//! | `shard` | string `I/N` (absent: not sharded) | `--shard` |
//!
//! `--resume` reads it back and refuses (a usage error) when any field differs,
//! naming each field with its old and new value. A directory without settings.json
//! (written by an older ragloop) is resumed with a warning and gets one.
use super::store::StoreError;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The file name inside the output directory.
pub const SETTINGS_FILE: &str = "settings.json";

/// The effective CLI settings of an eval (see the module docs).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// `--override PATH=VALUE` changes, in order.
    #[serde(default)]
    pub overrides: Vec<String>,
    /// `--model` values, in order.
    #[serde(default)]
    pub models: Vec<String>,
    /// `--timeout`, seconds.
    #[serde(default)]
    pub timeout_secs: Option<f64>,
    /// `--retries`.
    #[serde(default)]
    pub retries: Option<u32>,
    /// `--corpus`, as given on the command line.
    #[serde(default)]
    pub corpus: Option<String>,
    /// The specs of an eval over several specs, in order (empty for one spec: its
    /// settings.json is as it always was).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub specs: Vec<SpecPrint>,
    /// `--repeats N` when N > 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeats: Option<u32>,
    /// `--judge` (`None`: the offline judge).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<String>,
    /// `--judge-repeats` when above 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_repeats: Option<usize>,
    /// `--shard I/N` (`None`: the whole eval).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<String>,
}

/// A spec of an eval over several specs, as settings.json records it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SpecPrint {
    /// The path as given on the command line.
    pub path: String,
    /// blake3 (hex) of the spec's files' contents, in the order the spec reads them
    /// (see [`fingerprint`]).
    pub fingerprint: String,
}

/// blake3 of the contents of `files` (each prefixed with its length, so moving
/// bytes between files changes it), as 64 hex digits; a file that cannot be read
/// counts as its error message.
pub fn fingerprint(files: &[std::path::PathBuf]) -> String {
    let mut h = blake3::Hasher::new();
    for f in files {
        let bytes = std::fs::read(f).unwrap_or_else(|e| format!("unreadable: {e}").into_bytes());
        h.update(&(bytes.len() as u64).to_le_bytes());
        h.update(&bytes);
    }
    h.finalize().to_hex().to_string()
}

fn show<T: Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "?".into())
}

impl Settings {
    /// Whether every field is unset (no flag given).
    pub fn is_default(&self) -> bool {
        *self == Settings::default()
    }

    /// One line per field that differs from `new`: `--override: ["a=1"] (before)
    /// vs ["a=8"] (now)`. Empty when equal.
    pub fn differences(&self, new: &Settings) -> Vec<String> {
        let mut out = Vec::new();
        let mut cmp = |flag: &str, old: String, new: String| {
            if old != new {
                out.push(format!("{flag}: {old} (before) vs {new} (now)"));
            }
        };
        cmp("--override", show(&self.overrides), show(&new.overrides));
        cmp("--model", show(&self.models), show(&new.models));
        cmp(
            "--timeout",
            show(&self.timeout_secs),
            show(&new.timeout_secs),
        );
        cmp("--retries", show(&self.retries), show(&new.retries));
        cmp("--corpus", show(&self.corpus), show(&new.corpus));
        let paths = |s: &Settings| show(&s.specs.iter().map(|p| &p.path).collect::<Vec<_>>());
        if paths(self) != paths(new) {
            cmp("specs", paths(self), paths(new));
        } else {
            for (a, b) in self.specs.iter().zip(&new.specs) {
                if a.fingerprint != b.fingerprint {
                    out.push(format!(
                        "spec {}: its files changed (fingerprint {} before vs {} now)",
                        a.path,
                        &a.fingerprint[..a.fingerprint.len().min(12)],
                        &b.fingerprint[..b.fingerprint.len().min(12)]
                    ));
                }
            }
        }
        let mut cmp = |flag: &str, old: String, new: String| {
            if old != new {
                out.push(format!("{flag}: {old} (before) vs {new} (now)"));
            }
        };
        cmp(
            "--repeats",
            show(&self.repeats.unwrap_or(1)),
            show(&new.repeats.unwrap_or(1)),
        );
        cmp("--judge", show(&self.judge), show(&new.judge));
        cmp(
            "--judge-repeats",
            show(&self.judge_repeats),
            show(&new.judge_repeats),
        );
        cmp("--shard", show(&self.shard), show(&new.shard));
        out
    }

    /// A short human line for report headers: `--override retrievers.b.top_k=8,
    /// --timeout 5`; `none` when nothing was set.
    pub fn describe(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        parts.extend(self.overrides.iter().map(|o| format!("--override {o}")));
        parts.extend(self.models.iter().map(|m| format!("--model {m}")));
        if let Some(t) = self.timeout_secs {
            parts.push(format!("--timeout {t}"));
        }
        if let Some(r) = self.retries {
            parts.push(format!("--retries {r}"));
        }
        if let Some(c) = &self.corpus {
            parts.push(format!("--corpus {c}"));
        }
        if let Some(r) = self.repeats {
            parts.push(format!("--repeats {r}"));
        }
        if let Some(j) = &self.judge {
            parts.push(format!("--judge {j}"));
        }
        if let Some(k) = self.judge_repeats {
            parts.push(format!("--judge-repeats {k}"));
        }
        if let Some(s) = &self.shard {
            parts.push(format!("--shard {s}"));
        }
        if parts.is_empty() {
            "none".into()
        } else {
            parts.join(", ")
        }
    }
}

/// Reads `dir/settings.json`; `Ok(None)` when it does not exist.
///
/// # Errors
/// The file exists but cannot be read or is not a settings object (message names it).
pub fn read(dir: &Path) -> Result<Option<Settings>, StoreError> {
    super::store::read_json_file(dir, SETTINGS_FILE)
}

/// Writes `dir/settings.json` (a temporary file renamed into place).
///
/// # Errors
/// The file cannot be written (message names it).
pub fn write(dir: &Path, s: &Settings) -> Result<(), StoreError> {
    super::store::write_json_file(dir, SETTINGS_FILE, s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differences_name_old_and_new() {
        let a = Settings {
            overrides: vec!["r.top_k=1".into()],
            ..Default::default()
        };
        let b = Settings {
            overrides: vec!["r.top_k=8".into()],
            retries: Some(2),
            ..Default::default()
        };
        let d = a.differences(&b);
        assert_eq!(d.len(), 2, "{d:?}");
        assert!(
            d[0].contains("r.top_k=1") && d[0].contains("r.top_k=8"),
            "{d:?}"
        );
        assert!(d[1].starts_with("--retries: null"), "{d:?}");
        assert!(a.differences(&a).is_empty());
        assert_eq!(Settings::default().describe(), "none");
    }
}
