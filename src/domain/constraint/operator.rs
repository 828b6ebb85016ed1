//! `Operator`: a constraint's operator, read and written as its wire name; the known ones
//! and what each compares with.

use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

use crate::domain::text::Text;

/// A constraint operator, read and written as its wire name (`"IN"`, `"SEMVER_GTE"`, …).
///
/// Serialisation is written by hand: serde's derive would write [`Operator::Unknown`] as
/// `{"Unknown": "X"}`, which no SDK can read (MODERN-MODEL §4, "Trap for a Rust server").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Operator {
    In,
    NotIn,
    StrContains,
    StrStartsWith,
    StrEndsWith,
    NumEq,
    NumGt,
    NumGte,
    NumLt,
    NumLte,
    DateAfter,
    DateBefore,
    SemverEq,
    SemverGt,
    SemverLt,
    /// `SEMVER_GTE`: newer than Unleash 7, which refuses it; the SDKs evaluate it.
    SemverGte,
    /// `SEMVER_LTE`: newer than Unleash 7, which refuses it; the SDKs evaluate it.
    SemverLte,
    /// `REGEX` (Unleash 7.5): the context value matches the regular expression in `value`.
    Regex,
    /// `IN_CIDR`: the context value is an IP address in one of the blocks in `values`
    /// (newer than Unleash 7, which refuses it; the SDKs evaluate it).
    InCidr,
    /// Any other name, kept verbatim (an import from a newer Unleash, a hand-written document).
    /// Never one of the names above; admin writes refuse it, and the SDKs evaluate it false.
    Unknown(Text),
}

/// What an operator compares with, which decides `values` versus `value` and their format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operand {
    /// A list of strings in `values`.
    Strings,
    /// A list of IP addresses or CIDR blocks (`10.0.0.0/8`, `2001:db8::/32`) in `values`.
    Cidrs,
    /// A number in `value`.
    Number,
    /// An RFC 3339 timestamp in `value`.
    Date,
    /// A semantic version in `value`.
    Semver,
    /// A regular expression in `value`.
    Regex,
}

impl Operand {
    /// Whether the operand is a list in `values` (otherwise it is one `value`).
    pub fn is_list(self) -> bool {
        matches!(self, Operand::Strings | Operand::Cidrs)
    }
}

impl Operator {
    /// Every operator admin writes accept, in the order error messages list them.
    pub const ALL: &[Operator] = &[
        Operator::In,
        Operator::NotIn,
        Operator::StrContains,
        Operator::StrStartsWith,
        Operator::StrEndsWith,
        Operator::NumEq,
        Operator::NumGt,
        Operator::NumGte,
        Operator::NumLt,
        Operator::NumLte,
        Operator::DateAfter,
        Operator::DateBefore,
        Operator::SemverEq,
        Operator::SemverGt,
        Operator::SemverLt,
        Operator::SemverGte,
        Operator::SemverLte,
        Operator::Regex,
        Operator::InCidr,
    ];

    /// The operator's wire name, e.g. `NUM_GTE`; an unknown operator's name as it was read.
    pub fn as_str(&self) -> &str {
        match self {
            Operator::In => "IN",
            Operator::NotIn => "NOT_IN",
            Operator::StrContains => "STR_CONTAINS",
            Operator::StrStartsWith => "STR_STARTS_WITH",
            Operator::StrEndsWith => "STR_ENDS_WITH",
            Operator::NumEq => "NUM_EQ",
            Operator::NumGt => "NUM_GT",
            Operator::NumGte => "NUM_GTE",
            Operator::NumLt => "NUM_LT",
            Operator::NumLte => "NUM_LTE",
            Operator::DateAfter => "DATE_AFTER",
            Operator::DateBefore => "DATE_BEFORE",
            Operator::SemverEq => "SEMVER_EQ",
            Operator::SemverGt => "SEMVER_GT",
            Operator::SemverLt => "SEMVER_LT",
            Operator::SemverGte => "SEMVER_GTE",
            Operator::SemverLte => "SEMVER_LTE",
            Operator::Regex => "REGEX",
            Operator::InCidr => "IN_CIDR",
            Operator::Unknown(name) => name,
        }
    }

    /// The known operator with this wire name (exact case, as the SDKs compare it).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.iter().find(|o| o.as_str() == name).cloned()
    }

    /// The operator with this wire name: a known one, or [`Operator::Unknown`] keeping it.
    pub fn named(name: &str) -> Self {
        Self::from_name(name).unwrap_or_else(|| Operator::Unknown(name.into()))
    }

    /// Whether Flagpole knows the operator (admin writes accept only those).
    pub fn is_known(&self) -> bool {
        !matches!(self, Operator::Unknown(_))
    }

    /// What the operator compares with; `None` for an unknown operator.
    pub fn operand(&self) -> Option<Operand> {
        Some(match self {
            Operator::In
            | Operator::NotIn
            | Operator::StrContains
            | Operator::StrStartsWith
            | Operator::StrEndsWith => Operand::Strings,
            Operator::NumEq
            | Operator::NumGt
            | Operator::NumGte
            | Operator::NumLt
            | Operator::NumLte => Operand::Number,
            Operator::DateAfter | Operator::DateBefore => Operand::Date,
            Operator::SemverEq
            | Operator::SemverGt
            | Operator::SemverLt
            | Operator::SemverGte
            | Operator::SemverLte => Operand::Semver,
            Operator::Regex => Operand::Regex,
            Operator::InCidr => Operand::Cidrs,
            Operator::Unknown(_) => return None,
        })
    }

    /// Whether a context field's legal values bound what the operator compares with: they do
    /// for membership and single-value operators; a substring (`STR_*`), a pattern (`REGEX`)
    /// or an address block (`IN_CIDR`) need not be one, and an unknown operator's operand
    /// means nothing to Flagpole.
    pub fn bounded_by_legal_values(&self) -> bool {
        !matches!(
            self,
            Operator::StrContains
                | Operator::StrStartsWith
                | Operator::StrEndsWith
                | Operator::Regex
                | Operator::InCidr
                | Operator::Unknown(_)
        )
    }

    /// The known operators' names, comma-separated, for messages and documentation.
    pub(super) fn known_names() -> String {
        Self::ALL
            .iter()
            .map(Operator::as_str)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl fmt::Display for Operator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Operator {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Operator {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct OperatorName;
        impl Visitor<'_> for OperatorName {
            type Value = Operator;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an operator name")
            }
            fn visit_str<E: de::Error>(self, name: &str) -> Result<Operator, E> {
                Ok(Operator::named(name))
            }
        }
        deserializer.deserialize_str(OperatorName)
    }
}

/// The served form's operator: any string, since imports keep operators Flagpole does not
/// know (what admin writes accept is [`ConstraintSpec`]'s schema).
impl utoipa::PartialSchema for Operator {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        crate::domain::schema::from_json(serde_json::json!({
            "type": "string",
            "example": "IN",
            "description": format!(
                "The operator's name. Admin writes accept {}; an imported toggle keeps any \
                 other name verbatim, which the SDKs evaluate as false",
                Operator::known_names()
            ),
        }))
    }
}

impl utoipa::ToSchema for Operator {}
