//! Splitting Jinja expression code into its ordering comparisons: the operands of every
//! `<`, `<=`, `>`, `>=` at the top level of an `and`/`or`/`not`/`if`/`else`/`,` segment.
//! Used by the expression engine to refuse, before a run, an ordering between a string
//! literal and a number (minijinja would compare them silently).

/// Splits `source` at top-level `and`/`or`/`not`/`if`/`else`/`,` and returns the two
/// sides of every segment holding exactly one ordering comparison, recursing into
/// parenthesised segments. A heuristic: anything it cannot split is left unchecked.
pub fn comparison_operands(source: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    split_segments(source, &mut out, 0);
    out
}

fn split_segments(src: &str, out: &mut Vec<(String, String)>, level: usize) {
    if level > 8 {
        return;
    }
    let bytes = src.as_bytes();
    let mask = super::code_mask(src);
    let mut depth = 0i32;
    let mut start = 0;
    let mut segments = Vec::new();
    let mut i = 0;
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    while i < bytes.len() {
        let b = bytes[i];
        if !mask[i] {
            i += 1;
            continue;
        }
        match b {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth -= 1,
            b',' if depth == 0 => {
                segments.push(&src[start..i]);
                start = i + 1;
            }
            _ if depth == 0 && is_ident(b) && (i == 0 || !is_ident(bytes[i - 1])) => {
                let end = (i..bytes.len())
                    .find(|&j| !is_ident(bytes[j]))
                    .unwrap_or(bytes.len());
                if matches!(&src[i..end], "and" | "or" | "not" | "if" | "else") {
                    segments.push(&src[start..i]);
                    start = end;
                }
                i = end;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    segments.push(&src[start..]);
    for seg in segments {
        let t = seg.trim();
        if t.is_empty() {
            continue;
        }
        if t.starts_with('(') && t.ends_with(')') && balanced_outer(t) {
            split_segments(&t[1..t.len() - 1], out, level + 1);
            continue;
        }
        if let Some((l, r)) = split_comparison(t) {
            out.push((l, r));
        }
    }
}

fn balanced_outer(t: &str) -> bool {
    let mut depth = 0i32;
    for (i, c) in t.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 && i != t.len() - 1 {
                    return false;
                }
            }
            _ => {}
        }
    }
    depth == 0
}

fn split_comparison(t: &str) -> Option<(String, String)> {
    let bytes = t.as_bytes();
    let mask = super::code_mask(t);
    let mut depth = 0i32;
    let mut found: Option<(usize, usize)> = None;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if !mask[i] {
            i += 1;
            continue;
        }
        match b {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth -= 1,
            b'<' | b'>' if depth == 0 => {
                let len = if bytes.get(i + 1) == Some(&b'=') {
                    2
                } else {
                    1
                };
                if found.is_some() {
                    return None;
                }
                found = Some((i, len));
                i += len;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    let (at, len) = found?;
    let (l, r) = (t[..at].trim(), t[at + len..].trim());
    (!l.is_empty() && !r.is_empty()).then(|| (l.to_string(), r.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_comparisons() {
        assert_eq!(
            comparison_operands("a >= b"),
            vec![("a".to_string(), "b".to_string())]
        );
        assert_eq!(
            comparison_operands("(x | length == 0 or y > 'a<b') and n < m"),
            vec![("y".into(), "'a<b'".into()), ("n".into(), "m".into())]
        );
        assert!(
            comparison_operands("f(a < b, c)").is_empty()
                || comparison_operands("f(a < b, c)").len() <= 1
        );
    }
}
