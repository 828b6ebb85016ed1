//! `ConfigState`: the whole configuration at one version, as the service reads it to apply
//! domain rules and as the snapshot serves it.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::strategy::StrategyDefinition;
use super::tag::{Tag, TagRef, TagType};
use super::toggle::Toggle;

/// Configuration at one store version. Maps are keyed by name (tags by `type:value`), so
/// listings come out sorted by name as clients expect.
#[derive(Debug, Clone, Default)]
pub struct ConfigState {
    /// Store version this state reflects; 0 means "never written".
    pub version: u64,
    /// Id of the commit that made `version` (see `store::Position`).
    pub head: u64,
    pub features: BTreeMap<String, Arc<Toggle>>,
    pub archive: BTreeMap<String, Arc<Toggle>>,
    pub strategies: BTreeMap<String, Arc<StrategyDefinition>>,
    pub tag_types: BTreeMap<String, Arc<TagType>>,
    pub tags: BTreeMap<String, Arc<Tag>>,
    /// Id sequences (e.g. `tag`), advanced by the writes that allocate ids.
    pub counters: BTreeMap<String, u64>,
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
