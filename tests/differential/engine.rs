//! Running a sequence against one ground, normalising what it answers, comparing two grounds' answers.

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
    }
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
        let req = http::Request::builder()
            .method(method)
            .uri(uri)
            .header("content-type", ctype)
            .header("accept", "application/json")
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
            let raw = self.raw(s.method, &uri, s.ctype, body.as_deref(), s.watch).await;
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

struct Raw {
    code: u16,
    warnings: Vec<String>,
    body: Vec<u8>,
}

/// Maps what differs between any two servers by nature to stable tokens.
#[derive(Default)]
struct Normaliser {
    rvs: Vec<String>,
    exact: bool,
}

/// The ConfigMap kube-controller-manager's root-ca-cert-publisher writes into every namespace: a
/// controller's doing, not the API server's, so lists and watches leave it out.
const ROOT_CA: &str = "kube-root-ca.crt";

impl Normaliser {
    fn rv(&mut self, rv: &str) -> String {
        let i = match self.rvs.iter().position(|r| r == rv) {
            Some(i) => i,
            None => {
                self.rvs.push(rv.to_string());
                self.rvs.len() - 1
            }
        };
        format!("<rv{}>", i + 1)
    }

    fn answer(&mut self, raw: &Raw, parsed: Option<Value>) -> Answer {
        let mut view = serde_json::Map::new();
        if !raw.warnings.is_empty() {
            view.insert("warnings".into(), json!(raw.warnings));
        }
        match parsed {
            Some(v) if v["kind"] == "Status" => {
                for k in ["status", "reason", "code"] {
                    if let Some(x) = v.get(k) {
                        view.insert(k.into(), x.clone());
                    }
                }
                if let Some(m) = v["message"].as_str() {
                    view.insert("message".into(), Value::String(message(m)));
                }
                if let Some(d) = v.get("details") {
                    let mut d = d.clone();
                    if let Some(o) = d.as_object_mut() {
                        o.remove("uid");
                        o.remove("retryAfterSeconds");
                    }
                    if let Some(causes) = d.get_mut("causes").and_then(Value::as_array_mut) {
                        for c in causes.iter_mut() {
                            if let Some(m) = c.get("message").and_then(Value::as_str) {
                                c["message"] = Value::String(message(m));
                            }
                        }
                    }
                    view.insert("details".into(), d);
                }
            }
            Some(mut v) => {
                self.object(&mut v);
                view.insert("object".into(), v);
            }
            None => {
                let text = String::from_utf8_lossy(&raw.body).trim().to_string();
                if !text.is_empty() {
                    view.insert("text".into(), Value::String(message(&text)));
                }
            }
        }
        Answer {
            code: raw.code,
            view: Value::Object(view),
        }
    }

    fn watch_answer(&mut self, raw: &Raw) -> Answer {
        let mut events = Vec::new();
        let text = String::from_utf8_lossy(&raw.body);
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let Ok(ev) = serde_json::from_str::<Value>(line) else {
                events.push(json!({"unparsed": message(line)}));
                continue;
            };
            let ty = ev["type"].as_str().unwrap_or("").to_string();
            let obj = &ev["object"];
            if obj["metadata"]["name"] == ROOT_CA {
                continue;
            }
            if ty == "BOOKMARK" {
                // Periodic bookmarks come when a server likes; the initial-events-end one is promised.
                if obj.pointer("/metadata/annotations/k8s.io~1initial-events-end") == Some(&json!("true")) {
                    events.push(json!({"type": "BOOKMARK", "initialEventsEnd": true}));
                }
                continue;
            }
            if ty == "ERROR" {
                events.push(json!({"type": ty, "code": obj["code"], "reason": obj["reason"],
                    "message": message(obj["message"].as_str().unwrap_or(""))}));
                continue;
            }
            let rv = obj
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .map(|r| self.rv(r));
            events.push(json!({"type": ty, "name": obj["metadata"]["name"], "rv": rv}));
        }
        if raw.code != 200 {
            let parsed = serde_json::from_slice(&raw.body).ok();
            return self.answer(raw, parsed);
        }
        Answer {
            code: raw.code,
            view: json!({"events": events}),
        }
    }

    fn object(&mut self, v: &mut Value) {
        let kind = v["kind"].as_str().unwrap_or("").to_string();
        if kind.ends_with("List") || v.get("items").is_some_and(Value::is_array) {
            if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
                if m.get("resourceVersion").is_some() {
                    m.insert("resourceVersion".into(), json!("<list-rv>"));
                }
                if m.get("continue")
                    .and_then(Value::as_str)
                    .is_some_and(|c| !c.is_empty())
                {
                    m.insert("continue".into(), json!("<continue>"));
                }
            }
            if let Some(items) = v.get_mut("items").and_then(Value::as_array_mut) {
                items.retain(|i| i["metadata"]["name"] != ROOT_CA);
                for i in items.iter_mut() {
                    self.object(i);
                    if !self.exact
                        && let Some(o) = i.as_object_mut()
                    {
                        o.remove("kind");
                        o.remove("apiVersion");
                    }
                }
            }
            return;
        }
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            for k in ["uid", "creationTimestamp", "deletionTimestamp"] {
                if m.contains_key(k) {
                    m.insert(k.into(), json!(format!("<{k}>")));
                }
            }
            if let Some(rv) = m
                .get("resourceVersion")
                .and_then(Value::as_str)
                .map(str::to_string)
            {
                let t = self.rv(&rv);
                m.insert("resourceVersion".into(), json!(t));
            }
            if let (Some(g), Some(n)) = (
                m.get("generateName").and_then(Value::as_str),
                m.get("name").and_then(Value::as_str),
            ) && n.len() == g.len() + 5
                && n.starts_with(g)
            {
                let t = format!("{g}<suffix>");
                m.insert("name".into(), json!(t));
            }
            if let Some(refs) = m.get_mut("ownerReferences").and_then(Value::as_array_mut) {
                for r in refs {
                    if r.get("uid").is_some() {
                        r["uid"] = json!("<uid>");
                    }
                }
            }
            // Field ownership is compared where a sequence reads it (`managed_fields` steps); elsewhere
            // it would repeat one difference in every answer.
            m.remove("managedFields");
        }
        // Controllers of the real control plane write these as they like; a read back compares spec.
        if matches!(
            kind.as_str(),
            "Pod" | "Job" | "Namespace" | "Deployment" | "ServiceAccount"
        ) && let Some(o) = v.as_object_mut()
        {
            o.remove("status");
        }
        if kind == "ServiceAccount"
            && let Some(o) = v.as_object_mut()
        {
            o.remove("secrets");
        }
        if kind == "Service" {
            for p in ["/spec/clusterIP"] {
                if let Some(x) = v.pointer_mut(p)
                    && x.as_str().is_some_and(|s| s != "None" && !s.is_empty())
                {
                    *x = json!("<ip>");
                }
            }
            if let Some(ips) = v.pointer_mut("/spec/clusterIPs").and_then(Value::as_array_mut) {
                for x in ips {
                    if x.as_str().is_some_and(|s| s != "None") {
                        *x = json!("<ip>");
                    }
                }
            }
            if let Some(ports) = v.pointer_mut("/spec/ports").and_then(Value::as_array_mut) {
                for p in ports {
                    if p.get("nodePort").is_some() {
                        p["nodePort"] = json!("<port>");
                    }
                }
            }
        }
        timestamps(v);
    }
}

/// Condition times and the like: present or not, never their value; uids anywhere (a Job's
/// controller-uid label and selector) masked.
fn timestamps(v: &mut Value) {
    match v {
        Value::String(s) if s.len() >= 36 => {
            let m = message(s);
            if m != *s {
                *s = m;
            }
        }
        Value::Object(o) => {
            for (k, x) in o.iter_mut() {
                if matches!(
                    k.as_str(),
                    "lastTransitionTime" | "lastUpdateTime" | "lastHeartbeatTime" | "time" | "startTime"
                ) && x.is_string()
                {
                    *x = json!("<time>");
                } else {
                    timestamps(x);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(timestamps),
        _ => {}
    }
}

/// The stable part of a message: uids, resourceVersions in parentheses and IPs masked.
fn message(m: &str) -> String {
    use std::sync::LazyLock;
    static UID: LazyLock<regex::Regex> = LazyLock::new(|| {
        regex::Regex::new(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}").unwrap()
    });
    static RV: LazyLock<regex::Regex> =
        LazyLock::new(|| regex::Regex::new(r"(resource ?[vV]ersion:? ?)\d+|\((\d+)\)").unwrap());
    let m = UID.replace_all(m, "<uid>");
    let m = RV.replace_all(&m, |c: &regex::Captures| match c.get(1) {
        Some(p) => format!("{}<rv>", p.as_str()),
        None => "(<rv>)".to_string(),
    });
    m.into_owned()
}

/// How two grounds' answers to one sequence compare.
pub enum Outcome {
    Match,
    /// The first differing field, with both values.
    Differ(String),
    /// One ground does not serve a request the other does.
    Unsupported(String),
}

fn unsupported(a: &Answer) -> bool {
    a.code == 405
        || a.code == 415
        || (a.code == 404
            && a.view["message"]
                .as_str()
                .is_some_and(|m| m.contains("could not find the requested resource")))
}

pub fn compare(embedded: &[Answer], real: &[Answer]) -> Outcome {
    for (i, (a, b)) in embedded.iter().zip(real).enumerate() {
        if a == b {
            continue;
        }
        let first = if a.code != b.code {
            format!(
                "step {} code: {} {} | {} {}",
                i + 1,
                a.code,
                gist(&a.view),
                b.code,
                gist(&b.view)
            )
        } else {
            let (path, x, y) = first_difference("", &a.view, &b.view).unwrap_or_default();
            format!("step {} {path}: {} | {}", i + 1, short(&x), short(&y))
        };
        if unsupported(a) != unsupported(b) {
            let side = if unsupported(a) {
                "embedded"
            } else {
                "kube-apiserver"
            };
            return Outcome::Unsupported(format!("{side} does not serve it; {first}"));
        }
        return Outcome::Differ(first);
    }
    Outcome::Match
}

/// An answer in a few words: a Status's reason and message, or the kind of object returned.
fn gist(v: &Value) -> String {
    if let Some(o) = v.get("object") {
        return format!("({} returned)", o["kind"].as_str().unwrap_or("object"));
    }
    if let Some(e) = v.get("events") {
        return format!("({} events)", e.as_array().map_or(0, Vec::len));
    }
    let reason = v["reason"].as_str().unwrap_or("");
    let message = v["message"].as_str().or(v["text"].as_str()).unwrap_or("");
    let s = format!("{reason} {message:?}");
    if s.chars().count() > 140 {
        format!("{}…", s.chars().take(140).collect::<String>())
    } else {
        s
    }
}

fn short(v: &Value) -> String {
    let s = match v {
        Value::Object(o) if o.contains_key("reason") || o.contains_key("message") => json!({
            "reason": o.get("reason"), "message": o.get("message")
        })
        .to_string(),
        _ => v.to_string(),
    };
    if s.chars().count() > 160 {
        format!("{}…", s.chars().take(160).collect::<String>())
    } else {
        s
    }
}

fn first_difference(at: &str, a: &Value, b: &Value) -> Option<(String, Value, Value)> {
    if a == b {
        return None;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let (p, q) = (
                    x.get(k).cloned().unwrap_or(json!("<absent>")),
                    y.get(k).cloned().unwrap_or(json!("<absent>")),
                );
                if let Some(d) = first_difference(&format!("{at}.{k}"), &p, &q) {
                    return Some(d);
                }
            }
            None
        }
        (Value::Array(x), Value::Array(y)) if x.len() != y.len() => {
            Some((format!("{at} length"), json!(x.len()), json!(y.len())))
        }
        (Value::Array(x), Value::Array(y)) => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (p, q))| first_difference(&format!("{at}[{i}]"), p, q)),
        _ => Some((at.to_string(), a.clone(), b.clone())),
    }
}
