//! The inference service: an HTTP server on tokio + axum whose requests each run in one
//! async memo pass (`memo_alloc::Pass::wrap`), keyed by the bucket of their sequence
//! length, with memo's counters at `GET /metrics`.
//!
//! - `POST /infer`: the body is whitespace-separated token ids (1 to the largest bucket of
//!   them); the answer is JSON `{"tokens":n,"bucket":b,"checksum":"<hex>"}`.
//! - `GET /metrics`: Prometheus text ([`super::metrics::render`]).
//! - `GET /health`: `ok`.
//!
//! At start-up each bucket is profiled at its largest shape ([`memo_alloc::prewarm`]), so no
//! request pays for profiling; a request of a shorter sequence replays from its bucket's
//! plan. The handler awaits inside the pass (a yield before and after the model runs), so
//! a request's pass may move between worker threads and interleave with others on one.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;

use super::metrics;
use super::model::{request_body, token_ids, Model};

/// How the service runs.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// Where to listen (port 0: any free port; the address is printed).
    pub addr: SocketAddr,
    /// tokio worker threads.
    pub workers: usize,
    /// Sequence-length buckets (the largest is the longest request accepted).
    pub buckets: Vec<usize>,
    /// Compute per byte of the model (see [`crate::engine::Compute::from_scale`]).
    pub compute: f64,
    /// Run requests in memo passes (off when the process's allocator is not memo's).
    pub memo: bool,
}

impl Default for ServeOptions {
    fn default() -> ServeOptions {
        ServeOptions {
            addr: SocketAddr::from(([127, 0, 0, 1], 3000)),
            workers: 2,
            buckets: vec![32, 64, 128, 256],
            compute: 0.0,
            memo: true,
        }
    }
}

/// The service's shared state.
struct App {
    model: Model,
    memo: bool,
    requests: AtomicU64,
}

/// Prewarms the buckets, binds `opts.addr`, prints `listening on http://<addr>` on stdout
/// and serves until the process ends. Errors when it cannot start.
pub fn serve(opts: &ServeOptions) -> Result<(), String> {
    let app = Arc::new(App {
        model: Model::new(&opts.buckets, opts.compute)?,
        memo: opts.memo,
        requests: AtomicU64::new(0),
    });
    if app.memo {
        prewarm(&app.model);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(opts.workers.max(1))
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the tokio runtime: {e}"))?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(opts.addr)
            .await
            .map_err(|e| format!("cannot listen on {}: {e}", opts.addr))?;
        let addr = listener
            .local_addr()
            .map_err(|e| format!("no local address: {e}"))?;
        println!("listening on http://{addr}");
        use std::io::Write;
        let _ = std::io::stdout().flush();
        axum::serve(listener, router(app))
            .await
            .map_err(|e| format!("server: {e}"))
    })
}

/// Profiles every bucket at its largest shape, so its plan is ready before the first
/// request.
fn prewarm(model: &Model) {
    for &bound in model.bounds() {
        let key = model.key(bound).expect("a bound is in its own bucket");
        let graph = model.graph(bound);
        let body = request_body(bound, bound as u64);
        if !memo_alloc::prewarm(key, || model.infer(&graph, &body, bound)) {
            eprintln!("memo-bench service: {key} has no plan after prewarming");
        }
    }
}

fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/infer", post(infer))
        .route("/metrics", get(scrape))
        .route("/health", get(|| async { "ok" }))
        .with_state(app)
}

async fn infer(State(app): State<Arc<App>>, body: Bytes) -> Response {
    let tokens = token_ids(&body).count();
    let Some(key) = app.model.key(tokens) else {
        let why = format!(
            "a request has 1 to {} whitespace-separated token ids; this one has {tokens}\n",
            app.model.max_tokens()
        );
        return (StatusCode::UNPROCESSABLE_ENTITY, why).into_response();
    };
    // Built (once per length) outside the pass: the cached graph outlives it.
    let graph = app.model.graph(tokens);
    let work = async {
        tokio::task::yield_now().await;
        let out = app.model.infer(&graph, &body, tokens);
        tokio::task::yield_now().await;
        out
    };
    let out = if app.memo {
        memo_alloc::Pass::new(key).wrap(work).await
    } else {
        work.await
    };
    app.requests.fetch_add(1, Ordering::Relaxed);
    let json = format!(
        "{{\"tokens\":{},\"bucket\":{},\"checksum\":\"{:016x}\"}}",
        out.tokens, out.bucket, out.checksum
    );
    ([(header::CONTENT_TYPE, "application/json")], json).into_response()
}

async fn scrape(State(app): State<Arc<App>>) -> Response {
    let text = metrics::render(&memo_alloc::stats(), app.requests.load(Ordering::Relaxed));
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}
