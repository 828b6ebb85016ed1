//! The admin metrics views (spec §2.7, §4.3; API-FACTS §12), read from the usage store.
//!
//! `lastHour` covers the current minute and the 60 before it, `lastMinute` the current and the
//! previous minute: each view is guaranteed to include everything reported in its period (the
//! counters are per minute), and may include up to a minute more.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, TimeZone, Utc};
use serde::Serialize;

use super::{now_ms, UsageRecorder};
use crate::domain::config_state::ConfigState;
use crate::domain::filter::FeatureFilter;
use crate::snapshot::{no_match, DocumentForm, Snapshot};
use crate::store::usage::{
    minute_of, AppRecord, Counts, InstanceRecord, UsageStore, REGISTRY_RETENTION_MS,
};
use crate::store::StoreError;

/// Default of `staleAfterSeconds`: an instance that has not polled for this long is "not seen
/// recently" (SDKs poll every 15 s by default).
pub const DEFAULT_STALE_AFTER_SECONDS: u64 = 120;

/// yes/no counts of one toggle over one period.
#[derive(Debug, Default, Clone, Copy, Serialize, PartialEq, Eq, utoipa::ToSchema)]
pub struct YesNo {
    pub yes: u64,
    pub no: u64,
}

/// `GET /api/admin/metrics/feature-toggles`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToggleMetrics {
    pub last_hour: BTreeMap<String, YesNo>,
    pub last_minute: BTreeMap<String, YesNo>,
}

/// Counts of one toggle over one period, with the variant breakdown.
#[derive(Debug, Default, Serialize, utoipa::ToSchema)]
pub struct PeriodCounts {
    pub yes: u64,
    pub no: u64,
    pub variants: BTreeMap<String, u64>,
}

impl PeriodCounts {
    fn add(&mut self, counts: &Counts) {
        self.yes = self.yes.saturating_add(counts.yes);
        self.no = self.no.saturating_add(counts.no);
        for (variant, n) in &counts.variants {
            let total = self.variants.entry(variant.clone()).or_default();
            *total = total.saturating_add(*n);
        }
    }
}

/// One application's counts of a toggle.
#[derive(Debug, Default, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AppToggleMetrics {
    pub app_name: String,
    pub last_hour: PeriodCounts,
    pub last_minute: PeriodCounts,
}

/// `GET /api/admin/metrics/feature-toggles/:name`.
#[derive(Debug, Default, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToggleDetail {
    pub name: String,
    pub last_hour: PeriodCounts,
    pub last_minute: PeriodCounts,
    pub applications: Vec<AppToggleMetrics>,
}

/// An item of `GET /api/admin/metrics/seen-toggles`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SeenToggles {
    pub app_name: String,
    pub seen_toggles: Vec<String>,
    pub metrics_count: u64,
}

/// An application in listings (spec §2.7 list item and seen-apps item, plus the reference's
/// fields).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationItem {
    pub app_name: String,
    pub strategies: Vec<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub description: Option<String>,
    pub url: Option<String>,
    pub color: Option<String>,
    pub icon: Option<String>,
    pub links: ApplicationLinks,
}

/// Where an application's details are.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationLinks {
    pub app_details: String,
}

/// Which configuration an instance holds.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstanceConfiguration {
    pub etag: String,
    pub version: u64,
    pub last_polled: DateTime<Utc>,
    /// Whether it is what the instance would be sent now.
    pub current: bool,
}

/// An instance in application details.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstanceView {
    pub instance_id: String,
    pub client_ip: Option<String>,
    pub last_seen: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
    pub sdk_version: Option<String>,
    pub started: Option<DateTime<Utc>>,
    pub interval: Option<u64>,
    pub configuration: Option<InstanceConfiguration>,
}

/// The spec's strategies entry of application details.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AppStrategies {
    pub app_name: String,
    pub strategies: Vec<String>,
}

/// `GET /api/admin/metrics/applications/:app`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationDetails {
    pub app_name: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub description: Option<String>,
    pub url: Option<String>,
    pub color: Option<String>,
    pub icon: Option<String>,
    pub strategies: Vec<AppStrategies>,
    pub instances: Vec<InstanceView>,
    pub seen_toggles: Vec<String>,
    pub links: serde_json::Value,
}

/// The oldest configuration an application's instances still hold.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct OldestConfiguration {
    pub version: u64,
    pub etag: String,
    pub instances: u64,
}

/// One application of `GET /api/admin/metrics/config-versions`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AppConfigVersions {
    pub app_name: String,
    /// Instances that polled within the registry's two days.
    pub instances: u64,
    /// Polled recently and hold what they would be sent now.
    pub current: u64,
    /// Polled recently and hold an older configuration.
    pub behind: u64,
    /// Last polled longer ago than the threshold.
    pub not_seen_recently: u64,
    pub oldest_version_in_use: Option<OldestConfiguration>,
}

/// `GET /api/admin/metrics/config-versions`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigVersions {
    /// The configuration version this replica serves.
    pub version: u64,
    pub stale_after_seconds: u64,
    pub applications: Vec<AppConfigVersions>,
}

/// `name` encoded as one URL path segment.
fn path_segment(name: &str) -> String {
    percent_encoding::utf8_percent_encode(name, percent_encoding::NON_ALPHANUMERIC).to_string()
}

fn time(ms: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(ms).single().unwrap_or_default()
}

fn registry_since() -> i64 {
    now_ms() - REGISTRY_RETENTION_MS
}

/// The minutes of the views: (first of the hour, first of the minute, now).
fn minutes() -> (u64, u64, u64) {
    let now = minute_of(now_ms());
    (now.saturating_sub(60), now.saturating_sub(1), now)
}

/// yes/no per toggle over the last hour and minute; every active toggle is listed.
pub async fn toggle_metrics(
    store: &UsageStore,
    state: &ConfigState,
) -> Result<ToggleMetrics, StoreError> {
    let (hour, minute, now) = minutes();
    let rows = store.counts(hour, now).await?;
    let zero: BTreeMap<String, YesNo> = state
        .features
        .keys()
        .map(|name| (name.clone(), YesNo::default()))
        .collect();
    let mut view = ToggleMetrics {
        last_hour: zero.clone(),
        last_minute: zero,
    };
    for (m, counts) in &rows {
        for (key, c) in counts {
            let add = |map: &mut BTreeMap<String, YesNo>| {
                let slot = map.entry(key.toggle.clone()).or_default();
                slot.yes = slot.yes.saturating_add(c.yes);
                slot.no = slot.no.saturating_add(c.no);
            };
            add(&mut view.last_hour);
            if *m >= minute {
                add(&mut view.last_minute);
            }
        }
    }
    Ok(view)
}

/// One toggle's counts, in total and per application.
pub async fn toggle_detail(store: &UsageStore, name: &str) -> Result<ToggleDetail, StoreError> {
    let (hour, minute, now) = minutes();
    let rows = store.counts(hour, now).await?;
    let mut detail = ToggleDetail {
        name: name.to_string(),
        ..ToggleDetail::default()
    };
    let mut apps: BTreeMap<String, AppToggleMetrics> = BTreeMap::new();
    for (m, counts) in &rows {
        for (key, c) in counts.iter().filter(|(k, _)| k.toggle == name) {
            let app = apps
                .entry(key.app.clone())
                .or_insert_with(|| AppToggleMetrics {
                    app_name: key.app.clone(),
                    ..AppToggleMetrics::default()
                });
            detail.last_hour.add(c);
            app.last_hour.add(c);
            if *m >= minute {
                detail.last_minute.add(c);
                app.last_minute.add(c);
            }
        }
    }
    detail.applications = apps.into_values().collect();
    Ok(detail)
}

/// The toggles each application reported, with its evaluation count.
pub async fn seen_toggles(store: &UsageStore) -> Result<Vec<SeenToggles>, StoreError> {
    let since = registry_since();
    let apps = store.applications(since).await?;
    let toggles = store.seen_toggles(&names(&apps), since).await?;
    Ok(apps
        .into_iter()
        .zip(toggles)
        .map(|(app, seen_toggles)| SeenToggles {
            seen_toggles,
            app_name: app.name,
            metrics_count: app.metrics_count,
        })
        .collect())
}

fn names(apps: &[AppRecord]) -> Vec<String> {
    apps.iter().map(|a| a.name.clone()).collect()
}

fn application_item(app: &AppRecord) -> ApplicationItem {
    ApplicationItem {
        app_name: app.name.clone(),
        strategies: app.strategies.clone(),
        created_at: time(app.created_at),
        updated_at: time(app.last_seen),
        description: app.metadata.description.clone(),
        url: app.metadata.url.clone(),
        color: app.metadata.color.clone(),
        icon: app.metadata.icon.clone(),
        links: ApplicationLinks {
            app_details: format!("/api/admin/applications/{}", path_segment(&app.name)),
        },
    }
}

/// Applications seen in the last two days, optionally only those implementing `strategy`.
pub async fn applications(
    store: &UsageStore,
    strategy: Option<&str>,
) -> Result<Vec<ApplicationItem>, StoreError> {
    Ok(store
        .applications(registry_since())
        .await?
        .iter()
        .filter(|app| strategy.is_none_or(|s| app.strategies.iter().any(|x| x == s)))
        .map(application_item)
        .collect())
}

/// Toggle name → the applications that reported it.
pub async fn seen_apps(
    store: &UsageStore,
) -> Result<BTreeMap<String, Vec<ApplicationItem>>, StoreError> {
    let since = registry_since();
    let mut out: BTreeMap<String, Vec<ApplicationItem>> = BTreeMap::new();
    let apps = store.applications(since).await?;
    let toggles = store.seen_toggles(&names(&apps), since).await?;
    for (app, toggles) in apps.iter().zip(toggles) {
        let item = application_item(app);
        for toggle in toggles {
            out.entry(toggle).or_default().push(item.clone());
        }
    }
    Ok(out)
}

/// The poll queries (filters) of `instances`, to resolve into the ETags served now.
pub fn poll_queries<'a>(instances: impl IntoIterator<Item = &'a InstanceRecord>) -> Vec<String> {
    let mut queries: Vec<String> = instances
        .into_iter()
        .filter_map(|i| i.poll.as_ref().map(|p| p.query.clone()))
        .collect();
    queries.sort();
    queries.dedup();
    queries
}

/// The ETag each poll query (see [`poll_queries`]) is answered with now; queries the client
/// documents are not built for yet are left out.
pub async fn current_etags(snapshot: &Snapshot, queries: Vec<String>) -> HashMap<String, String> {
    let mut out = HashMap::with_capacity(queries.len());
    let state = snapshot.state();
    for query in queries {
        let Some(documents) = snapshot.client().documents(&poll_form(&query, &state)) else {
            continue;
        };
        let response = match FeatureFilter::of_poll_query(&query) {
            Some(filter) => match documents.response(&filter).await {
                Some(response) => response,
                None => continue,
            },
            None => no_match(),
        };
        if let Ok(etag) = response.etag.to_str() {
            out.insert(query, etag.to_string());
        }
    }
    out
}

/// The form parameters a poll of a form other than the default is recorded with (see
/// `http::client::features`): the first `environment` and `inlineSegmentConstraints`.
#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct PollForm {
    #[serde(default)]
    environment: Vec<String>,
    #[serde(default)]
    inline_segment_constraints: Vec<String>,
}

/// The document form a recorded poll query was answered in.
fn poll_form(query: &str, state: &ConfigState) -> DocumentForm {
    let form: PollForm = serde_html_form::from_str(query).unwrap_or_default();
    match form.environment.first() {
        Some(environment) => DocumentForm::requested(
            environment,
            form.inline_segment_constraints.iter().any(|v| v == "true"),
            state,
        ),
        None => DocumentForm::default(),
    }
}

/// Whether an instance's recorded configuration is what its query is answered with now
/// (`current_etags`: query → ETag served now).
fn is_current(instance: &InstanceRecord, current_etags: &HashMap<String, String>) -> bool {
    instance
        .poll
        .as_ref()
        .is_some_and(|p| current_etags.get(&p.query) == Some(&p.etag))
}

/// One application with its instances, or `None` if it is unknown.
pub async fn application(
    store: &UsageStore,
    name: &str,
) -> Result<Option<(AppRecord, Vec<InstanceRecord>, Vec<String>)>, StoreError> {
    let since = registry_since();
    let Some(app) = store.application(name, since).await? else {
        return Ok(None);
    };
    let key = [name.to_string()];
    let instances = store
        .instances(&key, since)
        .await?
        .pop()
        .unwrap_or_default();
    let toggles = store
        .seen_toggles(&key, since)
        .await?
        .pop()
        .unwrap_or_default();
    Ok(Some((app, instances, toggles)))
}

/// The details document of an application read by `application`.
pub fn application_details(
    app: AppRecord,
    instances: Vec<InstanceRecord>,
    seen_toggles: Vec<String>,
    current_etags: &HashMap<String, String>,
) -> ApplicationDetails {
    let instances = instances
        .into_iter()
        .map(|i| {
            let current = is_current(&i, current_etags);
            let registration = i.registration;
            InstanceView {
                configuration: i.poll.map(|p| InstanceConfiguration {
                    etag: p.etag,
                    version: p.version,
                    last_polled: time(p.at),
                    current,
                }),
                client_ip: i.client_ip,
                last_seen: time(i.last_seen),
                created_at: time(i.first_seen),
                sdk_version: registration.as_ref().and_then(|r| r.sdk_version.clone()),
                started: registration.as_ref().and_then(|r| r.started),
                interval: registration.as_ref().and_then(|r| r.interval),
                instance_id: i.instance_id,
            }
        })
        .collect();
    ApplicationDetails {
        links: serde_json::json!({
            "self": format!("/api/admin/applications/{}", path_segment(&app.name))
        }),
        strategies: vec![AppStrategies {
            app_name: app.name.clone(),
            strategies: app.strategies,
        }],
        created_at: time(app.created_at),
        updated_at: time(app.last_seen),
        description: app.metadata.description,
        url: app.metadata.url,
        color: app.metadata.color,
        icon: app.metadata.icon,
        app_name: app.name,
        instances,
        seen_toggles,
    }
}

/// Every application's instances, for the configuration summary.
pub async fn all_instances(
    store: &UsageStore,
) -> Result<Vec<(String, Vec<InstanceRecord>)>, StoreError> {
    let since = registry_since();
    let apps = names(&store.applications(since).await?);
    let instances = store.instances(&apps, since).await?;
    Ok(apps.into_iter().zip(instances).collect())
}

/// The configuration summary of every application (the admin view, and the Prometheus
/// gauges): [`config_versions`] over every instance, against what the snapshot serves now.
pub async fn current_config_versions(
    usage: &UsageRecorder,
    snapshot: &Snapshot,
    stale_after_seconds: u64,
) -> Result<ConfigVersions, StoreError> {
    let apps = usage
        .metrics
        .usage
        .timed("usage_read", all_instances(usage.store()))
        .await?;
    let etags = current_etags(
        snapshot,
        poll_queries(apps.iter().flat_map(|(_, i)| i.iter())),
    )
    .await;
    Ok(config_versions(
        &apps,
        &etags,
        snapshot.state().version,
        (stale_after_seconds * 1000) as i64,
    ))
}

/// Per application: how many instances hold the configuration they would be sent now, how
/// many are behind, how many have not polled within `stale_after_ms`, and the oldest
/// configuration still held.
pub fn config_versions(
    apps: &[(String, Vec<InstanceRecord>)],
    current_etags: &HashMap<String, String>,
    version: u64,
    stale_after_ms: i64,
) -> ConfigVersions {
    let cutoff = now_ms() - stale_after_ms;
    let applications = apps
        .iter()
        .filter_map(|(name, instances)| {
            let mut summary = AppConfigVersions {
                app_name: name.clone(),
                instances: 0,
                current: 0,
                behind: 0,
                not_seen_recently: 0,
                oldest_version_in_use: None,
            };
            for instance in instances {
                let Some(poll) = &instance.poll else { continue };
                summary.instances += 1;
                if poll.at < cutoff {
                    summary.not_seen_recently += 1;
                    continue;
                }
                if is_current(instance, current_etags) {
                    summary.current += 1;
                } else {
                    summary.behind += 1;
                }
                // The oldest version, with every instance on it (filtered polls of one version
                // have different ETags; the first seen is named).
                match &mut summary.oldest_version_in_use {
                    Some(oldest) if oldest.version < poll.version => {}
                    Some(oldest) if oldest.version == poll.version => oldest.instances += 1,
                    slot => {
                        *slot = Some(OldestConfiguration {
                            version: poll.version,
                            etag: poll.etag.clone(),
                            instances: 1,
                        })
                    }
                }
            }
            (summary.instances > 0).then_some(summary)
        })
        .collect();
    ConfigVersions {
        version,
        stale_after_seconds: (stale_after_ms / 1000) as u64,
        applications,
    }
}
