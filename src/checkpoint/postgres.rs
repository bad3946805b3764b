//! The PostgreSQL [`Checkpointer`] (`--checkpoints postgres://...`): the same
//! tables and versioning as [`super::sqlite`], in PostgreSQL's dialect, over the
//! `postgres` client (tokio-postgres under a runtime of its own).
//!
//! The [`Checkpointer`] trait is synchronous and the interpreter calls it from its
//! async task, where a blocking client may not start its runtime: the connection
//! lives on a thread of its own and every call is a job sent to it, whose reply the
//! caller waits for (one round trip per call; one transaction per `put`).
use super::{
    Checkpoint, CheckpointError, Checkpointer, RunInfo, RunStatus, Source, SpecId, ThreadInfo,
};
use crate::runtime::{Snapshot, Status};
use postgres::{Client, NoTls};
use std::sync::mpsc;
use std::sync::Mutex;

/// The schema, one entry per version (index 0 is version 1); the same versions as
/// [`super::sqlite::MIGRATIONS`].
pub const MIGRATIONS: &[&str] = &[
    "CREATE TABLE threads (
        thread_id TEXT PRIMARY KEY,
        created_ms BIGINT NOT NULL
    );
    CREATE TABLE runs (
        thread_id TEXT NOT NULL REFERENCES threads(thread_id),
        run INTEGER NOT NULL,
        spec_name TEXT NOT NULL,
        variant TEXT,
        fingerprint TEXT NOT NULL,
        status TEXT NOT NULL,
        error TEXT,
        started_ms BIGINT NOT NULL,
        updated_ms BIGINT NOT NULL,
        PRIMARY KEY (thread_id, run)
    );
    CREATE TABLE checkpoints (
        seq BIGSERIAL PRIMARY KEY,
        thread_id TEXT NOT NULL,
        run INTEGER NOT NULL,
        step INTEGER NOT NULL,
        next_node TEXT,
        snapshot TEXT NOT NULL,
        created_ms BIGINT NOT NULL,
        FOREIGN KEY (thread_id, run) REFERENCES runs(thread_id, run)
    );
    CREATE INDEX checkpoints_by_thread ON checkpoints(thread_id, seq);",
    "ALTER TABLE runs ADD COLUMN paused_before TEXT;
    ALTER TABLE checkpoints ADD COLUMN source TEXT NOT NULL DEFAULT 'loop';",
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

type Job = Box<dyn FnOnce(&mut Client) + Send>;

/// A checkpoint store in a PostgreSQL database. `Display`/`Debug` show the URL
/// without its password.
pub struct PostgresCheckpointer {
    shown: String,
    jobs: Mutex<mpsc::Sender<Job>>,
}

impl std::fmt::Debug for PostgresCheckpointer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PostgresCheckpointer({})", self.shown)
    }
}

/// The URL without a password (`postgres://user:***@host/db`).
fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let (auth, host) = match rest.rsplit_once('@') {
        Some((a, h)) => (Some(a), h),
        None => (None, rest),
    };
    let host = host.split('?').next().unwrap_or(host);
    match auth.map(|a| a.split_once(':').map_or(a, |(u, _)| u)) {
        Some(user) if auth.is_some_and(|a| a.contains(':')) => {
            format!("{scheme}://{user}:***@{host}")
        }
        Some(user) => format!("{scheme}://{user}@{host}"),
        None => format!("{scheme}://{host}"),
    }
}

fn store_err(shown: &str, e: impl std::fmt::Display) -> CheckpointError {
    CheckpointError::Store {
        path: shown.to_string(),
        message: e.to_string(),
    }
}

fn migrate(client: &mut Client, shown: &str) -> Result<(), CheckpointError> {
    let err = |e: postgres::Error| store_err(shown, e);
    client
        .batch_execute("CREATE TABLE IF NOT EXISTS schema_version (version BIGINT NOT NULL)")
        .map_err(err)?;
    let mut tx = client.transaction().map_err(err)?;
    // One migrating process at a time.
    tx.batch_execute("LOCK TABLE schema_version IN EXCLUSIVE MODE")
        .map_err(err)?;
    let found: i64 = tx
        .query_one("SELECT coalesce(max(version), 0) FROM schema_version", &[])
        .map_err(err)?
        .get(0);
    if found > SCHEMA_VERSION {
        return Err(CheckpointError::TooNew {
            path: shown.to_string(),
            found,
            supported: SCHEMA_VERSION,
        });
    }
    for v in found..SCHEMA_VERSION {
        tx.batch_execute(MIGRATIONS[v as usize])
            .map_err(|e| store_err(shown, format!("migration to schema version {}: {e}", v + 1)))?;
        tx.execute("DELETE FROM schema_version", &[]).map_err(err)?;
        tx.execute(
            "INSERT INTO schema_version (version) VALUES ($1)",
            &[&(v + 1)],
        )
        .map_err(err)?;
    }
    tx.commit().map_err(err)
}

impl PostgresCheckpointer {
    /// Connects to `url` (`postgres://user[:password]@host[:port]/db`, no TLS) on a
    /// thread of its own and migrates the database to [`SCHEMA_VERSION`].
    ///
    /// # Errors
    /// [`CheckpointError::Store`] when the server cannot be reached or the
    /// migration fails (the URL shown without its password);
    /// [`CheckpointError::TooNew`] for a database of a newer ragloop.
    pub fn open(url: &str) -> Result<PostgresCheckpointer, CheckpointError> {
        let shown = redact(url);
        if let Err(e) = url.parse::<postgres::Config>() {
            return Err(CheckpointError::Unsupported(format!(
                "--checkpoints {shown}: not a PostgreSQL connection URL: {e}"
            )));
        }
        let (ready_tx, ready_rx) = mpsc::channel::<Result<(), CheckpointError>>();
        let (jobs_tx, jobs_rx) = mpsc::channel::<Job>();
        let url = url.to_string();
        let name = shown.clone();
        std::thread::Builder::new()
            .name("ragloop-postgres".into())
            .spawn(move || {
                let mut client = match Client::connect(&url, NoTls) {
                    Ok(c) => c,
                    Err(e) => {
                        let _ = ready_tx.send(Err(store_err(&name, e)));
                        return;
                    }
                };
                if let Err(e) = migrate(&mut client, &name) {
                    let _ = ready_tx.send(Err(e));
                    return;
                }
                let _ = ready_tx.send(Ok(()));
                for job in jobs_rx {
                    job(&mut client);
                }
            })
            .map_err(|e| store_err(&shown, e))?;
        ready_rx
            .recv()
            .map_err(|_| store_err(&shown, "the connection thread ended"))??;
        Ok(PostgresCheckpointer {
            shown,
            jobs: Mutex::new(jobs_tx),
        })
    }

    /// Runs `f` on the connection's thread and waits for its result.
    fn call<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Client, &str) -> Result<R, CheckpointError> + Send + 'static,
    ) -> Result<R, CheckpointError> {
        let (tx, rx) = mpsc::channel();
        let shown = self.shown.clone();
        let job: Job = Box::new(move |c| {
            let _ = tx.send(f(c, &shown));
        });
        self.jobs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send(job)
            .map_err(|_| store_err(&self.shown, "the connection thread ended"))?;
        rx.recv()
            .map_err(|_| store_err(&self.shown, "the connection thread ended"))?
    }
}

fn corrupt(shown: &str, thread: &str, message: impl std::fmt::Display) -> CheckpointError {
    CheckpointError::Corrupt {
        path: shown.to_string(),
        thread: thread.to_string(),
        message: message.to_string(),
    }
}

fn runs(c: &mut Client, shown: &str, thread: &str) -> Result<Vec<RunInfo>, CheckpointError> {
    let rows = c
        .query(
            "SELECT run, spec_name, variant, fingerprint, status, error, paused_before,
                    started_ms, updated_ms
             FROM runs WHERE thread_id = $1 ORDER BY run",
            &[&thread],
        )
        .map_err(|e| store_err(shown, e))?;
    let mut out = Vec::new();
    for r in rows {
        let run: i32 = r.get(0);
        let status: String = r.get(4);
        let status = match status.as_str() {
            "running" => None,
            s => Some(
                serde_json::from_value::<Status>(serde_json::Value::String(s.into())).map_err(
                    |_| corrupt(shown, thread, format!("run {run}: unknown status `{s}`")),
                )?,
            ),
        };
        out.push(RunInfo {
            run: run.max(0) as u32,
            spec: SpecId {
                name: r.get(1),
                variant: r.get(2),
                fingerprint: r.get(3),
            },
            status: RunStatus {
                status,
                error: r.get(5),
                paused_before: r.get(6),
            },
            started_ms: r.get::<_, i64>(7).max(0) as u64,
            updated_ms: r.get::<_, i64>(8).max(0) as u64,
        });
    }
    Ok(out)
}

fn checkpoints(
    c: &mut Client,
    shown: &str,
    thread: &str,
    latest: bool,
) -> Result<Vec<Checkpoint>, CheckpointError> {
    let runs = runs(c, shown, thread)?;
    let sql = if latest {
        "SELECT seq, run, source, snapshot, created_ms FROM checkpoints
         WHERE thread_id = $1 ORDER BY seq DESC LIMIT 1"
    } else {
        "SELECT seq, run, source, snapshot, created_ms FROM checkpoints
         WHERE thread_id = $1 ORDER BY seq"
    };
    let rows = c.query(sql, &[&thread]).map_err(|e| store_err(shown, e))?;
    let mut out = Vec::new();
    for r in rows {
        let seq: i64 = r.get(0);
        let run: i32 = r.get(1);
        let source: String = r.get(2);
        let snapshot: String = r.get(3);
        let info = runs
            .iter()
            .find(|i| i.run as i32 == run)
            .cloned()
            .ok_or_else(|| corrupt(shown, thread, format!("checkpoint {seq}: no run {run}")))?;
        out.push(Checkpoint {
            thread: thread.to_string(),
            seq: seq.max(0) as u64,
            run: info,
            source: Source::parse(&source).ok_or_else(|| {
                corrupt(
                    shown,
                    thread,
                    format!("checkpoint {seq}: source `{source}`"),
                )
            })?,
            snapshot: serde_json::from_str(&snapshot)
                .map_err(|e| corrupt(shown, thread, format!("checkpoint {seq}: {e}")))?,
            created_ms: r.get::<_, i64>(4).max(0) as u64,
        });
    }
    Ok(out)
}

fn now() -> i64 {
    crate::clock::unix_ms() as i64
}

fn num(n: u32) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

impl Checkpointer for PostgresCheckpointer {
    fn create_thread(&self, thread: &str) -> Result<bool, CheckpointError> {
        let thread = thread.to_string();
        self.call(move |c, shown| {
            c.execute(
                "INSERT INTO threads (thread_id, created_ms) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                &[&thread, &now()],
            )
            .map(|n| n == 1)
            .map_err(|e| store_err(shown, e))
        })
    }

    fn thread(&self, thread: &str) -> Result<Option<ThreadInfo>, CheckpointError> {
        let thread = thread.to_string();
        self.call(move |c, shown| {
            let row = c
                .query_opt(
                    "SELECT created_ms FROM threads WHERE thread_id = $1",
                    &[&thread],
                )
                .map_err(|e| store_err(shown, e))?;
            let Some(row) = row else { return Ok(None) };
            let latest = runs(c, shown, &thread)?.pop();
            Ok(Some(ThreadInfo {
                id: thread.clone(),
                created_ms: row.get::<_, i64>(0).max(0) as u64,
                latest,
            }))
        })
    }

    fn begin_run(&self, thread: &str, spec: &SpecId) -> Result<u32, CheckpointError> {
        let thread = thread.to_string();
        let spec = spec.clone();
        self.call(move |c, shown| {
            let err = |e: postgres::Error| store_err(shown, e);
            let mut tx = c.transaction().map_err(err)?;
            let t = now();
            tx.execute(
                "INSERT INTO threads (thread_id, created_ms) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                &[&thread, &t],
            )
            .map_err(err)?;
            // Serializes runs begun on one thread at once.
            tx.execute("SELECT 1 FROM threads WHERE thread_id = $1 FOR UPDATE", &[&thread])
                .map_err(err)?;
            let run: i32 = tx
                .query_one(
                    "SELECT coalesce(max(run), 0) + 1 FROM runs WHERE thread_id = $1",
                    &[&thread],
                )
                .map_err(err)?
                .get(0);
            tx.execute(
                "INSERT INTO runs (thread_id, run, spec_name, variant, fingerprint, status,
                                   started_ms, updated_ms)
                 VALUES ($1, $2, $3, $4, $5, 'running', $6, $6)",
                &[&thread, &run, &spec.name, &spec.variant, &spec.fingerprint, &t],
            )
            .map_err(err)?;
            tx.commit().map_err(err)?;
            Ok(run.max(0) as u32)
        })
    }

    fn put(
        &self,
        thread: &str,
        run: u32,
        source: Source,
        snapshot: &Snapshot,
    ) -> Result<(), CheckpointError> {
        let json = serde_json::to_string(snapshot).map_err(|e| store_err(&self.shown, e))?;
        let thread = thread.to_string();
        let step = num(snapshot.step);
        let next = snapshot.next.clone();
        self.call(move |c, shown| {
            let err = |e: postgres::Error| store_err(shown, e);
            let mut tx = c.transaction().map_err(err)?;
            let t = now();
            let n = tx
                .execute(
                    "UPDATE runs SET status = 'running', error = NULL, paused_before = NULL,
                                     updated_ms = $3
                     WHERE thread_id = $1 AND run = $2",
                    &[&thread, &num(run), &t],
                )
                .map_err(err)?;
            if n == 0 {
                return Err(CheckpointError::NoRun { thread, run });
            }
            tx.execute(
                "INSERT INTO checkpoints (thread_id, run, step, next_node, snapshot, created_ms, source)
                 VALUES ($1, $2, $3, $4, $5, $6, $7)",
                &[&thread, &num(run), &step, &next, &json, &t, &source.as_str()],
            )
            .map_err(err)?;
            tx.commit().map_err(err)
        })
    }

    fn set_status(
        &self,
        thread: &str,
        run: u32,
        status: &RunStatus,
    ) -> Result<(), CheckpointError> {
        let thread = thread.to_string();
        let status = status.clone();
        self.call(move |c, shown| {
            let n = c
                .execute(
                    "UPDATE runs SET status = $3, error = $4, paused_before = $5, updated_ms = $6
                     WHERE thread_id = $1 AND run = $2",
                    &[
                        &thread,
                        &num(run),
                        &status.as_str(),
                        &status.error,
                        &status.paused_before,
                        &now(),
                    ],
                )
                .map_err(|e| store_err(shown, e))?;
            if n == 0 {
                return Err(CheckpointError::NoRun { thread, run });
            }
            Ok(())
        })
    }

    fn latest(&self, thread: &str) -> Result<Option<Checkpoint>, CheckpointError> {
        let thread = thread.to_string();
        self.call(move |c, shown| Ok(checkpoints(c, shown, &thread, true)?.pop()))
    }

    fn history(&self, thread: &str) -> Result<Vec<Checkpoint>, CheckpointError> {
        let thread = thread.to_string();
        self.call(move |c, shown| checkpoints(c, shown, &thread, false))
    }
}

#[cfg(test)]
mod tests {
    use super::{redact, PostgresCheckpointer};
    use crate::checkpoint::CheckpointError;

    #[test]
    fn urls_are_shown_without_their_password() {
        assert_eq!(
            redact("postgres://u:secret@127.0.0.1:5432/db?sslmode=disable"),
            "postgres://u:***@127.0.0.1:5432/db"
        );
        assert_eq!(redact("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(redact("postgresql://h/db"), "postgresql://h/db");
        assert_eq!(redact("postgres://u:p:q@h@x/db"), "postgres://u:***@x/db");
    }

    #[test]
    fn a_url_that_does_not_parse_is_a_usage_error_without_its_password() {
        let Err(e) = PostgresCheckpointer::open("postgres://u:hunter2@host:notaport/db") else {
            panic!("a malformed URL opened");
        };
        assert!(matches!(e, CheckpointError::Unsupported(_)), "{e:?}");
        let msg = e.to_string();
        assert!(msg.contains("not a PostgreSQL connection URL"), "{msg}");
        assert!(!msg.contains("hunter2"), "{msg}");
    }
}
