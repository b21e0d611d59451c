use super::*;
use crate::study::tests::sample;
use crate::study::Study;

/// Each sample as (frame names leaf first, values).
fn named_samples(p: &Profile) -> Vec<(Vec<&str>, Vec<i64>)> {
    let name = |loc: u64| {
        let l = p.location.iter().find(|l| l.id == loc).expect("location");
        let f = p
            .function
            .iter()
            .find(|f| f.id == l.line[0].function_id)
            .expect("function");
        p.string_table[f.name as usize].as_str()
    };
    p.sample
        .iter()
        .map(|s| {
            (
                s.location_id.iter().map(|&l| name(l)).collect(),
                s.value.clone(),
            )
        })
        .collect()
}

fn sum(p: &Profile, value: usize) -> i64 {
    p.sample.iter().map(|s| s.value[value]).sum()
}

#[test]
fn the_file_decodes_to_the_traces_totals_and_peak() {
    let t = sample();
    t.check().unwrap();
    let bytes = to_pprof(&t);
    assert_eq!(&bytes[..2], [0x1f, 0x8b], "gzipped");
    let p = decode(&bytes).unwrap();
    assert_eq!(p, to_profile(&t));
    assert_eq!(p.string_table[0], "");
    let types: Vec<(&str, &str)> = p
        .sample_type
        .iter()
        .map(|v| {
            (
                p.string_table[v.r#type as usize].as_str(),
                p.string_table[v.unit as usize].as_str(),
            )
        })
        .collect();
    assert_eq!(types, SAMPLE_TYPES);
    assert_eq!(
        p.string_table[p.default_sample_type as usize],
        "inuse_space"
    );
    let s = Study::of(&t);
    let calls = s.calls.alloc + s.calls.alloc_zeroed + s.calls.realloc;
    assert_eq!(sum(&p, 0), calls as i64);
    assert_eq!(sum(&p, 1), s.calls.bytes as i64);
    assert_eq!(sum(&p, 3), s.memory.peak_live as i64);
    let at_peak: u64 = s.peak_live_set.iter().map(|g| g.allocations).sum();
    assert_eq!(sum(&p, 2), at_peak as i64);
    assert_eq!(
        named_samples(&p),
        [
            (vec!["[op] a", "[pass] model"], vec![2, 164, 1, 100]),
            (vec!["[op] b", "[pass] model"], vec![2, 3000, 1, 2000]),
            (vec!["[pass] model"], vec![1, 10, 0, 0]),
        ]
    );
}

#[test]
fn call_site_frames_are_the_leaves_of_their_stacks() {
    let mut t = sample();
    // Innermost first, as captured.
    t.allocations[1].call_site = Some(vec![
        "<alloc::raw_vec::RawVec<T>>::grow_one".into(),
        "app::leaf".into(),
        "app::main".into(),
    ]);
    let p = decode(&to_pprof(&t)).unwrap();
    let samples = named_samples(&p);
    assert!(samples.contains(&(
        vec!["app::leaf", "app::main", "[op] a", "[pass] model"],
        vec![1, 100, 1, 100]
    )));
    assert!(samples.contains(&(vec!["[op] a", "[pass] model"], vec![1, 64, 0, 0])));
    // The standard library's frames inside the call site are left out.
    let names = &p.string_table;
    assert!(!names.iter().any(|n| n.contains("RawVec")), "{names:?}");
}

#[test]
fn ids_are_from_one_and_every_reference_resolves() {
    let mut t = sample();
    t.allocations[2].call_site = Some(vec!["app::grow".into(), "app::main".into()]);
    t.allocations[3].call_site = Some(vec!["app::grow".into(), "app::main".into()]);
    let p = to_profile(&t);
    let ids: Vec<u64> = p.location.iter().map(|l| l.id).collect();
    assert_eq!(ids, (1..=ids.len() as u64).collect::<Vec<_>>());
    assert_eq!(p.function.len(), p.location.len());
    for s in &p.sample {
        assert!(s.location_id.iter().all(|l| ids.contains(l)));
        assert_eq!(s.value.len(), SAMPLE_TYPES.len());
    }
    for f in &p.function {
        assert!((f.name as usize) < p.string_table.len());
    }
    assert_eq!(p.mapping.len(), 1);
    assert!(p.mapping[0].has_functions);
    assert_eq!(p.string_table[p.mapping[0].filename as usize], "model");
    assert!(p.location.iter().all(|l| l.mapping_id == 1));
    // One frame name, one function.
    let mut names: Vec<i64> = p.function.iter().map(|f| f.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), p.function.len());
}

#[test]
fn an_empty_trace_is_an_empty_profile() {
    let mut t = sample();
    t.allocations.clear();
    let p = decode(&to_pprof(&t)).unwrap();
    assert!(p.sample.is_empty());
    assert_eq!(p.sample_type.len(), 4);
}

#[test]
fn what_is_not_a_profile_is_refused() {
    assert!(decode(&[0x1f, 0x8b, 1, 2, 3]).unwrap_err().contains("gzip"));
    assert!(decode(&[0xff; 8]).unwrap_err().contains("pprof"));
}
