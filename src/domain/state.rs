//! `ConfigState`: the whole configuration at one version, as the service reads it to apply
//! domain rules and as the snapshot serves it.

use std::sync::Arc;

use imbl::OrdMap;

use super::addon::AddonConfig;
use super::api_token::ApiToken;
use super::context_field::ContextField;
use super::project::Project;
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
}
