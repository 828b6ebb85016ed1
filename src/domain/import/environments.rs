//! The `environments` and `featureEnvironments` sections of a version-2 document: the
//! environment registry, and each toggle's configuration per environment (enabled,
//! strategies with their ids, order, titles, disabled flags, constraints, segments and
//! variants, toggle variants) stored as written, as the client-shaped import does.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use litemap::LiteMap;
use serde::Deserialize;
use serde_json::Value;

use super::document::parse_item;
use crate::domain::config_state::ConfigState;
use crate::domain::environment::{Environment, FeatureEnvironment};
use crate::domain::feature_strategy::{assign_ids, Strategy};
use crate::domain::fields::{refuse_unsupported, ExtraFields};
use crate::domain::name::{check_name, NAME_MAX};
use crate::domain::text::Text;
use crate::domain::toggle::{Toggle, Variant};
use crate::domain::ValidationErrors;

use super::apply::{merge, ImportOptions, RecordCounts};

/// An `environments` item.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct EnvironmentItem {
    name: String,
    #[serde(rename = "type")]
    kind: String,
    #[serde(default = "yes")]
    enabled: bool,
    #[serde(default)]
    protected: bool,
    #[serde(default)]
    sort_order: i64,
    #[serde(default)]
    created_at: Option<DateTime<Utc>>,
    #[serde(flatten)]
    extra: ExtraFields,
}

fn yes() -> bool {
    true
}

/// Fields of a served environment that say nothing to keep.
const READ_ONLY_ENVIRONMENT_FIELDS: [&str; 5] = [
    "projectCount",
    "apiTokenCount",
    "enabledToggleCount",
    "requiredApprovals",
    "visible",
];

/// A `featureEnvironments` item: one toggle's configuration in one environment.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct FeatureEnvironmentItem {
    feature_name: String,
    environment: String,
    enabled: bool,
    #[serde(default)]
    strategies: Vec<Strategy>,
    #[serde(default)]
    variants: Vec<Variant>,
}

/// A toggle's configuration in one environment, as the document gives it.
#[derive(Debug, Clone)]
pub struct ImportedFeatureEnvironment {
    pub feature_name: String,
    pub environment: String,
    pub config: FeatureEnvironment,
}

/// Reads the `environments` section.
pub fn read_environments(
    list: Vec<(usize, Value)>,
    now: DateTime<Utc>,
    errors: &mut ValidationErrors,
) -> Vec<(usize, Environment)> {
    let mut seen = HashMap::new();
    let mut read = Vec::new();
    for (i, item) in list {
        let path = format!("environments[{i}]");
        let Some(item) = parse_item::<EnvironmentItem>(item, &path, errors) else {
            continue;
        };
        refuse_unsupported(&item.extra, &path, &READ_ONLY_ENVIRONMENT_FIELDS, errors);
        if let Err(m) = check_name("name", &item.name, 1, NAME_MAX) {
            errors.push(format!("{path}.name"), m);
            continue;
        }
        if item.kind.trim().is_empty() || item.kind.chars().count() > NAME_MAX {
            errors.push(
                format!("{path}.type"),
                "\"type\" must be 1 to 100 characters long",
            );
            continue;
        }
        if let Some(earlier) = seen.insert(item.name.clone(), i) {
            errors.push(
                format!("{path}.name"),
                format!(
                    "\"{}\" appears twice in \"environments\" (also at environments[{earlier}])",
                    item.name
                ),
            );
            continue;
        }
        read.push((
            i,
            Environment {
                name: item.name,
                kind: item.kind,
                enabled: item.enabled,
                protected: item.protected,
                sort_order: item.sort_order,
                created_at: item.created_at.unwrap_or(now),
            },
        ));
    }
    read
}

/// Reads the `featureEnvironments` section.
pub fn read_feature_environments(
    list: Vec<(usize, Value)>,
    errors: &mut ValidationErrors,
) -> Vec<(usize, ImportedFeatureEnvironment)> {
    let mut seen: HashMap<(String, String), usize> = HashMap::new();
    let mut read = Vec::new();
    for (i, item) in list {
        let path = format!("featureEnvironments[{i}]");
        let Some(item) = parse_item::<FeatureEnvironmentItem>(item, &path, errors) else {
            continue;
        };
        let key = (item.feature_name.clone(), item.environment.clone());
        if let Some(earlier) = seen.insert(key, i) {
            errors.push(
                path,
                format!(
                    "\"{}\" in \"{}\" appears twice (also at featureEnvironments[{earlier}])",
                    item.feature_name, item.environment
                ),
            );
            continue;
        }
        let mut ids = HashSet::new();
        for (j, strategy) in item.strategies.iter().enumerate() {
            if !strategy.id.is_empty() && !ids.insert(strategy.id.clone()) {
                errors.push(
                    format!("{path}.strategies[{j}].id"),
                    format!("the strategy id \"{}\" appears twice", strategy.id),
                );
            }
        }
        read.push((
            i,
            ImportedFeatureEnvironment {
                feature_name: item.feature_name,
                environment: item.environment,
                config: FeatureEnvironment {
                    enabled: item.enabled,
                    strategies: item.strategies,
                    variants: item.variants,
                },
            },
        ));
    }
    read
}

/// Merges the document's environments into `next`: new ones are added, listed ones replaced
/// (their creation time kept, `default` still protected) unless `keep`. Environments are
/// never dropped: toggles of other environments would lose their configuration silently.
pub fn apply_environments(
    next: &mut ConfigState,
    listed: &[(usize, Environment)],
    keep: bool,
) -> RecordCounts {
    let listed: Vec<Environment> = listed.iter().map(|(_, e)| e.clone()).collect();
    let options = ImportOptions { drop: false, keep };
    let carry = |old: &Environment, new: &mut Environment| {
        new.created_at = old.created_at;
        // `default` stays protected: the 3.x API acts on it.
        new.protected |= old.protected;
    };
    merge(
        &mut next.environments,
        listed,
        options,
        |e| &e.name,
        carry,
        |_| true,
    )
    .0
}

/// Gives each toggle the import wrote (`written`) exactly the environments the section lists
/// for it (none: it is configured nowhere). Checks that every listed toggle is in the
/// document's `features` (`in_document`), every environment, strategy definition and segment
/// exists; items of toggles the import keeps as stored are passed over.
pub fn apply_feature_environments(
    before: &ConfigState,
    next: &mut ConfigState,
    listed: &[(usize, ImportedFeatureEnvironment)],
    in_document: &HashSet<&str>,
    written: &HashSet<String>,
    errors: &mut ValidationErrors,
) {
    let mut by_toggle: HashMap<&str, Vec<&ImportedFeatureEnvironment>> = HashMap::new();
    for (i, fe) in listed {
        let path = format!("featureEnvironments[{i}]");
        if !next.environments.contains_key(&fe.environment) {
            errors.push(
                format!("{path}.environment"),
                format!(
                    "there is no environment \"{}\" (in the document or stored)",
                    fe.environment
                ),
            );
        }
        for (j, strategy) in fe.config.strategies.iter().enumerate() {
            let at = format!("{path}.strategies[{j}]");
            if !next.strategies.contains_key(strategy.name.as_str()) {
                errors.push(
                    format!("{at}.name"),
                    format!(
                        "there is no strategy definition \"{}\" (in the document or stored)",
                        strategy.name
                    ),
                );
            }
            for id in &strategy.segments {
                if !next.segments.contains_key(&id.to_string()) {
                    errors.push(
                        format!("{at}.segments"),
                        format!("there is no segment {id} (in the document or stored)"),
                    );
                }
            }
        }
        if !in_document.contains(fe.feature_name.as_str()) {
            errors.push(
                format!("{path}.featureName"),
                format!(
                    "the toggle \"{}\" is not in the document's \"features\"",
                    fe.feature_name
                ),
            );
            continue;
        }
        by_toggle.entry(&fe.feature_name).or_default().push(fe);
    }
    for name in in_document.iter().filter(|n| written.contains(**n)) {
        let Some(toggle) = next.features.get(*name) else {
            continue;
        };
        let previous = before
            .features
            .get(*name)
            .or_else(|| before.archive.get(*name));
        let mut environments: LiteMap<Text, FeatureEnvironment> = LiteMap::new();
        for fe in by_toggle.remove(name).unwrap_or_default() {
            let mut config = fe.config.clone();
            let earlier = previous.map_or(&[][..], |t| &t.environment(&fe.environment).strategies);
            assign_ids(&mut config.strategies, earlier);
            environments.insert(Text::from(fe.environment.as_str()), config);
        }
        let mut updated: Toggle = (**toggle).clone();
        updated.environments = environments;
        if updated != **toggle {
            next.features.insert(name.to_string(), Arc::new(updated));
        }
    }
}
