//! The runner's tests: graphs free every tensor once, passes are deterministic on any
//! thread and under memo's guards, divergent passes differ and repeat.

use std::rc::Rc;

use super::*;
use crate::engine::Divergence;
use crate::workloads::{Net, Spec, Variant};

/// Small instances of every architecture.
fn small() -> Vec<Spec> {
    Net::ALL
        .into_iter()
        .map(|net| {
            let size = match net {
                Net::Bert => 16,
                Net::Gpt2 => 8,
                _ => 32,
            };
            Spec::Net {
                net,
                batch: 2,
                size,
                variant: Variant::Scoped,
            }
        })
        .collect()
}

#[cfg(not(feature = "engine"))]
#[test]
fn candle_workloads_say_they_need_the_feature() {
    let err = Workload::build(&Spec::parse("candle:mobilenetv4").unwrap()).err();
    assert!(err.unwrap().contains("--features engine"));
}

#[test]
fn every_intermediate_tensor_is_freed_once_after_its_last_use() {
    for spec in small() {
        let Workload::Graph { graph, .. } = Workload::build(&spec).unwrap() else {
            unreachable!()
        };
        let frees = graph.frees_after();
        let mut freed = vec![0; graph.shapes.len()];
        for (i, f) in frees.iter().enumerate() {
            for &t in f {
                freed[t] += 1;
                // No later op reads a freed tensor.
                assert!(graph.ops[i + 1..].iter().all(|o| !o.inputs.contains(&t)));
            }
        }
        for (t, &n) in freed.iter().enumerate() {
            let kept = graph.inputs.contains(&t) || graph.outputs.contains(&t);
            assert_eq!(n, usize::from(!kept), "{}: tensor {t}", spec.name());
        }
    }
}

#[test]
fn helper_threads_compute_the_same_pass_every_time() {
    let spec = Spec::parse("resnet50:b1:s32+helpers").unwrap();
    assert_eq!(spec.name(), "resnet50:b1:s32+helpers");
    let w = Workload::build(&spec).unwrap();
    let Workload::Graph { graph, helpers, .. } = &w else {
        unreachable!()
    };
    assert!(*helpers);
    assert!(graph.ops.iter().any(|o| !o.temps.is_empty()));
    let r = GraphRunner::new(graph, Compute::from_scale(0.0)).with_helpers(true);
    let (a, left) = r.run_counted(true, Divergence::default());
    assert_eq!(left, 0);
    for _ in 0..3 {
        let (b, _) = r.run_counted(true, Divergence::default());
        assert_eq!(checksum(&a), checksum(&b));
    }
    // Another thread's runner, its tasks scheduled otherwise, agrees.
    let other = std::thread::scope(|s| {
        s.spawn(|| Runner::new(&w, Compute::from_scale(0.0)).run(0, None, true))
            .join()
            .unwrap()
    });
    assert_eq!(
        other,
        Runner::new(&w, Compute::from_scale(0.0)).run(0, None, true)
    );
}

#[test]
fn passes_are_deterministic_and_leave_only_outputs() {
    for compute in [0.0, 1.0, 3.0] {
        for spec in small() {
            let w = Workload::build(&spec).unwrap();
            let Workload::Graph { graph, .. } = &w else {
                unreachable!()
            };
            let r = GraphRunner::new(graph, Compute::from_scale(compute));
            let (a, left_a) = r.run_counted(true, Divergence::default());
            let (b, left_b) = r.run_counted(false, Divergence::default());
            assert_eq!((left_a, left_b), (0, 0), "{}", spec.name());
            assert_eq!(a.len(), graph.outputs.len());
            // The interpreter holds no reference to the outputs any more.
            assert!(a.iter().all(|t| Rc::strong_count(t) == 1));
            assert_eq!(checksum(&a), checksum(&b), "{}", spec.name());
            // A fresh runner (another thread) computes the same.
            let r2 = Runner::new(&w, Compute::from_scale(compute));
            assert_eq!(
                r2.run(0, None, true),
                Runner::new(&w, Compute::from_scale(compute)).run(0, None, false)
            );
        }
    }
}

#[test]
fn memo_passes_and_scopes_are_harmless_under_another_global_allocator() {
    // The unit-test binary runs on glibc (no MEMO_BENCH_ALLOCATOR): memo-alloc's pass
    // and op guards then record nothing and change nothing.
    let spec = Spec::parse("mobilenet_v2:b1:s32").unwrap();
    let w = Workload::build(&spec).unwrap();
    let r = Runner::new(&w, Compute::from_scale(1.0));
    let plain = r.run(0, None, false);
    for p in 0..3 {
        assert_eq!(r.run(p, Some(spec.key()), true), plain);
    }
    let rep = memo_alloc::report(&spec.name()).expect("the key was seen");
    assert_eq!(
        rep.allocations, 0,
        "nothing is recorded through another allocator"
    );
}

#[test]
fn divergent_passes_differ_and_repeat() {
    let spec = Spec::parse("resnet50:b1:s32+divergent").unwrap();
    let w = Workload::build(&spec).unwrap();
    assert_eq!(w.divergence(0), Divergence::default());
    let d = w.divergence(3);
    assert!(d.skip.is_some() && d.grow.is_some());
    assert_eq!(d, w.divergence(3));
    let r = Runner::new(&w, Compute::from_scale(1.0));
    let (c0, c3) = (r.run(0, None, true), r.run(3, None, true));
    assert_ne!(c0, c3);
    assert_eq!(c3, r.run(3, None, true));
    assert_eq!(c0, r.run(4, None, true));
    if let Workload::Graph { graph, .. } = &w {
        let (_, left) = GraphRunner::new(graph, Compute::from_scale(1.0)).run_counted(true, d);
        assert_eq!(left, 0);
    }
}

#[test]
fn allocation_profiles_span_real_networks() {
    // Table 3.1 of the thesis: hundreds to tens of thousands of allocations, MBs to
    // hundreds of MBs per pass.
    let mut counts = Vec::new();
    for s in [
        "mobilenet_v1:b1:s224",
        "inception_v3:b8:s224",
        "bert:b8:s128",
    ] {
        let spec = Spec::parse(s).unwrap();
        let (n, bytes) = Workload::build(&spec).unwrap().allocation_profile();
        assert!(bytes > 1 << 20, "{s}: {bytes}");
        counts.push(n);
    }
    assert!(counts.iter().any(|&n| n < 1000), "{counts:?}");
    assert!(counts.iter().any(|&n| n > 3000), "{counts:?}");
}
