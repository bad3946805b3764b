//! Base URLs: parsed and checked (http or https, no query or fragment), and joined
//! with an endpoint path.

use crate::providers::EndpointError;

/// Parses and checks the `base_url` of model `name` (http or https, a host, no query
/// or fragment).
///
/// # Errors
/// The [`EndpointError`] naming the model and quoting the URL.
pub(crate) fn parse_base(name: &str, base: &str) -> Result<reqwest::Url, EndpointError> {
    let url = reqwest::Url::parse(base.trim()).map_err(|e| EndpointError::NotUrl {
        model: name.to_string(),
        base: base.to_string(),
        reason: e.to_string(),
    })?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(EndpointError::NotHttp {
            model: name.to_string(),
            base: base.to_string(),
        });
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(EndpointError::QueryOrFragment {
            model: name.to_string(),
            base: base.to_string(),
        });
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
