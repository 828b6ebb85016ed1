//! Flagpole: a feature-toggle service. `run` starts the HTTP server and the background
//! workers of one replica; the binary and the tests both call it.
#![forbid(unsafe_code)]

pub mod auth;
pub mod config;
pub mod delivery;
pub mod domain;
pub mod error;
pub mod forwarding;
#[cfg(test)]
mod fuzz;
pub mod health;
pub mod http;
pub mod service;
pub mod snapshot;
pub mod state;
pub mod store;
pub mod telemetry;
pub mod usage;

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use config::Settings;
use service::import::StartupImport;
use service::Service;
use snapshot::Snapshot;
use state::AppState;
use store::{embedded::EmbeddedStore, redis::RedisStore, Announcement, Store, StoreError};

/// Why the service could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot open the store: {0}")]
    Store(#[from] StoreError),
    #[error("server failed: {0}")]
    Serve(#[from] std::io::Error),
    /// A setting is unusable.
    #[error("{0}")]
    Settings(String),
    /// The delivery worker cannot start.
    #[error("{0}")]
    Delivery(String),
    /// The start-up import cannot be read or the store's configuration refuses it.
    #[error("{0}")]
    Import(String),
}

/// Opens the store the settings name.
pub async fn open_store(settings: &Settings) -> Result<Store, StoreError> {
    // An empty FLAGPOLE_REDIS_URL (common in templated environments) means "not set".
    Ok(
        match settings
            .redis_url
            .as_deref()
            .filter(|url| !url.trim().is_empty())
        {
            Some(url) => {
                let options = store::redis_conn::RedisOptions::from_settings(settings, url)
                    .map_err(StoreError::Unavailable)?;
                Store::Redis(RedisStore::connect(&options, &settings.key_prefix).await?)
            }
            None => Store::Embedded(
                EmbeddedStore::open_with_cache(&settings.data_dir, settings.embedded_cache_mib)
                    .await?,
            ),
        },
    )
}

/// Runs one replica on `listener` until `requested` is cancelled; then fails readiness, keeps
/// serving for the drain period (`--shutdown-drain-ms`) and stops gracefully: in-flight
/// requests and deliveries finish, client usage is flushed.
pub async fn run(
    settings: Settings,
    listener: TcpListener,
    requested: CancellationToken,
) -> Result<(), RunError> {
    settings.check().map_err(RunError::Settings)?;
    let store = open_store(&settings).await?;
    tracing::info!(backend = store.backend_name(), "store opened");
    let snapshot = Arc::new(Snapshot::new(store.clone()));
    let readiness = Arc::new(health::Readiness::new(
        snapshot.clone(),
        Duration::from_millis(settings.readiness_grace_ms),
    ));
    // What stops the server and the workers: the end of the drain, or a refused start-up
    // import (which stops at once: a replica that never loaded has no traffic to drain).
    let shutdown = CancellationToken::new();
    // An early error return stops whatever was already started.
    let _stop_on_return = shutdown.clone().drop_guard();
    let drainer = tokio::spawn(health::drain_then_stop(
        requested.clone(),
        readiness.clone(),
        Duration::from_millis(settings.shutdown_drain_ms),
        shutdown.clone(),
    ));
    let metrics = Arc::new(telemetry::metrics::Metrics::new(
        (settings.prometheus_toggle_usage_series > 0)
            .then_some(settings.prometheus_toggle_usage_series),
    ));
    let service = Service::new(store.clone(), snapshot.clone(), metrics.clone());
    let (announce, announcements) = watch::channel(Announcement::Unknown);
    let interval = Duration::from_millis(settings.refresh_interval_ms);

    let mut workers = tokio::task::JoinSet::new();
    if let Store::Redis(redis) = &store {
        let (redis, shutdown) = (redis.clone(), shutdown.clone());
        workers.spawn(async move { redis.listen_for_versions(announce, shutdown).await });
    }
    let startup_import = match &settings.import_file {
        Some(path) => Some(read_startup_import(path, settings.import_mode)?),
        None => None,
    };
    let loader = tokio::spawn(load_and_seed(
        service.clone(),
        snapshot.clone(),
        startup_import,
        interval,
        shutdown.clone(),
    ));

    workers.spawn(snapshot.clone().run_client_builder(shutdown.clone()));

    if settings.delivery {
        let worker = delivery::DeliveryWorker::new(
            store.clone(),
            snapshot.clone(),
            metrics.clone(),
            delivery::DeliverySettings::from_settings(&settings),
        )
        .map_err(RunError::Delivery)?;
        workers.spawn(Arc::new(worker).run(shutdown.clone()));
    }

    let usage = Arc::new(usage::UsageRecorder::new(store.usage(), metrics.clone()));
    workers.spawn(keep_fresh(
        service.clone(),
        snapshot.clone(),
        metrics.clone(),
        announcements.clone(),
        interval,
        shutdown.clone(),
    ));
    // The last flush must come after the last request was answered: its own stop signal.
    let usage_stop = CancellationToken::new();
    workers.spawn(usage::flush::run_clock(shutdown.clone()));
    workers.spawn(usage::flush::run_trim(usage.clone(), shutdown.clone()));
    let flusher = tokio::spawn(usage::flush::run(
        usage.clone(),
        Duration::from_millis(settings.metrics_flush_interval_ms),
        usage_stop.clone(),
    ));

    let auth = Arc::new(
        auth::Authenticator::new(&settings, snapshot.clone()).map_err(RunError::Settings)?,
    );
    let shared_buckets = match &store {
        Store::Redis(redis) => Some(redis.rate_buckets()),
        Store::Embedded(_) => None,
    };
    let limiter = Arc::new(auth::rate_limit::RateLimiter::new(
        &settings,
        shared_buckets,
    ));
    workers.spawn(limiter.clone().run_sync(shutdown.clone()));
    let forwarding = match &store {
        Store::Redis(redis) if settings.forward_writes => {
            let first_url = settings.redis_url.as_deref().unwrap_or_default();
            let first_url = first_url.split(',').next().unwrap_or_default();
            let url = forwarding::address::advertised_url(listener.local_addr()?, first_url).await;
            let forwarding = Arc::new(
                forwarding::WriteForwarding::new(
                    url,
                    announcements.clone(),
                    Duration::from_millis(settings.request_timeout_ms),
                )
                .map_err(|e| RunError::Settings(format!("write forwarding: {e}")))?,
            );
            workers.spawn(forwarding.clone().run(
                redis.committer_lease(),
                readiness.clone(),
                requested.clone(),
                shutdown.clone(),
            ));
            Some(forwarding)
        }
        Store::Embedded(_) if settings.forward_writes => {
            tracing::warn!("--forward-writes has no effect with the embedded store (one replica)");
            None
        }
        _ => None,
    };
    let app = http::app(AppState::new(state::AppStateParts {
        auth,
        limiter,
        service,
        snapshot,
        readiness,
        metrics,
        usage,
        forwarding,
        trust_proxy: settings.trust_proxy,
        edge: state::EdgeSettings::from_settings(&settings),
    }));
    tracing::info!(address = %listener.local_addr()?, "listening");
    let served = axum::serve(
        listener,
        axum::ServiceExt::<axum::extract::Request>::into_make_service_with_connect_info::<
            std::net::SocketAddr,
        >(app),
    )
    .with_graceful_shutdown(shutdown.clone().cancelled_owned())
    .await;
    shutdown.cancel();
    usage_stop.cancel();
    let _ = flusher.await;
    while workers.join_next().await.is_some() {}
    let _ = drainer.await;
    if let Ok(Err(refused)) = loader.await {
        return Err(RunError::Import(refused));
    }
    Ok(served?)
}

/// Reads and parses the start-up document.
fn read_startup_import(
    path: &std::path::Path,
    mode: config::ImportMode,
) -> Result<StartupImport, RunError> {
    let shown = path.display();
    let bytes = std::fs::read(path)
        .map_err(|e| RunError::Import(format!("cannot read the import file {shown}: {e}")))?;
    let options = match mode {
        config::ImportMode::Keep => domain::import::ImportOptions {
            drop: false,
            keep: true,
        },
        config::ImportMode::Overwrite => domain::import::ImportOptions {
            drop: false,
            keep: false,
        },
        config::ImportMode::Drop => domain::import::ImportOptions {
            drop: true,
            keep: false,
        },
    };
    StartupImport::new(&bytes, &path.to_string_lossy(), options)
        .map_err(|e| RunError::Import(format!("the import file {shown}: {}", describe(&e))))
}

/// Keeps the snapshot fresh until `shutdown`: on every version announcement (Redis pub/sub)
/// naming a position the snapshot does not hold, and with a position check every `interval`
/// (the fallback when announcements are lost, and what finds a store that started another
/// history). A store found empty again (flushed, or restarted without persistence) gets its
/// built-ins back.
async fn keep_fresh(
    service: Service,
    snapshot: Arc<Snapshot>,
    metrics: Arc<telemetry::metrics::Metrics>,
    mut announcements: watch::Receiver<Announcement>,
    interval: Duration,
    shutdown: CancellationToken,
) {
    let mut failing = false;
    // Announcements keep coming under writes: the periodic check must not wait for a lull.
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The embedded store has no listener (nothing is ever announced); once the Redis listener
    // ends (at shutdown), only the periodic check runs.
    let mut listening = true;
    loop {
        let announced = tokio::select! {
            _ = shutdown.cancelled() => return,
            changed = announcements.changed(), if listening => match changed {
                Ok(()) => *announcements.borrow_and_update(),
                Err(_) => {
                    listening = false;
                    continue;
                }
            },
            _ = ticks.tick() => Announcement::Unknown,
        };
        let started = std::time::Instant::now();
        let checked = match announced {
            // A version a refresh or a commit of this replica already brought.
            Announcement::At(position) if snapshot.holds(position) => continue,
            // Announced, so the store moved: no need to ask it first.
            Announcement::At(position) => snapshot.refresh_to(position).await,
            Announcement::Unknown => snapshot.check().await,
        };
        metrics
            .usage
            .operation("snapshot_check", started.elapsed(), checked.as_ref().err());
        // Logged once per outage, not on every check.
        match checked {
            Err(e) => {
                if !failing {
                    tracing::warn!(error = %e, "snapshot refresh failed; serving the last snapshot");
                }
                failing = true;
                continue;
            }
            Ok(()) if failing => {
                tracing::info!(version = snapshot.state().version, "store reachable again");
                failing = false;
            }
            Ok(()) => {}
        }
        if snapshot.is_ready() && !service::is_seeded(&snapshot.state()) {
            if let Err(e) = service.seed_if_needed().await {
                tracing::warn!(error = %e, "re-seeding an empty store failed");
            }
        }
    }
}

/// First load of the snapshot and seeding of a new store, retried until the store answers.
/// Then the start-up import, if any, before the replica serves: a document the store's
/// configuration refuses stops the replica (`Err`, after cancelling `shutdown`).
async fn load_and_seed(
    service: Service,
    snapshot: Arc<Snapshot>,
    startup_import: Option<StartupImport>,
    retry: Duration,
    shutdown: CancellationToken,
) -> Result<(), String> {
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
                        service::ServiceError::Domain(e) => {
                            Some(format!("the start-up import was refused: {}", describe(&e)))
                        }
                        service::ServiceError::Internal(cause) => {
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

/// Every problem of a refusal, one per line with its path.
fn describe(error: &domain::DomainError) -> String {
    match error {
        domain::DomainError::Invalid(errors) => errors
            .0
            .iter()
            .map(|e| format!("\n  {}: {}", e.path, e.message))
            .collect(),
        other => other.to_string(),
    }
}
