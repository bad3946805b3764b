//! `GET /openapi.json`: the API as an OpenAPI 3.1 document, written as data. A test
//! keeps it equal to the router's routes ([`super::routes`]).
use serde_json::{json, Value};

fn error_response(description: &str) -> Value {
    json!({"description": description, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}})
}

fn run_errors() -> Value {
    json!({
        "400": error_response("`malformed_json`: the body is not JSON"),
        "403": error_response("`model_overrides_disabled`: model overrides need --allow-model-overrides"),
        "404": error_response("`unknown_graph`, `unknown_variant`"),
        "413": error_response("`body_too_large`: above --max-body-bytes"),
        "422": error_response("`invalid_request` (unknown or mistyped field), `invalid_input` (no question, unknown state field, input against the state schema), `invalid_override`"),
        "429": error_response("`too_many_runs`: --max-runs in flight; `Retry-After: 1`"),
        "503": error_response("`shutting_down`, `resources_unavailable` (a missing API key, a corpus that does not open)"),
    })
}

fn with(mut base: Value, extra: Value) -> Value {
    if let (Some(b), Some(e)) = (base.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            b.insert(k.clone(), v.clone());
        }
    }
    base
}

fn sse_description() -> &'static str {
    "Server-Sent Events, each with an `id` (its position in the run's log, from 0), an `event` name and JSON `data`: `metadata` {run_id, graph, variant, generation}; per step `node_start` {step, node, kind}, `token` {node, text} for each text delta of a text `llm` node (one with the whole text when the answer did not stream), and `node_end` (the step's trace record: step, node, kind, start, duration_us, delta, route {to, arm, predicate}, llm usage, documents, items, error, retries); `error` {message, status} when the run ended with an error; `end` (the result as `ragloop run --json` gives it). Comments (`: keep-alive`) every 15 s."
}

fn thread_errors() -> Value {
    json!({
        "404": error_response("`unknown_thread` (and, for runs, `unknown_graph`, `unknown_variant`)"),
        "409": error_response("`thread_busy` (a run of it in flight, or a new run while its run is unfinished), `run_finished`, `nothing_to_resume`, `other_spec`, `spec_changed`"),
        "422": error_response("`bad_thread_id`, `unknown_node` (interrupt_before), `invalid_patch` (command.update against the state schema), `invalid_request`, `invalid_input`"),
        "503": error_response("`checkpoints_unavailable` (no store), `checkpoint_store` (the store failed)"),
    })
}

fn thread_run_body() -> Value {
    json!({"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ThreadRunRequest"}}}})
}

fn thread_param() -> Value {
    json!([{"name": "thread_id", "in": "path", "required": true, "schema": {"type": "string"}}])
}

/// The document.
pub fn document() -> Value {
    let run_body = json!({"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/RunRequest"}}}});
    let run_id =
        json!([{"name": "run_id", "in": "path", "required": true, "schema": {"type": "string"}}]);
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "ragloop serve",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Runs ragloop graphs over HTTP, shaped like LangGraph Server's API where it fits. Every error is `{\"error\": {\"code\", \"message\"}}`; a run that fails is a 200 with its status (docs/serve.md)."
        },
        "paths": with(json!({
            "/runs/wait": {"post": {
                "summary": "Run a graph and wait for its result",
                "description": "A client that disconnects cancels its run. The run id is in the `x-ragloop-run-id` header.",
                "requestBody": run_body,
                "responses": with(json!({"200": {"description": "The run ended (any status: generated, exhausted, fallback, limit, failed, interrupted)", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/RunResult"}}}}}), run_errors()),
            }},
            "/runs/stream": {"post": {
                "summary": "Run a graph and stream its events",
                "description": "The run goes on when the client disconnects (resume with GET /runs/{run_id}/stream and Last-Event-ID) unless `on_disconnect` is `cancel`.",
                "requestBody": run_body,
                "responses": with(json!({"200": {"description": sse_description(), "content": {"text/event-stream": {"schema": {"type": "string"}}}}}), run_errors()),
            }},
            "/runs/{run_id}": {"get": {
                "summary": "A run's status and, once ended, its result",
                "parameters": run_id,
                "responses": {
                    "200": {"description": "The run", "content": {"application/json": {"schema": {"type": "object", "properties": {
                        "run_id": {"type": "string"}, "graph": {"type": "string"},
                        "status": {"type": "string", "description": "`running`, or the terminal status"},
                        "events": {"type": "integer"},
                        "result": {"oneOf": [{"$ref": "#/components/schemas/RunResult"}, {"type": "null"}]}}}}}},
                    "404": error_response("`unknown_run`: never started here, or no longer kept"),
                },
            }},
            "/runs/{run_id}/stream": {"get": {
                "summary": "Resume (or replay) a run's event stream",
                "description": "Sends the events after the one named by `Last-Event-ID` (all without the header), then the live ones until the run ends. Finished runs are kept for --keep-runs runs / --keep-secs seconds.",
                "parameters": [
                    {"name": "run_id", "in": "path", "required": true, "schema": {"type": "string"}},
                    {"name": "Last-Event-ID", "in": "header", "required": false, "schema": {"type": "string", "pattern": "^[0-9]+$"}},
                ],
                "responses": {
                    "200": {"description": sse_description(), "content": {"text/event-stream": {"schema": {"type": "string"}}}},
                    "400": error_response("`invalid_last_event_id`"),
                    "404": error_response("`unknown_run`"),
                },
            }},
            "/graphs": {"get": {
                "summary": "Every spec file: served or not, with the last compile failure",
                "responses": {"200": {"description": "The graphs", "content": {"application/json": {"schema": {"type": "object", "properties": {"graphs": {"type": "array", "items": {"$ref": "#/components/schemas/GraphEntry"}}, "conflicts": {"type": "array", "description": "spec files found after start whose file stem a served spec already has: not served", "items": {"type": "object", "properties": {"name": {"type": "string"}, "path": {"type": "string"}, "served_from": {"type": ["string", "null"]}}}}}}}}}},
            }},
            "/graphs/{name}": {"get": {
                "summary": "One graph: spec summary, warnings, Mermaid, last failure",
                "parameters": [{"name": "name", "in": "path", "required": true, "schema": {"type": "string"}}],
                "responses": {
                    "200": {"description": "The graph", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/GraphEntry"}}}},
                    "404": error_response("`unknown_graph`"),
                },
            }},
            "/healthz": {"get": {
                "summary": "Liveness: 200 while serving, 503 once shutting down",
                "responses": {
                    "200": {"description": "Serving", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Health"}}}},
                    "503": {"description": "Shutting down", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Health"}}}},
                },
            }},
            "/metrics": {"get": {
                "summary": "Prometheus text exposition (0.0.4)",
                "responses": {"200": {"description": "Runs by graph and status, run and step latency histograms, LLM calls, tokens and cost by model, runs in flight, queue depth (always 0: no queue), rejected runs, reloads", "content": {"text/plain": {"schema": {"type": "string"}}}}},
            }},
            "/openapi.json": {"get": {
                "summary": "This document",
                "responses": {"200": {"description": "OpenAPI 3.1", "content": {"application/json": {"schema": {"type": "object"}}}}},
            }},
        }), thread_paths()),
        "components": {"schemas": with(json!({
            "Error": {"type": "object", "required": ["error"], "properties": {"error": {"type": "object", "required": ["code", "message"], "properties": {
                "code": {"type": "string"}, "message": {"type": "string"}}}}},
            "RunRequest": {"type": "object", "additionalProperties": false, "properties": {
                "graph": {"type": "string", "description": "The graph: its spec file's stem"},
                "assistant_id": {"type": "string", "description": "LangGraph's name for `graph`"},
                "input": {"oneOf": [
                    {"type": "string", "description": "The question"},
                    {"type": "object", "required": ["question"], "properties": {"question": {"type": "string"}}, "additionalProperties": true, "description": "The question and other state fields (as `ragloop run --set`), checked against the state schema"},
                ]},
                "variant": {"type": "string"},
                "config": {"type": "object", "additionalProperties": false, "properties": {"configurable": {"type": "object", "additionalProperties": false, "properties": {
                    "variant": {"type": "string"},
                    "models": {"type": "array", "items": {"type": "string"}, "description": "NAME=PROVIDER[:MODEL][@BASE_URL] (as `ragloop run --model`); only with --allow-model-overrides"}}}}},
                "on_disconnect": {"enum": ["continue", "cancel"], "description": "`/runs/stream` only: what a client disconnect does to the run (default continue)"},
                "stream_mode": {"description": "Accepted and ignored (LangGraph compatibility): every stream carries every event"},
                "metadata": {"description": "Accepted and ignored"},
            }},
            "RunResult": {"type": "object", "description": "As `ragloop run --json` prints it", "properties": {
                "status": {"enum": ["generated", "exhausted", "fallback", "limit", "failed", "interrupted"]},
                "answer": {"type": ["string", "null"]},
                "sources": {"type": "array", "items": {"type": "string"}},
                "path": {"type": "array", "items": {"type": "string"}},
                "iterations": {"type": "integer"},
                "steps": {"type": "integer"},
                "state": {"type": "object"},
                "usage": {"type": "object", "properties": {
                    "calls": {"type": "integer"}, "cached_calls": {"type": "integer"},
                    "input_tokens": {"type": "integer"}, "output_tokens": {"type": "integer"},
                    "cost_usd": {"type": "number"}, "saved_usd": {"type": "number"}, "estimated": {"type": "boolean"}}},
                "error": {"type": ["string", "null"]},
                "variant": {"type": "string"},
            }},
            "GraphEntry": {"type": "object", "properties": {
                "name": {"type": "string"}, "path": {"type": "string"}, "served": {"type": "boolean"},
                "spec_name": {"type": "string"}, "description": {"type": ["string", "null"]},
                "generation": {"type": "integer"}, "loaded_at": {"type": "integer", "description": "unix ms"},
                "variants": {"type": "array", "items": {"type": "string"}},
                "entry": {"type": "string"}, "nodes": {"type": "array"}, "models": {"type": "object"},
                "retrievers": {"type": "array"}, "tools": {"type": "array"}, "initial_state": {"type": "array"},
                "max_steps": {"type": "integer"}, "warnings": {"type": "array"}, "mermaid": {"type": "string"},
                "error": {"oneOf": [{"type": "null"}, {"type": "object", "properties": {
                    "at": {"type": "integer"}, "message": {"type": "string"}, "diagnostics": {"type": "array"}}}],
                    "description": "The last compile failure (the previous version, if any, stays served)"},
            }},
            "Health": {"type": "object", "properties": {
                "status": {"enum": ["ok", "shutting_down"]},
                "graphs": {"type": "object", "properties": {"served": {"type": "integer"}, "invalid": {"type": "integer"}}},
                "runs_in_flight": {"type": "integer"}, "max_runs": {"type": "integer"}}},
        }), thread_schemas())},
    })
}

fn thread_paths() -> Value {
    json!({
            "/threads": {"post": {
                "summary": "Create a thread",
                "description": "`thread_id` given (1 to 256 characters without control characters) or a fresh UUID. `metadata` is accepted and not stored.",
                "requestBody": {"required": false, "content": {"application/json": {"schema": {"type": "object", "additionalProperties": false, "properties": {
                    "thread_id": {"type": "string"}, "metadata": {"type": "object"},
                    "if_exists": {"enum": ["raise", "do_nothing"], "description": "An existing thread: 409 `thread_exists` (raise, default) or 200 with it"}}}}}},
                "responses": with(json!({
                    "201": {"description": "Created", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Thread"}}}},
                    "200": {"description": "It existed (`if_exists: do_nothing`)", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Thread"}}}},
                    "409": error_response("`thread_exists`"),
                }), thread_errors()),
            }},
            "/threads/{thread_id}": {"get": {
                "summary": "A thread: status and latest run",
                "parameters": thread_param(),
                "responses": with(json!({"200": {"description": "The thread", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Thread"}}}}}), thread_errors()),
            }},
            "/threads/{thread_id}/runs/wait": {"post": {
                "summary": "Run on a thread (or resume its run) and wait for the result",
                "description": "A new run (`input`), or with `command` a resume of the thread's latest run (interrupted, paused, failed, or running when its server died) from its last checkpoint, after `command.update` is written into the state. One run per thread at a time: 409 `thread_busy`, not queued.",
                "parameters": thread_param(),
                "requestBody": thread_run_body(),
                "responses": with(with(json!({"200": {"description": "The run ended; the result has `thread`, `run` and, when paused, `paused_before` (status `interrupted`)", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/RunResult"}}}}}), run_errors()), thread_errors()),
            }},
            "/threads/{thread_id}/runs/stream": {"post": {
                "summary": "Run on a thread (or resume its run) and stream its events",
                "parameters": thread_param(),
                "requestBody": thread_run_body(),
                "responses": with(with(json!({"200": {"description": sse_description(), "content": {"text/event-stream": {"schema": {"type": "string"}}}}}), run_errors()), thread_errors()),
            }},
            "/threads/{thread_id}/state": {"get": {
                "summary": "The thread's latest checkpoint",
                "parameters": thread_param(),
                "responses": with(json!({"200": {"description": "The latest checkpoint of the latest run (`values` {} and `checkpoint` null when none)", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ThreadState"}}}}}), thread_errors()),
            }},
            "/threads/{thread_id}/history": {"get": {
                "summary": "The thread's checkpoints, newest first",
                "parameters": [
                    {"name": "thread_id", "in": "path", "required": true, "schema": {"type": "string"}},
                    {"name": "limit", "in": "query", "required": false, "schema": {"type": "integer", "minimum": 1, "default": 10}},
                ],
                "responses": with(json!({
                    "200": {"description": "Newest first, at most `limit`", "content": {"application/json": {"schema": {"type": "array", "items": {"$ref": "#/components/schemas/ThreadState"}}}}},
                    "422": error_response("`invalid_request` (a bad `limit`, an unknown parameter), `bad_thread_id`"),
                }), thread_errors()),
            }},
    })
}

fn thread_schemas() -> Value {
    json!({
            "ThreadRunRequest": {"type": "object", "description": "A RunRequest plus `command`, `interrupt_before` and `if_not_exists` (those three only on thread routes)", "properties": {
                "graph": {"type": "string"}, "assistant_id": {"type": "string"},
                "input": {"description": "As RunRequest's; none with `command`"},
                "variant": {"type": "string", "description": "On a resume, default: the thread's"},
                "config": {"type": "object"}, "on_disconnect": {"enum": ["continue", "cancel"]},
                "stream_mode": {}, "metadata": {},
                "command": {"type": "object", "additionalProperties": false, "properties": {
                    "resume": {"description": "Any value but false/null: resume the thread's latest run"},
                    "update": {"type": "object", "description": "State fields written before the run goes on, checked against the state schema (422 `invalid_patch`)"}}},
                "interrupt_before": {"type": "array", "items": {"type": "string"}, "description": "Nodes to pause before in this run, besides the spec's"},
                "if_not_exists": {"enum": ["reject", "create"], "description": "A new run on an unknown thread: 404 (reject, default) or create it"},
            }},
            "Thread": {"type": "object", "properties": {
                "thread_id": {"type": "string"}, "created_at": {"type": "string", "format": "date-time"},
                "updated_at": {"type": "string", "format": "date-time"}, "metadata": {"type": "object"},
                "status": {"enum": ["idle", "busy", "interrupted", "error"], "description": "busy: a run in flight here; interrupted: paused, cancelled or its server died (resume it); error: failed"},
                "run": {"description": "The latest run: run, status (running or the terminal status), paused_before, error, spec {name, variant}, started_at, updated_at"}}},
            "ThreadState": {"type": "object", "properties": {
                "values": {"type": "object", "description": "The state"},
                "next": {"type": "array", "items": {"type": "string"}, "description": "The node to run next ([] at END)"},
                "step": {"type": "integer"},
                "checkpoint": {"type": ["object", "null"], "properties": {"thread_id": {"type": "string"}, "checkpoint_id": {"type": "string"}}},
                "metadata": {"type": ["object", "null"], "properties": {"source": {"enum": ["input", "loop", "update"]}, "step": {"type": "integer"}, "run": {"type": "integer"}}},
                "created_at": {"type": ["string", "null"]}, "run": {"type": ["integer", "null"]},
                "status": {"type": ["string", "null"], "description": "The run's status now: running or the terminal status"},
                "paused_before": {"type": ["string", "null"]},
                "path": {"type": "array"}, "iterations": {"type": "integer"}, "usage": {}}},
    })
}
