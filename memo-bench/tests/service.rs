//! The inference service: its HTTP contract (answers, refusals, metrics), and a smoke run
//! of `memo-bench service` (memo, jemalloc and mimalloc, JSON cells).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_memo-bench");

/// A server child, killed when dropped.
struct Server(Child, String);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(allocator: &str) -> Server {
    let mut child = Command::new(BIN)
        .args(["service-server", "--buckets", "8,16"])
        .env("MEMO_BENCH_ALLOCATOR", allocator)
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the server");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .expect("read its address");
    let addr = line
        .trim()
        .strip_prefix("listening on http://")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_string();
    Server(child, addr)
}

/// One HTTP/1.1 request (connection closed after it): status and body.
fn request(addr: &str, method: &str, path: &str, body: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).expect("connect");
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let status = text[9..12].parse().expect("a status code");
    let body = text
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    (status, body)
}

#[test]
fn the_service_answers_refuses_and_counts() {
    let server = start("memo");
    let a = &server.1;
    assert_eq!(request(a, "GET", "/health", ""), (200, "ok".to_string()));
    let (status, first) = request(a, "POST", "/infer", "101 2023 2003 102");
    assert_eq!(status, 200, "{first}");
    assert!(
        first.starts_with("{\"tokens\":4,\"bucket\":8,\"checksum\":\""),
        "{first}"
    );
    // The same request, answered again from the bucket's plan, gives the same answer.
    for _ in 0..5 {
        assert_eq!(
            request(a, "POST", "/infer", "101 2023 2003 102"),
            (200, first.clone())
        );
    }
    let (status, why) = request(a, "POST", "/infer", "");
    assert_eq!(status, 422, "{why}");
    assert!(why.contains("this one has 0"), "{why}");
    let long = vec!["7"; 17].join(" ");
    assert_eq!(request(a, "POST", "/infer", &long).0, 422);
    assert_eq!(request(a, "GET", "/nowhere", "").0, 404);
    let (status, page) = request(a, "GET", "/metrics", "");
    assert_eq!(status, 200);
    let m = memo_bench::service::metrics::parse(&page).expect("Prometheus text");
    assert_eq!(m["memo_service_requests_total"], 6.0, "{page}");
    // Both buckets were prewarmed: the requests replayed.
    assert_eq!(m["memo_plans"], 2.0, "{page}");
    assert!(m["memo_passes_total{mode=\"replayed\"}"] >= 6.0, "{page}");
    assert!(m["memo_slab_share"] > 0.9, "{page}");
}

#[test]
fn the_service_benchmark_runs_memo_jemalloc_and_mimalloc() {
    let out = Command::new(BIN)
        .args(["service", "--quick", "--format", "json", "--no-report"])
        .args(["--warmup", "0.5", "--duration", "1", "--buckets", "8,16"])
        .output()
        .expect("run memo-bench service");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("JSON on stdout");
    assert_eq!(v["checksums_agree"], true);
    let cells = v["cells"].as_array().expect("cells");
    let names: Vec<&str> = cells
        .iter()
        .map(|c| c["allocator"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["memo", "jemalloc", "mimalloc"]);
    for c in cells {
        for k in [
            "clients",
            "requests_per_sec",
            "p50_us",
            "p99_us",
            "peak_rss_bytes",
        ] {
            assert!(c[k].as_f64().is_some_and(|x| x > 0.0), "{k} in {c}");
        }
        assert_eq!(c["errors"], 0, "{c}");
    }
    assert!(
        cells[0]["slab_share"].as_f64().unwrap() > 0.9,
        "{}",
        cells[0]
    );
    assert!(cells[1]["slab_share"].is_null());
}
