//! JSON Schema → [`Ty`]: the static type of a value a schema describes.
//!
//! Only what can be told for sure is modelled. Everything a schema leaves open —
//! no `type`, `additionalProperties: true` or a schema, `patternProperties`, a `$ref`
//! that does not resolve inside the same schema, `allOf`/`not`/`if`, a boolean
//! schema — lowers to [`Ty::Unknown`], and the checker stays silent about it.
use indexmap::IndexMap;
use serde_json::Value;

/// How deep schema lowering follows nesting and `$ref`s before giving up (the type
/// becomes [`Ty::Unknown`]): bounds the work on recursive or hostile schemas.
const MAX_DEPTH: usize = 32;

/// A static type.
#[derive(Clone, Debug, PartialEq)]
pub enum Ty {
    /// Nothing is known: every operation on it is accepted.
    Unknown,
    /// `null` / `none`.
    Null,
    /// A boolean.
    Bool,
    /// An integer.
    Int,
    /// A number (integer or float).
    Num,
    /// A string, with the values its `enum`/`const` allows (`None`: any string).
    Str(Option<Vec<String>>),
    /// An array of elements of one type.
    Array(Box<Ty>),
    /// An object: its known properties, and whether others may exist (`open`).
    Object {
        /// Declared properties.
        props: IndexMap<String, Ty>,
        /// Other properties may exist (reading an undeclared one is not a fault).
        open: bool,
    },
    /// One of several types (never nested, never containing `Unknown`).
    Union(Vec<Ty>),
}

impl Ty {
    /// Any string.
    pub fn string() -> Ty {
        Ty::Str(None)
    }

    /// An object with unknown properties.
    pub fn open_object() -> Ty {
        Ty::Object {
            props: IndexMap::new(),
            open: true,
        }
    }

    /// The document shape retrievers and web search return:
    /// `{id: string, content: string, metadata: object}`.
    pub fn document() -> Ty {
        let mut props = IndexMap::new();
        props.insert("id".to_string(), Ty::string());
        props.insert("content".to_string(), Ty::string());
        props.insert("metadata".to_string(), Ty::open_object());
        Ty::Object { props, open: false }
    }

    /// The union of two types (`Unknown` absorbs everything).
    pub fn union(a: Ty, b: Ty) -> Ty {
        Ty::union_all([a, b])
    }

    /// The union of several types.
    pub fn union_all(items: impl IntoIterator<Item = Ty>) -> Ty {
        let mut out: Vec<Ty> = Vec::new();
        for t in items {
            match t {
                Ty::Unknown => return Ty::Unknown,
                Ty::Union(ts) => {
                    for t in ts {
                        if !out.contains(&t) {
                            out.push(t);
                        }
                    }
                }
                t => {
                    if !out.contains(&t) {
                        out.push(t);
                    }
                }
            }
        }
        match out.len() {
            0 => Ty::Unknown,
            1 => out.pop().unwrap_or(Ty::Unknown),
            _ => Ty::Union(out),
        }
    }

    /// The members of the type (itself unless a union).
    pub fn members(&self) -> &[Ty] {
        match self {
            Ty::Union(ts) => ts,
            t => std::slice::from_ref(t),
        }
    }

    /// The members except `null`.
    pub fn non_null(&self) -> Vec<&Ty> {
        self.members().iter().filter(|t| **t != Ty::Null).collect()
    }

    /// Every (non-null) member is numeric.
    pub fn is_numeric(&self) -> bool {
        let m = self.non_null();
        !m.is_empty() && m.iter().all(|t| matches!(t, Ty::Int | Ty::Num))
    }

    /// Every (non-null) member is a string.
    pub fn is_string(&self) -> bool {
        let m = self.non_null();
        !m.is_empty() && m.iter().all(|t| matches!(t, Ty::Str(_)))
    }

    /// The values allowed when every non-null member is a string with an enum.
    pub fn string_enum(&self) -> Option<Vec<String>> {
        let m = self.non_null();
        if m.is_empty() {
            return None;
        }
        let mut all = Vec::new();
        for t in m {
            match t {
                Ty::Str(Some(vals)) => all.extend(vals.iter().cloned()),
                _ => return None,
            }
        }
        Some(all)
    }

    /// The element type when iterated (arrays: the items; strings: strings).
    pub fn element(&self) -> Ty {
        let m = self.non_null();
        if m.is_empty() {
            return Ty::Unknown;
        }
        Ty::union_all(m.into_iter().map(|t| match t {
            Ty::Array(e) => (**e).clone(),
            Ty::Str(_) => Ty::string(),
            _ => Ty::Unknown,
        }))
    }

    /// How the type is named in messages: `string`, `integer`, `array`, ...
    pub fn name(&self) -> String {
        match self {
            Ty::Unknown => "any value".into(),
            Ty::Null => "null".into(),
            Ty::Bool => "boolean".into(),
            Ty::Int => "integer".into(),
            Ty::Num => "number".into(),
            Ty::Str(_) => "string".into(),
            Ty::Array(_) => "array".into(),
            Ty::Object { .. } => "object".into(),
            Ty::Union(ts) => ts.iter().map(Ty::name).collect::<Vec<_>>().join(" or "),
        }
    }

    /// The type of a JSON value.
    pub fn of_value(v: &Value) -> Ty {
        match v {
            Value::Null => Ty::Null,
            Value::Bool(_) => Ty::Bool,
            Value::Number(n) if n.is_i64() || n.is_u64() => Ty::Int,
            Value::Number(_) => Ty::Num,
            Value::String(s) => Ty::Str(Some(vec![s.clone()])),
            Value::Array(items) => Ty::Array(Box::new(if items.is_empty() {
                Ty::Unknown
            } else {
                Ty::union_all(items.iter().map(Ty::of_value))
            })),
            Value::Object(map) => Ty::Object {
                props: map
                    .iter()
                    .map(|(k, v)| (k.clone(), Ty::of_value(v)))
                    .collect(),
                open: false,
            },
        }
    }
}

/// Whether a value of type `actual` may satisfy `want`. `false` only when they are
/// known to be incompatible: unknown parts, objects' properties and open types
/// always fit.
pub fn may_fit(actual: &Ty, want: &Ty) -> bool {
    match (actual, want) {
        (Ty::Unknown, _) | (_, Ty::Unknown) => true,
        (Ty::Union(ts), _) => ts.iter().any(|t| may_fit(t, want)),
        (_, Ty::Union(ws)) => ws.iter().any(|w| may_fit(actual, w)),
        (Ty::Null, Ty::Null) | (Ty::Bool, Ty::Bool) => true,
        (Ty::Int, Ty::Int | Ty::Num) | (Ty::Num, Ty::Num) => true,
        // A float that holds an integer is stored as one.
        (Ty::Num, Ty::Int) => true,
        (Ty::Str(a), Ty::Str(w)) => match (a, w) {
            (Some(a), Some(w)) => a.iter().any(|v| w.contains(v)),
            _ => true,
        },
        (Ty::Array(a), Ty::Array(w)) => may_fit(a, w),
        (Ty::Object { .. }, Ty::Object { .. }) => true,
        _ => false,
    }
}

/// How many schema nodes one lowering may visit before the rest becomes
/// [`Ty::Unknown`]: bounds the work on schemas whose `$ref`s fan out.
const MAX_NODES: usize = 20_000;

/// Lowers a property schema found inside `root` (which resolves local `$ref`s).
/// A `$ref` met again inside its own expansion (a recursive schema) is
/// [`Ty::Unknown`] there; work is bounded by [`MAX_DEPTH`] and [`MAX_NODES`].
pub fn lower(schema: &Value, root: &Value) -> Ty {
    let mut l = Lowering {
        root,
        budget: MAX_NODES,
        active: Vec::new(),
    };
    l.lower(schema, 0)
}

struct Lowering<'a> {
    root: &'a Value,
    budget: usize,
    active: Vec<&'a str>,
}

impl<'a> Lowering<'a> {
    fn lower(&mut self, schema: &'a Value, depth: usize) -> Ty {
        if depth > MAX_DEPTH || self.budget == 0 {
            return Ty::Unknown;
        }
        self.budget -= 1;
        let Value::Object(obj) = schema else {
            return Ty::Unknown;
        };
        if let Some(r) = obj.get("$ref") {
            let Some(r) = r.as_str() else {
                return Ty::Unknown;
            };
            // Keywords next to `$ref` (2019-09+) would narrow it: not modelled.
            if obj.len() != 1 || self.active.contains(&r) {
                return Ty::Unknown;
            }
            let Some(target) = resolve_ref(self.root, r) else {
                return Ty::Unknown;
            };
            self.active.push(r);
            let t = self.lower(target, depth + 1);
            self.active.pop();
            return t;
        }
        if [
            "allOf",
            "not",
            "if",
            "then",
            "else",
            "$dynamicRef",
            "$recursiveRef",
        ]
        .iter()
        .any(|k| obj.contains_key(*k))
        {
            return Ty::Unknown;
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(alts) = obj.get(key) {
                let Some(alts) = alts.as_array() else {
                    return Ty::Unknown;
                };
                if obj.contains_key("type") || alts.is_empty() {
                    return Ty::Unknown;
                }
                let tys: Vec<Ty> = alts.iter().map(|a| self.lower(a, depth + 1)).collect();
                return Ty::union_all(tys);
            }
        }
        if let Some(c) = obj.get("const") {
            return Ty::of_value(c);
        }
        let enum_strings: Option<Vec<String>> = obj.get("enum").and_then(|e| {
            // The strings an enum allows (`null` members are the `null` type's).
            e.as_array().and_then(|vals| {
                vals.iter()
                    .filter(|v| !v.is_null())
                    .map(|v| v.as_str().map(str::to_string))
                    .collect::<Option<Vec<_>>>()
            })
        });
        let types: Vec<&str> = match obj.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => {
                let names: Option<Vec<&str>> = ts.iter().map(Value::as_str).collect();
                match names {
                    Some(n) if !n.is_empty() => n,
                    _ => return Ty::Unknown,
                }
            }
            _ => {
                let has_null = obj
                    .get("enum")
                    .and_then(Value::as_array)
                    .is_some_and(|v| v.iter().any(Value::is_null));
                return match enum_strings {
                    Some(vals) if !vals.is_empty() && has_null => {
                        Ty::union(Ty::Str(Some(vals)), Ty::Null)
                    }
                    Some(vals) if !vals.is_empty() => Ty::Str(Some(vals)),
                    _ => Ty::Unknown,
                };
            }
        };
        let mut tys = Vec::with_capacity(types.len());
        for t in types {
            tys.push(match t {
                "null" => Ty::Null,
                "boolean" => Ty::Bool,
                "integer" => Ty::Int,
                "number" => Ty::Num,
                "string" => Ty::Str(enum_strings.clone().filter(|v| !v.is_empty())),
                "array" => Ty::Array(Box::new(match obj.get("items") {
                    Some(items @ Value::Object(_)) => self.lower(items, depth + 1),
                    _ => Ty::Unknown,
                })),
                "object" => self.object(obj, depth),
                _ => Ty::Unknown,
            });
        }
        Ty::union_all(tys)
    }

    fn object(&mut self, obj: &'a serde_json::Map<String, Value>, depth: usize) -> Ty {
        let props = obj.get("properties").and_then(Value::as_object);
        // Without declared properties nothing is known about the keys; with
        // `additionalProperties` true or a schema, or `patternProperties`, others may exist.
        let open = props.is_none_or(|p| p.is_empty())
            || obj.contains_key("patternProperties")
            || obj.contains_key("unevaluatedProperties")
            || obj.contains_key("propertyNames")
            || !matches!(
                obj.get("additionalProperties"),
                None | Some(Value::Bool(false))
            );
        let mut out = IndexMap::new();
        for (k, v) in props.into_iter().flatten() {
            out.insert(k.clone(), self.lower(v, depth + 1));
        }
        Ty::Object { props: out, open }
    }
}

/// Resolves a local reference (`#`, `#/definitions/x`, `#/$defs/x`) inside `root`.
fn resolve_ref<'a>(root: &'a Value, r: &str) -> Option<&'a Value> {
    let ptr = r.strip_prefix('#')?;
    if ptr.is_empty() {
        return Some(root);
    }
    let decoded = ptr.replace("%25", "%");
    root.pointer(&decoded)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lowers_the_common_shapes() {
        let s = json!({"type": "object", "properties": {
            "a": {"type": "string", "enum": ["yes", "no"]},
            "b": {"type": ["string", "null"]},
            "c": {"$ref": "#/$defs/n"},
            "d": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            "e": {},
            "f": {"type": "object", "additionalProperties": true, "properties": {"x": {}}}
        }, "$defs": {"n": {"type": "number"}}});
        let Ty::Object { props, open } = lower(&s, &s) else {
            panic!()
        };
        assert!(!open);
        assert_eq!(props["a"], Ty::Str(Some(vec!["yes".into(), "no".into()])));
        assert_eq!(props["b"], Ty::Union(vec![Ty::string(), Ty::Null]));
        assert_eq!(props["c"], Ty::Num);
        assert_eq!(props["d"], Ty::Union(vec![Ty::Int, Ty::Null]));
        assert_eq!(props["e"], Ty::Unknown);
        assert!(matches!(&props["f"], Ty::Object { open: true, .. }));
    }

    #[test]
    fn recursive_refs_are_bounded() {
        let s = json!({"$ref": "#"});
        assert_eq!(lower(&s, &s), Ty::Unknown);
        let s = json!({"type": "array", "items": {"$ref": "#"}});
        assert!(matches!(lower(&s, &s), Ty::Array(_)));
    }

    #[test]
    fn fit_is_only_refused_when_known_incompatible() {
        assert!(!may_fit(&Ty::Int, &Ty::string()));
        assert!(may_fit(&Ty::Int, &Ty::Num));
        assert!(may_fit(&Ty::Unknown, &Ty::Int));
        assert!(!may_fit(
            &Ty::Str(Some(vec!["maybe".into()])),
            &Ty::Str(Some(vec!["yes".into(), "no".into()]))
        ));
        assert!(may_fit(
            &Ty::Union(vec![Ty::Int, Ty::string()]),
            &Ty::string()
        ));
    }
}
