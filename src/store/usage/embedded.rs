//! Usage in the embedded store: the same data as in Redis, in redb tables of the same file as
//! the configuration. A flush (minute and hour counters, registry) is one write transaction.

use std::collections::HashMap;
use std::sync::Arc;

use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition, WriteTransaction};
use serde::{Deserialize, Serialize};

use super::{
    hour_of, minute_of, AppMetadata, AppRecord, CountKey, Counts, Hour, InstanceRecord, Minute,
    PollRecord, RegistrationRecord, UsageBatch, COUNTS_RETENTION_MINUTES, HOURLY_RETENTION_HOURS,
    REGISTRY_RETENTION_MS,
};
use crate::store::redb_file::{failed, run_blocking};
use crate::store::StoreError;

/// (minute, toggle, app, kind `y`|`n`|`v`, variant or "") → count.
const COUNTS: TableDefinition<(u64, &str, &str, &str, &str), u64> =
    TableDefinition::new("usage_counts");
/// (hour, toggle, app, kind `y`|`n`|`v`, variant or "") → count: hour first, so the trim drops
/// old hours as one range, and one toggle's hour is one short range.
const HOURS: TableDefinition<(u64, &str, &str, &str, &str), u64> =
    TableDefinition::new("usage_hour_counts");
/// application → JSON `AppRow`.
const APPS: TableDefinition<&str, &str> = TableDefinition::new("usage_apps");
/// (application, instance) → JSON `InstanceRow`.
const INSTANCES: TableDefinition<(&str, &str), &str> = TableDefinition::new("usage_instances");
/// (application, toggle) → epoch milliseconds it was last reported.
const SEEN: TableDefinition<(&str, &str), i64> = TableDefinition::new("usage_seen_toggles");

fn corrupt(e: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(e.to_string())
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct AppRow {
    created_at: i64,
    last_seen: i64,
    strategies: Vec<String>,
    #[serde(default)]
    metadata: AppMetadata,
    metrics_count: u64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct InstanceRow {
    first_seen: i64,
    last_seen: i64,
    client_ip: Option<String>,
    registration: Option<RegistrationRecord>,
    poll: Option<PollRecord>,
}

/// Creates the usage tables (at open, so reads never meet a missing table).
pub(crate) fn create_tables(txn: &WriteTransaction) -> Result<(), StoreError> {
    txn.open_table(COUNTS).map_err(failed)?;
    txn.open_table(HOURS).map_err(failed)?;
    txn.open_table(APPS).map_err(failed)?;
    txn.open_table(INSTANCES).map_err(failed)?;
    txn.open_table(SEEN).map_err(failed)?;
    Ok(())
}

/// The usage side of the embedded backend.
#[derive(Clone)]
pub struct EmbeddedUsage {
    db: Arc<Database>,
}

impl EmbeddedUsage {
    /// The usage side over the backend's database.
    pub(crate) fn new(db: Arc<Database>) -> Self {
        Self { db }
    }

    async fn blocking<T, F>(&self, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Database) -> Result<T, StoreError> + Send + 'static,
    {
        run_blocking(&self.db, work).await
    }

    pub(super) async fn flush(&self, batch: &UsageBatch) -> Result<(), StoreError> {
        let batch = batch.clone();
        self.blocking(move |db| {
            let txn = db.begin_write().map_err(failed)?;
            {
                let mut counts = txn.open_table(COUNTS).map_err(failed)?;
                let mut add = |key: (u64, &str, &str, &str, &str), n: u64| {
                    let old = counts.get(key).map_err(failed)?.map_or(0, |v| v.value());
                    counts
                        .insert(key, old.saturating_add(n))
                        .map(|_| ())
                        .map_err(failed)
                };
                for (minute, entries) in &batch.counts {
                    for (a, toggles) in entries {
                        for (t, c) in toggles {
                            if c.yes > 0 {
                                add((*minute, t, a, "y", ""), c.yes)?;
                            }
                            if c.no > 0 {
                                add((*minute, t, a, "n", ""), c.no)?;
                            }
                            for (variant, n) in &c.variants {
                                add((*minute, t, a, "v", variant), *n)?;
                            }
                        }
                    }
                }
                // The same counts per hour, in the same transaction.
                let mut hours = txn.open_table(HOURS).map_err(failed)?;
                let mut add = |key: (u64, &str, &str, &str, &str), n: u64| {
                    let old = hours.get(key).map_err(failed)?.map_or(0, |v| v.value());
                    hours
                        .insert(key, old.saturating_add(n))
                        .map(|_| ())
                        .map_err(failed)
                };
                for (hour, toggles) in &batch.hourly() {
                    for (t, apps) in toggles {
                        for (a, c) in apps {
                            if c.yes > 0 {
                                add((*hour, t, a, "y", ""), c.yes)?;
                            }
                            if c.no > 0 {
                                add((*hour, t, a, "n", ""), c.no)?;
                            }
                            for (variant, n) in &c.variants {
                                add((*hour, t, a, "v", variant), *n)?;
                            }
                        }
                    }
                }
                let mut apps = txn.open_table(APPS).map_err(failed)?;
                let mut instances = txn.open_table(INSTANCES).map_err(failed)?;
                let mut seen = txn.open_table(SEEN).map_err(failed)?;
                for (name, activity) in &batch.apps {
                    let mut row: AppRow = match apps.get(name.as_str()).map_err(failed)? {
                        Some(raw) => serde_json::from_str(raw.value()).map_err(corrupt)?,
                        None => AppRow {
                            created_at: activity.first_seen(),
                            ..AppRow::default()
                        },
                    };
                    row.last_seen = row.last_seen.max(activity.last_seen);
                    if let Some(strategies) = &activity.strategies {
                        row.strategies = strategies.clone();
                    }
                    row.metrics_count = row.metrics_count.saturating_add(activity.metrics_count);
                    apps.insert(
                        name.as_str(),
                        serde_json::to_string(&row).map_err(corrupt)?.as_str(),
                    )
                    .map_err(failed)?;
                    for (id, instance) in &activity.instances {
                        let key = (name.as_str(), id.as_str());
                        let mut row: InstanceRow = match instances.get(key).map_err(failed)? {
                            Some(raw) => serde_json::from_str(raw.value()).map_err(corrupt)?,
                            None => InstanceRow {
                                first_seen: instance.first_seen,
                                ..InstanceRow::default()
                            },
                        };
                        row.last_seen = row.last_seen.max(instance.last_seen);
                        if instance.client_ip.is_some() {
                            row.client_ip = instance.client_ip.clone();
                        }
                        if instance.registration.is_some() {
                            row.registration = instance.registration.clone();
                        }
                        if instance.poll.is_some() {
                            row.poll = instance.poll.clone();
                        }
                        instances
                            .insert(key, serde_json::to_string(&row).map_err(corrupt)?.as_str())
                            .map_err(failed)?;
                    }
                    for (toggle, at) in &activity.toggles {
                        let key = (name.as_str(), toggle.as_str());
                        let old = seen
                            .get(key)
                            .map_err(failed)?
                            .map_or(i64::MIN, |v| v.value());
                        seen.insert(key, old.max(*at)).map_err(failed)?;
                    }
                }
            }
            txn.commit().map_err(failed)
        })
        .await
    }

    pub(super) async fn trim(&self, now_ms: i64) -> Result<(), StoreError> {
        self.blocking(move |db| {
            let cutoff = now_ms - REGISTRY_RETENTION_MS;
            let oldest_minute = minute_of(now_ms).saturating_sub(COUNTS_RETENTION_MINUTES + 1);
            let txn = db.begin_write().map_err(failed)?;
            {
                let mut counts = txn.open_table(COUNTS).map_err(failed)?;
                counts
                    .retain_in(..(oldest_minute, "", "", "", ""), |_, _| false)
                    .map_err(failed)?;
                // An hour is kept while it ended less than the retention ago.
                let oldest_hour = hour_of(minute_of(now_ms)).saturating_sub(HOURLY_RETENTION_HOURS);
                txn.open_table(HOURS)
                    .map_err(failed)?
                    .retain_in(..(oldest_hour, "", "", "", ""), |_, _| false)
                    .map_err(failed)?;
                let mut apps = txn.open_table(APPS).map_err(failed)?;
                let mut gone = std::collections::HashSet::new();
                for row in apps.iter().map_err(failed)? {
                    let (name, raw) = row.map_err(failed)?;
                    let app: AppRow = serde_json::from_str(raw.value()).map_err(corrupt)?;
                    if app.last_seen < cutoff {
                        gone.insert(name.value().to_string());
                    }
                }
                for name in &gone {
                    apps.remove(name.as_str()).map_err(failed)?;
                }
                let mut instances = txn.open_table(INSTANCES).map_err(failed)?;
                instances
                    .retain(|(app, _), raw| {
                        let last_seen = serde_json::from_str::<InstanceRow>(raw)
                            .map_or(i64::MIN, |row| row.last_seen);
                        last_seen >= cutoff && !gone.contains(app)
                    })
                    .map_err(failed)?;
                let mut seen = txn.open_table(SEEN).map_err(failed)?;
                seen.retain(|(app, _), at| at >= cutoff && !gone.contains(app))
                    .map_err(failed)?;
            }
            txn.commit().map_err(failed)
        })
        .await
    }

    pub(super) async fn counts(
        &self,
        from: Minute,
        to: Minute,
    ) -> Result<Vec<(Minute, HashMap<CountKey, Counts>)>, StoreError> {
        self.blocking(move |db| {
            let txn = db.begin_read().map_err(failed)?;
            let table = txn.open_table(COUNTS).map_err(failed)?;
            let mut out: Vec<(Minute, HashMap<CountKey, Counts>)> = Vec::new();
            let end = to.saturating_add(1);
            for row in table
                .range((from, "", "", "", "")..(end, "", "", "", ""))
                .map_err(failed)?
            {
                let (key, n) = row.map_err(failed)?;
                let (minute, toggle, app, kind, variant) = key.value();
                if out.last().is_none_or(|(m, _)| *m != minute) {
                    out.push((minute, HashMap::new()));
                }
                let Some((_, counts)) = out.last_mut() else {
                    continue;
                };
                let slot = counts
                    .entry(CountKey {
                        toggle: toggle.to_string(),
                        app: app.to_string(),
                    })
                    .or_default();
                let total = match kind {
                    "y" => &mut slot.yes,
                    "n" => &mut slot.no,
                    _ => slot.variants.entry(variant.to_string()).or_default(),
                };
                *total = total.saturating_add(n.value());
            }
            Ok(out)
        })
        .await
    }

    pub(super) async fn hourly_counts(
        &self,
        toggle: &str,
        from: Hour,
        to: Hour,
    ) -> Result<Vec<(Hour, HashMap<String, Counts>)>, StoreError> {
        let toggle = toggle.to_string();
        self.blocking(move |db| {
            let txn = db.begin_read().map_err(failed)?;
            let table = txn.open_table(HOURS).map_err(failed)?;
            let mut out = Vec::new();
            for hour in from..=to {
                let mut apps: HashMap<String, Counts> = HashMap::new();
                for row in table
                    .range((hour, toggle.as_str(), "", "", "")..)
                    .map_err(failed)?
                {
                    let (key, n) = row.map_err(failed)?;
                    let (row_hour, row_toggle, app, kind, variant) = key.value();
                    if row_hour != hour || row_toggle != toggle {
                        break;
                    }
                    let slot = apps.entry(app.to_string()).or_default();
                    let total = match kind {
                        "y" => &mut slot.yes,
                        "n" => &mut slot.no,
                        _ => slot.variants.entry(variant.to_string()).or_default(),
                    };
                    *total = total.saturating_add(n.value());
                }
                if !apps.is_empty() {
                    out.push((hour, apps));
                }
            }
            Ok(out)
        })
        .await
    }

    pub(super) async fn applications(&self, since_ms: i64) -> Result<Vec<AppRecord>, StoreError> {
        self.blocking(move |db| {
            let txn = db.begin_read().map_err(failed)?;
            let table = txn.open_table(APPS).map_err(failed)?;
            let mut out = Vec::new();
            for row in table.iter().map_err(failed)? {
                let (name, raw) = row.map_err(failed)?;
                let record = app_record(name.value(), raw.value())?;
                if record.last_seen >= since_ms {
                    out.push(record);
                }
            }
            Ok(out)
        })
        .await
    }

    pub(super) async fn application(
        &self,
        name: &str,
        since_ms: i64,
    ) -> Result<Option<AppRecord>, StoreError> {
        let name = name.to_string();
        self.blocking(move |db| {
            let txn = db.begin_read().map_err(failed)?;
            let table = txn.open_table(APPS).map_err(failed)?;
            let Some(raw) = table.get(name.as_str()).map_err(failed)? else {
                return Ok(None);
            };
            let record = app_record(&name, raw.value())?;
            Ok((record.last_seen >= since_ms).then_some(record))
        })
        .await
    }

    pub(super) async fn instances(
        &self,
        apps: &[String],
        since_ms: i64,
    ) -> Result<Vec<Vec<InstanceRecord>>, StoreError> {
        let apps = apps.to_vec();
        self.blocking(move |db| {
            let txn = db.begin_read().map_err(failed)?;
            let table = txn.open_table(INSTANCES).map_err(failed)?;
            let mut all = Vec::with_capacity(apps.len());
            for app in &apps {
                let mut out = Vec::new();
                for row in table.range((app.as_str(), "")..).map_err(failed)? {
                    let (key, raw) = row.map_err(failed)?;
                    let (row_app, id) = key.value();
                    if row_app != app {
                        break;
                    }
                    let row: InstanceRow = serde_json::from_str(raw.value()).map_err(corrupt)?;
                    if row.last_seen >= since_ms {
                        out.push(InstanceRecord {
                            instance_id: id.to_string(),
                            first_seen: row.first_seen,
                            last_seen: row.last_seen,
                            client_ip: row.client_ip,
                            registration: row.registration,
                            poll: row.poll,
                        });
                    }
                }
                out.sort_by_key(|i| std::cmp::Reverse(i.last_seen));
                all.push(out);
            }
            Ok(all)
        })
        .await
    }

    pub(super) async fn seen_toggles(
        &self,
        apps: &[String],
        since_ms: i64,
    ) -> Result<Vec<Vec<String>>, StoreError> {
        let apps = apps.to_vec();
        self.blocking(move |db| {
            let txn = db.begin_read().map_err(failed)?;
            let table = txn.open_table(SEEN).map_err(failed)?;
            let mut all = Vec::with_capacity(apps.len());
            for app in &apps {
                let mut out = Vec::new();
                for row in table.range((app.as_str(), "")..).map_err(failed)? {
                    let (key, at) = row.map_err(failed)?;
                    let (row_app, toggle) = key.value();
                    if row_app != app {
                        break;
                    }
                    if at.value() >= since_ms {
                        out.push(toggle.to_string());
                    }
                }
                all.push(out);
            }
            Ok(all)
        })
        .await
    }

    pub(super) async fn set_metadata(
        &self,
        app: &str,
        metadata: &AppMetadata,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        let (app, metadata) = (app.to_string(), metadata.clone());
        self.blocking(move |db| {
            let txn = db.begin_write().map_err(failed)?;
            {
                let mut apps = txn.open_table(APPS).map_err(failed)?;
                let mut row: AppRow = match apps.get(app.as_str()).map_err(failed)? {
                    Some(raw) => serde_json::from_str(raw.value()).map_err(corrupt)?,
                    None => AppRow {
                        created_at: now_ms,
                        ..AppRow::default()
                    },
                };
                row.metadata = metadata;
                row.last_seen = row.last_seen.max(now_ms);
                apps.insert(
                    app.as_str(),
                    serde_json::to_string(&row).map_err(corrupt)?.as_str(),
                )
                .map_err(failed)?;
            }
            txn.commit().map_err(failed)
        })
        .await
    }

    pub(super) async fn delete_application(&self, app: &str) -> Result<(), StoreError> {
        let app = app.to_string();
        self.blocking(move |db| {
            let txn = db.begin_write().map_err(failed)?;
            {
                txn.open_table(APPS)
                    .map_err(failed)?
                    .remove(app.as_str())
                    .map_err(failed)?;
                txn.open_table(INSTANCES)
                    .map_err(failed)?
                    .retain(|(a, _), _| a != app)
                    .map_err(failed)?;
                txn.open_table(SEEN)
                    .map_err(failed)?
                    .retain(|(a, _), _| a != app)
                    .map_err(failed)?;
            }
            txn.commit().map_err(failed)
        })
        .await
    }
}

fn app_record(name: &str, raw: &str) -> Result<AppRecord, StoreError> {
    let row: AppRow = serde_json::from_str(raw).map_err(corrupt)?;
    Ok(AppRecord {
        name: name.to_string(),
        created_at: row.created_at,
        last_seen: row.last_seen,
        strategies: row.strategies,
        metadata: row.metadata,
        metrics_count: row.metrics_count,
    })
}
