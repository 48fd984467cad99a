//! Line charts as standalone SVG files (no dependencies): one chart per benchmark result.

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
    let y1 = if y1 <= 0.0 { 1.0 } else { y1 * 1.1 };
    let px = |x: f64| left + (tx(x) - x0) / (x1 - x0) * (w - left - right);
    let py = |y: f64| h - bottom - y / y1 * (h - top - bottom);
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12"><rect width="100%" height="100%" fill="white"/><text x="{}" y="24" text-anchor="middle" font-size="15">{}</text>"#,
        (w - right + left) / 2.0,
        escape(title)
    );
    let _ = write!(svg, r#"<line x1="{left}" y1="{}" x2="{}" y2="{}" stroke="black"/>"#, h - bottom, w - right, h - bottom);
    let _ = write!(svg, r#"<line x1="{left}" y1="{top}" x2="{left}" y2="{}" stroke="black"/>"#, h - bottom);
    for i in 0..=5 {
        let y = y1 * i as f64 / 5.0;
        let _ = write!(
            svg,
            r##"<line x1="{left}" y1="{0}" x2="{1}" y2="{0}" stroke="#ddd"/><text x="{2}" y="{3}" text-anchor="end">{4}</text>"##,
            py(y),
            w - right,
            left - 6.0,
            py(y) + 4.0,
            short(y)
        );
    }
    let mut xs: Vec<f64> = series.iter().flat_map(|s| s.points.iter().map(|p| p.0)).collect();
    xs.sort_by(|a, b| a.total_cmp(b));
    xs.dedup();
    for x in xs {
        let _ = write!(svg, r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#, px(x), h - bottom + 18.0, short(x));
    }
    let _ = write!(svg, r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#, (w - right + left) / 2.0, h - 16.0, escape(x_label));
    let _ = write!(
        svg,
        r#"<text x="18" y="{0}" text-anchor="middle" transform="rotate(-90 18 {0})">{1}</text>"#,
        (h - bottom + top) / 2.0,
        escape(y_label)
    );
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
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(path, svg).with_context(|| format!("writing {}", path.display()))?;
    println!("chart written to {}", path.display());
    Ok(())
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
