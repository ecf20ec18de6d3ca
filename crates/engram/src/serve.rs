//! `engram serve`: open the store, start the workers, serve HTTP; on SIGTERM or Ctrl-C stop
//! accepting, drain in-flight requests, stop the workers and close the store.

use std::io::Write;

use engram_app::App;
use engram_config::{Config, LogFormat};
use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;

fn init_logging(config: &Config) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(&config.log.level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
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
    let app = App::open(config.clone()).await?;
    let listener = tokio::net::TcpListener::bind(config.listen).await?;
    let addr = listener.local_addr()?;
    tracing::info!(%addr, data_dir = %config.data_dir.display(), "engram listening");
    // Tests and scripts read the bound address (port 0 picks one) from this line.
    println!("engram listening on http://{addr}");
    std::io::stdout().flush()?;

    let token = CancellationToken::new();
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
