//! The gateway's routing table, decided in pure functions: which Gateway listeners exist, which
//! HTTPRoute rules attach to each, and for one request, which rule matches and which backend its
//! weights pick (Gateway API v1 `HTTPRoute` semantics, the subset described in `src/embedded/README.md`).

use std::collections::BTreeMap;

use serde_json::Value;

/// A Service backend of a rule: `namespace/name`, the Service port, its weight.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Backend {
    pub service: String,
    pub port: u16,
    pub weight: u32,
    /// Why requests for this backend get a 500 instead (a kind, a namespace or a port we cannot use).
    pub invalid: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PathMatch {
    Exact(String),
    /// Element-wise: `/a` matches `/a`, `/a/` and `/a/b`, not `/ab`. Stored without a trailing slash.
    Prefix(String),
    /// A match type this gateway does not implement (e.g. `RegularExpression`): matches nothing.
    Unsupported(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Match {
    pub path: PathMatch,
    pub method: Option<String>,
    /// Exact header matches, names lower-cased. `None` value: a header match type we do not implement.
    pub headers: Vec<(String, Option<String>)>,
    /// Exact query parameter matches.
    pub query: Vec<(String, Option<String>)>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    pub matches: Vec<Match>,
    pub backends: Vec<Backend>,
    /// For precedence ties: the route's creation time, its `namespace/name`, the rule's index.
    pub order: (String, String, usize),
    pub hostnames: Vec<String>,
}

/// One HTTP listener of one Gateway.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listener {
    /// `namespace/name` of the Gateway.
    pub gateway: String,
    pub name: String,
    pub port: u16,
    pub hostname: Option<String>,
    /// The namespaces it takes routes from (`allowedRoutes.namespaces`).
    pub namespaces: FromNamespaces,
    /// Whether `allowedRoutes.kinds` lets HTTPRoutes attach (no kinds: an HTTP listener's default,
    /// HTTPRoute).
    pub http_routes: bool,
    pub rules: Vec<Rule>,
}

/// `allowedRoutes.namespaces.from` of a listener (Gateway API v1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FromNamespaces {
    /// `Same` (the default): the Gateway's own namespace.
    Same(String),
    /// `All`.
    All,
    /// `Selector`: namespaces whose labels `allowedRoutes.namespaces.selector` (a
    /// `metav1.LabelSelector`) selects; `None` when it is missing, which selects none.
    Selector(Option<Value>),
}

/// The labels of each Namespace by name, as the API server holds them. A namespace not listed has
/// only `kubernetes.io/metadata.name`, which the API server sets on every Namespace.
pub type NamespaceLabels = BTreeMap<String, BTreeMap<String, String>>;

/// The label the API server puts on every Namespace: its name.
const METADATA_NAME_LABEL: &str = "kubernetes.io/metadata.name";

impl Listener {
    /// Whether a route of namespace `ns` may attach (by namespace and kind), as Gateway API's
    /// `allowedRoutes` says.
    pub fn admits(&self, ns: &str, labels: &NamespaceLabels) -> bool {
        self.http_routes
            && match &self.namespaces {
                FromNamespaces::Same(own) => own == ns,
                FromNamespaces::All => true,
                FromNamespaces::Selector(None) => false,
                FromNamespaces::Selector(Some(sel)) => {
                    let mut l = labels.get(ns).cloned().unwrap_or_default();
                    l.insert(METADATA_NAME_LABEL.to_string(), ns.to_string());
                    crate::embedded::selector::selector_matches(sel, &l)
                }
            }
    }
}

/// Whether `allowedRoutes.kinds` of listener `l` lets HTTPRoutes attach: absent or empty, the HTTP
/// protocol's default (HTTPRoute); else an entry of kind `HTTPRoute` in group
/// `gateway.networking.k8s.io` (the default group).
fn allows_http_routes(l: &Value) -> bool {
    let kinds = l
        .pointer("/allowedRoutes/kinds")
        .and_then(Value::as_array)
        .filter(|k| !k.is_empty());
    kinds.is_none_or(|ks| {
        ks.iter().any(|k| {
            s(k, "/kind") == Some("HTTPRoute")
                && matches!(s(k, "/group"), None | Some("gateway.networking.k8s.io"))
        })
    })
}

/// What one request needs the table to see.
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    pub host: &'a str,
    pub method: &'a str,
    pub path: &'a str,
    pub query: &'a str,
    pub headers: &'a [(String, String)],
}

fn s<'a>(v: &'a Value, p: &str) -> Option<&'a str> {
    v.pointer(p).and_then(Value::as_str)
}

/// The HTTP listeners of a Gateway (as JSON), each with no rule yet.
pub fn listeners(gw: &Value) -> Vec<Listener> {
    let ns = s(gw, "/metadata/namespace").unwrap_or("").to_owned();
    let key = format!("{ns}/{}", s(gw, "/metadata/name").unwrap_or(""));
    let mut out = Vec::new();
    for l in gw
        .pointer("/spec/listeners")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if s(l, "/protocol") != Some("HTTP") {
            continue;
        }
        let Some(port) = l
            .get("port")
            .and_then(Value::as_u64)
            .and_then(|p| u16::try_from(p).ok())
            .filter(|p| *p > 0)
        else {
            continue;
        };
        let namespaces = match s(l, "/allowedRoutes/namespaces/from").unwrap_or("Same") {
            "All" => FromNamespaces::All,
            "Selector" => FromNamespaces::Selector(l.pointer("/allowedRoutes/namespaces/selector").cloned()),
            _ => FromNamespaces::Same(ns.clone()),
        };
        out.push(Listener {
            gateway: key.clone(),
            name: s(l, "/name").unwrap_or("").to_owned(),
            port,
            hostname: s(l, "/hostname").map(str::to_owned),
            namespaces,
            http_routes: allows_http_routes(l),
            rules: Vec::new(),
        });
    }
    out
}

fn parse_match(m: &Value) -> Match {
    let path = match (
        s(m, "/path/type").unwrap_or("PathPrefix"),
        s(m, "/path/value").unwrap_or("/"),
    ) {
        ("Exact", v) => PathMatch::Exact(v.to_owned()),
        ("PathPrefix", v) => PathMatch::Prefix(v.trim_end_matches('/').to_owned()),
        (other, _) => PathMatch::Unsupported(other.to_owned()),
    };
    let pairs = |field: &str, lower: bool| -> Vec<(String, Option<String>)> {
        m.get(field)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|h| {
                let name = s(h, "/name").unwrap_or("");
                let name = if lower {
                    name.to_ascii_lowercase()
                } else {
                    name.to_owned()
                };
                let value = (s(h, "/type").unwrap_or("Exact") == "Exact")
                    .then(|| s(h, "/value").unwrap_or("").to_owned());
                (name, value)
            })
            .collect()
    };
    Match {
        path,
        method: s(m, "/method").map(str::to_owned),
        headers: pairs("headers", true),
        query: pairs("queryParams", false),
    }
}

fn parse_backend(b: &Value, route_ns: &str) -> Backend {
    let weight = b
        .get("weight")
        .and_then(Value::as_u64)
        .map_or(1, |w| u32::try_from(w.min(1_000_000)).unwrap_or(1_000_000));
    let name = s(b, "/name").unwrap_or("");
    let ns = s(b, "/namespace").unwrap_or(route_ns);
    let port = b
        .get("port")
        .and_then(Value::as_u64)
        .and_then(|p| u16::try_from(p).ok())
        .unwrap_or(0);
    let invalid = if !matches!(s(b, "/group"), None | Some(""))
        || !matches!(s(b, "/kind"), None | Some("Service"))
    {
        Some(format!("backendRef {name}: only core Services are supported"))
    } else if ns != route_ns {
        Some(format!(
            "backendRef {ns}/{name}: another namespace needs a ReferenceGrant, which this gateway does not read"
        ))
    } else if port == 0 {
        Some(format!("backendRef {name}: port is required for a Service"))
    } else {
        None
    };
    Backend {
        service: format!("{ns}/{name}"),
        port,
        weight,
        invalid,
    }
}

/// Attaches an HTTPRoute (as JSON) to the listeners it names, with no Namespace labels known.
pub fn attach(route: &Value, listeners: &mut [Listener]) {
    attach_with(route, listeners, &NamespaceLabels::new());
}

/// The Gateway (`namespace/name`), sectionName and port a parentRef of a route in namespace `ns`
/// names; `None` for a parent that is not a Gateway.
fn gateway_parent<'a>(p: &'a Value, ns: &str) -> Option<(String, Option<&'a str>, Option<u64>)> {
    if !matches!(s(p, "/group"), None | Some("gateway.networking.k8s.io"))
        || !matches!(s(p, "/kind"), None | Some("Gateway"))
    {
        return None;
    }
    let gw = format!(
        "{}/{}",
        s(p, "/namespace").unwrap_or(ns),
        s(p, "/name").unwrap_or("")
    );
    Some((gw, s(p, "/sectionName"), p.get("port").and_then(Value::as_u64)))
}

/// Whether listener `l` is one that parentRef's `section` and `port` name.
fn named(l: &Listener, section: Option<&str>, port: Option<u64>) -> bool {
    section.is_none_or(|sn| sn == l.name) && port.is_none_or(|pt| pt == u64::from(l.port))
}

/// Why a Gateway does not accept parentRef `parent` of `route` (both JSON), as Gateway API's route
/// parent status says it: `None` when a listener it names admits the route; else the `Accepted=False`
/// reason and message: `NoMatchingParent` when no HTTP listener of `listeners` (all of the
/// Gateways') has the sectionName and port it names, `NotAllowedByListeners` when some do but
/// none admits the route's namespace or kind (`allowedRoutes`). A parent that is not a Gateway, or
/// a Gateway not among `listeners`, is not this gateway's to judge (`None`).
pub fn parent_refusal(
    route: &Value,
    parent: &Value,
    listeners: &[Listener],
    labels: &NamespaceLabels,
) -> Option<(&'static str, String)> {
    let ns = s(route, "/metadata/namespace").unwrap_or("");
    let (gw, section, port) = gateway_parent(parent, ns)?;
    let of_gateway: Vec<&Listener> = listeners.iter().filter(|l| l.gateway == gw).collect();
    if of_gateway.is_empty() {
        return None;
    }
    let candidates: Vec<&&Listener> = of_gateway.iter().filter(|l| named(l, section, port)).collect();
    if candidates.is_empty() {
        return Some((
            "NoMatchingParent",
            format!("Gateway {gw} has no HTTP listener with the sectionName and port this parentRef names"),
        ));
    }
    if candidates.iter().any(|l| l.admits(ns, labels)) {
        return None;
    }
    Some((
        "NotAllowedByListeners",
        format!(
            "no listener of Gateway {gw} it names allows an HTTPRoute from namespace {ns} (allowedRoutes)"
        ),
    ))
}

/// Attaches an HTTPRoute (as JSON) to the listeners it names that admit it (`allowedRoutes`, with
/// the Namespaces' `labels` for a `Selector`).
pub fn attach_with(route: &Value, listeners: &mut [Listener], labels: &NamespaceLabels) {
    let ns = s(route, "/metadata/namespace").unwrap_or("");
    let order_key = (
        s(route, "/metadata/creationTimestamp").unwrap_or("").to_owned(),
        format!("{ns}/{}", s(route, "/metadata/name").unwrap_or("")),
    );
    let hostnames: Vec<String> = route
        .pointer("/spec/hostnames")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|h| h.as_str().map(str::to_ascii_lowercase))
        .collect();
    let rules: Vec<Rule> = route
        .pointer("/spec/rules")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, r)| {
            let mut matches: Vec<Match> = r
                .get("matches")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(parse_match)
                .collect();
            if matches.is_empty() {
                matches.push(parse_match(&Value::Null));
            }
            let backends = r
                .get("backendRefs")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|b| parse_backend(b, ns))
                .collect();
            Rule {
                matches,
                backends,
                order: (order_key.0.clone(), order_key.1.clone(), i),
                hostnames: hostnames.clone(),
            }
        })
        .collect();
    for p in route
        .pointer("/spec/parentRefs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let Some((gw, section, port)) = gateway_parent(p, ns) else {
            continue;
        };
        for l in listeners.iter_mut().filter(|l| l.gateway == gw) {
            if l.admits(ns, labels) && named(l, section, port) {
                l.rules.extend(rules.iter().cloned());
            }
        }
    }
}

/// Whether `host` matches a hostname pattern (`*.example.com` matches one or more labels before it).
fn host_matches(pattern: &str, host: &str) -> bool {
    match pattern.strip_prefix("*.") {
        Some(suffix) => {
            host.len() > suffix.len() + 1
                && host.ends_with(suffix)
                && host[..host.len() - suffix.len()].ends_with('.')
        }
        None => pattern.eq_ignore_ascii_case(host),
    }
}

fn path_matches(m: &PathMatch, path: &str) -> bool {
    match m {
        PathMatch::Exact(v) => v == path,
        PathMatch::Prefix(p) => {
            p.is_empty()
                || path == p
                || path
                    .strip_prefix(p.as_str())
                    .is_some_and(|rest| rest.starts_with('/'))
        }
        PathMatch::Unsupported(_) => false,
    }
}

fn query_value<'a>(query: &'a str, name: &str) -> Option<&'a str> {
    query.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        (k == name).then_some(v)
    })
}

fn matches(m: &Match, r: &Request<'_>) -> bool {
    path_matches(&m.path, r.path)
        && m.method.as_deref().is_none_or(|x| x == r.method)
        && m.headers.iter().all(|(n, v)| {
            v.as_ref().is_some_and(|v| {
                r.headers
                    .iter()
                    .any(|(hn, hv)| hn.eq_ignore_ascii_case(n) && hv == v)
            })
        })
        && m.query
            .iter()
            .all(|(n, v)| v.as_deref().is_some_and(|v| query_value(r.query, n) == Some(v)))
}

/// A match's precedence: exact path, prefix length, method, header count, query count.
type Rank = (u8, usize, u8, usize, usize);

/// Gateway API precedence among matching rules: an exact path, then the longest prefix, then a method,
/// then the most header matches, then the most query matches (higher sorts first).
fn rank(m: &Match) -> Rank {
    let (exact, len) = match &m.path {
        PathMatch::Exact(v) => (1, v.len()),
        PathMatch::Prefix(p) => (0, p.len()),
        PathMatch::Unsupported(_) => (0, 0),
    };
    (
        exact,
        len,
        u8::from(m.method.is_some()),
        m.headers.len(),
        m.query.len(),
    )
}

/// The listener of the Gateway listening on `port` whose hostname `host` matches (most specific first),
/// then the rule that matches the request best; None: no route (a 404).
pub fn pick_rule<'a>(listeners: &'a [Listener], port: u16, r: &Request<'_>) -> Option<&'a Rule> {
    let host = r
        .host
        .rsplit_once(':')
        .filter(|(_, p)| p.chars().all(|c| c.is_ascii_digit()))
        .map_or(r.host, |(h, _)| h)
        .to_ascii_lowercase();
    let listener = listeners
        .iter()
        .filter(|l| l.port == port && l.hostname.as_deref().is_none_or(|h| host_matches(h, &host)))
        // An exact hostname beats a wildcard, which beats none.
        .max_by_key(|l| {
            l.hostname.as_deref().map_or(0, |h| {
                if h.starts_with("*.") {
                    1 + h.len()
                } else {
                    1000 + h.len()
                }
            })
        })?;
    let mut best: Option<(&Rule, Rank)> = None;
    for rule in &listener.rules {
        if !rule.hostnames.is_empty() && !rule.hostnames.iter().any(|h| host_matches(h, &host)) {
            continue;
        }
        for m in rule.matches.iter().filter(|m| matches(m, r)) {
            let k = rank(m);
            let better = match &best {
                None => true,
                Some((b, bk)) => k > *bk || (k == *bk && rule.order < b.order),
            };
            if better {
                best = Some((rule, k));
            }
        }
    }
    best.map(|(r, _)| r)
}

/// The backend a draw `roll` (uniform in `0..total weight`) lands on; None when every weight is 0.
pub fn pick_backend(rule: &Rule, roll: u64) -> Option<&Backend> {
    let mut left = roll;
    for b in rule.backends.iter().filter(|b| b.weight > 0) {
        if left < u64::from(b.weight) {
            return Some(b);
        }
        left -= u64::from(b.weight);
    }
    None
}

pub fn total_weight(rule: &Rule) -> u64 {
    rule.backends.iter().map(|b| u64::from(b.weight)).sum()
}

/// Listeners attached to each Gateway, by `namespace/name`: how many routes each listener has (for
/// its status), counted per route.
pub fn attached_routes(
    gateways: &[Value],
    routes: &[Value],
    labels: &NamespaceLabels,
) -> BTreeMap<String, BTreeMap<String, i32>> {
    let mut out: BTreeMap<String, BTreeMap<String, i32>> = BTreeMap::new();
    for gw in gateways {
        let mut ls = listeners(gw);
        for l in &ls {
            out.entry(l.gateway.clone())
                .or_default()
                .insert(l.name.clone(), 0);
        }
        for route in routes {
            for l in ls.iter_mut() {
                l.rules.clear();
            }
            attach_with(route, &mut ls, labels);
            for l in ls.iter().filter(|l| !l.rules.is_empty()) {
                *out.entry(l.gateway.clone())
                    .or_default()
                    .entry(l.name.clone())
                    .or_default() += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn gw() -> Value {
        json!({"metadata": {"name": "rs-gateway", "namespace": "ns"},
               "spec": {"listeners": [{"name": "http", "protocol": "HTTP", "port": 80}, {"name": "tls", "protocol": "HTTPS", "port": 443}]}})
    }

    fn req<'a>(path: &'a str, headers: &'a [(String, String)]) -> Request<'a> {
        Request {
            host: "10.96.1.2:80",
            method: "GET",
            path,
            query: "",
            headers,
        }
    }

    /// The route KubeRay writes during an incremental upgrade (research kuberay.md §3.1): one rule,
    /// `PathPrefix /`, two weighted backends.
    #[test]
    fn kuberay_route_splits_by_weight() {
        let mut ls = listeners(&gw());
        assert_eq!(ls.len(), 1, "HTTP listeners only");
        let route = json!({"metadata": {"name": "rs-httproute", "namespace": "ns", "generation": 4},
            "spec": {"parentRefs": [{"name": "rs-gateway", "namespace": "ns"}],
                     "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                                "backendRefs": [{"name": "a-serve-svc", "namespace": "ns", "port": 8000, "weight": 70},
                                                {"name": "b-serve-svc", "namespace": "ns", "port": 8000, "weight": 30}]}]}});
        attach(&route, &mut ls);
        let rule = pick_rule(&ls, 80, &req("/anything", &[])).unwrap();
        assert_eq!(total_weight(rule), 100);
        let hits: Vec<&str> = (0..100)
            .map(|i| pick_backend(rule, i).unwrap().service.as_str())
            .collect();
        assert_eq!(hits.iter().filter(|s| **s == "ns/a-serve-svc").count(), 70);
        assert_eq!(hits.iter().filter(|s| **s == "ns/b-serve-svc").count(), 30);
        assert!(
            pick_rule(&ls, 81, &req("/", &[])).is_none(),
            "no listener on that port"
        );
        assert_eq!(
            attached_routes(&[gw()], &[route], &NamespaceLabels::new())["ns/rs-gateway"]["http"],
            1
        );
    }

    #[test]
    fn zero_weights_pick_nothing_and_missing_weight_is_one() {
        let mut ls = listeners(&gw());
        attach(
            &json!({"metadata": {"name": "r", "namespace": "ns"}, "spec": {"parentRefs": [{"name": "rs-gateway"}],
            "rules": [{"backendRefs": [{"name": "a", "port": 8000, "weight": 0}, {"name": "b", "port": 8000, "weight": 0}]}]}}),
            &mut ls,
        );
        let rule = pick_rule(&ls, 80, &req("/", &[])).unwrap();
        assert_eq!(total_weight(rule), 0);
        assert!(pick_backend(rule, 0).is_none());
        let b = parse_backend(&json!({"name": "x", "port": 8000}), "ns");
        assert_eq!((b.weight, b.invalid), (1, None));
        assert!(
            parse_backend(&json!({"name": "x", "port": 8000, "namespace": "other"}), "ns")
                .invalid
                .is_some()
        );
        assert!(
            parse_backend(&json!({"name": "x"}), "ns").invalid.is_some(),
            "a Service backend needs a port"
        );
        assert!(
            parse_backend(
                &json!({"name": "x", "port": 1, "kind": "ServiceImport", "group": "multicluster.x-k8s.io"}),
                "ns"
            )
            .invalid
            .is_some()
        );
    }

    /// Precedence (Gateway API `HTTPRouteRule`): exact path over the longest prefix over a method over
    /// header matches; ties go to the older route. Prefixes match whole path elements.
    #[test]
    fn precedence_and_path_elements() {
        let mut ls = listeners(&gw());
        let b = |n: &str| json!([{"name": n, "port": 8000}]);
        attach(
            &json!({"metadata": {"name": "r1", "namespace": "ns", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"parentRefs": [{"name": "rs-gateway", "sectionName": "http"}], "rules": [
                {"matches": [{"path": {"type": "PathPrefix", "value": "/"}}], "backendRefs": b("root")},
                {"matches": [{"path": {"type": "PathPrefix", "value": "/api/"}}], "backendRefs": b("api")},
                {"matches": [{"path": {"type": "Exact", "value": "/api/v1"}}], "backendRefs": b("exact")},
                {"matches": [{"path": {"type": "PathPrefix", "value": "/api"}, "headers": [{"name": "X-Canary", "value": "1"}]}], "backendRefs": b("canary")},
                {"matches": [{"path": {"type": "RegularExpression", "value": ".*"}}], "backendRefs": b("regex")}]}}),
            &mut ls,
        );
        attach(
            &json!({"metadata": {"name": "r0", "namespace": "ns", "creationTimestamp": "2026-02-01T00:00:00Z"},
            "spec": {"parentRefs": [{"name": "rs-gateway"}], "rules": [{"backendRefs": b("younger-root")}]}}),
            &mut ls,
        );
        let to = |path: &str, h: &[(String, String)]| {
            pick_rule(&ls, 80, &req(path, h)).map(|r| r.backends[0].service.clone())
        };
        assert_eq!(to("/api/v1", &[]).as_deref(), Some("ns/exact"));
        assert_eq!(to("/api/v2", &[]).as_deref(), Some("ns/api"));
        assert_eq!(
            to("/api", &[]).as_deref(),
            Some("ns/api"),
            "a trailing slash in a prefix does not matter"
        );
        assert_eq!(
            to("/apix", &[]).as_deref(),
            Some("ns/root"),
            "prefixes match whole elements"
        );
        assert_eq!(
            to("/api/v2", &[("x-canary".into(), "1".into())]).as_deref(),
            Some("ns/canary"),
            "a header match beats an equal prefix without"
        );
        assert_eq!(
            to("/zzz", &[]).as_deref(),
            Some("ns/root"),
            "the older route wins a tie"
        );
        assert!(!path_matches(
            &PathMatch::Unsupported("RegularExpression".into()),
            "/x"
        ));
    }

    #[test]
    fn parents_sections_namespaces_and_hostnames() {
        let mut ls = listeners(
            &json!({"metadata": {"name": "g", "namespace": "ns"}, "spec": {"listeners": [
            {"name": "web", "protocol": "HTTP", "port": 80, "hostname": "*.example.com"},
            {"name": "any", "protocol": "HTTP", "port": 80, "allowedRoutes": {"namespaces": {"from": "All"}}}]}}),
        );
        let route = |ns: &str, section: Option<&str>, hosts: Value| {
            json!({"metadata": {"name": "r", "namespace": ns}, "spec": {"hostnames": hosts,
                "parentRefs": [{"name": "g", "namespace": "ns", "sectionName": section}], "rules": [{"backendRefs": [{"name": format!("{ns}-svc"), "port": 1}]}]}})
        };
        attach(&route("ns", Some("web"), json!([])), &mut ls);
        attach(&route("other", Some("web"), json!([])), &mut ls);
        attach(&route("other", None, json!(["only.example.org"])), &mut ls);
        assert_eq!(
            ls[0].rules.len(),
            1,
            "the web listener takes routes of its own namespace only"
        );
        assert_eq!(ls[1].rules.len(), 1, "from: All");
        let at = |host: &str| {
            pick_rule(
                &ls,
                80,
                &Request {
                    host,
                    method: "GET",
                    path: "/",
                    query: "",
                    headers: &[],
                },
            )
            .map(|r| r.backends[0].service.clone())
        };
        assert_eq!(
            at("a.example.com").as_deref(),
            Some("ns/ns-svc"),
            "the wildcard listener is more specific"
        );
        assert_eq!(at("only.example.org:80").as_deref(), Some("other/other-svc"));
        assert_eq!(
            at("example.com"),
            None,
            "a wildcard needs a label before it; the catch-all listener's route wants another host"
        );
        assert!(host_matches("*.example.com", "a.b.example.com"));
        assert!(!host_matches("*.example.com", "aexample.com"));
    }

    #[test]
    fn method_and_query_matches() {
        let mut ls = listeners(&gw());
        attach(
            &json!({"metadata": {"name": "r", "namespace": "ns"}, "spec": {"parentRefs": [{"name": "rs-gateway"}], "rules": [
            {"matches": [{"method": "POST", "queryParams": [{"name": "v", "value": "2"}]}], "backendRefs": [{"name": "post", "port": 1}]}]}}),
            &mut ls,
        );
        let r = |method: &str, query: &str| {
            pick_rule(
                &ls,
                80,
                &Request {
                    host: "h",
                    method,
                    path: "/x",
                    query,
                    headers: &[],
                },
            )
            .is_some()
        };
        assert!(r("POST", "a=1&v=2"));
        assert!(!r("GET", "v=2"));
        assert!(!r("POST", "v=3"));
    }
    /// Gateway API v1 `allowedRoutes` (the spec's `AllowedRoutes`, `RouteNamespaces`,
    /// `RouteGroupKind`): `from: Same` takes the Gateway's namespace only, `All` every one,
    /// `Selector` the namespaces whose labels it selects (`kubernetes.io/metadata.name` included);
    /// `kinds` without HTTPRoute takes no HTTPRoute. A route a listener does not admit gets no rule
    /// there (no traffic), is not counted in `attachedRoutes`, and its parent is refused with
    /// `NotAllowedByListeners`; a sectionName no listener has, with `NoMatchingParent`.
    #[test]
    fn allowed_routes_namespaces_selector_and_kinds() {
        let gw = json!({"metadata": {"name": "g", "namespace": "infra"}, "spec": {"listeners": [
            {"name": "same", "protocol": "HTTP", "port": 80},
            {"name": "teams", "protocol": "HTTP", "port": 81,
             "allowedRoutes": {"namespaces": {"from": "Selector", "selector": {"matchLabels": {"shared-gateway": "yes"}}}}},
            {"name": "by-name", "protocol": "HTTP", "port": 82,
             "allowedRoutes": {"namespaces": {"from": "Selector", "selector": {"matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["shop"]}]}}}},
            {"name": "grpc-only", "protocol": "HTTP", "port": 83,
             "allowedRoutes": {"namespaces": {"from": "All"}, "kinds": [{"kind": "GRPCRoute"}]}},
            {"name": "no-selector", "protocol": "HTTP", "port": 84,
             "allowedRoutes": {"namespaces": {"from": "Selector"}}}]}});
        let labels = NamespaceLabels::from([
            (
                "shop".to_string(),
                BTreeMap::from([("shared-gateway".to_string(), "yes".to_string())]),
            ),
            ("lab".to_string(), BTreeMap::new()),
        ]);
        let route = |ns: &str, section: &str| {
            json!({"metadata": {"name": "r", "namespace": ns}, "spec": {
                "parentRefs": [{"name": "g", "namespace": "infra", "sectionName": section}],
                "rules": [{"backendRefs": [{"name": "svc", "port": 1}]}]}})
        };
        let takes = |ns: &str, section: &str| {
            let mut ls = listeners(&gw);
            attach_with(&route(ns, section), &mut ls, &labels);
            ls.iter().any(|l| l.name == section && !l.rules.is_empty())
        };
        assert!(takes("infra", "same") && !takes("shop", "same"), "from: Same");
        assert!(
            takes("shop", "teams") && !takes("lab", "teams"),
            "a matchLabels selector"
        );
        assert!(
            takes("shop", "by-name") && !takes("lab", "by-name"),
            "the API server's metadata.name label is selectable"
        );
        assert!(!takes("infra", "grpc-only"), "kinds without HTTPRoute");
        assert!(
            !takes("infra", "no-selector"),
            "Selector with no selector selects none"
        );
        let ls = listeners(&gw);
        let refusal = |ns: &str, section: &str| {
            let r = route(ns, section);
            parent_refusal(&r, &r["spec"]["parentRefs"][0], &ls, &labels).map(|(why, _)| why)
        };
        assert_eq!(refusal("shop", "teams"), None);
        assert_eq!(refusal("lab", "teams"), Some("NotAllowedByListeners"));
        assert_eq!(refusal("shop", "same"), Some("NotAllowedByListeners"));
        assert_eq!(refusal("infra", "grpc-only"), Some("NotAllowedByListeners"));
        assert_eq!(refusal("infra", "nope"), Some("NoMatchingParent"));
        let elsewhere = json!({"name": "other-gateway", "namespace": "infra"});
        assert_eq!(
            parent_refusal(&route("shop", "teams"), &elsewhere, &ls, &labels),
            None,
            "a Gateway this table does not hold is not judged here"
        );
        let counts = attached_routes(
            std::slice::from_ref(&gw),
            &[
                route("shop", "teams"),
                route("lab", "teams"),
                route("shop", "same"),
            ],
            &labels,
        );
        assert_eq!(counts["infra/g"]["teams"], 1);
        assert_eq!(counts["infra/g"]["same"], 0);
    }
}
