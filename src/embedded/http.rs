//! The HTTP face of the store: path routing, query parsing, body decoding and response shaping.
//! One handler serves both the in-process tower service and the loopback TCP listener.

use super::EmbeddedServer;
use super::discovery;
use super::error::ApiError;
use super::escalation;
use super::events;
use super::field_validation;
use super::logs;
use super::managed_fields::Writer;
use super::patch::PatchKind;
use super::protobuf;
use super::quota;
use super::rbac;
use super::refusals;
use super::registry::ResourceInfo;
use super::review;
use super::selector::{FieldSelector, LabelSelector};
use super::served::{InProcess, Served};
use super::serviceaccount;
use super::store::{DeleteOptions, ListOptions, Store, WatchFrom};
use super::table;
use super::watch::{self, WatchRequest};
use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use http::{HeaderValue, Method, StatusCode, header};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

mod admit;
mod proxy;

/// The real API server's request body limit (3 MiB); larger bodies get 413.
pub const MAX_BODY: usize = 3 * 1024 * 1024;

/// A JSON answer as kube-apiserver's serializer writes it (Go's `json.Encoder`: a newline ends it).
fn json_response<T: serde::Serialize + ?Sized>(code: u16, body: &T, content_type: &str) -> Response {
    let mut bytes = serde_json::to_vec(body).unwrap_or_default();
    bytes.push(b'\n');
    let mut r = Response::new(Body::from(bytes));
    *r.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if let Ok(v) = HeaderValue::from_str(content_type) {
        r.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    r
}

fn ok<T: serde::Serialize + ?Sized>(code: u16, body: &T) -> Response {
    json_response(code, body, "application/json")
}

/// A LIST answer, written from the stored objects.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct ListBody<'a> {
    kind: String,
    api_version: String,
    metadata: Value,
    items: Vec<Served<'a>>,
}

/// Adds one `Warning` header per message, in the form kube-apiserver sends (`299 - "message"`), which
/// kubectl prints as `Warning: message`.
fn with_warnings(mut r: Response, warnings: &[String]) -> Response {
    for w in warnings {
        let quoted = w.replace('\\', "\\\\").replace('"', "\\\"");
        if let Ok(v) = HeaderValue::from_str(&format!("299 - \"{quoted}\"")) {
            r.headers_mut().append(header::WARNING, v);
        }
    }
    r
}

/// A passing health check as kube-apiserver answers it (`healthz.handleRootHealth`): `ok` in plain text.
fn health() -> Response {
    let mut r = Response::new(Body::from("ok"));
    let headers = r.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    r
}

fn error(e: &ApiError) -> Response {
    ok(e.code, &e.to_status())
}

fn too_large() -> Response {
    error(&ApiError::new(
        413,
        "RequestEntityTooLarge",
        format!("Request entity too large: limit is {MAX_BODY}"),
    ))
}

fn is_length_limit(e: &axum::Error) -> bool {
    let mut src: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = src {
        if err.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        src = err.source();
    }
    false
}

fn not_found_path(path: &str) -> Response {
    error(
        &ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
        .details(path, "", ""),
    )
}

struct Query(HashMap<String, String>);

impl Query {
    fn parse(q: Option<&str>) -> Self {
        let pairs: Vec<(String, String)> = serde_urlencoded::from_str(q.unwrap_or("")).unwrap_or_default();
        Query(pairs.into_iter().collect())
    }
    fn get(&self, k: &str) -> Option<&str> {
        self.0.get(k).map(String::as_str).filter(|v| !v.is_empty())
    }
    fn flag(&self, k: &str) -> bool {
        matches!(self.get(k), Some("true" | "1"))
    }
    fn dry_run(&self) -> bool {
        self.get("dryRun").is_some()
    }
}

/// A request for a resource: which kind, which namespace, which object, which subresource.
struct Target {
    info: Arc<ResourceInfo>,
    namespace: Option<String>,
    name: Option<String>,
    status: bool,
    /// The `scale` subresource (`scale.rs`).
    scale: bool,
}

enum Route {
    Version,
    /// `/healthz`, `/livez`, `/readyz`: kube-apiserver's health checks, all passing once it serves.
    Health,
    Api,
    Apis,
    Group(String),
    GroupVersion(String, String),
    OpenApiRoot,
    OpenApiGv(String),
    Resource(Target),
    /// `pods/{name}/log` (`logs.rs`).
    PodLog(Target),
    /// `serviceaccounts/{name}/token`, the TokenRequest API (`satoken.rs`).
    Token(Target),
    UnknownSub,
    NotFound,
}

/// The path's segments, percent-decoded; `None` when a segment does not decode to UTF-8.
fn segments(path: &str) -> Option<Vec<String>> {
    path.split('/')
        .filter(|s| !s.is_empty())
        .map(|s| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8()
                .ok()
                .map(|c| c.into_owned())
        })
        .collect()
}

fn route(srv: &EmbeddedServer, path: &str) -> Route {
    let Some(owned) = segments(path) else {
        return Route::NotFound;
    };
    let segs: Vec<&str> = owned.iter().map(String::as_str).collect();
    let (group, version, rest) = match segs.as_slice() {
        ["version"] => return Route::Version,
        ["healthz" | "livez" | "readyz"] => return Route::Health,
        ["api"] => return Route::Api,
        ["apis"] => return Route::Apis,
        ["apis", g] => return Route::Group(g.to_string()),
        ["openapi", "v3"] => return Route::OpenApiRoot,
        ["openapi", "v3", rest @ ..] => return Route::OpenApiGv(rest.join("/")),
        ["api", v] => return Route::GroupVersion(String::new(), v.to_string()),
        ["apis", g, v] => return Route::GroupVersion(g.to_string(), v.to_string()),
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return Route::NotFound,
    };
    let reg = &srv.registry;
    let (namespace, plural, name, sub) = match rest {
        ["namespaces", ns, plural, tail @ ..]
            if reg.find(group, version, plural).is_some_and(|r| r.namespaced) =>
        {
            (
                Some(ns.to_string()),
                *plural,
                tail.first().copied(),
                tail.get(1).copied(),
            )
        }
        [plural, tail @ ..] => (None, *plural, tail.first().copied(), tail.get(1).copied()),
        [] => return Route::NotFound,
    };
    // `<plural>[/<name>[/<subresource>]]`: anything longer names nothing.
    let tail_len = match rest {
        ["namespaces", _, p, tail @ ..] if *p == plural => tail.len(),
        [_, tail @ ..] => tail.len(),
        [] => 0,
    };
    if tail_len > 2 {
        return Route::NotFound;
    }
    let Some(info) = reg.find(group, version, plural) else {
        return Route::NotFound;
    };
    let (status, scale) = match sub {
        None => (false, false),
        Some("status") if info.has_status => (true, false),
        Some("scale") if super::scale::has_scale(&info) && name.is_some() => (false, true),
        Some("log") if info.group.is_empty() && info.plural == "pods" && name.is_some() => {
            return Route::PodLog(Target {
                info,
                namespace,
                name: name.map(String::from),
                status: false,
                scale: false,
            });
        }
        Some("token") if info.group.is_empty() && info.plural == "serviceaccounts" && name.is_some() => {
            return Route::Token(Target {
                info,
                namespace,
                name: name.map(String::from),
                status: false,
                scale: false,
            });
        }
        Some(_) => return Route::UnknownSub,
    };
    Route::Resource(Target {
        info,
        namespace,
        name: name.map(String::from),
        status,
        scale,
    })
}

/// RBAC for an in-process principal (`EmbeddedServer::client_as`): the request itself, and on a
/// create the owners its references block deletion of (`update` on `<owner>/finalizers`).
fn authorize(
    srv: &EmbeddedServer,
    authz: &rbac::Authorizer,
    t: &Target,
    method: &Method,
    query: &Query,
    body: &[u8],
) -> Result<(), ApiError> {
    let resource = if t.status {
        format!("{}/status", t.info.plural)
    } else if t.scale {
        format!("{}/scale", t.info.plural)
    } else {
        t.info.plural.clone()
    };
    let verb = rbac::verb(method, t.name.is_some(), query.flag("watch"));
    let access = rbac::Access {
        group: t.info.group.clone(),
        resource,
        verb: verb.to_string(),
        name: t.name.clone(),
        namespace: t.namespace.clone(),
    };
    let forbidden = |a: &rbac::Access| denied(authz.forbidden(a));
    if !authz.allows(&access) {
        return Err(forbidden(&access));
    }
    if *method != Method::POST && *method != Method::PUT {
        return Ok(());
    }
    let obj: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    if t.info.group == "rbac.authorization.k8s.io" {
        escalation::check(
            authz,
            &srv.store,
            &srv.registry,
            &t.info.plural,
            t.namespace.as_deref().unwrap_or("default"),
            &obj,
        )?;
    }
    if *method != Method::POST {
        return Ok(());
    }
    for (api_version, kind, name) in rbac::blocking_owners(&obj) {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version.as_str()));
        let Some(owner) = srv
            .registry
            .all()
            .iter()
            .find(|r| r.group == group && r.version == version && r.kind == kind)
            .cloned()
        else {
            continue;
        };
        let namespace = if owner.namespaced {
            t.namespace.clone()
        } else {
            None
        };
        let a = rbac::Access {
            group: owner.group.clone(),
            resource: format!("{}/finalizers", owner.plural),
            verb: "update".into(),
            name: Some(name),
            namespace,
        };
        if !authz.allows(&a) {
            return Err(forbidden(&a));
        }
    }
    Ok(())
}

pub async fn handle(State(srv): State<Arc<EmbeddedServer>>, req: Request) -> Response {
    if let Some(d) = srv.store.faults.delay() {
        tokio::time::sleep(d).await;
    }
    let (parts, body) = req.into_parts();
    let path = parts.uri.path().to_string();
    let query = Query::parse(parts.uri.query());
    let header = |h: header::HeaderName| {
        parts
            .headers
            .get(h)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    let accept = header(header::ACCEPT);
    let content_type = header(header::CONTENT_TYPE);
    let user_agent = header(header::USER_AGENT);
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > MAX_BODY) {
        return too_large();
    }
    let body = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(b) => b,
        Err(e) if is_length_limit(&e) => return too_large(),
        Err(e) => return error(&ApiError::bad_request(format!("reading the request body: {e}"))),
    };
    if let Some(p) = proxy::parse(&path) {
        return proxy::serve(&srv, &parts, body, p)
            .await
            .unwrap_or_else(|e| error(&e));
    }
    let aggregated = accept.contains("as=APIGroupDiscoveryList");
    let route = route(&srv, &path);
    if !matches!(
        route,
        Route::Resource(_) | Route::PodLog(_) | Route::Token(_) | Route::UnknownSub | Route::NotFound
    ) && parts.method != Method::GET
    {
        return error(&ApiError::method_not_allowed(format!(
            "the server does not allow this method on the requested resource: {} {path}",
            parts.method
        )));
    }
    match route {
        // `/version` is written by `WriteRawJSON`: indented, with no newline after it.
        Route::Version => {
            let mut r = Response::new(Body::from(
                serde_json::to_vec_pretty(&discovery::version()).unwrap_or_default(),
            ));
            r.headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
            r
        }
        Route::Health => health(),
        Route::Api if aggregated => json_response(
            200,
            &discovery::aggregated(&srv.registry, true),
            discovery::AGGREGATED_CONTENT_TYPE,
        ),
        Route::Apis if aggregated => json_response(
            200,
            &discovery::aggregated(&srv.registry, false),
            discovery::AGGREGATED_CONTENT_TYPE,
        ),
        Route::Api => {
            let host = parts
                .headers
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .or_else(|| parts.uri.authority().map(|a| a.as_str()));
            ok(200, &discovery::legacy_api(host))
        }
        Route::Apis => ok(200, &discovery::legacy_apis(&srv.registry)),
        Route::Group(g) => discovery::api_group(&srv.registry, &g)
            .map(|v| ok(200, &v))
            .unwrap_or_else(|| not_found_path(&path)),
        Route::GroupVersion(g, v) => discovery::resource_list(&srv.registry, &g, &v)
            .map(|d| ok(200, &d))
            .unwrap_or_else(|| not_found_path(&path)),
        Route::OpenApiRoot => ok(200, &discovery::openapi_v3_root(&srv.registry)),
        Route::OpenApiGv(p) => discovery::openapi_v3_gv(&srv.registry, &p)
            .map(|d| ok(200, &d))
            .unwrap_or_else(|| not_found_path(&path)),
        // A subresource the kind does not have is a path no route serves: go-restful's 404, whose
        // details are empty.
        Route::UnknownSub => error(
            &ApiError::new(
                404,
                "NotFound",
                "the server could not find the requested resource",
            )
            .generic(),
        ),
        Route::NotFound => not_found_path(&path),
        Route::PodLog(t) => pod_log(&srv, &parts, &t).unwrap_or_else(|e| error(&e)),
        Route::Token(t) => token(&srv, &parts, &t, &body)
            .map(|v| ok(201, &v))
            .unwrap_or_else(|e| error(&e)),
        Route::Resource(t) => {
            let principal = match review::principal(
                &srv.store,
                &srv.registry,
                &parts.headers,
                parts.extensions.get::<rbac::Principal>(),
            ) {
                Ok(p) => p,
                Err(e) => return error(&e),
            };
            if t.info.group == review::GROUP {
                let reviewed = review::serve(
                    &srv,
                    principal.as_deref(),
                    &t.info,
                    t.namespace.as_deref(),
                    &parts.method,
                    &content_type,
                    &body,
                );
                return reviewed
                    .map(|(code, v)| ok(code, &v))
                    .unwrap_or_else(|e| error(&e));
            }
            if let Some(authz) = &principal
                && let Err(e) = authorize(&srv, authz, &t, &parts.method, &query, &body)
            {
                return error(&e);
            }
            let watching = parts.method == Method::GET && query.flag("watch");
            let reading = parts.method == Method::GET;
            let webhooks = srv.config.real_cluster
                && !t.scale
                && matches!(parts.method, Method::POST | Method::PUT | Method::PATCH)
                && super::webhooks::any_configured(&srv.store, &srv.registry);
            let r = Req {
                srv: &srv,
                t,
                query,
                accept,
                content_type,
                user_agent,
                replay: false,
                in_process: parts.extensions.get::<InProcess>().is_some(),
                body: &body,
                method: parts.method,
            };
            let served = if webhooks {
                let (user, groups) = match &principal {
                    Some(a) => (
                        a.user.clone(),
                        review::Subject::authenticated(&a.user, &[]).groups,
                    ),
                    None => (
                        "system:admin".to_string(),
                        vec!["system:masters".to_string(), "system:authenticated".to_string()],
                    ),
                };
                r.serve_with_webhooks(&user, &groups).await
            } else {
                r.serve()
            };
            let resp = match served {
                Ok(resp) => resp,
                Err(e) => error(&e),
            };
            // With --data-dir, answer only once what the answer shows is on disk (a watch waits
            // per event instead): a crash then never loses something a client has seen. While the
            // disk refuses writes (they are refused, see `durable.rs`), reads are answered from
            // memory, as etcd answers them under its NOSPACE alarm.
            if !(watching || reading && srv.store.disk_alarm())
                && let Err(e) = srv.store.synced_now().await
            {
                return error(&e);
            }
            resp
        }
    }
}

/// `kubectl logs`: RBAC on `pods/log`, then the pod's output or why it has none (`logs.rs`).
fn pod_log(srv: &EmbeddedServer, parts: &http::request::Parts, t: &Target) -> Result<Response, ApiError> {
    if parts.method != Method::GET {
        return Err(ApiError::method_not_allowed(format!(
            "the server does not allow this method on the requested resource: {}",
            parts.method
        )));
    }
    let name = t.name.clone().unwrap_or_default();
    let namespace = t.namespace.clone().unwrap_or_else(|| "default".into());
    if let Some(authz) = review::principal(
        &srv.store,
        &srv.registry,
        &parts.headers,
        parts.extensions.get::<rbac::Principal>(),
    )? {
        let a = rbac::Access {
            group: String::new(),
            resource: "pods/log".into(),
            verb: "get".into(),
            name: Some(name.clone()),
            namespace: Some(namespace.clone()),
        };
        if !authz.allows(&a) {
            return Err(authz.forbidden(&a));
        }
    }
    let query: Vec<(String, String)> =
        serde_urlencoded::from_str(parts.uri.query().unwrap_or("")).unwrap_or_default();
    let req = logs::request(&srv.store, &srv.registry, &namespace, &name, &query)?;
    let stream = logs::logs(&srv.runtimes, &req)?;
    let body = futures::StreamExt::map(stream, Ok::<_, std::io::Error>);
    let mut r = Response::new(Body::from_stream(body));
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    Ok(r)
}

/// TokenRequest: RBAC `create serviceaccounts/token`, then a token for the ServiceAccount.
fn token(
    srv: &EmbeddedServer,
    parts: &http::request::Parts,
    t: &Target,
    body: &[u8],
) -> Result<Value, ApiError> {
    if parts.method != Method::POST {
        return Err(ApiError::method_not_allowed(format!(
            "the server does not allow this method on the requested resource: {}",
            parts.method
        )));
    }
    let name = t.name.clone().unwrap_or_default();
    let namespace = t.namespace.clone().unwrap_or_else(|| "default".into());
    if let Some(authz) = review::principal(
        &srv.store,
        &srv.registry,
        &parts.headers,
        parts.extensions.get::<rbac::Principal>(),
    )? {
        let a = rbac::Access {
            group: String::new(),
            resource: "serviceaccounts/token".into(),
            verb: "create".into(),
            name: Some(name.clone()),
            namespace: Some(namespace.clone()),
        };
        if !authz.allows(&a) {
            return Err(denied(authz.forbidden(&a)));
        }
    }
    let sa = srv.store.get(&t.info, Some(&namespace), &name)?;
    super::satoken::token_request(&srv.sa_tokens, &sa, body)
}

/// An RBAC refusal, logged by the server as kube-apiserver's audit log would show it.
fn denied(e: ApiError) -> ApiError {
    tracing::warn!(target: "quotagate::embedded::rbac", "RBAC denied: {}", e.message);
    e
}

struct Req<'a> {
    srv: &'a Arc<EmbeddedServer>,
    t: Target,
    query: Query,
    accept: String,
    content_type: String,
    user_agent: String,
    /// The object a webhook admitted, written again: its `managedFields` were computed by the dry run.
    replay: bool,
    /// Made by the in-process client: lists and watches leave out `managedFields` (`served.rs`).
    in_process: bool,
    body: &'a [u8],
    method: Method,
}

impl Req<'_> {
    fn store(&self) -> &Arc<Store> {
        &self.srv.store
    }

    fn ns(&self) -> Option<&str> {
        self.t.namespace.as_deref()
    }

    /// The field manager of this write: `fieldManager`, else the User-Agent's first part.
    fn manager(&self) -> String {
        match self.query.get("fieldManager") {
            Some(m) => m.to_string(),
            None => super::managed_fields::manager_from_user_agent(&self.user_agent),
        }
    }

    fn as_table(&self) -> bool {
        self.accept.contains("as=Table")
    }

    /// The body as JSON, within the nesting limit whatever its content type (`limits.rs`).
    fn decode_body(&self) -> Result<Value, ApiError> {
        let v = self.decode_any()?;
        if !super::limits::within_depth(&v) {
            return Err(ApiError::bad_request(format!(
                "the request body nests deeper than {} levels: {}",
                super::limits::MAX_DEPTH,
                super::limits::TOO_DEEP
            )));
        }
        Ok(v)
    }

    fn decode_any(&self) -> Result<Value, ApiError> {
        let ct = self.content_type.split(';').next().unwrap_or("").trim();
        if ct == "application/vnd.kubernetes.protobuf" {
            return protobuf::decode(self.body, &self.t.info)
                .map_err(|e| ApiError::unsupported_media(e.to_string()));
        }
        match serde_json::from_slice(self.body) {
            Ok(v) => Ok(v),
            Err(json_err) if ct.ends_with("yaml") => {
                serde_saphyr::from_slice::<Value>(self.body).map_err(|e| {
                    ApiError::bad_request(format!(
                        "the request body is neither JSON ({json_err}) nor YAML ({e})"
                    ))
                })
            }
            Err(e) => Err(ApiError::bad_request(format!(
                "the request body is not valid JSON: {e}"
            ))),
        }
    }

    /// A JSON, merge or strategic merge patch that is not JSON, refused as kube-apiserver's patch
    /// handler refuses it (`applyJSPatch`, `strategicPatchObject` in k8s.io/apiserver's
    /// handlers/patch.go): Go's syntax error, after `error decoding patch: ` where the Warn or Strict
    /// directive decodes it strictly first, and json-patch's `Invalid JSON Patch` for a merge
    /// patch under Ignore.
    fn check_patch_syntax(&self, kind: PatchKind) -> Result<(), ApiError> {
        let Some(msg) = super::go_json::syntax_error(self.body) else {
            return Ok(());
        };
        let directive = field_validation::Directive::parse(self.query.get("fieldValidation"))?;
        let strict = directive != field_validation::Directive::Ignore;
        Err(ApiError::bad_request(match kind {
            PatchKind::Json | PatchKind::Merge if strict => format!("error decoding patch: {msg}"),
            PatchKind::Merge => "Invalid JSON Patch".to_string(),
            _ => msg,
        }))
    }

    /// A create or update body sent as JSON that is not JSON, refused as kube-apiserver's handlers
    /// refuse it: the JSON serializer's `couldn't get version/kind; json parse error` (its
    /// meta.go `Interpret`, Go's syntax error), wrapped by `transformDecodeError` (handlers/rest.go)
    /// with the kind and `summarizeData` of the body.
    fn check_object_syntax(&self) -> Result<(), ApiError> {
        let ct = self.content_type.split(';').next().unwrap_or("").trim();
        if ct == "application/vnd.kubernetes.protobuf" || ct.ends_with("yaml") || self.body.is_empty() {
            return Ok(());
        }
        let Some(msg) = super::go_json::syntax_error(self.body) else {
            return Ok(());
        };
        Err(ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type {}): couldn't get version/kind; json parse error: {msg} ({})",
            self.t.info.kind,
            super::go_json::summarize(self.body, 30)
        )))
    }

    /// Server-side field validation of a create, update or patch body (`field_validation.rs`): under
    /// `Strict` an undeclared or duplicate field refuses the request; under `Warn` the warnings to send.
    fn validate_fields(&self, body: &Value) -> Result<Vec<String>, ApiError> {
        refusals::field_validation(&self.method, self.query.get("fieldValidation"))?;
        let directive = field_validation::Directive::parse(self.query.get("fieldValidation"))?;
        if directive == field_validation::Directive::Ignore {
            return Ok(Vec::new());
        }
        field_validation::inspect(&self.t.info, self.body, body).judge(directive, &self.t.info)
    }

    /// Field validation of a JSON patch: its keys for duplicates, and the object it makes of the
    /// stored one for fields the kind does not declare that it adds. A patch that does not apply is
    /// left to the store's refusal.
    fn validate_json_patch(&self, name: &str, ops: &Value) -> Result<Vec<String>, ApiError> {
        refusals::field_validation(&self.method, self.query.get("fieldValidation"))?;
        let directive = field_validation::Directive::parse(self.query.get("fieldValidation"))?;
        if directive == field_validation::Directive::Ignore {
            return Ok(Vec::new());
        }
        let mut f = field_validation::Findings {
            duplicate: field_validation::duplicates(self.body),
            unknown: Vec::new(),
        };
        let mut patched = None;
        if let Ok(current) = self.store().get(&self.t.info, self.ns(), name) {
            let mut doc = (*current).clone();
            if super::patch::json_patch(&mut doc, ops).is_ok() {
                f.unknown = field_validation::introduced(&self.t.info, &current, &doc);
                patched = Some(doc);
            }
        }
        match patched {
            Some(doc) if directive == field_validation::Directive::Strict && !f.is_empty() => {
                Err(field_validation::json_patch_refused(&f, &doc))
            }
            _ => f.judge(directive, &self.t.info),
        }
    }

    fn object(&self, code: u16, obj: Arc<Value>) -> Response {
        if self.as_table() && self.method == Method::GET {
            let t = table::table(&self.t.info, &[&obj], "", None);
            return ok(code, &self.include_object(t, &[&obj]));
        }
        let obj = Store::at_version(&self.t.info, obj);
        // A write's answer to an in-process client leaves out `managedFields`, as its lists and
        // watches do (`served.rs`): the controllers parse every answer and read none of them.
        if self.in_process && self.method != Method::GET {
            return ok(
                code,
                &Served {
                    obj: &obj,
                    managed_fields: false,
                    typed_item: false,
                },
            );
        }
        ok(code, &*obj)
    }

    /// A Table's rows carry what `includeObject` asks: `Metadata` (the default), `None` or `Object`.
    fn include_object(&self, mut t: Value, objs: &[&Value]) -> Value {
        let mode = self.query.get("includeObject").unwrap_or("Metadata");
        if mode != "None" && mode != "Object" {
            return t;
        }
        if let Some(rows) = t.get_mut("rows").and_then(Value::as_array_mut) {
            for (row, obj) in rows.iter_mut().zip(objs) {
                row["object"] = if mode == "None" {
                    Value::Null
                } else {
                    (*Store::at_version(&self.t.info, Arc::new((*obj).clone()))).clone()
                };
            }
        }
        t
    }

    /// kube-apiserver's answer to a delete: the object while its deletion is pending (finalizers, a
    /// grace period) or when its storage returns deleted objects (`ReturnDeletedObject`: pods,
    /// services, service accounts, quotas, namespaces, storage classes); otherwise, the object gone,
    /// a `Status` of `Success` naming it.
    fn deleted(&self, info: &ResourceInfo, obj: Arc<Value>) -> Response {
        const RETURN_DELETED: [(&str, &str); 6] = [
            ("", "pods"),
            ("", "services"),
            ("", "serviceaccounts"),
            ("", "resourcequotas"),
            ("", "namespaces"),
            ("storage.k8s.io", "storageclasses"),
        ];
        let pending = obj.pointer("/metadata/deletionTimestamp").is_some();
        if pending
            || RETURN_DELETED
                .iter()
                .any(|(g, p)| info.group == *g && info.plural == *p)
        {
            return self.object(200, obj);
        }
        let mut details = json!({
            "name": obj.pointer("/metadata/name").cloned().unwrap_or(Value::Null),
            "kind": info.plural,
            "uid": obj.pointer("/metadata/uid").cloned().unwrap_or(Value::Null),
        });
        if !info.group.is_empty() {
            details["group"] = json!(info.group);
        }
        ok(
            200,
            &json!({
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "details": details,
            }),
        )
    }

    /// `<kind>/<name>/scale` (`scale.rs`): GET the Scale, PUT or PATCH it into the parent's replicas.
    fn serve_scale(&self) -> Result<Response, ApiError> {
        let info = &self.t.info;
        let name = self.t.name.clone().unwrap_or_default();
        let parent = self.store().get(info, self.ns(), &name)?;
        let scale = super::scale::of(&parent);
        let next = match self.method {
            Method::GET => return Ok(ok(200, &scale)),
            Method::PUT => self.decode_body()?,
            Method::PATCH => {
                let kind = PatchKind::from_content_type(&self.content_type)
                    .ok_or_else(|| ApiError::unsupported_media("415: Unsupported Media Type").generic())?;
                if kind == PatchKind::Apply {
                    refusals::field_manager(self.query.get("fieldManager"))?;
                }
                super::scale::patched(&scale, kind, &self.decode_body()?)?
            }
            _ => {
                return Err(ApiError::method_not_allowed(format!(
                    "the server does not allow this method on the requested resource: {}",
                    self.method
                )));
            }
        };
        let obj = super::scale::into_parent(&parent, &next)?;
        let manager = self.manager();
        let w = Writer {
            scale: true,
            ..Writer::new(&manager, false)
        };
        let written = self
            .store()
            .update_by(info, self.ns(), &name, obj, self.query.dry_run(), w)?;
        Ok(ok(200, &super::scale::of(&written)))
    }

    /// Serves the request; a write that can change a ResourceQuota's usage (any write to pods or
    /// quotas, any delete: owners cascade to pods) runs under the quota lock when the namespace has a
    /// quota, followed by the quota controller's status pass (`quota.rs`).
    fn serve(&self) -> Result<Response, ApiError> {
        let write = self.method != Method::GET;
        refusals::dry_run(&self.method, self.query.get("dryRun"))?;
        let core = self.t.info.group.is_empty();
        let quota_write = write && core && self.t.info.plural == "resourcequotas";
        let touches_usage = write
            && !self.query.dry_run()
            && (quota_write || (core && self.t.info.plural == "pods") || self.method == Method::DELETE);
        let ns = match self.ns() {
            Some(ns)
                if touches_usage && (quota_write || quota::any(self.store(), &self.srv.registry, ns)) =>
            {
                ns
            }
            _ => return self.serve_unquoted(),
        };
        let _guard = self
            .srv
            .quota_lock
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let result = self.serve_unquoted();
        if result.is_ok() {
            quota::refresh(self.store(), &self.srv.registry, ns);
        }
        result
    }

    fn serve_unquoted(&self) -> Result<Response, ApiError> {
        if self.t.scale {
            return self.serve_scale();
        }
        let info = self.t.info.clone();
        let name = self.t.name.clone();
        match (&self.method, name) {
            (&Method::POST, None) if info.group.is_empty() && info.plural == "bindings" => {
                let body = self.decode_body()?;
                let warnings = self.validate_fields(&body)?;
                let ns = self.ns().unwrap_or("default");
                let done = super::binding::bind(
                    self.store(),
                    &self.srv.registry,
                    ns,
                    &body,
                    self.query.dry_run(),
                    &self.manager(),
                )?;
                Ok(with_warnings(ok(201, &done), &warnings))
            }
            // Bindings can only be created, as on the real server.
            (_, _) if info.group.is_empty() && info.plural == "bindings" => {
                Err(ApiError::method_not_allowed(format!(
                    "the server does not allow this method on the requested resource: {}",
                    self.method
                )))
            }
            (&Method::GET, None) if self.query.flag("watch") => self.watch(),
            (&Method::GET, None) => self.list(),
            (&Method::GET, Some(n)) => Ok(self.object(200, self.store().get(&info, self.ns(), &n)?)),
            (&Method::POST, None) => {
                self.check_object_syntax()?;
                let body = self.decode_body()?;
                let warnings = self.validate_fields(&body)?;
                let mut obj = events::to_storage(&info, body);
                refusals::type_meta(&info, &obj)?;
                if info.group.is_empty() && info.plural == "pods" {
                    let ns = self.ns().unwrap_or("default");
                    serviceaccount::admit_pod(self.store(), &self.srv.registry, ns, &mut obj)?;
                    if self.srv.config.real_cluster {
                        serviceaccount::mount_api_access(self.store(), &self.srv.registry, ns, &mut obj);
                    }
                    quota::admit_pod(self.store(), &self.srv.registry, ns, &obj)?;
                }
                if info.group.is_empty() && info.plural == "resourcequotas" {
                    quota::validate(&obj)?;
                }
                let manager = self.manager();
                let w = Writer {
                    given: self.replay,
                    ..Writer::new(&manager, false)
                };
                let created = self
                    .store()
                    .create_by(&info, self.ns(), obj, self.query.dry_run(), w)?;
                self.after_create(&info, &created);
                Ok(with_warnings(self.object(201, created), &warnings))
            }
            (&Method::PUT, Some(n)) => {
                self.check_object_syntax()?;
                let body = self.decode_body()?;
                let warnings = self.validate_fields(&body)?;
                let obj = events::to_storage(&info, body);
                refusals::type_meta(&info, &obj)?;
                if info.group.is_empty() && info.plural == "resourcequotas" && !self.t.status {
                    quota::validate(&obj)?;
                }
                let manager = self.manager();
                let w = Writer {
                    given: self.replay,
                    ..Writer::new(&manager, self.t.status)
                };
                let updated = self
                    .store()
                    .update_by(&info, self.ns(), &n, obj, self.query.dry_run(), w)?;
                Ok(with_warnings(self.object(200, updated), &warnings))
            }
            (&Method::PATCH, Some(n)) => {
                let kind = PatchKind::from_content_type(&self.content_type).ok_or_else(|| {
                    // go-restful refuses the content type before any handler: its bare 415.
                    ApiError::unsupported_media("415: Unsupported Media Type").generic()
                })?;
                if kind == PatchKind::Apply {
                    refusals::field_manager(self.query.get("fieldManager"))?;
                } else {
                    self.check_patch_syntax(kind)?;
                }
                let body = self.decode_body()?;
                if kind == PatchKind::Apply {
                    refusals::apply_type(&info, &body)?;
                }
                // A JSON patch is a list of operations, not an object: what it makes is checked.
                let warnings = match kind {
                    PatchKind::Json => self.validate_json_patch(&n, &body)?,
                    _ => self.validate_fields(&body)?,
                };
                let body = events::patch_to_storage(&info, kind, body);
                let manager = self.manager();
                let w = Writer {
                    force: self.query.flag("force"),
                    ..Writer::new(&manager, self.t.status)
                };
                let (obj, created) =
                    self.store()
                        .patch(&info, self.ns(), &n, kind, body, self.query.dry_run(), w)?;
                if created {
                    self.after_create(&info, &obj);
                }
                Ok(with_warnings(
                    self.object(if created { 201 } else { 200 }, obj),
                    &warnings,
                ))
            }
            (&Method::DELETE, Some(n)) => {
                let opts = self.delete_options()?;
                let obj = self.store().delete(&info, self.ns(), &n, &opts)?;
                Ok(with_warnings(
                    self.deleted(&info, obj),
                    &super::gc::delete_warnings(&info, opts.asked()),
                ))
            }
            // Namespaces have no deletecollection verb on the real server.
            (&Method::DELETE, None) if info.group.is_empty() && info.plural == "namespaces" => {
                Err(ApiError::method_not_allowed(
                    "the server does not allow this method on the requested resource",
                ))
            }
            (&Method::DELETE, None) => self.delete_collection(),
            (m, _) => Err(ApiError::method_not_allowed(format!(
                "the server does not allow this method on the requested resource: {m}"
            ))),
        }
    }

    /// What controllers of a real cluster do at once after a create: a new namespace gets its
    /// `default` ServiceAccount, and its `kube-root-ca.crt` where a real cluster is modelled.
    fn after_create(&self, info: &ResourceInfo, obj: &Value) {
        if info.group.is_empty() && info.plural == "namespaces" && !self.query.dry_run() {
            let name = obj
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            serviceaccount::ensure_default(self.store(), &self.srv.registry, name);
            self.srv.publish_root_ca(name);
        }
    }

    fn delete_options(&self) -> Result<DeleteOptions, ApiError> {
        let body: Value = if self.body.is_empty() {
            json!({})
        } else {
            self.decode_body()?
        };
        let propagation = body
            .get("propagationPolicy")
            .and_then(Value::as_str)
            .or(self.query.get("propagationPolicy"));
        refusals::propagation_policy(propagation)?;
        Ok(DeleteOptions {
            propagation: body
                .get("propagationPolicy")
                .and_then(Value::as_str)
                .or(self.query.get("propagationPolicy"))
                .map(String::from),
            orphan_dependents: body
                .get("orphanDependents")
                .and_then(Value::as_bool)
                .or_else(|| self.query.get("orphanDependents").and_then(|o| o.parse().ok())),
            grace_period_seconds: body
                .get("gracePeriodSeconds")
                .and_then(Value::as_i64)
                .or_else(|| self.query.get("gracePeriodSeconds").and_then(|g| g.parse().ok())),
            dry_run: body
                .get("dryRun")
                .is_some_and(|d| d.as_array().is_some_and(|a| !a.is_empty()))
                || self.query.dry_run(),
            uid: body
                .pointer("/preconditions/uid")
                .and_then(Value::as_str)
                .map(String::from),
            resource_version: body
                .pointer("/preconditions/resourceVersion")
                .and_then(Value::as_str)
                .map(String::from),
        })
    }

    fn list_options(&self) -> Result<ListOptions, ApiError> {
        let bad = |e: super::selector::SelectorError| ApiError::bad_request(e.to_string());
        // `ValidateListOptions`: a list's match rule needs a version to match against (a watch's
        // is `sendInitialEvents`'s).
        if !self.query.flag("watch")
            && self
                .query
                .get("resourceVersionMatch")
                .is_some_and(|m| !m.is_empty())
            && self.query.get("resourceVersion").is_none_or(str::is_empty)
        {
            let fe = crate::api::validation::FieldError::forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden unless resourceVersion is provided",
            );
            return Err(ApiError::invalid("ListOptions.meta.k8s.io", "", &[fe]).details(
                "",
                "meta.k8s.io",
                "ListOptions",
            ));
        }
        Ok(ListOptions {
            labels: LabelSelector::parse(self.query.get("labelSelector").unwrap_or("")).map_err(bad)?,
            fields: FieldSelector::parse(self.query.get("fieldSelector").unwrap_or(""))
                .and_then(|f| {
                    f.check_supported_on(&self.t.info.group, &self.t.info.plural, !self.t.info.is_crd)
                        .map(|()| f)
                })
                .map(|f| events::field_selector_to_storage(&self.t.info, f))
                .map_err(bad)?,
            limit: self.query.get("limit").and_then(|l| l.parse().ok()),
            continue_token: self.query.get("continue").map(String::from),
        })
    }

    fn list(&self) -> Result<Response, ApiError> {
        let opts = self.list_options()?;
        let res = self.store().list(&self.t.info, self.ns(), &opts)?;
        let rv = res.rv.to_string();
        if self.as_table() {
            let objs: Vec<&Value> = res.items.iter().map(|o| &**o).collect();
            let t = table::table(&self.t.info, &objs, &rv, res.continue_token.as_deref());
            return Ok(ok(200, &self.include_object(t, &objs)));
        }
        let mut md = json!({"resourceVersion": rv});
        if let Some(c) = &res.continue_token {
            md["continue"] = json!(c);
            // Counted only when nothing filters the list, as kube-apiserver's storage counts it.
            let filtered = ["labelSelector", "fieldSelector"]
                .iter()
                .any(|k| self.query.get(k).is_some_and(|v| !v.is_empty()));
            if !filtered {
                md["remainingItemCount"] = json!(res.remaining);
            }
        } else if self.t.info.is_crd {
            // A custom resource list is unstructured there: its storage sets `continue` even when
            // empty, and nothing drops the empty string (kube-apiserver v1.36.3, every list).
            md["continue"] = json!("");
        }
        let objs: Vec<Arc<Value>> = res
            .items
            .into_iter()
            .map(|o| Store::at_version(&self.t.info, o))
            .collect();
        let items = objs
            .iter()
            .map(|obj| Served {
                obj,
                managed_fields: !self.in_process,
                // kube-apiserver writes a built-in kind's list as a typed Go list; a custom
                // resource's list is unstructured, its items keep kind and apiVersion. The
                // in-process clients keep them too.
                typed_item: !self.in_process && !self.t.info.is_crd,
            })
            .collect();
        Ok(ok(
            200,
            &ListBody {
                kind: format!("{}List", self.t.info.kind),
                api_version: self.t.info.api_version(),
                metadata: md,
                items,
            },
        ))
    }

    fn delete_collection(&self) -> Result<Response, ApiError> {
        let opts = self.list_options()?;
        let dopts = self.delete_options()?;
        let res = self.store().list(&self.t.info, self.ns(), &opts)?;
        let list_rv = res.rv;
        // The answer is the list as it was read, each item at its last stored version, whether its
        // delete removed it, marked it or found it gone (`Store.DeleteCollection` returns its list).
        let mut items = Vec::new();
        for o in res.items {
            let ns = o.pointer("/metadata/namespace").and_then(Value::as_str);
            let name = o.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
            match self.store().delete(&self.t.info, ns, name, &dopts) {
                Ok(_) => {}
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
            items.push((*Store::at_version(&self.t.info, o)).clone());
        }
        let rv = list_rv.to_string();
        Ok(with_warnings(
            ok(
                200,
                &json!({"kind": format!("{}List", self.t.info.kind), "apiVersion": self.t.info.api_version(), "metadata": {"resourceVersion": rv}, "items": items}),
            ),
            &super::gc::delete_warnings(&self.t.info, dopts.asked()),
        ))
    }

    fn watch(&self) -> Result<Response, ApiError> {
        let opts = self.list_options()?;
        let from = match self.query.get("resourceVersion") {
            None | Some("0") => WatchFrom::Current,
            Some(rv) => WatchFrom::Rv(
                rv.parse()
                    .map_err(|_| ApiError::bad_request(format!("invalid resourceVersion {rv:?}")))?,
            ),
        };
        let send_initial_events = self.query.flag("sendInitialEvents");
        let bookmarks = self.query.flag("allowWatchBookmarks");
        // kube-apiserver v1.36 serves sendInitialEvents without allowWatchBookmarks (its
        // differential sequence): the initial events come, with no bookmark to end them.
        let req = WatchRequest {
            info: self.t.info.clone(),
            namespace: if self.t.info.namespaced {
                self.t.namespace.clone()
            } else {
                None
            },
            labels: opts.labels,
            fields: opts.fields,
            from,
            send_initial_events,
            bookmarks,
            timeout: self
                .query
                .get("timeoutSeconds")
                .and_then(|t| t.parse().ok())
                .map(Duration::from_secs),
            as_table: self.as_table(),
            managed_fields: !self.in_process,
        };
        let rx = watch::start(self.store().clone(), req, self.srv.config.bookmark_interval);
        let body =
            futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|line| (line, rx)) });
        let mut r = Response::new(Body::from_stream(body));
        r.headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        Ok(r)
    }
}
