use super::*;
use crate::providers::Message;
use crate::spec::types::ModelSpec;
use serde_json::json;

fn model(v: Value) -> ModelSpec {
    serde_json::from_value(v).expect("model spec")
}

fn req(model: &ModelSpec) -> LlmRequest {
    LlmRequest {
        node: "grade".into(),
        item: None,
        model_name: "m".into(),
        model: Arc::new(model.clone()),
        task: Some("grade_documents".into()),
        inputs: json!({"question": "q", "document": {"id": "d", "content": "c"}})
            .as_object()
            .cloned()
            .unwrap_or_default(),
        messages: vec![
            Message {
                role: "system".into(),
                content: "be strict".into(),
            },
            Message {
                role: "user".into(),
                content: "is it relevant?".into(),
            },
        ],
        schema: Some(Arc::new(
            json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "number"}}}),
        )),
    }
}

fn key_of(m: &ModelSpec, r: &LlmRequest) -> RequestKey {
    KeyMaker::new(KeyConfig::from_model(m)).key(r)
}

fn base() -> Value {
    json!({"provider": "openai", "model": "gpt-4o-mini", "base_url": "http://127.0.0.1:1/v1",
           "api_key_env": "K", "temperature": 0.0, "max_tokens": 100,
           "structured_output": "tool_call", "params": {"top_p": 0.5, "seed": 1}})
}

#[test]
fn every_config_field_changes_the_key() {
    let m = model(base());
    let r = req(&m);
    let k = key_of(&m, &r);
    let changes = [
        ("provider", json!("anthropic")),
        ("model", json!("gpt-4o")),
        ("base_url", json!("http://127.0.0.1:2/v1")),
        ("temperature", json!(0.7)),
        ("max_tokens", json!(101)),
        ("structured_output", json!("json_schema")),
        ("params", json!({"top_p": 0.5, "seed": 2})),
        ("params", json!({"top_p": 0.5})),
    ];
    for (field, v) in changes {
        let mut b = base();
        b[field] = v.clone();
        let m2 = model(b);
        assert_ne!(key_of(&m2, &r), k, "{field} = {v} must change the key");
    }
}

#[test]
fn fields_that_do_not_change_answers_do_not_change_the_key() {
    let m = model(base());
    let r = req(&m);
    let k = key_of(&m, &r);
    for (field, v) in [
        ("api_key_env", json!("OTHER_KEY")),
        ("timeout_secs", json!(5)),
        ("retries", json!(4)),
        ("concurrency", json!(2)),
        ("requests_per_minute", json!(60)),
        (
            "price",
            json!({"input_per_mtok": 1.0, "output_per_mtok": 2.0}),
        ),
    ] {
        let mut b = base();
        b[field] = v;
        assert_eq!(key_of(&model(b), &r), k, "{field} must not change the key");
    }
    // The node, the item and the spec's name for the model do not either (network
    // providers answer from the messages).
    let mut r2 = r.clone();
    r2.node = "other".into();
    r2.item = Some(3);
    r2.model_name = "renamed".into();
    assert_eq!(key_of(&m, &r2), k);
    // Nor the inputs or task: they reach a network model only through the messages.
    r2.inputs.insert("extra".into(), json!(1));
    r2.task = None;
    assert_eq!(key_of(&m, &r2), k);
}

#[test]
fn every_request_field_changes_the_key() {
    let m = model(base());
    let r = req(&m);
    let k = key_of(&m, &r);
    let mut a = r.clone();
    a.messages[1].content.push('!');
    let mut b = r.clone();
    b.messages[0].role = "user".into();
    let mut c = r.clone();
    c.messages.push(Message {
        role: "assistant".into(),
        content: "{}".into(),
    });
    let mut d = r.clone();
    d.schema = None;
    let mut e = r.clone();
    e.schema = Some(Arc::new(json!({"type": "object"})));
    // Moving text between messages changes the key (no ambiguous concatenation).
    let mut f = r.clone();
    f.messages[0].content = "be strictis it relevant?".into();
    f.messages[1].content = String::new();
    for (what, x) in [
        ("content", a),
        ("role", b),
        ("repair turn", c),
        ("no schema", d),
        ("schema", e),
        ("split", f),
    ] {
        assert_ne!(key_of(&m, &x), k, "{what} must change the key");
    }
}

#[test]
fn object_key_order_does_not_change_the_key() {
    let m1 = model(
        json!({"provider": "openai", "model": "x", "params": {"a": 1, "b": {"c": 1, "d": 2}}}),
    );
    let m2 = model(
        json!({"provider": "openai", "model": "x", "params": {"b": {"d": 2, "c": 1}, "a": 1}}),
    );
    let r1 = req(&m1);
    let mut r2 = r1.clone();
    r2.schema = Some(Arc::new(
        json!({"properties": {"b": {"type": "number"}, "a": {"type": "string"}}, "type": "object"}),
    ));
    assert_eq!(key_of(&m1, &r1), key_of(&m2, &r2));
}

#[test]
fn offline_keys_hold_task_and_inputs_and_scripted_keys_hold_the_node() {
    let off = model(json!({"provider": "offline"}));
    let r = req(&off);
    let k = key_of(&off, &r);
    let mut a = r.clone();
    a.inputs.insert("question".into(), json!("other"));
    let mut b = r.clone();
    b.task = Some("rewrite_query".into());
    assert_ne!(key_of(&off, &a), k, "offline: inputs are in the key");
    assert_ne!(key_of(&off, &b), k, "offline: task is in the key");
    // Input object order does not matter.
    let mut c = r.clone();
    c.inputs = json!({"document": {"content": "c", "id": "d"}, "question": "q"})
        .as_object()
        .cloned()
        .unwrap_or_default();
    assert_eq!(key_of(&off, &c), k);

    let sc = model(json!({"provider": "scripted", "params": {"file": "f.json"}}));
    let r = req(&sc);
    let mut d = r.clone();
    d.node = "other".into();
    assert_ne!(
        key_of(&sc, &d),
        key_of(&sc, &r),
        "scripted: node is in the key"
    );
}

#[test]
fn negative_zero_temperature_is_zero_and_keys_are_stable() {
    let a = model(json!({"provider": "openai", "temperature": 0.0}));
    let b = model(json!({"provider": "openai", "temperature": -0.0}));
    let r = req(&a);
    assert_eq!(key_of(&a, &r), key_of(&b, &r));
    // Pinned: a change of the key layout must bump KEY_VERSION (old caches and
    // cassettes would silently stop matching otherwise).
    assert_eq!(
        key_of(&model(base()), &req(&model(base()))).short(),
        "d07a444d65da"
    );
}

#[test]
fn the_key_is_the_hash_of_the_documented_document() {
    let m = model(base());
    let r = req(&m);
    let doc = json!({
        "v": 1,
        "config": {"provider": "openai", "model": "gpt-4o-mini", "base_url": "http://127.0.0.1:1/v1",
                   "temperature": 0.0, "max_tokens": 100, "structured_output": "tool_call",
                   "params": {"seed": 1, "top_p": 0.5}},
        "messages": [{"role": "system", "content": "be strict"}, {"role": "user", "content": "is it relevant?"}],
        "schema": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "number"}}},
    });
    assert_eq!(key_of(&m, &r).0, blake3::hash(&canonical_bytes(&doc)));
    let off = model(json!({"provider": "offline", "params": {"relevance_threshold": 0.35}}));
    let r = req(&off);
    let doc = json!({
        "v": 1,
        "config": {"provider": "offline", "model": null, "base_url": null, "temperature": 0.0,
                   "max_tokens": null, "structured_output": null, "params": {"relevance_threshold": 0.35}},
        "messages": [{"role": "system", "content": "be strict"}, {"role": "user", "content": "is it relevant?"}],
        "schema": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "number"}}},
        "task": "grade_documents",
        "inputs": {"question": "q", "document": {"id": "d", "content": "c"}},
    });
    assert_eq!(key_of(&off, &r).0, blake3::hash(&canonical_bytes(&doc)));
}

#[test]
fn cache_round_trip_and_corrupt_entries() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = ResponseCache::at(dir.path().join("responses"));
    let m = model(base());
    let k = key_of(&m, &req(&m));
    assert!(cache.get(&k).is_none());
    let resp = LlmResponse {
        output: json!({"a": "x"}),
        usage: Usage {
            input_tokens: 10,
            output_tokens: 2,
            cost_usd: 0.5,
        },
        cached: false,
        usage_estimated: true,
        ..Default::default()
    };
    cache.put(&k, &resp).expect("put");
    let hit = cache.get(&k).expect("hit");
    assert!(hit.cached);
    assert_eq!(hit.output, resp.output);
    assert_eq!(hit.usage, resp.usage);
    assert!(hit.usage_estimated);
    // No temp file is left behind.
    let files: Vec<_> = std::fs::read_dir(cache.path(&k).parent().expect("dir"))
        .expect("ls")
        .collect();
    assert_eq!(files.len(), 1);
    // Torn, foreign and wrong-key entries are misses, then overwritten.
    for junk in [
        &b"{\"v\":1,\"key\":\"abc"[..],
        b"not json",
        b"{\"v\":1,\"key\":\"0000\",\"output\":1,\"usage\":{\"input_tokens\":0,\"output_tokens\":0,\"cost_usd\":0}}",
        b"{\"v\":99}",
    ] {
        std::fs::write(cache.path(&k), junk).expect("write junk");
        assert!(cache.get(&k).is_none());
        cache.put(&k, &resp).expect("put over junk");
        assert_eq!(cache.get(&k).expect("hit").output, resp.output);
    }
}

#[test]
fn cacheable_models() {
    assert!(cacheable(&model(json!({"provider": "openai"}))));
    assert!(cacheable(&model(
        json!({"provider": "anthropic", "temperature": 0})
    )));
    assert!(!cacheable(&model(
        json!({"provider": "openai", "temperature": 0.2})
    )));
    assert!(!cacheable(&model(json!({"provider": "offline"}))));
    assert!(!cacheable(&model(json!({"provider": "scripted"}))));
    assert!(!cacheable(&model(json!({"provider": "replay"}))));
    // The temperature sent, after the params merge, decides.
    let with = |params: Value| {
        cacheable(&model(
            json!({"provider": "anthropic", "temperature": 0, "params": params}),
        ))
    };
    assert!(!with(json!({"temperature": 0.7})));
    assert!(!with(json!({"temperature": null})));
    assert!(!with(json!({"temperature": "0"})));
    assert!(with(json!({"temperature": 0, "top_p": 0.5})));
    assert!(cacheable(&model(
        json!({"provider": "openai", "temperature": 0.9, "params": {"temperature": 0.0}})
    )));
}

#[test]
fn recorded_billed_failures_come_back_with_their_usage() {
    use crate::providers::cassette::RecordedError;
    use crate::providers::{Billed, ProviderError, Usage};
    let billed = Billed {
        usage: Usage {
            input_tokens: 900,
            output_tokens: 1024,
            cost_usd: 0.5,
        },
        usage_estimated: false,
        cached: true,
    };
    for kind in ["truncated", "unusable", "invalid_output"] {
        let e = RecordedError {
            kind: kind.into(),
            message: "cut".into(),
            reply: None,
        }
        .to_error(billed);
        assert_eq!(e.billed(), Some(&billed), "{kind}");
        assert!(!e.is_transient());
    }
    let e = RecordedError {
        kind: "permanent".into(),
        message: "x".into(),
        reply: None,
    }
    .to_error(billed);
    assert!(matches!(e, ProviderError::Permanent(_)) && e.billed().is_none());
}
