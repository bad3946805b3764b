//! Inline SVG charts for report.html: grouped bars with CI whiskers, a grouped
//! histogram, and latency box plots. Every label is XML-escaped.
use std::fmt::Write;

/// Escapes text for HTML and SVG (`& < > " '`).
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// Series colours (colour-blind safe, Okabe–Ito), cycled.
pub const COLORS: &[&str] = &[
    "#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000",
];

fn color(i: usize) -> &'static str {
    COLORS[i % COLORS.len()]
}

/// One bar: value and optional CI, both in axis units.
#[derive(Clone, Copy, Debug)]
pub struct Bar {
    /// Height.
    pub value: Option<f64>,
    /// Whisker.
    pub ci: Option<[f64; 2]>,
}

fn legend(out: &mut String, series: &[String], x: f64, y: f64) {
    for (i, s) in series.iter().enumerate() {
        let yy = y + i as f64 * 16.0;
        let _ = write!(
            out,
            r#"<rect x="{x}" y="{}" width="10" height="10" fill="{}"/><text x="{}" y="{}" font-size="11">{}</text>"#,
            yy - 9.0,
            color(i),
            x + 14.0,
            yy,
            esc(s)
        );
    }
}

/// Ticks drawn by [`grouped_bars`] (0, ¼, ½, ¾ and the whole of `y_max`).
pub const TICKS: usize = 4;

/// A y-axis maximum for counts whose ticks all fall on distinct integers: the smallest
/// multiple of [`TICKS`] that is at least `max_count` (at least [`TICKS`]).
pub fn count_axis_max(max_count: usize) -> f64 {
    (max_count.max(1).div_ceil(TICKS) * TICKS) as f64
}

/// Grouped bars: `groups[g].1[s]` is series `s` in group `g`; the y axis runs from 0
/// to `y_max` (shares: 1.0), ticks formatted by `tick`.
pub fn grouped_bars(
    title: &str,
    groups: &[(String, Vec<Bar>)],
    series: &[String],
    y_max: f64,
    tick: impl Fn(f64) -> String,
) -> String {
    let (w, h) = (900.0, 300.0);
    let (left, right, top, bottom) = (50.0, 150.0, 30.0, 50.0);
    let pw = w - left - right;
    let ph = h - top - bottom;
    let y_max = if y_max > 0.0 { y_max } else { 1.0 };
    let y = |v: f64| top + ph * (1.0 - (v / y_max).clamp(0.0, 1.0));
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<svg viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" aria-label="{}" font-family="sans-serif">"#,
        esc(title)
    );
    let _ = write!(
        out,
        r#"<text x="{left}" y="18" font-size="14" font-weight="bold">{}</text>"#,
        esc(title)
    );
    for i in 0..=TICKS {
        let v = y_max * i as f64 / TICKS as f64;
        let yy = y(v);
        let _ = write!(
            out,
            r##"<line x1="{left}" x2="{}" y1="{yy:.1}" y2="{yy:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" font-size="10" text-anchor="end">{}</text>"##,
            left + pw,
            left - 4.0,
            yy + 3.0,
            esc(&tick(v))
        );
    }
    let ng = groups.len().max(1) as f64;
    let gw = pw / ng;
    let ns = series.len().max(1) as f64;
    let bw = (gw * 0.8) / ns;
    for (g, (label, bars)) in groups.iter().enumerate() {
        let gx = left + g as f64 * gw + gw * 0.1;
        for (s, b) in bars.iter().enumerate() {
            let x = gx + s as f64 * bw;
            if let Some(v) = b.value {
                let _ = write!(
                    out,
                    r#"<rect x="{x:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{}"><title>{}: {}</title></rect>"#,
                    y(v),
                    (bw - 2.0).max(1.0),
                    (top + ph - y(v)).max(0.0),
                    color(s),
                    esc(series.get(s).map_or("", String::as_str)),
                    esc(&tick(v))
                );
            }
            if let Some([lo, hi]) = b.ci {
                let cx = x + (bw - 2.0).max(1.0) / 2.0;
                let _ = write!(
                    out,
                    r##"<g stroke="#222" stroke-width="1.2"><line x1="{cx:.1}" x2="{cx:.1}" y1="{:.1}" y2="{:.1}"/><line x1="{:.1}" x2="{:.1}" y1="{:.1}" y2="{:.1}"/><line x1="{:.1}" x2="{:.1}" y1="{:.1}" y2="{:.1}"/></g>"##,
                    y(lo),
                    y(hi),
                    cx - 4.0,
                    cx + 4.0,
                    y(lo),
                    y(lo),
                    cx - 4.0,
                    cx + 4.0,
                    y(hi),
                    y(hi)
                );
            }
        }
        let _ = write!(
            out,
            r#"<text x="{:.1}" y="{:.1}" font-size="11" text-anchor="middle">{}</text>"#,
            left + g as f64 * gw + gw / 2.0,
            top + ph + 16.0,
            esc(label)
        );
    }
    let _ = write!(
        out,
        r##"<line x1="{left}" x2="{}" y1="{}" y2="{}" stroke="#444"/>"##,
        left + pw,
        top + ph,
        top + ph
    );
    legend(&mut out, series, left + pw + 20.0, top + 10.0);
    out.push_str("</svg>");
    out
}

/// Five-number summary plus points of one series, ms.
#[derive(Clone, Debug, Default)]
pub struct BoxData {
    /// Every value.
    pub values: Vec<f64>,
}

/// Most dots a box plot draws per series.
pub const MAX_DOTS: usize = 400;

/// Horizontal box plots (min, quartiles, p95 marker, max) with every value as a dot
/// (sorted, so the plot does not depend on the values' order; above [`MAX_DOTS`]
/// values, that many evenly spaced by rank).
pub fn box_plots(title: &str, series: &[String], data: &[BoxData], unit: &str) -> String {
    let row_h = 46.0;
    // The left margin fits the longest series name (about 6.5 px a character at
    // font-size 11), so names are never clipped.
    let longest = series.iter().map(|s| s.chars().count()).max().unwrap_or(0);
    let left = (longest as f64 * 6.5 + 16.0).clamp(120.0, 400.0);
    let (w, right, top) = (780.0 + left, 30.0, 34.0);
    let h = top + row_h * series.len().max(1) as f64 + 40.0;
    let pw = w - left - right;
    let max = data
        .iter()
        .flat_map(|d| d.values.iter().copied())
        .fold(0.0f64, f64::max);
    let max = if max > 0.0 { max * 1.05 } else { 1.0 };
    let x = |v: f64| left + pw * (v / max).clamp(0.0, 1.0);
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<svg viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" aria-label="{}" font-family="sans-serif">"#,
        esc(title)
    );
    let _ = write!(
        out,
        r#"<text x="10" y="18" font-size="14" font-weight="bold">{}</text>"#,
        esc(title)
    );
    let axis_y = top + row_h * series.len().max(1) as f64;
    for i in 0..=5 {
        let v = max * f64::from(i) / 5.0;
        let _ = write!(
            out,
            r##"<line x1="{0:.1}" x2="{0:.1}" y1="{top}" y2="{axis_y}" stroke="#eee"/><text x="{0:.1}" y="{1:.1}" font-size="10" text-anchor="middle">{2:.1} {3}</text>"##,
            x(v),
            axis_y + 14.0,
            v,
            esc(unit)
        );
    }
    for (i, (name, d)) in series.iter().zip(data).enumerate() {
        let cy = top + row_h * i as f64 + row_h / 2.0;
        let _ = write!(
            out,
            r#"<text x="{:.1}" y="{:.1}" font-size="11" text-anchor="end">{}</text>"#,
            left - 8.0,
            cy + 4.0,
            esc(name)
        );
        let q = |p: f64| super::stats::quantile(&d.values, p);
        if let (Some(mn), Some(q1), Some(md), Some(q3), Some(p95), Some(mx)) =
            (q(0.0), q(0.25), q(0.5), q(0.75), q(0.95), q(1.0))
        {
            let c = color(i);
            let _ = write!(
                out,
                r##"<line x1="{:.1}" x2="{:.1}" y1="{cy:.1}" y2="{cy:.1}" stroke="#555"/><rect x="{:.1}" y="{:.1}" width="{:.1}" height="18" fill="{c}" fill-opacity="0.35" stroke="{c}"/><line x1="{:.1}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="#000" stroke-width="2"/><line x1="{:.1}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="#c00" stroke-width="2"><title>p95 {p95:.1} {u}</title></line>"##,
                x(mn),
                x(mx),
                x(q1),
                cy - 9.0,
                (x(q3) - x(q1)).max(1.0),
                x(md),
                x(md),
                cy - 9.0,
                cy + 9.0,
                x(p95),
                x(p95),
                cy - 12.0,
                cy + 12.0,
                u = esc(unit)
            );
            // Every run up to MAX_DOTS; above, MAX_DOTS runs evenly spaced by rank
            // (the plot's size stays bounded at any dataset size).
            let mut sorted = d.values.clone();
            sorted.sort_by(f64::total_cmp);
            let shown: Vec<f64> = if sorted.len() <= MAX_DOTS {
                sorted
            } else {
                (0..MAX_DOTS)
                    .map(|j| sorted[j * (sorted.len() - 1) / (MAX_DOTS - 1)])
                    .collect()
            };
            for (k, v) in shown.iter().enumerate() {
                let jitter = ((k * 7919) % 13) as f64 - 6.0;
                let _ = write!(
                    out,
                    r#"<circle cx="{:.1}" cy="{:.1}" r="1.8" fill="{c}" fill-opacity="0.7"/>"#,
                    x(*v),
                    cy + jitter
                );
            }
        }
    }
    let _ = write!(
        out,
        r##"<text x="{left}" y="{:.1}" font-size="10" fill="#555">box: quartiles; black: median; red: p95; whiskers: min–max; dots: every run{}</text>"##,
        h - 6.0,
        if data.iter().any(|d| d.values.len() > MAX_DOTS) {
            format!(" (above {MAX_DOTS} runs: {MAX_DOTS} evenly spaced by rank)")
        } else {
            String::new()
        }
    );
    out.push_str("</svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_escaped() {
        let s = grouped_bars(
            "<x>",
            &[(
                "a&b".into(),
                vec![Bar {
                    value: Some(0.5),
                    ci: Some([0.4, 0.6]),
                }],
            )],
            &["<script>".into()],
            1.0,
            |v| format!("{v}"),
        );
        assert!(!s.contains("<script>") && s.contains("&lt;script&gt;") && s.contains("a&amp;b"));
        let b = box_plots(
            "t",
            &["v\"".into()],
            &[BoxData {
                values: vec![1.0, 2.0, 3.0],
            }],
            "ms",
        );
        assert!(b.contains("v&quot;") && b.contains("<circle"));
    }

    #[test]
    fn count_axes_have_distinct_integer_ticks() {
        for max in [0usize, 1, 2, 3, 4, 5, 7, 35, 40] {
            let y_max = count_axis_max(max);
            assert!(y_max >= max as f64, "{max}");
            let svg = grouped_bars(
                "h",
                &[(
                    "1".into(),
                    vec![Bar {
                        value: Some(max as f64),
                        ci: None,
                    }],
                )],
                &["v".into()],
                y_max,
                |v| format!("{v:.0}"),
            );
            let labels: Vec<&str> = svg
                .split(r#"text-anchor="end">"#)
                .skip(1)
                .map(|t| t.split('<').next().unwrap())
                .collect();
            assert_eq!(labels.len(), TICKS + 1, "{max}: {labels:?}");
            let mut unique = labels.clone();
            unique.dedup();
            assert_eq!(unique, labels, "{max}: duplicate tick labels");
            for i in 0..=TICKS {
                let v = y_max * i as f64 / TICKS as f64;
                assert_eq!(v.fract(), 0.0, "{max}: tick {v}");
            }
        }
        assert_eq!(count_axis_max(3), 4.0);
        assert_eq!(count_axis_max(35), 36.0);
    }
}
