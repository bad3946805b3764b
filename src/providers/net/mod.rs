//! What the network providers (`openai`, `anthropic`) share, one file per concept:
//! the call policy ([`policy`]), base URLs ([`urls`]), request-body fields
//! ([`request`]), response-body checks ([`body`]), structured-output schemas
//! ([`schema`]), streamed replies ([`stream`]), usage, cost and billed failures ([`billing`]), and the
//! [`Connection`] each provider holds ([`connection`]). API keys are read by
//! [`super::keys`].
mod billing;
mod body;
mod connection;
mod policy;
mod request;
mod schema;
pub(crate) mod stream;
mod urls;

pub use billing::cost_usd;
pub(crate) use billing::{bill_rejected, bill_unusable, reply_usage, truncated};
pub(crate) use body::{clip, count, json_body};
pub(crate) use connection::Connection;
pub use policy::{policy, DEFAULT_RETRIES};
pub use request::FIXED_FIELDS;
pub(crate) use request::{fixed_param, merge_params, sent_temperature};
pub(crate) use schema::{
    drop_optional_nulls, strict_schema, tool_description, tool_name, wire_schema,
};
pub(crate) use urls::{join, parse_base};
