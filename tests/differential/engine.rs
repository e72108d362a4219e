//! The sequences' steps, and running a sequence against one ground.

use super::compare::{Normaliser, Raw};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

/// One request of a sequence. `path`, `query` and `body` may name `{ns}` (the sequence's namespace),
/// `{rv}` (the resourceVersion of the last answer that had one, object or list), `{continue}` (the
/// last list's continue token), `{uid}` (the last object's uid) and `{rv@N}` (the resourceVersion of
/// step N's answer, counted from 1).
#[derive(Clone, Debug)]
pub struct Step {
    pub method: &'static str,
    pub path: String,
    pub query: String,
    pub ctype: &'static str,
    pub body: Option<String>,
    /// A watch: the body is read as a stream of events until the server ends it.
    pub watch: bool,
    /// Only the object's `metadata.managedFields` is compared (times masked).
    pub managed: bool,
    /// A step that sets the scene: only its status code is compared.
    pub setup: bool,
    /// A read repeated (every 200 ms, for up to 8 s) until the object is gone or has no owners; what
    /// is compared is whether that happened.
    pub eventually: Option<Eventually>,
    /// The `Accept` header (JSON unless a step asks for a Table).
    pub accept: &'static str,
    /// More request headers (impersonation).
    pub headers: Vec<(&'static str, String)>,
    /// List items are compared with their `kind` and `apiVersion` (elsewhere these are dropped, so
    /// that one difference does not repeat in every list).
    pub exact: bool,
}

#[derive(Clone, Debug)]
pub struct Sequence {
    pub name: &'static str,
    pub steps: Vec<Step>,
}

pub struct Area {
    pub name: &'static str,
    /// Where the expectations come from, when the area ports them.
    pub source: &'static str,
    pub sequences: fn() -> Vec<Sequence>,
}

pub const JSON: &str = "application/json";
pub const MERGE: &str = "application/merge-patch+json";
pub const JSON_PATCH: &str = "application/json-patch+json";
pub const STRATEGIC: &str = "application/strategic-merge-patch+json";
pub const APPLY: &str = "application/apply-patch+yaml";

fn step(method: &'static str, path: &str, ctype: &'static str, body: Option<String>) -> Step {
    let (path, query) = match path.split_once('?') {
        Some((p, q)) => (p.to_string(), q.to_string()),
        None => (path.to_string(), String::new()),
    };
    Step {
        method,
        path,
        query,
        ctype,
        body,
        watch: false,
        managed: false,
        setup: false,
        exact: false,
        accept: JSON,
        headers: Vec::new(),
        eventually: None,
    }
}

/// What an `eventually` step waits for: the garbage collector's work on a real control plane, or its
/// RBAC authorizer, which learns of a new binding from an informer a moment after the write.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Eventually {
    Gone,
    NoOwners,
    Allowed,
}

/// A read of `path` until the object is gone (404).
pub fn eventually_gone(path: &str) -> Step {
    let mut s = step("GET", path, JSON, None);
    s.eventually = Some(Eventually::Gone);
    s
}

/// A read of `path` until the object has no `ownerReferences` left.
pub fn eventually_orphaned(path: &str) -> Step {
    let mut s = step("GET", path, JSON, None);
    s.eventually = Some(Eventually::NoOwners);
    s
}

/// `s` (with its impersonation) repeated until it is no longer 403 Forbidden.
pub fn eventually_allowed(mut s: Step) -> Step {
    s.eventually = Some(Eventually::Allowed);
    s
}

pub fn get(path: &str) -> Step {
    step("GET", path, JSON, None)
}
pub fn delete(path: &str) -> Step {
    step("DELETE", path, JSON, None)
}
pub fn delete_with(path: &str, body: Value) -> Step {
    step("DELETE", path, JSON, Some(body.to_string()))
}
pub fn post(path: &str, body: Value) -> Step {
    step("POST", path, JSON, Some(body.to_string()))
}
pub fn post_raw(path: &str, body: &str) -> Step {
    step("POST", path, JSON, Some(body.to_string()))
}
pub fn put(path: &str, body: Value) -> Step {
    step("PUT", path, JSON, Some(body.to_string()))
}
pub fn patch(path: &str, ctype: &'static str, body: Value) -> Step {
    step("PATCH", path, ctype, Some(body.to_string()))
}
pub fn patch_raw(path: &str, ctype: &'static str, body: &str) -> Step {
    step("PATCH", path, ctype, Some(body.to_string()))
}
/// Server-side apply of a YAML (or JSON) body.
pub fn apply(path: &str, body: &str) -> Step {
    step("PATCH", path, APPLY, Some(body.to_string()))
}
/// A watch the server ends after a second.
pub fn watch(path: &str) -> Step {
    let mut s = step("GET", path, JSON, None);
    let sep = if s.query.is_empty() { "" } else { "&" };
    s.query = format!("watch=1&timeoutSeconds=1{sep}{}", s.query);
    s.watch = true;
    s
}

/// A read of `path`'s field ownership: each entry's manager, operation, subresource and fields.
pub fn managed_fields(path: &str) -> Step {
    let mut s = step("GET", path, JSON, None);
    s.managed = true;
    s
}

/// `s` compared by its status code alone.
pub fn setup(mut s: Step) -> Step {
    s.setup = true;
    s
}

/// `s` with list items compared whole.
pub fn exact(mut s: Step) -> Step {
    s.exact = true;
    s
}

/// The `Accept` kubectl sends for `kubectl get`: a server-side Table.
pub const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";

/// `s` asking for a Table.
pub fn table(mut s: Step) -> Step {
    s.accept = TABLE;
    s
}

/// `s` sent as `user` (kubectl's `--as`), with `groups`.
pub fn as_user(mut s: Step, user: &str, groups: &[&str]) -> Step {
    s.headers.push(("impersonate-user", user.to_string()));
    for g in groups {
        s.headers.push(("impersonate-group", g.to_string()));
    }
    s
}

pub fn seq(name: &'static str, steps: Vec<Step>) -> Sequence {
    Sequence { name, steps }
}

/// What one step got, normalised.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    pub code: u16,
    pub view: Value,
}

pub struct Ground {
    pub name: &'static str,
    client: kube::Client,
}

impl Ground {
    pub async fn from_kubeconfig(name: &'static str, path: &Path) -> Ground {
        let kc = kube::config::Kubeconfig::read_from(path).expect("kubeconfig reads");
        let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .expect("kubeconfig loads");
        Ground {
            name,
            client: kube::Client::try_from(config).expect("client builds"),
        }
    }

    async fn raw(&self, method: &str, uri: &str, ctype: &str, body: Option<&str>, watch: bool) -> Raw {
        self.send(method, uri, ctype, body, watch, JSON, &[]).await
    }

    #[allow(clippy::too_many_arguments)]
    async fn send(
        &self,
        method: &str,
        uri: &str,
        ctype: &str,
        body: Option<&str>,
        watch: bool,
        accept: &str,
        headers: &[(&'static str, String)],
    ) -> Raw {
        let mut req = http::Request::builder()
            .method(method)
            .uri(uri)
            .header("content-type", ctype)
            .header("accept", accept);
        for (k, v) in headers {
            req = req.header(*k, v);
        }
        let req = req
            .body(kube::client::Body::from(body.unwrap_or("").as_bytes().to_vec()))
            .expect("request builds");
        let res = match tokio::time::timeout(Duration::from_secs(20), self.client.send(req)).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => {
                return Raw {
                    code: 0,
                    warnings: vec![],
                    body: format!("transport error: {e}").into_bytes(),
                };
            }
            Err(_) => {
                return Raw {
                    code: 0,
                    warnings: vec![],
                    body: b"no answer within 20s".to_vec(),
                };
            }
        };
        let code = res.status().as_u16();
        let warnings = res
            .headers()
            .get_all("warning")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(warning_text)
            .collect();
        let mut body = res.into_body();
        let mut bytes = Vec::new();
        // A watch ends when the server's timeoutSeconds passes; the client's deadline is a safety net.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(if watch { 6 } else { 20 });
        while let Ok(Some(Ok(frame))) = tokio::time::timeout_at(deadline, body.frame()).await {
            if let Some(d) = frame.data_ref() {
                bytes.extend_from_slice(d);
            }
        }
        Raw {
            code,
            warnings,
            body: bytes,
        }
    }

    pub async fn version(&self) -> String {
        let r = self.raw("GET", "/version", JSON, None, false).await;
        let v: Value = serde_json::from_slice(&r.body).unwrap_or_default();
        v["gitVersion"].as_str().unwrap_or("").to_string()
    }

    /// Creates `crds` and waits until each is Established and its group version is discovered.
    pub async fn install_crds(
        &self,
        crds: &[k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition],
        timeout: Duration,
    ) {
        let path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
        for crd in crds {
            let body = serde_json::to_string(crd).unwrap();
            let r = self.raw("POST", path, JSON, Some(&body), false).await;
            assert!(
                r.code == 201 || r.code == 409,
                "creating CRD {:?}: {} {}",
                crd.metadata.name,
                r.code,
                String::from_utf8_lossy(&r.body)
            );
        }
        let start = std::time::Instant::now();
        for crd in crds {
            let name = crd.metadata.name.clone().unwrap_or_default();
            let group = &crd.spec.group;
            let versions: Vec<&str> = crd
                .spec
                .versions
                .iter()
                .filter(|v| v.served)
                .map(|v| v.name.as_str())
                .collect();
            loop {
                let r = self
                    .raw("GET", &format!("{path}/{name}"), JSON, None, false)
                    .await;
                let v: Value = serde_json::from_slice(&r.body).unwrap_or_default();
                let established = v["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| c["type"] == "Established" && c["status"] == "True");
                let mut served = established;
                for ver in &versions {
                    let d = self
                        .raw("GET", &format!("/apis/{group}/{ver}"), JSON, None, false)
                        .await;
                    served &= d.code == 200;
                }
                if served {
                    break;
                }
                assert!(
                    start.elapsed() < timeout,
                    "CRD {name} not Established and served within {timeout:?}"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }

    /// Runs `seq` in namespace `ns` (created first, with its `default` ServiceAccount, which a real
    /// server's ServiceAccount admission asks of every Pod) and returns each step's normalised answer.
    pub async fn run(&self, seq: &Sequence, ns: &str) -> Vec<Answer> {
        let ns_body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}).to_string();
        let r = self
            .raw("POST", "/api/v1/namespaces", JSON, Some(&ns_body), false)
            .await;
        assert!(
            r.code == 201,
            "{}: namespace {ns}: {} {}",
            self.name,
            r.code,
            String::from_utf8_lossy(&r.body)
        );
        let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}})
            .to_string();
        self.raw(
            "POST",
            &format!("/api/v1/namespaces/{ns}/serviceaccounts"),
            JSON,
            Some(&sa),
            false,
        )
        .await;

        let mut norm = Normaliser::default();
        let mut vars: HashMap<&str, String> = HashMap::new();
        vars.insert("{ns}", ns.to_string());
        let mut out = Vec::new();
        for (n, s) in seq.steps.iter().enumerate() {
            let subst = |t: &str| {
                let mut t = t.to_string();
                for (k, v) in &vars {
                    t = t.replace(k, v);
                }
                t
            };
            let path = subst(&s.path);
            let query = subst(&s.query);
            let uri = if query.is_empty() {
                path
            } else {
                format!("{path}?{}", encode_query(&query))
            };
            let body = s.body.as_deref().map(subst);
            // A read at resourceVersion 0 may be served from kube-apiserver's watch cache, which
            // trails the last write by a moment: give it that moment on both grounds.
            if query.split('&').any(|kv| kv == "resourceVersion=0") {
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            if let Some(until) = s.eventually {
                let start = std::time::Instant::now();
                let done = loop {
                    let r = match until {
                        Eventually::Allowed => {
                            self.send(s.method, &uri, JSON, body.as_deref(), false, JSON, &s.headers)
                                .await
                        }
                        _ => self.raw("GET", &uri, JSON, None, false).await,
                    };
                    let v: Value = serde_json::from_slice(&r.body).unwrap_or_default();
                    let done = match until {
                        Eventually::Allowed => r.code != 403,
                        Eventually::Gone => r.code == 404,
                        Eventually::NoOwners => {
                            r.code == 200
                                && v.pointer("/metadata/ownerReferences")
                                    .and_then(Value::as_array)
                                    .is_none_or(Vec::is_empty)
                        }
                    };
                    if done || start.elapsed() > Duration::from_secs(8) {
                        break done;
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                };
                out.push(Answer {
                    code: 200,
                    view: json!({"eventually": format!("{until:?}"), "happened": done}),
                });
                continue;
            }
            let raw = self
                .send(
                    s.method,
                    &uri,
                    s.ctype,
                    body.as_deref(),
                    s.watch,
                    s.accept,
                    &s.headers,
                )
                .await;
            if s.watch {
                out.push(norm.watch_answer(&raw));
                continue;
            }
            let parsed: Option<Value> = serde_json::from_slice(&raw.body).ok();
            if s.managed {
                let mut mf = parsed
                    .as_ref()
                    .and_then(|v| v.pointer("/metadata/managedFields"))
                    .cloned()
                    .unwrap_or(json!([]));
                if let Some(arr) = mf.as_array_mut() {
                    for e in arr.iter_mut() {
                        if e.get("time").is_some() {
                            e["time"] = json!("<time>");
                        }
                    }
                }
                out.push(Answer {
                    code: raw.code,
                    view: json!({"managedFields": mf}),
                });
                continue;
            }
            if let Some(v) = &parsed {
                if let Some(rv) = v.pointer("/metadata/resourceVersion").and_then(Value::as_str)
                    && !rv.is_empty()
                {
                    vars.insert("{rv}", rv.to_string());
                    vars.insert(
                        Box::leak(format!("{{rv@{}}}", n + 1).into_boxed_str()),
                        rv.to_string(),
                    );
                }
                if let Some(c) = v.pointer("/metadata/continue").and_then(Value::as_str) {
                    vars.insert("{continue}", c.to_string());
                }
                if let Some(u) = v.pointer("/metadata/uid").and_then(Value::as_str) {
                    vars.insert("{uid}", u.to_string());
                }
            }
            if s.setup {
                out.push(Answer {
                    code: raw.code,
                    view: json!("<setup>"),
                });
                continue;
            }
            norm.exact = s.exact;
            out.push(norm.answer(&raw, parsed));
        }
        out
    }
}

/// Percent-encodes each query value (the sequences write them plainly: `labelSelector=a in (x,y)`).
fn encode_query(q: &str) -> String {
    q.split('&')
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) => format!(
                "{k}={}",
                percent_encoding::utf8_percent_encode(v, percent_encoding::NON_ALPHANUMERIC)
            ),
            None => kv.to_string(),
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// `299 - "text"` → `text`.
fn warning_text(h: &str) -> String {
    let t = h.strip_prefix("299 - ").unwrap_or(h);
    t.trim_matches('"').replace("\\\"", "\"")
}
