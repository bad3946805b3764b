//! Renders diagnostics: `human` (with the source line and carets), `json` (one
//! document, fields documented in docs/diagnostics.md) and `github` (workflow
//! annotations).
use super::{Diagnostic, Severity};
use crate::source::{Sources, Span};
use serde_json::{json, Value};
use std::fmt::Write;

/// Output format of diagnostics (the CLI's `--format` maps onto it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Readable text with source excerpts.
    Human,
    /// One JSON document: `{"diagnostics": [...], "errors": N, "warnings": N}`.
    Json,
    /// GitHub Actions workflow commands (`::error file=...,line=...::message`).
    Github,
}

fn severity_word(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
    }
}

/// Makes text safe for a terminal or a workflow log: control characters (other than
/// tab) are shown as `\u{..}` escapes instead of being written raw.
fn printable(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(|c| c.is_control() && c != '\t') {
        return std::borrow::Cow::Borrowed(s);
    }
    std::borrow::Cow::Owned(
        s.chars()
            .map(|c| {
                if c.is_control() && c != '\t' {
                    c.escape_unicode().to_string()
                } else {
                    c.to_string()
                }
            })
            .collect(),
    )
}

/// `file:line:column` of a span.
pub fn location(sources: &Sources, span: &Span) -> String {
    format!(
        "{}:{}:{}",
        sources.get(span.file).path.display(),
        span.line,
        span.col
    )
}

/// Renders one diagnostic for people.
pub fn human(d: &Diagnostic, sources: &Sources) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}[{}]: {}",
        severity_word(d.severity),
        d.code.as_str(),
        printable(&d.message)
    );
    if let Some(span) = &d.span {
        excerpt(&mut out, sources, span, "");
    }
    for (span, note) in &d.labels {
        excerpt(&mut out, sources, span, note);
    }
    if let Some(v) = &d.variant {
        let _ = writeln!(out, "   = note: in variant `{v}`");
    }
    if let Some(h) = &d.help {
        let _ = writeln!(out, "   = help: {}", printable(h));
    }
    out
}

fn excerpt(out: &mut String, sources: &Sources, span: &Span, note: &str) {
    let gutter = span.line.to_string().len().max(2);
    let pad = " ".repeat(gutter);
    let _ = writeln!(out, "{pad}--> {}", location(sources, span));
    let Some(line) = sources.line_text(span.file, span.line) else {
        return;
    };
    // Long lines (minified files) are cut around the column.
    let chars: Vec<char> = line.chars().collect();
    let start_col = (span.col as usize).saturating_sub(1);
    let window_start = start_col.saturating_sub(60);
    let window_end = (start_col + 100).min(chars.len());
    let shown: String = chars[window_start.min(chars.len())..window_end]
        .iter()
        .map(|&c| if c.is_control() { ' ' } else { c })
        .collect();
    let width = if span.end_line == span.line && span.end_col > span.col {
        (span.end_col - span.col) as usize
    } else {
        1
    };
    let width = width.min(window_end.saturating_sub(start_col).max(1));
    let _ = writeln!(out, "{pad} |");
    let _ = writeln!(out, "{:>gutter$} | {shown}", span.line);
    let marks = format!(
        "{}{} {note}",
        " ".repeat(start_col - window_start.min(start_col)),
        "^".repeat(width)
    );
    let _ = writeln!(out, "{pad} | {}", marks.trim_end());
}

/// One diagnostic as a JSON object. Fields: `code`, `severity`, `message`, `file`,
/// `line`, `column`, `end_line`, `end_column` (1-based; null without a place),
/// `help`, `variant`, `labels` (`[{file, line, column, note}]`).
pub fn json_value(d: &Diagnostic, sources: &Sources) -> Value {
    let place = |s: &Span| json!({"file": sources.get(s.file).path.display().to_string(), "line": s.line, "column": s.col});
    json!({
        "code": d.code.as_str(),
        "severity": severity_word(d.severity),
        "message": d.message,
        "file": d.span.map(|s| sources.get(s.file).path.display().to_string()),
        "line": d.span.map(|s| s.line),
        "column": d.span.map(|s| s.col),
        "end_line": d.span.map(|s| s.end_line),
        "end_column": d.span.map(|s| s.end_col),
        "help": d.help,
        "variant": d.variant,
        "labels": d.labels.iter().map(|(s, note)| { let mut v = place(s); v["note"] = json!(note); v }).collect::<Vec<_>>(),
    })
}

fn gh_escape_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

fn gh_escape_prop(s: &str) -> String {
    gh_escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

/// One diagnostic as a GitHub Actions workflow command.
pub fn github(d: &Diagnostic, sources: &Sources) -> String {
    let mut props = Vec::new();
    if let Some(s) = &d.span {
        props.push(format!(
            "file={}",
            gh_escape_prop(&sources.get(s.file).path.display().to_string())
        ));
        props.push(format!("line={}", s.line));
        props.push(format!("col={}", s.col));
        if s.end_line >= s.line {
            props.push(format!("endLine={}", s.end_line));
        }
        if s.end_line == s.line && s.end_col > s.col {
            props.push(format!("endColumn={}", s.end_col));
        }
    }
    props.push(format!(
        "title={}",
        gh_escape_prop(&format!("{} {}", d.code.as_str(), d.code.summary()))
    ));
    let mut msg = printable(&d.message).into_owned();
    if let Some(v) = &d.variant {
        msg.push_str(&format!(" (variant `{v}`)"));
    }
    if let Some(h) = &d.help {
        let h = printable(h);
        msg.push_str(&format!("\nhelp: {h}"));
    }
    format!(
        "::{} {}::{}",
        severity_word(d.severity),
        props.join(","),
        gh_escape_data(&msg)
    )
}

/// Renders a list in `format`. Human output ends with a summary line.
pub fn render(diags: &[Diagnostic], sources: &Sources, format: Format) -> String {
    let errors = diags
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .count();
    let warnings = diags.len() - errors;
    match format {
        Format::Human => {
            let mut out = String::new();
            for d in diags {
                out.push_str(&human(d, sources));
                out.push('\n');
            }
            out
        }
        Format::Json => {
            let v = json!({
                "diagnostics": diags.iter().map(|d| json_value(d, sources)).collect::<Vec<_>>(),
                "errors": errors,
                "warnings": warnings,
            });
            format!("{}\n", serde_json::to_string_pretty(&v).unwrap_or_default())
        }
        Format::Github => diags.iter().map(|d| github(d, sources) + "\n").collect(),
    }
}
