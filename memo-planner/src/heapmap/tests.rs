//! Tests of the heap maps: well-formed SVG for every input, the marks and labels, the
//! limits that keep large maps small.

use super::axes::{nice_step, time_ticks};
use super::dust::{draw_dust, dust_rects, MAX_DUST_RECTS};
use super::svg::num;
use super::*;
use crate::fixtures::{dnn_trace, minimalloc_example};
use crate::offsets::OffsetStrategy;
use crate::problem::Buffer;

/// A minimal well-formedness check: one root element, balanced tags, quoted
/// attributes without `<`, and every `&` starting a known entity.
fn check_xml(s: &str) -> Result<(), String> {
    let b = s.as_bytes();
    let mut stack: Vec<&str> = Vec::new();
    let mut roots = 0;
    let mut i = 0;
    let entity_ok = |at: usize| -> bool {
        let rest = &s[at..];
        ["&amp;", "&lt;", "&gt;", "&quot;", "&apos;"]
            .iter()
            .any(|e| rest.starts_with(e))
    };
    while i < b.len() {
        match b[i] {
            b'<' => {
                if s[i..].starts_with("<!--") {
                    i = s[i..].find("-->").ok_or("open comment")? + i + 3;
                    continue;
                }
                let closing = b.get(i + 1) == Some(&b'/');
                let start = i + 1 + usize::from(closing);
                let mut j = start;
                while j < b.len() && !b" \n\t/>".contains(&b[j]) {
                    j += 1;
                }
                let name = &s[start..j];
                if name.is_empty() {
                    return Err(format!("empty tag name at {i}"));
                }
                // Attributes up to '>'.
                let mut quote: Option<u8> = None;
                while j < b.len() {
                    match (quote, b[j]) {
                        (None, b'"') | (None, b'\'') => quote = Some(b[j]),
                        (Some(q), c) if c == q => quote = None,
                        (Some(_), b'<') => return Err(format!("< in attribute at {j}")),
                        (Some(_), b'&') if !entity_ok(j) => {
                            return Err(format!("bad & in attribute at {j}"))
                        }
                        (None, b'>') => break,
                        (None, b'<') => return Err(format!("< in tag at {j}")),
                        _ => {}
                    }
                    j += 1;
                }
                if j >= b.len() {
                    return Err("unterminated tag".into());
                }
                let self_closing = b[j - 1] == b'/';
                if closing {
                    match stack.pop() {
                        Some(open) if open == name => {}
                        other => return Err(format!("</{name}> closes {other:?}")),
                    }
                } else if !self_closing {
                    if stack.is_empty() {
                        roots += 1;
                    }
                    stack.push(name);
                } else if stack.is_empty() {
                    roots += 1;
                }
                i = j + 1;
            }
            b'&' => {
                if !entity_ok(i) {
                    return Err(format!("bad & in text at {i}"));
                }
                i += 1;
            }
            c => {
                if stack.is_empty() && !c.is_ascii_whitespace() {
                    return Err(format!("text outside the root at {i}"));
                }
                if c < 0x20 && !b"\t\n\r".contains(&c) {
                    return Err(format!("control character at {i}"));
                }
                i += 1;
            }
        }
    }
    if !stack.is_empty() {
        return Err(format!("unclosed {stack:?}"));
    }
    if roots != 1 {
        return Err(format!("{roots} root elements"));
    }
    Ok(())
}

/// The number of `<rect` inside the buffers group.
fn buffer_rects(svg: &str) -> usize {
    let start = svg.find("<g id=\"buffers\"").expect("buffers group");
    let end = svg
        .find("<g id=\"dust\"")
        .or_else(|| svg.find("<g id=\"marks\""))
        .expect("marks group");
    svg[start..end].matches("<rect").count()
}

#[test]
fn checker_rejects_bad_xml() {
    assert!(check_xml("<svg><g></svg>").is_err());
    assert!(check_xml("<svg>a & b</svg>").is_err());
    assert!(check_xml("<svg><a x=\"<\"/></svg>").is_err());
    assert!(check_xml("<svg/><svg/>").is_err());
    assert!(check_xml("<svg><a x=\"&amp;\">&lt;</a></svg>").is_ok());
}

#[test]
fn small_plan_has_one_rect_per_buffer_and_labelled_lines() {
    let p = minimalloc_example();
    let plan = OffsetStrategy::GreedyBySize.plan(&p);
    let svg = render_svg(&p, &plan, &HeapmapOptions::default());
    check_xml(&svg).unwrap();
    assert_eq!(buffer_rects(&svg), 5);
    assert_eq!(svg.matches("<title>").count(), 5);
    assert!(svg.contains("id=\"height-line\""));
    assert!(svg.contains("id=\"lower-bound-line\""));
    assert!(svg.contains(">height 12 B (0.00 MiB)</text>"));
    assert!(svg.contains(">lower bound 12 B (0.00 MiB)</text>"));
    assert!(svg.contains("<title>b4: time [9, 21), 4 B (4 B) at offset"));
}

#[test]
fn labels_in_mib() {
    let p = Problem::new(vec![
        Buffer::new("a", 0, 2, 3 << 20),
        Buffer::new("b", 1, 3, 1 << 20),
        Buffer::new("c", 2, 4, 1 << 20),
    ])
    .unwrap();
    let plan = OffsetPlan {
        offsets: vec![0, 3 << 20, 0],
    };
    let svg = render_svg(&p, &plan, &HeapmapOptions::default());
    check_xml(&svg).unwrap();
    assert!(svg.contains(">height 4,194,304 B (4.00 MiB)</text>"));
    assert!(svg.contains(">lower bound 4,194,304 B (4.00 MiB)</text>"));
    // A lower bound passed in is used as is, and may sit below the height.
    let options = HeapmapOptions {
        lower_bound: Some(1 << 20),
        ..HeapmapOptions::default()
    };
    let svg = render_svg(&p, &plan, &options);
    assert!(svg.contains(">lower bound 1,048,576 B (1.00 MiB)</text>"));
}

#[test]
fn escapes_ids_titles_and_groups() {
    let p = Problem::new(vec![
        Buffer::new("a<b>&\"c'", 0, 2, 8),
        Buffer::new("ctl\u{1}\u{0}x", 1, 3, 8),
    ])
    .unwrap();
    let plan = OffsetStrategy::GreedyBySize.plan(&p);
    let options = HeapmapOptions {
        title: "<script>&".into(),
        groups: Some(vec!["op<1>".into(), "op&2".into()]),
        ..HeapmapOptions::default()
    };
    let svg = render_svg(&p, &plan, &options);
    check_xml(&svg).unwrap();
    assert!(svg.contains("a&lt;b&gt;&amp;&quot;c&apos;"));
    assert!(svg.contains("&lt;script&gt;&amp;"));
    assert!(svg.contains(">op&lt;1&gt;</text>"));
    assert!(svg.contains(">op&amp;2</text>"));
    assert!(!svg.contains("a<b"));
    assert!(!svg.contains('\u{1}'));
}

#[test]
fn empty_problem_says_no_buffers() {
    let svg = render_svg(
        &Problem::default(),
        &OffsetPlan::default(),
        &HeapmapOptions::default(),
    );
    check_xml(&svg).unwrap();
    assert!(svg.contains(">no buffers</text>"));
}

#[test]
fn mismatched_plans_do_not_panic() {
    let p = minimalloc_example();
    let short = OffsetPlan {
        offsets: vec![8, 8],
    };
    let svg = render_svg(&p, &short, &HeapmapOptions::default());
    check_xml(&svg).unwrap();
    assert_eq!(buffer_rects(&svg), 2);
    assert!(svg.contains("plan has 2 offsets for 5 buffers"));
    let long = OffsetPlan {
        offsets: vec![0; 9],
    };
    let svg = render_svg(&p, &long, &HeapmapOptions::default());
    check_xml(&svg).unwrap();
    assert_eq!(buffer_rects(&svg), 5);
    assert!(svg.contains("plan has 9 offsets for 5 buffers"));
    let none = render_svg(&p, &OffsetPlan::default(), &HeapmapOptions::default());
    check_xml(&none).unwrap();
    assert!(none.contains("no buffers to draw"));
    // Offsets near the top of the address space.
    let huge = OffsetPlan {
        offsets: vec![u64::MAX; 5],
    };
    check_xml(&render_svg(&p, &huge, &HeapmapOptions::default())).unwrap();
}

#[test]
fn odd_options_do_not_panic() {
    let p = dnn_trace(300, 2);
    let plan = OffsetStrategy::GreedyBySize.plan(&p);
    for options in [
        HeapmapOptions {
            width: 0,
            height: 0,
            ..HeapmapOptions::default()
        },
        HeapmapOptions {
            time_range: Some((50, 10)),
            coloring: Coloring::IdHash,
            ..HeapmapOptions::default()
        },
        HeapmapOptions {
            time_range: Some((u64::MAX - 1, u64::MAX)),
            max_rects: 0,
            max_tooltips: 0,
            ..HeapmapOptions::default()
        },
        HeapmapOptions {
            groups: Some(vec!["x".into(); 7]),
            trim_long_lived: false,
            ..HeapmapOptions::default()
        },
    ] {
        let svg = render_svg(&p, &plan, &options);
        check_xml(&svg).unwrap();
    }
}

#[test]
fn many_groups_share_an_other_entry() {
    let p = dnn_trace(200, 4);
    let plan = OffsetStrategy::GreedyBySize.plan(&p);
    let groups: Vec<String> = (0..p.len()).map(|i| format!("op{}", i % 20)).collect();
    let options = HeapmapOptions {
        groups: Some(groups),
        ..HeapmapOptions::default()
    };
    let svg = render_svg(&p, &plan, &options);
    check_xml(&svg).unwrap();
    assert!(svg.contains(">other (9 groups)</text>"));
    assert_eq!(buffer_rects(&svg), 200);
}

#[test]
#[cfg_attr(miri, ignore = "a large trace: hours under Miri")]
fn large_trace_stays_small() {
    let p = dnn_trace(100_000, 1);
    let plan = OffsetStrategy::GreedyBySize.plan(&p);
    let svg = render_svg(&p, &plan, &HeapmapOptions::default());
    check_xml(&svg).unwrap();
    assert!(svg.len() < 10_000_000, "{} bytes", svg.len());
    eprintln!(
        "100k buffers: {} bytes, {} rects",
        svg.len(),
        buffer_rects(&svg)
    );
    assert!(!svg.contains("<title>"));
    assert!(buffer_rects(&svg) <= 20_000);
    assert!(svg.contains("id=\"height-line\""));
}

proptest::proptest! {
    #[test]
    fn random_problems_and_plans_render_well_formed(
        p in crate::fixtures::strategies::problem(40),
        offsets in proptest::collection::vec(0u64..200, 0..45),
        groups in proptest::option::of(proptest::collection::vec("[a-c<&>\"' ]{0,3}", 0..45)),
    ) {
        let plan = OffsetPlan { offsets };
        let options = HeapmapOptions { groups, ..HeapmapOptions::default() };
        let svg = render_svg(&p, &plan, &options);
        proptest::prop_assert_eq!(check_xml(&svg), Ok(()));
        let n = p.len().min(plan.offsets.len());
        if n > 0 {
            proptest::prop_assert_eq!(buffer_rects(&svg), n);
        }
    }
}

#[test]
#[cfg_attr(miri, ignore = "300,000 points: hours under Miri")]
fn dust_raster_coarsens_to_stay_small() {
    let centres: Vec<(f64, f64)> = (0..1000)
        .flat_map(|x| (0..600).map(move |y| (x, y)))
        .filter(|(x, y)| (x + y) % 2 == 0)
        .map(|(x, y)| (f64::from(x) + 0.5, f64::from(y) + 0.5))
        .collect();
    assert!(dust_rects(&centres, 0.0, 0.0, 1000.0, 600.0, 1.0).len() > MAX_DUST_RECTS);
    let mut out = String::new();
    draw_dust(&mut out, &centres, 0.0, 0.0, 1000.0, 600.0);
    assert!(out.matches("<rect").count() <= MAX_DUST_RECTS);
    // A solid block becomes one rectangle.
    let block: Vec<(f64, f64)> = (0..10)
        .flat_map(|x| (0..5).map(move |y| (f64::from(x) + 0.5, f64::from(y) + 0.5)))
        .collect();
    assert_eq!(
        dust_rects(&block, 0.0, 0.0, 100.0, 100.0, 1.0),
        vec![(0, 0, 10, 5)]
    );
}

#[test]
fn helpers_format_numbers() {
    assert_eq!(num(1.25), "1.3");
    assert_eq!(num(2.0), "2");
    assert_eq!(nice_step(0.0), 1.0);
    assert_eq!(time_ticks(0, 100), vec![0, 20, 40, 60, 80, 100]);
}
