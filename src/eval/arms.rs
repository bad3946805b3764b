//! Arms: what an eval runs every question under.
//!
//! With one spec, the arms are its variants, named as always: `base` (the spec
//! without a variant) and each variant's name. With several specs (`ragloop eval
//! a.yaml b.yaml ...`), an arm is `STEM` (the spec file's stem, the spec without a
//! variant) or `STEM:VARIANT`; two specs with the same stem are a usage error naming
//! both paths (rename or copy one), and so is a stem that is empty or holds `:` or
//! `,` (arm names are written in `--variants` lists and `ARM:METRIC` gates).
//! `STEM:base` is accepted for `STEM`.
use crate::compile::CompiledSpec;
use std::path::{Path, PathBuf};

/// The name of the unmodified spec among the variants.
pub const BASE: &str = "base";

/// The variant names a compiled spec defines, `base` first.
pub fn spec_variants(compiled: &CompiledSpec) -> Vec<String> {
    std::iter::once(BASE.to_string())
        .chain(compiled.variant_names().map(str::to_string))
        .collect()
}

/// One arm: a spec (by its index in the eval's spec list) and a variant of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Arm {
    /// The arm's name in rows, summaries, reports and gates.
    pub name: String,
    /// Index of its spec in the eval's spec list.
    pub spec: usize,
    /// The variant; `None` for the spec without any variant.
    pub variant: Option<String>,
}

/// The file stem naming a spec's arms (`graphs/crag.yaml` → `crag`).
pub fn stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The stems of several specs, in order (one spec: its stem, unchecked: its arms
/// are named by variant only).
///
/// # Errors
/// A usage message: two specs with the same stem (naming both paths), or a stem that
/// is empty or holds `:` or `,`.
pub fn stems(paths: &[PathBuf]) -> Result<Vec<String>, String> {
    let stems: Vec<String> = paths.iter().map(|p| stem(p)).collect();
    if paths.len() < 2 {
        return Ok(stems);
    }
    for (i, s) in stems.iter().enumerate() {
        if s.is_empty() || s.contains([':', ',']) {
            return Err(format!(
                "{}: with several specs an arm is named by the spec's file stem, and `{s}` cannot name one (empty, or holds `:` or `,`); rename or copy the file",
                paths[i].display()
            ));
        }
        if let Some(j) = stems[..i].iter().position(|t| t == s) {
            return Err(format!(
                "{} and {} have the same file stem `{s}`: with several specs an arm is named by its spec's stem (STEM or STEM:VARIANT); rename or copy one of them",
                paths[j].display(),
                paths[i].display()
            ));
        }
    }
    Ok(stems)
}

/// Every arm of the specs, in order: per spec, its base then each variant.
pub fn all_arms(specs: &[CompiledSpec], stems: &[String]) -> Vec<Arm> {
    let single = specs.len() == 1;
    let mut out = Vec::new();
    for (i, c) in specs.iter().enumerate() {
        for v in spec_variants(c) {
            let variant = (v != BASE).then(|| v.clone());
            let name = match (single, &variant) {
                (true, _) => v,
                (false, None) => stems[i].clone(),
                (false, Some(v)) => format!("{}:{v}", stems[i]),
            };
            out.push(Arm {
                name,
                spec: i,
                variant,
            });
        }
    }
    out
}

/// Resolves `--variants` over several specs: `None` is every arm
/// ([`all_arms`]); otherwise the listed arms in order. With one spec use
/// [`super::runner::resolve_variants`] (its messages name variants).
///
/// # Errors
/// A usage message naming an unknown arm (and listing the arms), a name listed twice,
/// an empty name, or no name.
pub fn resolve(
    specs: &[CompiledSpec],
    stems: &[String],
    wanted: Option<&[String]>,
) -> Result<Vec<Arm>, String> {
    let known = all_arms(specs, stems);
    let Some(wanted) = wanted else {
        return Ok(known);
    };
    let mut out: Vec<Arm> = Vec::new();
    for w in wanted {
        let w = w.trim();
        if w.is_empty() {
            return Err("--variants: empty arm name".into());
        }
        let w = w.strip_suffix(":base").unwrap_or(w);
        let Some(arm) = known.iter().find(|a| a.name == w) else {
            return Err(format!(
                "--variants: unknown arm `{w}`; with several specs an arm is STEM (the spec without a variant) or STEM:VARIANT; the arms are: {}",
                known
                    .iter()
                    .map(|a| a.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        };
        if out.iter().any(|o| o.name == arm.name) {
            return Err(format!("--variants: `{w}` is listed twice"));
        }
        out.push(arm.clone());
    }
    if out.is_empty() {
        return Err("--variants: no arm named".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stems_name_arms_and_collisions_name_both_paths() {
        let p = |s: &str| PathBuf::from(s);
        assert_eq!(
            stems(&[p("graphs/crag.yaml"), p("x/single-shot.yaml")]).unwrap(),
            ["crag", "single-shot"]
        );
        let e = stems(&[p("a/crag.yaml"), p("b/crag.yml")]).unwrap_err();
        assert!(e.contains("a/crag.yaml") && e.contains("b/crag.yml"), "{e}");
        assert!(stems(&[p("a:b.yaml"), p("c.yaml")]).is_err());
        // One spec: never refused (its arms are named by variant).
        assert_eq!(stems(&[p("a:b.yaml")]).unwrap(), ["a:b"]);
    }
}
