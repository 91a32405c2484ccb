//! A macro for sets of string values (`builtin|provided`, `Allow|Deny`).
//!
//! Owns the wording of "unknown value" errors so every enum says what it got
//! and lists what it accepts, e.g. `unknown CA type "vault"; expected builtin
//! or provided`. Parsing keeps an unknown value (as the generated `Unknown`
//! variant) so that validation reports it together with every other error
//! of the document; it must never let a validated resource hold one.

/// Formats `["a", "b", "c"]` as `a, b or c`.
pub(crate) fn one_of(values: &[&str]) -> String {
    match values {
        [] => String::new(),
        [one] => (*one).to_string(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

/// `unknown <what> "<value>"; expected <a, b or c>`.
pub(crate) fn unknown_message(what: &str, value: &str, values: &[&str]) -> String {
    format!("unknown {what} {value:?}; expected {}", one_of(values))
}

/// Defines a string enum with `as_str`, `Display`, a strict `FromStr`,
/// serde, and a `validate` that reports
/// `unknown <what> "<value>"; expected <a, b or c>`.
///
/// Besides the listed variants the enum gets `Unknown(String)`: deserializing
/// a value outside the set yields it (so parsing goes on and validation
/// reports the value at its path), and it serializes back as written.
macro_rules! string_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident ($what:literal) {
            $( $(#[$vmeta:meta])* $variant:ident = $text:literal, )+
        }
    ) => {
        $(#[$meta])*
        ///
        /// An unknown spelling parses as `Unknown` and fails validation.
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )+
            /// A value outside the set, kept as written so validation can
            /// report it. A validated resource never holds it.
            Unknown(String),
        }

        impl $name {
            /// Every accepted spelling, in declaration order.
            pub const VALUES: &'static [&'static str] = &[$($text),+];

            /// The canonical spelling (for `Unknown`, the value as written).
            pub fn as_str(&self) -> &str {
                match self {
                    $( $name::$variant => $text, )+
                    $name::Unknown(other) => other,
                }
            }

            /// Whether this is one of the accepted values.
            pub fn is_known(&self) -> bool {
                !matches!(self, $name::Unknown(_))
            }

            /// The known value spelled `s`, else `Unknown(s)`.
            fn from_text(s: String) -> Self {
                match s.as_str() {
                    $( $text => $name::$variant, )+
                    _ => $name::Unknown(s),
                }
            }

            /// Reports an unknown value at `path`; returns whether it is known.
            // Unused by enums whose accepted values depend on the position
            // (e.g. `TargetRefKind`), which word their own message.
            #[allow(dead_code)]
            pub(crate) fn validate(
                &self,
                errs: &mut $crate::validate::Errors,
                path: &str,
            ) -> bool {
                if let $name::Unknown(other) = self {
                    errs.add(
                        path,
                        $crate::spec::string_enum::unknown_message($what, other, Self::VALUES),
                    );
                }
                self.is_known()
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = String;

            /// Strict: an unknown spelling is an error naming the accepted ones.
            fn from_str(s: &str) -> Result<Self, String> {
                match Self::from_text(s.to_string()) {
                    $name::Unknown(other) => Err(
                        $crate::spec::string_enum::unknown_message($what, &other, Self::VALUES),
                    ),
                    known => Ok(known),
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
                String::deserialize(d).map(Self::from_text)
            }
        }
    };
}

pub(crate) use string_enum;

#[cfg(test)]
#[allow(unreachable_pub, reason = "the macro only defines pub enums")]
mod tests {
    use super::one_of;
    use crate::validate::Errors;

    string_enum! {
        /// A test enum.
        pub enum Colour ("colour") {
            /// Red.
            Red = "red",
            /// Blue.
            Blue = "blue",
        }
    }

    #[test]
    fn known_values_parse_and_print_as_before() {
        let c: Colour = serde_json::from_str(r#""blue""#).unwrap();
        assert_eq!(c, Colour::Blue);
        assert_eq!(serde_json::to_string(&c).unwrap(), r#""blue""#);
        assert_eq!("red".parse::<Colour>(), Ok(Colour::Red));
        assert!(Colour::Red.validate(&mut Errors::default(), "c"));
    }

    #[test]
    fn unknown_values_are_kept_and_reported_by_validation() {
        let c: Colour = serde_json::from_str(r#""Red""#).unwrap();
        assert_eq!(c, Colour::Unknown("Red".into()));
        assert!(!c.is_known());
        assert_eq!(serde_json::to_string(&c).unwrap(), r#""Red""#);
        let mut errs = Errors::default();
        assert!(!c.validate(&mut errs, "spec.colour"));
        let expected = r#"spec.colour: unknown colour "Red"; expected red or blue"#;
        assert_eq!(errs.into_vec()[0].to_string(), expected);
        assert_eq!(
            "Red".parse::<Colour>(),
            Err(r#"unknown colour "Red"; expected red or blue"#.to_string())
        );
        assert!(
            serde_json::from_str::<Colour>("1").is_err(),
            "non-strings stay structural"
        );
    }

    #[test]
    fn lists_read_naturally() {
        assert_eq!(one_of(&["tcp"]), "tcp");
        assert_eq!(one_of(&["builtin", "provided"]), "builtin or provided");
        assert_eq!(one_of(&["a", "b", "c"]), "a, b or c");
    }
}
