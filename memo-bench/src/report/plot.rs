//! The line plot both reports draw: one series per allocator over a few categorical x
//! positions (thread or client counts), p50 as a solid line and p99 dashed, the legend to
//! the right. Drawn by `plotters` into an SVG document.

use plotters::coord::Shift;
use plotters::prelude::*;

/// Size of every plot, pixels.
const SIZE: (u32, u32) = (640, 400);
/// Width of the legend column on the right.
const LEGEND_WIDTH: u32 = 150;
const FONT: &str = "sans-serif";
/// Font sizes as plotters takes them (its SVG text comes out at about 0.8 of these).
const TITLE_SIZE: u32 = 18;
const TEXT_SIZE: u32 = 15;

/// The colour of each allocator, the same in every plot.
const COLORS: [(&str, RGBColor); 8] = [
    ("glibc", RGBColor(0xd6, 0x27, 0x28)),
    ("jemalloc", RGBColor(0x1f, 0x77, 0xb4)),
    ("jemalloc-tuned", RGBColor(0x17, 0xbe, 0xcf)),
    ("mimalloc", RGBColor(0x2c, 0xa0, 0x2c)),
    ("memo", RGBColor(0x00, 0x00, 0x00)),
    ("memo-jemalloc", RGBColor(0x94, 0x67, 0xbd)),
    ("memo-slots", RGBColor(0xff, 0x7f, 0x0e)),
    ("static", RGBColor(0x7f, 0x7f, 0x7f)),
];

/// The colour of an allocator in every plot (grey for a name not listed).
pub fn color(name: &str) -> RGBColor {
    COLORS
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(RGBColor(0x7f, 0x7f, 0x7f), |(_, c)| *c)
}

/// One allocator's line: `(x position, value)` points of its p50 and of its p99.
#[derive(Clone, Debug, Default)]
pub struct Series {
    /// Allocator name (legend and colour).
    pub name: String,
    /// p50 points, drawn solid.
    pub p50: Vec<(usize, f64)>,
    /// p99 points, drawn dashed.
    pub p99: Vec<(usize, f64)>,
}

/// What a plot shows.
#[derive(Clone, Debug, Default)]
pub struct LinePlot {
    /// Caption at the top.
    pub title: String,
    /// Labels of the x positions 0, 1, ... (evenly spaced).
    pub x_labels: Vec<String>,
    /// What the x axis counts.
    pub x_desc: String,
    /// What the y axis measures.
    pub y_desc: String,
    /// Top of the y axis (the bottom is 0); values above it are drawn at it.
    pub y_max: f64,
    /// Decimals of the y labels.
    pub y_decimals: usize,
    /// A value marked by a dotted horizontal line (a ratio's 1).
    pub reference: Option<f64>,
    /// Dots on the p50 points.
    pub markers: bool,
    /// The lines, in legend order.
    pub series: Vec<Series>,
}

/// The plot as an SVG document.
pub fn render(plot: &LinePlot) -> String {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        // The string backend cannot fail to write; a drawing error leaves a partial plot.
        let _ = draw(&root, plot);
    }
    svg.push('\n');
    svg
}

type DrawResult<DB> = Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, plot: &LinePlot) -> DrawResult<DB> {
    root.fill(&WHITE)?;
    let root = root.titled(&plot.title, (FONT, TITLE_SIZE))?;
    let (chart_area, legend_area) = root.split_horizontally(SIZE.0 - LEGEND_WIDTH);
    let n = plot.x_labels.len().max(1);
    let y_max = if plot.y_max > 0.0 { plot.y_max } else { 1.0 };
    let mut chart = ChartBuilder::on(&chart_area)
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d((0..n - 1).into_segmented(), 0.0..y_max)?;
    let labels = &plot.x_labels;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .y_labels(6)
        .bold_line_style(RGBColor(0xdd, 0xdd, 0xdd))
        .light_line_style(TRANSPARENT)
        .x_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => labels.get(*i).cloned().unwrap_or_default(),
            _ => String::new(),
        })
        .y_label_formatter(&|v| format!("{v:.*}", plot.y_decimals))
        .x_desc(plot.x_desc.as_str())
        .y_desc(plot.y_desc.as_str())
        .axis_desc_style((FONT, TEXT_SIZE))
        .label_style((FONT, TEXT_SIZE))
        .draw()?;
    let at = |(x, v): (usize, f64)| (SegmentValue::CenterOf(x), v.clamp(0.0, y_max));
    if let Some(r) = plot.reference {
        let line = [at((0, r)), at((n - 1, r))];
        chart.draw_series(DashedLineSeries::new(line, 2, 2, BLACK.into()))?;
    }
    for s in &plot.series {
        let style = color(&s.name).stroke_width(2);
        chart.draw_series(LineSeries::new(s.p50.iter().copied().map(at), style))?;
        let p99: Vec<_> = s.p99.iter().copied().map(at).collect();
        chart.draw_series(DashedLineSeries::new(p99, 6, 4, style))?;
        if plot.markers {
            let dot = color(&s.name).filled();
            chart.draw_series(s.p50.iter().map(|&p| Circle::new(at(p), 3, dot)))?;
        }
    }
    legend(&legend_area, &plot.series)
}

/// The legend: a short line in each series' colour, then its name, one row each.
fn legend<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, series: &[Series]) -> DrawResult<DB> {
    for (i, s) in series.iter().enumerate() {
        let y = 20 + 18 * i as i32;
        let style = color(&s.name).stroke_width(2);
        area.draw(&PathElement::new([(10, y), (30, y)], style))?;
        area.draw(&Text::new(
            s.name.clone(),
            (36, y - 7),
            (FONT, TEXT_SIZE).into_font().color(&BLACK),
        ))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_series() -> LinePlot {
        LinePlot {
            title: "w<1>: latency".into(),
            x_labels: vec!["1".into(), "2".into(), "4*".into()],
            x_desc: "threads".into(),
            y_desc: "ratio".into(),
            y_max: 2.0,
            y_decimals: 2,
            reference: Some(1.0),
            markers: true,
            series: vec![
                Series {
                    name: "glibc".into(),
                    p50: vec![(0, 1.0), (1, 1.2), (2, 50.0)],
                    p99: vec![(0, 1.1), (1, 1.3), (2, 1.4)],
                },
                Series {
                    name: "jemalloc".into(),
                    p50: vec![(0, 0.9), (1, 0.8), (2, 0.7)],
                    p99: vec![(0, 0.9)],
                },
            ],
        }
    }

    #[test]
    fn a_plot_is_an_svg_with_its_lines_labels_and_legend() {
        let svg = render(&two_series());
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        // The title is escaped; the x labels, the axis descriptions and the legend's
        // names are there.
        assert!(svg.contains("w&lt;1&gt;: latency"), "{svg}");
        for text in ["4*", "threads", "ratio", "glibc", "jemalloc", "2.00"] {
            assert!(svg.contains(text), "{text}");
        }
        // Each series in its own colour: a solid p50 line and dots.
        for c in ["#D62728", "#1F77B4"] {
            assert!(svg.contains(&format!("stroke=\"{c}\"")), "{c}");
            assert!(svg.contains(&format!("fill=\"{c}\"")), "{c}");
        }
        assert!(svg.matches("<polyline").count() >= 2);
        assert_eq!(svg.matches("<circle").count(), 6);
    }

    #[test]
    fn values_above_the_axis_are_drawn_at_its_top() {
        let plot = two_series();
        let svg = render(&plot);
        // glibc's 50.0 is drawn at 2.0: no point of the plot lies above the plot area.
        for circle in svg.split("<circle").skip(1) {
            let cy: f64 = circle
                .split("cy=\"")
                .nth(1)
                .and_then(|s| s.split('"').next())
                .and_then(|s| s.parse().ok())
                .expect("a circle's cy");
            assert!(cy > 20.0, "{cy}");
        }
    }

    #[test]
    fn every_allocator_has_its_own_colour() {
        let names = [
            "glibc",
            "jemalloc",
            "jemalloc-tuned",
            "mimalloc",
            "memo",
            "memo-jemalloc",
            "memo-slots",
        ];
        for (i, a) in names.iter().enumerate() {
            for b in &names[i + 1..] {
                assert_ne!(color(a), color(b), "{a} {b}");
            }
        }
        assert_eq!(color("unknown"), color("static"));
    }
}
