//! `ConfigState`: the whole configuration at one version, as the service reads it to apply
//! domain rules and as the snapshot serves it.

use std::sync::Arc;

use imbl::OrdMap;

use super::addon::{providers, AddonConfig};
use super::api_token::ApiToken;
use super::context_field::ContextField;
use super::delivery::subscribes;
use super::environment::Environment;
use super::known::KnownNames;
use super::project::Project;
use super::segment::Segment;
use super::strategy::StrategyDefinition;
use super::tag::{Tag, TagRef, TagType};
use super::toggle::Toggle;

/// Configuration at one store version. Maps are keyed by name (tags by `type:value`), so
/// listings come out sorted by name as clients expect. They are persistent maps (`imbl`):
/// cloning a state is O(1) and a changed record copies only its path in the tree, so applying
/// a change set of one toggle to 10,000 costs what the one toggle costs.
#[derive(Debug, Clone, Default)]
pub struct ConfigState {
    /// Store version this state reflects; 0 means "never written".
    pub version: u64,
    /// Id of the commit that made `version` (see `store::Position`).
    pub head: u64,
    pub features: OrdMap<String, Arc<Toggle>>,
    pub archive: OrdMap<String, Arc<Toggle>>,
    pub strategies: OrdMap<String, Arc<StrategyDefinition>>,
    pub tag_types: OrdMap<String, Arc<TagType>>,
    pub tags: OrdMap<String, Arc<Tag>>,
    /// Projects by id.
    pub projects: OrdMap<String, Arc<Project>>,
    pub context_fields: OrdMap<String, Arc<ContextField>>,
    /// Addon configurations by id (decimal).
    pub addons: OrdMap<String, Arc<AddonConfig>>,
    /// API tokens by the hex SHA-256 of their secret.
    pub api_tokens: OrdMap<String, Arc<ApiToken>>,
    /// Environments by name.
    pub environments: OrdMap<String, Arc<Environment>>,
    /// Segments by id (decimal).
    pub segments: OrdMap<String, Arc<Segment>>,
    /// Id sequences (e.g. `tag`), advanced by the writes that allocate ids.
    pub counters: OrdMap<String, u64>,
}

impl ConfigState {
    /// The stored tag for a reference, if it exists.
    pub fn tag(&self, tag: &TagRef) -> Option<&Arc<Tag>> {
        self.tags.get(&tag.key())
    }

    /// The next id of the named sequence.
    pub fn next_id(&self, counter: &str) -> u64 {
        self.counters.get(counter).copied().unwrap_or(0) + 1
    }

    /// The enabled addons subscribed to events of `kind`, by id: each gets a delivery job.
    pub fn addons_subscribed_to(&self, kind: &str) -> Vec<u64> {
        self.addons
            .values()
            .filter(|a| subscribes(a, kind))
            .map(|a| a.id)
            .collect()
    }

    /// The id of an addon whose provider reads tag type `name` (e.g. `slack` for channels), if
    /// any: such a tag type must stay.
    pub fn addon_reading_tag_type(&self, name: &str) -> Option<u64> {
        let readers: Vec<&str> = providers()
            .into_iter()
            .filter(|p| p.tag_types.iter().any(|t| t.name == name))
            .map(|p| p.name)
            .collect();
        self.addons
            .values()
            .find(|a| readers.contains(&a.provider.as_str()))
            .map(|a| a.id)
    }

    /// Whether `other` holds the same records as this state outside the toggles, and the same
    /// toggle (active or archived) for each of `names`: what a decision that reads only those
    /// toggles sees is then the same in both. Maps are compared by identity (see
    /// `shares_all_but_toggles`), toggles by value.
    pub fn agrees_on<'a>(
        &self,
        other: &ConfigState,
        names: impl IntoIterator<Item = &'a str>,
    ) -> bool {
        self.shares_all_but_toggles(other)
            && names.into_iter().all(|name| {
                self.features.get(name) == other.features.get(name)
                    && self.archive.get(name) == other.archive.get(name)
            })
    }

    /// Whether `other` holds the very same maps as this state for every collection but the
    /// toggles. By identity: a state cloned from the other, with only toggles changed since,
    /// passes at once; states built apart may fail although equal (never the other way round).
    pub fn shares_all_but_toggles(&self, other: &ConfigState) -> bool {
        // Destructured in full: a collection added later must be compared here too.
        let ConfigState {
            version: _,
            head: _,
            features: _,
            archive: _,
            strategies,
            tag_types,
            tags,
            projects,
            context_fields,
            addons,
            api_tokens,
            environments,
            segments,
            counters,
        } = self;
        strategies.ptr_eq(&other.strategies)
            && tag_types.ptr_eq(&other.tag_types)
            && tags.ptr_eq(&other.tags)
            && projects.ptr_eq(&other.projects)
            && context_fields.ptr_eq(&other.context_fields)
            && addons.ptr_eq(&other.addons)
            && api_tokens.ptr_eq(&other.api_tokens)
            && environments.ptr_eq(&other.environments)
            && segments.ptr_eq(&other.segments)
            && counters.ptr_eq(&other.counters)
    }
}

/// What validation may refer to: the stored projects, context fields and segments.
impl KnownNames for ConfigState {
    fn has_project(&self, id: &str) -> bool {
        self.projects.contains_key(id)
    }

    fn context_field(&self, name: &str) -> Option<&ContextField> {
        self.context_fields.get(name).map(|f| &**f)
    }

    fn has_segment(&self, id: u32) -> bool {
        self.segments.contains_key(&id.to_string())
    }
}
