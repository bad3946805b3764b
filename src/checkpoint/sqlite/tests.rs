use super::*;
use serde_json::json;

fn spec() -> SpecId {
    SpecId {
        name: "s".into(),
        variant: None,
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
fn a_fresh_database_is_at_the_current_version_in_wal_mode() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sub/dir/t.sqlite3");
    let store = SqliteCheckpointer::open(&path).unwrap();
    assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
    let mode: String = store
        .lock()
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    // Opening again applies nothing and keeps the version.
    drop(store);
    let again = SqliteCheckpointer::open(&path).unwrap();
    assert_eq!(again.schema_version().unwrap(), SCHEMA_VERSION);
}

#[test]
fn a_version_1_database_is_upgraded_and_keeps_its_rows() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.sqlite3");
    {
        // A database as version 1 wrote it, with a thread, a run and a checkpoint.
        let old = SqliteCheckpointer::open_at_version(&path, 1).unwrap();
        assert_eq!(old.schema_version().unwrap(), 1);
        let conn = old.lock();
        conn.execute_batch(&format!(
            "INSERT INTO threads VALUES ('t', 1);
             INSERT INTO runs VALUES ('t', 1, 's', NULL, '{}', 'interrupted', 'signal', 1, 2);
             INSERT INTO checkpoints (thread_id, run, step, next_node, snapshot, created_ms)
             VALUES ('t', 1, 2, 'a', '{}', 3);",
            "f".repeat(64),
            serde_json::to_string(&snap(2, Some("a"))).unwrap()
        ))
        .unwrap();
        // Version 1 has no `paused_before` column yet.
        assert!(conn.prepare("SELECT paused_before FROM runs").is_err());
    }
    let store = SqliteCheckpointer::open(&path).unwrap();
    assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
    let latest = store.latest("t").unwrap().expect("the old checkpoint");
    assert_eq!(latest.snapshot, snap(2, Some("a")));
    assert_eq!(latest.source, Source::Loop);
    assert_eq!(latest.run.status.status, Some(Status::Interrupted));
    assert_eq!(latest.run.status.error.as_deref(), Some("signal"));
    assert_eq!(latest.run.status.paused_before, None);
    // And the upgraded database takes new writes.
    store
        .put("t", 1, Source::Update, &snap(2, Some("a")))
        .unwrap();
    assert_eq!(store.history("t").unwrap().len(), 2);
}

#[test]
fn a_database_of_a_newer_version_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new.sqlite3");
    drop(SqliteCheckpointer::open(&path).unwrap());
    {
        let conn = Connection::open(&path).unwrap();
        conn.execute(
            "UPDATE schema_version SET version = ?1",
            [SCHEMA_VERSION + 1],
        )
        .unwrap();
    }
    let err = SqliteCheckpointer::open(&path).unwrap_err();
    assert!(matches!(err, CheckpointError::TooNew { found, .. } if found == SCHEMA_VERSION + 1));
    let msg = err.to_string();
    assert!(msg.contains("newer than this ragloop's"), "{msg}");
    assert!(msg.contains(&path.display().to_string()), "{msg}");
    let conn = Connection::open(&path).unwrap();
    let v: i64 = conn
        .query_row("SELECT version FROM schema_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(v, SCHEMA_VERSION + 1);
}

#[test]
fn runs_checkpoints_and_statuses_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteCheckpointer::open(&dir.path().join("c.sqlite3")).unwrap();
    assert!(store.thread("t").unwrap().is_none());
    assert!(store.latest("t").unwrap().is_none());
    assert!(store.history("t").unwrap().is_empty());
    assert!(store.create_thread("t").unwrap());
    assert!(!store.create_thread("t").unwrap());
    let info = store.thread("t").unwrap().unwrap();
    assert!(info.latest.is_none());

    assert_eq!(store.begin_run("t", &spec()).unwrap(), 1);
    store
        .put("t", 1, Source::Input, &snap(0, Some("a")))
        .unwrap();
    store
        .put("t", 1, Source::Loop, &snap(1, Some("a")))
        .unwrap();
    let latest = store.latest("t").unwrap().unwrap();
    assert_eq!(latest.snapshot.step, 1);
    assert_eq!(latest.run.status, RunStatus::default());
    assert_eq!(latest.run.spec, spec());
    let paused = RunStatus {
        status: Some(Status::Interrupted),
        error: Some("paused".into()),
        paused_before: Some("a".into()),
    };
    store.set_status("t", 1, &paused).unwrap();
    assert_eq!(
        store.thread("t").unwrap().unwrap().latest.unwrap().status,
        paused
    );
    // A put marks the run running again.
    store.put("t", 1, Source::Loop, &snap(2, None)).unwrap();
    assert_eq!(
        store.thread("t").unwrap().unwrap().latest.unwrap().status,
        RunStatus::default()
    );
    let done = RunStatus {
        status: Some(Status::Generated),
        ..RunStatus::default()
    };
    store.set_status("t", 1, &done).unwrap();

    // A second run on the thread appends to its history.
    assert_eq!(store.begin_run("t", &spec()).unwrap(), 2);
    store
        .put("t", 2, Source::Input, &snap(0, Some("a")))
        .unwrap();
    let history = store.history("t").unwrap();
    let seen: Vec<(u32, u32, Source)> = history
        .iter()
        .map(|c| (c.run.run, c.snapshot.step, c.source))
        .collect();
    assert_eq!(
        seen,
        [
            (1, 0, Source::Input),
            (1, 1, Source::Loop),
            (1, 2, Source::Loop),
            (2, 0, Source::Input)
        ]
    );
    assert!(history.windows(2).all(|w| w[0].seq < w[1].seq));
    assert_eq!(history[2].run.status, done);
    assert_eq!(store.latest("t").unwrap().unwrap().run.run, 2);
    // Threads do not see each other.
    assert!(store.history("u").unwrap().is_empty());
}

#[test]
fn writes_to_a_run_never_begun_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteCheckpointer::open(&dir.path().join("c.sqlite3")).unwrap();
    let err = store.put("t", 1, Source::Loop, &snap(1, None)).unwrap_err();
    assert!(
        matches!(err, CheckpointError::NoRun { run: 1, .. }),
        "{err}"
    );
    assert!(store.history("t").unwrap().is_empty());
    let err = store.set_status("t", 3, &RunStatus::default()).unwrap_err();
    assert!(
        matches!(err, CheckpointError::NoRun { run: 3, .. }),
        "{err}"
    );
}

#[test]
fn a_damaged_row_is_an_error_naming_the_thread() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteCheckpointer::open(&dir.path().join("c.sqlite3")).unwrap();
    store.begin_run("t", &spec()).unwrap();
    store
        .lock()
        .execute(
            "INSERT INTO checkpoints (thread_id, run, step, snapshot, created_ms) VALUES ('t', 1, 1, 'not json', 0)",
            [],
        )
        .unwrap();
    let err = store.latest("t").unwrap_err();
    assert!(matches!(err, CheckpointError::Corrupt { .. }), "{err}");
    assert!(err.to_string().contains("thread `t`"), "{err}");
}

#[test]
fn two_stores_on_one_file_see_each_others_writes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.sqlite3");
    let a = SqliteCheckpointer::open(&path).unwrap();
    let b = SqliteCheckpointer::open(&path).unwrap();
    a.begin_run("t", &spec()).unwrap();
    a.put("t", 1, Source::Input, &snap(0, Some("a"))).unwrap();
    assert_eq!(b.latest("t").unwrap().unwrap().snapshot, snap(0, Some("a")));
    assert_eq!(b.begin_run("t", &spec()).unwrap(), 2);
}
