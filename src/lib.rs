//! Flagpole: a feature-toggle service. `run` starts the HTTP server and the background
//! workers of one replica; the binary and the tests both call it.
#![forbid(unsafe_code)]

pub mod auth;
pub mod config;
pub mod delivery;
pub mod domain;
pub mod error;
pub mod evaluation;
pub mod forwarding;
#[cfg(test)]
mod fuzz;
pub mod health;
pub mod http;
pub mod migration;
pub mod service;
pub mod snapshot;
pub mod state;
pub mod store;
pub mod streaming;
pub mod telemetry;
pub mod ui;
pub mod usage;

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use config::{Settings, StoreSettings};
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
pub async fn open_store(settings: &StoreSettings) -> Result<Store, StoreError> {
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
    let store = open_store(&settings.store)
        .await?
        .with_stream_log_retention(store::stream_log::StreamLogRetention::from_settings(
            &settings.streaming,
        ));
    tracing::info!(backend = store.backend_name(), "store opened");
    let snapshot = Arc::new(Snapshot::new(store.clone()));
    let readiness = Arc::new(health::Readiness::new(
        snapshot.clone(),
        Duration::from_millis(settings.server.readiness_grace_ms),
    ));
    // What stops the server and the workers: the end of the drain, or a refused start-up
    // import (which stops at once: a replica that never loaded has no traffic to drain).
    let shutdown = CancellationToken::new();
    // An early error return stops whatever was already started.
    let _stop_on_return = shutdown.clone().drop_guard();
    let drainer = tokio::spawn(health::drain_then_stop(
        requested.clone(),
        readiness.clone(),
        Duration::from_millis(settings.server.shutdown_drain_ms),
        shutdown.clone(),
    ));
    let metrics = Arc::new(telemetry::metrics::Metrics::new(
        (settings.telemetry.prometheus_toggle_usage_series > 0)
            .then_some(settings.telemetry.prometheus_toggle_usage_series),
    ));
    let service = Service::new(store.clone(), snapshot.clone(), metrics.clone())
        .with_segment_limits(settings.segments.limits());
    let (announce, announcements) = watch::channel(Announcement::Unknown);
    let interval = Duration::from_millis(settings.replication.refresh_interval_ms);

    let mut workers = tokio::task::JoinSet::new();
    if let Store::Redis(redis) = &store {
        let (redis, shutdown) = (redis.clone(), shutdown.clone());
        workers.spawn(async move { redis.listen_for_versions(announce, shutdown).await });
    }
    let startup_import = match &settings.import.import_file {
        Some(path) => Some(
            service::startup::read_startup_import(path, settings.import.import_mode)
                .map_err(RunError::Import)?,
        ),
        None => None,
    };
    let loader = tokio::spawn(service::startup::load_and_seed(
        service.clone(),
        startup_import,
        interval,
        shutdown.clone(),
    ));

    workers.spawn(snapshot.clone().run_client_builder(shutdown.clone()));
    if settings.streaming.enabled {
        streaming::open_files::raise_open_files_limit();
    }
    let streams = streaming::StreamHub::new(
        snapshot.clone(),
        store.clone(),
        streaming::StreamLimits::from_settings(&settings.streaming),
        metrics.streams.clone(),
    );
    // Streams end when the drain is over (`shutdown`), or the graceful shutdown would wait
    // for them forever.
    workers.spawn(streams.clone().run(shutdown.clone()));
    let evaluator = Arc::new(evaluation::Evaluator::new(snapshot.clone()));
    workers.spawn(evaluator.clone().run(shutdown.clone()));

    if settings.delivery.enabled {
        let worker = delivery::DeliveryWorker::new(
            store.clone(),
            snapshot.clone(),
            metrics.clone(),
            delivery::WorkerSettings::from_settings(
                &settings.delivery,
                settings.server.public_url.as_ref(),
            ),
        )
        .map_err(RunError::Delivery)?;
        workers.spawn(Arc::new(worker).run(shutdown.clone()));
    }

    let usage = Arc::new(usage::UsageRecorder::new(store.usage(), metrics.clone()));
    let known = snapshot.clone();
    usage.count_hours_only_for(Arc::new(move |name| {
        // Until the configuration is loaded every name counts (nothing is known to be made up).
        !known.is_ready()
            || known
                .peek(|state| state.features.contains_key(name) || state.archive.contains_key(name))
    }));
    // The service re-seeds a store found empty and times the checks (`RefreshHooks`).
    workers.spawn(snapshot.clone().keep_fresh(
        service.clone(),
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
        Duration::from_millis(settings.usage.metrics_flush_interval_ms),
        usage_stop.clone(),
    ));

    let auth = Arc::new(
        auth::Authenticator::new(
            &settings.auth,
            settings.server.public_url.as_ref(),
            snapshot.clone(),
        )
        .map_err(RunError::Settings)?,
    );
    let shared_buckets = match &store {
        Store::Redis(redis) => Some(redis.rate_buckets()),
        Store::Embedded(_) => None,
    };
    let limiter = Arc::new(auth::rate_limit::RateLimiter::new(
        &settings.auth,
        shared_buckets,
    ));
    workers.spawn(limiter.clone().run_sync(shutdown.clone()));
    let forwarding = match &store {
        Store::Redis(redis) if settings.replication.forward_writes => {
            let first_url = settings.store.redis_url.as_deref().unwrap_or_default();
            let first_url = first_url.split(',').next().unwrap_or_default();
            let url = forwarding::address::advertised_url(listener.local_addr()?, first_url).await;
            let forwarding = Arc::new(
                forwarding::WriteForwarding::new(
                    url,
                    announcements.clone(),
                    Duration::from_millis(settings.server.request_timeout_ms),
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
        Store::Embedded(_) if settings.replication.forward_writes => {
            tracing::warn!("--forward-writes has no effect with the embedded store (one replica)");
            None
        }
        _ => None,
    };
    let state = AppState::new(state::AppStateParts {
        auth,
        limiter,
        service,
        snapshot,
        readiness,
        metrics,
        usage,
        forwarding,
        streams,
        fetch_mode_header: settings.streaming.fetch_mode_header,
        evaluator,
        trust_proxy: settings.server.trust_proxy,
        edge: state::EdgeSettings::from_settings(&settings.server, &settings.telemetry),
    });
    let write_timeout = Duration::from_millis(settings.server.write_timeout_ms);
    // Streams on connections of their own, unless a layer applies to the client routes or
    // there are none to serve.
    let streams_first =
        (settings.streaming.enabled && state.edge.client_routes_unlayered()).then(|| {
            http::client::StreamsFirst::new(
                Arc::new(http::client::ClientApi::from_state(&state)),
                shutdown.clone(),
            )
        });
    let app = http::app(state);
    tracing::info!(address = %listener.local_addr()?, "listening");
    let listener = http::listener::ServerListener::spawn(
        listener,
        write_timeout,
        streams_first,
        shutdown.clone(),
    )?;
    let stream_tasks = listener.stream_tasks();
    // `tap_io` (with nothing to do) is what gives a listener's connections their peer address
    // (`Connected`), which `ConnectedPolls` puts in requests as `ConnectInfo<SocketAddr>`.
    let listener = axum::serve::ListenerExt::tap_io(listener, |_| {});
    let served = axum::serve(listener, app.connected())
        .with_graceful_shutdown(shutdown.clone().cancelled_owned())
        .await;
    shutdown.cancel();
    // The streams served outside hyper were ended with the others; let them say farewell.
    stream_tasks.close();
    stream_tasks.wait().await;
    usage_stop.cancel();
    let _ = flusher.await;
    while workers.join_next().await.is_some() {}
    let _ = drainer.await;
    if let Ok(Err(refused)) = loader.await {
        return Err(RunError::Import(refused));
    }
    Ok(served?)
}
