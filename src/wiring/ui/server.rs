//! The view's HTTP side: the page, its two assets, the server-sent event stream and the YAML of one
//! object; plus the tasks that feed it (Ray and Event watchers, the render loop).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use futures::{Stream, StreamExt};
use k8s_openapi::api::events::v1::Event;
use kube::runtime::reflector::Store;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::model::{EventLog, History, Stores};
use super::{UiListener, view};
use crate::admission::Caches;

const PAGE: &str = include_str!("assets/page.html");
const SCRIPT: &str = include_str!("assets/app.js");
const STYLE: &str = include_str!("assets/style.css");

/// How often the render loop looks at the caches; it sends only when the page changed.
const RENDER_EVERY: Duration = Duration::from_millis(500);
/// How often an unchanged page is rendered anyway (the charts' time axis moves).
const CHART_EVERY: Duration = Duration::from_secs(5);

#[derive(Clone)]
struct AppState {
    stores: Stores,
    latest: watch::Receiver<Arc<String>>,
}

fn reflect<K>(api: Api<K>, tasks: &mut Vec<tokio::task::JoinHandle<()>>) -> Store<K>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    // The render loop reads the store by resource version; no per-event work.
    crate::admission::reflect_each(api, tasks, |_| {})
}

/// A store of `api` like [`reflect`], whose watcher gives up (leaving the store empty) when the kind is
/// not served or may not be read: the MultiKueueClusters of a cluster without MultiKueue.
fn reflect_unless_absent<K>(api: Api<K>, tasks: &mut Vec<tokio::task::JoinHandle<()>>) -> Store<K>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    let (reader, writer) = kube::runtime::reflector::store();
    let stream = kube::runtime::reflector(writer, watcher(api, watcher::Config::default())).default_backoff();
    let kind = K::kind(&K::DynamicType::default()).to_string();
    tasks.push(tokio::spawn(async move {
        futures::pin_mut!(stream);
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(_) => {}
                Err(e) if forbidden(&e) || absent(&e) => {
                    tracing::info!(%kind, error = %e, "web view: not shown (not served, or the role may not list it)");
                    return;
                }
                Err(e) => tracing::debug!(%kind, error = %e, "web view: watch interrupted"),
            }
        }
    }));
    reader
}

/// Starts the view on `listener`: its watchers, the render loop and the HTTP server, all ending with
/// `cancel`. A listener already taken (a second manager in the process) starts nothing.
pub fn spawn(
    client: &Client,
    caches: &Caches,
    listener: &UiListener,
    cancel: CancellationToken,
) -> Vec<tokio::task::JoinHandle<()>> {
    let Some(std_listener) = listener.take() else {
        tracing::warn!(addr = %listener.addr, "web view already served by this process");
        return Vec::new();
    };
    let mut tasks = Vec::new();
    let events = EventLog::default();
    let log = events.clone();
    let event_stream =
        watcher(Api::<Event>::all(client.clone()), watcher::Config::default()).default_backoff();
    tasks.push(tokio::spawn(async move {
        futures::pin_mut!(event_stream);
        while let Some(ev) = event_stream.next().await {
            match ev {
                Ok(watcher::Event::Apply(e) | watcher::Event::InitApply(e)) => log.record(&e),
                Ok(_) => {}
                Err(e) if forbidden(&e) => {
                    // The shipped role lets the manager write Events, not read them: say so once, stop.
                    let why = "recent Events need list and watch on events.k8s.io events, which this manager's role does not grant";
                    tracing::info!(error = %e, "web view: {why}");
                    log.set_unavailable(why.to_string());
                    return;
                }
                Err(e) => tracing::debug!(error = %e, "web view: event watch interrupted"),
            }
        }
    }));
    let stores = Stores {
        cluster_queues: caches.cluster_queues.clone(),
        cohorts: caches.cohorts.clone(),
        flavors: caches.flavors.clone(),
        local_queues: caches.local_queues.clone(),
        workloads: caches.workloads.clone(),
        ray_services: reflect(Api::all(client.clone()), &mut tasks),
        ray_clusters: reflect(Api::all(client.clone()), &mut tasks),
        ray_jobs: reflect(Api::all(client.clone()), &mut tasks),
        admission_checks: caches.admission_checks.clone(),
        multikueue_clusters: reflect_unless_absent(Api::all(client.clone()), &mut tasks),
        topologies: caches.topologies.clone(),
        nodes: caches.nodes.clone(),
        non_tas: caches.non_tas.clone(),
        events,
    };
    let (tx, rx) = watch::channel(Arc::new(String::new()));
    let s = stores.clone();
    let c = cancel.clone();
    tasks.push(tokio::spawn(async move {
        let start = Instant::now();
        let mut history = History::default();
        let mut tick = tokio::time::interval(RENDER_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last: Option<(u64, Instant)> = None;
        loop {
            tokio::select! {
                _ = c.cancelled() => return,
                _ = tick.tick() => {}
            }
            let now = start.elapsed().as_secs_f64();
            history.observe(&s.stores_services(), now);
            let snap = s.snapshot(&history);
            let fp = snap.fingerprint();
            // Unchanged caches: render only to move the charts' time axis along.
            if last.is_some_and(|(f, at)| f == fp && at.elapsed() < CHART_EVERY) {
                continue;
            }
            last = Some((fp, Instant::now()));
            let body = view::body(&snap, now);
            // send_if_modified: browsers hear only about real changes.
            tx.send_if_modified(|cur| {
                if **cur == body {
                    return false;
                }
                *cur = Arc::new(body);
                true
            });
        }
    }));
    let app = router(AppState { stores, latest: rx });
    let addr = listener.addr;
    tasks.push(tokio::spawn(async move {
        let l = match tokio::net::TcpListener::from_std(std_listener) {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(%addr, error = %e, "web view cannot listen");
                return;
            }
        };
        if let Err(e) = crate::embedded::listener::serve_plain(l, app, Default::default(), cancel).await {
            tracing::error!(%addr, error = %e, "web view stopped");
        }
    }));
    tasks
}

fn forbidden(e: &watcher::Error) -> bool {
    match e {
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s)) => s.is_forbidden(),
        watcher::Error::WatchError(s) => s.is_forbidden(),
        _ => false,
    }
}

fn absent(e: &watcher::Error) -> bool {
    match e {
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s)) => s.is_not_found(),
        _ => false,
    }
}

impl Stores {
    fn stores_services(&self) -> Vec<Arc<crate::api::ray::RayService>> {
        self.ray_services.state()
    }
}

/// The view's routes (paths are relative in the page, so it also works behind a path prefix).
fn router(state: AppState) -> Router {
    Router::new()
        .route("/", get(page))
        .route(
            "/app.js",
            get(|| async { ([(header::CONTENT_TYPE, "text/javascript; charset=utf-8")], SCRIPT) }),
        )
        .route(
            "/style.css",
            get(|| async { ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], STYLE) }),
        )
        .route("/events", get(live))
        .route("/yaml", get(yaml))
        .layer(axum::middleware::map_response(harden))
        .with_state(state)
}

/// Defence in depth beside the escaping: no inline or foreign scripts, no framing, and the YAML (plain
/// text, opened directly without JavaScript) is never sniffed as HTML.
async fn harden(mut resp: Response) -> Response {
    let h = resp.headers_mut();
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        header::HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        header::HeaderValue::from_static("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'"),
    );
    h.insert(
        header::REFERRER_POLICY,
        header::HeaderValue::from_static("no-referrer"),
    );
    resp
}

async fn page(State(st): State<AppState>) -> Html<String> {
    let body = st.latest.borrow().clone();
    let body = if body.is_empty() {
        "<div class=\"empty\">loading the caches…</div>".to_string()
    } else {
        body.to_string()
    };
    Html(PAGE.replacen("{{BODY}}", &body, 1))
}

/// The page body now, then again on every change.
async fn live(State(st): State<AppState>) -> Sse<impl Stream<Item = Result<SseEvent, Infallible>>> {
    let stream = futures::stream::unfold((st.latest, true), |(mut rx, first)| async move {
        if !first {
            rx.changed().await.ok()?;
        }
        let body = rx.borrow_and_update().clone();
        let ev = SseEvent::default()
            .json_data(serde_json::json!({ "body": &*body }))
            .unwrap_or_else(|_| SseEvent::default().comment("render not serializable"));
        Some((Ok(ev), (rx, false)))
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}

#[derive(serde::Deserialize)]
struct ObjectRef {
    kind: String,
    #[serde(default)]
    ns: String,
    name: String,
}

fn find<K>(store: &Store<K>, r: &ObjectRef) -> Option<serde_json::Value>
where
    K: Resource + Clone + serde::Serialize,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    let obj = store
        .state()
        .into_iter()
        .find(|o| o.name_any() == r.name && o.namespace().unwrap_or_default() == r.ns)?;
    serde_json::to_value(&*obj).ok()
}

/// One cached object as YAML (without managedFields), as `kubectl get -o yaml` would show it.
async fn yaml(State(st): State<AppState>, Query(r): Query<ObjectRef>) -> Response {
    let s = &st.stores;
    let found = match r.kind.as_str() {
        "ClusterQueue" => find(&s.cluster_queues, &r),
        "Cohort" => find(&s.cohorts, &r),
        "ResourceFlavor" => find(&s.flavors, &r),
        "LocalQueue" => find(&s.local_queues, &r),
        "Workload" => find(&s.workloads, &r),
        "RayService" => find(&s.ray_services, &r),
        "RayCluster" => find(&s.ray_clusters, &r),
        "RayJob" => find(&s.ray_jobs, &r),
        "MultiKueueCluster" => find(&s.multikueue_clusters, &r),
        "AdmissionCheck" => find(&s.admission_checks, &r),
        "Topology" => find(&s.topologies, &r),
        "Node" => find(&s.nodes, &r),
        _ => {
            return (
                StatusCode::BAD_REQUEST,
                format!("kind {:?} is not shown by this view", r.kind),
            )
                .into_response();
        }
    };
    let Some(mut v) = found else {
        return (
            StatusCode::NOT_FOUND,
            format!("{} {}/{} is not in the cache (deleted?)", r.kind, r.ns, r.name),
        )
            .into_response();
    };
    if let Some(m) = v.get_mut("metadata").and_then(|m| m.as_object_mut()) {
        m.remove("managedFields");
    }
    match serde_saphyr::to_string(&v) {
        Ok(y) => ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], y).into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot render YAML: {e}"),
        )
            .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16, reason: &str) -> Box<kube::core::Status> {
        Box::new(
            serde_json::from_value(
                serde_json::json!({"status": "Failure", "code": code, "reason": reason, "message": "m"}),
            )
            .unwrap(),
        )
    }

    #[test]
    fn only_a_forbidden_list_or_watch_stops_the_event_watcher() {
        assert!(forbidden(&watcher::Error::InitialListFailed(kube::Error::Api(
            status(403, "Forbidden")
        ))));
        assert!(forbidden(&watcher::Error::WatchError(status(403, "Forbidden"))));
        assert!(!forbidden(&watcher::Error::InitialListFailed(kube::Error::Api(
            status(500, "InternalError")
        ))));
        assert!(
            !forbidden(&watcher::Error::WatchError(status(410, "Expired"))),
            "an expired watch is re-listed, not given up"
        );
    }
}
