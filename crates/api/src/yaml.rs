//! Decoding YAML (and JSON) text into `serde_json` values.
//!
//! Owns the one rule serde_json's own `Value` would break: a duplicate
//! mapping key is an error, never "last one wins". It must never coerce a
//! value's type beyond turning scalar mapping keys into strings.

use serde::Deserialize;
use serde_json::{Map, Value};

/// A JSON value decoded from YAML that rejects duplicate mapping keys
/// (which `serde_json::Value` would silently collapse to the last one).
pub(crate) struct StrictValue(pub(crate) Value);

impl<'de> Deserialize<'de> for StrictValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrictVisitor).map(StrictValue)
    }
}

struct StrictVisitor;

impl<'de> serde::de::Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        StrictValue::deserialize(d).map(|v| v.0)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(StrictValue(v)) = seq.next_element()? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<KeyString>()? {
            let StrictValue(v) = map.next_value()?;
            if out.insert(key.0.clone(), v).is_some() {
                return Err(serde::de::Error::custom(format!(
                    "duplicate key {:?}; each key may appear once",
                    key.0
                )));
            }
        }
        Ok(Value::Object(out))
    }
}

/// A mapping key; YAML allows scalars of any type, JSON needs strings.
struct KeyString(String);

impl<'de> Deserialize<'de> for KeyString {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match StrictValue::deserialize(d)?.0 {
            Value::String(s) => Ok(KeyString(s)),
            Value::Null | Value::Array(_) | Value::Object(_) => {
                Err(serde::de::Error::custom("mapping keys must be strings"))
            }
            other => Ok(KeyString(other.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(text: &str) -> Result<Value, String> {
        let de = serde_yaml_ng::Deserializer::from_str(text);
        serde_path_to_error::deserialize::<_, StrictValue>(de)
            .map(|v| v.0)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn duplicate_keys_are_errors_with_their_path() {
        let err = decode("spec:\n  a: 1\n  b: 2\n  a: 3\n").unwrap_err();
        assert!(err.contains("duplicate key \"a\""), "{err}");
        assert!(err.starts_with("spec"), "{err}");
    }

    #[test]
    fn scalars_and_keys() {
        let v = decode("1: x\nb: [true, 1.5, ~, -3]\n").unwrap();
        assert_eq!(v, serde_json::json!({"1": "x", "b": [true, 1.5, null, -3]}));
    }
}
