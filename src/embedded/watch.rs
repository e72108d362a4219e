//! WATCH streams: newline-delimited events, replay then live, BOOKMARKs, WatchList's
//! initial-events-end bookmark, and 410 as HTTP 200 + one ERROR event (what kube-runtime relists on).

use super::error::ApiError;
use super::registry::ResourceInfo;
use super::selector::{FieldSelector, LabelSelector};
use super::served::Served;
use super::store::{EventType, Store, WatchEvent, WatchFrom};
use super::table;
use bytes::Bytes;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::mpsc;

pub struct WatchRequest {
    pub info: Arc<ResourceInfo>,
    pub namespace: Option<String>,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
    pub from: WatchFrom,
    pub send_initial_events: bool,
    pub bookmarks: bool,
    pub timeout: Option<Duration>,
    pub as_table: bool,
    /// Objects with their `metadata.managedFields` (all but the in-process clients: `served.rs`).
    pub managed_fields: bool,
}

impl WatchRequest {
    fn matches(&self, obj: &Value) -> bool {
        if let Some(ns) = &self.namespace
            && obj.pointer("/metadata/namespace").and_then(Value::as_str) != Some(ns.as_str())
        {
            return false;
        }
        self.labels.matches(obj) && self.fields.matches(obj)
    }

    fn line(&self, type_: &str, obj: &Arc<Value>) -> Bytes {
        if self.as_table {
            return event_line(type_, &table::table(&self.info, &[&**obj], "", None));
        }
        let obj = Store::at_version(&self.info, obj.clone());
        event_line(
            type_,
            &Served {
                obj: &obj,
                managed_fields: self.managed_fields,
                // A watch event's object carries its kind, on a real server too.
                typed_item: false,
            },
        )
    }

    fn bookmark(&self, rv: u64, initial_end: bool) -> Bytes {
        let mut md = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            md["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        event_line(
            "BOOKMARK",
            &json!({"kind": self.info.kind, "apiVersion": self.info.api_version(), "metadata": md}),
        )
    }
}

/// One event of a watch, `{"type": ..., "object": ...}`.
#[derive(serde::Serialize)]
struct Line<'a, T> {
    #[serde(rename = "type")]
    type_: &'a str,
    object: &'a T,
}

fn event_line<T: serde::Serialize>(type_: &str, object: &T) -> Bytes {
    let mut v = serde_json::to_vec(&Line { type_, object }).unwrap_or_default();
    v.push(b'\n');
    Bytes::from(v)
}

pub fn error_line(e: &ApiError) -> Bytes {
    event_line("ERROR", &e.to_status())
}

/// The event type a filtered watch sees, as the real server reports it: an object that starts matching
/// is ADDED, one that stops matching is DELETED, others pass or are skipped.
pub fn filtered_type(req: &WatchRequest, ev: &WatchEvent) -> Option<&'static str> {
    let now = req.matches(&ev.object);
    match ev.type_ {
        EventType::Modified => {
            // The namespace never changes: without selectors the previous object matched as the
            // current one does, and is not parsed.
            let before = if req.labels.selects_all() && req.fields.0.is_empty() {
                ev.previous.is_some() && now
            } else {
                ev.previous
                    .as_ref()
                    .is_some_and(|p| serde_json::from_slice(p).is_ok_and(|p: Value| req.matches(&p)))
            };
            match (before, now) {
                (true, true) => Some("MODIFIED"),
                (false, true) => Some("ADDED"),
                (true, false) => Some("DELETED"),
                (false, false) => None,
            }
        }
        t => now.then_some(t.as_str()),
    }
}

type Tx = mpsc::Sender<Result<Bytes, std::io::Error>>;

/// Starts the watch; the returned receiver is the response body. The task ends when the client goes
/// away, the timeout passes, the store closes watches, or history no longer covers a lagging reader.
pub fn start(
    store: Arc<Store>,
    req: WatchRequest,
    bookmark_interval: Duration,
) -> mpsc::Receiver<Result<Bytes, std::io::Error>> {
    let (tx, rx) = mpsc::channel(64);
    tokio::spawn(async move {
        let run = run(store, &req, tx.clone(), bookmark_interval);
        match req.timeout {
            Some(t) => {
                let _ = tokio::time::timeout(t, run).await;
            }
            None => run.await,
        }
    });
    rx
}

async fn run(store: Arc<Store>, req: &WatchRequest, tx: Tx, bookmark_interval: Duration) {
    let key = req.info.key();
    let from = if req.send_initial_events {
        WatchFrom::Current
    } else {
        req.from
    };
    let mut start = match store.watch(&key, from) {
        Ok(s) => s,
        Err(e) => {
            let _ = tx.send(Ok(error_line(&e))).await;
            return;
        }
    };
    // Nothing reaches a client before it is on disk (with --data-dir): see `Store::synced`.
    if let Err(e) = store.persisted(start.rv).await {
        let _ = tx.send(Ok(error_line(&e))).await;
        return;
    }
    for obj in &start.initial {
        if req.matches(obj) && tx.send(Ok(req.line("ADDED", obj))).await.is_err() {
            return;
        }
    }
    // The end of the initial events is a bookmark, sent only to a client that takes bookmarks.
    if req.send_initial_events && req.bookmarks && tx.send(Ok(req.bookmark(start.rv, true))).await.is_err() {
        return;
    }
    for ev in &start.replay {
        if let Some(t) = filtered_type(req, ev)
            && tx.send(Ok(req.line(t, &ev.object))).await.is_err()
        {
            return;
        }
    }
    let mut last = start.rv;
    let mut ticker =
        tokio::time::interval_at(tokio::time::Instant::now() + bookmark_interval, bookmark_interval);
    loop {
        let batch = tokio::select! {
            r = start.live.recv() => match r {
                Ok(ev) => vec![ev],
                Err(RecvError::Lagged(_)) => match store.events_since(&key, last) {
                    Ok(evs) => evs,
                    Err(e) => {
                        let _ = tx.send(Ok(error_line(&e))).await;
                        return;
                    }
                },
                Err(RecvError::Closed) => return,
            },
            _ = start.closed.changed() => return,
            // The client went away: end now, not at the next event or bookmark sent into the void.
            _ = tx.closed() => return,
            _ = ticker.tick() => {
                if req.bookmarks && tx.send(Ok(req.bookmark(last, false))).await.is_err() {
                    return;
                }
                continue;
            }
        };
        if let Some(top) = batch.iter().map(|e| e.rv).max()
            && let Err(e) = store.persisted(top).await
        {
            let _ = tx.send(Ok(error_line(&e))).await;
            return;
        }
        for ev in batch {
            if ev.rv <= last {
                continue;
            }
            last = ev.rv;
            if ev.key != key {
                continue;
            }
            let Some(t) = filtered_type(req, &ev) else {
                continue;
            };
            if tx.send(Ok(req.line(t, &ev.object))).await.is_err() {
                return;
            }
        }
    }
}
