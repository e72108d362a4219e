//! Fuzz targets for what clients send the embedded server: label and field selectors, patches of
//! every type, and whole requests through the router (method, path, query, content type, body).
//! proptest-driven: 256 cases each by default, more with `PROPTEST_CASES=100000 cargo test
//! --release --lib fuzz`. Each asserts no panic; the growing JSON patches also a bounded depth and
//! size, and the router target that no request gets a 5xx (a client's mistake is a 4xx) and that
//! the server still answers afterwards.

use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;
use serde_json::{Value, json};
use tower::ServiceExt;

use super::limits::json_len;
use super::limits::{MAX_DEPTH, MAX_JSON_PATCH_COPY_BYTES, nested, within_depth};
use super::managed_fields::{self, Writer};
use super::patch::{json_patch, merge_patch, strategic_merge};
use super::selector::{FieldSelector, LabelSelector};
use super::{EmbeddedServer, QuotagateAdmission};

fn labels() -> BTreeMap<String, String> {
    [("app", "web"), ("tier", "1"), ("kueue.x-k8s.io/queue-name", "q")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn object() -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "a", "namespace": "default", "labels": labels()},
        "spec": {"containers": [{"name": "c", "image": "x"}], "ports": [{"containerPort": 80}]},
        "data": {"k": "v"}
    })
}

/// Selector-shaped text: the grammar's characters and words, in any order.
fn selector_text() -> impl Strategy<Value = String> {
    let tok = prop_oneof![
        "[a-z0-9]{1,4}",
        Just("app".to_string()),
        Just("kueue.x-k8s.io/queue-name".to_string()),
        Just("metadata.name".to_string()),
        prop_oneof![
            Just("="),
            Just("=="),
            Just("!="),
            Just("!"),
            Just(","),
            Just(" "),
            Just("("),
            Just(")"),
            Just(" in "),
            Just(" notin "),
            Just(">"),
            Just("<"),
            Just("\\"),
            Just("/"),
            Just("-"),
            Just("."),
            Just("%"),
        ]
        .prop_map(String::from),
    ];
    prop::collection::vec(tok, 0..12).prop_map(|t| t.concat())
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "[a-z/~0-9-]{0,8}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    "[a-z]{1,6}",
                    Just("op".to_string()),
                    Just("path".to_string()),
                    Just("value".to_string()),
                    Just("from".to_string()),
                    Just("$patch".to_string()),
                    Just("$retainKeys".to_string()),
                    Just("metadata".to_string()),
                    Just("containers".to_string()),
                    Just("name".to_string()),
                ],
                inner,
                0..4,
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// JSON Patch operations aimed at paths that exist and paths that do not.
fn json_patch_body() -> impl Strategy<Value = Value> {
    let op = prop_oneof![
        Just("add"),
        Just("remove"),
        Just("replace"),
        Just("move"),
        Just("copy"),
        Just("test"),
        Just("bogus"),
    ];
    let path = prop_oneof![
        Just("/metadata/labels/app"),
        Just("/spec/containers/0"),
        Just("/spec/containers/-"),
        Just("/spec/containers/99999999999"),
        Just("/data"),
        Just(""),
        Just("/"),
        Just("/~2"),
        Just("/metadata/labels/a~1b"),
    ];
    prop::collection::vec((op, path.clone(), path, json_value()), 0..5).prop_map(|ops| {
        Value::Array(
            ops.into_iter()
                .map(|(op, path, from, value)| json!({"op": op, "path": path, "from": from, "value": value}))
                .collect(),
        )
    })
}

/// JSON patches built to grow the object: `copy` and `move` of whole subtrees (the root included)
/// into themselves, and `add` of values nested up to past the depth limit.
fn growing_json_patch() -> impl Strategy<Value = Value> {
    let container = prop_oneof![
        Just(""),
        Just("/metadata"),
        Just("/metadata/labels"),
        Just("/spec"),
        Just("/spec/containers/0"),
        Just("/data"),
    ];
    let op = (
        prop_oneof![Just("copy"), Just("copy"), Just("move"), Just("add")],
        container.clone(),
        container,
        "[a-c]{1,2}",
        0..(MAX_DEPTH + 8),
    );
    prop::collection::vec(op, 0..40).prop_map(|ops| {
        Value::Array(
            ops.into_iter()
                .map(|(op, from, into, key, depth)| match op {
                    "add" => json!({"op": "add", "path": format!("{into}/{key}"), "value": nested(depth)}),
                    _ => json!({"op": op, "from": from, "path": format!("{into}/{key}")}),
                })
                .collect(),
        )
    })
}

/// One runtime and one server for all cases: state left by earlier requests is part of the input.
fn shared() -> &'static (tokio::runtime::Runtime, Arc<EmbeddedServer>) {
    static SHARED: std::sync::OnceLock<(tokio::runtime::Runtime, Arc<EmbeddedServer>)> =
        std::sync::OnceLock::new();
    SHARED.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let srv = EmbeddedServer::new(&crate::api::all_crds(), Arc::new(QuotagateAdmission::default()));
        (rt, srv)
    })
}

/// A request's parts: method, path, query, content type, body.
type Request = (&'static str, String, String, &'static str, Vec<u8>);

fn request() -> impl Strategy<Value = Request> {
    let method = prop_oneof![
        Just("GET"),
        Just("POST"),
        Just("PUT"),
        Just("PATCH"),
        Just("DELETE"),
        Just("OPTIONS"),
        Just("HEAD"),
    ];
    let seg = prop_oneof![
        Just("api"),
        Just("apis"),
        Just("v1"),
        Just("namespaces"),
        Just("default"),
        Just("kube-system"),
        Just("configmaps"),
        Just("pods"),
        Just("kueue.x-k8s.io"),
        Just("v1beta2"),
        Just("workloads"),
        Just("clusterqueues"),
        Just("ray.io"),
        Just("rayclusters"),
        Just("status"),
        Just("scale"),
        Just("version"),
        Just("openapi"),
        Just("v3"),
        Just(".."),
        Just("%2F"),
        Just("%zz"),
        Just("a%20b"),
        Just("x"),
    ];
    let path = prop::collection::vec(seg, 0..7).prop_map(|s| format!("/{}", s.join("/")));
    let param = prop_oneof![
        Just("labelSelector=!!"),
        Just("labelSelector=app%3Dweb"),
        Just("labelSelector=a,,b"),
        Just("fieldSelector=metadata.name%3Da"),
        Just("fieldSelector=spec.x%3D1"),
        Just("watch=true&timeoutSeconds=1"),
        Just("limit=1"),
        Just("limit=-5"),
        Just("limit=99999999999999999999"),
        Just("continue=garbage"),
        Just("resourceVersion=abc"),
        Just("resourceVersion=999999999999"),
        Just("dryRun=All"),
        Just("fieldManager=x"),
        Just("force=true"),
        Just("propagationPolicy=Orphan"),
        Just("timeoutSeconds=-1"),
    ];
    let query = prop::collection::vec(param, 0..3).prop_map(|p| p.join("&"));
    let ct = prop_oneof![
        Just("application/json"),
        Just("application/merge-patch+json"),
        Just("application/strategic-merge-patch+json"),
        Just("application/json-patch+json"),
        Just("application/apply-patch+yaml"),
        Just("application/vnd.kubernetes.protobuf"),
        Just("text/plain"),
    ];
    let body = prop_oneof![
        json_value().prop_map(|v| v.to_string().into_bytes()),
        json_patch_body().prop_map(|v| v.to_string().into_bytes()),
        Just(br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}"#.to_vec()),
        prop::collection::vec(any::<u8>(), 0..64),
    ];
    (method, path, query, ct, body)
}

async fn send(srv: &Arc<EmbeddedServer>, r: &Request) -> http::StatusCode {
    let (method, path, query, ct, body) = r;
    let uri = if query.is_empty() {
        path.clone()
    } else {
        format!("{path}?{query}")
    };
    let req = http::Request::builder()
        .method(*method)
        .uri(uri)
        .header(http::header::CONTENT_TYPE, *ct)
        .body(axum::body::Body::from(body.clone()))
        .unwrap();
    srv.router().oneshot(req).await.unwrap().status()
}

proptest! {
    #[test]
    fn label_selectors_parse_or_are_refused(s in selector_text()) {
        if let Ok(sel) = LabelSelector::parse(&s) {
            let _ = sel.matches_labels(&labels());
            let _ = sel.matches(&object());
        }
    }

    #[test]
    fn field_selectors_parse_or_are_refused(s in selector_text()) {
        if let Ok(sel) = FieldSelector::parse(&s) {
            let _ = sel.check_supported("", "configmaps");
            let _ = sel.matches(&object());
            let _ = sel.name();
        }
    }

    #[test]
    fn any_text_as_a_selector(s in "(?s).{0,60}") {
        let _ = LabelSelector::parse(&s);
        let _ = FieldSelector::parse(&s);
    }

    #[test]
    fn patches_of_every_type_apply_or_fail_cleanly(
        patch in json_value(),
        ops in json_patch_body(),
        previous in proptest::option::of(json_value()),
    ) {
        let mut doc = object();
        let _ = json_patch(&mut doc, &ops);
        let _ = json_patch(&mut doc, &patch);
        merge_patch(&mut doc, &patch);
        let _ = strategic_merge(&mut doc, &patch);
        let info = super::registry::builtins().into_iter().find(|i| i.plural == "configmaps").unwrap();
        let w = Writer::new("fuzz", false);
        if let Ok(applied) = managed_fields::apply(&info, previous.as_ref(), &patch, w, "2026-01-01T00:00:00Z") {
            let _ = managed_fields::apply(&info, Some(&applied), &doc, w, "2026-01-01T00:00:00Z");
        }
    }

    /// Whatever a patch does, what comes out is within the nesting limit and grows by no more than the
    /// copy limit plus the patch's own values: no stack overflow, no doubling without bound.
    #[test]
    fn growing_json_patches_stay_within_depth_and_size(ops in growing_json_patch()) {
        let mut doc = object();
        let before = json_len(&doc);
        let outcome = json_patch(&mut doc, &ops);
        prop_assert!(within_depth(&doc));
        prop_assert!(json_len(&doc) <= before + MAX_JSON_PATCH_COPY_BYTES + json_len(&ops), "{outcome:?}");
        let mut merged = object();
        merge_patch(&mut merged, &doc);
        let _ = strategic_merge(&mut merged, &doc);
        prop_assert!(within_depth(&merged));
    }

    #[test]
    fn any_request_gets_an_answer_and_no_5xx(reqs in prop::collection::vec(request(), 1..6)) {
        let (rt, srv) = shared();
        rt.block_on(async {
            for r in &reqs {
                let code = send(srv, r).await;
                prop_assert!(!code.is_server_error(), "{r:?} -> {code}");
            }
            let version = ("GET", "/version".to_string(), String::new(), "application/json", vec![]);
            prop_assert_eq!(send(srv, &version).await, http::StatusCode::OK);
            Ok(())
        })?;
    }
}
