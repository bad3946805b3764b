//! Sections whose entries are tagged by `kind` (retrievers): which option keys each
//! kind takes, read from the serde types themselves, so that an option another kind
//! takes is reported in the spec's words ("has no effect there") when the spec loads,
//! and so that typing errors inside an entry point at the value at fault.
use super::types::RetrieverSpec;
use super::yaml::{self, SpanIndex};
use crate::diag::{Code, Diagnostic};
use serde::de::{self, Deserialize, Visitor};
use serde_json::Value;

/// The field names serde reads for the struct `T` (what `deny_unknown_fields`
/// accepts). Empty for a type that is not a struct.
pub fn struct_fields<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    let mut fields = None;
    let _ = T::deserialize(Probe(&mut fields));
    fields.unwrap_or(&[])
}

/// A deserializer that records the field list a derived struct asks for, then stops.
struct Probe<'a>(&'a mut Option<&'static [&'static str]>);

#[derive(Debug)]
struct Stop;

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("probe")
    }
}

impl std::error::Error for Stop {}

impl de::Error for Stop {
    fn custom<T: std::fmt::Display>(_: T) -> Self {
        Stop
    }
}

impl<'de> de::Deserializer<'de> for Probe<'_> {
    type Error = Stop;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Stop> {
        Err(Stop)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Stop> {
        *self.0 = Some(fields);
        Err(Stop)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
        byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
        identifier ignored_any
    }
}

/// A typing error: serde's message and the path of the value at fault.
pub type TypeError = (String, Vec<String>);

/// A kind of a tagged section: its name as written in specs, the option keys its
/// type takes (besides `kind`), and how to type an entry's options (without `kind`)
/// to get serde's precise error and path inside it.
#[derive(Clone, Copy)]
pub struct KindDef {
    /// The kind as written in specs.
    pub name: &'static str,
    /// The keys its options type takes.
    pub fields: &'static [&'static str],
    /// The typing error of an entry's options, with the path inside the entry.
    pub type_error: fn(&Value) -> Option<TypeError>,
}

impl KindDef {
    /// The definition of kind `name` whose options are the struct `T`.
    pub fn of<T: serde::de::DeserializeOwned>(name: &'static str) -> KindDef {
        KindDef {
            name,
            fields: struct_fields::<T>(),
            type_error: type_error::<T>,
        }
    }
}

fn type_error<T: serde::de::DeserializeOwned>(v: &Value) -> Option<TypeError> {
    let err = serde_path_to_error::deserialize::<_, T>(v).err()?;
    let path = err
        .path()
        .iter()
        .filter_map(|seg| match seg {
            serde_path_to_error::Segment::Map { key } => Some(key.clone()),
            serde_path_to_error::Segment::Seq { index } => Some(index.to_string()),
            _ => None,
        })
        .collect();
    Some((err.inner().to_string(), path))
}

/// The precise typing error of retriever entry `segments[1]` of `work`, typed as the
/// options of its `kind` (serde buffers an internally tagged entry and reports a
/// fault inside it at the entry): the message and the full path. `None` when the
/// entry is not a mapping with a known kind, or types.
pub fn retriever_error(work: &Value, segments: &[String]) -> Option<TypeError> {
    let (section, name) = (segments.first()?, segments.get(1)?);
    if section != "retrievers" {
        return None;
    }
    let Value::Object(entry) = work.get("retrievers")?.get(name)? else {
        return None;
    };
    let mut rest = entry.clone();
    let kind = rest.shift_remove("kind")?;
    let def = RetrieverSpec::kinds()
        .into_iter()
        .find(|k| Some(k.name) == kind.as_str())?;
    let (msg, inner) = (def.type_error)(&Value::Object(rest))?;
    let mut path = vec![section.clone(), name.clone()];
    path.extend(inner);
    Some((msg, path))
}

/// True when [`stray_options`] would find nothing in `work` (it copies only the
/// `retrievers` section).
pub fn no_stray_options(work: &Value) -> bool {
    let Some(retrievers) = work.get("retrievers") else {
        return true;
    };
    let mut only = Value::Object(serde_json::Map::new());
    only["retrievers"] = retrievers.clone();
    stray_options(&mut only, &SpanIndex::default()).is_empty()
}

/// Every retriever option that its kind does not take but another kind does: one
/// [`Code::WrongType`] at the key, and the key removed from `work` so typing goes on.
/// (A key no kind takes is left to serde: an unknown key, E003.)
pub fn stray_options(work: &mut Value, spans: &SpanIndex) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let kinds = RetrieverSpec::kinds();
    let Some(Value::Object(retrievers)) = work.get_mut("retrievers") else {
        return out;
    };
    for (name, r) in retrievers.iter_mut() {
        let Value::Object(r) = r else { continue };
        let Some(kind) = r.get("kind").and_then(Value::as_str).map(str::to_string) else {
            continue;
        };
        let Some(takes) = kinds.iter().find(|k| k.name == kind).map(|k| k.fields) else {
            continue;
        };
        let stray: Vec<String> = r
            .keys()
            .filter(|key| *key != "kind" && !takes.contains(&key.as_str()))
            .filter(|key| kinds.iter().any(|k| k.fields.contains(&key.as_str())))
            .cloned()
            .collect();
        for key in stray {
            let others: Vec<String> = kinds
                .iter()
                .filter(|k| k.fields.contains(&key.as_str()))
                .map(|k| format!("`{}`", k.name))
                .collect();
            let takes = match others.as_slice() {
                [one] => format!("only {one} retrievers take it"),
                [init @ .., last] => {
                    format!("only {} and {last} retrievers take it", init.join(", "))
                }
                [] => continue,
            };
            out.push(
                Diagnostic::new(
                    Code::WrongType,
                    format!("retriever `{name}` is of kind `{kind}`: `{key}` has no effect there"),
                )
                .at(spans.key(&yaml::pointer(&["retrievers", name, &key])))
                .help(format!("{takes}; remove it or change `kind`")),
            );
            r.shift_remove(&key);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_option_of_another_kind_fails_the_load_at_the_key() {
        let text = "version: 1\nname: x\nstate: {schema: {type: object, properties: {q: {type: string}}}}\nretrievers:\n  docs:\n    kind: bm25\n    corpus: .\n    rrf_k: 10\nentry: a\nnodes:\n  a: {kind: update, update: {q: \"'x'\"}}\nedges:\n  a: END\n";
        let mut sources = crate::source::Sources::new();
        let errs = crate::spec::load_spec_str(std::path::Path::new("s.yaml"), text, &mut sources)
            .expect_err("the load fails");
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert_eq!(errs[0].code, Code::WrongType);
        assert_eq!(
            errs[0].message,
            "retriever `docs` is of kind `bm25`: `rrf_k` has no effect there"
        );
        assert_eq!(errs[0].span.map(|s| (s.line, s.col)), Some((8, 5)));
        assert_eq!(
            errs[0].help.as_deref(),
            Some("only `hybrid` retrievers take it; remove it or change `kind`")
        );
    }

    #[test]
    fn fields_come_from_the_serde_types() {
        let kinds = RetrieverSpec::kinds();
        assert_eq!(kinds[0].name, "bm25");
        assert_eq!(
            kinds[0].fields,
            [
                "corpus",
                "top_k",
                "exclude",
                "include",
                "hygiene",
                "max_per_source",
                "mmr",
                "rerank"
            ]
        );
        assert!(kinds[2].fields.contains(&"rrf_k"));
        assert!(!kinds[1].fields.contains(&"rrf_k"));
    }
}
