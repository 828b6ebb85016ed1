//! The redb file the embedded backend's three parts share — configuration (`embedded.rs`),
//! usage (`usage/embedded.rs`) and the delivery outbox (`delivery/embedded.rs`): the records
//! table, blocking work off the runtime, and redb's errors as a `StoreError`. A leaf: it
//! imports none of the three, so each imports it without a cycle.

use std::sync::Arc;

use redb::{Database, TableDefinition};

use super::StoreError;

/// (collection, key) → JSON document: the configuration's records (the outbox reads addons).
pub(crate) const RECORDS: TableDefinition<(&str, &str), &str> = TableDefinition::new("records");

/// A redb (or join) error: the file cannot be used now, so the operation may be retried.
pub(crate) fn failed(e: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(e.to_string())
}

/// Runs blocking redb work on `db` off the async runtime.
pub(crate) async fn run_blocking<T, F>(db: &Arc<Database>, work: F) -> Result<T, StoreError>
where
    T: Send + 'static,
    F: FnOnce(&Database) -> Result<T, StoreError> + Send + 'static,
{
    let db = db.clone();
    tokio::task::spawn_blocking(move || work(&db))
        .await
        .map_err(failed)?
}
