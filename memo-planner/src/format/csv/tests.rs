//! The CSV format's tests: one per error kind (file, line, field, wording), every
//! accepted layout, round trips, and random input that must never panic.

use std::io;

use super::*;
use crate::problem::ProblemError;
use proptest::prelude::*;

const NAME: &str = "t.csv";

fn fail(text: &str) -> FormatError {
    match parse_problem_csv(text, NAME) {
        Ok(p) => panic!("accepted {text:?} as {p:?}"),
        Err(e) => e,
    }
}

/// Asserts file, line, field and kind, and returns the display string.
fn check(text: &str, line: usize, field: Option<&str>, kind: FormatErrorKind) -> String {
    let e = fail(text);
    assert_eq!(e.file, NAME, "{e}");
    assert_eq!(e.line, Some(line), "{e}");
    assert_eq!(e.field.as_deref(), field, "{e}");
    assert_eq!(e.kind, kind, "{e}");
    assert_eq!(e.column, None, "{e}");
    e.to_string()
}

const H: &str = "id,lower,upper,size\n";

#[test]
fn missing_column() {
    let msg = check(
        "id,lower,size\na,0,1\n",
        1,
        Some("upper"),
        FormatErrorKind::MissingColumn,
    );
    assert_eq!(
        msg,
        r#"t.csv:1: field "upper": missing column "upper" (or "end"); the header names id,lower,size"#
    );
    check(
        "lower,upper,size\n0,1,1\n",
        1,
        Some("id"),
        FormatErrorKind::MissingColumn,
    );
    // The header is the first non-blank line.
    check(
        "\n\nid,lower,upper\n",
        3,
        Some("size"),
        FormatErrorKind::MissingColumn,
    );
}

#[test]
fn duplicate_column() {
    let msg = check(
        "id,lower,upper,end,size\n",
        1,
        Some("end"),
        FormatErrorKind::DuplicateColumn,
    );
    assert!(msg.contains(r#"repeats column "upper""#), "{msg}");
    check(
        "id,buffer,lower,upper,size\n",
        1,
        Some("buffer"),
        FormatErrorKind::DuplicateColumn,
    );
}

#[test]
fn too_few_fields() {
    let msg = check(
        &format!("{H}a,0,1,1\nb,0,1\n"),
        3,
        Some("size"),
        FormatErrorKind::FieldCount,
    );
    assert_eq!(
        msg,
        r#"t.csv:3: field "size": missing: the row has 3 fields but the header has 4"#
    );
}

#[test]
fn too_many_fields() {
    let msg = check(
        &format!("{H}a,0,1,1,9\n"),
        2,
        None,
        FormatErrorKind::FieldCount,
    );
    assert_eq!(msg, "t.csv:2: the row has 5 fields but the header has 4");
    // A trailing comma is an extra (empty) field.
    check(
        &format!("{H}a,0,1,1,\n"),
        2,
        None,
        FormatErrorKind::FieldCount,
    );
}

#[test]
fn not_a_number() {
    let msg = check(
        &format!("{H}a,0,1,1\nb,0,1,12x\n"),
        3,
        Some("size"),
        FormatErrorKind::NotANumber,
    );
    assert_eq!(
        msg,
        r#"t.csv:3: field "size": "12x" is not a non-negative integer"#
    );
    for bad in ["", "1.5", "1e3", "+1", "0x10", "1 2", "-", "--1"] {
        check(
            &format!("{H}a,{bad},1,1\n"),
            2,
            Some("lower"),
            FormatErrorKind::NotANumber,
        );
    }
    // Quoting does not make a number out of a word, nor hide one.
    check(
        &format!("{H}a,\"x\",1,1\n"),
        2,
        Some("lower"),
        FormatErrorKind::NotANumber,
    );
    assert!(parse_problem_csv(&format!("{H}a,\"0\",1,1\n"), NAME).is_ok());
}

#[test]
fn negative_number() {
    let msg = check(
        &format!("{H}a,-1,1,1\n"),
        2,
        Some("lower"),
        FormatErrorKind::Negative,
    );
    assert_eq!(
        msg,
        r#"t.csv:2: field "lower": "-1" is negative: expected a non-negative integer"#
    );
    check(
        &format!("{H}a,0,-3,1\n"),
        2,
        Some("upper"),
        FormatErrorKind::Negative,
    );
}

#[test]
fn negative_size() {
    let msg = check(
        &format!("{H}a,0,1,-4\n"),
        2,
        Some("size"),
        FormatErrorKind::Negative,
    );
    assert_eq!(msg, r#"t.csv:2: field "size": "-4" must be positive"#);
}

#[test]
fn zero_size() {
    let msg = check(
        &format!("{H}a,0,1,1\n\nb,0,1,0\n"),
        4,
        Some("size"),
        FormatErrorKind::ZeroSize,
    );
    assert_eq!(msg, r#"t.csv:4: field "size": "0" must be positive"#);
}

#[test]
fn empty_lifetime() {
    let msg = check(
        &format!("{H}a,5,5,1\n"),
        2,
        Some("upper"),
        FormatErrorKind::EmptyLifetime,
    );
    assert_eq!(
        msg,
        r#"t.csv:2: field "upper": "5" must be greater than lower (5)"#
    );
    check(
        &format!("{H}a,5,4,1\n"),
        2,
        Some("upper"),
        FormatErrorKind::EmptyLifetime,
    );
    // With an inclusive end, end == lower is one step; end < lower is empty.
    assert!(parse_problem_csv("id,lower,end,size\na,5,5,1\n", NAME).is_ok());
    let msg = check(
        "id,lower,End,size\na,5,4,1\n",
        2,
        Some("End"),
        FormatErrorKind::EmptyLifetime,
    );
    assert_eq!(
        msg,
        r#"t.csv:2: field "End": "4" must be at least lower (5)"#
    );
}

#[test]
fn duplicate_id() {
    let msg = check(
        &format!("{H}x,0,1,1\ny,0,1,1\n\"x\",2,3,1\n"),
        4,
        Some("id"),
        FormatErrorKind::DuplicateId,
    );
    assert_eq!(
        msg,
        r#"t.csv:4: field "id": duplicate id "x", first used on line 2"#
    );
    // Ids are compared after trimming and unquoting, as strings.
    check(
        "buffer_id,lower,upper,size\n 7 ,0,1,1\n7,0,1,1\n",
        3,
        Some("buffer_id"),
        FormatErrorKind::DuplicateId,
    );
}

#[test]
fn bad_alignment() {
    let msg = check(
        "id,lower,upper,size,alignment\na,0,1,1,8\nb,0,1,1,3\n",
        3,
        Some("alignment"),
        FormatErrorKind::BadAlignment,
    );
    assert_eq!(
        msg,
        r#"t.csv:3: field "alignment": "3" is not a power of two"#
    );
    check(
        "id,lower,upper,size,align\na,0,1,1,0\n",
        2,
        Some("align"),
        FormatErrorKind::BadAlignment,
    );
}

#[test]
fn empty_file() {
    for text in ["", "\n", "  \r\n\t\n", "\u{feff}"] {
        let msg = check(text, 1, None, FormatErrorKind::Empty);
        assert_eq!(
            msg,
            "t.csv:1: empty file: expected a header row such as id,lower,upper,size"
        );
    }
}

#[test]
fn no_buffers() {
    for text in [
        "id,lower,upper,size",
        "id,lower,upper,size\n",
        "id,lower,upper,size\r\n\r\n  \n",
    ] {
        let msg = check(text, 1, None, FormatErrorKind::NoBuffers);
        assert_eq!(
            msg,
            "t.csv:1: no buffers: the header is not followed by any rows"
        );
    }
}

#[test]
fn out_of_range() {
    let max = u64::MAX;
    let (p, plan) = parse_problem_csv(&format!("{H}a,{},{max},1\n", max - 1), NAME).unwrap();
    assert_eq!(p.buffers()[0].upper, max);
    assert!(plan.is_none());
    let msg = check(
        &format!("{H}a,0,18446744073709551616,1\n"),
        2,
        Some("upper"),
        FormatErrorKind::OutOfRange,
    );
    assert_eq!(
        msg,
        r#"t.csv:2: field "upper": "18446744073709551616" is out of range (at most 18446744073709551615)"#
    );
    check(
        &format!("{H}a,0,1,99999999999999999999999999999\n"),
        2,
        Some("size"),
        FormatErrorKind::OutOfRange,
    );
    // An inclusive end of u64::MAX has no half-open upper.
    check(
        &format!("id,lower,end,size\na,0,{max},1\n"),
        2,
        Some("end"),
        FormatErrorKind::OutOfRange,
    );
}

#[test]
fn total_size_overflow() {
    let half = u64::MAX / 2;
    let msg = check(
        &format!("{H}a,0,1,{half}\nb,0,1,{half}\n"),
        3,
        Some("size"),
        FormatErrorKind::TooLarge,
    );
    assert_eq!(
        msg,
        r#"t.csv:3: field "size": the buffers' sizes (with alignment padding) add up to more than 2^64 - 1 bytes"#
    );
    // Same rule as Problem::new: one buffer of u64::MAX bytes also counts its alignment.
    let e = Problem::new(vec![Buffer::new("a", 0, 1, u64::MAX)]).unwrap_err();
    assert_eq!(e, ProblemError::TooLarge);
    check(
        &format!("{H}a,0,1,{}\n", u64::MAX),
        2,
        Some("size"),
        FormatErrorKind::TooLarge,
    );
}

#[test]
fn quoting_errors() {
    let msg = check(
        &format!("{H}a,0,1,1\n\"b,0,1,1\n"),
        3,
        Some("id"),
        FormatErrorKind::Syntax,
    );
    assert_eq!(msg, r#"t.csv:3: field "id": unterminated quoted field"#);
    check(
        &format!("{H}\"b\"x,0,1,1\n"),
        2,
        Some("id"),
        FormatErrorKind::Syntax,
    );
    check("\"id,lower,upper,size\n", 1, None, FormatErrorKind::Syntax);
}

#[test]
fn invalid_utf8_id() {
    let e = parse_problem_csv_bytes(b"id,lower,upper,size\n\xff\xfe,0,1,1\n", NAME).unwrap_err();
    assert_eq!((e.line, e.field.as_deref()), (Some(2), Some("id")));
    assert_eq!(e.kind, FormatErrorKind::Syntax);
    let e = parse_problem_csv_bytes(b"id,lower,upper,size\n\"\xff\",0,1,1\n", NAME).unwrap_err();
    assert_eq!((e.line, e.field.as_deref()), (Some(2), Some("id")));
}

#[test]
fn lenient_layout() {
    // BOM, CRLF, blank lines, spaces, column order, case, aliases, ignored columns,
    // quoted ids with commas, quotes and a newline, no trailing newline.
    let text = "\u{feff}  Size , START,end,hint, Buffer \r\n\r\n 4 , 0 , 2 , -1 , b1 \r\n\
                8,3,3,-1,\"two, \"\"quoted\"\"\nlines\"\r\n   \r\n16,1,4,-1,\"\"";
    let (p, plan) = parse_problem_csv(text, NAME).unwrap();
    assert!(plan.is_none());
    assert_eq!(
        p.buffers(),
        &[
            Buffer::new("b1", 0, 3, 4),
            Buffer::new("two, \"quoted\"\nlines", 3, 4, 8),
            Buffer::new("", 1, 5, 16),
        ]
    );
    // Lines keep counting through blank lines and quoted newlines.
    let e = parse_problem_csv(&format!("{text}\nx,0,1,1,y\n"), NAME).unwrap_err();
    assert_eq!(
        (e.line, e.field.as_deref()),
        (Some(8), Some(" Size ".trim()))
    );
}

#[test]
fn offsets_column_is_a_plan() {
    let text = "id,lower,upper,size,offset\nb1,0,3,4,8\nb2,3,9,4,8\nb3,0,9,4,4\n";
    let (p, plan) = parse_problem_csv(text, NAME).unwrap();
    assert_eq!(p.len(), 3);
    assert_eq!(
        plan,
        Some(OffsetPlan {
            offsets: vec![8, 8, 4]
        })
    );
    assert_eq!(problem_to_csv(&p, plan.as_ref()), text);
    check(
        "id,lower,upper,size,offset\nb1,0,3,4,x\n",
        2,
        Some("offset"),
        FormatErrorKind::NotANumber,
    );
}

#[test]
fn round_trip_with_and_without_alignment() {
    let plain = Problem::new(vec![
        Buffer::new("a", 0, 3, 4),
        Buffer::new(" padded\t", 2, u64::MAX, 1 << 40),
        Buffer::new("", 1, 2, 1),
        Buffer::new("q\"uo,te\r\n", 0, 1, 3),
    ])
    .unwrap();
    let text = problem_to_csv(&plain, None);
    assert!(text.starts_with("id,lower,upper,size\n"), "{text}");
    assert_eq!(
        parse_problem_csv(&text, NAME).unwrap(),
        (plain.clone(), None)
    );

    let mut buffers = plain.into_buffers();
    buffers[1].align = 4096;
    let aligned = Problem::new(buffers).unwrap();
    let plan = OffsetPlan {
        offsets: vec![0, 4096, 7, 8],
    };
    let text = problem_to_csv(&aligned, Some(&plan));
    assert!(
        text.starts_with("id,lower,upper,size,alignment,offset\na,0,3,4,1,0\n"),
        "{text}"
    );
    assert_eq!(
        parse_problem_csv(&text, NAME).unwrap(),
        (aligned.clone(), Some(plan))
    );
    let short = OffsetPlan { offsets: vec![0] };
    let e = write_problem_csv(Vec::new(), &aligned, Some(&short)).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
}

fn any_problem() -> impl Strategy<Value = Problem> {
    proptest::collection::vec(
        (
            ".{0,6}",
            any::<u64>(),
            any::<u64>(),
            1u64..u64::MAX >> 8,
            0u32..13,
        ),
        1..12,
    )
    .prop_map(|rows| {
        let mut ids = std::collections::HashSet::new();
        let buffers = rows
            .into_iter()
            .filter(|(id, ..)| ids.insert(id.clone()))
            .map(|(id, a, b, size, align)| {
                let (lower, upper) = if a < b {
                    (a, b)
                } else if a > b {
                    (b, a)
                } else {
                    (0, 1)
                };
                Buffer::new(id, lower, upper, size).with_align(1 << align)
            })
            .collect();
        Problem::new(buffers).expect("valid")
    })
}

proptest! {
    #[test]
    fn round_trips(p in any_problem(), with_plan in any::<bool>()) {
        let plan = with_plan.then(|| OffsetPlan { offsets: (0..p.len() as u64).collect() });
        let text = problem_to_csv(&p, plan.as_ref());
        prop_assert_eq!(parse_problem_csv(&text, NAME).unwrap(), (p, plan));
    }

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = parse_problem_csv_bytes(&bytes, NAME);
    }

    #[test]
    fn mutated_csv_never_panics(
        p in any_problem(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), 0u8..3, prop::sample::select(
            b",\"\n\r -0123456789x\xff".to_vec())), 1..6),
    ) {
        let mut bytes = problem_to_csv(&p, None).into_bytes();
        for (at, op, byte) in edits {
            let i = at.index(bytes.len() + 1);
            match op {
                0 => bytes.insert(i, byte),
                1 if i < bytes.len() => { bytes.remove(i); }
                _ if i < bytes.len() => bytes[i] = byte,
                _ => {}
            }
        }
        match parse_problem_csv_bytes(&bytes, NAME) {
            Ok((q, _)) => prop_assert!(Problem::new(q.into_buffers()).is_ok()),
            Err(e) => {
                prop_assert_eq!(e.file.as_str(), NAME);
                prop_assert!(e.line.is_some_and(|l| l >= 1 && l <= bytes.len() + 1));
            }
        }
    }
}
