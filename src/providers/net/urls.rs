//! Base URLs: parsed and checked (http or https, no query or fragment), and joined
//! with an endpoint path.

/// Parses and checks a `base_url` (http or https).
pub(crate) fn parse_base(name: &str, base: &str) -> Result<reqwest::Url, String> {
    let url = reqwest::Url::parse(base.trim())
        .map_err(|e| format!("model `{name}`: base_url `{base}` is not a URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(format!(
            "model `{name}`: base_url `{base}` must be an http:// or https:// address"
        ));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(format!(
            "model `{name}`: base_url `{base}` must not carry a query or a fragment"
        ));
    }
    Ok(url)
}

/// `base` with `segments` appended to its path (no doubled slashes).
pub(crate) fn join(base: &reqwest::Url, segments: &str) -> String {
    let mut u = base.clone();
    let path = format!(
        "{}/{}",
        base.path().trim_end_matches('/'),
        segments.trim_start_matches('/')
    );
    u.set_path(&path);
    u.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joins() {
        let b = reqwest::Url::parse("http://h:1/v1/").unwrap();
        assert_eq!(
            join(&b, "chat/completions"),
            "http://h:1/v1/chat/completions"
        );
    }
}
