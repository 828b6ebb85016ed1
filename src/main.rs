//! The `flagpole` binary: parse settings, start logging, run until SIGTERM or Ctrl-C.

use clap::Parser;
use tokio_util::sync::CancellationToken;

use flagpole::config::{Command, Settings};

/// jemalloc, with the settings in `.cargo/config.toml`. Against glibc's malloc at 10,000 toggles
/// (docs/performance.md, "The allocator"): 19–45 % more writes/s on the Redis store, where glibc's free
/// chunks grew costly to search and coalesce in a large heap, and 8–16 MiB less peak on the
/// embedded store, whose blocking threads each got a glibc arena of their own (about 2 MiB more
/// than glibc capped at two arenas, as the container image used to run it).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let mut settings = Settings::parse();
    if let Some(Command::ImportUnleash(args)) = settings.command.take() {
        return flagpole::migration::run(settings, args).await;
    }
    let traces = match flagpole::telemetry::traces::provider_from_env() {
        Ok(traces) => traces,
        Err(e) => {
            eprintln!("flagpole: OpenTelemetry: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    flagpole::telemetry::init(settings.telemetry.log_format, traces.as_ref());
    settings.telemetry.traces_exported = traces.is_some();
    // On a worker rather than the main thread: with glibc's malloc (before jemalloc) the main
    // thread was a third thread with its own arena for what the listener and start-up allocate
    // (about 2.5 MiB more resident at 10,000 toggles).
    let code = match tokio::spawn(serve(settings)).await {
        Ok(code) => code,
        Err(e) => {
            // A panic: logged where the logs go, with the exit code Rust gives one.
            tracing::error!(error = %e, "flagpole stopped");
            std::process::ExitCode::from(101)
        }
    };
    // Export the spans still buffered (the batch exporter sends every few seconds); a blocking
    // call, bounded by OTEL_EXPORTER_OTLP_TIMEOUT (10 s by default).
    if let Some(provider) = traces {
        let flushed = tokio::task::spawn_blocking(move || provider.shutdown()).await;
        if let Ok(Err(e)) = flushed {
            eprintln!("flagpole: OpenTelemetry: the last spans were not exported: {e}");
        }
    }
    code
}

/// Listens and runs the replica until SIGTERM or Ctrl-C.
async fn serve(settings: Settings) -> std::process::ExitCode {
    let listener = match tokio::net::TcpListener::bind(settings.server.listen).await {
        Ok(listener) => listener,
        Err(e) => {
            tracing::error!(address = %settings.server.listen, error = %e, "cannot listen");
            return std::process::ExitCode::FAILURE;
        }
    };
    let shutdown = CancellationToken::new();
    tokio::spawn(cancel_on_signal(shutdown.clone()));
    match flagpole::run(settings, listener, shutdown).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "flagpole stopped");
            // Logs may go to a collector; the reason a process will not start belongs on
            // stderr as well.
            eprintln!("flagpole: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn cancel_on_signal(shutdown: CancellationToken) {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = terminate => {}
    }
    tracing::info!("shutting down");
    shutdown.cancel();
}

#[cfg(test)]
mod tests {
    /// The settings of `.cargo/config.toml` reached jemalloc's build (a build without them
    /// would keep four arenas per core of the node).
    #[test]
    fn the_allocator_runs_with_the_projects_settings() {
        let conf = tikv_jemalloc_ctl::config::malloc_conf::read().expect("malloc_conf");
        assert!(conf.contains("dirty_decay_ms:1000"), "{conf}");
        assert_eq!(tikv_jemalloc_ctl::opt::narenas::read().expect("narenas"), 2);
    }
}
