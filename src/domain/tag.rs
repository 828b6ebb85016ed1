//! Tag types, tags and the (type, value) references toggles carry (spec §2.5, API-FACTS §4).

use serde::{Deserialize, Serialize};

use super::error::{DomainError, ValidationErrors};
use super::fields::{refuse_unsupported, ExtraFields};
use super::name::{check_name, resolve_name, TAG_MAX};
use super::text::Text;

/// The tag type every installation starts with.
pub fn simple_tag_type() -> TagType {
    TagType {
        name: "simple".into(),
        description: "Used to simplify filtering of features".into(),
        icon: "#".into(),
    }
}

/// A kind of tag, e.g. `simple`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TagType {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub icon: String,
}

/// A (type, value) pair identifying a tag.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, utoipa::ToSchema,
)]
pub struct TagRef {
    #[serde(rename = "type")]
    #[schema(value_type = String)]
    pub kind: Text,
    #[schema(value_type = String)]
    pub value: Text,
}

impl TagRef {
    /// The key a tag is stored under: tag types cannot contain `:`, so the first `:` splits.
    pub fn key(&self) -> String {
        format!("{}:{}", self.kind, self.value)
    }

    /// Parses a `type:value` filter item (API-FACTS §11.3); `None` when it has no `:` or
    /// either side is empty.
    pub fn parse(item: &str) -> Option<Self> {
        let (kind, value) = item.split_once(':')?;
        (!kind.is_empty() && !value.is_empty()).then(|| Self {
            kind: kind.into(),
            value: value.into(),
        })
    }
}

/// A stored tag with its numeric id (the id appears in admin toggle responses).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Tag {
    pub id: u64,
    #[serde(rename = "type")]
    pub kind: String,
    pub value: String,
}

impl Tag {
    /// The (type, value) reference of this tag.
    pub fn reference(&self) -> TagRef {
        TagRef {
            kind: self.kind.as_str().into(),
            value: self.value.as_str().into(),
        }
    }
}

/// A tag as sent by a client.
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
pub struct TagSpec {
    /// An existing tag type; `simple` when not sent.
    #[serde(rename = "type")]
    #[schema(
        min_length = 2,
        max_length = 50,
        pattern = "^[A-Za-z0-9_.!~*'()-]*[A-Za-z0-9_!~*'()-][A-Za-z0-9_.!~*'()-]*$",
        example = "simple"
    )]
    pub kind: Option<String>,
    /// Not blank.
    #[schema(
        required = true,
        nullable = false,
        min_length = 2,
        max_length = 50,
        pattern = "\\S",
        example = "team-red"
    )]
    pub value: Option<String>,
    #[serde(flatten)]
    #[schema(ignore)]
    pub extra: ExtraFields,
}

impl TagSpec {
    /// Validates a tag: type URL friendly 2–50 (default `simple`), value 2–50 characters.
    pub fn validate(self) -> Result<TagRef, DomainError> {
        let mut errors = ValidationErrors::default();
        refuse_unsupported(&self.extra, "", &["id"], &mut errors);
        let kind = self.kind.unwrap_or_else(|| "simple".to_string());
        if let Err(m) = check_name("type", &kind, 2, TAG_MAX) {
            errors.push("type", m);
        }
        let value = self.value.unwrap_or_default();
        let len = value.trim().chars().count();
        if len == 0 {
            errors.push("value", "\"value\" is required");
        } else if !(2..=TAG_MAX).contains(&value.chars().count()) {
            errors.push(
                "value",
                format!("\"value\" length must be between 2 and {TAG_MAX} characters"),
            );
        }
        errors.into_result(TagRef {
            kind: kind.into(),
            value: value.into(),
        })
    }
}

/// A tag type as sent by a client.
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
pub struct TagTypeSpec {
    /// Required to create. A replacement (`PUT`) takes the name from its path; when the body
    /// repeats it, it must be that one.
    #[schema(
        required = true,
        nullable = false,
        min_length = 2,
        max_length = 50,
        pattern = "^[A-Za-z0-9_.!~*'()-]*[A-Za-z0-9_!~*'()-][A-Za-z0-9_.!~*'()-]*$",
        example = "team"
    )]
    pub name: Option<String>,
    pub description: Option<String>,
    pub icon: Option<String>,
    #[serde(flatten)]
    #[schema(ignore)]
    pub extra: ExtraFields,
}

impl TagTypeSpec {
    /// Validates a tag type; `path_name` is the name from the URL on update.
    pub fn validate(self, path_name: Option<&str>) -> Result<TagType, DomainError> {
        let mut errors = ValidationErrors::default();
        refuse_unsupported(&self.extra, "", &[], &mut errors);
        let name = resolve_name("name", self.name, path_name, TAG_MAX, &mut errors);
        errors.into_result(TagType {
            name,
            description: self.description.unwrap_or_default(),
            icon: self.icon.unwrap_or_default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_filter_items() {
        let t = TagRef::parse("simple:a:b").expect("parses");
        assert_eq!((t.kind.as_str(), t.value.as_str()), ("simple", "a:b"));
        assert_eq!(TagRef::parse("simple"), None);
        assert_eq!(TagRef::parse(":x"), None);
        assert_eq!(TagRef::parse("x:"), None);
    }

    #[test]
    fn validates_tags() {
        let ok = TagSpec {
            kind: None,
            value: Some("Team-Red".into()),
            ..TagSpec::default()
        };
        assert_eq!(ok.validate().map(|t| t.kind), Ok("simple".into()));
        let short = TagSpec {
            kind: Some("simple".into()),
            value: Some("x".into()),
            ..TagSpec::default()
        };
        assert!(short.validate().is_err());
        let bad_type = TagSpec {
            kind: Some("a b".into()),
            value: Some("xy".into()),
            ..TagSpec::default()
        };
        assert!(bad_type.validate().is_err());
    }
}
