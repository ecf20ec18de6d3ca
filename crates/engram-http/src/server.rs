//! The HTTP/1 server: connections whose request headers do not arrive within
//! `http.header_timeout` are closed (hyper's header read timer, which also runs while a
//! keep-alive connection waits for its next request), and a request body must arrive whole
//! within `http.body_timeout` of its headers. Against slowloris clients, which otherwise hold a
//! connection and a task for as long as they like.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::Router;
use http_body::{Frame, SizeHint};
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::time::Sleep;

/// Serves `router` until `shutdown` resolves, then stops accepting and drains the connections
/// in flight (idle ones are closed at once).
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    header_timeout: Duration,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(header_timeout);
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(err) => {
                    // Out of file descriptors and the like: pause rather than spin.
                    tracing::warn!(error = %err, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let service = TowerToHyperService::new(router.clone());
        let connection = graceful.watch(http.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            if let Err(err) = connection.await {
                tracing::debug!(error = %err, "connection closed with an error");
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// Gives the request's body `limit` to arrive whole; after it, reading the body fails.
pub(crate) fn body_deadline(request: Request, limit: Duration) -> Request {
    let (parts, body) = request.into_parts();
    let body = DeadlineBody {
        inner: body,
        deadline: Box::pin(tokio::time::sleep(limit)),
        limit,
        ended: false,
    };
    Request::from_parts(parts, Body::new(body))
}

/// A body that fails once its deadline passes before it has ended.
struct DeadlineBody {
    inner: Body,
    deadline: Pin<Box<Sleep>>,
    limit: Duration,
    ended: bool,
}

#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within {} s", .0.as_secs_f64())]
struct BodyTimedOut(Duration);

impl http_body::Body for DeadlineBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        if this.ended {
            return Poll::Ready(None);
        }
        if this.deadline.as_mut().poll(cx).is_ready() {
            this.ended = true;
            return Poll::Ready(Some(Err(axum::Error::new(BodyTimedOut(this.limit)))));
        }
        let frame = Pin::new(&mut this.inner).poll_frame(cx);
        if let Poll::Ready(None) = frame {
            this.ended = true;
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.ended || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// A client that sent its headers and then nothing.
    struct Stalled;

    impl http_body::Body for Stalled {
        type Data = Bytes;
        type Error = axum::Error;

        fn poll_frame(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
            Poll::Pending
        }
    }

    fn request(body: Body) -> Request {
        Request::builder().body(body).unwrap()
    }

    #[tokio::test]
    async fn a_body_that_does_not_arrive_in_time_fails_naming_the_limit() {
        let limit = Duration::from_millis(50);
        let request = body_deadline(request(Body::new(Stalled)), limit);
        let err = axum::body::to_bytes(request.into_body(), 1024)
            .await
            .unwrap_err();
        assert!(
            std::error::Error::source(&err)
                .map(ToString::to_string)
                .unwrap_or_else(|| err.to_string())
                .contains("did not arrive within 0.05 s"),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn a_body_that_arrives_in_time_is_read_whole() {
        let limit = Duration::from_secs(5);
        let request = body_deadline(request(Body::from("hello")), limit);
        let bytes = axum::body::to_bytes(request.into_body(), 1024)
            .await
            .unwrap();
        assert_eq!(&bytes[..], b"hello");
    }
}
