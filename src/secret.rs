//! API keys: read from the environment only ([`read_env`], the one rule for every
//! key variable: set, valid UTF-8, non-empty after trimming), held in a [`Secret`]
//! that never shows itself.

/// An API key. `Debug` and `Display` never show it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a key.
    pub fn new(key: String) -> Secret {
        Secret(key)
    }

    /// The key, for the one header that carries it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

impl std::fmt::Display for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[redacted]")
    }
}

/// Why a key variable gives no key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unreadable {
    /// The variable is not set.
    NotSet,
    /// It is set to an empty (or blank) value.
    Empty,
    /// Its value is not valid UTF-8.
    NotUnicode,
}

impl Unreadable {
    /// `is not set`, `is empty`, `is not valid UTF-8`: completes "the API key variable X …".
    pub fn describe(self) -> &'static str {
        match self {
            Unreadable::NotSet => "is not set",
            Unreadable::Empty => "is empty",
            Unreadable::NotUnicode => "is not valid UTF-8",
        }
    }
}

/// The key held by environment variable `var`, trimmed.
///
/// # Errors
/// Why there is none: unset, empty or blank, not UTF-8.
pub fn read_env(var: &str) -> Result<Secret, Unreadable> {
    match std::env::var(var) {
        Ok(k) if !k.trim().is_empty() => Ok(Secret::new(k.trim().to_string())),
        Ok(_) => Err(Unreadable::Empty),
        Err(std::env::VarError::NotPresent) => Err(Unreadable::NotSet),
        Err(std::env::VarError::NotUnicode(_)) => Err(Unreadable::NotUnicode),
    }
}
