//! What a file's text extraction produces (HTML and Markdown alike), the input of
//! chunking: the text, its title and its headings.

/// A heading found in a file's extracted text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heading {
    /// 1 for `h1` / `#`, up to 6.
    pub level: u8,
    /// The heading text, whitespace collapsed.
    pub text: String,
    /// Byte offset in [`Extracted::text`] where the heading's line starts.
    pub start: usize,
}

/// The text of one file, ready for chunking.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Extracted {
    /// Page title, if the file has one (first `h1`, else HTML `<title>`).
    pub title: Option<String>,
    /// The extracted text; chunk `byte_range`s index into it.
    pub text: String,
    /// Headings in order of `start`.
    pub headings: Vec<Heading>,
}
