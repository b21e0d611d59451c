//! Tests of plan compilation: renumbering, address groups, rejected documents, demotion.

use super::*;
use crate::format::trace::{PlanLanes, PlanSlot, TraceScope, FORMAT_VERSION, PLAN_FORMAT};
use crate::memory::geometry::SLAB_ALIGN;

fn scope(id: u32, parent: Option<u32>, name: &str, occurrence: u32) -> TraceScope {
    TraceScope {
        enter: None,
        exit: None,
        id,
        parent,
        name: name.into(),
        occurrence,
    }
}

fn slot(scope: u32, ordinal: u32, size: u64, offset: Option<u64>) -> PlanSlot {
    PlanSlot {
        scope,
        ordinal,
        size,
        min_size: None,
        align: 16,
        offset,
        lifetime: None,
    }
}

fn file() -> PlanFile {
    PlanFile {
        format: PLAN_FORMAT.into(),
        version: FORMAT_VERSION,
        key: "k".into(),
        strategy: "best".into(),
        height: 256,
        lower_bound: 256,
        naive: 400,
        scopes: vec![
            scope(0, None, "k", 0),
            scope(1, Some(0), "conv", 0),
            scope(2, Some(0), "relu", 0),
            scope(3, Some(0), "conv", 1),
            scope(4, Some(3), "im2col", 0),
        ],
        slots: vec![
            slot(0, 0, 256, Some(0)),
            slot(1, 0, 64, Some(0)),
            slot(1, 1, 64, Some(64)),
            slot(3, 0, 128, Some(128)),
            slot(4, 0, 16, None),
            slot(2, 2, 32, Some(160)),
        ],
        lanes: Default::default(),
    }
}

fn flags(c: &CompiledPlan, i: u32) -> u8 {
    c.slots[i as usize].flag_bits()
}

/// Each node's cursor starts at its first escaping lane ordinal; a listed request
/// escapes only with its listed class, and the node's next one follows.
#[test]
fn lane_escapes_are_found_by_node_and_count() {
    let mut f = file();
    let e = |scope, ordinal, cell| crate::format::trace::LaneEscape {
        scope,
        ordinal,
        cell,
    };
    f.lanes = PlanLanes {
        max: 64,
        cells: vec![4, 4, 4],
        requests: 20,
        // Scope 3 is the second `conv`; scope 1 the first.
        escapes: vec![e(1, 2, 16), e(1, 7, 64), e(3, 0, 32)],
    };
    let c = CompiledPlan::compile(&f).unwrap();
    let (conv, _) = c.scope_group(0, "conv").unwrap();
    let cursors = c.initial_cursors();
    assert_eq!(cursors[conv as usize].escape, 2);
    assert_eq!(cursors[conv as usize + 1].escape, 0);
    assert_eq!(cursors[0].escape, NO_SLOT, "the root lists none");
    assert_eq!(c.lane_escape(conv, 2, 0), (true, 7));
    assert_eq!(c.lane_escape(conv, 2, 1), (false, 7), "another class");
    assert_eq!(c.lane_escape(conv, 7, 2), (true, NO_SLOT));
    assert_eq!(c.lane_escape(conv + 1, 0, 1), (true, NO_SLOT));
    assert!(c.lists_lane_escapes());
    assert!(!CompiledPlan::compile(&file()).unwrap().lists_lane_escapes());
}

/// Each op's cursor names what entering it prefetches: the first slot of the op entered
/// next, and the cursor, scope group and occurrence count of the op entered after that.
#[test]
fn each_op_links_the_lookups_of_the_ops_entered_after_it() {
    let c = CompiledPlan::compile(&file()).unwrap();
    let (conv, _) = c.scope_group(0, "conv").unwrap();
    let (relu, _) = c.scope_group(0, "relu").unwrap();
    let (im2col, _) = c.scope_group(conv + 1, "im2col").unwrap();
    let cursors = c.initial_cursors();
    let group = |parent, name| find_group(&c.scope_groups, parent, name).unwrap() as u32;
    // Entered: conv, relu, conv (its second occurrence), im2col under it.
    let first_conv = cursors[conv as usize].ahead;
    assert_eq!(first_conv.slot, cursors[relu as usize].start);
    assert_eq!(first_conv.node, conv + 1);
    assert_eq!(
        (first_conv.group, first_conv.base),
        (group(0, "conv"), conv)
    );
    let at_relu = cursors[relu as usize].ahead;
    assert_eq!(at_relu.slot, cursors[conv as usize + 1].start);
    assert_eq!(at_relu.node, im2col);
    assert_eq!(
        (at_relu.group, at_relu.base),
        (group(conv + 1, "im2col"), im2col)
    );
    let second_conv = cursors[conv as usize + 1].ahead;
    assert_eq!(second_conv.slot, cursors[im2col as usize].start);
    assert_eq!(second_conv.node, NO_SLOT, "no op two ahead");
    assert_eq!(cursors[im2col as usize].ahead, Ahead::NONE, "the last op");
    assert_eq!(cursors[0].ahead, Ahead::NONE, "the root prefetches nothing");
}

#[test]
fn renumbers_sibling_occurrences_contiguously() {
    let c = CompiledPlan::compile(&file()).unwrap();
    let (conv, n) = c.scope_group(0, "conv").unwrap();
    assert_eq!(n, 2);
    assert!(c.scope_group(0, "pool").is_none());
    let (im2col, _) = c.scope_group(conv + 1, "im2col").unwrap();
    assert!(c.scope_group(conv, "im2col").is_none());
    let s = c.slot_index(im2col, 0).unwrap();
    assert_eq!(flags(&c, s), ESCAPING);
    let (relu, _) = c.scope_group(0, "relu").unwrap();
    assert!(c.slot_index(relu, 0).is_some_and(|s| flags(&c, s) == 0));
    assert!(c.slot_index(relu, 3).is_none());
    assert_eq!(c.slots.iter().filter(|s| s.in_slab()).count(), 5);
    assert_eq!(c.nodes(), 5);
}

#[test]
fn address_groups_and_the_runs_slots_cover() {
    let c = CompiledPlan::compile(&file()).unwrap();
    assert_eq!(c.groups(), 4);
    let root = &c.slots[c.slot_index(0, 0).unwrap() as usize];
    assert_eq!((root.group, root.group_end), (0, 4));
    // The slot at 160 covers its own group only; the 128-byte slot at 128 covers 128
    // and 160.
    let runs: Vec<(u32, u32)> = c
        .slots
        .iter()
        .filter(|s| s.in_slab() && s.group >= 2)
        .map(|s| (s.group, s.group_end))
        .collect();
    assert!(runs.contains(&(3, 4)) && runs.contains(&(2, 4)), "{runs:?}");
    for (g, o) in [0, 64, 128, 160].into_iter().enumerate() {
        assert_eq!(c.group_at(o), Some(g as u32));
    }
    assert_eq!(c.group_at(8), None);
    assert_eq!(
        c.slots[c.slot_index(0, 0).unwrap() as usize].max_align(),
        SLAB_ALIGN
    );
    let (relu, _) = c.scope_group(0, "relu").unwrap();
    assert_eq!(
        c.slots[c.slot_index(relu, 2).unwrap() as usize].max_align(),
        32
    );
}

#[test]
fn rejects_bad_documents() {
    let mut f = file();
    f.slots.push(slot(1, 0, 8, Some(0)));
    assert!(CompiledPlan::compile(&f).is_err());
    let mut f = file();
    f.slots[0].offset = Some(8);
    assert!(
        CompiledPlan::compile(&f).is_err(),
        "offset past height / misaligned"
    );
    let mut f = file();
    f.scopes.push(scope(5, Some(0), "conv", 1));
    assert!(CompiledPlan::compile(&f).is_err());
    let mut f = file();
    f.version = 99;
    assert!(CompiledPlan::compile(&f).is_err());
}

#[test]
fn rejects_sparse_numbering_before_sizing_tables() {
    // An ordinal past the number of slots would size a table by the ordinal.
    let mut f = file();
    f.slots[0].ordinal = 4_000_000_000;
    let e = CompiledPlan::compile(&f).unwrap_err();
    assert!(e.0.contains("ordinal"), "{e}");
    // u32::MAX as an occurrence does not overflow the numbering.
    let mut f = file();
    f.scopes[3].occurrence = u32::MAX;
    let e = CompiledPlan::compile(&f).unwrap_err();
    assert!(e.0.contains("occurrence"), "{e}");
    // Occurrences below the scope count but sparse: nodes would outnumber scopes.
    let mut f = file();
    f.scopes[3].occurrence = 4;
    let e = CompiledPlan::compile(&f).unwrap_err();
    assert!(e.0.contains("densely"), "{e}");
    // Ordinals below the slot count but sparse in many scopes.
    let mut f = file();
    for (i, s) in f.slots.iter_mut().enumerate() {
        s.ordinal = 5 - i as u32;
    }
    assert!(CompiledPlan::compile(&f).is_ok(), "slack is allowed");
    let mut f = file();
    f.height = 1 << 40;
    assert!(CompiledPlan::compile(&f).unwrap_err().0.contains("height"));
    let mut f = file();
    f.slots[0].align = 1 << 22;
    f.slots[0].offset = Some(0);
    assert!(CompiledPlan::compile(&f)
        .unwrap_err()
        .0
        .contains("alignment"));
}

/// `n` slots nested in address (slot `i` at offset `16 i`, all reaching `16 n + 16`):
/// each one's range covers every later one's group, quadratic without demotion;
/// then `n` small disjoint slots above them, which are cheap.
fn nested(n: u32) -> PlanFile {
    let mut f = file();
    f.scopes.truncate(1);
    let top = 16 * n as u64 + 16;
    f.height = 2 * top;
    f.slots = (0..n)
        .map(|i| slot(0, i, top - 16 * i as u64, Some(16 * i as u64)))
        .chain((0..n).map(|i| slot(0, n + i, 16, Some(top + 16 * i as u64))))
        .collect();
    f
}

/// An engine's plan: `k` long-lived slots at staggered offsets reaching over `groups`
/// addresses above them, each of which `reuse` short-lived small slots take in turn
/// (as a real pass reuses the same few addresses thousands of times).
fn reused_addresses(k: u32, groups: u32, reuse: u32) -> PlanFile {
    let mut f = file();
    f.scopes.truncate(1);
    let top = 16 * (k + groups) as u64;
    f.height = top;
    let big = (0..k).map(|i| (top - 16 * i as u64, 16 * i as u64));
    let small = (0..groups * reuse).map(|j| (16, 16 * (k + j / reuse) as u64));
    f.slots = big
        .chain(small)
        .enumerate()
        .map(|(i, (size, offset))| slot(0, i as u32, size, Some(offset)))
        .collect();
    f
}

#[test]
#[cfg_attr(miri, ignore = "40,064 slots: tens of minutes under Miri")]
fn plans_that_reuse_addresses_often_keep_every_slot() {
    // Each small slot lies under all 64 long ones: a check through the groups below
    // it that reach past it would cost 64 words per hand-out, 2.7M in all (budget
    // 1.3M); covering its own group costs one.
    let c = CompiledPlan::compile(&reused_addresses(64, 1000, 40)).unwrap();
    assert_eq!(c.demoted(), 0);
    let small = &c.slots[64..];
    assert!(small.iter().all(|s| s.group_end == s.group + 1));
}

#[test]
#[cfg_attr(miri, ignore = "20,000 nested slots: tens of minutes under Miri")]
fn heavily_overlapping_plans_compile_to_linear_tables() {
    let n = 20_000;
    let c = CompiledPlan::compile(&nested(n)).unwrap();
    let budget = check_budget(2 * n as usize, 0);
    let cost: u64 = c.slots.iter().filter(|s| s.in_slab()).map(check_cost).sum();
    assert!(cost <= budget, "check cost {cost} > {budget}");
    assert!(c.demoted() > 0);
    assert!(
        c.slots[n as usize..].iter().all(|s| s.in_slab()),
        "the cheap slots stay in the slab"
    );
    // A plan without heavy overlap demotes nothing.
    assert_eq!(CompiledPlan::compile(&file()).unwrap().demoted(), 0);
}

#[test]
fn slots_whose_blocks_keep_outliving_passes_are_demoted() {
    let c = CompiledPlan::compile(&file()).unwrap();
    let s = c.slot_index(0, 0).unwrap();
    let t = c.slot_index(0, 0).unwrap() + 1;
    // Outliving now and then (further apart than the window) demotes nothing.
    for k in 0..5 {
        assert!(!c.note_outlived(t, 1 + k * (OUTLIVED_WINDOW + 1)));
    }
    assert!(c.slots[t as usize].in_slab());
    // Twice within the window demotes, once.
    assert!(!c.note_outlived(s, 100));
    assert!(c.slots[s as usize].in_slab());
    assert!(c.note_outlived(s, 102));
    assert!(!c.slots[s as usize].in_slab());
    assert!(!c.note_outlived(s, 103), "demoted once");
    assert_eq!(c.demoted(), 1);
}

#[test]
fn an_escaping_slot_matches_half_to_twice_its_size_and_merges_as_seen() {
    let c = CompiledPlan::compile(&file()).unwrap();
    let escaping = c
        .slots
        .iter()
        .find(|s| s.flag_bits() & ESCAPING != 0)
        .expect("the file's escaping slot");
    // Served by the backend whatever it matches: a decoding step's cache, a little
    // shorter or longer than the profiled step's, keeps the pass's place.
    assert!(escaping.matches(8) && escaping.matches(32));
    assert!(!escaping.matches(7) && !escaping.matches(33));
    // A re-profile merges with what the profile saw, not with the wider range.
    assert_eq!(escaping.seen(), (16, 16));
    let planned = c.slots.iter().find(|s| s.in_slab()).unwrap();
    assert_eq!(planned.seen(), (planned.min_size(), planned.size));
}
