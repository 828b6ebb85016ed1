//! The client-shaped import of one environment (`POST /api/admin/state/import?environment=E`):
//! a client document stored verbatim in one atomic write, or only reported (dry run).

use std::sync::{Arc, Mutex};

use chrono::Utc;
use serde::Serialize;
use serde_json::json;

use super::import::{blocking, record_changes, same_base, same_records, IMPORTS};
use super::{Actor, Plan, Service, ServiceError, COMMIT_ATTEMPTS};
use crate::domain::event::EventKind;
use crate::domain::import::{apply_client_document, ClientDocument, ClientImportSummary};

/// What a client-shaped import answers.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientImportReport {
    pub dry_run: bool,
    pub drop: bool,
    pub summary: ClientImportSummary,
    /// Whether anything was (or would be) written.
    pub changed: bool,
}

impl Service {
    /// Imports the client document `document` into `environment`; with `drop`, toggles it does
    /// not list lose their configuration there; `dry_run` only reports.
    pub async fn import_client_document(
        &self,
        actor: &Actor,
        document: ClientDocument,
        environment: String,
        drop: bool,
        dry_run: bool,
    ) -> Result<ClientImportReport, ServiceError> {
        self.state()?;
        let read = Arc::new(document);
        let environment = Arc::new(environment);
        let report = |summary, changed| ClientImportReport {
            dry_run,
            drop,
            summary,
            changed,
        };
        for _ in 0..COMMIT_ATTEMPTS {
            let base = self.snapshot.state();
            let prepared = {
                let (base, read, actor, environment) = (
                    base.clone(),
                    read.clone(),
                    actor.clone(),
                    environment.clone(),
                );
                blocking(move || {
                    let (next, summary) =
                        apply_client_document(&base, &read, &environment, drop, Utc::now())?;
                    let changed = !same_records(&base, &next);
                    let mut plan = Plan::new(Utc::now(), ());
                    if changed && !dry_run {
                        record_changes(&base, &next, &mut plan, &actor, &environment)?;
                        // Never rebased onto other replicas' writes: see `import::prepare`.
                        plan.put(
                            crate::store::Collection::Counters,
                            IMPORTS,
                            &base.next_id(IMPORTS),
                        )?;
                        plan.event(
                            EventKind::StateImported,
                            &actor,
                            json!({"environment": *environment, "drop": drop, "summary": summary}),
                            vec![],
                        );
                    }
                    Ok((plan, summary, changed))
                })
                .await?
            };
            let (plan, summary, changed) = prepared;
            if dry_run || !changed {
                return Ok(report(summary, changed));
            }
            let plan = Mutex::new(Some(plan));
            let decided = self
                .write_loaded(|state, now| {
                    let plan = same_base(state, &base)
                        .then(|| plan.lock().ok().and_then(|mut p| p.take()))
                        .flatten();
                    Ok(match plan {
                        Some(plan) => plan.with_output(Some(report(summary.clone(), changed))),
                        None => Plan::new(now, None),
                    })
                })
                .await?;
            if let Some(report) = decided {
                return Ok(report);
            }
        }
        Err(ServiceError::Contention)
    }
}
