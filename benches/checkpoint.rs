//! Per-step checkpoint write on SQLite (issue 15: ≤ 1 ms): `put` of a snapshot the
//! size of a CRAG step's (a question, 8 retrieved documents of ~600 bytes, grades,
//! an answer), one transaction each, on a file in a temp dir (WAL, synchronous =
//! NORMAL), as `ragloop run --thread` writes them. Prints the median and p99 next to
//! the bound and the build profile. Run by bench/checkpoints.sh.
use ragloop::checkpoint::{Checkpointer, Source, SpecId, SqliteCheckpointer};
use ragloop::runtime::Snapshot;
use serde_json::json;
use std::time::Instant;

fn main() {
    let n: usize = std::env::var("STEPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000);
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SqliteCheckpointer::open(&dir.path().join("bench.sqlite3")).expect("open");
    let spec = SpecId {
        name: "crag".into(),
        variant: None,
        fingerprint: "0".repeat(64),
    };
    let run = store.begin_run("bench", &spec).expect("run");
    let docs: Vec<_> = (0..8)
        .map(|i| {
            json!({"id": format!("doc-{i}"), "content": "Cargo check quickly checks your code to make sure it compiles but does not produce an executable. ".repeat(6),
                   "metadata": {"source": format!("ch01-03-hello-cargo.html#{i}")}})
        })
        .collect();
    let mut times = Vec::with_capacity(n);
    for step in 0..n as u32 {
        let snap = Snapshot {
            state: json!({"question": "What does cargo check do?", "documents": docs,
                          "grades": ["yes", "no", "yes", "yes", "no", "no", "yes", "no"],
                          "answer": "It checks the code without building it.", "iteration": step}),
            next: Some("grade".into()),
            step,
            visits: [("retrieve".to_string(), step)].into_iter().collect(),
            iterations: 1,
            path: vec!["retrieve".into(); (step % 25) as usize],
            usage: Default::default(),
            last: Some("retrieve".into()),
        };
        let t = Instant::now();
        store.put("bench", run, Source::Loop, &snap).expect("put");
        times.push(t.elapsed().as_secs_f64() * 1e6);
    }
    times.sort_by(f64::total_cmp);
    let median = times[times.len() / 2];
    let p99 = times[times.len() * 99 / 100];
    let profile = if cfg!(debug_assertions) {
        "debug (not release: upper bound)"
    } else {
        "release"
    };
    println!(
        "{:<44} {:>10} {:>10} {:>10}",
        "what", "median µs", "p99 µs", "bound µs"
    );
    println!(
        "{:<44} {:>10.1} {:>10.1} {:>10}",
        format!("checkpoint write per step, SQLite ({n} steps)"),
        median,
        p99,
        1000
    );
    println!("profile: {profile}");
}
