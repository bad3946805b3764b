use super::*;
use serde_json::json;

fn vars() -> Vars {
    let state = json!({"type": "object", "properties": {
        "verdict": {"type": "string", "enum": ["yes", "no"]},
        "maybe": {"type": ["string", "null"], "enum": ["yes", "no", null]},
        "n": {"type": "integer"},
        "docs": {"type": "array", "items": {"type": "object", "properties": {
            "id": {"type": "string"}, "meta": {"type": "object", "properties": {"source": {"type": "string"}}}}}},
        "open": {"type": "object", "additionalProperties": true, "properties": {"a": {"type": "string"}}},
        "q": {"type": "string"}
    }});
    let mut v = Vars::new(false);
    if let Ty::Object { props, .. } = lower(&state, &state) {
        for (k, t) in props {
            v.insert(k, t);
        }
    }
    v
}

fn codes(text: &str) -> Vec<(Code, String)> {
    let (_, f) = expression(text, &vars());
    f.into_iter()
        .map(|f| (f.code, text[f.range].to_string()))
        .collect()
}

#[test]
fn enum_literals_with_eq_ne_and_in() {
    assert_eq!(
        codes("verdict == 'Yes'"),
        vec![(Code::EnumLiteral, "'Yes'".into())]
    );
    assert_eq!(
        codes("'Yes' != verdict"),
        vec![(Code::EnumLiteral, "'Yes'".into())]
    );
    assert_eq!(
        codes("verdict not in ['yes', 'nope']"),
        vec![(Code::EnumLiteral, "'nope'".into())]
    );
    assert!(codes("verdict == 'yes' or verdict != 'no' or verdict in ['yes']").is_empty());
    // A nullable enum: the strings are still checked; `none` is fine.
    assert_eq!(
        codes("maybe == 'Maybe'"),
        vec![(Code::EnumLiteral, "'Maybe'".into())]
    );
    assert!(codes("maybe == none").is_empty());
    // Through `first` of an array of enum strings, and a filter's result.
    assert!(codes("verdict | upper == 'YES'").is_empty());
}

#[test]
fn attributes_at_any_depth() {
    assert_eq!(
        codes("docs[0].meta.sorce"),
        vec![(Code::UnknownAttribute, "sorce".into())]
    );
    assert_eq!(
        codes("(docs | first).idd"),
        vec![(Code::UnknownAttribute, "idd".into())]
    );
    assert_eq!(
        codes("docs.lenght"),
        vec![(Code::UnknownAttribute, "lenght".into())]
    );
    assert!(codes("docs[0].meta.source ~ open.anything ~ open.a").is_empty());
    // Reads that tolerate a missing attribute.
    assert!(codes("docs[0].meta.nope is defined").is_empty());
    assert!(codes("docs[0].meta.nope | default('x')").is_empty());
    // A method call is not a property read.
    assert!(codes("open.items()").is_empty());
    let (_, f) = expression("docs[0].meta.sorce", &vars());
    assert_eq!(
        f[0].help.as_deref(),
        Some("did you mean `docs[0].meta.source`?")
    );
}

#[test]
fn orderings_and_arithmetic() {
    assert_eq!(
        codes("docs | length > \"3\""),
        vec![(Code::IncompatibleOperands, "\"3\"".into())]
    );
    assert_eq!(
        codes("n >= '3'"),
        vec![(Code::IncompatibleOperands, "'3'".into())]
    );
    assert_eq!(
        codes("n + q"),
        vec![(Code::IncompatibleOperands, "q".into())]
    );
    assert_eq!(
        codes("q | length - q"),
        vec![(Code::IncompatibleOperands, "q".into())]
    );
    // Filters with known results; `*` repeats a string; unknown types are silent.
    assert!(
        codes("q | length > 3 and q | trim | length >= n and q * 2 and (q | int) > 1").is_empty()
    );
    assert!(codes("q | nosuchfilter > 3 and open.x > '3'").is_empty());
    assert!(codes("(n | default(2)) < 3").is_empty());
}

#[test]
fn result_types() {
    let t = |e: &str| expression(e, &vars()).0;
    assert_eq!(t("docs | length"), Ty::Int);
    assert_eq!(t("q | lower"), Ty::string());
    assert_eq!(t("n / 2"), Ty::Num);
    assert_eq!(t("n + 1"), Ty::Int);
    assert!(matches!(t("docs | first"), Ty::Object { .. }));
    assert_eq!(t("q ~ n"), Ty::string());
    assert_eq!(
        t("n | default('x')"),
        Ty::Union(vec![Ty::Int, Ty::Str(Some(vec!["x".into()]))])
    );
    assert_eq!(t("open.zzz"), Ty::Unknown);
}

#[test]
fn hostile_input_never_panics() {
    let v = vars();
    for text in [
        "(".repeat(5000),
        format!("{}n{}", "(".repeat(300), ")".repeat(300)),
        "n.".repeat(2000) + "n",
        "}} {{".into(),
        "x | ".repeat(500) + "y",
        "[".repeat(1000),
        "'\\u{ffff}' == verdict".into(),
    ] {
        let _ = expression(&text, &v);
        let _ = template(&format!("{{{{ {text} }}}}"), &v);
        let _ = template(
            &format!("{}{}", "{% if c %}".repeat(300), "{% endif %}".repeat(300)),
            &v,
        );
    }
}

#[test]
fn ref_fan_out_is_bounded() {
    // d0 -> {a: d1, b: d1} -> ... : 2^40 paths if expanded naively.
    let mut defs = serde_json::Map::new();
    for i in 0..40 {
        defs.insert(
            format!("d{i}"),
            json!({"type": "object", "properties": {
                "a": {"$ref": format!("#/$defs/d{}", i + 1)},
                "b": {"$ref": format!("#/$defs/d{}", i + 1)}}}),
        );
    }
    defs.insert("d40".into(), json!({"type": "string"}));
    let root = json!({"$defs": defs, "$ref": "#/$defs/d0"});
    let start = std::time::Instant::now();
    let _ = lower(&root["$defs"]["d0"], &root);
    // Generous: a bounded walk takes milliseconds; the naive one would not finish.
    assert!(start.elapsed() < std::time::Duration::from_secs(20));
}

#[test]
fn an_attribute_of_a_filter_result_names_the_expression_as_written() {
    let (_, f) = expression("(docs | first).idd == 'x'", &vars());
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].code, Code::UnknownAttribute);
    assert!(
        f[0].message.contains("`(docs | first).idd`"),
        "{}",
        f[0].message
    );
}

/// `N` names each set in one branch of its own `{% if %}` (and read after it, W013),
/// then inside `{% for %}` and `{% with %}` blocks (E041 after them), nested `{% if %}`s
/// around it all: the frames' work is linear in `N` (copying the frame per branch and
/// joining whole frames made it quadratic, the joins cubic: N = 2000 took 88 s).
#[test]
fn scope_tracking_is_linear_in_the_sets() {
    let work = |n: usize| {
        let mut t = String::from("{% if q %}{% if n %}");
        for i in 0..n {
            t.push_str(&format!(
                "{{% if verdict %}}{{% set v{i} = {i} %}}{{% endif %}}"
            ));
            t.push_str(&format!(
                "{{% for d in docs %}}{{% set w{i} = 1 %}}{{% endfor %}}"
            ));
            t.push_str(&format!("{{% with %}}{{% set x{i} = 1 %}}{{% endwith %}}"));
        }
        for i in 0..n {
            t.push_str(&format!("{{{{ v{i} }}}}{{{{ w{i} }}}}"));
        }
        t.push_str("{% endif %}{% endif %}");
        super::scope::STEPS.with(|c| c.set(0));
        let findings = template(&t, &vars());
        let steps = super::scope::STEPS.with(std::cell::Cell::get);
        let maybe = findings
            .iter()
            .filter(|f| f.code == Code::MaybeUndefined)
            .count();
        let gone = findings
            .iter()
            .filter(|f| f.code == Code::TemplateUnknownVar)
            .count();
        assert_eq!((maybe, gone), (n, n), "every read is reported once");
        steps
    };
    let small = work(500);
    let large = work(5000);
    // Linear: 10x the sets, about 10x the steps (a quadratic walk makes it 100x).
    assert!(
        large <= small * 12,
        "scope work grew from {small} to {large} steps for 10x the sets"
    );
    assert!(large <= 5000 * 100, "{large} steps for 5000 sets");
}
