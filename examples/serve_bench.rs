//! Speed of `ragloop serve` (bench/serve.sh): a one-node spec whose model is the mock
//! OpenAI-compatible server of `examples/support` (in a child process: this same
//! binary run with `--mock MS`), answering every call after 50 ms.
//!
//! 1. Overhead: p50 of `POST /runs/wait` through the in-process server (a real TCP
//!    connection, reqwest client) minus p50 of the same run called in process
//!    (`runtime::run`), the two interleaved run by run; bound ≤ 2 ms.
//! 2. Concurrency: N streaming runs (`POST /runs/stream`, default 1,000) held in
//!    flight at once against a mock that answers after 3 s; the resident memory of
//!    this process (server + client connections; the mock is another process) at the
//!    peak minus before, over N.
//!
//! ```sh
//! cargo run --release --example serve_bench -- [RUNS] [N]
//! ```
use ragloop::compile::load_program;
use ragloop::runtime::{run, NoTrace, ResourceOptions, Resources, RunInput, Status};
use ragloop::serve::{ServeOptions, Server};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::time::{Duration, Instant};

#[path = "support/mock_openai.rs"]
mod mock_openai;

const BOUND_MS: f64 = 2.0;

fn spec(url: &str) -> String {
    format!(
        r#"version: 1
name: bench
state:
  schema:
    type: object
    properties:
      question: {{type: string}}
      answer: {{type: string}}
    required: [question]
models:
  gen: {{provider: openai, model: mock, base_url: "{url}", retries: 0, timeout_secs: 120}}
output: {{answer: answer}}
entry: say
nodes:
  say: {{kind: llm, model: gen, prompt: {{user: "{{{{ question }}}}"}}, update: {{answer: output}}}}
edges:
  say: END
"#
    )
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// Starts this binary as the mock (`--mock MS`) and reads its URL.
fn spawn_mock(delay_ms: u64) -> (std::process::Child, String) {
    let exe = std::env::current_exe().expect("own path");
    let mut child = std::process::Command::new(exe)
        .args(["--mock", &delay_ms.to_string()])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start the mock");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .expect("mock URL");
    (child, line.trim().to_string())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--mock") {
        let ms = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(50);
        println!("{}", mock_openai::start(Duration::from_millis(ms)));
        loop {
            std::thread::park();
        }
    }
    let runs: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(100);
    let n: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(1000);
    let build = if cfg!(debug_assertions) {
        "DEBUG build: figures are not the release ones"
    } else {
        "release build"
    };
    let (mut fast_mock, fast_url) = spawn_mock(50);
    let (mut slow_mock, slow_url) = spawn_mock(3000);
    let dir = tempfile_dir();
    let fast_spec = dir.join("fast.yaml");
    let slow_spec = dir.join("slow.yaml");
    std::fs::write(&fast_spec, spec(&fast_url)).unwrap();
    std::fs::write(&slow_spec, spec(&slow_url)).unwrap();

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");

    // In process.
    let program = load_program(&fast_spec, None, &[]).expect("spec");
    let res = Resources::prepare(&program, ResourceOptions::default()).expect("resources");
    let input = RunInput {
        question: Some("What does cargo check do?".into()),
        sets: vec![],
    };
    // Through the server.
    let server = Server::load(ServeOptions {
        specs: vec![fast_spec.clone(), slow_spec.clone()],
        max_runs: n + 10,
        reload_interval: None,
        ..ServeOptions::default()
    })
    .expect("server");
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let base = rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(server.serve(listener, async move {
            let _ = stop_rx.await;
        }));
        base
    });
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(n + 10)
        .build()
        .unwrap();
    let body = json!({"graph": "fast", "input": "What does cargo check do?"}).to_string();
    // Interleaved, so the machine's load drifts over both alike.
    let mut inproc = Vec::with_capacity(runs);
    let mut served = Vec::with_capacity(runs);
    for i in 0..runs + 5 {
        let t = Instant::now();
        let r = rt.block_on(run(&program, &res, &input, &mut NoTrace));
        if r.status != Status::Generated {
            eprintln!("in-process run ended {}: {:?}", r.status, r.error);
            std::process::exit(1);
        }
        if i >= 5 {
            inproc.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        let t = Instant::now();
        let v: Value = rt.block_on(async {
            let r = client
                .post(format!("{base}/runs/wait"))
                .header("content-type", "application/json")
                .body(body.clone())
                .send()
                .await
                .expect("request");
            serde_json::from_slice(&r.bytes().await.unwrap()).unwrap()
        });
        if v["status"] != "generated" {
            eprintln!("served run: {v}");
            std::process::exit(1);
        }
        if i >= 5 {
            served.push(t.elapsed().as_secs_f64() * 1000.0);
        }
    }
    let p50_in = percentile(&mut inproc, 0.5);
    let p50_srv = percentile(&mut served, 0.5);
    let overhead = p50_srv - p50_in;

    // N concurrent streams against the 3 s mock.
    let slow_body = json!({"graph": "slow", "input": "What does cargo check do?"}).to_string();
    // Warm the slow graph's resources first (one run).
    rt.block_on(async {
        let r = client
            .post(format!("{base}/runs/wait"))
            .body(slow_body.clone())
            .send()
            .await
            .unwrap();
        let _ = r.bytes().await;
    });
    let before = rss_kib();
    let started = Instant::now();
    let (peak_in_flight, peak_rss, ended, held_ms) = rt.block_on(async {
        let mut tasks = Vec::with_capacity(n);
        for _ in 0..n {
            let c = client.clone();
            let url = format!("{base}/runs/stream");
            let b = slow_body.clone();
            tasks.push(tokio::spawn(async move {
                let r = c.post(url).body(b).send().await.ok()?;
                if r.status().as_u16() != 200 {
                    return None;
                }
                let text = r.text().await.ok()?;
                Some(text.contains("event: end") && text.contains("\"status\":\"generated\""))
            }));
        }
        let mut peak = 0usize;
        let mut peak_rss = 0u64;
        let mut held_since = None;
        while started.elapsed() < Duration::from_secs(20) {
            let m = client
                .get(format!("{base}/metrics"))
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap();
            let inflight: usize = m
                .lines()
                .find_map(|l| l.strip_prefix("ragloop_runs_in_flight "))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            if inflight > peak {
                peak = inflight;
            }
            if inflight >= n && held_since.is_none() {
                held_since = Some(Instant::now());
            }
            peak_rss = peak_rss.max(rss_kib());
            if held_since.is_some() && inflight == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let mut ok = 0usize;
        for t in tasks {
            if let Ok(Some(true)) = t.await {
                ok += 1;
            }
        }
        (
            peak,
            peak_rss,
            ok,
            held_since.map(|h| h.elapsed().as_millis()),
        )
    });
    let per_run_kib = peak_rss.saturating_sub(before) as f64 / n as f64;

    println!("ragloop serve against a mock OpenAI server answering after 50 ms ({build})");
    println!("  in process:    p50 {p50_in:.3} ms over {runs} runs (one llm node)");
    println!("  POST /runs/wait: p50 {p50_srv:.3} ms over {runs} runs");
    println!(
        "  overhead:      {overhead:.3} ms per run at p50; bound <= {BOUND_MS} ms: {}",
        if overhead <= BOUND_MS { "PASS" } else { "FAIL" }
    );
    println!(
        "  concurrency:   {n} streaming runs (mock answering after 3 s): {peak_in_flight} in flight at the peak{}, {ended} ended generated",
        match held_ms {
            Some(ms) => format!(" (all {n} held for {ms} ms)"),
            None => String::new(),
        }
    );
    println!(
        "  memory:        {:.1} MiB before, {:.1} MiB at the peak: {per_run_kib:.1} KiB per run in flight (server + client connection)",
        before as f64 / 1024.0,
        peak_rss as f64 / 1024.0
    );
    let _ = stop_tx.send(());
    let _ = fast_mock.kill();
    let _ = slow_mock.kill();
    let _ = fast_mock.wait();
    let _ = slow_mock.wait();
    let _ = std::fs::remove_dir_all(&dir);
    if overhead > BOUND_MS || peak_in_flight < n || ended < n {
        std::process::exit(1);
    }
}

fn tempfile_dir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("ragloop-serve-bench-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}
