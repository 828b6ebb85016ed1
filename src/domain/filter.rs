//! Toggle list filters: `tag[]`, `project` and `namePrefix` (spec §4.1, API-FACTS §11.3).
//! Values of one kind are ORed; kinds are ANDed.

use serde::Deserialize;

use super::error::{DomainError, ValidationErrors};
use super::name::{check_name, NAME_MAX};
use super::tag::TagRef;
use super::toggle::Toggle;

/// The most values one filter kind may list (a guard against oversized queries).
pub const MAX_FILTER_VALUES: usize = 100;

/// A parsed, normalised filter.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct FeatureFilter {
    pub tags: Vec<TagRef>,
    pub projects: Vec<String>,
    pub name_prefix: Option<String>,
}

impl FeatureFilter {
    /// Parses raw query values; sorts and de-duplicates them so that equivalent queries share
    /// one cache entry and one ETag.
    pub fn parse(
        tags: &[String],
        projects: &[String],
        name_prefix: Option<&str>,
    ) -> Result<Self, DomainError> {
        let mut errors = ValidationErrors::default();
        for (kind, count) in [("tag", tags.len()), ("project", projects.len())] {
            if count > MAX_FILTER_VALUES {
                errors.push(
                    kind,
                    format!("\"{kind}\" may list at most {MAX_FILTER_VALUES} values"),
                );
            }
        }
        if !errors.0.is_empty() {
            return Err(DomainError::Invalid(errors));
        }
        let mut parsed_tags = Vec::with_capacity(tags.len());
        for (i, item) in tags.iter().enumerate() {
            match TagRef::parse(item) {
                Some(tag) => parsed_tags.push(tag),
                None => errors.push(
                    format!("tag[{i}]"),
                    format!("\"tag[{i}]\" with value \"{item}\" fails to match the tag pattern type:value"),
                ),
            }
        }
        for (i, project) in projects.iter().enumerate() {
            if let Err(m) = check_name(&format!("project[{i}]"), project, 1, NAME_MAX) {
                errors.push(format!("project[{i}]"), m);
            }
        }
        parsed_tags.sort();
        parsed_tags.dedup();
        let mut projects = projects.to_vec();
        projects.sort();
        projects.dedup();
        errors.into_result(Self {
            tags: parsed_tags,
            projects,
            name_prefix: name_prefix.filter(|p| !p.is_empty()).map(str::to_string),
        })
    }

    /// The filter narrowed to `projects` (a token's scope): its projects intersected with
    /// them, or them when it names none; `None` when nothing can match.
    pub fn within(mut self, projects: &[String]) -> Option<Self> {
        if self.projects.is_empty() {
            self.projects = projects.to_vec();
        } else {
            self.projects.retain(|p| projects.contains(p));
        }
        self.projects.sort();
        self.projects.dedup();
        (!self.projects.is_empty()).then_some(self)
    }

    /// True when the filter lets every toggle through.
    pub fn is_empty(&self) -> bool {
        self.tags.is_empty() && self.projects.is_empty() && self.name_prefix.is_none()
    }

    /// Whether `toggle` passes the filter.
    pub fn matches(&self, toggle: &Toggle) -> bool {
        (self.tags.is_empty() || toggle.tags.iter().any(|t| self.tags.contains(t)))
            && (self.projects.is_empty() || self.projects.iter().any(|p| *p == toggle.project))
            && self
                .name_prefix
                .as_deref()
                .is_none_or(|p| toggle.name.starts_with(p))
    }
}

/// The filter parameters of a query string as sent: `tag[]` or `tag`, `project` or
/// `project[]` (both spellings of a list are read), and `namePrefix`.
#[derive(Debug, Default, Deserialize)]
pub struct FilterParams {
    #[serde(default, rename = "tag[]")]
    tag_list: Vec<String>,
    #[serde(default)]
    tag: Vec<String>,
    #[serde(default, rename = "project[]")]
    project_list: Vec<String>,
    #[serde(default)]
    project: Vec<String>,
    #[serde(default, rename = "namePrefix")]
    name_prefix: Option<String>,
}

impl FilterParams {
    /// The validated filter.
    pub fn filter(self) -> Result<FeatureFilter, DomainError> {
        let tags: Vec<String> = self.tag_list.into_iter().chain(self.tag).collect();
        let projects: Vec<String> = self.project_list.into_iter().chain(self.project).collect();
        FeatureFilter::parse(&tags, &projects, self.name_prefix.as_deref())
    }
}

impl FeatureFilter {
    /// The filter a poll's query string asks for (empty: none); `None` when the query is
    /// malformed or names an invalid filter (spec §4.1: such a poll matches no toggle).
    pub fn of_poll_query(query: &str) -> Option<Self> {
        if query.is_empty() {
            return Some(Self::default());
        }
        serde_html_form::from_str::<FilterParams>(query)
            .ok()
            .and_then(|params| params.filter().ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equivalent_queries_normalise_equally() {
        let a = FeatureFilter::parse(
            &["simple:b".into(), "simple:a".into(), "simple:a".into()],
            &["p2".into(), "p1".into()],
            Some(""),
        )
        .expect("valid");
        let b = FeatureFilter::parse(
            &["simple:a".into(), "simple:b".into()],
            &["p1".into(), "p2".into()],
            None,
        )
        .expect("valid");
        assert_eq!(a, b);
    }

    #[test]
    fn rejects_oversized_filters() {
        let many: Vec<String> = (0..=MAX_FILTER_VALUES)
            .map(|i| format!("simple:v{i}"))
            .collect();
        assert!(FeatureFilter::parse(&many, &[], None).is_err());
        assert!(FeatureFilter::parse(&many[..MAX_FILTER_VALUES], &[], None).is_ok());
    }

    #[test]
    fn rejects_malformed_items() {
        assert!(FeatureFilter::parse(&["simple".into()], &[], None).is_err());
        assert!(FeatureFilter::parse(&[], &["a b".into()], None).is_err());
    }
}
