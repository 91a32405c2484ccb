//! The policy merge engine: how several policies of one kind that select
//! the same proxy combine into the configuration it gets, with Kuma's
//! semantics exactly (Kuma's "How policies are combined").
//!
//! Owns ordering ([`order`]), RFC 7386 JSON merge patch with per-field
//! provenance ([`merge_patch`]), the fold of `to[]`/`from[]`/`rules[]`
//! entries ([`merge`]), MeshHTTPRoute rules merged by identical `matches`
//! ([`routes`]) and the `kuma.io/effect: shadow` result. It works on
//! policies the caller has already selected for one proxy: it never decides
//! which policies select a Dataplane, and never emits proxy configuration.
//! It is shared by every policy kind, those of the resilience and
//! observability policies to come included.
//!
//! ```
//! use meshlink_api::policy::{PolicyInput, Section, merge};
//! use meshlink_api::Kind;
//! use serde_json::json;
//!
//! let spec = |n: u32| json!({"to": [{"targetRef": {"kind": "Mesh"},
//!                                     "default": {"http": {"numRetries": n}}}]});
//! let a = PolicyInput::new(Kind::MeshRetry, "a", "default", Default::default(), None, spec(1));
//! let b = PolicyInput::new(Kind::MeshRetry, "b", "default", Default::default(), None, spec(2));
//! let merged = merge(Kind::MeshRetry, &[a, b], Section::To);
//! let (_, conf) = &merged.applied.by_key()[0];
//! // Same targetRef rank: the name decides, and "a" sorts last, so it wins.
//! assert_eq!(conf.conf["http"]["numRetries"], 1);
//! assert_eq!(conf.origins["/http/numRetries"].policy, "a");
//! ```

mod dataplane_rules;
mod input;
mod merge;
pub mod merge_patch;
mod order;
mod routes;

pub use dataplane_rules::{
    KindRules, RULE_KINDS, dataplane_rules, rules_json, selects, selects_dataplane,
};
pub use input::{DISPLAY_NAME_LABEL, EFFECT_LABEL, PolicyInput, SHADOW, Section};
pub use merge::{Entry, Merged, MergedConf, Origin, RuleSet, merge};
pub use order::compare_policies;

#[cfg(test)]
mod tests;
