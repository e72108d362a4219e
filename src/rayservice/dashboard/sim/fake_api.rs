//! Test-only: a tiny in-memory Kubernetes API behind a `kube::Client`, enough for the autoscaler's
//! and the load generator's shells (get, list with a label selector, JSON patch). The embedded
//! API server lives in a layer `rayservice` may not name, and these loops need only this much.

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};

#[derive(Default)]
pub(super) struct FakeApi {
    objects: Mutex<Vec<Value>>,
    requests: Mutex<Vec<String>>,
    failing: AtomicBool,
}

/// (plural, namespace, name) of an object, as its URL names it.
fn ident(obj: &Value) -> (String, String, String) {
    let s = |p: &str| obj.pointer(p).and_then(Value::as_str).unwrap_or("").to_owned();
    (
        format!("{}s", s("/kind").to_lowercase()),
        s("/metadata/namespace"),
        s("/metadata/name"),
    )
}

fn status(code: u16, reason: &str, message: &str) -> (u16, Value) {
    let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                      "message": message, "reason": reason, "code": code});
    (code, body)
}

/// `k` and `k=v` terms, comma-separated.
fn selected(obj: &Value, selector: Option<&str>) -> bool {
    selector
        .unwrap_or("")
        .split(',')
        .filter(|t| !t.is_empty())
        .all(|term| {
            let label = |k: &str| {
                obj.pointer("/metadata/labels")
                    .and_then(|l| l.get(k))
                    .and_then(Value::as_str)
            };
            match term.split_once('=') {
                Some((k, v)) => label(k) == Some(v),
                None => label(term).is_some(),
            }
        })
}

impl FakeApi {
    pub(super) fn new(objects: Vec<Value>) -> Arc<Self> {
        let api = Arc::new(Self::default());
        for o in objects {
            api.put(o);
        }
        api
    }

    fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
        m.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Creates or replaces an object (keyed by kind, namespace, name).
    pub(super) fn put(&self, obj: Value) {
        let mut objects = Self::lock(&self.objects);
        let id = ident(&obj);
        objects.retain(|o| ident(o) != id);
        objects.push(obj);
    }

    pub(super) fn remove(&self, kind: &str, ns: &str, name: &str) {
        let id = (
            format!("{}s", kind.to_lowercase()),
            ns.to_owned(),
            name.to_owned(),
        );
        Self::lock(&self.objects).retain(|o| ident(o) != id);
    }

    pub(super) fn get(&self, kind: &str, ns: &str, name: &str) -> Option<Value> {
        let id = (
            format!("{}s", kind.to_lowercase()),
            ns.to_owned(),
            name.to_owned(),
        );
        Self::lock(&self.objects).iter().find(|o| ident(o) == id).cloned()
    }

    /// Every request so far as "VERB plural".
    pub(super) fn requests(&self) -> Vec<String> {
        Self::lock(&self.requests).clone()
    }

    /// Every request answers 500 while set.
    pub(super) fn set_failing(&self, failing: bool) {
        self.failing.store(failing, Ordering::SeqCst);
    }

    pub(super) fn client(self: &Arc<Self>) -> kube::Client {
        let api = self.clone();
        let svc = tower::service_fn(move |req: http::Request<kube::client::Body>| {
            let api = api.clone();
            async move {
                let (parts, body) = req.into_parts();
                let body = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
                let (code, value) = api.handle(&parts.method, &parts.uri, &body);
                let resp = http::Response::builder()
                    .status(code)
                    .header("content-type", "application/json")
                    .body(Full::new(Bytes::from(value.to_string())))
                    .unwrap_or_default();
                Ok::<_, Infallible>(resp)
            }
        });
        kube::Client::new(svc, "default")
    }

    fn handle(&self, method: &http::Method, uri: &http::Uri, body: &[u8]) -> (u16, Value) {
        let segs: Vec<&str> = uri.path().split('/').filter(|s| !s.is_empty()).collect();
        let rest = match segs.first() {
            Some(&"api") => segs.get(2..),
            Some(&"apis") => segs.get(3..),
            _ => None,
        }
        .unwrap_or(&[]);
        let (ns, plural, name) = match rest {
            ["namespaces", ns, plural, name] => (Some(*ns), *plural, Some(*name)),
            ["namespaces", ns, plural] => (Some(*ns), *plural, None),
            [plural] => (None, *plural, None),
            _ => return status(404, "NotFound", "no such path"),
        };
        Self::lock(&self.requests).push(format!("{method} {plural}"));
        if self.failing.load(Ordering::SeqCst) {
            return status(500, "InternalError", "injected failure");
        }
        let selector: Option<String> = uri.query().and_then(|q| {
            serde_urlencoded::from_str::<Vec<(String, String)>>(q)
                .ok()?
                .into_iter()
                .find(|(k, _)| k == "labelSelector")
                .map(|(_, v)| v)
        });
        let mut objects = Self::lock(&self.objects);
        let matches = |o: &Value| {
            let (p, n, m) = ident(o);
            p == plural && ns.is_none_or(|ns| ns == n) && name.is_none_or(|name| name == m)
        };
        match (method.as_str(), name) {
            ("GET", None) => {
                let items: Vec<Value> = objects
                    .iter()
                    .filter(|o| matches(o) && selected(o, selector.as_deref()))
                    .cloned()
                    .collect();
                (
                    200,
                    json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": "1"}, "items": items}),
                )
            }
            ("GET", Some(_)) => match objects.iter().find(|o| matches(o)) {
                Some(o) => (200, o.clone()),
                None => status(404, "NotFound", "not found"),
            },
            ("PATCH", Some(_)) => {
                let Some(obj) = objects.iter_mut().find(|o| matches(o)) else {
                    return status(404, "NotFound", "not found");
                };
                let patch: json_patch::Patch = match serde_json::from_slice(body) {
                    Ok(p) => p,
                    Err(e) => return status(400, "BadRequest", &e.to_string()),
                };
                let mut patched = obj.clone();
                match json_patch::patch(&mut patched, &patch) {
                    Ok(()) => {
                        *obj = patched.clone();
                        (200, patched)
                    }
                    Err(e) => status(422, "Invalid", &e.to_string()),
                }
            }
            _ => status(405, "MethodNotAllowed", "not supported by the fake"),
        }
    }
}
