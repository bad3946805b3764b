//! Markdown loader: the text is kept verbatim; ATX headings (`#` .. `######`) outside
//! fenced code blocks give the heading structure.

use super::extracted::{Extracted, Heading};

/// Extracts headings from Markdown; the text itself is returned unchanged.
pub(crate) fn extract_markdown(text: &str) -> Extracted {
    let mut headings = Vec::new();
    let mut fence: Option<(char, usize)> = None;
    let mut offset = 0usize;
    for line in text.split_inclusive('\n') {
        let start = offset;
        offset += line.len();
        let trimmed = line.trim_start_matches(' ');
        let indent = line.len() - trimmed.len();
        if indent > 3 {
            continue;
        }
        let body = trimmed.trim_end();
        // Fenced code blocks: ``` or ~~~, closed by a fence of the same char, at least as long.
        if let Some(c) = body.chars().next().filter(|c| *c == '`' || *c == '~') {
            let run = body.chars().take_while(|x| *x == c).count();
            if run >= 3 {
                match fence {
                    None => {
                        fence = Some((c, run));
                        continue;
                    }
                    Some((fc, fl)) if fc == c && run >= fl && body[run..].trim().is_empty() => {
                        fence = None;
                        continue;
                    }
                    _ => {}
                }
            }
        }
        if fence.is_some() {
            continue;
        }
        let hashes = body.chars().take_while(|c| *c == '#').count();
        if (1..=6).contains(&hashes) {
            let rest = &body[hashes..];
            if rest.is_empty() || rest.starts_with(' ') || rest.starts_with('\t') {
                // Drop an optional closing run of `#`.
                let t = rest.trim();
                let t = t.trim_end_matches('#').trim_end();
                let t = if t.is_empty() && !rest.trim().is_empty() {
                    rest.trim()
                } else {
                    t
                };
                let text: String = t.split_whitespace().collect::<Vec<_>>().join(" ");
                if !text.is_empty() {
                    headings.push(Heading {
                        level: hashes as u8,
                        text,
                        start,
                    });
                }
            }
        }
    }
    let title = headings
        .iter()
        .find(|h| h.level == 1)
        .map(|h| h.text.clone());
    Extracted {
        title,
        text: text.to_string(),
        headings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headings_outside_fences() {
        let md = "# Title\n\nintro\n\n```rust\n# not a heading\n```\n\n## Sub ##\ntext\n#nospace\n";
        let e = extract_markdown(md);
        assert_eq!(e.title.as_deref(), Some("Title"));
        let hs: Vec<_> = e
            .headings
            .iter()
            .map(|h| (h.level, h.text.as_str()))
            .collect();
        assert_eq!(hs, vec![(1, "Title"), (2, "Sub")]);
        assert_eq!(&md[e.headings[1].start..e.headings[1].start + 2], "##");
        assert_eq!(e.text, md);
    }
}
