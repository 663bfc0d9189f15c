//! SVG charts for the benchmark report (plotters, SVG backend only).
//!
//! One kind of chart: grouped bars. Each group (a flow count, a family and
//! loss rate, a device) has one bar per series (a configuration); a bar is
//! the mean over the runs, its whisker spans min..max, and a dot marks every
//! run. Text is written as SVG `<text>` and rendered by the viewer (no fonts
//! are embedded).

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::stats::fmt_g;

/// One bar: the runs of one figure.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    /// Mean over the runs.
    pub mean: f64,
    /// Smallest run.
    pub min: f64,
    /// Largest run.
    pub max: f64,
    /// Every run.
    pub samples: Vec<f64>,
}

/// A grouped bar chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    /// Title.
    pub title: String,
    /// Y axis label.
    pub y_label: String,
    /// Logarithmic y axis.
    pub log: bool,
    /// Series names (legend), one colour each.
    pub series: Vec<String>,
    /// Group label and one bar per series (`None`: figure missing).
    pub groups: Vec<(String, Vec<Option<Bar>>)>,
}

/// Series colours: grey for the first (usually the baseline), then distinct hues.
const COLOURS: [RGBColor; 6] = [
    RGBColor(0x9e, 0x9e, 0x9e),
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x94, 0x67, 0xbd),
];

/// Chart size in pixels.
pub const SIZE: (u32, u32) = (900, 520);

/// The chart as an SVG document.
///
/// # Errors
/// If there is nothing to draw (no finite positive value on a log axis, no
/// finite value at all), or plotters fails.
pub fn render_svg(chart: &Chart) -> Result<String, String> {
    let values: Vec<f64> = chart
        .groups
        .iter()
        .flat_map(|(_, bars)| bars.iter().flatten())
        .flat_map(|b| b.samples.iter().copied().chain([b.mean, b.min, b.max]))
        .filter(|v| v.is_finite() && (!chart.log || *v > 0.0))
        .collect();
    if values.is_empty() {
        return Err(format!("{}: no value to plot", chart.title));
    }
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        draw(&root, chart, lo, hi).map_err(|e| format!("{}: {e}", chart.title))?;
        root.present().map_err(|e| format!("{}: {e}", chart.title))?;
    }
    Ok(svg)
}

fn draw(
    root: &DrawingArea<SVGBackend<'_>, Shift>,
    chart: &Chart,
    lo: f64,
    hi: f64,
) -> Result<(), DrawingAreaErrorKind<std::io::Error>> {
    root.fill(&WHITE)?;
    let n = chart.groups.len().max(1) as f64;
    let k = chart.series.len().max(1);
    let width = 0.8 / k as f64;
    let x_of = |g: usize, s: usize| g as f64 + 0.1 + width * (s as f64 + 0.5);
    let label_style = TextStyle::from(("sans-serif", 12).into_font()).pos(Pos::new(HPos::Center, VPos::Bottom));
    let mut builder = ChartBuilder::on(root);
    builder.caption(&chart.title, ("sans-serif", 20)).margin(12).x_label_area_size(36).y_label_area_size(80);

    // Bars start at the axis: 0 on a linear axis, below the smallest value on a log one.
    macro_rules! body {
        ($ctx:expr, $base:expr) => {{
            let mut ctx = $ctx;
            ctx.configure_mesh()
                .disable_x_mesh()
                .x_labels(0)
                .y_desc(chart.y_label.as_str())
                .y_label_formatter(&|v| axis_label(*v))
                .draw()?;
            for (s, name) in chart.series.iter().enumerate() {
                let colour = COLOURS[s % COLOURS.len()];
                let rects: Vec<Rectangle<(f64, f64)>> = chart
                    .groups
                    .iter()
                    .enumerate()
                    .filter_map(|(g, (_, bars))| {
                        let b = bars.get(s)?.as_ref()?;
                        let x = x_of(g, s);
                        (b.mean.is_finite() && b.mean > $base).then(|| {
                            Rectangle::new([(x - width * 0.45, $base), (x + width * 0.45, b.mean)], colour.filled())
                        })
                    })
                    .collect();
                ctx.draw_series(rects)?
                    .label(name.as_str())
                    .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 12, y + 6)], colour.filled()));
            }
            for (g, (_, bars)) in chart.groups.iter().enumerate() {
                for (s, b) in bars.iter().enumerate() {
                    let Some(b) = b else { continue };
                    let x = x_of(g, s);
                    let ok = |v: f64| v.is_finite() && v > $base;
                    if ok(b.min) && ok(b.max) && ok(b.mean) {
                        ctx.draw_series([ErrorBar::new_vertical(x, b.min, b.mean, b.max, BLACK.stroke_width(1), 8)])?;
                    }
                    let dots = b.samples.iter().enumerate().filter(|(_, v)| ok(**v)).map(|(i, v)| {
                        let jitter = ((i as f64 + 0.5) / b.samples.len().max(1) as f64 - 0.5) * width * 0.5;
                        Circle::new((x + jitter, *v), 2, BLACK.mix(0.6).filled())
                    });
                    ctx.draw_series(dots)?;
                    if ok(b.mean) {
                        let top = if ok(b.max) { b.max } else { b.mean };
                        ctx.draw_series([Text::new(fmt_g(b.mean, 4), (x, top), label_style.clone())])?;
                    }
                }
            }
            ctx.configure_series_labels()
                .position(SeriesLabelPosition::UpperLeft)
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .draw()?;
            let axis = TextStyle::from(("sans-serif", 14).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
            for (g, (label, _)) in chart.groups.iter().enumerate() {
                let (px, py) = ctx.backend_coord(&(g as f64 + 0.5, $base));
                root.draw(&Text::new(label.clone(), (px, py + 8), axis.clone()))?;
            }
        }};
    }
    if chart.log {
        let (lo, hi) = (lo / 3.0, hi * 30.0);
        body!(builder.build_cartesian_2d(0f64..n, (lo..hi).log_scale())?, lo);
    } else {
        let lo = lo.min(0.0);
        let hi = if hi > 0.0 { hi * 1.3 } else { 1.0 };
        body!(builder.build_cartesian_2d(0f64..n, lo..hi)?, lo);
    }
    Ok(())
}

/// A y-axis tick: `2500`, `0.5`, `0.001` (no trailing zeros).
fn axis_label(v: f64) -> String {
    if v.abs() >= 1.0 || v == 0.0 {
        let s = format!("{v:.2}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        fmt_g(v, 3)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bar(v: &[f64]) -> Option<Bar> {
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        let min = v.iter().copied().fold(f64::INFINITY, f64::min);
        let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Some(Bar { mean, min, max, samples: v.to_vec() })
    }

    #[test]
    fn draws_grouped_bars_linear_and_log() {
        for log in [false, true] {
            let chart = Chart {
                title: "t".into(),
                y_label: "Gbps".into(),
                log,
                series: vec!["legacy".into(), "passthrough".into()],
                groups: vec![
                    ("UDP L4".into(), vec![bar(&[80.0, 85.0, 90.0]), bar(&[1900.0, 2000.0])]),
                    ("fraglist".into(), vec![bar(&[0.001, 0.002]), None]),
                ],
            };
            let svg = render_svg(&chart).unwrap();
            assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
            for text in ["UDP L4", "fraglist", "legacy", "passthrough", "Gbps"] {
                assert!(svg.contains(text), "{text} missing (log {log})");
            }
            // One dot per run drawn.
            assert_eq!(svg.matches(r#"r="2""#).count(), 7, "log {log}");
        }
    }

    #[test]
    fn axis_labels() {
        assert_eq!(axis_label(2500.0), "2500");
        assert_eq!(axis_label(1.5), "1.5");
        assert_eq!(axis_label(0.1), "0.1");
        assert_eq!(axis_label(0.00123), "0.00123");
        assert_eq!(axis_label(0.0), "0");
    }

    #[test]
    fn refuses_empty_charts() {
        let chart = Chart {
            title: "empty".into(),
            y_label: "x".into(),
            log: true,
            series: vec!["a".into()],
            groups: vec![("g".into(), vec![bar(&[0.0]), None])],
        };
        assert!(render_svg(&chart).unwrap_err().contains("no value"));
    }
}
