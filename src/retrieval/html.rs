//! HTML loader built on the `scraper` parser.
//!
//! Takes the page's `<main>` element (fallback: `<body>`, then the whole document),
//! drops navigation chrome (`nav`, `footer`, `script`, `style`, buttons, the mdBook
//! sidebar / menu bar / chapter arrows), and renders blocks as text separated by blank
//! lines. Headings become [`Heading`]s; `<pre>` blocks are kept verbatim.

use scraper::{node::Element, ElementRef, Html, Node, Selector};

use super::extracted::{Extracted, Heading};

/// The outcome of reading one HTML page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HtmlPage {
    /// A page with content.
    Content(Extracted),
    /// A redirect stub (`<meta http-equiv="refresh">` and no `<main>`).
    Redirect,
    /// A page without `<main>` that asks not to be indexed (`robots: noindex`), such
    /// as the mdBook `toc.html` sidebar frame.
    NoIndex,
}

const SKIP_TAGS: &[&str] = &[
    "nav", "footer", "script", "style", "noscript", "template", "button", "iframe", "form",
    "input", "select", "textarea", "svg", "head", "aside",
];
const SKIP_IDS: &[&str] = &[
    "sidebar",
    "mdbook-sidebar",
    "menu-bar",
    "mdbook-menu-bar",
    "menu-bar-hover-placeholder",
    "mdbook-menu-bar-hover-placeholder",
    "search-wrapper",
    "mdbook-search-wrapper",
    "searchresults-outer",
    "mdbook-searchresults-outer",
    "mdbook-help-container",
    "mdbook-sidebar-resize-handle",
];
const SKIP_CLASSES: &[&str] = &[
    "sidebar",
    "sidebar-scrollbox",
    "sidebar-resize-handle",
    "sidebar-resize-indicator",
    "nav-chapters",
    "mobile-nav-chapters",
    "nav-wrapper",
    "nav-wide-wrapper",
    "menu-bar",
    "menu-title",
    "left-buttons",
    "right-buttons",
    "search-wrapper",
    "spinner-wrapper",
    "buttons",
];
const BLOCK_TAGS: &[&str] = &[
    "p",
    "div",
    "section",
    "article",
    "main",
    "body",
    "ul",
    "ol",
    "dl",
    "table",
    "thead",
    "tbody",
    "tfoot",
    "blockquote",
    "figure",
    "figcaption",
    "details",
    "summary",
    "hr",
    "header",
    "address",
    "fieldset",
];
const LINE_TAGS: &[&str] = &["li", "tr", "br", "dt", "dd", "caption"];

fn is_skipped(e: &Element) -> bool {
    let name = e.name();
    if SKIP_TAGS.contains(&name) {
        return true;
    }
    if e.id().map(|id| SKIP_IDS.contains(&id)).unwrap_or(false) {
        return true;
    }
    if e.classes().any(|c| SKIP_CLASSES.contains(&c)) {
        return true;
    }
    // The mdBook table of contents list.
    if name == "ol" && e.classes().any(|c| c == "chapter") {
        return true;
    }
    e.attr("aria-hidden") == Some("true") && name != "span"
}

fn heading_level(name: &str) -> Option<u8> {
    match name {
        "h1" => Some(1),
        "h2" => Some(2),
        "h3" => Some(3),
        "h4" => Some(4),
        "h5" => Some(5),
        "h6" => Some(6),
        _ => None,
    }
}

/// Accumulates text with collapsed inline whitespace and explicit block breaks.
#[derive(Default)]
struct TextBuilder {
    out: String,
    pending_space: bool,
    /// 0: none, 1: newline, 2: blank line.
    pending_break: u8,
}

impl TextBuilder {
    fn brk(&mut self, n: u8) {
        self.pending_break = self.pending_break.max(n);
    }

    /// Writes the pending separator (if any text precedes) and returns the offset.
    fn flush_sep(&mut self) -> usize {
        if !self.out.is_empty() {
            if self.pending_break > 0 {
                let trimmed = self.out.trim_end_matches([' ', '\t']).len();
                self.out.truncate(trimmed);
                let have = self.out.len() - self.out.trim_end_matches('\n').len();
                let want = self.pending_break as usize;
                for _ in have..want {
                    self.out.push('\n');
                }
            } else if self.pending_space && !self.out.ends_with([' ', '\n']) {
                self.out.push(' ');
            }
        }
        self.pending_break = 0;
        self.pending_space = false;
        self.out.len()
    }

    fn inline(&mut self, text: &str) {
        let mut words = text.split_whitespace().peekable();
        if text.starts_with(char::is_whitespace) {
            self.pending_space = true;
        }
        while let Some(w) = words.next() {
            self.flush_sep();
            self.out.push_str(w);
            if words.peek().is_some() {
                self.pending_space = true;
            }
        }
        if text.ends_with(char::is_whitespace) && !text.trim().is_empty() {
            self.pending_space = true;
        }
    }

    fn verbatim_block(&mut self, text: &str) {
        let text = text.trim_end();
        let text = text.trim_start_matches('\n');
        if text.trim().is_empty() {
            return;
        }
        self.brk(2);
        self.flush_sep();
        self.out.push_str(text);
        self.brk(2);
    }
}

/// Text of the descendants of `node` (skipping chrome); `collapse` joins words with one
/// space, otherwise text nodes are concatenated verbatim.
fn descendant_text(el: ElementRef<'_>, collapse: bool) -> String {
    let mut s = String::new();
    let mut stack = vec![*el];
    let mut ordered = Vec::new();
    // Iterative pre-order traversal (children pushed in reverse).
    while let Some(n) = stack.pop() {
        match n.value() {
            Node::Element(e) if is_skipped(e) => continue,
            Node::Text(t) => ordered.push(&**t),
            _ => {}
        }
        let kids: Vec<_> = n.children().collect();
        stack.extend(kids.into_iter().rev());
    }
    for t in ordered {
        s.push_str(t);
    }
    if collapse {
        s.split_whitespace().collect::<Vec<_>>().join(" ")
    } else {
        s
    }
}

/// Parses an HTML page and extracts its main text.
pub fn extract_html(source: &str) -> HtmlPage {
    let doc = Html::parse_document(source);
    let sel = |s: &str| Selector::parse(s).ok();
    let main = sel("main").and_then(|s| doc.select(&s).next());
    let has_meta = |pred: &dyn Fn(&Element) -> bool| {
        sel("meta")
            .map(|s| doc.select(&s).any(|m| pred(m.value())))
            .unwrap_or(false)
    };
    if main.is_none() {
        let refresh = has_meta(&|m: &Element| {
            m.attr("http-equiv")
                .map(|v| v.eq_ignore_ascii_case("refresh"))
                .unwrap_or(false)
        });
        if refresh {
            return HtmlPage::Redirect;
        }
        let noindex = has_meta(&|m: &Element| {
            m.attr("name")
                .map(|v| v.eq_ignore_ascii_case("robots"))
                .unwrap_or(false)
                && m.attr("content")
                    .map(|c| c.to_ascii_lowercase().contains("noindex"))
                    .unwrap_or(false)
        });
        if noindex {
            return HtmlPage::NoIndex;
        }
    }
    let root = main.or_else(|| sel("body").and_then(|s| doc.select(&s).next()));
    let root_node = match root {
        Some(r) => *r,
        None => doc.tree.root(),
    };
    let mut b = TextBuilder::default();
    let mut headings = Vec::new();
    // (node, entering)
    let mut stack = vec![(root_node, true)];
    while let Some((n, entering)) = stack.pop() {
        match n.value() {
            Node::Text(t) if entering => b.inline(t),
            Node::Element(e) => {
                let name = e.name();
                if !entering {
                    if BLOCK_TAGS.contains(&name) {
                        b.brk(2);
                    } else if LINE_TAGS.contains(&name) {
                        b.brk(1);
                    } else if name == "td" || name == "th" {
                        b.pending_space = true;
                    }
                    continue;
                }
                if is_skipped(e) {
                    continue;
                }
                if let Some(level) = heading_level(name) {
                    let text = ElementRef::wrap(n)
                        .map(|el| descendant_text(el, true))
                        .unwrap_or_default();
                    if !text.is_empty() {
                        b.brk(2);
                        let start = b.flush_sep();
                        b.out.push_str(&text);
                        b.brk(2);
                        headings.push(Heading { level, text, start });
                    }
                    continue;
                }
                if name == "pre" {
                    if let Some(el) = ElementRef::wrap(n) {
                        b.verbatim_block(&descendant_text(el, false));
                    }
                    continue;
                }
                if BLOCK_TAGS.contains(&name) {
                    b.brk(2);
                } else if LINE_TAGS.contains(&name) {
                    b.brk(1);
                }
                stack.push((n, false));
                let kids: Vec<_> = n.children().collect();
                stack.extend(kids.into_iter().rev().map(|k| (k, true)));
            }
            _ => {
                if entering {
                    let kids: Vec<_> = n.children().collect();
                    stack.extend(kids.into_iter().rev().map(|k| (k, true)));
                }
            }
        }
    }
    let text = b.out.trim_end().to_string();
    let title = headings
        .iter()
        .find(|h| h.level == 1)
        .map(|h| h.text.clone())
        .or_else(|| {
            sel("title")
                .and_then(|s| doc.select(&s).next())
                .map(|t| {
                    t.text()
                        .collect::<String>()
                        .split_whitespace()
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .filter(|t| !t.is_empty())
        });
    HtmlPage::Content(Extracted {
        title,
        text,
        headings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn main_content_without_chrome() {
        let page = r##"<html><head><title>T - Book</title><style>.x{}</style></head><body>
<nav id="sidebar"><ol class="chapter"><li>NAVTEXT chapter</li></ol></nav>
<div id="menu-bar">MENUTEXT</div>
<main><h1 id="a"><a class="header" href="#a">Hello  World</a></h1>
<p>First <em>para</em>
 text.</p><pre><code>fn main() {
    println!("x");
}</code></pre><h2>Sub</h2><ul><li>one</li><li>two</li></ul>
<nav class="nav-wrapper">PREVNEXT</nav></main><footer>FOOTTEXT</footer>
<script>var SCRIPTTEXT = 1;</script></body></html>"##;
        let HtmlPage::Content(e) = extract_html(page) else {
            panic!("expected content")
        };
        assert_eq!(e.title.as_deref(), Some("Hello World"));
        for bad in ["NAVTEXT", "MENUTEXT", "PREVNEXT", "FOOTTEXT", "SCRIPTTEXT"] {
            assert!(!e.text.contains(bad), "{bad} in {:?}", e.text);
        }
        assert_eq!(
            e.text,
            "Hello World\n\nFirst para text.\n\nfn main() {\n    println!(\"x\");\n}\n\nSub\n\none\ntwo"
        );
        assert_eq!(e.headings.len(), 2);
        assert_eq!(&e.text[e.headings[1].start..e.headings[1].start + 3], "Sub");
    }

    #[test]
    fn redirect_stub() {
        let page = r#"<html><head><meta http-equiv="refresh" content="0; URL=x.html"></head><body><p>Redirecting to x</p></body></html>"#;
        assert_eq!(extract_html(page), HtmlPage::Redirect);
    }
}
