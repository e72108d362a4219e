//! One request of the load generator over a bounded pool of HTTP/1.1 keep-alive connections (hyper's
//! connection API: no hidden pool, so every connection the generator opens is one it counts).

use std::net::SocketAddr;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// Answers are read up to this size; a longer one is counted by its status and not parsed.
const MAX_BODY: usize = 64 * 1024;

/// What one request came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A response: its status and the cluster it names, if any.
    Answered {
        status: u16,
        cluster: Option<String>,
    },
    /// No connection, or it broke before a response.
    ConnError,
    Timeout,
}

/// Where requests go and how.
#[derive(Debug)]
pub struct Target {
    pub addr: SocketAddr,
    pub authority: String,
    pub path: String,
    pub timeout: Duration,
    pub cluster_field: String,
}

/// Idle keep-alive connections; at most as many as requests in flight, which a semaphore bounds.
#[derive(Default)]
pub struct Pool(Mutex<Vec<SendRequest<Empty<Bytes>>>>);

impl Pool {
    fn take(&self) -> Option<SendRequest<Empty<Bytes>>> {
        let mut idle = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        while let Some(c) = idle.pop() {
            if !c.is_closed() {
                return Some(c);
            }
        }
        None
    }
    fn put(&self, c: SendRequest<Empty<Bytes>>) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).push(c);
    }
}

async fn connect(t: &Target) -> Option<SendRequest<Empty<Bytes>>> {
    let stream = tokio::time::timeout(t.timeout, TcpStream::connect(t.addr))
        .await
        .ok()?
        .ok()?;
    let _ = stream.set_nodelay(true);
    let (sender, conn) = http1::handshake(TokioIo::new(stream)).await.ok()?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Some(sender)
}

/// The `cluster_field` of a JSON answer (a string), if there is one.
pub fn cluster_of(body: &[u8], field: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
    v.get(field)?.as_str().map(str::to_owned)
}

enum Try {
    Done(Outcome),
    /// A reused connection the server had closed meanwhile (the request never reached it).
    Stale,
}

async fn attempt(t: &Target, pool: &Pool, mut sender: SendRequest<Empty<Bytes>>, reused: bool) -> Try {
    let req = match http::Request::get(&t.path)
        .header(http::header::HOST, &t.authority)
        .header(http::header::USER_AGENT, "quotagate-load")
        .body(Empty::new())
    {
        Ok(r) => r,
        Err(_) => return Try::Done(Outcome::ConnError),
    };
    let exchange = async {
        if sender.ready().await.is_err() {
            return Err(true);
        }
        let resp = sender
            .send_request(req)
            .await
            .map_err(|e| e.is_canceled() || e.is_incomplete_message())?;
        let status = resp.status().as_u16();
        let body = Limited::new(resp.into_body(), MAX_BODY)
            .collect()
            .await
            .map(|b| b.to_bytes())
            .ok();
        Ok((status, body))
    };
    match tokio::time::timeout(t.timeout, exchange).await {
        Err(_) => Try::Done(Outcome::Timeout),
        Ok(Err(closed)) if closed && reused => Try::Stale,
        Ok(Err(_)) => Try::Done(Outcome::ConnError),
        Ok(Ok((status, body))) => {
            let cluster = body.as_deref().and_then(|b| cluster_of(b, &t.cluster_field));
            if body.is_some() {
                pool.put(sender);
            }
            Try::Done(Outcome::Answered { status, cluster })
        }
    }
}

/// One GET: on an idle connection, else a new one. A GET the server never saw because it had closed an
/// idle connection is sent again once on a new connection (as browsers and urllib3 do); the second
/// value says so.
pub async fn request(t: &Target, pool: &Pool) -> (Outcome, bool) {
    if let Some(c) = pool.take() {
        match attempt(t, pool, c, true).await {
            Try::Done(o) => return (o, false),
            Try::Stale => {
                return match connect(t).await {
                    None => (Outcome::ConnError, true),
                    Some(c) => match attempt(t, pool, c, false).await {
                        Try::Done(o) => (o, true),
                        Try::Stale => (Outcome::ConnError, true),
                    },
                };
            }
        }
    }
    match connect(t).await {
        None => (Outcome::ConnError, false),
        Some(c) => match attempt(t, pool, c, false).await {
            Try::Done(o) => (o, false),
            Try::Stale => (Outcome::ConnError, false),
        },
    }
}
