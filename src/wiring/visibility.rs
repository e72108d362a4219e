//! Kueue's visibility API, `visibility.kueue.x-k8s.io/v1beta2`: the pending workloads of a
//! ClusterQueue or LocalQueue with their positions, as `PendingWorkloadsSummary`
//! (`kubernetes-sigs/kueue:apis/visibility/v1beta2/types.go`). Mounted on the embedded server and
//! served on the manager's HTTP port (registered in a cluster by `config/apiservice/`).
//!
//! Positions follow the scheduler's own queue order (`queue::pending::OrderKey`: priority, then queue
//! timestamp, then UID), computed from the API's Workloads and LocalQueues at request time.

use std::collections::HashMap;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};

use crate::api::kueue::{LocalQueue, Workload};
use crate::queue::convert::workload_model;
use crate::queue::pending::OrderKey;

pub const GROUP: &str = "visibility.kueue.x-k8s.io";
pub const VERSION: &str = "v1beta2";
/// Kueue's defaults for `limit` and `offset`.
pub const DEFAULT_LIMIT: usize = 1000;

/// One pending workload in the scheduler's order.
#[derive(Clone, Debug, PartialEq)]
pub struct Pending {
    pub workload: Workload,
    pub local_queue: String,
    pub cluster_queue: String,
    pub priority: i32,
    order: OrderKey,
}

/// Pending workloads (active, not finished, no quota reserved, queued to an existing LocalQueue),
/// each with its ClusterQueue, sorted in queue order.
pub fn pending(workloads: &[Workload], local_queues: &[LocalQueue]) -> Vec<Pending> {
    let lq_cq: HashMap<(String, String), String> = local_queues
        .iter()
        .map(|l| {
            (
                (
                    l.metadata.namespace.clone().unwrap_or_default(),
                    l.metadata.name.clone().unwrap_or_default(),
                ),
                l.spec.cluster_queue.clone().unwrap_or_default(),
            )
        })
        .collect();
    let mut out: Vec<Pending> = workloads
        .iter()
        .filter(|w| {
            w.spec.active()
                && !w.is_finished()
                && !w.has_quota_reservation()
                && w.metadata.deletion_timestamp.is_none()
        })
        .filter_map(|w| {
            let lq = w.spec.queue_name().to_string();
            let cq = lq_cq
                .get(&(w.metadata.namespace.clone().unwrap_or_default(), lq.clone()))?
                .clone();
            // An unconvertible workload cannot be queued, so it has no position either.
            let model = workload_model(w, &cq, Default::default()).ok()?;
            Some(Pending {
                order: OrderKey::of(&model),
                priority: model.priority,
                workload: w.clone(),
                local_queue: lq,
                cluster_queue: cq,
            })
        })
        .collect();
    out.sort_by(|a, b| a.order.cmp(&b.order));
    out
}

/// The summary of `pending` in one queue: `in_cq` selects the ClusterQueue's workloads, `in_lq`
/// those of a LocalQueue (namespace, name); positions count within each.
pub fn summary(all: &[Pending], keep: impl Fn(&Pending) -> bool, offset: usize, limit: usize) -> Value {
    let mut cq_pos: HashMap<&str, i64> = HashMap::new();
    let mut lq_pos: HashMap<(Option<&str>, &str), i64> = HashMap::new();
    let mut items = Vec::new();
    for p in all {
        let in_cq = cq_pos.entry(p.cluster_queue.as_str()).or_insert(0);
        let in_lq = lq_pos
            .entry((p.workload.metadata.namespace.as_deref(), p.local_queue.as_str()))
            .or_insert(0);
        let (c, l) = (*in_cq, *in_lq);
        *in_cq += 1;
        *in_lq += 1;
        if !keep(p) {
            continue;
        }
        let m = &p.workload.metadata;
        let mut meta =
            json!({"name": m.name, "namespace": m.namespace, "creationTimestamp": m.creation_timestamp});
        if let Some(o) = m.owner_references.as_ref().filter(|o| !o.is_empty()) {
            meta["ownerReferences"] = json!(o);
        }
        items.push(json!({"metadata": meta, "priority": p.priority, "localQueueName": p.local_queue, "positionInClusterQueue": c, "positionInLocalQueue": l}));
    }
    let items: Vec<Value> = items.into_iter().skip(offset).take(limit).collect();
    json!({"kind": "PendingWorkloadsSummary", "apiVersion": format!("{GROUP}/{VERSION}"), "metadata": {}, "items": items})
}

#[derive(serde::Deserialize)]
struct Paging {
    offset: Option<String>,
    limit: Option<String>,
}

fn status(code: StatusCode, reason: &str, message: String) -> Response {
    let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message, "reason": reason, "code": code.as_u16()});
    (code, axum::Json(body)).into_response()
}

/// `offset` and `limit` as Kueue reads them: non-negative integers; limit 0 or absent = 1000.
fn paging(q: &Paging) -> Result<(usize, usize), String> {
    let parse = |name: &str, v: &Option<String>| -> Result<Option<usize>, String> {
        match v {
            None => Ok(None),
            Some(s) => s
                .parse::<usize>()
                .map(Some)
                .map_err(|_| format!("{name}: {s:?} is not a non-negative integer")),
        }
    };
    let offset = parse("offset", &q.offset)?.unwrap_or(0);
    let limit = parse("limit", &q.limit)?
        .filter(|l| *l > 0)
        .unwrap_or(DEFAULT_LIMIT);
    Ok((offset, limit))
}

async fn load(client: &kube::Client) -> Result<Vec<Pending>, Response> {
    let err = |e: kube::Error| {
        status(
            StatusCode::INTERNAL_SERVER_ERROR,
            "InternalError",
            format!("listing queues: {e}"),
        )
    };
    let wls = Api::<Workload>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(err)?
        .items;
    let lqs = Api::<LocalQueue>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(err)?
        .items;
    Ok(pending(&wls, &lqs))
}

async fn cluster_queue(
    State(client): State<kube::Client>,
    Path(cq): Path<String>,
    Query(q): Query<Paging>,
) -> Response {
    let (offset, limit) = match paging(&q) {
        Ok(p) => p,
        Err(m) => return status(StatusCode::BAD_REQUEST, "BadRequest", m),
    };
    match load(&client).await {
        Ok(all) => axum::Json(summary(&all, |p| p.cluster_queue == cq, offset, limit)).into_response(),
        Err(r) => r,
    }
}

async fn local_queue(
    State(client): State<kube::Client>,
    Path((ns, lq)): Path<(String, String)>,
    Query(q): Query<Paging>,
) -> Response {
    let (offset, limit) = match paging(&q) {
        Ok(p) => p,
        Err(m) => return status(StatusCode::BAD_REQUEST, "BadRequest", m),
    };
    match load(&client).await {
        Ok(all) => axum::Json(summary(
            &all,
            |p| p.local_queue == lq && p.workload.metadata.namespace.as_deref() == Some(ns.as_str()),
            offset,
            limit,
        ))
        .into_response(),
        Err(r) => r,
    }
}

/// The group's router over `client` (full paths).
pub fn router(client: kube::Client) -> Router {
    let base = format!("/apis/{GROUP}/{VERSION}");
    Router::new()
        .route(
            &format!("{base}/clusterqueues/{{cq}}/pendingworkloads"),
            get(cluster_queue),
        )
        .route(
            &format!("{base}/namespaces/{{ns}}/localqueues/{{lq}}/pendingworkloads"),
            get(local_queue),
        )
        .with_state(client)
}
