//! "Did you mean" hints for unknown fields in policy specs.
//!
//! Owns one rule, generic over every policy kind: a field refused as
//! unknown that the same spec would accept one level down, under `http`,
//! `grpc` or `tcp`, is reported with that path. Kuma's docs have an example
//! with `default.numRetries` (no `http:`), which Kuma silently ignores; here
//! it is refused with "did you mean default.http.numRetries?". It only
//! rewrites the message of an error that parsing already found; it never
//! accepts a document.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::FieldError;
use crate::resource::deserialize_at;

/// The blocks a misplaced field is looked for in.
const SUB_BLOCKS: [&str; 3] = ["http", "grpc", "tcp"];

/// Parses a policy spec like `deserialize_at("spec", ..)`, adding a hint
/// to an unknown-field error when one applies.
pub(crate) fn parse_policy<T: DeserializeOwned>(value: Value) -> Result<T, FieldError> {
    let original = value.clone();
    deserialize_at::<T>("spec", value).map_err(|e| with_hint::<T>(&original, e))
}

fn with_hint<T: DeserializeOwned>(spec: &Value, err: FieldError) -> FieldError {
    hint::<T>(spec, &err).unwrap_or(err)
}

fn hint<T: DeserializeOwned>(spec: &Value, err: &FieldError) -> Option<FieldError> {
    let field = between(&err.message, "unknown field `", "`")?;
    let parent_path = err.path.strip_suffix(&format!(".{field}"))?;
    let segments = segments(parent_path.strip_prefix("spec")?)?;
    let expected = err.message.split_once("expected")?.1;
    let mut found = Vec::new();
    for sub in SUB_BLOCKS {
        if !expected.contains(&format!("`{sub}`")) {
            continue;
        }
        let mut probe = spec.clone();
        let parent = walk(&mut probe, &segments)?.as_object_mut()?;
        let value = parent.remove(field)?;
        let block = parent
            .entry(sub)
            .or_insert_with(|| Value::Object(Default::default()));
        let Value::Object(block) = block else {
            continue;
        };
        block.insert(field.to_string(), value);
        let still_unknown = match deserialize_at::<T>("spec", probe) {
            Ok(_) => false,
            Err(e) => {
                e.path == format!("{parent_path}.{sub}.{field}")
                    && e.message.starts_with("unknown field")
            }
        };
        if !still_unknown {
            found.push(sub);
        }
    }
    let (first, others) = found.split_first()?;
    let last = parent_path.rsplit('.').next().unwrap_or(parent_path);
    let mut message = format!("unknown field {field}; did you mean {last}.{first}.{field}?");
    for other in others {
        message.push_str(&format!(
            " (or {last}.{other}.{field} for {})",
            protocol(other)
        ));
    }
    Some(FieldError::new(err.path.clone(), message))
}

fn protocol(block: &str) -> &'static str {
    match block {
        "grpc" => "gRPC",
        "tcp" => "TCP",
        _ => "HTTP",
    }
}

fn between<'a>(text: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let rest = text.split_once(start)?.1;
    Some(rest.split_once(end)?.0)
}

/// One step of a path: a mapping key or a list index.
enum Segment {
    Key(String),
    Index(usize),
}

/// Splits `.to[0].default` into its steps.
fn segments(path: &str) -> Option<Vec<Segment>> {
    let mut out = Vec::new();
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let (key, mut rest) = part.split_once('[').map_or((part, ""), |(k, r)| (k, r));
        if !key.is_empty() {
            out.push(Segment::Key(key.to_string()));
        }
        while !rest.is_empty() {
            let (index, after) = rest.split_once(']')?;
            out.push(Segment::Index(index.parse().ok()?));
            rest = after.strip_prefix('[').unwrap_or(after);
        }
    }
    Some(out)
}

fn walk<'a>(mut value: &'a mut Value, segments: &[Segment]) -> Option<&'a mut Value> {
    for s in segments {
        value = match s {
            Segment::Key(k) => value.get_mut(k.as_str())?,
            Segment::Index(i) => value.get_mut(*i)?,
        };
    }
    Some(value)
}
