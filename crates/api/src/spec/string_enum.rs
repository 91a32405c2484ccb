//! A macro for closed sets of string values (`builtin|provided`, `Allow|Deny`).
//!
//! Owns the wording of "unknown value" errors so every enum says what it got
//! and lists what it accepts, e.g. `unknown CA type "vault"; expected builtin
//! or provided`. It must never accept a value outside the set.

/// Formats `["a", "b", "c"]` as `a, b or c`.
pub(crate) fn one_of(values: &[&str]) -> String {
    match values {
        [] => String::new(),
        [one] => (*one).to_string(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

/// Defines a string enum with `as_str`, `Display`, serde, and an error
/// message `unknown <what> "<value>"; expected <a, b or c>`.
macro_rules! string_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident ($what:literal) {
            $( $(#[$vmeta:meta])* $variant:ident = $text:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )+
        }

        impl $name {
            /// Every accepted spelling, in declaration order.
            pub const VALUES: &'static [&'static str] = &[$($text),+];

            /// The canonical spelling.
            pub fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $text, )+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = String;

            fn from_str(s: &str) -> Result<Self, String> {
                match s {
                    $( $text => Ok($name::$variant), )+
                    other => Err(format!(
                        "unknown {} {:?}; expected {}",
                        $what,
                        other,
                        $crate::spec::string_enum::one_of(Self::VALUES)
                    )),
                }
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

pub(crate) use string_enum;

#[cfg(test)]
mod tests {
    use super::one_of;

    #[test]
    fn lists_read_naturally() {
        assert_eq!(one_of(&["tcp"]), "tcp");
        assert_eq!(one_of(&["builtin", "provided"]), "builtin or provided");
        assert_eq!(one_of(&["a", "b", "c"]), "a, b or c");
    }
}
