//! Toggle list filters: a query string read into `FilterParams` (`http::extract::parse_query`,
//! as the `ToggleFilter` extractor does) and `FeatureFilter::parse` (`domain::filter`):
//! `tag[]`/`tag`, `project`/`project[]`, `namePrefix`.

use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
use proptest::prelude::*;

use super::gen::name;
use super::{config, odd_text};
use crate::domain::filter::{FeatureFilter, FilterParams, MAX_FILTER_VALUES};
use crate::domain::name::{check_name, NAME_MAX};
use crate::domain::tag::TagRef;
use crate::domain::DomainError;
use crate::error::ApiError;
use crate::http::extract::parse_query;

/// How a query writes a key or a value.
#[derive(Debug, Clone, Copy)]
enum Encoding {
    /// As an HTML form does (`+` for a space).
    Form,
    /// Every byte but letters and digits as `%XX`.
    Percent,
    /// Every byte as lower-case `%xx`.
    LowerHex,
    /// Not encoded at all (only for the queries that need not be valid).
    Raw,
}

fn encode(s: &str, encoding: Encoding) -> String {
    match encoding {
        Encoding::Form => url::form_urlencoded::byte_serialize(s.as_bytes()).collect(),
        Encoding::Percent => utf8_percent_encode(s, NON_ALPHANUMERIC).to_string(),
        Encoding::LowerHex => s.bytes().map(|b| format!("%{b:02x}")).collect(),
        Encoding::Raw => s.to_string(),
    }
}

fn encoding() -> impl Strategy<Value = Encoding> {
    prop_oneof![
        Just(Encoding::Form),
        Just(Encoding::Percent),
        Just(Encoding::LowerHex)
    ]
}

/// Query keys: the filter's, near misses, and odd text.
fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(vec![
            "tag[]", "tag", "project", "project[]", "namePrefix", "tag[0]", "tag[][]",
            "Tag", "nameprefix", "", "tag%5B%5D", "tag%5b%5d", "%",
        ])
        .prop_map(str::to_string),
        1 => odd_text(),
    ]
}

/// A query: key=value pairs, each part encoded its own way or not at all, joined by `&`
/// (sometimes `&&` or `;`), the first pair possibly repeated past the value limit; then a
/// broken percent escape or an invalid UTF-8 one.
fn query() -> impl Strategy<Value = String> {
    let part = prop_oneof![encoding(), Just(Encoding::Raw)];
    let pair = (key(), odd_text(), part.clone(), part, any::<bool>());
    (
        prop::collection::vec(pair, 0..10),
        prop_oneof![1..3usize, 99..103usize],
        prop::sample::select(vec!["&", "&&", ";", "&amp;"]),
        prop::sample::select(vec![
            "", "%", "%z", "%zz", "%ff", "%c3%28", "%00", "=&=", "#x",
        ]),
    )
        .prop_map(|(pairs, repeat, separator, tail)| {
            let mut parts: Vec<String> = pairs
                .iter()
                .map(|(k, v, kenc, venc, bare)| {
                    if *bare {
                        encode(k, *kenc)
                    } else {
                        format!("{}={}", encode(k, *kenc), encode(v, *venc))
                    }
                })
                .collect();
            if let Some(first) = parts.first().cloned() {
                parts.extend(std::iter::repeat_n(first, repeat - 1));
            }
            parts.join(separator) + tail
        })
}

/// A valid tag filter item: a type without `:` and a value, both non-empty.
fn tag() -> impl Strategy<Value = TagRef> {
    (odd_text(), odd_text()).prop_map(|(kind, value)| TagRef {
        kind: format!("t{}", kind.replace(':', "")).into(),
        value: format!("v{value}").into(),
    })
}

/// The filter `FeatureFilter::parse` makes of these values: sorted, without repeats, an empty
/// prefix dropped.
fn normalised(tags: &[TagRef], projects: &[String], prefix: &str) -> FeatureFilter {
    let mut filter = FeatureFilter {
        tags: tags.to_vec(),
        projects: projects.to_vec(),
        name_prefix: (!prefix.is_empty()).then(|| prefix.to_string()),
    };
    filter.tags.sort();
    filter.tags.dedup();
    filter.projects.sort();
    filter.projects.dedup();
    filter
}

proptest! {
    #![proptest_config(config(1024))]

    /// Any query is a filter or a refusal; an accepted filter is normalised, within the value
    /// limits, and holds only well-formed tags and project names.
    #[test]
    fn any_query_is_a_filter_or_a_refusal(query in query()) {
        let parsed = match parse_query::<FilterParams>(Some(&query)) {
            Ok(parsed) => parsed,
            Err(ApiError::BadRequest { .. }) => return Ok(()),
            Err(other) => return Err(TestCaseError::fail(format!("not a 400: {other:?}"))),
        };
        let filter = match parsed.filter() {
            Ok(filter) => filter,
            Err(DomainError::Invalid(problems)) => {
                prop_assert!(!problems.0.is_empty());
                return Ok(());
            }
            Err(other) => return Err(TestCaseError::fail(format!("not invalid: {other:?}"))),
        };
        prop_assert!(filter.tags.len() <= MAX_FILTER_VALUES);
        prop_assert!(filter.projects.len() <= MAX_FILTER_VALUES);
        prop_assert!(filter.tags.windows(2).all(|w| w[0] < w[1]), "tags not normalised");
        prop_assert!(filter.projects.windows(2).all(|w| w[0] < w[1]), "projects not normalised");
        for tag in &filter.tags {
            prop_assert!(!tag.kind.is_empty() && !tag.value.is_empty() && !tag.kind.contains(':'));
        }
        for project in &filter.projects {
            prop_assert!(check_name("project", project, 1, NAME_MAX).is_ok(), "{:?}", project);
        }
        prop_assert!(filter.name_prefix.as_deref() != Some(""));
    }

    /// A valid filter written as a query — values in any order, repeated, under either key
    /// spelling, with any percent-encoding — parses back to the same filter.
    #[test]
    fn a_filter_written_as_a_query_parses_back(
        tags in prop::collection::vec((tag(), any::<bool>(), encoding()), 0..6),
        projects in prop::collection::vec((name(NAME_MAX), any::<bool>(), encoding()), 0..6),
        prefix in (odd_text(), encoding()),
        repeats in 1..4usize,
        order in any::<prop::sample::Index>(),
    ) {
        let mut parts = Vec::new();
        for (tag, listed, enc) in &tags {
            let key = if *listed { "tag[]" } else { "tag" };
            parts.push(format!("{}={}", encode(key, *enc), encode(&tag.key(), *enc)));
        }
        for (project, listed, enc) in &projects {
            let key = if *listed { "project[]" } else { "project" };
            parts.push(format!("{}={}", encode(key, *enc), encode(project, *enc)));
        }
        // Repeated values make no difference (well within the value limit).
        let copies = parts.clone();
        for _ in 1..repeats {
            parts.extend(copies.iter().cloned());
        }
        if !parts.is_empty() {
            let at = order.index(parts.len());
            parts.rotate_left(at);
        }
        parts.push(format!("namePrefix={}", encode(&prefix.0, prefix.1)));
        let query = parts.join("&");

        let tags: Vec<TagRef> = tags.into_iter().map(|(t, _, _)| t).collect();
        let projects: Vec<String> = projects.into_iter().map(|(p, _, _)| p).collect();
        let parsed = parse_query::<FilterParams>(Some(&query))
            .map_err(|e| TestCaseError::fail(format!("{query}: {e}")))?
            .filter()
            .map_err(|e| TestCaseError::fail(format!("{query}: {e:?}")))?;
        prop_assert_eq!(parsed, normalised(&tags, &projects, &prefix.0));
    }
}
