//! `memo-bench service`: the service under each allocator, one server child process per
//! (allocator, clients) cell, loaded from this process; throughput, latency, peak RSS and
//! memo's slab share per cell, in a table, JSON and a plot.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde::Serialize;

use super::load::{self, LoadOptions, LoadResult};
use super::metrics;
use crate::alloc::{Allocator, ALLOCATOR_ENV};
use crate::harness::jemalloc_conf;

/// What the benchmark runs.
#[derive(Clone, Debug, Serialize)]
pub struct Setup {
    /// Allocators, in run order.
    pub allocators: Vec<String>,
    /// Concurrent client counts.
    pub clients: Vec<usize>,
    /// tokio worker threads of the server.
    pub workers: usize,
    /// Sequence-length buckets of the server.
    pub buckets: Vec<usize>,
    /// Model compute per byte.
    pub compute: f64,
    /// Unmeasured seconds at the start of each cell.
    pub warmup_s: f64,
    /// Measured seconds of each cell.
    pub duration_s: f64,
    /// Repetitions of each cell.
    pub reps: usize,
}

/// One (allocator, clients) cell.
#[derive(Clone, Debug, Serialize)]
pub struct ServiceCell {
    /// Allocator of the server process.
    pub allocator: String,
    /// Concurrent clients.
    pub clients: usize,
    /// Requests answered in the measured stretches (of every repetition).
    pub requests: u64,
    /// Requests answered per second.
    pub requests_per_sec: f64,
    /// Median request latency, microseconds.
    pub p50_us: u64,
    /// 99th-percentile request latency, microseconds.
    pub p99_us: u64,
    /// Peak resident set of the server process, bytes.
    pub peak_rss_bytes: u64,
    /// memo cells: share of the allocations made in passes during the measured stretch
    /// that were served from slabs (any thread); `null` for the other allocators.
    pub slab_share: Option<f64>,
    /// memo cells: passes profiled during the measured stretch.
    pub passes_profiled: Option<u64>,
    /// Failed requests.
    pub errors: u64,
    /// The first failure, if any.
    pub first_error: Option<String>,
}

/// The benchmark's result.
#[derive(Clone, Debug, Serialize)]
pub struct ServiceReport {
    /// What ran.
    pub setup: Setup,
    /// One per (allocator, clients).
    pub cells: Vec<ServiceCell>,
    /// Every answer to the same request had the same checksum, in every cell.
    pub checksums_agree: bool,
    /// CPUs of the machine.
    pub cpus: usize,
}

/// Runs every cell of `setup` `setup.reps` times (the allocators' order reversed every
/// other repetition: the machine drifts); a cell reports the median of its repetitions.
pub fn run(setup: &Setup, progress: impl Fn(&str)) -> Result<ServiceReport, String> {
    let mut cells = Vec::new();
    let mut answers = std::collections::BTreeMap::new();
    let mut agree = true;
    for &clients in &setup.clients {
        let mut reps: Vec<Vec<ServiceCell>> = vec![Vec::new(); setup.allocators.len()];
        for rep in 0..setup.reps.max(1) {
            let mut order: Vec<usize> = (0..setup.allocators.len()).collect();
            if rep % 2 == 1 {
                order.reverse();
            }
            for i in order {
                let name = &setup.allocators[i];
                let allocator =
                    Allocator::parse(name).ok_or_else(|| format!("unknown allocator {name:?}"))?;
                progress(&format!(
                    "{name}, {clients} clients, repetition {}",
                    rep + 1
                ));
                let (cell, load) = run_cell(setup, allocator, clients)?;
                agree &= load.inconsistent == 0;
                for (k, v) in load.checksums {
                    agree &= load::note_checksum(&mut answers, k, v) == 0;
                }
                reps[i].push(cell);
            }
        }
        cells.extend(reps.into_iter().map(median_cell));
    }
    Ok(ServiceReport {
        setup: setup.clone(),
        cells,
        checksums_agree: agree,
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
    })
}

/// One cell from its repetitions: the median of each figure (requests and errors summed).
fn median_cell(reps: Vec<ServiceCell>) -> ServiceCell {
    fn median<T: Copy + PartialOrd>(mut v: Vec<T>) -> T {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
        v[v.len() / 2]
    }
    let mut cell = reps[0].clone();
    if reps.len() == 1 {
        return cell;
    }
    cell.requests = reps.iter().map(|c| c.requests).sum();
    cell.errors = reps.iter().map(|c| c.errors).sum();
    cell.first_error = reps.iter().find_map(|c| c.first_error.clone());
    cell.requests_per_sec = median(reps.iter().map(|c| c.requests_per_sec).collect());
    cell.p50_us = median(reps.iter().map(|c| c.p50_us).collect());
    cell.p99_us = median(reps.iter().map(|c| c.p99_us).collect());
    cell.peak_rss_bytes = median(reps.iter().map(|c| c.peak_rss_bytes).collect());
    cell.slab_share = cell
        .slab_share
        .map(|_| median(reps.iter().filter_map(|c| c.slab_share).collect()));
    cell.passes_profiled = cell
        .passes_profiled
        .map(|_| reps.iter().filter_map(|c| c.passes_profiled).sum());
    cell
}

/// A server child, killed when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn run_cell(
    setup: &Setup,
    allocator: Allocator,
    clients: usize,
) -> Result<(ServiceCell, LoadResult), String> {
    let (mut server, base) = start_server(setup, allocator)?;
    let scrape = || -> Result<_, String> { metrics::parse(&load::get(&base, "/metrics")?) };
    let max = *setup.buckets.iter().max().unwrap_or(&1);
    let opts = LoadOptions {
        clients,
        warmup: Duration::from_secs_f64(setup.warmup_s),
        duration: Duration::from_secs_f64(setup.duration_s),
        tokens: (1.max(max / 8), max),
        seed: 0x5eed,
    };
    // The warm-up's requests count toward memo's counters: scrape after it.
    let before_load = scrape()?;
    let mut load = load::drive(&base, &opts)?;
    let after = scrape()?;
    let peak_rss_bytes = peak_rss(server.0.id()).unwrap_or(0);
    if let Ok(Some(status)) = server.0.try_wait() {
        return Err(format!("the {} server exited: {status}", allocator.name()));
    }
    drop(server);
    let delta =
        |k: &str| after.get(k).copied().unwrap_or(0.0) - before_load.get(k).copied().unwrap_or(0.0);
    let memo = allocator.is_memo();
    let pass_allocs = delta("memo_pass_allocations_total");
    let cell = ServiceCell {
        allocator: allocator.name().to_string(),
        clients,
        requests: load.requests,
        requests_per_sec: load.requests as f64 / load.seconds.max(1e-9),
        p50_us: load.latency.value_at_quantile(0.5),
        p99_us: load.latency.value_at_quantile(0.99),
        peak_rss_bytes,
        // The warm-up is in the window too: its passes replay (buckets were prewarmed).
        slab_share: (memo && pass_allocs > 0.0)
            .then(|| delta("memo_slab_hits_total") / pass_allocs),
        passes_profiled: memo.then(|| delta("memo_passes_total{mode=\"profiled\"}") as u64),
        errors: load.errors,
        first_error: load.first_error.take(),
    };
    Ok((cell, load))
}

/// Starts this binary's `service-server` under `allocator` and waits (up to 10 minutes:
/// prewarming plans every bucket) for the address it prints.
fn start_server(setup: &Setup, allocator: Allocator) -> Result<(Server, String), String> {
    let exe = std::env::current_exe().map_err(|e| format!("current executable: {e}"))?;
    let join = |v: &[usize]| v.iter().map(usize::to_string).collect::<Vec<_>>().join(",");
    let mut cmd = Command::new(exe);
    cmd.args(["service-server", "--addr", "127.0.0.1:0"])
        .args(["--workers", &setup.workers.to_string()])
        .args(["--buckets", &join(&setup.buckets)])
        .args(["--compute", &setup.compute.to_string()])
        .env(ALLOCATOR_ENV, allocator.name())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    if let Some((k, v)) = crate::harness::memo_env(allocator) {
        cmd.env(k, v);
    }
    if let Some((k, v)) = jemalloc_conf(allocator) {
        cmd.env(k, v);
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start the server: {e}"))?;
    let stdout = child.stdout.take().expect("piped stdout");
    let server = Server(child);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(addr) = line.strip_prefix("listening on ") {
                let _ = tx.send(addr.trim().to_string());
            }
        }
    });
    match rx.recv_timeout(Duration::from_secs(600)) {
        Ok(base) => Ok((server, base)),
        Err(_) => Err(format!(
            "the {} server did not start listening",
            allocator.name()
        )),
    }
}

/// Peak resident set of process `pid` (`VmHWM` in `/proc/<pid>/status`), bytes.
fn peak_rss(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}
