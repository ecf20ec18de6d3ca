//! The service starts, answers health without a key, and stops cleanly on SIGTERM.

mod common;

use common::Server;

#[tokio::test]
async fn serves_health_and_stops_on_sigterm() {
    let mut server = Server::start();
    let health = server
        .call(reqwest::Method::GET, "/healthz", None, None)
        .await;
    assert_eq!(health.status, 200);
    assert_eq!(health.body["status"], "ok");
    let status = server.terminate();
    assert!(status.success(), "exit status {status:?}");
}
