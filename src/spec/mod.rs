//! Loading specs: YAML with source spans, typed into [`Spec`], variants applied.
pub mod imports;
pub mod kinds;
pub mod load;
pub mod overlay;
pub mod retriever;
pub mod source;
pub mod types;
mod words;
pub mod yaml;

pub use load::{load_spec, load_spec_str, LoadedSpec};
pub use types::*;
