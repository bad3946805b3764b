//! The PostgreSQL checkpointer against a real server (Debian's `postgresql`):
//! `RAGLOOP_POSTGRES_URL` names a database the tests may create databases from
//! (e.g. `postgres://postgres@127.0.0.1:5432/postgres`); each test works in a fresh
//! database of its own and drops it. Skipped with a note when the variable is unset,
//! required when `RAGLOOP_REQUIRE_POSTGRES=1`.
use ragloop::checkpoint::postgres::{PostgresCheckpointer, SCHEMA_VERSION};
use ragloop::checkpoint::{CheckpointError, Checkpointer, RunStatus, Source, SpecId};
use ragloop::runtime::{Snapshot, Status};
use serde_json::json;

/// A fresh database on the server: its URL, dropped when the guard goes.
pub struct Db {
    admin: String,
    name: String,
    pub url: String,
}

impl Drop for Db {
    fn drop(&mut self) {
        if let Ok(mut c) = postgres::Client::connect(&self.admin, postgres::NoTls) {
            let _ = c.batch_execute(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ));
        }
    }
}

/// `None` (with a note) when no server is configured.
pub fn fresh_db(test: &str) -> Option<Db> {
    let Some(admin) = std::env::var("RAGLOOP_POSTGRES_URL")
        .ok()
        .filter(|v| !v.is_empty())
    else {
        assert!(
            std::env::var("RAGLOOP_REQUIRE_POSTGRES").as_deref() != Ok("1"),
            "RAGLOOP_REQUIRE_POSTGRES=1 but RAGLOOP_POSTGRES_URL is unset"
        );
        eprintln!("note: {test}: skipped (set RAGLOOP_POSTGRES_URL to a PostgreSQL server)");
        return None;
    };
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let name = format!(
        "ragloop_t{}_{}_{}",
        std::process::id(),
        ragloop::clock::unix_ms(),
        N.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
    );
    let mut c = postgres::Client::connect(&admin, postgres::NoTls)
        .expect("connect to RAGLOOP_POSTGRES_URL");
    c.batch_execute(&format!("CREATE DATABASE {name}"))
        .expect("create database");
    let base = admin.rsplit_once('/').map_or(admin.as_str(), |(b, _)| b);
    let url = format!("{base}/{name}");
    Some(Db { admin, name, url })
}

fn spec() -> SpecId {
    SpecId {
        name: "s".into(),
        variant: Some("v".into()),
        fingerprint: "f".repeat(64),
    }
}

fn snap(step: u32, next: Option<&str>) -> Snapshot {
    Snapshot {
        state: json!({"question": "q", "n": step}),
        next: next.map(str::to_string),
        step,
        visits: [("a".to_string(), step)].into_iter().collect(),
        iterations: 1,
        path: vec!["a".to_string(); step as usize],
        usage: Default::default(),
        last: (step > 0).then(|| "a".to_string()),
    }
}

#[test]
fn the_postgres_store_keeps_runs_checkpoints_and_statuses() {
    let Some(db) = fresh_db("the_postgres_store_keeps_runs_checkpoints_and_statuses") else {
        return;
    };
    let store = PostgresCheckpointer::open(&db.url).unwrap();
    assert!(store.thread("t").unwrap().is_none());
    assert!(store.create_thread("t").unwrap());
    assert!(!store.create_thread("t").unwrap());
    assert_eq!(store.begin_run("t", &spec()).unwrap(), 1);
    store
        .put("t", 1, Source::Input, &snap(0, Some("a")))
        .unwrap();
    store
        .put("t", 1, Source::Loop, &snap(1, Some("a")))
        .unwrap();
    let paused = RunStatus {
        status: Some(Status::Interrupted),
        error: Some("paused".into()),
        paused_before: Some("a".into()),
    };
    store.set_status("t", 1, &paused).unwrap();
    let latest = store.latest("t").unwrap().unwrap();
    assert_eq!(latest.snapshot, snap(1, Some("a")));
    assert_eq!(latest.run.status, paused);
    assert_eq!(latest.run.spec, spec());
    assert_eq!(store.begin_run("t", &spec()).unwrap(), 2);
    store.put("t", 2, Source::Update, &snap(0, None)).unwrap();
    let seen: Vec<(u32, u32, Source)> = store
        .history("t")
        .unwrap()
        .iter()
        .map(|c| (c.run.run, c.snapshot.step, c.source))
        .collect();
    assert_eq!(
        seen,
        [
            (1, 0, Source::Input),
            (1, 1, Source::Loop),
            (2, 0, Source::Update)
        ]
    );
    let err = store.put("t", 9, Source::Loop, &snap(1, None)).unwrap_err();
    assert!(
        matches!(err, CheckpointError::NoRun { run: 9, .. }),
        "{err}"
    );
    // A second connection sees the same rows; opening again migrates nothing.
    let again = PostgresCheckpointer::open(&db.url).unwrap();
    assert_eq!(again.history("t").unwrap().len(), 3);
}

#[test]
fn a_postgres_database_of_a_newer_version_is_refused() {
    let Some(db) = fresh_db("a_postgres_database_of_a_newer_version_is_refused") else {
        return;
    };
    drop(PostgresCheckpointer::open(&db.url).unwrap());
    let mut c = postgres::Client::connect(&db.url, postgres::NoTls).unwrap();
    c.execute(
        "UPDATE schema_version SET version = $1",
        &[&(SCHEMA_VERSION + 1)],
    )
    .unwrap();
    let err = PostgresCheckpointer::open(&db.url).unwrap_err();
    assert!(matches!(err, CheckpointError::TooNew { .. }), "{err}");
    assert!(
        err.to_string().contains("newer than this ragloop's"),
        "{err}"
    );
}

#[test]
fn an_unreachable_server_is_a_store_error_without_the_password() {
    // Port 1 on 127.0.0.1: nothing listens (no server needed for this one).
    let err = PostgresCheckpointer::open("postgres://u:hunter2@127.0.0.1:1/db").unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, CheckpointError::Store { .. }), "{msg}");
    assert!(!msg.contains("hunter2"), "{msg}");
    assert!(msg.contains("postgres://u:***@127.0.0.1:1/db"), "{msg}");
}
