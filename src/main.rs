//! The `flagpole` binary: parse settings, start logging, run until SIGTERM or Ctrl-C.

use clap::Parser;
use tokio_util::sync::CancellationToken;

use flagpole::config::Settings;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let settings = Settings::parse();
    flagpole::telemetry::init_logging(settings.log_format);
    let listener = match tokio::net::TcpListener::bind(settings.listen).await {
        Ok(listener) => listener,
        Err(e) => {
            tracing::error!(address = %settings.listen, error = %e, "cannot listen");
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
