//! Logging setup (text or JSON lines, filtered by `RUST_LOG`, default `info`) and the
//! Prometheus metrics.

pub mod delivery_metrics;
pub mod exposition;
pub mod metrics;
pub mod usage_metrics;
pub mod write_metrics;

use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;

/// Installs the global log subscriber; a second call (e.g. in tests) is a no-op.
pub fn init_logging(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}
