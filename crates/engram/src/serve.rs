//! `engram serve`: open the store, start the workers, serve HTTP; on SIGTERM or Ctrl-C stop
//! accepting, drain in-flight requests, stop the workers and close the store.

use std::io::{IsTerminal, Write};

use engram_app::App;
use engram_config::{Config, LogFormat};
use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;

fn init_logging(config: &Config) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(&config.log.level));
    // Colour only for a person at a terminal: files and log shippers get plain text.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    match config.log.format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.init(),
    }
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

pub(crate) async fn run(config: Config) -> anyhow::Result<()> {
    init_logging(&config);
    let grace = config.workers.shutdown_grace;
    engram_http::install_metrics();
    let app = App::open(config.clone()).await?;
    let listener = tokio::net::TcpListener::bind(config.listen).await?;
    let addr = listener.local_addr()?;
    let storage = if config.storage.is_postgres() {
        config.storage.redacted_url()
    } else {
        config.data_dir.display().to_string()
    };
    tracing::info!(%addr, %storage, "engram listening");
    // Tests and scripts read the bound address (port 0 picks one) from this line.
    // The console's address goes out in the same write: a reader may close the pipe after the
    // first line.
    let console = if config.console.enabled {
        format!(
            "\nconsole: http://{addr}/console (sign in with a key from `engram keys create --org <name>`)"
        )
    } else {
        String::new()
    };
    let line = format!("engram listening on http://{addr}{console}\n");
    let mut stdout = std::io::stdout();
    stdout.write_all(line.as_bytes())?;
    stdout.flush()?;

    let token = CancellationToken::new();
    if let Some(addr) = config.metrics.listen {
        let metrics = tokio::net::TcpListener::bind(addr).await?;
        tracing::info!(addr = %metrics.local_addr()?, "metrics listening");
        let (router, stop) = (engram_http::metrics_router(app.clone()), token.clone());
        tokio::spawn(async move {
            let served = axum::serve(metrics, router)
                .with_graceful_shutdown(stop.cancelled_owned())
                .await;
            if let Err(err) = served {
                tracing::error!(error = %err, "the metrics listener stopped");
            }
        });
    }
    let workers = app.start_workers(token.child_token());
    let stop = token.clone();
    tokio::spawn(async move {
        shutdown_signal().await;
        tracing::info!("shutting down: draining in-flight requests");
        stop.cancel();
    });
    let served = engram_http::serve(listener, app.clone(), token.clone().cancelled_owned()).await;
    token.cancel();
    workers.shutdown(grace).await;
    app.close().await;
    tracing::info!("stopped");
    Ok(served?)
}
