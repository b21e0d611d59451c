use super::*;
use crate::study::tests::sample;
use memo_alloc::trace::TraceScope;

/// The sample with op `a`'s first buffer grown from 64 to 512 B, the pass's own escaping
/// buffer gone, and a new op `c` making 50 B at call site `app::new`.
fn grown() -> Trace {
    let mut t = sample();
    t.allocations[0].size = 512;
    t.allocations[4].scope = 4;
    t.allocations[4].size = 50;
    t.allocations[4].alloc = 14;
    t.allocations[4].free = Some(15);
    t.allocations[4].escaping = false;
    t.allocations[4].call_site = Some(vec!["app::new".into()]);
    t.scopes.push(TraceScope {
        id: 4,
        parent: Some(0),
        name: "c".into(),
        occurrence: 0,
        enter: Some(13),
        exit: Some(15),
    });
    t
}

fn with_load_site(mut t: Trace) -> Trace {
    t.allocations[1].call_site = Some(vec!["app::load".into()]);
    t
}

fn figures(allocations: u64, bytes: u64, peak_live_bytes: u64) -> Figures {
    Figures {
        allocations,
        bytes,
        peak_live_bytes,
    }
}

fn summary(rows: &[DiffRow]) -> Vec<(&str, Presence, i64, i64, i64)> {
    rows.iter()
        .map(|r| {
            let d = r.delta;
            (
                r.group.as_str(),
                r.present,
                d.allocations,
                d.bytes,
                d.peak_live_bytes,
            )
        })
        .collect()
}

#[test]
fn ops_are_matched_by_path_the_largest_change_first() {
    let (a, b) = (with_load_site(sample()), with_load_site(grown()));
    a.check().unwrap();
    b.check().unwrap();
    let d = diff(&a, &b);
    assert_eq!(d.a.totals, figures(5, 3174, 2100));
    assert_eq!(d.b.totals, figures(5, 3662, 2100));
    assert_eq!(d.delta.bytes, 488);
    assert_eq!(
        summary(&d.by_op),
        [
            ("a", Presence::Both, 0, 448, 0),
            ("c", Presence::BOnly, 1, 50, 0),
            ("(model)", Presence::AOnly, -1, -10, 0),
            ("b", Presence::Both, 0, 0, 0),
        ]
    );
    let a_row = &d.by_op[0];
    assert_eq!(a_row.a, figures(2, 164, 100));
    assert_eq!(a_row.b, figures(2, 612, 100));
    assert_eq!(d.by_op[1].a, Figures::default(), "only in B: nothing in A");
    assert_eq!(d.by_op[2].b, Figures::default(), "only in A: nothing in B");
    assert_eq!(
        summary(&d.by_call_site),
        [
            ("?", Presence::Both, -1, 438, 0),
            ("app::new", Presence::BOnly, 1, 50, 0),
            ("app::load", Presence::Both, 0, 0, 0),
        ]
    );
}

#[test]
fn a_trace_against_itself_changes_nothing() {
    let t = sample();
    let d = diff(&t, &t);
    assert_eq!(d.delta, Delta::default());
    assert!(d
        .by_op
        .iter()
        .all(|r| r.present == Presence::Both && r.a == r.b));
    // Every row unchanged: in name order.
    let names: Vec<&str> = d.by_op.iter().map(|r| r.group.as_str()).collect();
    assert_eq!(names, ["(model)", "a", "b"]);
}

#[test]
fn equal_byte_changes_are_ordered_by_peak_then_allocations_then_name() {
    let t = |op: &str, allocations, bytes, peak_live_bytes| Totals {
        op: op.into(),
        site: "?".into(),
        allocations,
        bytes,
        peak_live_bytes,
    };
    let a = [
        t("x", 1, 100, 0),
        t("y", 1, 100, 0),
        t("z", 1, 100, 0),
        t("w", 1, 100, 0),
    ];
    let b = [
        t("x", 1, 200, 10),
        t("y", 1, 0, 50),
        t("z", 3, 200, 10),
        t("w", 1, 200, 10),
    ];
    let rows = rows(&a, &b, |t| &t.op);
    let order: Vec<&str> = rows.iter().map(|r| r.group.as_str()).collect();
    assert_eq!(order, ["y", "z", "w", "x"]);
    assert_eq!(rows[0].delta.bytes, -100, "a fall counts by its size");
}
