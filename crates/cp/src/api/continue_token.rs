//! The `continue` token of a paged list (`GET /api/v1/{kind}?limit=N`).
//!
//! A token is opaque to clients: URL-safe base64 of a small JSON record
//! holding what the next page needs (the revision read before the first
//! page and the key of the last object sent) and what the list was (kind,
//! mesh, label selector), so a token is only honoured for the list that
//! issued it. It carries no secret and grants nothing: it only says where
//! to resume. It must never be trusted beyond that: every field is checked
//! again on the way back in.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use meshlink_api::Kind;
use meshlink_store::{LabelSelector, ListCursor};
use serde::{Deserialize, Serialize};

use super::ApiError;

/// The version of the token format; bumped when its fields change meaning.
const FORMAT: u8 = 1;

/// What a list is: the part of the query every page must repeat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ListScope {
    /// The kind listed.
    pub(super) kind: Kind,
    /// The mesh, for mesh-scoped kinds listed in one mesh.
    pub(super) mesh: Option<String>,
    /// The label selector in canonical form, when one was given.
    pub(super) selector: Option<String>,
}

impl ListScope {
    /// The scope of a list query; `mesh` is ignored for global kinds, as
    /// the list itself ignores it.
    pub(super) fn new(kind: Kind, mesh: Option<&str>, selector: Option<&LabelSelector>) -> Self {
        ListScope {
            kind,
            mesh: mesh.filter(|_| kind.allows_mesh()).map(str::to_string),
            selector: selector.filter(|s| !s.is_empty()).map(|s| s.to_string()),
        }
    }

    fn describe(&self) -> String {
        let mut s = self.kind.plural().to_string();
        if let Some(m) = &self.mesh {
            s.push_str(&format!(" in mesh {m:?}"));
        }
        if let Some(sel) = &self.selector {
            s.push_str(&format!(" with labelSelector {sel:?}"));
        }
        s
    }
}

/// Where the next page of a list starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ContinueToken {
    /// The revision read before the first page: every page reports it, so
    /// a watch from it misses nothing the walk could have missed.
    pub(super) revision: u64,
    /// The key of the last object sent.
    pub(super) after: ListCursor,
}

/// The wire form. Short field names keep tokens short.
#[derive(Serialize, Deserialize)]
struct Wire {
    v: u8,
    k: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    m: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    s: Option<String>,
    r: u64,
    am: String,
    an: String,
}

// === impl ContinueToken ===

impl ContinueToken {
    /// The opaque string for `scope`.
    pub(super) fn encode(&self, scope: &ListScope) -> String {
        let wire = Wire {
            v: FORMAT,
            k: scope.kind.as_str().to_string(),
            m: scope.mesh.clone(),
            s: scope.selector.clone(),
            r: self.revision,
            am: self.after.mesh.clone(),
            an: self.after.name.clone(),
        };
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(&wire).expect("a token serializes"))
    }

    /// Reads a token given back for a list of `scope`. A string that is not
    /// a token, or a token from another list, is a 400 naming `continue`.
    pub(super) fn decode(token: &str, scope: &ListScope) -> Result<Self, ApiError> {
        let malformed = |why: &str| {
            let shown: String = token.chars().take(40).collect();
            let more = if token.chars().count() > 40 {
                "..."
            } else {
                ""
            };
            ApiError::bad_request(format!(
                "continue={shown:?}{more} is not a continue token issued by this control plane ({why}); \
                 pass the \"continue\" value of the previous page unchanged, or list again without continue"
            ))
        };
        let bytes = URL_SAFE_NO_PAD
            .decode(token.trim())
            .map_err(|_| malformed("not URL-safe base64"))?;
        let wire: Wire =
            serde_json::from_slice(&bytes).map_err(|_| malformed("unknown content"))?;
        if wire.v != FORMAT {
            return Err(malformed(&format!("unknown token format {}", wire.v)));
        }
        let issued_for = ListScope {
            kind: wire
                .k
                .parse()
                .map_err(|_| malformed(&format!("unknown kind {:?}", wire.k)))?,
            mesh: wire.m,
            selector: wire.s,
        };
        if issued_for != *scope {
            return Err(ApiError::bad_request(format!(
                "continue token belongs to a list of {}, not of {}; send it with the same kind, \
                 mesh and labelSelector as the first page, or list again without continue",
                issued_for.describe(),
                scope.describe()
            )));
        }
        Ok(ContinueToken {
            revision: wire.r,
            after: ListCursor {
                mesh: wire.am,
                name: wire.an,
            },
        })
    }
}

/// A token naming a revision the store has not reached was issued against
/// another store (another control plane's data).
pub(super) fn from_another_store(token: &ContinueToken, current: u64) -> ApiError {
    ApiError::bad_request(format!(
        "continue token names revision {}, but this control plane's store is at revision {current}: \
         it was issued by a control plane with other data; list again without continue",
        token.revision
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(mesh: Option<&str>, selector: Option<&str>) -> ListScope {
        let selector = selector.map(|s| LabelSelector::parse(s).unwrap());
        ListScope::new(Kind::Dataplane, mesh, selector.as_ref())
    }

    #[test]
    fn a_token_round_trips_for_its_own_list_only() {
        let t = ContinueToken {
            revision: 42,
            after: ListCursor {
                mesh: "default".into(),
                name: "web-\"1\"".into(),
            },
        };
        let s = scope(Some("default"), Some("app=web"));
        let encoded = t.encode(&s);
        assert!(
            encoded
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        );
        assert_eq!(ContinueToken::decode(&encoded, &s).unwrap(), t);
        for other in [
            scope(None, Some("app=web")),
            scope(Some("default"), None),
            scope(Some("other"), Some("app=web")),
            ListScope::new(Kind::Mesh, None, None),
        ] {
            let e = ContinueToken::decode(&encoded, &other).unwrap_err();
            assert!(
                format!("{e:?}").contains(
                    "continue token belongs to a list of dataplanes in mesh \\\"default\\\""
                ),
                "{e:?}"
            );
        }
    }

    #[test]
    fn strings_that_are_not_tokens_are_refused_naming_continue() {
        let s = scope(None, None);
        for bad in ["", "!!!", "bm90IGpzb24", "eyJ2Ijo5OX0"] {
            let e = ContinueToken::decode(bad, &s).unwrap_err();
            assert!(
                format!("{e:?}").contains("is not a continue token"),
                "{bad}: {e:?}"
            );
        }
    }
}
