//! The streaming settings (`--help` shows them under "Streaming").

use clap::Args;

/// SSE streaming to SDKs, the stream log it resumes from, and the polling API's `fetch-mode`.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Streaming")]
pub struct StreamingSettings {
    /// Serve `GET /api/client/streaming`; `false` answers it 501 (Node SDKs then poll).
    #[arg(id = "streaming", long = "streaming", value_name = "STREAMING", env = "FLAGPOLE_STREAMING", default_value_t = true, action = clap::ArgAction::Set)]
    pub enabled: bool,

    /// Streams one replica holds at most; more are answered 429 (Node SDKs then poll). The
    /// replica raises its open-files soft limit to the hard limit at start: keep this below it.
    #[arg(long, env = "FLAGPOLE_STREAMING_MAX_CONNECTIONS", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub streaming_max_connections: u64,

    /// Interval of the heartbeat comments on every stream, in milliseconds (the Python SDK
    /// gives up on a stream silent for 30 s).
    #[arg(long, env = "FLAGPOLE_STREAMING_HEARTBEAT_MS", default_value_t = 15_000, value_parser = clap::value_parser!(u64).range(100..=15_000))]
    pub streaming_heartbeat_ms: u64,

    /// How long a stream lasts at most, in milliseconds (each up to a fifth less, at random):
    /// clients then reconnect, so a load balancer spreads them over new replicas.
    #[arg(long, env = "FLAGPOLE_STREAMING_MAX_LIFETIME_MS", default_value_t = 1_800_000, value_parser = clap::value_parser!(u64).range(100..=86_400_000))]
    pub streaming_max_lifetime_ms: u64,

    /// Frames a stream may have waiting; a reader that falls further behind is disconnected
    /// (it reconnects and resumes from its Last-Event-ID).
    #[arg(long, env = "FLAGPOLE_STREAMING_QUEUE_FRAMES", default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub streaming_queue_frames: u64,

    /// The reconnection delay (`retry:`, in milliseconds) sent when the replica ends a
    /// stream: at its lifetime, when the reader is too slow, at shutdown.
    #[arg(long, env = "FLAGPOLE_STREAMING_RECONNECT_MS", default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(0..=600_000))]
    pub streaming_reconnect_ms: u64,

    /// Versions the stream log keeps (about): a client further behind gets a hydration.
    #[arg(long, env = "FLAGPOLE_STREAM_LOG_MAX_ENTRIES", default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub stream_log_max_entries: u64,

    /// Age after which the stream log drops a version, in seconds.
    #[arg(long, env = "FLAGPOLE_STREAM_LOG_MAX_AGE_SECS", default_value_t = 7 * 24 * 3600, value_parser = clap::value_parser!(u64).range(1..=31_536_000))]
    pub stream_log_max_age_secs: u64,

    /// Send `fetch-mode: streaming` on `GET /api/client/features` responses. Every Node SDK
    /// 6.7 or later that sees it switches to streaming: turn it on only to move a fleet to
    /// streaming (docs/operations.md).
    #[arg(long, env = "FLAGPOLE_FETCH_MODE_HEADER", default_value_t = false, action = clap::ArgAction::Set)]
    pub fetch_mode_header: bool,
}

impl StreamingSettings {
    /// Refuses sending SDKs to streams this replica does not serve: they would answer 501,
    /// the SDKs poll again, see the header again and come back, every interval.
    pub fn check(&self) -> Result<(), String> {
        if self.fetch_mode_header && !self.enabled {
            return Err("--fetch-mode-header true needs --streaming true".into());
        }
        Ok(())
    }
}
