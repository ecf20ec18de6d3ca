//! A real HTTP receiver on loopback for webhook tests: records every request (headers and raw
//! body bytes) and answers as scripted (a status, or a stall longer than engram's time-out).
#![allow(clippy::unwrap_used)] // test code

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::Router;

/// How the receiver answers one request.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Answer {
    Status(u16),
    /// Waits this long, then answers 200 (too late when engram's time-out is shorter).
    Stall(Duration),
}

/// One request as received.
#[derive(Debug, Clone)]
pub(crate) struct Received {
    pub headers: HeaderMap,
    pub body: Vec<u8>,
    pub at: Instant,
}

impl Received {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }

    pub(crate) fn delivery_id(&self) -> String {
        self.header("x-service-delivery-id")
            .expect("X-Service-Delivery-ID")
            .to_owned()
    }
}

#[derive(Default)]
struct Shared {
    received: Vec<Received>,
    script: VecDeque<Answer>,
    default: Option<Answer>,
}

#[derive(Clone)]
pub(crate) struct Receiver {
    pub url: String,
    shared: Arc<Mutex<Shared>>,
}

async fn handle(
    State(shared): State<Arc<Mutex<Shared>>>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let answer = {
        let mut shared = shared.lock().unwrap();
        shared.received.push(Received {
            headers,
            body: body.to_vec(),
            at: Instant::now(),
        });
        let default = shared.default.unwrap_or(Answer::Status(200));
        shared.script.pop_front().unwrap_or(default)
    };
    match answer {
        Answer::Status(code) => StatusCode::from_u16(code).unwrap(),
        Answer::Stall(wait) => {
            tokio::time::sleep(wait).await;
            StatusCode::OK
        }
    }
}

impl Receiver {
    /// Listens on 127.0.0.1 (an ephemeral port) at `/hook`.
    pub(crate) async fn start() -> Self {
        let shared = Arc::new(Mutex::new(Shared::default()));
        let router = Router::new()
            .route("/hook", axum::routing::post(handle))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, router).await });
        Self {
            url: format!("http://{addr}/hook"),
            shared,
        }
    }

    /// Answers the next requests in this order, then the default.
    pub(crate) fn script(&self, answers: &[Answer]) {
        self.shared
            .lock()
            .unwrap()
            .script
            .extend(answers.iter().copied());
    }

    /// The answer once the script is used up (200 unless set).
    pub(crate) fn answer_by_default(&self, answer: Answer) {
        self.shared.lock().unwrap().default = Some(answer);
    }

    pub(crate) fn received(&self) -> Vec<Received> {
        self.shared.lock().unwrap().received.clone()
    }

    /// Requests received for one delivery id, in order.
    pub(crate) fn for_delivery(&self, delivery_id: &str) -> Vec<Received> {
        self.received()
            .into_iter()
            .filter(|r| r.header("x-service-delivery-id") == Some(delivery_id))
            .collect()
    }
}
