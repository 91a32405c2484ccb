//! JSON merge patch (RFC 7386), recording which policy set each field.
//!
//! Owns the fold step: objects merge key by key, arrays and scalars
//! replace, `null` deletes. Provenance is kept per JSON pointer (RFC 6901)
//! of every leaf (a scalar, an array, or an empty object): a field that is
//! replaced or deleted loses the provenance of everything under it. It
//! never interprets the values.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// Applies `patch` to `target` as RFC 7386 defines it.
pub fn apply(target: &mut Value, patch: &Value) {
    let mut unused = BTreeMap::new();
    apply_tracked(target, patch, &(), "", &mut unused);
}

/// Applies `patch` to `target`, recording `origin` in `origins` for every
/// leaf it sets (keys are JSON pointers under `at`) and dropping the
/// provenance of what it removes.
pub fn apply_tracked<O: Clone>(
    target: &mut Value,
    patch: &Value,
    origin: &O,
    at: &str,
    origins: &mut BTreeMap<String, O>,
) {
    let Value::Object(patch) = patch else {
        forget_below(origins, at);
        origins.insert(at.to_string(), origin.clone());
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        forget_below(origins, at);
        *target = Value::Object(Map::new());
    }
    let Value::Object(map) = target else {
        unreachable!("target was just made an object");
    };
    if patch.is_empty() && map.is_empty() {
        origins.insert(at.to_string(), origin.clone());
        return;
    }
    // A leaf origin on the object itself (it was empty) no longer applies.
    origins.remove(at);
    for (key, value) in patch {
        let child = format!("{at}/{}", escape(key));
        if value.is_null() {
            if map.remove(key).is_some() {
                forget_below(origins, &child);
            }
            continue;
        }
        let slot = map.entry(key.clone()).or_insert(Value::Null);
        apply_tracked(slot, value, origin, &child, origins);
    }
}

/// Escapes one JSON pointer segment (RFC 6901).
pub fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

/// Removes the provenance of `at` and of everything under it.
fn forget_below<O>(origins: &mut BTreeMap<String, O>, at: &str) {
    origins.remove(at);
    let prefix = format!("{at}/");
    let below: Vec<String> = origins
        .range(prefix.clone()..)
        .take_while(|(k, _)| k.starts_with(&prefix))
        .map(|(k, _)| k.clone())
        .collect();
    for k in below {
        origins.remove(&k);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The RFC 7386 appendix A examples.
    #[test]
    fn rfc_7386_examples() {
        let cases = [
            (json!({"a": "b"}), json!({"a": "c"}), json!({"a": "c"})),
            (
                json!({"a": "b"}),
                json!({"b": "c"}),
                json!({"a": "b", "b": "c"}),
            ),
            (json!({"a": "b"}), json!({"a": null}), json!({})),
            (
                json!({"a": "b", "b": "c"}),
                json!({"a": null}),
                json!({"b": "c"}),
            ),
            (json!({"a": ["b"]}), json!({"a": "c"}), json!({"a": "c"})),
            (json!({"a": "c"}), json!({"a": ["b"]}), json!({"a": ["b"]})),
            (
                json!({"a": {"b": "c"}}),
                json!({"a": {"b": "d", "c": null}}),
                json!({"a": {"b": "d"}}),
            ),
            (
                json!({"a": [{"b": "c"}]}),
                json!({"a": [1]}),
                json!({"a": [1]}),
            ),
            (json!(["a", "b"]), json!(["c", "d"]), json!(["c", "d"])),
            (json!({"a": "b"}), json!(["c"]), json!(["c"])),
            (json!({"a": "foo"}), json!(null), json!(null)),
            (json!({"a": "foo"}), json!("bar"), json!("bar")),
            (
                json!({"e": null}),
                json!({"a": 1}),
                json!({"e": null, "a": 1}),
            ),
            (
                json!([1, 2]),
                json!({"a": "b", "c": null}),
                json!({"a": "b"}),
            ),
            (
                json!({}),
                json!({"a": {"bb": {"ccc": null}}}),
                json!({"a": {"bb": {}}}),
            ),
        ];
        for (target, patch, want) in cases {
            let mut got = target.clone();
            apply(&mut got, &patch);
            assert_eq!(got, want, "{target} + {patch}");
        }
    }

    #[test]
    fn provenance_follows_replacements_and_deletions() {
        let mut conf = Value::Null;
        let mut origins = BTreeMap::new();
        let a =
            json!({"http": {"numRetries": 1, "backOff": {"baseInterval": "1s"}}, "tcp": {"x": 1}});
        apply_tracked(&mut conf, &a, &"a", "", &mut origins);
        let b = json!({"http": {"backOff": "off", "retryOn": ["5xx"]}, "tcp": null});
        apply_tracked(&mut conf, &b, &"b", "", &mut origins);
        assert_eq!(
            conf,
            json!({"http": {"numRetries": 1, "backOff": "off", "retryOn": ["5xx"]}})
        );
        let got: Vec<(&str, &str)> = origins.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        assert_eq!(
            got,
            [
                ("/http/backOff", "b"),
                ("/http/numRetries", "a"),
                ("/http/retryOn", "b"),
            ]
        );
    }

    #[test]
    fn pointers_escape_slash_and_tilde() {
        let mut conf = Value::Null;
        let mut origins = BTreeMap::new();
        apply_tracked(
            &mut conf,
            &json!({"a/b": {"c~d": 1}}),
            &"p",
            "",
            &mut origins,
        );
        assert_eq!(origins.keys().collect::<Vec<_>>(), ["/a~1b/c~0d"]);
    }
}
