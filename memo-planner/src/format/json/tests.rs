//! The JSON format's tests: one per error kind (file, line, column, key, wording),
//! both document shapes, plans, round trips, and random input that must never panic.

use super::*;
use crate::plan::SharedObjectsPlan;
use crate::problem::Buffer;
use proptest::prelude::*;

const NAME: &str = "t.json";

/// Asserts file, line, column, field and kind; returns the display string.
fn check(
    text: &str,
    line: usize,
    column: Option<usize>,
    field: Option<&str>,
    kind: FormatErrorKind,
) -> String {
    let e = match parse_problem_json(text, NAME) {
        Ok(p) => panic!("accepted {text:?} as {p:?}"),
        Err(e) => e,
    };
    assert_eq!(e.file, NAME, "{e}");
    assert_eq!(e.line, Some(line), "{e}");
    if column.is_some() {
        assert_eq!(e.column, column, "{e}");
    }
    assert_eq!(e.field.as_deref(), field, "{e}");
    assert_eq!(e.kind, kind, "{e}");
    e.to_string()
}

/// A document with `rows` as its buffer lines (buffer i on line 3 + i).
fn doc(rows: &[&str]) -> String {
    format!("{{\n  \"buffers\": [\n{}\n  ]\n}}\n", rows.join(",\n"))
}

const A: &str = r#"    {"id":"a","lower":0,"upper":2,"size":8}"#;

#[test]
fn accepts_documents_and_bare_arrays() {
    let expected = Problem::new(vec![
        Buffer::new("a", 0, 2, 8),
        Buffer::new("b", 1, 3, 4).with_align(16),
    ])
    .unwrap();
    for text in [
        r#"{"version":1,"buffers":[{"id":"a","lower":0,"upper":2,"size":8},
           {"size":4,"upper":3,"lower":1,"id":"b","alignment":16}],"comment":{"x":[1]}}"#,
        r#"{"buffers":[{"id":"a","lower":0,"upper":2,"size":8},
           {"id":"b","lower":1,"upper":3,"size":4,"align":16}]}"#,
        "\u{feff} [{\"id\":\"a\",\"lower\":0,\"upper\":2,\"size\":8},
           {\"id\":\"b\",\"lower\":1,\"upper\":3,\"size\":4,\"align\":16}]",
    ] {
        assert_eq!(
            parse_problem_json(text, NAME).unwrap(),
            (expected.clone(), None),
            "{text}"
        );
    }
    // The core serde form of a problem reads back too.
    let serde_text = serde_json::to_string(&expected).unwrap();
    assert_eq!(parse_problem_json(&serde_text, NAME).unwrap().0, expected);
}

#[test]
fn missing_key() {
    let msg = check(
        &doc(&[A, r#"    {"id":"b","lower":0,"size":8}"#]),
        4,
        None,
        Some("upper"),
        FormatErrorKind::MissingColumn,
    );
    assert_eq!(
        msg,
        r#"t.json:4:33: field "upper": missing key "upper" in buffer #1"#
    );
    check(
        r#"{"version":1}"#,
        1,
        None,
        Some("buffers"),
        FormatErrorKind::MissingColumn,
    );
}

#[test]
fn unknown_and_duplicate_keys() {
    check(
        &doc(&[r#"    {"id":"a","lower":0,"upper":2,"size":8,"aling":4}"#]),
        3,
        None,
        Some("aling"),
        FormatErrorKind::Schema,
    );
    check(
        &doc(&[r#"    {"id":"a","lower":0,"upper":2,"size":8,"size":8}"#]),
        3,
        None,
        Some("size"),
        FormatErrorKind::DuplicateColumn,
    );
    check(
        &doc(&[r#"    {"id":"a","lower":0,"upper":2,"size":8,"align":8,"alignment":8}"#]),
        3,
        None,
        Some("alignment"),
        FormatErrorKind::DuplicateColumn,
    );
}

#[test]
fn wrong_types_and_numbers() {
    let msg = check(
        &doc(&[A, r#"    {"id":"b","lower":0,"upper":2,"size":"12x"}"#]),
        4,
        Some(46),
        Some("size"),
        FormatErrorKind::NotANumber,
    );
    assert_eq!(
        msg,
        r#"t.json:4:46: field "size": invalid type: string "12x", expected a non-negative integer"#
    );
    check(
        &doc(&[r#"    {"id":"b","lower":0.5,"upper":2,"size":1}"#]),
        3,
        None,
        Some("lower"),
        FormatErrorKind::NotANumber,
    );
    check(
        &doc(&[r#"    {"id":7,"lower":0,"upper":2,"size":1}"#]),
        3,
        None,
        Some("id"),
        FormatErrorKind::Schema,
    );
    let msg = check(
        &doc(&[r#"    {"id":"b","lower":-3,"upper":2,"size":1}"#]),
        3,
        None,
        Some("lower"),
        FormatErrorKind::Negative,
    );
    assert!(
        msg.ends_with(r#"field "lower": -3 is negative: expected a non-negative integer"#),
        "{msg}"
    );
    check(
        &doc(&[r#"    {"id":"b","lower":0,"upper":2,"size":-1}"#]),
        3,
        None,
        Some("size"),
        FormatErrorKind::Negative,
    );
    check(
        &doc(&[r#"    {"id":"b","lower":0,"upper":18446744073709551616,"size":1}"#]),
        3,
        None,
        Some("upper"),
        FormatErrorKind::OutOfRange,
    );
    check("[1]", 1, Some(2), None, FormatErrorKind::Schema);
    check("\"buffers\"", 1, None, None, FormatErrorKind::Schema);
}

#[test]
fn invalid_buffers() {
    let msg = check(
        &doc(&[A, r#"    {"id":"b","lower":0,"upper":2,"size":0}"#]),
        4,
        Some(43),
        Some("size"),
        FormatErrorKind::ZeroSize,
    );
    assert_eq!(
        msg,
        r#"t.json:4:43: field "size": 0 must be positive (buffer #1)"#
    );
    check(
        &doc(&[r#"    {"id":"b","upper":2,"lower":2,"size":1}"#]),
        3,
        None,
        Some("upper"),
        FormatErrorKind::EmptyLifetime,
    );
    check(
        &doc(&[r#"    {"id":"b","lower":0,"upper":2,"size":1,"align":12}"#]),
        3,
        None,
        Some("align"),
        FormatErrorKind::BadAlignment,
    );
    let msg = check(
        &doc(&[A, A]),
        4,
        None,
        Some("id"),
        FormatErrorKind::DuplicateId,
    );
    assert!(
        msg.contains(r#"duplicate id "a": buffer #1 repeats buffer #0"#),
        "{msg}"
    );
    let half = u64::MAX / 2;
    let big = format!(r#"    {{"id":"b","lower":0,"upper":2,"size":{half}}}"#);
    let bigger = big.replace("\"b\"", "\"c\"");
    check(
        &doc(&[&big, &bigger]),
        4,
        None,
        Some("size"),
        FormatErrorKind::TooLarge,
    );
}

#[test]
fn offsets_all_or_none() {
    let text = doc(&[
        r#"    {"id":"a","lower":0,"upper":2,"size":8,"offset":0}"#,
        r#"    {"id":"b","lower":0,"upper":2,"size":8}"#,
    ]);
    check(
        &text,
        4,
        None,
        Some("offset"),
        FormatErrorKind::MissingOffset,
    );
    let text = doc(&[
        A,
        r#"    {"id":"b","lower":0,"upper":2,"size":8,"offset":8}"#,
    ]);
    check(
        &text,
        4,
        None,
        Some("offset"),
        FormatErrorKind::MissingOffset,
    );
}

#[test]
fn empty_syntax_version_no_buffers() {
    check("  \n", 1, None, None, FormatErrorKind::Empty);
    check("[]", 1, None, None, FormatErrorKind::NoBuffers);
    check(
        r#"{"buffers": []}"#,
        1,
        None,
        None,
        FormatErrorKind::NoBuffers,
    );
    check(
        &doc(&[A]).replace("8}", "8"),
        4,
        None,
        None,
        FormatErrorKind::Syntax,
    );
    check(
        &format!("{}x", doc(&[A])),
        6,
        Some(1),
        None,
        FormatErrorKind::Syntax,
    );
    check("[{\"id\":", 1, None, Some("id"), FormatErrorKind::Syntax);
    let msg = check(
        "{\"version\": 2, \"buffers\": []}",
        1,
        Some(13),
        Some("version"),
        FormatErrorKind::UnsupportedVersion,
    );
    assert_eq!(
        msg,
        r#"t.json:1:13: field "version": unsupported version 2 (this reader knows 1)"#
    );
    check("[[]]", 1, None, None, FormatErrorKind::Schema);
    let deep = format!("{{\"x\": {}", "[".repeat(10_000));
    check(&deep, 1, Some(10_006), None, FormatErrorKind::Syntax);
}

#[test]
fn plans() {
    let plan = OffsetPlan {
        offsets: vec![0, 8, u64::MAX],
    };
    let mut out = Vec::new();
    write_plan_json(&mut out, &plan).unwrap();
    assert_eq!(
        parse_plan_json_bytes::<OffsetPlan>(&out, NAME).unwrap(),
        plan
    );
    let shared = SharedObjectsPlan {
        object_ids: vec![0, 1, 0],
        object_sizes: vec![8, 4],
    };
    let mut out = Vec::new();
    write_plan_json(&mut out, &shared).unwrap();
    assert_eq!(
        parse_plan_json_bytes::<SharedObjectsPlan>(&out, NAME).unwrap(),
        shared
    );
    let e = parse_plan_json::<OffsetPlan>("{\n\"offsets\": [1, -2]}", NAME).unwrap_err();
    assert_eq!((e.line, e.kind), (Some(2), FormatErrorKind::Schema));
    let e = parse_plan_json::<OffsetPlan>("{}", NAME).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("offsets"));
    assert_eq!(
        e.to_string(),
        r#"t.json:1:2: field "offsets": missing field `offsets`"#
    );
    let e = parse_plan_json::<OffsetPlan>("", NAME).unwrap_err();
    assert_eq!((e.line, e.kind), (Some(1), FormatErrorKind::Empty));
}

#[test]
fn round_trip_with_and_without_alignment() {
    let plain = crate::fixtures::minimalloc_example();
    let text = problem_to_json(&plain, None);
    assert!(!text.contains("align"), "{text}");
    assert_eq!(parse_problem_json(&text, NAME).unwrap(), (plain, None));
    let aligned = Problem::new(vec![
        Buffer::new("x\"\n\u{e9}", 0, u64::MAX, 1 << 50).with_align(1 << 20),
        Buffer::new("", 3, 4, 1),
    ])
    .unwrap();
    let plan = OffsetPlan {
        offsets: vec![0, 7],
    };
    let text = problem_to_json(&aligned, Some(&plan));
    assert!(text.contains(r#""align":1048576,"offset":0}"#), "{text}");
    assert_eq!(
        parse_problem_json(&text, NAME).unwrap(),
        (aligned, Some(plan))
    );
}

proptest! {
    #[test]
    fn round_trips(p in crate::fixtures::strategies::problem(20), with_plan in any::<bool>()) {
        prop_assume!(!p.is_empty());
        let plan = with_plan.then(|| OffsetPlan { offsets: (0..p.len() as u64).rev().collect() });
        let text = problem_to_json(&p, plan.as_ref());
        prop_assert_eq!(parse_problem_json(&text, NAME).unwrap(), (p, plan));
    }

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = parse_problem_json_bytes(&bytes, NAME);
        let _ = parse_plan_json_bytes::<OffsetPlan>(&bytes, NAME);
    }

    #[test]
    fn mutated_json_never_panics(
        p in crate::fixtures::strategies::problem(6),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), 0u8..3, prop::sample::select(
            b",\"\n[]{}:-019.ex\xff".to_vec())), 1..6),
    ) {
        prop_assume!(!p.is_empty());
        let mut bytes = problem_to_json(&p, None).into_bytes();
        for (at, op, byte) in edits {
            let i = at.index(bytes.len() + 1);
            match op {
                0 => bytes.insert(i, byte),
                1 if i < bytes.len() => { bytes.remove(i); }
                _ if i < bytes.len() => bytes[i] = byte,
                _ => {}
            }
        }
        if let Err(e) = parse_problem_json_bytes(&bytes, NAME) {
            prop_assert_eq!(e.file.as_str(), NAME);
            prop_assert!(e.line.is_some());
        }
    }
}
