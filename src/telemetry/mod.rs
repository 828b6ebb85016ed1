//! Logging setup (text or JSON lines, filtered by `RUST_LOG`, default `info`), OpenTelemetry
//! traces and the Prometheus metrics.

pub mod delivery_metrics;
pub mod evaluation_metrics;
pub mod exposition;
pub mod metrics;
pub mod stream_metrics;
pub mod traces;
pub mod usage_metrics;
pub mod write_metrics;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Level;
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry};

use crate::config::LogFormat;

/// Installs the global subscriber: log lines and, with `traces`, this crate's spans exported
/// to OpenTelemetry (whatever `RUST_LOG` says: logs and traces are filtered apart). A second
/// call (e.g. in tests) is a no-op.
pub fn init(format: LogFormat, traces: Option<&SdkTracerProvider>) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let logs: Box<dyn Layer<Registry> + Send + Sync> = match format {
        LogFormat::Text => tracing_subscriber::fmt::layer().with_filter(filter).boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .with_filter(filter)
            .boxed(),
    };
    // This crate's spans at any level (the request span is DEBUG so that log lines keep no
    // prefix), and its events from INFO up as span events.
    let spans = traces.map(|provider| {
        tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("flagpole"))
            .with_filter(filter_fn(|meta| {
                meta.target().starts_with("flagpole")
                    && (meta.is_span() || *meta.level() <= Level::INFO)
            }))
    });
    let _ = tracing_subscriber::registry()
        .with(logs)
        .with(spans)
        .try_init();
}
