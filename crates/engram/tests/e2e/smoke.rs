//! The service starts, answers health without a key, and stops cleanly on SIGTERM, finishing
//! the requests in flight.

use crate::common;

use std::time::Duration;

use common::Server;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

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

#[tokio::test]
async fn sigterm_drains_a_request_in_flight() {
    let mut server = Server::start();
    let key = server.key("drain", &[]);
    let body = br#"{"database": "drained"}"#;
    let addr = server.base.trim_start_matches("http://").to_owned();
    let mut stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let head = format!(
        "POST /databases HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {key}\r\nAPI-Version: 2\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(&body[..5]).await.unwrap();
    stream.flush().await.unwrap();
    // The server is reading this request's body when the signal arrives.
    tokio::time::sleep(Duration::from_millis(200)).await;
    server.send_sigterm();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        server.is_running(),
        "the server must wait for the request in flight"
    );
    stream.write_all(&body[5..]).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    assert!(response.starts_with("HTTP/1.1 202"), "{response}");
    let status = server.wait_exit();
    assert!(status.success(), "exit status {status:?}");

    // The database it created is there after a restart.
    server.restart();
    server.wait_ready(&key, "drained").await;
}
