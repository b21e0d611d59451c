//! Passes of one key that come in several shapes: a decoding loop (a prefill, then steps
//! whose attention grows with a cache that outlives each step) and an encoder whose
//! sequence length is drawn from four values (without op scopes, and with every request
//! inside them, as engines run), all under one key each, as a user who has not read about
//! buckets writes them.

mod common;

use std::hint::black_box;

use common::serial_inline;
use memo_alloc::{MemoAlloc, PassReport};

#[global_allocator]
static A: MemoAlloc = MemoAlloc::system();

/// Layers of the synthetic transformer.
const LAYERS: usize = 4;
/// Bytes of one token's hidden state.
const HIDDEN: usize = 1024;
/// Attention heads.
const HEADS: usize = 4;

/// A block of `bytes`, written so that it is not optimised away.
fn block(bytes: usize) -> Vec<u8> {
    black_box(vec![1u8; bytes])
}

/// One transformer pass over `tokens` new tokens attending to `context` tokens (the
/// cache plus the new ones); `cache` holds each layer's keys and values, replaced by
/// blocks one token longer per new token (they outlive the pass).
fn transformer(tokens: usize, context: usize, cache: &mut Vec<Vec<u8>>) {
    let mut x = block(tokens * HIDDEN);
    cache.resize_with(LAYERS, Vec::new);
    for layer in cache.iter_mut() {
        let norm = block(tokens * HIDDEN);
        let qkv = block(3 * tokens * HIDDEN);
        // The cache grows: a new block holding the old one and this pass's tokens.
        let mut grown = Vec::with_capacity(context * 2 * HIDDEN / 4);
        grown.extend_from_slice(&layer[..layer.len().min(grown.capacity())]);
        *layer = black_box(grown);
        let scores = block(HEADS * tokens * context * 4);
        let probs = block(HEADS * tokens * context * 4);
        // Work split in chunks of 32 tokens: the number of blocks follows the length.
        let chunks: Vec<Vec<u8>> = (0..tokens.div_ceil(32))
            .map(|_| block(8 * HIDDEN))
            .collect();
        drop(chunks);
        let attn = block(tokens * HIDDEN);
        drop((scores, probs, qkv, norm));
        let up = block(4 * tokens * HIDDEN);
        let down = block(tokens * HIDDEN);
        drop((up, attn));
        x = down;
    }
    black_box(&x);
}

/// [`transformer`] as an engine runs it: a scope that closes before the first request
/// (checking the input), then every request inside op scopes: the embedding and each
/// layer's, with an attention scope inside the layer's.
fn transformer_in_ops(tokens: usize, context: usize) {
    {
        let _check = memo_alloc::op("check");
        black_box(tokens);
    }
    let _model = memo_alloc::op("model");
    let mut x = {
        let _embed = memo_alloc::op("embed");
        block(tokens * HIDDEN)
    };
    for _ in 0..LAYERS {
        let _layer = memo_alloc::op("layer");
        let norm = block(tokens * HIDDEN);
        let attn = {
            let _attention = memo_alloc::op("attention");
            let qkv = block(3 * tokens * HIDDEN);
            let scores = block(HEADS * tokens * context * 4);
            let probs = block(HEADS * tokens * context * 4);
            let chunks: Vec<Vec<u8>> = (0..tokens.div_ceil(32))
                .map(|_| block(8 * HIDDEN))
                .collect();
            drop((chunks, scores, probs, qkv));
            block(tokens * HIDDEN)
        };
        drop(norm);
        let up = block(4 * tokens * HIDDEN);
        let down = block(tokens * HIDDEN);
        drop((up, attn));
        x = down;
    }
    black_box(&x);
}

/// The reports of `key` and of its shape classes (`<key>#<n>`).
fn reports(key: &str) -> Vec<PassReport> {
    let class = format!("{key}#");
    memo_alloc::keys()
        .iter()
        .filter(|k| *k == key || k.starts_with(&class))
        .filter_map(|k| memo_alloc::report(k))
        .collect()
}

/// The key's and its classes' reports before and after `f`.
fn delta(key: &str, f: impl FnOnce()) -> (Vec<PassReport>, Vec<PassReport>) {
    let before = reports(key);
    f();
    (before, reports(key))
}

/// Positions of a request: the prefill of `PROMPT` tokens, then `STEPS` steps.
const PROMPT: usize = 64;
/// Decoding steps of a request.
const STEPS: usize = 32;

/// Runs `requests` decoding requests under `key`, one pass per position; returns the
/// key's report deltas over the step passes of the last `measured` requests (with the
/// profiles of their prefills), and over their prefill passes.
fn decode(key: &str, requests: usize, measured: usize) -> (Measured, Measured) {
    decode_with_table(key, requests, measured, None)
}

/// [`decode`], each pass first making an interpreter's table of its graph (`tables`: the
/// prefill's size and a step's, a few hundred bytes apart) that it keeps to its end.
fn decode_with_table(
    key: &str,
    requests: usize,
    measured: usize,
    tables: Option<(usize, usize)>,
) -> (Measured, Measured) {
    let table = |t: Option<usize>| t.map(|n| black_box(vec![0u8; n]));
    let (prefill_table, step_table) = (tables.map(|t| t.0), tables.map(|t| t.1));
    let mut m = Measured::default();
    let mut prefills = Measured::default();
    for r in 0..requests {
        let mut cache = Vec::new();
        let prefill = delta(key, || {
            let _p = memo_alloc::pass(key);
            let t = table(prefill_table);
            transformer(PROMPT, PROMPT, &mut cache);
            drop(t);
        });
        for step in 1..=STEPS {
            let d = delta(key, || {
                let _p = memo_alloc::pass(key);
                let t = table(step_table);
                transformer(1, PROMPT + step, &mut cache);
                drop(t);
            });
            if r + measured >= requests {
                m.add(&d);
            }
        }
        if r + measured >= requests {
            m.add_profiles(&prefill);
            prefills.add(&prefill);
        }
    }
    (m, prefills)
}

/// Sequence lengths of the encoder's passes.
const LENGTHS: [usize; 4] = [40, 72, 96, 128];

/// Runs `passes` encoder passes under `key`, each at a length drawn from [`LENGTHS`];
/// returns the deltas over the last `measured`.
fn encoder(key: &str, passes: usize, measured: usize) -> Measured {
    encoder_with(key, passes, measured, |len| {
        let mut none = Vec::new();
        transformer(len, len, &mut none);
    })
}

/// Runs `passes` passes of `run` under `key`, each at a length drawn from [`LENGTHS`];
/// returns the deltas over the last `measured`.
fn encoder_with(key: &str, passes: usize, measured: usize, run: impl Fn(usize)) -> Measured {
    let mut m = Measured::default();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..passes {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let len = LENGTHS[(seed % 4) as usize];
        let d = delta(key, || {
            let _p = memo_alloc::pass(key);
            run(len);
        });
        if i + measured >= passes {
            m.add(&d);
        }
    }
    m
}

/// What a stretch of passes did.
#[derive(Default, Debug)]
struct Measured {
    passes: u64,
    profiled: u64,
    hits: u64,
    misses: u64,
    reasons: Vec<(String, u64)>,
}

impl Measured {
    fn add(&mut self, d: &(Vec<PassReport>, Vec<PassReport>)) {
        self.passes += 1;
        self.add_profiles(d);
        let sum = |rs: &[PassReport], f: &dyn Fn(&PassReport) -> u64| rs.iter().map(f).sum::<u64>();
        let (before, after) = d;
        self.hits += sum(after, &|r| r.slab_hits) - sum(before, &|r| r.slab_hits);
        self.misses += sum(after, &|r| r.misses_by_reason.total())
            - sum(before, &|r| r.misses_by_reason.total());
        for (i, reason) in memo_alloc::MissReason::ALL.into_iter().enumerate() {
            if self.reasons.len() <= i {
                self.reasons.push((reason.name().to_string(), 0));
            }
            self.reasons[i].1 += sum(after, &|r| r.misses_by_reason.get(reason))
                - sum(before, &|r| r.misses_by_reason.get(reason));
        }
    }

    fn add_profiles(&mut self, (before, after): &(Vec<PassReport>, Vec<PassReport>)) {
        let profiled = |rs: &[PassReport]| rs.iter().map(|r| r.passes_profiled).sum::<u64>();
        self.profiled += profiled(after) - profiled(before);
    }

    /// Slab hits over the replayed passes' allocations.
    fn share(&self) -> f64 {
        self.hits as f64 / (self.hits + self.misses).max(1) as f64
    }

    /// Misses of reason `name`.
    fn reason(&self, name: &str) -> u64 {
        self.reasons
            .iter()
            .find(|(r, _)| r == name)
            .map_or(0, |r| r.1)
    }
}

/// A decoding key's steps settled into one plan beside the prefill's class: at most two
/// profiles, no step short of room, every request but the escaping cache served.
fn assert_steps_settled(key: &str, m: &Measured) {
    assert!(m.profiled <= 2, "settled: {m:?}");
    assert_eq!(
        m.reason("too_large"),
        0,
        "the steps' slots have room: {m:?}"
    );
    // The cache blocks escape each step (one per layer): every other request is served.
    let served = m.hits as f64 / (m.hits + m.misses - m.reason("escaping")) as f64;
    assert!(served >= 0.95, "{served}: {m:?}");
    assert_eq!(
        classes(key),
        1,
        "the steps are one class, the prefill another"
    );
}

/// The shape classes of `key` beyond its own, as its report counts them; the keys
/// named as its classes agree.
fn classes(key: &str) -> usize {
    let class = format!("{key}#");
    let named = memo_alloc::keys()
        .iter()
        .filter(|k| k.starts_with(&class))
        .count();
    let reported = memo_alloc::report(key).map_or(0, |r| r.shape_classes as usize);
    assert_eq!(reported, named, "{key}'s report and keys()");
    reported
}

#[test]
fn an_encoder_of_four_lengths_under_one_key_replays_from_a_plan_per_length() {
    let _g = serial_inline();
    let m = encoder("encoder-4", 400, 300);
    eprintln!("encoder: {m:?} share {:.4}", m.share());
    assert!(m.share() >= 0.98, "{m:?}");
    assert_eq!(m.profiled, 0, "settled: {m:?}");
    assert_eq!(classes("encoder-4"), 3, "one class per length");
}

#[test]
fn an_encoder_of_four_lengths_settles_once_each_length_was_seen_a_few_times() {
    let _g = serial_inline();
    // The draw sees every length at least twice in its first 16 passes. Once the key
    // founds a class, the window of its own plan counts its own class's passes only: the
    // passes of other lengths that diverged on that plan before do not re-profile it.
    let m = encoder("encoder-4-early", 60, 44);
    eprintln!("encoder, early: {m:?} share {:.4}", m.share());
    assert_eq!(m.profiled, 0, "settled after 16 passes: {m:?}");
    assert!(m.share() >= 0.98, "{m:?}");
}

#[test]
fn an_encoder_whose_requests_are_all_inside_op_scopes_replays_from_a_plan_per_length() {
    let _g = serial_inline();
    let m = encoder_with("encoder-4-ops", 400, 300, |len| {
        transformer_in_ops(len, len)
    });
    eprintln!("encoder in ops: {m:?} share {:.4}", m.share());
    assert!(m.share() >= 0.98, "{m:?}");
    assert_eq!(m.profiled, 0, "settled: {m:?}");
    assert_eq!(classes("encoder-4-ops"), 3, "one class per length");
}

#[test]
fn an_encoder_whose_first_large_request_is_the_same_at_every_length_is_told_apart_past_it() {
    let _g = serial_inline();
    // An interpreter's table of live tensors: sized by the model, not the length, made
    // before the first op and kept to the end of the pass.
    let m = encoder_with("encoder-4-table", 400, 300, |len| {
        let table = black_box(vec![0u64; 96]);
        transformer_in_ops(len, len);
        drop(table);
    });
    eprintln!("encoder with a table: {m:?} share {:.4}", m.share());
    assert_eq!(m.profiled, 0, "settled: {m:?}");
    assert_eq!(classes("encoder-4-table"), 3, "one class per length");
    // The table is asked for before the decision (on the backend); every request after
    // it is served from its length's slab.
    assert_eq!(m.misses, m.reason("no_slab"), "{m:?}");
    assert_eq!(m.misses, m.passes, "{m:?}");
}

/// The steps of a key's first decoding request that were profiled (numbered from 1).
fn first_request_profiles(key: &str) -> Vec<usize> {
    let mut cache = Vec::new();
    let prefill = delta(key, || {
        let _p = memo_alloc::pass(key);
        transformer(PROMPT, PROMPT, &mut cache);
    });
    let mut m = Measured::default();
    m.add_profiles(&prefill);
    assert_eq!(m.profiled, 1, "the prefill is the key's first pass");
    (1..=STEPS)
        .filter(|&step| {
            let d = delta(key, || {
                let _p = memo_alloc::pass(key);
                transformer(1, PROMPT + step, &mut cache);
            });
            let mut m = Measured::default();
            m.add_profiles(&d);
            m.profiled > 0
        })
        .collect()
}

#[test]
fn a_decoding_steps_plan_is_made_early_in_the_first_request() {
    let _g = serial_inline();
    // The prefill's plan, which no step fits, is profiled again after one window of
    // steps, and the steps' plan is merged with a second profile one window later; the
    // growing attention then outgrows that plan's headroom (four more steps of the
    // growth its two profiles saw) once in the request.
    let profiled = first_request_profiles("decode-first");
    eprintln!("first request, steps profiled: {profiled:?}");
    assert!(profiled.len() <= 3, "steps profiled: {profiled:?}");
    assert!(
        profiled.iter().take(2).all(|&s| s <= 8),
        "steps profiled: {profiled:?}"
    );
}

#[test]
fn a_decoding_step_whose_cache_grows_settles_apart_from_its_prefill() {
    let _g = serial_inline();
    let (m, prefills) = decode("decode-steps", 40, 30);
    eprintln!("decode: {m:?} share {:.4}", m.share());
    eprintln!("prefills: {prefills:?} share {:.4}", prefills.share());
    assert_steps_settled("decode-steps", &m);
}

#[test]
fn a_key_of_many_shapes_keeps_its_classes_within_the_bound() {
    let _g = serial_inline();
    let max = memo_alloc::config::config().max_classes;
    for i in 0..200 {
        let _p = memo_alloc::pass("many-shapes");
        let mut none = Vec::new();
        transformer(1 + i % 24, 1 + i % 24, &mut none);
    }
    assert!(classes("many-shapes") < max, "{}", classes("many-shapes"));
    assert!(classes("many-shapes") > 1);
}

#[test]
fn a_decoding_step_whose_first_request_is_close_to_its_prefills_settles_apart_from_it() {
    let _g = serial_inline();
    // An interpreter's table of the graph it runs: the prefill's and a step's within the
    // close ratio of each other; the passes part at their next large request.
    let (m, prefills) = decode_with_table("decode-table", 40, 30, Some((1880, 2256)));
    eprintln!("decode with a table: {m:?} share {:.4}", m.share());
    eprintln!("prefills: {prefills:?} share {:.4}", prefills.share());
    assert_steps_settled("decode-table", &m);
    assert!(
        prefills.share() >= 0.8,
        "the prefill replays its own plan: {prefills:?}"
    );
}

/// A deep encoder at `tokens`, layer after layer: seven blocks that scale with the length
/// and the attention scores, with its square. Against the longest length's plan, the
/// middle lengths replay as a smaller shape of it (`replay::matching`, rule 5); the
/// shortest one's scores are too small for that, one miss a layer.
fn deep_encoder(tokens: usize) {
    for _ in 0..24 {
        let x = block(tokens * HIDDEN);
        let qkv = block(3 * tokens * HIDDEN);
        let scores = block(tokens * tokens * 16);
        let attn = block(tokens * HIDDEN);
        drop((scores, qkv));
        let up = block(4 * tokens * HIDDEN);
        let act = block(4 * tokens * HIDDEN);
        let down = block(tokens * HIDDEN);
        let out = block(tokens * HIDDEN);
        drop((up, act, attn, x, down));
        black_box(out);
    }
}

#[test]
fn a_rare_length_that_diverges_between_fitting_ones_founds_its_class() {
    let _g = serial_inline();
    // The first pass at the longest length; then one pass in seven at the shortest,
    // each missing an eighth of its requests on that plan: no window of three passes
    // averages past the replan ratio.
    const KEY: &str = "encoder-rare";
    let order = [128, 96, 72, 96, 72, 128, 40];
    let mut m = Measured::default();
    for i in 0..70 {
        let d = delta(KEY, || {
            let _p = memo_alloc::pass(KEY);
            deep_encoder(order[i % order.len()]);
        });
        if i >= 28 {
            m.add(&d);
        }
    }
    eprintln!("rare length: {m:?} share {:.4}", m.share());
    assert_eq!(m.profiled, 0, "settled: {m:?}");
    assert!(classes(KEY) >= 1, "the shortest length has a class");
    assert!(m.share() >= 0.995, "{m:?}");
}
