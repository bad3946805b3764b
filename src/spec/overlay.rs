//! Variants: named overlays applied to the spec's JSON value before typing.
//!
//! A variant's `set` maps a dotted path to a value. Every segment but the last must
//! exist; the last must name an existing key, a new key of an existing mapping, or an
//! existing list index. The new value keeps its own source spans, so a fault in the
//! merged spec points at the variant's line.
use super::load::{typed, LoadedSpec};
use super::yaml::{escape_segment, pointer};
use crate::diag::{Code, Diagnostic};
use serde_json::Value;

/// Applies variant `name` to `base`, returning the merged, typed spec.
///
/// # Errors
/// [`Code::VariantPath`] for a path that does not exist (or names `version`, `root` or
/// `variants`, which variants cannot change); typing diagnostics of the merged spec.
/// All diagnostics carry the variant's name.
pub fn apply(base: &LoadedSpec, name: &str) -> Result<LoadedSpec, Vec<Diagnostic>> {
    let tag = |mut d: Diagnostic| {
        d.variant = Some(name.to_string());
        d
    };
    let Some(variant) = base.spec.variants.get(name) else {
        return Err(vec![tag(Diagnostic::new(
            Code::VariantPath,
            format!("no variant named `{name}`"),
        ))]);
    };
    let mut raw = base.raw.clone();
    let mut spans = base.spans.clone();
    let mut diags = Vec::new();
    for (path, value) in &variant.set {
        let set_ptr = format!(
            "{}/{}",
            pointer(&["variants", name, "set"]),
            escape_segment(path)
        );
        let at = base.spans.key(&set_ptr);
        let segments: Vec<&str> = path.split('.').collect();
        if segments.iter().any(|s| s.is_empty()) {
            diags.push(tag(Diagnostic::new(
                Code::VariantPath,
                format!("variant `{name}`: `{path}` is not a dotted path"),
            )
            .at(at)));
            continue;
        }
        if matches!(segments[0], "version" | "root" | "variants") {
            diags.push(tag(Diagnostic::new(
                Code::VariantPath,
                format!(
                    "variant `{name}`: `{}` cannot be changed by a variant",
                    segments[0]
                ),
            )
            .at(at)));
            continue;
        }
        match set_path(&mut raw, &segments, value.clone()) {
            Ok(()) => {
                let target = pointer(&segments);
                spans.graft(&target, &base.spans, &set_ptr, at);
            }
            Err(missing) => diags.push(tag(Diagnostic::new(
                Code::VariantPath,
                format!(
                    "variant `{name}` patches `{path}`, but `{missing}` does not exist in the spec"
                ),
            )
            .at(at))),
        }
    }
    if !diags.is_empty() {
        return Err(diags);
    }
    let spec =
        typed(&raw, &spans, base.file).map_err(|ds| ds.into_iter().map(tag).collect::<Vec<_>>())?;
    Ok(LoadedSpec {
        raw,
        spans,
        spec,
        variant: Some(name.to_string()),
        ..base.clone()
    })
}

/// Sets `value` at `segments` in `root`. On failure returns the dotted prefix that
/// does not exist.
fn set_path(root: &mut Value, segments: &[&str], value: Value) -> Result<(), String> {
    let mut cur = root;
    for (i, seg) in segments.iter().enumerate() {
        let last = i + 1 == segments.len();
        let missing = || segments[..=i].join(".");
        match cur {
            Value::Object(map) => {
                if last {
                    map.insert((*seg).to_string(), value);
                    return Ok(());
                }
                cur = map.get_mut(*seg).ok_or_else(missing)?;
            }
            Value::Array(items) => {
                let ix: usize = seg.parse().map_err(|_| missing())?;
                let slot = items.get_mut(ix).ok_or_else(missing)?;
                if last {
                    *slot = value;
                    return Ok(());
                }
                cur = slot;
            }
            _ => return Err(missing()),
        }
    }
    Err(String::new())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn set_path_rules() {
        let mut v = json!({"a": {"b": 1}, "l": [1, 2]});
        assert!(set_path(&mut v, &["a", "b"], json!(2)).is_ok());
        assert!(set_path(&mut v, &["a", "c"], json!(3)).is_ok());
        assert!(set_path(&mut v, &["l", "1"], json!(9)).is_ok());
        assert_eq!(
            set_path(&mut v, &["x", "y"], json!(0)),
            Err("x".to_string())
        );
        assert_eq!(
            set_path(&mut v, &["l", "5"], json!(0)),
            Err("l.5".to_string())
        );
        assert_eq!(v, json!({"a": {"b": 2, "c": 3}, "l": [1, 9]}));
    }
}
