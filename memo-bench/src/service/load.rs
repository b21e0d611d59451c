//! The load generator: a bounded number of concurrent clients (keep-alive HTTP/1.1, one
//! request in flight each) sending inference requests of random sequence lengths to the
//! service for a bounded time, on a current-thread tokio runtime of the calling process.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use super::model::request_body;

type HttpClient = Client<HttpConnector, Full<Bytes>>;

/// How to load the service.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// Concurrent clients.
    pub clients: usize,
    /// Requests in this first stretch are sent but not measured.
    pub warmup: Duration,
    /// The measured stretch after the warm-up.
    pub duration: Duration,
    /// Sequence lengths are drawn uniformly from this inclusive range.
    pub tokens: (usize, usize),
    /// Seed of the lengths and token ids (each client its own stream).
    pub seed: u64,
}

/// What the clients measured.
#[derive(Debug)]
pub struct LoadResult {
    /// Requests answered in the measured stretch.
    pub requests: u64,
    /// Requests that failed (transport error, a status other than 200, a bad answer).
    pub errors: u64,
    /// The first error, for the report.
    pub first_error: Option<String>,
    /// Length of the measured stretch, seconds.
    pub seconds: f64,
    /// Request latency, microseconds.
    pub latency: Histogram<u64>,
    /// The checksum answered for each sequence length and seed (must not vary).
    pub checksums: BTreeMap<(usize, u64), String>,
    /// Answers whose checksum differed from an earlier one for the same request.
    pub inconsistent: u64,
}

impl LoadResult {
    fn empty() -> LoadResult {
        LoadResult {
            requests: 0,
            errors: 0,
            first_error: None,
            seconds: 0.0,
            latency: histogram(),
            checksums: BTreeMap::new(),
            inconsistent: 0,
        }
    }
}

/// Loads the service at `base` (`http://host:port`) as `opts` says.
pub fn drive(base: &str, opts: &LoadOptions) -> Result<LoadResult, String> {
    let rt = runtime()?;
    rt.block_on(async {
        let client = client();
        let start = Instant::now();
        let measure_from = start + opts.warmup;
        let end = measure_from + opts.duration;
        let tasks: Vec<_> = (0..opts.clients.max(1))
            .map(|c| {
                let (client, base, opts) = (client.clone(), base.to_string(), opts.clone());
                tokio::spawn(async move {
                    one_client(&client, &base, &opts, c as u64, measure_from, end).await
                })
            })
            .collect();
        let mut total = LoadResult::empty();
        for t in tasks {
            let part = t.await.map_err(|e| format!("a client task failed: {e}"))?;
            merge(&mut total, part);
        }
        total.seconds = end.saturating_duration_since(measure_from).as_secs_f64();
        Ok(total)
    })
}

/// `GET <base><path>` as text.
pub fn get(base: &str, path: &str) -> Result<String, String> {
    let rt = runtime()?;
    rt.block_on(async {
        let (status, body) =
            send(&client(), Method::GET, &format!("{base}{path}"), Vec::new()).await?;
        if status != 200 {
            return Err(format!("GET {path}: status {status}: {body}"));
        }
        Ok(body)
    })
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the client runtime: {e}"))
}

fn client() -> HttpClient {
    Client::builder(TokioExecutor::new()).build_http()
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000, 3).expect("valid histogram bounds")
}

/// One request: its status and body.
async fn send(
    client: &HttpClient,
    method: Method,
    uri: &str,
    body: Vec<u8>,
) -> Result<(u16, String), String> {
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| format!("request: {e}"))?;
    let resp = client
        .request(req)
        .await
        .map_err(|e| format!("{uri}: {e}"))?;
    let status = resp.status().as_u16();
    let bytes = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| format!("{uri}: reading the answer: {e}"))?
        .to_bytes();
    Ok((status, String::from_utf8_lossy(&bytes).into_owned()))
}

/// Client `c`'s loop until `end`.
async fn one_client(
    client: &HttpClient,
    base: &str,
    opts: &LoadOptions,
    c: u64,
    measure_from: Instant,
    end: Instant,
) -> LoadResult {
    let uri = format!("{base}/infer");
    let mut out = LoadResult::empty();
    let (lo, hi) = (
        opts.tokens.0.max(1),
        opts.tokens.1.max(opts.tokens.0.max(1)),
    );
    let mut x = opts.seed ^ (c + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    loop {
        let t0 = Instant::now();
        if t0 >= end {
            break;
        }
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let tokens = lo + (x >> 33) as usize % (hi - lo + 1);
        // A few distinct bodies per length, so answers can be compared.
        let seed = (x >> 20) % 4;
        let answer = send(client, Method::POST, &uri, request_body(tokens, seed)).await;
        let done = Instant::now();
        let checksum = match answer {
            Ok((200, body)) => checksum_of(&body, tokens),
            Ok((status, body)) => Err(format!("status {status}: {}", body.trim())),
            Err(e) => Err(e),
        };
        match checksum {
            Ok(sum) => {
                out.inconsistent += note_checksum(&mut out.checksums, (tokens, seed), sum);
                if t0 >= measure_from {
                    out.requests += 1;
                    let us = done.duration_since(t0).as_micros() as u64;
                    let _ = out.latency.record(us.max(1));
                }
            }
            Err(e) => {
                out.errors += 1;
                out.first_error.get_or_insert(e);
            }
        }
    }
    out
}

/// The checksum of an answer `{"tokens":n,"bucket":b,"checksum":"<hex>"}` for `tokens`.
fn checksum_of(body: &str, tokens: usize) -> Result<String, String> {
    let v: serde_json::Value =
        serde_json::from_str(body).map_err(|e| format!("answer is not JSON ({e}): {body}"))?;
    if v["tokens"].as_u64() != Some(tokens as u64) {
        return Err(format!("answer for {tokens} tokens says {}", v["tokens"]));
    }
    v["checksum"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("answer has no checksum: {body}"))
}

fn merge(total: &mut LoadResult, part: LoadResult) {
    total.requests += part.requests;
    total.errors += part.errors;
    if total.first_error.is_none() {
        total.first_error = part.first_error;
    }
    let _ = total.latency.add(&part.latency);
    total.inconsistent += part.inconsistent;
    for (k, v) in part.checksums {
        total.inconsistent += note_checksum(&mut total.checksums, k, v);
    }
}

/// Records the answer `sum` to request `k`; 1 when an earlier answer to it differed.
pub fn note_checksum(
    seen: &mut BTreeMap<(usize, u64), String>,
    k: (usize, u64),
    sum: String,
) -> u64 {
    match seen.get(&k) {
        Some(old) => u64::from(*old != sum),
        None => {
            seen.insert(k, sum);
            0
        }
    }
}
