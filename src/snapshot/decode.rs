//! Turning stored records into typed entries of a `ConfigState`.

use std::sync::Arc;

use serde::de::DeserializeOwned;

use crate::domain::config_state::ConfigState;
use crate::store::{Change, Collection, StoreError};

fn parse<T: DeserializeOwned>(
    collection: Collection,
    key: &str,
    raw: &str,
) -> Result<Arc<T>, StoreError> {
    serde_json::from_str(raw)
        .map(Arc::new)
        .map_err(|e| StoreError::Corrupt(format!("{}/{key}: {e}", collection.as_str())))
}

/// Applies one change to `state`.
pub fn apply(state: &mut ConfigState, change: &Change) -> Result<(), StoreError> {
    apply_record(
        state,
        change.collection,
        &change.key,
        change.value.as_deref(),
    )
}

/// Sets (`Some`) or removes (`None`) the record `key` of `collection`.
pub fn apply_record(
    state: &mut ConfigState,
    collection: Collection,
    key: &str,
    value: Option<&str>,
) -> Result<(), StoreError> {
    let key_owned = key.to_string();
    match (collection, value) {
        (Collection::Features, Some(v)) => {
            state.features.insert(key_owned, parse(collection, key, v)?);
        }
        (Collection::Features, None) => {
            state.features.remove(key);
        }
        (Collection::Archive, Some(v)) => {
            state.archive.insert(key_owned, parse(collection, key, v)?);
        }
        (Collection::Archive, None) => {
            state.archive.remove(key);
        }
        (Collection::Strategies, Some(v)) => {
            state
                .strategies
                .insert(key_owned, parse(collection, key, v)?);
        }
        (Collection::Strategies, None) => {
            state.strategies.remove(key);
        }
        (Collection::TagTypes, Some(v)) => {
            state
                .tag_types
                .insert(key_owned, parse(collection, key, v)?);
        }
        (Collection::TagTypes, None) => {
            state.tag_types.remove(key);
        }
        (Collection::Tags, Some(v)) => {
            state.tags.insert(key_owned, parse(collection, key, v)?);
        }
        (Collection::Tags, None) => {
            state.tags.remove(key);
        }
        (Collection::Projects, Some(v)) => {
            state.projects.insert(key_owned, parse(collection, key, v)?);
        }
        (Collection::Projects, None) => {
            state.projects.remove(key);
        }
        (Collection::ContextFields, Some(v)) => {
            state
                .context_fields
                .insert(key_owned, parse(collection, key, v)?);
        }
        (Collection::ContextFields, None) => {
            state.context_fields.remove(key);
        }
        (Collection::Addons, Some(v)) => {
            state.addons.insert(key_owned, parse(collection, key, v)?);
        }
        (Collection::Addons, None) => {
            state.addons.remove(key);
        }
        (Collection::ApiTokens, Some(v)) => {
            state
                .api_tokens
                .insert(key_owned, parse(collection, key, v)?);
        }
        (Collection::ApiTokens, None) => {
            state.api_tokens.remove(key);
        }
        (Collection::Environments, Some(v)) => {
            state
                .environments
                .insert(key_owned, parse(collection, key, v)?);
        }
        (Collection::Environments, None) => {
            state.environments.remove(key);
        }
        (Collection::Segments, Some(v)) => {
            state.segments.insert(key_owned, parse(collection, key, v)?);
        }
        (Collection::Segments, None) => {
            state.segments.remove(key);
        }
        (Collection::Counters, Some(v)) => {
            let n = v
                .parse()
                .map_err(|e| StoreError::Corrupt(format!("counter {key}: {e}")))?;
            state.counters.insert(key_owned, n);
        }
        (Collection::Counters, None) => {
            state.counters.remove(key);
        }
    }
    Ok(())
}
