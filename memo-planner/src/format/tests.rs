//! Tests across the formats: every file of `data/`, reading by extension and by content,
//! unreadable files.

use super::*;
use std::path::PathBuf;

use crate::fixtures::DATA;

/// Buffers per file (lines minus the header), from `data/README.md` and `wc -l`.
const ROWS: &[(&str, usize)] = &[
    ("minimalloc/examples/input.12.csv", 5),
    ("minimalloc/challenging/A.1048576.csv", 154),
    ("minimalloc/challenging/B.1048576.csv", 170),
    ("minimalloc/challenging/C.1048576.csv", 203),
    ("minimalloc/challenging/D.1048576.csv", 213),
    ("minimalloc/challenging/E.1048576.csv", 215),
    ("minimalloc/challenging/F.1048576.csv", 296),
    ("minimalloc/challenging/G.1048576.csv", 308),
    ("minimalloc/challenging/H.1048576.csv", 316),
    ("minimalloc/challenging/I.1048576.csv", 374),
    ("minimalloc/challenging/J.1048576.csv", 409),
    ("minimalloc/challenging/K.1048576.csv", 454),
    ("idealloc/somas_tensors/resnet50.csv", 1042),
    ("idealloc/somas_tensors/pangu_2.6B.csv", 18692),
    ("idealloc/iopddl/G_1.csv", 816),
    ("idealloc/iopddl/S_1.csv", 28526),
    ("idealloc/iopddl/Y_1.csv", 62185),
];

fn csv_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            csv_files(&path, out);
        } else if Format::from_extension(&path) == Some(Format::Csv) {
            out.push(path);
        }
    }
}

#[test]
#[cfg_attr(miri, ignore = "reads every data file: hours under Miri")]
fn reads_every_data_csv() {
    let data = Path::new(DATA);
    let mut files = Vec::new();
    csv_files(data, &mut files);
    files.sort();
    for path in &files {
        let rel = path
            .strip_prefix(data)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let (problem, plan) = read_problem_file(path).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(plan.is_some(), rel.contains("best-known/"), "{rel}");
        if let Some(plan) = plan {
            // Best-known packings carry their offsets; the name says their height.
            let height: u64 = rel
                .rsplit('/')
                .next()
                .and_then(|f| f.split('.').nth(1))
                .and_then(|h| h.parse().ok())
                .unwrap_or_else(|| panic!("{rel}: no height in the name"));
            assert_eq!(
                crate::validate_offsets(&problem, &plan),
                Ok(height),
                "{rel}"
            );
        }
        let expected = match ROWS.iter().find(|(r, _)| *r == rel) {
            Some(&(_, n)) => n,
            None => {
                let text = std::fs::read_to_string(path).unwrap();
                text.lines().filter(|l| !l.trim().is_empty()).count() - 1
            }
        };
        assert_eq!(problem.len(), expected, "{rel}");
        // Writing and reading back gives the same problem.
        let text = problem_to_csv(&problem, None);
        assert_eq!(parse_problem_csv(&text, &rel).unwrap().0, problem, "{rel}");
    }
    for (rel, _) in ROWS {
        assert!(data.join(rel).is_file(), "{rel} is missing");
    }
    let (example, _) = read_problem_csv_file(data.join(ROWS[0].0)).unwrap();
    assert_eq!(example, crate::fixtures::minimalloc_example());
}

/// `cargo test --release -p memo-planner --lib format::tests::y1_timing -- --ignored --nocapture`
#[test]
#[ignore = "timing; run in release"]
fn y1_timing() {
    let path = Path::new(DATA).join("idealloc/iopddl/Y_1.csv");
    let bytes = std::fs::read(&path).unwrap();
    let mut best = std::time::Duration::MAX;
    for _ in 0..10 {
        let t = std::time::Instant::now();
        let (p, _) = parse_problem_csv_bytes(&bytes, "Y_1.csv").unwrap();
        best = best.min(t.elapsed());
        assert_eq!(p.len(), 62185);
    }
    let t = std::time::Instant::now();
    let (p, _) = read_problem_file(&path).unwrap();
    println!(
        "Y_1.csv: parse {best:?} (best of 10), read_problem_file {:?}",
        t.elapsed()
    );
    let json = problem_to_json(&p, None);
    let t = std::time::Instant::now();
    parse_problem_json(&json, "Y_1.json").unwrap();
    println!("Y_1 as JSON: parse {:?}", t.elapsed());
}

fn temp_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("memo-format-{}-{name}", std::process::id()))
}

#[test]
fn read_problem_file_by_extension_and_sniffing() {
    let p = crate::fixtures::minimalloc_example();
    let plan = OffsetPlan {
        offsets: vec![8, 8, 4, 4, 0],
    };
    let cases = [
        ("p.csv", problem_to_csv(&p, Some(&plan))),
        ("p.json", problem_to_json(&p, Some(&plan))),
        ("p.txt", problem_to_csv(&p, Some(&plan))),
        ("p", problem_to_json(&p, Some(&plan))),
        (
            "bare",
            format!("  {}", serde_json::to_string(&p).unwrap())
                .replace("\"size\":4", "\"size\":4,\"offset\":0"),
        ),
    ];
    for (name, text) in cases {
        let path = temp_path(name);
        std::fs::write(&path, &text).unwrap();
        let got = read_problem_file(&path);
        std::fs::remove_file(&path).unwrap();
        let (q, got_plan) = got.unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(q, p, "{name}");
        let expected = if name == "bare" {
            OffsetPlan {
                offsets: vec![0; 5],
            }
        } else {
            plan.clone()
        };
        assert_eq!(got_plan, Some(expected), "{name}");
    }
    // The extension wins over the content: JSON named .csv is read as CSV.
    let path = temp_path("wrong.csv");
    std::fs::write(&path, problem_to_json(&p, None)).unwrap();
    let e = read_problem_file(&path).unwrap_err();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(e.file, path.display().to_string());
    assert_eq!((e.line, e.field.as_deref()), (Some(1), Some("id")));
    assert_eq!(e.kind, FormatErrorKind::MissingColumn);
}

#[test]
fn unreadable_file_is_named() {
    let path = temp_path("does-not-exist.csv");
    for e in [
        read_problem_file(&path).unwrap_err(),
        read_problem_csv_file(&path).unwrap_err(),
        read_problem_json_file(&path).unwrap_err(),
        read_plan_json_file::<OffsetPlan>(&path).unwrap_err(),
    ] {
        assert_eq!(e.file, path.display().to_string());
        assert_eq!(e.line, None);
        assert_eq!(e.kind, FormatErrorKind::Io(std::io::ErrorKind::NotFound));
        assert!(e
            .to_string()
            .starts_with(&format!("{}: cannot read the file: ", e.file)));
    }
}

#[test]
fn parse_problem_sniffs_unknown_names() {
    let p = crate::fixtures::minimalloc_example();
    let csv = problem_to_csv(&p, None);
    let json = problem_to_json(&p, None);
    assert_eq!(parse_problem(csv.as_bytes(), "stdin").unwrap().0, p);
    assert_eq!(parse_problem(json.as_bytes(), "stdin").unwrap().0, p);
    let e = parse_problem(b"", "stdin").unwrap_err();
    assert_eq!((e.kind, e.line), (FormatErrorKind::Empty, Some(1)));
}
