//! The SQLite [`Checkpointer`]: one embedded database file (rusqlite, SQLite
//! bundled), WAL journal, `synchronous = NORMAL` (a committed checkpoint survives
//! the process being killed; a power loss may drop the last ones), a 5 s busy
//! timeout between processes.
//!
//! Schema versions are the [`MIGRATIONS`] list: version N is the first N applied,
//! recorded in `schema_version`. Opening a database applies the missing ones, each
//! in its own transaction; a database whose version is higher than this build's is
//! refused ([`CheckpointError::TooNew`]) and left untouched.
use super::{
    Checkpoint, CheckpointError, Checkpointer, RunInfo, RunStatus, Source, SpecId, ThreadInfo,
};
use crate::runtime::{Snapshot, Status};
use rusqlite::{params, Connection, OptionalExtension};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The schema, one entry per version (index 0 is version 1). Never edit an entry
/// once released: add one.
pub const MIGRATIONS: &[&str] = &[
    // 1: threads, their runs, and one row per checkpoint.
    "CREATE TABLE threads (
        thread_id TEXT PRIMARY KEY,
        created_ms INTEGER NOT NULL
    );
    CREATE TABLE runs (
        thread_id TEXT NOT NULL REFERENCES threads(thread_id),
        run INTEGER NOT NULL,
        spec_name TEXT NOT NULL,
        variant TEXT,
        fingerprint TEXT NOT NULL,
        status TEXT NOT NULL,
        error TEXT,
        started_ms INTEGER NOT NULL,
        updated_ms INTEGER NOT NULL,
        PRIMARY KEY (thread_id, run)
    );
    CREATE TABLE checkpoints (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        thread_id TEXT NOT NULL,
        run INTEGER NOT NULL,
        step INTEGER NOT NULL,
        next_node TEXT,
        snapshot TEXT NOT NULL,
        created_ms INTEGER NOT NULL,
        FOREIGN KEY (thread_id, run) REFERENCES runs(thread_id, run)
    );
    CREATE INDEX checkpoints_by_thread ON checkpoints(thread_id, seq);",
    // 2: interrupts: the node a paused run waits before, and what wrote each
    // checkpoint (patches on resume are checkpoints of their own).
    "ALTER TABLE runs ADD COLUMN paused_before TEXT;
    ALTER TABLE checkpoints ADD COLUMN source TEXT NOT NULL DEFAULT 'loop';",
];

/// The schema version this build writes: `MIGRATIONS.len()`.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// A checkpoint store in one SQLite file. Shared between tasks: calls are
/// serialized on one connection.
pub struct SqliteCheckpointer {
    path: PathBuf,
    conn: Mutex<Connection>,
}

impl std::fmt::Debug for SqliteCheckpointer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SqliteCheckpointer({})", self.path.display())
    }
}

fn version_of(conn: &Connection) -> rusqlite::Result<i64> {
    let has: bool = conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'",
        [],
        |r| r.get::<_, i64>(0).map(|n| n > 0),
    )?;
    if !has {
        return Ok(0);
    }
    Ok(conn
        .query_row("SELECT max(version) FROM schema_version", [], |r| {
            r.get::<_, Option<i64>>(0)
        })?
        .unwrap_or(0))
}

/// Brings `conn` to version `upto` (at most [`SCHEMA_VERSION`]), each migration in a
/// transaction with its `schema_version` row. Returns the version found.
fn migrate(conn: &mut Connection, upto: i64, path: &str) -> Result<i64, CheckpointError> {
    let store = |e: rusqlite::Error| CheckpointError::Store {
        path: path.to_string(),
        message: e.to_string(),
    };
    conn.execute_batch("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        .map_err(store)?;
    let found = version_of(conn).map_err(store)?;
    if found > SCHEMA_VERSION {
        return Err(CheckpointError::TooNew {
            path: path.to_string(),
            found,
            supported: SCHEMA_VERSION,
        });
    }
    for v in found..upto.min(SCHEMA_VERSION) {
        let tx = conn.transaction().map_err(store)?;
        tx.execute_batch(MIGRATIONS[v as usize])
            .map_err(|e| CheckpointError::Store {
                path: path.to_string(),
                message: format!("migration to schema version {}: {e}", v + 1),
            })?;
        tx.execute("DELETE FROM schema_version", [])
            .map_err(store)?;
        tx.execute("INSERT INTO schema_version (version) VALUES (?1)", [v + 1])
            .map_err(store)?;
        tx.commit().map_err(store)?;
    }
    Ok(found)
}

impl SqliteCheckpointer {
    /// Opens (creating the file and its directory when absent) and migrates the
    /// database at `path` to [`SCHEMA_VERSION`].
    ///
    /// # Errors
    /// [`CheckpointError::Store`] when it cannot be created, opened or migrated;
    /// [`CheckpointError::TooNew`] for a database of a newer ragloop.
    pub fn open(path: &Path) -> Result<SqliteCheckpointer, CheckpointError> {
        Self::open_at_version(path, SCHEMA_VERSION)
    }

    /// Opens the database migrated to `version` only (tests of migrations build
    /// old databases with it).
    ///
    /// # Errors
    /// As [`SqliteCheckpointer::open`].
    #[doc(hidden)]
    pub fn open_at_version(
        path: &Path,
        version: i64,
    ) -> Result<SqliteCheckpointer, CheckpointError> {
        let shown = path.display().to_string();
        let store = |e: &dyn std::fmt::Display| CheckpointError::Store {
            path: shown.clone(),
            message: e.to_string(),
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| store(&format!("cannot create {}: {e}", dir.display())))?;
        }
        let mut conn = Connection::open(path).map_err(|e| store(&e))?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(|e| store(&e))?;
        // WAL: a reader never blocks the writer; NORMAL: one fsync per checkpoint
        // of the WAL, not per commit (durable across a killed process).
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(|e| store(&e))?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(|e| store(&e))?;
        conn.pragma_update(None, "foreign_keys", "ON")
            .map_err(|e| store(&e))?;
        migrate(&mut conn, version, &shown)?;
        Ok(SqliteCheckpointer {
            path: path.to_path_buf(),
            conn: Mutex::new(conn),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The schema version of the open database.
    ///
    /// # Errors
    /// [`CheckpointError::Store`].
    pub fn schema_version(&self) -> Result<i64, CheckpointError> {
        let conn = self.lock();
        version_of(&conn).map_err(|e| self.store(e))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Connection> {
        // A panic while holding the lock leaves the connection usable.
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn store(&self, e: impl std::fmt::Display) -> CheckpointError {
        CheckpointError::Store {
            path: self.path.display().to_string(),
            message: e.to_string(),
        }
    }

    fn corrupt(&self, thread: &str, message: impl std::fmt::Display) -> CheckpointError {
        CheckpointError::Corrupt {
            path: self.path.display().to_string(),
            thread: thread.to_string(),
            message: message.to_string(),
        }
    }

    /// The runs of a thread, by number.
    fn runs(&self, conn: &Connection, thread: &str) -> Result<Vec<RunInfo>, CheckpointError> {
        let mut stmt = conn
            .prepare_cached(
                "SELECT run, spec_name, variant, fingerprint, status, error, paused_before,
                        started_ms, updated_ms
                 FROM runs WHERE thread_id = ?1 ORDER BY run",
            )
            .map_err(|e| self.store(e))?;
        let rows = stmt
            .query_map([thread], |r| {
                Ok((
                    r.get::<_, u32>(0)?,
                    SpecId {
                        name: r.get(1)?,
                        variant: r.get(2)?,
                        fingerprint: r.get(3)?,
                    },
                    r.get::<_, String>(4)?,
                    r.get::<_, Option<String>>(5)?,
                    r.get::<_, Option<String>>(6)?,
                    r.get::<_, i64>(7)?,
                    r.get::<_, i64>(8)?,
                ))
            })
            .map_err(|e| self.store(e))?;
        let mut out = Vec::new();
        for row in rows {
            let (run, spec, status, error, paused_before, started, updated) =
                row.map_err(|e| self.store(e))?;
            let status = match status.as_str() {
                "running" => None,
                s => Some(
                    serde_json::from_value::<Status>(serde_json::Value::String(s.into())).map_err(
                        |_| self.corrupt(thread, format!("run {run}: unknown status `{s}`")),
                    )?,
                ),
            };
            out.push(RunInfo {
                run,
                spec,
                status: RunStatus {
                    status,
                    error,
                    paused_before,
                },
                started_ms: started.max(0) as u64,
                updated_ms: updated.max(0) as u64,
            });
        }
        Ok(out)
    }

    /// Checkpoints of a thread, oldest first, from `seq` (the latest only when
    /// `latest`).
    fn checkpoints(&self, thread: &str, latest: bool) -> Result<Vec<Checkpoint>, CheckpointError> {
        let conn = self.lock();
        let runs = self.runs(&conn, thread)?;
        let sql = if latest {
            "SELECT seq, run, source, snapshot, created_ms FROM checkpoints
             WHERE thread_id = ?1 ORDER BY seq DESC LIMIT 1"
        } else {
            "SELECT seq, run, source, snapshot, created_ms FROM checkpoints
             WHERE thread_id = ?1 ORDER BY seq"
        };
        let mut stmt = conn.prepare_cached(sql).map_err(|e| self.store(e))?;
        let rows = stmt
            .query_map([thread], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, u32>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, i64>(4)?,
                ))
            })
            .map_err(|e| self.store(e))?;
        let mut out = Vec::new();
        for row in rows {
            let (seq, run, source, snapshot, created) = row.map_err(|e| self.store(e))?;
            let info =
                runs.iter().find(|r| r.run == run).cloned().ok_or_else(|| {
                    self.corrupt(thread, format!("checkpoint {seq}: no run {run}"))
                })?;
            let snapshot: Snapshot = serde_json::from_str(&snapshot)
                .map_err(|e| self.corrupt(thread, format!("checkpoint {seq}: {e}")))?;
            let source = Source::parse(&source).ok_or_else(|| {
                self.corrupt(thread, format!("checkpoint {seq}: source `{source}`"))
            })?;
            out.push(Checkpoint {
                thread: thread.to_string(),
                seq: seq.max(0) as u64,
                run: info,
                source,
                snapshot,
                created_ms: created.max(0) as u64,
            });
        }
        Ok(out)
    }
}

fn now() -> i64 {
    crate::clock::unix_ms() as i64
}

impl Checkpointer for SqliteCheckpointer {
    fn create_thread(&self, thread: &str) -> Result<bool, CheckpointError> {
        let conn = self.lock();
        let n = conn
            .execute(
                "INSERT OR IGNORE INTO threads (thread_id, created_ms) VALUES (?1, ?2)",
                params![thread, now()],
            )
            .map_err(|e| self.store(e))?;
        Ok(n == 1)
    }

    fn thread(&self, thread: &str) -> Result<Option<ThreadInfo>, CheckpointError> {
        let conn = self.lock();
        let created: Option<i64> = conn
            .query_row(
                "SELECT created_ms FROM threads WHERE thread_id = ?1",
                [thread],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.store(e))?;
        let Some(created) = created else {
            return Ok(None);
        };
        let latest = self.runs(&conn, thread)?.pop();
        Ok(Some(ThreadInfo {
            id: thread.to_string(),
            created_ms: created.max(0) as u64,
            latest,
        }))
    }

    fn begin_run(&self, thread: &str, spec: &SpecId) -> Result<u32, CheckpointError> {
        let mut conn = self.lock();
        let tx = conn.transaction().map_err(|e| self.store(e))?;
        let t = now();
        tx.execute(
            "INSERT OR IGNORE INTO threads (thread_id, created_ms) VALUES (?1, ?2)",
            params![thread, t],
        )
        .map_err(|e| self.store(e))?;
        let run: u32 = tx
            .query_row(
                "SELECT coalesce(max(run), 0) + 1 FROM runs WHERE thread_id = ?1",
                [thread],
                |r| r.get(0),
            )
            .map_err(|e| self.store(e))?;
        tx.execute(
            "INSERT INTO runs (thread_id, run, spec_name, variant, fingerprint, status,
                               started_ms, updated_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, 'running', ?6, ?6)",
            params![thread, run, spec.name, spec.variant, spec.fingerprint, t],
        )
        .map_err(|e| self.store(e))?;
        tx.commit().map_err(|e| self.store(e))?;
        Ok(run)
    }

    fn put(
        &self,
        thread: &str,
        run: u32,
        source: Source,
        snapshot: &Snapshot,
    ) -> Result<(), CheckpointError> {
        let json = serde_json::to_string(snapshot).map_err(|e| self.store(e))?;
        let mut conn = self.lock();
        let tx = conn.transaction().map_err(|e| self.store(e))?;
        let t = now();
        let n = tx
            .prepare_cached(
                "UPDATE runs SET status = 'running', error = NULL, paused_before = NULL,
                                 updated_ms = ?3
                 WHERE thread_id = ?1 AND run = ?2",
            )
            .and_then(|mut s| s.execute(params![thread, run, t]))
            .map_err(|e| self.store(e))?;
        if n == 0 {
            return Err(CheckpointError::NoRun {
                thread: thread.to_string(),
                run,
            });
        }
        tx.prepare_cached(
            "INSERT INTO checkpoints (thread_id, run, step, next_node, snapshot, created_ms, source)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )
        .and_then(|mut s| {
            s.execute(params![
                thread,
                run,
                snapshot.step,
                snapshot.next,
                json,
                t,
                source.as_str()
            ])
        })
        .map_err(|e| self.store(e))?;
        tx.commit().map_err(|e| self.store(e))
    }

    fn set_status(
        &self,
        thread: &str,
        run: u32,
        status: &RunStatus,
    ) -> Result<(), CheckpointError> {
        let conn = self.lock();
        let n = conn
            .execute(
                "UPDATE runs SET status = ?3, error = ?4, paused_before = ?5, updated_ms = ?6
                 WHERE thread_id = ?1 AND run = ?2",
                params![
                    thread,
                    run,
                    status.as_str(),
                    status.error,
                    status.paused_before,
                    now()
                ],
            )
            .map_err(|e| self.store(e))?;
        if n == 0 {
            return Err(CheckpointError::NoRun {
                thread: thread.to_string(),
                run,
            });
        }
        Ok(())
    }

    fn latest(&self, thread: &str) -> Result<Option<Checkpoint>, CheckpointError> {
        Ok(self.checkpoints(thread, true)?.pop())
    }

    fn history(&self, thread: &str) -> Result<Vec<Checkpoint>, CheckpointError> {
        self.checkpoints(thread, false)
    }
}

#[cfg(test)]
mod tests;
