//! Sharded evals: `ragloop eval ... --shard I/N` runs a deterministic slice of the
//! (arm, question, repeat) pairs, and `ragloop eval merge` ([`super::merge`]) combines
//! the N shards' output directories into the unsharded eval's results and reports.
//!
//! - **Numbering**: 1-based, `1/4` to `4/4` (a Kubernetes Indexed Job's 0-based
//!   `JOB_COMPLETION_INDEX` is `I - 1`). `0/N`, `I/0`, `I/N` with I > N, N above
//!   [`MAX_SHARDS`] and anything but two integers are usage errors (exit 2).
//! - **Assignment**: a pair belongs to shard `1 + h mod N`, `h` the first 8 bytes
//!   (little-endian) of blake3(`ragloop-shard\0ARM\0ID\0REPEAT`). It depends on the
//!   pair only, never on the dataset's order or size: a question added to the
//!   dataset leaves every other pair in its shard.
//! - **Manifest**: each shard writes `shard.json` ([`Manifest`]) at its start, next
//!   to settings.json: what merge needs to check that the shards belong together
//!   (specs' and dataset's fingerprints, arms, settings, gates) and to build the
//!   unsharded summary (labels, arms, repeats, hard kinds, the single-shot arm).
//!   A shard does not evaluate the gates (its figures cover a slice); the merge does.
use super::store::StoreError;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The file name of the manifest inside a shard's output directory.
pub const MANIFEST_FILE: &str = "shard.json";
/// The most shards `--shard` accepts.
pub const MAX_SHARDS: u32 = 10_000;

/// One shard: `index` of `count`, 1-based.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Shard {
    /// 1..=count.
    pub index: u32,
    /// Shards in all, 1..=[`MAX_SHARDS`].
    pub count: u32,
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl Shard {
    /// Parses `I/N` (see the module docs).
    ///
    /// # Errors
    /// A message saying what is wrong with the argument.
    pub fn parse(arg: &str) -> Result<Shard, String> {
        let bad =
            |why: &str| format!("--shard {arg:?}: {why} (expected I/N, 1 <= I <= N, e.g. 1/4)");
        let (i, n) = arg.trim().split_once('/').ok_or_else(|| bad("no `/`"))?;
        let num = |s: &str, what: &str| {
            s.trim()
                .parse::<u32>()
                .map_err(|_| bad(&format!("{what} `{}` is not a whole number", s.trim())))
        };
        let (index, count) = (num(i, "I")?, num(n, "N")?);
        if count == 0 {
            return Err(bad("N must be at least 1"));
        }
        if count > MAX_SHARDS {
            return Err(bad(&format!("N must be at most {MAX_SHARDS}")));
        }
        if index == 0 {
            return Err(bad("shards are numbered from 1"));
        }
        if index > count {
            return Err(bad(&format!("I must be at most N ({count})")));
        }
        Ok(Shard { index, count })
    }

    /// The shard (1-based index) the pair (arm, question id, repeat) belongs to
    /// among `count`.
    pub fn of(arm: &str, id: &str, repeat: u32, count: u32) -> u32 {
        let mut h = blake3::Hasher::new();
        h.update(b"ragloop-shard\0");
        h.update(arm.as_bytes());
        h.update(b"\0");
        h.update(id.as_bytes());
        h.update(b"\0");
        h.update(repeat.to_string().as_bytes());
        let bytes = h.finalize();
        let mut first = [0u8; 8];
        first.copy_from_slice(&bytes.as_bytes()[..8]);
        1 + (u64::from_le_bytes(first) % u64::from(count.max(1))) as u32
    }

    /// Whether the pair is in this shard.
    pub fn contains(&self, arm: &str, id: &str, repeat: u32) -> bool {
        Shard::of(arm, id, repeat, self.count) == self.index
    }
}

/// Whether the pair is selected: always without a shard.
pub fn selected(shard: Option<Shard>, arm: &str, id: &str, repeat: u32) -> bool {
    shard.is_none_or(|s| s.contains(arm, id, repeat))
}

/// A file as the manifest records it: the path as given and the blake3 of its
/// contents (see [`super::settings::fingerprint`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FilePrint {
    /// As given on the command line.
    pub path: String,
    /// 64 hex digits.
    pub fingerprint: String,
}

/// An arm as the manifest records it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ArmPrint {
    /// The arm's name.
    pub name: String,
    /// Its spec, as given.
    pub spec: String,
    /// Its variant (`base`: none).
    pub variant: String,
}

/// shard.json: a shard's identity and everything [`super::merge`] needs.
///
/// Keys: `version` (1), `shard` {`index`, `count`}, `specs` [{`path`,
/// `fingerprint`}] (each spec and the files it reads), `dataset` {`path`,
/// `fingerprint`}, `arms` [{`name`, `spec`, `variant`}] in arm order, `several`
/// (several specs given), `repeats`, `hard_kinds`, `single_shot`, `fail_under`,
/// `fail_over`, `fail_if_worse` (as given), `settings` (settings.json's object).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Format version, 1.
    pub version: u32,
    /// This shard.
    pub shard: Shard,
    /// The specs, in order.
    pub specs: Vec<FilePrint>,
    /// The dataset.
    pub dataset: FilePrint,
    /// The arms, in order.
    pub arms: Vec<ArmPrint>,
    /// Several specs were given (arm names `STEM[:VARIANT]`).
    pub several: bool,
    /// `--repeats` (at least 1).
    pub repeats: u32,
    /// The hard subset's kinds.
    pub hard_kinds: Vec<String>,
    /// `--single-shot`.
    pub single_shot: Option<String>,
    /// `--fail-under` arguments.
    pub fail_under: Vec<String>,
    /// `--fail-over` arguments.
    pub fail_over: Vec<String>,
    /// `--fail-if-worse` arguments.
    pub fail_if_worse: Vec<String>,
    /// The CLI settings (as in settings.json, `shard` included).
    pub settings: super::settings::Settings,
}

impl Manifest {
    /// One line per field (the shard excepted) that differs from `other`, naming
    /// the field and both values; empty when the two shards belong together.
    pub fn differences(&self, other: &Manifest) -> Vec<String> {
        fn show<T: Serialize>(v: &T) -> String {
            serde_json::to_string(v).unwrap_or_else(|_| "?".into())
        }
        let mut out = Vec::new();
        let mut cmp = |what: &str, a: String, b: String| {
            if a != b {
                out.push(format!("{what}: {a} vs {b}"));
            }
        };
        cmp("format version", show(&self.version), show(&other.version));
        cmp(
            "shard count",
            show(&self.shard.count),
            show(&other.shard.count),
        );
        let paths = |m: &Manifest| show(&m.specs.iter().map(|s| &s.path).collect::<Vec<_>>());
        cmp("specs", paths(self), paths(other));
        for (a, b) in self.specs.iter().zip(&other.specs) {
            if a.path == b.path && a.fingerprint != b.fingerprint {
                out.push(format!(
                    "spec {}: its files differ (fingerprint {} vs {})",
                    a.path,
                    short(&a.fingerprint),
                    short(&b.fingerprint)
                ));
            }
        }
        let mut cmp = |what: &str, a: String, b: String| {
            if a != b {
                out.push(format!("{what}: {a} vs {b}"));
            }
        };
        cmp(
            "dataset",
            show(&self.dataset.path),
            show(&other.dataset.path),
        );
        if self.dataset.fingerprint != other.dataset.fingerprint {
            cmp(
                "dataset contents (fingerprint)",
                short(&self.dataset.fingerprint).into(),
                short(&other.dataset.fingerprint).into(),
            );
        }
        cmp(
            "arms",
            show(&self.arms.iter().map(|a| &a.name).collect::<Vec<_>>()),
            show(&other.arms.iter().map(|a| &a.name).collect::<Vec<_>>()),
        );
        cmp("arm specs", show(&self.arms), show(&other.arms));
        cmp("--repeats", show(&self.repeats), show(&other.repeats));
        cmp("--hard", show(&self.hard_kinds), show(&other.hard_kinds));
        cmp(
            "--single-shot",
            show(&self.single_shot),
            show(&other.single_shot),
        );
        cmp(
            "--fail-under",
            show(&self.fail_under),
            show(&other.fail_under),
        );
        cmp("--fail-over", show(&self.fail_over), show(&other.fail_over));
        cmp(
            "--fail-if-worse",
            show(&self.fail_if_worse),
            show(&other.fail_if_worse),
        );
        let (mut a, mut b) = (self.settings.clone(), other.settings.clone());
        a.shard = None;
        b.shard = None;
        out.extend(
            a.differences(&b)
                .into_iter()
                .map(|d| d.replace(" (before) vs ", " vs ").replace(" (now)", "")),
        );
        out
    }
}

fn short(h: &str) -> &str {
    &h[..h.len().min(12)]
}

/// Reads `dir/shard.json`; `Ok(None)` when there is none.
///
/// # Errors
/// The file exists but cannot be read or is not a manifest (message names it).
pub fn read(dir: &Path) -> Result<Option<Manifest>, StoreError> {
    super::store::read_json_file(dir, MANIFEST_FILE)
}

/// Writes `dir/shard.json` (a temporary file renamed into place).
///
/// # Errors
/// The file cannot be written (message names it).
pub fn write(dir: &Path, m: &Manifest) -> Result<(), StoreError> {
    super::store::write_json_file(dir, MANIFEST_FILE, m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_refuses_what_is_not_a_shard() {
        assert_eq!(Shard::parse("1/4"), Ok(Shard { index: 1, count: 4 }));
        assert_eq!(Shard::parse(" 4 / 4 "), Ok(Shard { index: 4, count: 4 }));
        for bad in [
            "3/2", "0/0", "0/4", "1/0", "5/4", "a/4", "1/b", "14", "", "/", "-1/4", "1/4/2",
            "1/10001",
        ] {
            let e = Shard::parse(bad).expect_err(bad);
            assert!(e.starts_with("--shard "), "{e}");
        }
        assert!(Shard::parse("3/2").unwrap_err().contains("at most N (2)"));
        assert!(Shard::parse("0/0").unwrap_err().contains("at least 1"));
    }

    #[test]
    fn assignment_is_stable_and_balanced() {
        let n = 4;
        let mut counts = [0usize; 4];
        for i in 0..4000 {
            let id = format!("q{i}");
            let s = Shard::of("base", &id, 0, n);
            assert!((1..=n).contains(&s));
            assert_eq!(s, Shard::of("base", &id, 0, n), "deterministic");
            counts[(s - 1) as usize] += 1;
            // Exactly one shard holds the pair.
            let holders = (1..=n)
                .filter(|k| {
                    Shard {
                        index: *k,
                        count: n,
                    }
                    .contains("base", &id, 0)
                })
                .count();
            assert_eq!(holders, 1);
        }
        for c in counts {
            assert!((850..=1150).contains(&c), "{counts:?}");
        }
        // A fixed value: the assignment is part of the output format (shards run by
        // different ragloop builds merge).
        assert_eq!(Shard::of("base", "q1", 0, 4), 2);
        assert_eq!(Shard::of("base", "q0", 0, 4), 3);
        assert_eq!(Shard::of("base", "q2", 0, 4), 1);
        assert_eq!(Shard::of("base", "q12", 0, 4), 4);
        assert!(selected(None, "x", "y", 3));
    }
}
