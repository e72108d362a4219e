//! What differs between two servers by nature, normalised away; two grounds' answers compared.

use super::engine::Answer;
use serde_json::{Value, json};

pub struct Raw {
    pub code: u16,
    pub warnings: Vec<String>,
    pub body: Vec<u8>,
}

/// Maps what differs between any two servers by nature to stable tokens.
#[derive(Default)]
pub struct Normaliser {
    rvs: Vec<String>,
    pub exact: bool,
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

    pub fn answer(&mut self, raw: &Raw, parsed: Option<Value>) -> Answer {
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

    pub fn watch_answer(&mut self, raw: &Raw) -> Answer {
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

    /// A Table: its columns (names, types, priorities; the descriptions are OpenAPI prose), and its rows
    /// with the Age (and every `date`) cell masked and each row's object normalised.
    fn table(&mut self, v: &mut Value) {
        let (mut ages, mut ips) = (Vec::new(), Vec::new());
        if let Some(cols) = v.get_mut("columnDefinitions").and_then(Value::as_array_mut) {
            for (i, c) in cols.iter_mut().enumerate() {
                if c["name"] == "Age" || c["type"] == "date" {
                    ages.push(i);
                }
                if c["name"] == "Cluster-IP" || c["name"] == "IP" {
                    ips.push(i);
                }
                if let Some(o) = c.as_object_mut() {
                    o.remove("description");
                }
            }
        }
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut)
            && m.contains_key("resourceVersion")
        {
            m.insert("resourceVersion".into(), json!("<list-rv>"));
        }
        if let Some(rows) = v.get_mut("rows").and_then(Value::as_array_mut) {
            // The namespace's kube-root-ca.crt, by its object or (includeObject=None) its name cell.
            rows.retain(|r| r["object"]["metadata"]["name"] != ROOT_CA && r["cells"][0] != ROOT_CA);
            for r in rows.iter_mut() {
                if let Some(cells) = r.get_mut("cells").and_then(Value::as_array_mut) {
                    for &i in &ages {
                        if let Some(c) = cells.get_mut(i) {
                            *c = json!("<age>");
                        }
                    }
                    for &i in &ips {
                        if let Some(c) = cells.get_mut(i) {
                            *c = json!("<ip>");
                        }
                    }
                    // Uids in a cell (a Job's selector names its controller-uid).
                    for c in cells.iter_mut() {
                        if let Some(s) = c.as_str() {
                            *c = json!(message(s));
                        }
                    }
                }
                if let Some(o) = r.get_mut("object") {
                    self.object(o);
                }
            }
        }
    }

    fn object(&mut self, v: &mut Value) {
        let kind = v["kind"].as_str().unwrap_or("").to_string();
        if kind == "Table" {
            self.table(v);
            return;
        }
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
        let mut generated = None;
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
                generated = Some((n.to_string(), t.clone()));
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
            // Their status writes (kube-controller-manager's, at its own pace) move the resourceVersion.
            if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut)
                && m.contains_key("resourceVersion")
            {
                m.insert("resourceVersion".into(), json!("<rv written by controllers>"));
            }
        }
        if kind == "TokenRequest" {
            for p in ["/status/token", "/status/expirationTimestamp"] {
                if let Some(x) = v.pointer_mut(p) {
                    *x = json!("<issued>");
                }
            }
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
        // A generated name copied into the object (a Job's `job-name` labels) is masked the same way.
        if let Some((n, t)) = generated {
            replace_string(v, &n, &t);
        }
        timestamps(v);
    }
}

fn replace_string(v: &mut Value, from: &str, to: &str) {
    match v {
        Value::String(s) if s == from => *s = to.to_string(),
        Value::Object(o) => o.values_mut().for_each(|x| replace_string(x, from, to)),
        Value::Array(a) => a.iter_mut().for_each(|x| replace_string(x, from, to)),
        _ => {}
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
