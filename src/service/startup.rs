//! A replica's start: the first load of the snapshot, seeding a new store, the start-up
//! import (`--import-file`); and, while it runs, the built-ins written again into a store
//! found empty (the refresh loop's hooks).

use std::path::Path;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::import::StartupImport;
use super::{is_seeded, Service, ServiceError};
use crate::config::ImportMode;
use crate::domain::import::ImportOptions;
use crate::domain::DomainError;
use crate::snapshot::refresh_loop::RefreshHooks;
use crate::store::StoreError;

/// Reads and parses the start-up document; `Err` says why it cannot be used.
pub fn read_startup_import(path: &Path, mode: ImportMode) -> Result<StartupImport, String> {
    let shown = path.display();
    let bytes =
        std::fs::read(path).map_err(|e| format!("cannot read the import file {shown}: {e}"))?;
    let options = match mode {
        ImportMode::Keep => ImportOptions {
            drop: false,
            keep: true,
        },
        ImportMode::Overwrite => ImportOptions {
            drop: false,
            keep: false,
        },
        ImportMode::Drop => ImportOptions {
            drop: true,
            keep: false,
        },
    };
    StartupImport::new(&bytes, &path.to_string_lossy(), options)
        .map_err(|e| format!("the import file {shown}: {}", describe(&e)))
}

/// First load of the snapshot and seeding of a new store, retried until the store answers.
/// Then the start-up import, if any, before the replica serves: a document the store's
/// configuration refuses stops the replica (`Err`, after cancelling `shutdown`).
pub async fn load_and_seed(
    service: Service,
    startup_import: Option<StartupImport>,
    retry: Duration,
    shutdown: CancellationToken,
) -> Result<(), String> {
    let snapshot = service.snapshot.clone();
    loop {
        // Err(Some(reason)): stop the replica; Err(None): retry (logged).
        let attempt = async {
            let retry = |e: &dyn std::fmt::Display| {
                tracing::warn!(error = %e, "cannot load the configuration yet; retrying");
                None
            };
            snapshot.refresh().await.map_err(|e| retry(&e))?;
            service.seed_if_needed().await.map_err(|e| retry(&e))?;
            if let Some(import) = &startup_import {
                let report = service
                    .import_at_startup(import)
                    .await
                    .map_err(|e| match e {
                        ServiceError::Domain(e) => {
                            Some(format!("the start-up import was refused: {}", describe(&e)))
                        }
                        ServiceError::Internal(cause) => {
                            Some(format!("the start-up import failed: {cause}"))
                        }
                        other => retry(&other),
                    })?;
                tracing::info!(changed = report.changed, summary = ?report.summary, "start-up import");
            }
            Ok::<_, Option<String>>(())
        };
        match attempt.await {
            Ok(()) => {
                snapshot.mark_ready();
                tracing::info!(version = snapshot.state().version, "configuration loaded");
                return Ok(());
            }
            Err(Some(message)) => {
                tracing::error!("{message}");
                shutdown.cancel();
                return Err(message);
            }
            Err(None) => {}
        }
        tokio::select! {
            _ = shutdown.cancelled() => return Ok(()),
            _ = tokio::time::sleep(retry.max(Duration::from_millis(200))) => {}
        }
    }
}

/// The refresh loop times its checks into the store metrics and, once the replica is ready,
/// re-seeds a store found empty (flushed, or restarted without persistence).
impl RefreshHooks for Service {
    fn checked(&self, elapsed: Duration, error: Option<&StoreError>) {
        self.metrics
            .usage
            .operation("snapshot_check", elapsed, error);
    }

    async fn refreshed(&self) {
        if self.snapshot.is_ready() && !is_seeded(&self.snapshot.state()) {
            if let Err(e) = self.seed_if_needed().await {
                tracing::warn!(error = %e, "re-seeding an empty store failed");
            }
        }
    }
}

/// Every problem of a refusal, one per line with its path.
fn describe(error: &DomainError) -> String {
    match error {
        DomainError::Invalid(errors) => errors
            .0
            .iter()
            .map(|e| format!("\n  {}: {}", e.path, e.message))
            .collect(),
        other => other.to_string(),
    }
}
