//! Rule and selector matching, as kube-apiserver's webhook predicates
//! (kubernetes `staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/rules/rules_test.go`,
//! `.../predicates/namespace/matcher_test.go`, `.../object/matcher_test.go`), and the denial message
//! (`.../webhook/errors/statuserror.go` `ToStatusErr`).

use super::*;
use crate::embedded::{AllowAll, EmbeddedServer};

fn call<'a>(info: &'a ResourceInfo, op: &'a str, sub: Option<&'a str>) -> Call<'a> {
    Call {
        info,
        namespace: if info.namespaced { Some("team") } else { None },
        subresource: sub,
        operation: op,
        old: None,
        user: "u",
        groups: &[],
        dry_run: false,
    }
}

fn rule(ops: &[&str], groups: &[&str], versions: &[&str], resources: &[&str], scope: Option<&str>) -> Value {
    let mut r =
        json!({"operations": ops, "apiGroups": groups, "apiVersions": versions, "resources": resources});
    if let Some(s) = scope {
        r["scope"] = json!(s);
    }
    r
}

#[test]
fn rules_match_operation_group_version_resource_subresource_and_scope() {
    let srv = EmbeddedServer::new(&crate::api::all_crds(), Arc::new(AllowAll));
    let rc = srv.registry.find("ray.io", "v1", "rayclusters").unwrap();
    let cq = srv
        .registry
        .find("kueue.x-k8s.io", "v1beta2", "clusterqueues")
        .unwrap();
    let create = call(&rc, "CREATE", None);
    assert!(rule_matches(
        &rule(&["CREATE"], &["ray.io"], &["v1"], &["rayclusters"], None),
        &create
    ));
    assert!(rule_matches(&rule(&["*"], &["*"], &["*"], &["*"], None), &create));
    assert!(
        !rule_matches(
            &rule(&["UPDATE"], &["ray.io"], &["v1"], &["rayclusters"], None),
            &create
        ),
        "operation"
    );
    assert!(
        !rule_matches(
            &rule(&["CREATE"], &["kueue.x-k8s.io"], &["v1"], &["rayclusters"], None),
            &create
        ),
        "group"
    );
    assert!(
        !rule_matches(
            &rule(&["CREATE"], &["ray.io"], &["v1alpha1"], &["rayclusters"], None),
            &create
        ),
        "version"
    );
    assert!(
        !rule_matches(
            &rule(&["CREATE"], &["ray.io"], &["v1"], &["rayservices"], None),
            &create
        ),
        "resource"
    );
    // "*" is every resource but none of their subresources; "x/*" and "*/*" include them.
    let status = call(&rc, "UPDATE", Some("status"));
    assert!(!rule_matches(
        &rule(&["*"], &["*"], &["*"], &["*"], None),
        &status
    ));
    assert!(!rule_matches(
        &rule(&["*"], &["*"], &["*"], &["rayclusters"], None),
        &status
    ));
    assert!(rule_matches(
        &rule(&["*"], &["*"], &["*"], &["rayclusters/status"], None),
        &status
    ));
    assert!(rule_matches(
        &rule(&["*"], &["*"], &["*"], &["rayclusters/*"], None),
        &status
    ));
    assert!(rule_matches(
        &rule(&["*"], &["*"], &["*"], &["*/*"], None),
        &status
    ));
    assert!(rule_matches(
        &rule(&["*"], &["*"], &["*"], &["rayclusters/*"], None),
        &create
    ));
    assert!(!rule_matches(
        &rule(&["*"], &["*"], &["*"], &["rayclusters/scale"], None),
        &status
    ));
    // scope
    let cq_create = call(&cq, "CREATE", None);
    assert!(rule_matches(
        &rule(&["*"], &["*"], &["*"], &["*"], Some("Cluster")),
        &cq_create
    ));
    assert!(!rule_matches(
        &rule(&["*"], &["*"], &["*"], &["*"], Some("Namespaced")),
        &cq_create
    ));
    assert!(!rule_matches(
        &rule(&["*"], &["*"], &["*"], &["*"], Some("Cluster")),
        &create
    ));
}

#[test]
fn label_selectors_with_expressions() {
    let l: BTreeMap<String, String> = [
        ("a".to_string(), "1".to_string()),
        ("kubernetes.io/metadata.name".to_string(), "team".to_string()),
    ]
    .into();
    assert!(selector_matches(&json!({}), &l), "empty selects all");
    assert!(selector_matches(&json!({"matchLabels": {"a": "1"}}), &l));
    assert!(!selector_matches(&json!({"matchLabels": {"a": "2"}}), &l));
    let not_in = |ns: &str| json!({"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", ns]}]});
    assert!(selector_matches(&not_in("quotagate-system"), &l));
    assert!(!selector_matches(&not_in("team"), &l));
    assert!(selector_matches(
        &json!({"matchExpressions": [{"key": "a", "operator": "Exists"}]}),
        &l
    ));
    assert!(!selector_matches(
        &json!({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}),
        &l
    ));
    assert!(
        !selector_matches(
            &json!({"matchExpressions": [{"key": "a", "operator": "Bogus"}]}),
            &l
        ),
        "unknown operator selects nothing"
    );
    assert!(
        !selector_matches(&json!({"matchExpressions": [{"key": "a"}]}), &l),
        "a missing operator selects nothing"
    );
}

#[test]
fn configurations_match_by_namespace_and_object_selectors() {
    let srv = EmbeddedServer::new(&crate::api::all_crds(), Arc::new(AllowAll));
    let ns_info = srv.registry.find("", "v1", "namespaces").unwrap();
    srv.store
        .create(
            &ns_info,
            None,
            json!({"metadata": {"name": "team", "labels": {"tier": "prod"}}}),
            false,
        )
        .unwrap();
    let mwc = srv
        .registry
        .find(GROUP, "v1", "mutatingwebhookconfigurations")
        .unwrap();
    let hook = |name: &str, extra: Value| {
        let mut h = json!({"name": name, "rules": [rule(&["CREATE"], &["ray.io"], &["v1"], &["rayclusters"], None)], "clientConfig": {}});
        for (k, v) in extra.as_object().unwrap() {
            h[k] = v.clone();
        }
        h
    };
    let config = json!({"metadata": {"name": "c"}, "webhooks": [
        hook("all.x", json!({})),
        hook("prod.x", json!({"namespaceSelector": {"matchLabels": {"tier": "prod"}}})),
        hook("dev.x", json!({"namespaceSelector": {"matchLabels": {"tier": "dev"}}})),
        hook("queued.x", json!({"objectSelector": {"matchExpressions": [{"key": "kueue.x-k8s.io/queue-name", "operator": "Exists"}]}})),
    ]});
    assert!(!any_configured(&srv.store, &srv.registry));
    srv.store.create(&mwc, None, config, false).unwrap();
    assert!(any_configured(&srv.store, &srv.registry));
    let rc = srv.registry.find("ray.io", "v1", "rayclusters").unwrap();
    let names = |obj: &Value| -> Vec<String> {
        matching(
            &srv.store,
            &srv.registry,
            "mutatingwebhookconfigurations",
            &call(&rc, "CREATE", None),
            obj,
        )
        .iter()
        .map(|h| h["name"].as_str().unwrap().to_string())
        .collect()
    };
    assert_eq!(names(&json!({"metadata": {"name": "r"}})), ["all.x", "prod.x"]);
    assert_eq!(
        names(&json!({"metadata": {"name": "r", "labels": {"kueue.x-k8s.io/queue-name": "q"}}})),
        ["all.x", "prod.x", "queued.x"]
    );
    let update = call(&rc, "UPDATE", None);
    assert!(
        matching(
            &srv.store,
            &srv.registry,
            "mutatingwebhookconfigurations",
            &update,
            &json!({})
        )
        .is_empty(),
        "CREATE only"
    );
}

#[test]
fn a_denial_reads_as_the_real_servers() {
    let e = denied(
        "vclusterqueue.kb.io",
        Some(&json!({"message": "ClusterQueue \"cq\" is invalid: x", "code": 403, "reason": "Forbidden"})),
    );
    assert_eq!(
        (e.code, e.message.as_str()),
        (
            403,
            "admission webhook \"vclusterqueue.kb.io\" denied the request: ClusterQueue \"cq\" is invalid: x"
        )
    );
    let e = denied("h", None);
    assert_eq!(
        (e.code, e.message.as_str()),
        (
            400,
            "admission webhook \"h\" denied the request without explanation"
        )
    );
    let e = call_failed(
        "h",
        "failed to call webhook: Post \"https://s.ns.svc:443/p?timeout=10s\": no endpoints available for service \"s\"",
    );
    assert_eq!(e.code, 500);
    assert!(
        e.message
            .contains("failed calling webhook \"h\": failed to call webhook"),
        "{}",
        e.message
    );
}

#[test]
fn a_review_carries_the_request_as_the_real_server_sends_it() {
    let srv = EmbeddedServer::new(&crate::api::all_crds(), Arc::new(AllowAll));
    let rc = srv.registry.find("ray.io", "v1", "rayclusters").unwrap();
    let old = json!({"metadata": {"name": "r"}});
    let c = Call {
        old: Some(&old),
        ..call(&rc, "UPDATE", Some("status"))
    };
    let r = review(&c, &json!({"metadata": {"name": "r"}, "spec": {}}), "uid-1");
    assert_eq!(r["apiVersion"], "admission.k8s.io/v1");
    let req = &r["request"];
    assert_eq!(
        (
            req["uid"].as_str(),
            req["name"].as_str(),
            req["namespace"].as_str()
        ),
        (Some("uid-1"), Some("r"), Some("team"))
    );
    assert_eq!(
        req["kind"],
        json!({"group": "ray.io", "version": "v1", "kind": "RayCluster"})
    );
    assert_eq!(req["resource"]["resource"], "rayclusters");
    assert_eq!(req["subResource"], "status");
    assert_eq!(req["operation"], "UPDATE");
    assert_eq!(req["oldObject"], old);
}

/// A webhook server on loopback with a certificate for `hook.team.svc` from its own CA: `/mutate`
/// annotates every object `hooked: <operation>`, `/validate` denies an object named `bad`.
async fn hook_server(cancel: tokio_util::sync::CancellationToken) -> (u16, String) {
    use axum::Json;
    let answer = |mutate: bool, Json(review): Json<Value>| async move {
        let req = &review["request"];
        let mut resp = json!({"uid": req["uid"], "allowed": true});
        if mutate {
            let patch = json!([{"op": "add", "path": "/metadata/annotations", "value": {"hooked": req["operation"]}}]);
            resp["patchType"] = json!("JSONPatch");
            resp["patch"] = json!(base64::engine::general_purpose::STANDARD.encode(patch.to_string()));
        } else if req["object"]["metadata"]["name"] == "bad" {
            resp = json!({"uid": req["uid"], "allowed": false, "status": {"code": 403, "reason": "Forbidden", "message": "bad is a bad name"}});
        }
        Json(json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": resp}))
    };
    let slow = move |b| async move {
        tokio::time::sleep(std::time::Duration::from_secs(3)).await;
        answer(false, b).await
    };
    let router = axum::Router::new()
        .route("/slow", axum::routing::post(slow))
        .route("/mutate", axum::routing::post(move |b| answer(true, b)))
        .route("/validate", axum::routing::post(move |b| answer(false, b)));
    tls_hook_server(router, cancel).await
}

/// Serves `router` over TLS on loopback for `hook.team.svc`; the port and the CA (base64 PEM).
async fn tls_hook_server(router: axum::Router, cancel: tokio_util::sync::CancellationToken) -> (u16, String) {
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["hook.team.svc".to_string()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            rustls_pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(super::super::listener::serve_tls(
        listener,
        router,
        Arc::new(tls),
        Default::default(),
        cancel,
    ));
    (port, base64::engine::general_purpose::STANDARD.encode(ca.pem()))
}

fn configuration(kind: &str, hook: &str, path: &str, ca: &str, policy: &str) -> Value {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": {"name": hook},
        "webhooks": [{
            "name": hook, "sideEffects": "None", "admissionReviewVersions": ["v1"], "failurePolicy": policy,
            "clientConfig": {"caBundle": ca, "service": {"namespace": "team", "name": "hook", "path": path, "port": 443}},
            "rules": [
                {"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]},
                {"operations": ["CREATE"], "apiGroups": ["events.k8s.io"], "apiVersions": ["v1"], "resources": ["events"]}
            ]
        }]
    })
}

/// The whole call: a create through the API is annotated by the mutating hook and judged by the
/// validating one, over TLS to the Service's EndpointSlice, trusting only the caBundle; updates and
/// patches are sent as UPDATE with the stored object; a hook that is down refuses writes under
/// failurePolicy Fail with kube-apiserver's message and is skipped under Ignore.
#[tokio::test]
async fn webhooks_are_called_over_tls_and_their_answers_applied() {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{Api, Patch, PatchParams, PostParams};
    let cancel = tokio_util::sync::CancellationToken::new();
    let (port, ca) = hook_server(cancel.clone()).await;
    let config = crate::embedded::ServerConfig {
        real_cluster: true,
        ..Default::default()
    };
    let srv = EmbeddedServer::with_config(&crate::api::all_crds(), Arc::new(AllowAll), config);
    let put = |plural: &str, group: &str, ns: Option<&str>, v: Value| {
        let info = srv
            .registry
            .all()
            .iter()
            .find(|r| r.plural == plural && r.group == group)
            .cloned()
            .unwrap();
        srv.store.create(&info, ns, v, false).unwrap();
    };
    put("namespaces", "", None, json!({"metadata": {"name": "team"}}));
    put(
        "services",
        "",
        Some("team"),
        json!({"metadata": {"name": "hook"}, "spec": {"ports": [{"name": "https", "port": 443, "targetPort": 9443}]}}),
    );
    put(
        "endpointslices",
        "discovery.k8s.io",
        Some("team"),
        json!({
            "metadata": {"name": "hook-1", "labels": {"kubernetes.io/service-name": "hook"}}, "addressType": "IPv4",
            "ports": [{"name": "https", "port": port}], "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": true}}]
        }),
    );
    let mwc: Api<k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration> =
        Api::all(srv.client());
    let vwc: Api<k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration> =
        Api::all(srv.client());
    mwc.create(
        &PostParams::default(),
        &serde_json::from_value(configuration(
            "MutatingWebhookConfiguration",
            "m.example",
            "/mutate",
            &ca,
            "Fail",
        ))
        .unwrap(),
    )
    .await
    .unwrap();
    vwc.create(
        &PostParams::default(),
        &serde_json::from_value(configuration(
            "ValidatingWebhookConfiguration",
            "v.example",
            "/validate",
            &ca,
            "Fail",
        ))
        .unwrap(),
    )
    .await
    .unwrap();

    let cms: Api<ConfigMap> = Api::namespaced(srv.client(), "team");
    let cm = |name: &str| -> ConfigMap {
        serde_json::from_value(json!({"metadata": {"name": name}, "data": {"a": "1"}})).unwrap()
    };
    let made = cms.create(&PostParams::default(), &cm("ok")).await.unwrap();
    assert_eq!(made.metadata.annotations.unwrap()["hooked"], "CREATE");
    let err = cms.create(&PostParams::default(), &cm("bad")).await.unwrap_err();
    let kube::Error::Api(s) = err else { panic!("{err}") };
    assert_eq!(
        (s.code, s.message.as_str()),
        (
            403,
            "admission webhook \"v.example\" denied the request: bad is a bad name"
        )
    );
    assert!(cms.get_opt("bad").await.unwrap().is_none(), "nothing stored");

    let patched = cms
        .patch(
            "ok",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"b": "2"}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.metadata.annotations.unwrap()["hooked"], "UPDATE");
    assert_eq!(patched.data.unwrap()["b"], "2");
    let mut replaced = cms.get("ok").await.unwrap();
    replaced.metadata.annotations = None;
    let replaced = cms
        .replace("ok", &PostParams::default(), &replaced)
        .await
        .unwrap();
    assert_eq!(
        replaced.metadata.annotations.unwrap()["hooked"],
        "UPDATE",
        "a PUT passes through the hooks too"
    );

    // An events.k8s.io Event (stored under the core names) reaches the hook and the store in its own
    // version's fields; a core Event no rule matches is stored as sent.
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(srv.client(), "team");
    let ev: k8s_openapi::api::events::v1::Event = serde_json::from_value(json!({
        "metadata": {"name": "e1"}, "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "c", "reportingInstance": "i",
        "action": "A", "reason": "R", "type": "Normal", "note": "hello", "regarding": {"kind": "ConfigMap", "name": "ok", "namespace": "team"}
    })).unwrap();
    let made = events.create(&PostParams::default(), &ev).await.unwrap();
    assert_eq!(made.metadata.annotations.unwrap()["hooked"], "CREATE");
    assert_eq!(
        (made.note.as_deref(), made.regarding.unwrap().name.as_deref()),
        (Some("hello"), Some("ok"))
    );
    let core: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(srv.client(), "team");
    let seen = core.get("e1").await.unwrap();
    assert_eq!(
        (seen.message.as_deref(), seen.involved_object.name.as_deref()),
        (Some("hello"), Some("ok"))
    );
    let ev2: k8s_openapi::api::core::v1::Event = serde_json::from_value(
        json!({"metadata": {"name": "e2"}, "message": "m", "involvedObject": {"name": "ok", "namespace": "team"}}),
    )
    .unwrap();
    let made = core.create(&PostParams::default(), &ev2).await.unwrap();
    assert!(made.metadata.annotations.is_none());
    assert_eq!(made.message.as_deref(), Some("m"));

    // A dry run may reach only hooks without side effects (these say None); one that may have some
    // refuses it.
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let made = cms.create(&dry, &cm("dry")).await.unwrap();
    assert_eq!(made.metadata.annotations.unwrap()["hooked"], "CREATE");
    assert!(
        cms.get_opt("dry").await.unwrap().is_none(),
        "a dry run stores nothing"
    );
    let mut unknown = configuration(
        "ValidatingWebhookConfiguration",
        "u.example",
        "/validate",
        &ca,
        "Fail",
    );
    unknown["webhooks"][0]["sideEffects"] = json!("Unknown");
    vwc.create(&PostParams::default(), &serde_json::from_value(unknown).unwrap())
        .await
        .unwrap();
    let err = cms.create(&dry, &cm("dry")).await.unwrap_err();
    let kube::Error::Api(s) = err else { panic!("{err}") };
    assert_eq!(
        (s.code, s.message.as_str()),
        (400, "admission webhook \"u.example\" does not support dry run")
    );
    vwc.delete("u.example", &Default::default()).await.unwrap();

    // timeoutSeconds: a hook slower than it fails the call, in the real server's words.
    let mut slow = configuration(
        "ValidatingWebhookConfiguration",
        "slow.example",
        "/slow",
        &ca,
        "Fail",
    );
    slow["webhooks"][0]["timeoutSeconds"] = json!(1);
    vwc.create(&PostParams::default(), &serde_json::from_value(slow).unwrap())
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let err = cms.create(&PostParams::default(), &cm("slow")).await.unwrap_err();
    let kube::Error::Api(s) = err else { panic!("{err}") };
    assert!(
        started.elapsed() < std::time::Duration::from_millis(2500),
        "{:?}",
        started.elapsed()
    );
    assert!(s.message.ends_with("failed calling webhook \"slow.example\": failed to call webhook: Post \"https://hook.team.svc:443/slow?timeout=1s\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)"), "{}", s.message);
    vwc.delete("slow.example", &Default::default()).await.unwrap();

    // The hook goes away: Fail refuses with the real server's words, nothing is stored.
    cancel.cancel();
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let err = cms
        .create(&PostParams::default(), &cm("later"))
        .await
        .unwrap_err();
    let kube::Error::Api(s) = err else { panic!("{err}") };
    assert_eq!(s.code, 500);
    let want = format!(
        "failed calling webhook \"m.example\": failed to call webhook: Post \"https://hook.team.svc:443/mutate?timeout=10s\": dial tcp 127.0.0.1:{port}: connect: connection refused"
    );
    assert!(s.message.ends_with(&want), "{}", s.message);
    assert!(cms.get_opt("later").await.unwrap().is_none());
    // Ignore: the write goes on unhooked.
    for (api, kind, name, path) in [
        ("m", "MutatingWebhookConfiguration", "m.example", "/mutate"),
        ("v", "ValidatingWebhookConfiguration", "v.example", "/validate"),
    ] {
        let body = configuration(kind, name, path, &ca, "Ignore");
        let pp = PatchParams::apply("test").force();
        if api == "m" {
            mwc.patch(name, &pp, &Patch::Apply(body)).await.unwrap();
        } else {
            vwc.patch(name, &pp, &Patch::Apply(body)).await.unwrap();
        }
    }
    let made = cms.create(&PostParams::default(), &cm("later")).await.unwrap();
    assert!(made.metadata.annotations.is_none());
}

/// Outside real-cluster mode (`run --embedded`) a stored configuration is never called.
#[tokio::test]
async fn webhooks_are_not_called_outside_real_cluster_mode() {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{Api, PostParams};
    let srv = EmbeddedServer::new(&[], Arc::new(AllowAll));
    let mwc: Api<k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration> =
        Api::all(srv.client());
    let body = configuration("MutatingWebhookConfiguration", "m.example", "/mutate", "", "Fail");
    mwc.create(&PostParams::default(), &serde_json::from_value(body).unwrap())
        .await
        .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(srv.client(), "default");
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "c"}})).unwrap();
    cms.create(&PostParams::default(), &cm)
        .await
        .expect("no webhook is called");
}

/// A mutating hook that adds annotations, keeping the object's own: `key` set to `value`, or with
/// `value` "=b", to the object's annotation `b` as the hook saw it ("none" without one).
fn annotating(key: &'static str, value: &'static str) -> axum::routing::MethodRouter {
    use axum::Json;
    axum::routing::post(move |Json(review): Json<Value>| async move {
        let req = &review["request"];
        let mut annotations = req["object"]["metadata"]["annotations"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        let seen = annotations
            .get("b")
            .and_then(Value::as_str)
            .unwrap_or("none")
            .to_string();
        annotations.insert(
            key.into(),
            json!(if value == "=b" { seen.as_str() } else { value }),
        );
        let patch = json!([{"op": "add", "path": "/metadata/annotations", "value": annotations}]);
        let patch = base64::engine::general_purpose::STANDARD.encode(patch.to_string());
        Json(
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                    "response": {"uid": req["uid"], "allowed": true, "patchType": "JSONPatch", "patch": patch}}),
        )
    })
}

/// `reinvocationPolicy: IfNeeded` (kube-apiserver `pkg/admission/plugin/webhook/mutating/dispatcher.go`
/// and the API reference): hook "a" (first by name) records what "b" later sets; with Never it saw
/// only the first state, with IfNeeded it is called again after b changed the object and records
/// b's value. Hook b, though IfNeeded too, is not called again: no hook after it changed the object.
#[tokio::test]
async fn a_hook_that_asks_is_called_again_after_a_later_hook_changed_the_object() {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{Api, Patch, PatchParams, PostParams};
    let cancel = tokio_util::sync::CancellationToken::new();
    let router = axum::Router::new()
        .route("/a", annotating("a-saw", "=b"))
        .route("/b", annotating("b", "set"));
    let (port, ca) = tls_hook_server(router, cancel.clone()).await;
    let config = crate::embedded::ServerConfig {
        real_cluster: true,
        ..Default::default()
    };
    let srv = EmbeddedServer::with_config(&crate::api::all_crds(), Arc::new(AllowAll), config);
    let put = |plural: &str, group: &str, ns: Option<&str>, v: Value| {
        let info = srv
            .registry
            .all()
            .iter()
            .find(|r| r.plural == plural && r.group == group)
            .cloned()
            .unwrap();
        srv.store.create(&info, ns, v, false).unwrap();
    };
    put("namespaces", "", None, json!({"metadata": {"name": "team"}}));
    put(
        "services",
        "",
        Some("team"),
        json!({"metadata": {"name": "hook"}, "spec": {"ports": [{"name": "https", "port": 443}]}}),
    );
    put(
        "endpointslices",
        "discovery.k8s.io",
        Some("team"),
        json!({
            "metadata": {"name": "hook-1", "labels": {"kubernetes.io/service-name": "hook"}}, "addressType": "IPv4",
            "ports": [{"name": "https", "port": port}], "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": true}}]
        }),
    );
    let mwc: Api<k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration> =
        Api::all(srv.client());
    let hook = |name: &str, path: &str, policy: &str| {
        let mut c = configuration("MutatingWebhookConfiguration", name, path, &ca, "Fail");
        c["webhooks"][0]["reinvocationPolicy"] = json!(policy);
        serde_json::from_value(c).unwrap()
    };
    mwc.create(&PostParams::default(), &hook("a.example", "/a", "Never"))
        .await
        .unwrap();
    mwc.create(&PostParams::default(), &hook("b.example", "/b", "IfNeeded"))
        .await
        .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(srv.client(), "team");
    let cm =
        |name: &str| -> ConfigMap { serde_json::from_value(json!({"metadata": {"name": name}})).unwrap() };
    let annotations = |c: ConfigMap| c.metadata.annotations.unwrap_or_default();
    let made = annotations(cms.create(&PostParams::default(), &cm("never")).await.unwrap());
    assert_eq!(
        (made["a-saw"].as_str(), made["b"].as_str()),
        ("none", "set"),
        "Never: one pass"
    );
    mwc.patch(
        "a.example",
        &PatchParams::apply("t").force(),
        &Patch::Apply(hook("a.example", "/a", "IfNeeded")),
    )
    .await
    .unwrap();
    let made = annotations(cms.create(&PostParams::default(), &cm("ifneeded")).await.unwrap());
    assert_eq!(
        (made["a-saw"].as_str(), made["b"].as_str()),
        ("set", "set"),
        "IfNeeded: a called again after b"
    );
    cancel.cancel();
}

/// `matchConditions` are CEL, not evaluated here: a configuration with them is refused in real-cluster
/// mode naming the field, rather than stored and ignored (which would call the hook for objects its
/// conditions exclude).
#[tokio::test]
async fn a_configuration_with_match_conditions_is_refused_naming_the_field() {
    use kube::api::{Api, PostParams};
    let config = crate::embedded::ServerConfig {
        real_cluster: true,
        ..Default::default()
    };
    let srv = EmbeddedServer::with_config(
        &crate::api::all_crds(),
        Arc::new(crate::embedded::crd_schema::CrdSchemaAdmission),
        config,
    );
    let vwc: Api<k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration> =
        Api::all(srv.client());
    let mut c = configuration(
        "ValidatingWebhookConfiguration",
        "v.example",
        "/validate",
        "",
        "Fail",
    );
    c["webhooks"][0]["matchConditions"] =
        json!([{"name": "not-system", "expression": "!request.userInfo.username.startsWith('system:')"}]);
    let err = vwc
        .create(
            &PostParams::default(),
            &serde_json::from_value(c.clone()).unwrap(),
        )
        .await
        .unwrap_err();
    let kube::Error::Api(s) = err else { panic!("{err}") };
    assert_eq!(s.code, 422);
    assert!(
        s.message
            .contains("webhooks[0].matchConditions: Forbidden: not supported by this API server"),
        "{}",
        s.message
    );
    c["webhooks"][0]["matchConditions"] = json!([]);
    vwc.create(&PostParams::default(), &serde_json::from_value(c).unwrap())
        .await
        .expect("without conditions it is stored");
}
