//! SVG line and grouped bar charts (plotters, SVG backend only) for the eval, training and
//! demo reports.

use std::path::Path;

use anyhow::{anyhow, Result};
use plotters::prelude::*;

/// One line of a chart.
pub struct Series {
    /// Legend label.
    pub name: String,
    /// (x, y) points; sorted by x before drawing.
    pub points: Vec<(f64, f64)>,
    /// Draw as a dashed reference line.
    pub dashed: bool,
}

const COLORS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// Draws `series` as lines with point markers into an SVG file at `path`.
pub fn line_chart(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &mut [Series],
) -> Result<()> {
    let err = |e: &dyn std::fmt::Display| anyhow!("{}: cannot draw chart: {e}", path.display());
    for s in series.iter_mut() {
        s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    let all = series.iter().flat_map(|s| s.points.iter());
    let (mut x0, mut x1, mut y1) = (f64::INFINITY, f64::NEG_INFINITY, 0.0f64);
    for &(x, y) in all {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y1 = y1.max(y);
    }
    if !x0.is_finite() {
        return Err(anyhow!("{}: nothing to draw", path.display()));
    }
    let pad = ((x1 - x0) * 0.05).max(x0.abs() * 0.05).max(1e-3);
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    let mut chart = frame(
        path,
        &root,
        title,
        (x0 - pad)..(x1 + pad),
        (y1 * 1.1).max(0.05),
    )?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .draw()
        .map_err(|e| err(&e))?;
    for (i, s) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let style = ShapeStyle::from(&color).stroke_width(2);
        let points = s.points.clone();
        let anno = if s.dashed {
            chart
                .draw_series(DashedLineSeries::new(points.clone(), 6, 4, style))
                .map_err(|e| err(&e))?
        } else {
            chart
                .draw_series(LineSeries::new(points.clone(), style))
                .map_err(|e| err(&e))?
        };
        anno.label(s.name.clone()).legend(move |(x, y)| {
            PathElement::new(
                vec![(x, y), (x + 18, y)],
                ShapeStyle::from(&color).stroke_width(2),
            )
        });
        chart
            .draw_series(
                points
                    .iter()
                    .map(|&(x, y)| Circle::new((x, y), 3, color.filled())),
            )
            .map_err(|e| err(&e))?;
    }
    finish(path, &mut chart, &root)
}

/// One series of a grouped bar chart: a value per category.
pub struct Bars {
    /// Legend label.
    pub name: String,
    /// One value per category, in category order.
    pub values: Vec<f64>,
}

/// Draws grouped bars (one group per category, one bar per series) into an SVG file.
pub fn bar_chart(
    path: &Path,
    title: &str,
    y_label: &str,
    categories: &[String],
    series: &[Bars],
) -> Result<()> {
    let err = |e: &dyn std::fmt::Display| anyhow!("{}: cannot draw chart: {e}", path.display());
    if categories.is_empty() || series.is_empty() {
        return Err(anyhow!("{}: nothing to draw", path.display()));
    }
    let y1 = series
        .iter()
        .flat_map(|s| s.values.iter().copied())
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max);
    let n = categories.len();
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    let mut chart = frame(
        path,
        &root,
        title,
        -0.5..(n as f64 - 0.5),
        (y1 * 1.15).max(0.05),
    )?;
    let label = |x: &f64| {
        let i = x.round();
        if (x - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < n {
            categories[i as usize].clone()
        } else {
            String::new()
        }
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n)
        .x_label_formatter(&label)
        .y_desc(y_label)
        .draw()
        .map_err(|e| err(&e))?;
    let width = 0.8 / series.len() as f64;
    for (k, s) in series.iter().enumerate() {
        let color = COLORS[k % COLORS.len()];
        let bars = s.values.iter().enumerate().map(|(i, &v)| {
            let x0 = i as f64 - 0.4 + k as f64 * width;
            Rectangle::new(
                [
                    (x0, 0.0),
                    (x0 + width * 0.9, if v.is_finite() { v } else { 0.0 }),
                ],
                color.filled(),
            )
        });
        chart
            .draw_series(bars)
            .map_err(|e| err(&e))?
            .label(s.name.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], color.filled()));
    }
    finish(path, &mut chart, &root)
}

/// A chart over two `f64` axes on an SVG file.
type SvgChart<'a> = ChartContext<
    'a,
    SVGBackend<'a>,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

/// A white canvas with `title` and axes over `x` and `[0, y_top]`.
fn frame<'a>(
    path: &Path,
    root: &DrawingArea<SVGBackend<'a>, plotters::coord::Shift>,
    title: &str,
    x: std::ops::Range<f64>,
    y_top: f64,
) -> Result<SvgChart<'a>> {
    let err = |e: &dyn std::fmt::Display| anyhow!("{}: cannot draw chart: {e}", path.display());
    root.fill(&WHITE).map_err(|e| err(&e))?;
    ChartBuilder::on(root)
        .caption(title, ("sans-serif", 20))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(60)
        .build_cartesian_2d(x, 0.0..y_top)
        .map_err(|e| err(&e))
}

/// Draws the legend in the upper right and writes the file.
fn finish(
    path: &Path,
    chart: &mut SvgChart<'_>,
    root: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
) -> Result<()> {
    let err = |e: &dyn std::fmt::Display| anyhow!("{}: cannot draw chart: {e}", path.display());
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))
}
