//! Line and bar charts as standalone SVG files (no dependencies): one chart per benchmark
//! result.

use std::fmt::Write;
use std::path::Path;

use anyhow::Context;

/// One line of a chart: its name and its points.
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

const COLORS: [&str; 6] = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"];

/// Writes a line chart to `path`. With `log_x`, x is drawn on a base-10 log scale.
pub fn line_chart(path: &Path, title: &str, x_label: &str, y_label: &str, log_x: bool, series: &[Series]) -> anyhow::Result<()> {
    let (w, h, left, right, top, bottom) = (760.0, 460.0, 80.0, 190.0, 40.0, 60.0);
    let tx = |x: f64| if log_x { x.max(1e-9).log10() } else { x };
    let points = series.iter().flat_map(|s| s.points.iter()).filter(|(x, y)| x.is_finite() && y.is_finite());
    let (mut x0, mut x1, mut y1) = (f64::MAX, f64::MIN, 0.0f64);
    for &(x, y) in points {
        x0 = x0.min(tx(x));
        x1 = x1.max(tx(x));
        y1 = y1.max(y);
    }
    if x0 > x1 {
        (x0, x1) = (0.0, 1.0);
    }
    if x1 == x0 {
        x1 = x0 + 1.0;
    }
    let y_step = nice_step(if y1 > 0.0 { y1 / 5.0 } else { 0.2 });
    let y1 = (y1 * 1.05 / y_step).ceil().max(1.0) * y_step;
    let px = |x: f64| left + (tx(x) - x0) / (x1 - x0) * (w - left - right);
    let py = |y: f64| h - bottom - y / y1 * (h - top - bottom);
    let ticks: Vec<(f64, f64)> = (0..=(y1 / y_step).round() as usize).map(|i| y_step * i as f64).map(|y| (py(y), y)).collect();
    let mut svg = frame(&Frame { w, h, left, right, top, bottom }, title, y_label, &ticks);
    let mut xs: Vec<f64> = series.iter().flat_map(|s| s.points.iter().map(|p| p.0)).collect();
    xs.sort_by(|a, b| a.total_cmp(b));
    xs.dedup();
    if !log_x && xs.len() > 12 {
        // Many points (a time series): evenly spaced round ticks instead of one per point.
        let step = nice_step((x1 - x0) / 8.0);
        xs = (0..).map(|i| (x0 / step).ceil() * step + step * i as f64).take_while(|x| *x <= x1 + step * 1e-9).collect();
    }
    for x in xs {
        let _ = write!(svg, r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#, px(x), h - bottom + 18.0, short(x));
    }
    let _ = write!(svg, r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#, (w - right + left) / 2.0, h - 16.0, escape(x_label));
    for (i, s) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let pts: Vec<String> =
            s.points.iter().filter(|(x, y)| x.is_finite() && y.is_finite()).map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y))).collect();
        let _ = write!(svg, r#"<polyline fill="none" stroke="{color}" stroke-width="2" points="{}"/>"#, pts.join(" "));
        for p in &pts {
            let (cx, cy) = p.split_once(',').unwrap_or(("0", "0"));
            let _ = write!(svg, r#"<circle cx="{cx}" cy="{cy}" r="3" fill="{color}"/>"#);
        }
        let ly = top + 20.0 + i as f64 * 20.0;
        let _ = write!(
            svg,
            r#"<line x1="{0}" y1="{ly}" x2="{1}" y2="{ly}" stroke="{color}" stroke-width="2"/><text x="{2}" y="{3}">{4}</text>"#,
            w - right + 14.0,
            w - right + 38.0,
            w - right + 44.0,
            ly + 4.0,
            escape(&s.name)
        );
    }
    svg.push_str("</svg>\n");
    write_svg(path, svg)
}

/// One group of bars per category, one bar per series in each (`None`: no value). With `log_y`
/// the y axis is base-10 logarithmic, for values spanning orders of magnitude.
pub fn bar_chart(path: &Path, title: &str, y_label: &str, log_y: bool, categories: &[String], series: &[(String, Vec<Option<f64>>)]) -> anyhow::Result<()> {
    let (left, right, top, bottom) = (80.0, 230.0, 40.0, 60.0);
    let group = 14.0 * series.len().max(1) as f64 + 10.0;
    let (w, h) = ((left + right + group * categories.len() as f64).max(500.0), 460.0);
    let values = series.iter().flat_map(|(_, v)| v.iter().flatten().copied()).filter(|v| v.is_finite() && *v > 0.0);
    let (lo, hi) = values.fold((f64::MAX, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let (y0, y1) = if log_y {
        let (lo, hi) = if hi > 0.0 { (lo, hi) } else { (1.0, 10.0) };
        (lo.log10().floor(), hi.log10().ceil().max(lo.log10().floor() + 1.0))
    } else {
        (0.0, if hi > 0.0 { hi * 1.1 } else { 1.0 })
    };
    let ty = |v: f64| if log_y { v.max(10f64.powf(y0)).log10() } else { v };
    let py = |v: f64| h - bottom - (ty(v) - y0) / (y1 - y0) * (h - top - bottom);
    let ticks: Vec<f64> = if log_y {
        // 1, 2 and 5 times each power of ten while the axis spans few decades.
        let multiples: &[f64] = if y1 - y0 <= 3.0 { &[1.0, 2.0, 5.0] } else { &[1.0] };
        (y0 as i32..=y1 as i32).flat_map(|e| multiples.iter().map(move |m| m * 10f64.powi(e))).filter(|t| t.log10() <= y1 + 1e-9).collect()
    } else {
        (0..=5).map(|i| y1 * i as f64 / 5.0).collect()
    };
    let ticks: Vec<(f64, f64)> = ticks.into_iter().map(|t| (py(t), t)).collect();
    let mut svg = frame(&Frame { w, h, left, right, top, bottom }, title, y_label, &ticks);
    for (c, name) in categories.iter().enumerate() {
        let x = left + group * c as f64 + 5.0;
        for (i, (_, v)) in series.iter().enumerate() {
            if let Some(v) = v.get(c).copied().flatten().filter(|v| v.is_finite() && *v > 0.0) {
                let _ = write!(
                    svg,
                    r#"<rect x="{:.1}" y="{:.1}" width="12" height="{:.1}" fill="{}"><title>{}: {}</title></rect>"#,
                    x + 14.0 * i as f64,
                    py(v),
                    (h - bottom - py(v)).max(0.5),
                    COLORS[i % COLORS.len()],
                    escape(name),
                    short(v)
                );
            }
        }
        let _ = write!(svg, r#"<text x="{:.1}" y="{}" text-anchor="middle">{}</text>"#, x + (group - 10.0) / 2.0, h - bottom + 18.0, escape(name));
    }
    for (i, (name, _)) in series.iter().enumerate() {
        let ly = top + 20.0 + i as f64 * 20.0;
        let _ = write!(
            svg,
            r#"<rect x="{0}" y="{1}" width="12" height="12" fill="{2}"/><text x="{3}" y="{4}">{5}</text>"#,
            w - right + 14.0,
            ly - 6.0,
            COLORS[i % COLORS.len()],
            w - right + 32.0,
            ly + 4.0,
            escape(name)
        );
    }
    svg.push_str("</svg>\n");
    write_svg(path, svg)
}

/// A chart's size and the margins around its plot area.
#[derive(Clone, Copy)]
struct Frame {
    w: f64,
    h: f64,
    left: f64,
    right: f64,
    top: f64,
    bottom: f64,
}

/// The start of a chart: the SVG element, the title, horizontal grid lines with their labels
/// (`ticks`: (y position, value)), the axes and the y axis' label.
fn frame(f: &Frame, title: &str, y_label: &str, ticks: &[(f64, f64)]) -> String {
    let Frame { w, h, left, right, top, bottom } = *f;
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12"><rect width="100%" height="100%" fill="white"/><text x="{}" y="24" text-anchor="middle" font-size="15">{}</text>"#,
        (w - right + left) / 2.0,
        escape(title)
    );
    for &(y, value) in ticks {
        let _ = write!(
            svg,
            r##"<line x1="{left}" y1="{y}" x2="{0}" y2="{y}" stroke="#ddd"/><text x="{1}" y="{2}" text-anchor="end">{3}</text>"##,
            w - right,
            left - 6.0,
            y + 4.0,
            short(value)
        );
    }
    let _ = write!(svg, r#"<line x1="{left}" y1="{}" x2="{}" y2="{}" stroke="black"/>"#, h - bottom, w - right, h - bottom);
    let _ = write!(svg, r#"<line x1="{left}" y1="{top}" x2="{left}" y2="{}" stroke="black"/>"#, h - bottom);
    let _ = write!(
        svg,
        r#"<text x="18" y="{0}" text-anchor="middle" transform="rotate(-90 18 {0})">{1}</text>"#,
        (h - bottom + top) / 2.0,
        escape(y_label)
    );
    svg
}

fn write_svg(path: &Path, svg: String) -> anyhow::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(path, svg).with_context(|| format!("writing {}", path.display()))?;
    println!("chart written to {}", path.display());
    Ok(())
}

/// The round step (1, 2 or 5 times a power of ten) nearest above `raw`.
fn nice_step(raw: f64) -> f64 {
    if !(raw.is_finite() && raw > 0.0) {
        return 1.0;
    }
    let power = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0].into_iter().map(|m| m * power).find(|s| *s >= raw * (1.0 - 1e-9)).unwrap_or(10.0 * power)
}

fn short(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v.abs() >= 1e6 {
        format!("{}M", trim(v / 1e6))
    } else if v.abs() >= 1e4 {
        format!("{}k", trim(v / 1e3))
    } else {
        trim(v)
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_one_two_or_five_times_a_power_of_ten() {
        for (raw, step) in [(0.3, 0.5), (1.0, 1.0), (1.2, 2.0), (37.0, 50.0), (100.0, 100.0), (4001.0, 5000.0), (0.0, 1.0)] {
            assert!((nice_step(raw) - step).abs() < 1e-9, "{raw} -> {}", nice_step(raw));
        }
    }

    #[test]
    fn a_bar_chart_draws_the_values_it_has() {
        let dir = std::env::temp_dir().join(format!("freshet-chart-{}", std::process::id()));
        let path = dir.join("bars.svg");
        let categories = vec!["Q1".to_string(), "Q2".to_string()];
        let series = vec![("a".to_string(), vec![Some(3.0), None]), ("b".to_string(), vec![Some(250.0), Some(0.7)])];
        bar_chart(&path, "t", "ms", true, &categories, &series).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(svg.matches("<title>").count(), 3, "one bar per value present");
        for label in ["Q1: 3", "Q1: 250", "Q2: 0.7", ">1000<", ">0.1<"] {
            assert!(svg.contains(label), "{label} missing");
        }
    }
}
