//! The toggle list's query: search over name, description and tags, filters, sort and a
//! page, answered from the snapshot in memory (the listing the API serves, filtered here).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::domain::config_state::ConfigState;
use crate::domain::toggle::Toggle;

/// Page sizes offered (any from 1 to the largest is accepted in the URL).
pub const PAGE_SIZES: [usize; 5] = [10, 25, 50, 100, 200];
/// The page size when the URL names none.
const DEFAULT_SIZE: usize = 50;
/// The largest page size.
const MAX_SIZE: usize = 500;

fn is_blank(s: &str) -> bool {
    s.is_empty()
}

/// What the list shows, as it appears in the URL (so a view can be bookmarked and shared).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct ListQuery {
    /// Words searched in the name, description and tags (`type:value`), case-insensitively.
    #[serde(default, skip_serializing_if = "is_blank")]
    pub q: String,
    #[serde(default, skip_serializing_if = "is_blank")]
    pub project: String,
    /// The environment `enabled` refers to (and whose switches are shown alone).
    #[serde(default, skip_serializing_if = "is_blank")]
    pub environment: String,
    #[serde(default, rename = "type", skip_serializing_if = "is_blank")]
    pub kind: String,
    /// `on` or `off` (in `environment`, else in any environment); blank: either.
    #[serde(default, skip_serializing_if = "is_blank")]
    pub enabled: String,
    /// `yes` or `no`; blank: either.
    #[serde(default, skip_serializing_if = "is_blank")]
    pub stale: String,
    /// `type:value`.
    #[serde(default, skip_serializing_if = "is_blank")]
    pub tag: String,
    /// `name` (default), `-name`, `created`, `-created` (newest first).
    #[serde(default, skip_serializing_if = "is_blank")]
    pub sort: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<usize>,
}

impl ListQuery {
    /// The page size asked for, within bounds.
    pub fn size(&self) -> usize {
        self.size.unwrap_or(DEFAULT_SIZE).clamp(1, MAX_SIZE)
    }

    /// The page asked for (from 1).
    pub fn page(&self) -> usize {
        self.page.unwrap_or(1).max(1)
    }

    /// This query as a URL query string.
    pub fn to_query(&self) -> String {
        serde_html_form::to_string(self).unwrap_or_default()
    }

    /// The same query on page `page`.
    pub fn on_page(&self, page: usize) -> Self {
        Self {
            page: Some(page),
            ..self.clone()
        }
    }

    /// The same query sorted by `sort`, from the first page.
    pub fn sorted(&self, sort: &str) -> Self {
        Self {
            sort: sort.to_string(),
            page: None,
            ..self.clone()
        }
    }
}

/// One page of the list.
pub struct ToggleList {
    /// How many toggles match.
    pub total: usize,
    pub rows: Vec<Arc<Toggle>>,
}

/// Whether `haystack` contains `needle` (already lower-case), ignoring ASCII case.
fn contains(haystack: &str, needle: &[u8]) -> bool {
    needle.is_empty()
        || haystack
            .as_bytes()
            .windows(needle.len())
            .any(|w| w.eq_ignore_ascii_case(needle))
}

/// Whether `toggle` passes the query's search and filters.
fn matches(toggle: &Toggle, query: &ListQuery, words: &[Vec<u8>]) -> bool {
    if !query.project.is_empty() && *toggle.project != *query.project {
        return false;
    }
    if !query.kind.is_empty() && *toggle.kind != *query.kind {
        return false;
    }
    match query.stale.as_str() {
        "yes" if !toggle.stale => return false,
        "no" if toggle.stale => return false,
        _ => {}
    }
    if !query.enabled.is_empty() {
        let on = if query.environment.is_empty() {
            toggle.environments.iter().any(|(_, e)| e.enabled)
        } else {
            toggle.environment(&query.environment).enabled
        };
        if on != (query.enabled == "on") {
            return false;
        }
    }
    if !query.tag.is_empty()
        && !toggle
            .tags
            .iter()
            .any(|t| format!("{}:{}", t.kind, t.value) == query.tag)
    {
        return false;
    }
    words.iter().all(|word| {
        contains(&toggle.name, word)
            || contains(&toggle.description, word)
            || toggle.tags.iter().any(|t| {
                contains(&t.value, word) || contains(&format!("{}:{}", t.kind, t.value), word)
            })
    })
}

/// The page of toggles `query` asks for.
pub fn run(state: &ConfigState, query: &ListQuery) -> ToggleList {
    let words: Vec<Vec<u8>> = query
        .q
        .split_whitespace()
        .map(|w| w.to_ascii_lowercase().into_bytes())
        .collect();
    let (size, page) = (query.size(), query.page());
    let skip = (page - 1).saturating_mul(size);
    let candidates = state
        .features
        .values()
        .filter(|t| matches(t, query, &words));
    match query.sort.as_str() {
        // By name: the map's own order, so only the page's rows are collected.
        "" | "name" | "-name" => {
            let mut total = 0;
            let mut rows = Vec::with_capacity(size);
            let mut take = |t: &Arc<Toggle>| {
                if total >= skip && rows.len() < size {
                    rows.push(t.clone());
                }
                total += 1;
            };
            if query.sort == "-name" {
                state
                    .features
                    .values()
                    .rev()
                    .filter(|t| matches(t, query, &words))
                    .for_each(&mut take);
            } else {
                candidates.for_each(&mut take);
            }
            ToggleList { total, rows }
        }
        sort => {
            let mut all: Vec<&Arc<Toggle>> = candidates.collect();
            all.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.name.cmp(&b.name)));
            if sort == "-created" {
                all.reverse();
            }
            ToggleList {
                total: all.len(),
                rows: all.into_iter().skip(skip).take(size).cloned().collect(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_ignores_case_and_finds_words_anywhere() {
        assert!(contains("Checkout-V2", b"checkout"));
        assert!(contains("new checkout flow", b"flow"));
        assert!(!contains("checkout", b"payment"));
        assert!(contains("anything", b""));
    }

    #[test]
    fn sizes_and_pages_stay_in_bounds() {
        let q = ListQuery {
            size: Some(100_000),
            page: Some(0),
            ..Default::default()
        };
        assert_eq!(q.size(), MAX_SIZE);
        assert_eq!(q.page(), 1);
        assert_eq!(ListQuery::default().size(), DEFAULT_SIZE);
        assert_eq!(
            ListQuery {
                q: "a b".into(),
                ..Default::default()
            }
            .on_page(2)
            .to_query(),
            "q=a+b&page=2"
        );
    }
}
