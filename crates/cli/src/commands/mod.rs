//! One module per CLI command.

pub(crate) mod apply;
pub(crate) mod apply_preview;
pub(crate) mod controlplanes;
pub(crate) mod delete;
pub(crate) mod demo;
pub(crate) mod get;
pub(crate) mod grant;
pub(crate) mod inspect;
pub(crate) mod inspect_health;
pub(crate) mod inspect_rules;
pub(crate) mod list_printer;
pub(crate) mod network;
mod policy_columns;
pub(crate) mod table;
pub(crate) mod token;
pub(crate) mod transparent_proxy;
pub(crate) mod wait;
