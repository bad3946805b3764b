//! Chunking: split extracted text into heading sections, then split long sections into
//! overlapping chunks at paragraph, sentence or word boundaries (always on UTF-8 char
//! boundaries).
//!
//! Guarantees (tested by a property test):
//! - every chunk is a non-empty `[start, end)` byte range of the text on char
//!   boundaries, with no leading or trailing whitespace;
//! - every non-whitespace byte of the text lies in at least one chunk;
//! - a chunk is at most `max` bytes long, unless a single character is longer.

use super::extracted::Heading;

/// Chunk sizes in bytes of UTF-8 text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ChunkSizes {
    /// Preferred chunk length (default 1200).
    pub target: usize,
    /// Hard upper bound (default 1600); a section up to this long stays one chunk.
    pub max: usize,
    /// Bytes shared by consecutive chunks of one section (default 200).
    pub overlap: usize,
}

impl Default for ChunkSizes {
    fn default() -> Self {
        ChunkSizes {
            target: 1200,
            max: 1600,
            overlap: 200,
        }
    }
}

impl ChunkSizes {
    /// Clamps nonsensical values: `max >= target >= 8`, `overlap <= target / 2`.
    pub fn normalized(self) -> ChunkSizes {
        let target = self.target.max(8);
        let max = self.max.max(target);
        let overlap = self.overlap.min(target / 2);
        ChunkSizes {
            target,
            max,
            overlap,
        }
    }
}

/// One chunk: a byte range of the extracted text and its enclosing headings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// Start byte offset (inclusive).
    pub start: usize,
    /// End byte offset (exclusive).
    pub end: usize,
    /// Enclosing headings, outermost first.
    pub heading_path: Vec<String>,
}

fn floor_boundary(text: &str, mut i: usize) -> usize {
    i = i.min(text.len());
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_boundary(text: &str, mut i: usize) -> usize {
    i = i.min(text.len());
    while !text.is_char_boundary(i) {
        i += 1;
    }
    i
}

fn skip_ws(text: &str, mut i: usize, end: usize) -> usize {
    while i < end {
        match text[i..end].chars().next() {
            Some(c) if c.is_whitespace() => i += c.len_utf8(),
            _ => break,
        }
    }
    i
}

fn trim_end_ws(text: &str, start: usize, end: usize) -> usize {
    start + text[start..end].trim_end().len()
}

/// Picks where a chunk starting at `pos` should end (exclusive), in `(pos, pos+max]`.
fn pick_end(text: &str, pos: usize, sizes: &ChunkSizes) -> usize {
    let hi = floor_boundary(text, pos + sizes.max);
    let lo = ceil_boundary(text, pos + sizes.target / 2).min(hi);
    let goal = pos + sizes.target;
    let window = &text[lo..hi];
    let closest =
        |cands: &mut dyn Iterator<Item = usize>| cands.min_by_key(|&p| (p.abs_diff(goal), p));
    // Paragraph breaks, then sentence ends / line breaks, then any whitespace.
    let para = closest(&mut window.match_indices("\n\n").map(|(i, _)| lo + i + 2));
    if let Some(p) = para {
        return p;
    }
    let sentence = closest(&mut window.char_indices().filter_map(|(i, c)| {
        let next = window[i + c.len_utf8()..].chars().next();
        let ends = matches!(c, '.' | '!' | '?' | ';' | ':')
            && next.map(char::is_whitespace).unwrap_or(false);
        if c == '\n' {
            Some(lo + i + 1)
        } else if ends {
            Some(lo + i + c.len_utf8())
        } else {
            None
        }
    }));
    if let Some(p) = sentence {
        return p;
    }
    let space = closest(
        &mut window
            .char_indices()
            .filter(|(_, c)| c.is_whitespace())
            .map(|(i, _)| lo + i),
    );
    match space {
        Some(p) if p > pos => p,
        _ => {
            if hi > pos {
                hi
            } else {
                // A single character longer than `max`.
                let c = text[pos..].chars().next().map(char::len_utf8).unwrap_or(1);
                pos + c
            }
        }
    }
}

/// Where the chunk after `[pos, end)` starts: about `overlap` bytes before `end`, at a
/// sentence or word start; always `> pos` and `<= end`.
fn next_start(text: &str, pos: usize, end: usize, sizes: &ChunkSizes) -> usize {
    if sizes.overlap == 0 {
        return end;
    }
    let from = ceil_boundary(text, end.saturating_sub(sizes.overlap).max(pos + 1));
    if from >= end {
        return end;
    }
    let window = &text[from..end];
    // Prefer the start of a sentence, then of a word.
    let mut sentence = None;
    let mut word = None;
    let mut prev: Option<char> = None;
    let mut prev2: Option<char> = None;
    for (i, c) in window.char_indices() {
        if !c.is_whitespace() {
            if let Some(p) = prev.filter(|p| p.is_whitespace()) {
                if word.is_none() {
                    word = Some(from + i);
                }
                let after_stop = p == '\n' || matches!(prev2, Some('.' | '!' | '?'));
                if after_stop && sentence.is_none() {
                    sentence = Some(from + i);
                }
            }
        }
        prev2 = prev;
        prev = Some(c);
    }
    sentence.or(word).unwrap_or(end)
}

fn split_section(
    text: &str,
    start: usize,
    end: usize,
    sizes: &ChunkSizes,
    path: &[String],
    out: &mut Vec<Chunk>,
) {
    let mut pos = skip_ws(text, start, end);
    let end = trim_end_ws(text, pos, end);
    while pos < end {
        if end - pos <= sizes.max {
            out.push(Chunk {
                start: pos,
                end,
                heading_path: path.to_vec(),
            });
            break;
        }
        let cut = pick_end(text, pos, sizes);
        let chunk_end = trim_end_ws(text, pos, cut);
        let chunk_end = if chunk_end > pos { chunk_end } else { cut };
        out.push(Chunk {
            start: pos,
            end: chunk_end,
            heading_path: path.to_vec(),
        });
        let next = next_start(text, pos, cut, sizes);
        let next = if next > pos { next } else { cut };
        pos = skip_ws(text, next, end);
    }
}

/// Splits `text` into chunks. `headings` must be sorted by `start` and point into
/// `text` (out-of-range or unsorted headings are ignored).
pub fn chunk_text(text: &str, headings: &[Heading], sizes: &ChunkSizes) -> Vec<Chunk> {
    let sizes = sizes.normalized();
    let mut valid: Vec<&Heading> = Vec::new();
    for h in headings {
        let ok = h.start < text.len()
            && text.is_char_boundary(h.start)
            && valid.last().map(|p| p.start < h.start).unwrap_or(true);
        if ok {
            valid.push(h);
        }
    }
    // A heading with nothing under it (only its own line before the next heading) is
    // merged into the following section.
    let mut splits: Vec<(usize, usize)> = Vec::new(); // (start, index of last heading covered + 1)
    let mut section_start: Option<usize> = None;
    for (i, h) in valid.iter().enumerate() {
        let next = valid.get(i + 1).map(|n| n.start).unwrap_or(text.len());
        let body = &text[h.start..next];
        let after_line = body.find('\n').map(|j| &body[j..]).unwrap_or("");
        let start = *section_start.get_or_insert(h.start);
        if after_line.trim().is_empty() && i + 1 < valid.len() {
            continue;
        }
        splits.push((start, i + 1));
        section_start = None;
    }
    let mut out = Vec::new();
    let first = splits.first().map(|s| s.0).unwrap_or(text.len());
    if first > 0 {
        split_section(text, 0, first, &sizes, &[], &mut out);
    }
    let mut stack: Vec<&Heading> = Vec::new();
    let mut consumed = 0usize;
    for (k, &(start, upto)) in splits.iter().enumerate() {
        for h in &valid[consumed..upto] {
            while stack.last().map(|t| t.level >= h.level).unwrap_or(false) {
                stack.pop();
            }
            stack.push(h);
        }
        consumed = upto;
        let path: Vec<String> = stack.iter().map(|h| h.text.clone()).collect();
        let end = splits.get(k + 1).map(|s| s.0).unwrap_or(text.len());
        split_section(text, start, end, &sizes, &path, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn h(level: u8, text: &str, start: usize) -> Heading {
        Heading {
            level,
            text: text.to_string(),
            start,
        }
    }

    #[test]
    fn sections_and_paths() {
        let text = "intro\n\nA\n\nB\n\nbody b\n\nC\n\nbody c";
        let hs = vec![h(1, "A", 7), h(2, "B", 10), h(2, "C", 21)];
        let c = chunk_text(text, &hs, &ChunkSizes::default());
        let got: Vec<_> = c
            .iter()
            .map(|c| (&text[c.start..c.end], c.heading_path.clone()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("intro", vec![]),
                ("A\n\nB\n\nbody b", vec!["A".to_string(), "B".to_string()]),
                ("C\n\nbody c", vec!["A".to_string(), "C".to_string()]),
            ]
        );
    }

    #[test]
    fn long_section_splits_with_overlap() {
        let para = "This is a sentence about ownership. ".repeat(20);
        let text = format!("{para}\n\n{para}\n\n{para}");
        let sizes = ChunkSizes::default();
        let c = chunk_text(&text, &[], &sizes);
        assert!(c.len() >= 2);
        for w in c.windows(2) {
            assert!(w[1].start < w[0].end, "overlap expected");
        }
        assert!(c.iter().all(|c| c.end - c.start <= sizes.max));
    }

    fn arb_text() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            "[a-z]{1,12}",
            Just(" ".to_string()),
            Just(". ".to_string()),
            Just("\n".to_string()),
            Just("\n\n".to_string()),
            Just("é".to_string()),
            Just("日本語".to_string()),
            Just("🦀".to_string()),
        ];
        proptest::collection::vec(piece, 0..400).prop_map(|v| v.concat())
    }

    proptest! {
        #[test]
        fn chunks_cover_text(text in arb_text(), heading_every in 0usize..5, target in 8usize..300, extra in 0usize..200, overlap in 0usize..120) {
            // Put headings at some line starts.
            let mut hs = Vec::new();
            if heading_every > 0 {
                let mut off = 0;
                for (n, line) in text.split_inclusive('\n').enumerate() {
                    if n % heading_every == 0 && !line.trim().is_empty() {
                        hs.push(Heading { level: (n % 3 + 1) as u8, text: line.trim().to_string(), start: off });
                    }
                    off += line.len();
                }
            }
            let sizes = ChunkSizes { target, max: target + extra, overlap }.normalized();
            let chunks = chunk_text(&text, &hs, &sizes);
            let mut covered = vec![false; text.len()];
            for c in &chunks {
                prop_assert!(c.start < c.end && c.end <= text.len());
                prop_assert!(text.is_char_boundary(c.start) && text.is_char_boundary(c.end));
                let s = &text[c.start..c.end];
                prop_assert_eq!(s.trim(), s);
                prop_assert!(s.len() <= sizes.max.max(4));
                for b in covered.iter_mut().take(c.end).skip(c.start) { *b = true; }
            }
            for (i, ch) in text.char_indices() {
                if !ch.is_whitespace() {
                    prop_assert!(covered[i], "byte {} ({:?}) not covered", i, ch);
                }
            }
        }
    }
}
