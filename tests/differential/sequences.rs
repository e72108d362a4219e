//! The sequences, grouped by area. Each area names where its expectations come from; every sequence
//! runs in a fresh namespace `{ns}` on both grounds, and cluster-scoped names carry `{ns}` too.

use super::engine::*;
use super::values;
use serde_json::{Value, json};

pub const CM: &str = "/api/v1/namespaces/{ns}/configmaps";
pub const SECRETS: &str = "/api/v1/namespaces/{ns}/secrets";
pub const PODS: &str = "/api/v1/namespaces/{ns}/pods";
pub const SVCS: &str = "/api/v1/namespaces/{ns}/services";
pub const JOBS: &str = "/apis/batch/v1/namespaces/{ns}/jobs";
pub const DEPLOYS: &str = "/apis/apps/v1/namespaces/{ns}/deployments";
pub const LQ: &str = "/apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/localqueues";
pub const CQ: &str = "/apis/kueue.x-k8s.io/v1beta2/clusterqueues";
pub const RF: &str = "/apis/kueue.x-k8s.io/v1beta2/resourceflavors";
pub const WL: &str = "/apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads";
pub const RC: &str = "/apis/ray.io/v1/namespaces/{ns}/rayclusters";

pub fn areas() -> Vec<Area> {
    vec![
        Area {
            name: "crud",
            source: "apiserver generic registry (staging/src/k8s.io/apiserver/pkg/registry/generic/registry)",
            sequences: crud,
        },
        Area {
            name: "patch",
            source: "apiserver handlers/patch.go; test/integration/apiserver/patch_test.go",
            sequences: patches,
        },
        Area {
            name: "apply",
            source: "test/integration/apiserver/apply/apply_test.go",
            sequences: applies,
        },
        Area {
            name: "fieldValidation",
            source: "test/integration/apiserver/fieldvalidation_test.go",
            sequences: field_validation,
        },
        Area {
            name: "dryRun",
            source: "test/integration/dryrun/dryrun_test.go",
            sequences: dry_run,
        },
        Area {
            name: "subresources",
            source: "pkg/registry/*/strategy.go (status, scale, generation)",
            sequences: subresources,
        },
        Area {
            name: "deletion",
            source: "apiserver registry/generic/registry/store.go (finalizers, propagationPolicy, preconditions)",
            sequences: deletion,
        },
        Area {
            name: "selectors",
            source: "apimachinery pkg/labels, pkg/fields; pkg/registry/core/*/strategy.go field sets",
            sequences: selectors,
        },
        Area {
            name: "pagination",
            source: "test/integration/apiserver/apiserver_test.go (TestListOptions, limit/continue)",
            sequences: pagination,
        },
        Area {
            name: "watch",
            source: "apiserver storage/cacher; test/integration/apiserver/watchcache",
            sequences: watches,
        },
        Area {
            name: "core values",
            source: "pkg/apis/core/validation/validation.go",
            sequences: values::core,
        },
        Area {
            name: "batch values",
            source: "pkg/apis/batch/validation/validation.go",
            sequences: values::batch,
        },
        Area {
            name: "quotagate CRDs",
            source: "config/crd (Kueue v1beta2, KubeRay v1 schemas and CEL rules)",
            sequences: values::crds,
        },
        Area {
            name: "samples",
            source: "Kueue's and KubeRay's shared samples (../shared/manifests/)",
            sequences: values::samples,
        },
    ]
}

/// A ConfigMap; an empty `data` is left out (an empty map is a difference of its own, below).
pub fn cm(name: &str, data: Value) -> Value {
    let mut c = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}});
    if data.as_object().is_some_and(|d| !d.is_empty()) {
        c["data"] = data;
    }
    c
}

fn cm_labels(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels},
        "data": {"a": "1"}})
}

fn at(base: &str, name: &str) -> String {
    format!("{base}/{name}")
}

fn crud() -> Vec<Sequence> {
    let c1 = at(CM, "c1");
    vec![
        seq(
            "configmap create then get",
            vec![post(CM, cm("c1", json!({"a": "1"}))), get(&c1)],
        ),
        seq(
            "configmap create twice is AlreadyExists",
            vec![
                post(CM, cm("c1", json!({"a": "1"}))),
                post(CM, cm("c1", json!({"a": "2"}))),
            ],
        ),
        seq(
            "configmap with an empty data map",
            vec![post(
                CM,
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c1"}, "data": {}}),
            )],
        ),
        seq(
            "list items carry no kind and apiVersion",
            vec![post(CM, cm("c1", json!({"a": "1"}))), exact(get(CM))],
        ),
        seq("get a missing configmap is NotFound", vec![get(&at(CM, "nope"))]),
        seq(
            "configmap list after two creates",
            vec![
                post(CM, cm("c1", json!({}))),
                post(CM, cm("c2", json!({}))),
                get(CM),
            ],
        ),
        seq(
            "configmap update with the current resourceVersion",
            vec![
                post(CM, cm("c1", json!({"a": "1"}))),
                put(
                    &c1,
                    json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "c1", "resourceVersion": "{rv}"}, "data": {"a": "2"}}),
                ),
                get(&c1),
            ],
        ),
        seq(
            "configmap update with a stale resourceVersion is a Conflict",
            vec![
                post(CM, cm("c1", json!({"a": "1"}))),
                put(
                    &c1,
                    json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "c1", "resourceVersion": "{rv}"}, "data": {"a": "2"}}),
                ),
                put(
                    &c1,
                    json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "c1", "resourceVersion": "1"}, "data": {"a": "3"}}),
                ),
            ],
        ),
        seq(
            "configmap update without resourceVersion is unconditional",
            vec![
                post(CM, cm("c1", json!({"a": "1"}))),
                put(&c1, cm("c1", json!({"a": "2"}))),
            ],
        ),
        seq(
            "update of a missing configmap is NotFound",
            vec![put(&at(CM, "c9"), cm("c9", json!({})))],
        ),
        seq(
            "update whose body names another object is BadRequest",
            vec![post(CM, cm("c1", json!({}))), put(&c1, cm("c2", json!({})))],
        ),
        seq(
            "create whose namespace differs from the path is BadRequest",
            vec![post(
                CM,
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c1", "namespace": "other"}}),
            )],
        ),
        seq(
            "create without a name is Invalid",
            vec![post(
                CM,
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}),
            )],
        ),
        seq(
            "create with generateName",
            vec![post(
                CM,
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "gen-"}}),
            )],
        ),
        seq(
            "create with an invalid name is Invalid",
            vec![post(CM, cm("Not_Valid", json!({})))],
        ),
        seq(
            "create with a wrong kind in the body is BadRequest",
            vec![post(
                CM,
                json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}),
            )],
        ),
        seq(
            "create with a body that is not JSON is BadRequest",
            vec![post_raw(CM, "{not json")],
        ),
        seq(
            "create in a missing namespace is NotFound",
            vec![post(
                "/api/v1/namespaces/missing-{ns}/configmaps",
                cm("c1", json!({})),
            )],
        ),
        seq(
            "secret stringData is folded into data",
            vec![
                post(
                    SECRETS,
                    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s1"},
                "stringData": {"k": "v"}}),
                ),
                get(&at(SECRETS, "s1")),
            ],
        ),
        seq(
            "secret with type Opaque by default",
            vec![
                post(
                    SECRETS,
                    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s1"},
                "data": {"k": "dg=="}}),
                ),
                get(&at(SECRETS, "s1")),
            ],
        ),
        seq(
            "configmap immutable refuses a data change",
            vec![
                post(
                    CM,
                    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c1"},
                "data": {"a": "1"}, "immutable": true}),
                ),
                put(
                    &c1,
                    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c1"},
                "data": {"a": "2"}, "immutable": true}),
                ),
            ],
        ),
        seq(
            "namespace get reads phase Active",
            vec![get("/api/v1/namespaces/{ns}")],
        ),
        seq(
            "a labelled configmap keeps its labels and annotations",
            vec![
                post(
                    CM,
                    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c1",
                "labels": {"app": "x"}, "annotations": {"note": "y"}}}),
                ),
                get(&c1),
            ],
        ),
        seq(
            "label with an invalid value is Invalid",
            vec![post(CM, cm_labels("c1", json!({"a": "not valid!"})))],
        ),
        seq(
            "label with an invalid key is Invalid",
            vec![post(CM, cm_labels("c1", json!({"-bad": "x"})))],
        ),
        seq(
            "a configmap with binaryData",
            vec![
                post(
                    CM,
                    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c1"},
                "binaryData": {"b": "AAE="}}),
                ),
                get(&c1),
            ],
        ),
        seq(
            "configmap key in both data and binaryData is Invalid",
            vec![post(
                CM,
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c1"},
                "data": {"b": "x"}, "binaryData": {"b": "AAE="}}),
            )],
        ),
        seq(
            "configmap key with a slash is Invalid",
            vec![post(CM, cm("c1", json!({"a/b": "x"})))],
        ),
    ]
}

fn patches() -> Vec<Sequence> {
    let c1 = at(CM, "c1");
    let base = || post(CM, cm("c1", json!({"a": "1", "b": "2"})));
    vec![
        seq(
            "merge patch adds and removes keys",
            vec![base(), patch(&c1, MERGE, json!({"data": {"a": null, "c": "3"}}))],
        ),
        seq(
            "json patch add a key",
            vec![
                base(),
                patch(
                    &c1,
                    JSON_PATCH,
                    json!([{"op": "add", "path": "/data/c", "value": "3"}]),
                ),
            ],
        ),
        seq(
            "json patch remove a missing key is refused",
            vec![
                base(),
                patch(&c1, JSON_PATCH, json!([{"op": "remove", "path": "/data/zz"}])),
            ],
        ),
        seq(
            "json patch replace of a missing map key",
            vec![
                base(),
                patch(
                    &c1,
                    JSON_PATCH,
                    json!([{"op": "replace", "path": "/data/zz", "value": "x"}]),
                ),
            ],
        ),
        seq(
            "json patch test that fails",
            vec![
                base(),
                patch(
                    &c1,
                    JSON_PATCH,
                    json!([{"op": "test", "path": "/data/a", "value": "9"}]),
                ),
            ],
        ),
        seq(
            "json patch test that holds then replace",
            vec![
                base(),
                patch(
                    &c1,
                    JSON_PATCH,
                    json!([{"op": "test", "path": "/data/a", "value": "1"},
                {"op": "replace", "path": "/data/a", "value": "9"}]),
                ),
            ],
        ),
        seq(
            "json patch that is not a list is BadRequest",
            vec![base(), patch(&c1, JSON_PATCH, json!({"op": "add"}))],
        ),
        seq(
            "json patch with an unknown op",
            vec![
                base(),
                patch(&c1, JSON_PATCH, json!([{"op": "frob", "path": "/data/a"}])),
            ],
        ),
        seq(
            "strategic merge patch on a configmap",
            vec![
                base(),
                patch(&c1, STRATEGIC, json!({"data": {"b": null, "d": "4"}})),
            ],
        ),
        seq(
            "strategic merge patch with an unknown $patch directive",
            vec![
                base(),
                patch(&c1, STRATEGIC, json!({"data": {"$patch": "bogus"}})),
            ],
        ),
        seq(
            "strategic merge patch merges pod containers by name",
            vec![
                setup(post(PODS, values::pod())),
                patch(
                    &at(PODS, "p"),
                    STRATEGIC,
                    json!({"spec": {"containers": [{"name": "c", "image": "busybox:2"}]}}),
                ),
            ],
        ),
        seq(
            "merge patch replaces a list whole",
            vec![
                setup(post(PODS, values::pod())),
                setup(patch(
                    &at(PODS, "p"),
                    MERGE,
                    json!({"metadata": {"finalizers": ["a.io/x"]}}),
                )),
                patch(&at(PODS, "p"), MERGE, json!({"metadata": {"finalizers": []}})),
            ],
        ),
        seq(
            "strategic merge patch on a custom resource is UnsupportedMediaType",
            vec![
                post(LQ, values::lq("lq")),
                patch(
                    &at(LQ, "lq"),
                    STRATEGIC,
                    json!({"spec": {"clusterQueue": "other"}}),
                ),
            ],
        ),
        seq(
            "merge patch on a custom resource",
            vec![
                post(LQ, values::lq("lq")),
                patch(&at(LQ, "lq"), MERGE, json!({"spec": {"clusterQueue": "other"}})),
            ],
        ),
        seq(
            "patch of a missing object is NotFound",
            vec![patch(&at(CM, "nope"), MERGE, json!({"data": {}}))],
        ),
        seq(
            "patch changing the name is refused",
            vec![base(), patch(&c1, MERGE, json!({"metadata": {"name": "c2"}}))],
        ),
        seq(
            "patch with a stale resourceVersion is a Conflict",
            vec![
                base(),
                patch(
                    &c1,
                    MERGE,
                    json!({"metadata": {"resourceVersion": "1"}, "data": {"a": "x"}}),
                ),
            ],
        ),
        seq(
            "patch with an unsupported content type",
            vec![base(), patch_raw(&c1, "text/plain", "data")],
        ),
        seq(
            "merge patch body that is not JSON",
            vec![base(), patch_raw(&c1, MERGE, "{nope")],
        ),
        seq(
            "patch that changes nothing keeps the resourceVersion",
            vec![base(), patch(&c1, MERGE, json!({"data": {"a": "1"}}))],
        ),
    ]
}

const APPLY_CM: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c1\ndata:\n  a: \"1\"\n";

fn applies() -> Vec<Sequence> {
    let c1 = at(CM, "c1");
    let apply_as = |m: &str, body: &str| apply(&format!("{c1}?fieldManager={m}"), body);
    let other = APPLY_CM.replace("\"1\"", "\"2\"");
    vec![
        seq("apply creates", vec![apply_as("one", APPLY_CM), get(&c1)]),
        seq(
            "apply creates and records managedFields",
            vec![apply_as("one", APPLY_CM), managed_fields(&c1)],
        ),
        seq(
            "apply without fieldManager is refused",
            vec![apply(&c1, APPLY_CM)],
        ),
        seq(
            "apply again changes nothing",
            vec![apply_as("one", APPLY_CM), apply_as("one", APPLY_CM)],
        ),
        seq(
            "second manager applying another value conflicts",
            vec![apply_as("one", APPLY_CM), apply_as("two", &other)],
        ),
        seq(
            "second manager applying the same value shares ownership",
            vec![
                apply_as("one", APPLY_CM),
                apply_as("two", APPLY_CM),
                managed_fields(&c1),
            ],
        ),
        seq(
            "force takes ownership",
            vec![
                apply_as("one", APPLY_CM),
                apply(&format!("{c1}?fieldManager=two&force=true"), &other),
                managed_fields(&c1),
            ],
        ),
        seq(
            "apply dropping a field it owns removes it",
            vec![
                apply_as(
                    "one",
                    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c1\ndata:\n  a: \"1\"\n  b: \"2\"\n",
                ),
                apply_as("one", APPLY_CM),
                get(&c1),
            ],
        ),
        seq(
            "update after apply then apply conflicts with the updater",
            vec![
                apply_as("one", APPLY_CM),
                patch(
                    &format!("{c1}?fieldManager=editor"),
                    MERGE,
                    json!({"data": {"a": "9"}}),
                ),
                apply_as("one", &other),
            ],
        ),
        seq(
            "create records an Update managedFields entry",
            vec![
                post(&format!("{CM}?fieldManager=creator"), cm("c1", json!({"a": "1"}))),
                managed_fields(&c1),
            ],
        ),
        seq(
            "apply with force but no fieldManager",
            vec![apply(&format!("{c1}?force=true"), APPLY_CM)],
        ),
        seq(
            "apply body without kind is BadRequest",
            vec![apply_as("one", "apiVersion: v1\nmetadata:\n  name: c1\n")],
        ),
        seq(
            "apply body naming another object is BadRequest",
            vec![apply_as("one", &APPLY_CM.replace("name: c1", "name: c2"))],
        ),
        seq(
            "apply of a custom resource",
            vec![
                apply(
                    &format!("{}?fieldManager=one", at(LQ, "lq")),
                    "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata:\n  name: lq\nspec:\n  clusterQueue: cq\n",
                ),
                managed_fields(&at(LQ, "lq")),
            ],
        ),
        seq(
            "apply of a custom resource conflict",
            vec![
                apply(
                    &format!("{}?fieldManager=one", at(LQ, "lq")),
                    "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata:\n  name: lq\nspec:\n  clusterQueue: cq\n",
                ),
                apply(
                    &format!("{}?fieldManager=two", at(LQ, "lq")),
                    "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata:\n  name: lq\nspec:\n  clusterQueue: other\n",
                ),
            ],
        ),
        seq(
            "apply with a managedFields in the body is refused",
            vec![apply_as(
                "one",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c1\n  managedFields:\n  - manager: x\n    operation: Apply\n",
            )],
        ),
        seq(
            "apply with dryRun stores nothing",
            vec![
                apply(&format!("{c1}?fieldManager=one&dryRun=All"), APPLY_CM),
                get(&c1),
            ],
        ),
    ]
}

fn field_validation() -> Vec<Sequence> {
    let unknown =
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c1"},"data":{"a":"1"},"dta":{"b":"2"}}"#;
    let dup = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c1"},"data":{"a":"1"},"data":{"a":"2"}}"#;
    let unknown_meta =
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c1","lables":{"a":"b"}}}"#;
    let lq_unknown = r#"{"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"LocalQueue","metadata":{"name":"lq"},"spec":{"clusterQueue":"cq","bogus":1}}"#;
    let mut out = Vec::new();
    for (mode, q) in [
        ("default", ""),
        ("Strict", "?fieldValidation=Strict"),
        ("Warn", "?fieldValidation=Warn"),
        ("Ignore", "?fieldValidation=Ignore"),
    ] {
        let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
        out.push(seq(
            leak(format!("unknown field, {mode}")),
            vec![post_raw(&format!("{CM}{q}"), unknown), get(&at(CM, "c1"))],
        ));
        out.push(seq(
            leak(format!("duplicate field, {mode}")),
            vec![post_raw(&format!("{CM}{q}"), dup), get(&at(CM, "c1"))],
        ));
        out.push(seq(
            leak(format!("unknown metadata field, {mode}")),
            vec![post_raw(&format!("{CM}{q}"), unknown_meta)],
        ));
        out.push(seq(
            leak(format!("unknown custom resource field, {mode}")),
            vec![post_raw(&format!("{LQ}{q}"), lq_unknown), get(&at(LQ, "lq"))],
        ));
    }
    out.push(seq(
        "fieldValidation with a bad value",
        vec![post(
            &format!("{CM}?fieldValidation=Sometimes"),
            cm("c1", json!({})),
        )],
    ));
    out.push(seq(
        "json patch adding an unknown field, Strict",
        vec![
            post(CM, cm("c1", json!({}))),
            patch(
                &format!("{}?fieldValidation=Strict", at(CM, "c1")),
                JSON_PATCH,
                json!([{"op": "add", "path": "/dta", "value": {}}]),
            ),
        ],
    ));
    out.push(seq(
        "merge patch adding an unknown field, default",
        vec![
            post(CM, cm("c1", json!({}))),
            patch(&at(CM, "c1"), MERGE, json!({"dta": {"x": "y"}})),
        ],
    ));
    out.push(seq(
        "apply with an unknown field, Strict",
        vec![apply(
            &format!("{}?fieldManager=one&fieldValidation=Strict", at(CM, "c1")),
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c1\ndta:\n  a: b\n",
        )],
    ));
    out.push(seq(
        "apply with a duplicate key, Strict",
        vec![apply(
            &format!("{}?fieldManager=one&fieldValidation=Strict", at(CM, "c1")),
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c1\ndata:\n  a: \"1\"\n  a: \"2\"\n",
        )],
    ));
    out
}

fn dry_run() -> Vec<Sequence> {
    let c1 = at(CM, "c1");
    vec![
        seq(
            "dryRun create stores nothing",
            vec![
                post(&format!("{CM}?dryRun=All"), cm("c1", json!({"a": "1"}))),
                get(&c1),
            ],
        ),
        seq(
            "dryRun with an invalid value",
            vec![post(&format!("{CM}?dryRun=Some"), cm("c1", json!({})))],
        ),
        seq(
            "dryRun update leaves the object",
            vec![
                post(CM, cm("c1", json!({"a": "1"}))),
                put(&format!("{c1}?dryRun=All"), cm("c1", json!({"a": "2"}))),
                get(&c1),
            ],
        ),
        seq(
            "dryRun patch leaves the object",
            vec![
                post(CM, cm("c1", json!({"a": "1"}))),
                patch(&format!("{c1}?dryRun=All"), MERGE, json!({"data": {"a": "2"}})),
                get(&c1),
            ],
        ),
        seq(
            "dryRun delete leaves the object",
            vec![
                post(CM, cm("c1", json!({"a": "1"}))),
                delete(&format!("{c1}?dryRun=All")),
                get(&c1),
            ],
        ),
        seq(
            "dryRun create of an invalid object is still refused",
            vec![post(&format!("{CM}?dryRun=All"), cm("Bad_Name", json!({})))],
        ),
        seq(
            "dryRun create with generateName",
            vec![post(
                &format!("{CM}?dryRun=All"),
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "g-"}}),
            )],
        ),
    ]
}

fn subresources() -> Vec<Sequence> {
    let lq = at(LQ, "lq");
    let status = format!("{lq}/status");
    vec![
        seq(
            "custom resource generation starts at 1 and spec updates bump it",
            vec![
                post(LQ, values::lq("lq")),
                patch(&lq, MERGE, json!({"spec": {"clusterQueue": "cq2"}})),
            ],
        ),
        seq(
            "custom resource metadata update leaves generation",
            vec![
                post(LQ, values::lq("lq")),
                patch(&lq, MERGE, json!({"metadata": {"labels": {"x": "y"}}})),
            ],
        ),
        seq(
            "status written through the main resource is ignored",
            vec![
                post(LQ, values::lq("lq")),
                patch(&lq, MERGE, json!({"status": {"pendingWorkloads": 3}})),
            ],
        ),
        seq(
            "status subresource write leaves spec and generation",
            vec![
                post(LQ, values::lq("lq")),
                patch(
                    &status,
                    MERGE,
                    json!({"spec": {"clusterQueue": "zz"}, "status": {"pendingWorkloads": 3}}),
                ),
                get(&lq),
            ],
        ),
        seq(
            "status subresource get",
            vec![post(LQ, values::lq("lq")), get(&status)],
        ),
        seq(
            "status subresource of a missing object",
            vec![get(&at(LQ, "nope/status"))],
        ),
        seq(
            "status observedGeneration condition through the subresource",
            vec![
                post(LQ, values::lq("lq")),
                patch(
                    &status,
                    MERGE,
                    json!({"status": {"conditions": [{"type": "Active", "status": "True",
                "reason": "Ready", "message": "m", "observedGeneration": 1,
                "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}),
                ),
            ],
        ),
        seq(
            "status condition without its required fields is Invalid",
            vec![
                post(LQ, values::lq("lq")),
                patch(
                    &status,
                    MERGE,
                    json!({"status": {"conditions": [{"type": "Active"}]}}),
                ),
            ],
        ),
        seq(
            "configmap has no status subresource",
            vec![post(CM, cm("c1", json!({}))), get(&at(CM, "c1/status"))],
        ),
        seq(
            "deployment scale subresource get and update",
            vec![
                post(DEPLOYS, values::deployment()),
                get(&at(DEPLOYS, "d/scale")),
                patch(&at(DEPLOYS, "d/scale"), MERGE, json!({"spec": {"replicas": 3}})),
            ],
        ),
        seq(
            "job status subresource write",
            vec![
                setup(post(JOBS, values::job())),
                patch(&at(JOBS, "j/status"), MERGE, json!({"status": {"active": 0}})),
            ],
        ),
        seq(
            "pod status subresource write of the phase",
            vec![
                setup(post(PODS, values::pod())),
                patch(&at(PODS, "p/status"), MERGE, json!({"status": {"message": "m"}})),
            ],
        ),
    ]
}

fn deletion() -> Vec<Sequence> {
    let c1 = at(CM, "c1");
    let fin = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c1", "finalizers": ["example.com/hold"]}});
    vec![
        seq(
            "delete then get is NotFound",
            vec![post(CM, cm("c1", json!({}))), delete(&c1), get(&c1)],
        ),
        seq(
            "delete a missing object is NotFound",
            vec![delete(&at(CM, "nope"))],
        ),
        seq(
            "delete with a finalizer keeps the object",
            vec![post(CM, fin.clone()), delete(&c1), get(&c1)],
        ),
        seq(
            "removing the last finalizer of a deleted object removes it",
            vec![
                post(CM, fin.clone()),
                delete(&c1),
                patch(&c1, MERGE, json!({"metadata": {"finalizers": null}})),
                get(&c1),
            ],
        ),
        seq(
            "a second delete of a finalizing object",
            vec![post(CM, fin.clone()), delete(&c1), delete(&c1)],
        ),
        seq(
            "adding a finalizer to a deleted object is refused",
            vec![
                post(CM, fin.clone()),
                delete(&c1),
                patch(
                    &c1,
                    MERGE,
                    json!({"metadata": {"finalizers": ["example.com/hold", "example.com/more"]}}),
                ),
            ],
        ),
        seq(
            "delete with a uid precondition that does not hold",
            vec![
                post(CM, cm("c1", json!({}))),
                delete_with(
                    &c1,
                    json!({"kind": "DeleteOptions", "apiVersion": "v1",
                "preconditions": {"uid": "00000000-0000-0000-0000-000000000000"}}),
                ),
            ],
        ),
        seq(
            "delete with a resourceVersion precondition that holds",
            vec![
                post(CM, cm("c1", json!({}))),
                delete_with(
                    &c1,
                    json!({"kind": "DeleteOptions", "apiVersion": "v1",
                "preconditions": {"resourceVersion": "{rv}"}}),
                ),
            ],
        ),
        seq(
            "delete with propagationPolicy Orphan adds the orphan finalizer",
            vec![
                post(CM, fin.clone()),
                delete_with(
                    &c1,
                    json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Orphan"}),
                ),
            ],
        ),
        seq(
            "delete with propagationPolicy Foreground",
            vec![
                post(CM, fin.clone()),
                delete_with(
                    &c1,
                    json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Foreground"}),
                ),
            ],
        ),
        seq(
            "delete with an unknown propagationPolicy is refused",
            vec![
                post(CM, cm("c1", json!({}))),
                delete(&format!("{c1}?propagationPolicy=Sometimes")),
            ],
        ),
        seq(
            "delete with gracePeriodSeconds negative",
            vec![
                post(CM, cm("c1", json!({}))),
                delete(&format!("{c1}?gracePeriodSeconds=-5")),
            ],
        ),
        seq(
            "delete collection by label",
            vec![
                post(CM, cm_labels("c1", json!({"x": "a"}))),
                post(CM, cm_labels("c2", json!({"x": "b"}))),
                delete(&format!("{CM}?labelSelector=x=a")),
                get(CM),
            ],
        ),
        seq(
            "delete of a job in the background",
            vec![
                setup(post(JOBS, values::job())),
                delete(&format!("{}?propagationPolicy=Background", at(JOBS, "j"))),
            ],
        ),
        seq(
            "delete of a custom resource",
            vec![
                post(LQ, values::lq("lq")),
                delete(&at(LQ, "lq")),
                get(&at(LQ, "lq")),
            ],
        ),
    ]
}

fn selectors() -> Vec<Sequence> {
    let scene = || {
        vec![
            setup(post(CM, cm_labels("a1", json!({"app": "a", "tier": "web"})))),
            setup(post(CM, cm_labels("a2", json!({"app": "a", "tier": "db"})))),
            setup(post(CM, cm_labels("b1", json!({"app": "b"})))),
        ]
    };
    let with = |q: &str| {
        let mut s = scene();
        s.push(get(&format!("{CM}?{q}")));
        s
    };
    vec![
        seq("labelSelector equality", with("labelSelector=app=a")),
        seq("labelSelector inequality", with("labelSelector=app!=a")),
        seq(
            "labelSelector set-based in",
            with("labelSelector=tier in (web,db)"),
        ),
        seq("labelSelector notin", with("labelSelector=tier notin (web)")),
        seq("labelSelector exists", with("labelSelector=tier")),
        seq("labelSelector does not exist", with("labelSelector=!tier")),
        seq("labelSelector of two terms", with("labelSelector=app=a,tier=db")),
        seq("labelSelector that does not parse", with("labelSelector=app==")),
        seq(
            "fieldSelector metadata.name",
            with("fieldSelector=metadata.name=b1"),
        ),
        seq(
            "fieldSelector metadata.name inequality",
            with("fieldSelector=metadata.name!=b1"),
        ),
        seq(
            "fieldSelector on an unsupported field",
            with("fieldSelector=data.a=1"),
        ),
        seq(
            "fieldSelector on a pod's status.phase",
            vec![
                setup(post(PODS, values::pod())),
                get(&format!("{PODS}?fieldSelector=status.phase=Running")),
            ],
        ),
        seq(
            "fieldSelector on a secret's type",
            vec![
                setup(post(
                    SECRETS,
                    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s1"}, "type": "x/y"}),
                )),
                setup(post(
                    SECRETS,
                    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s2"}}),
                )),
                get(&format!("{SECRETS}?fieldSelector=type=x/y")),
            ],
        ),
        seq(
            "fieldSelector on a custom resource's metadata.namespace",
            vec![
                post(LQ, values::lq("lq")),
                get(&format!("{LQ}?fieldSelector=metadata.namespace={{ns}}")),
            ],
        ),
        seq(
            "fieldSelector on a custom resource's spec field",
            vec![
                post(LQ, values::lq("lq")),
                get(&format!("{LQ}?fieldSelector=spec.clusterQueue=cq")),
            ],
        ),
    ]
}

fn pagination() -> Vec<Sequence> {
    // Secrets, not ConfigMaps: the real controller-manager adds a ConfigMap to every namespace.
    let secret =
        |n: String| json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": n}, "type": "Opaque"});
    let first = || {
        (1..=5)
            .map(|i| setup(post(SECRETS, secret(format!("s{i}")))))
            .collect::<Vec<_>>()
    };
    let with = |more: Vec<Step>| {
        let mut s = first();
        s.extend(more);
        s
    };
    vec![
        seq(
            "limit 2 gives a continue token and a remaining count",
            with(vec![get(&format!("{SECRETS}?limit=2"))]),
        ),
        seq(
            "continue reads the next page",
            with(vec![
                get(&format!("{SECRETS}?limit=2")),
                get(&format!("{SECRETS}?limit=2&continue={{continue}}")),
                get(&format!("{SECRETS}?limit=2&continue={{continue}}")),
            ]),
        ),
        seq(
            "a continue token that does not parse",
            with(vec![get(&format!("{SECRETS}?limit=2&continue=bogus"))]),
        ),
        seq(
            "limit 0 lists everything",
            with(vec![get(&format!("{SECRETS}?limit=0"))]),
        ),
        seq(
            "limit larger than the list",
            with(vec![get(&format!("{SECRETS}?limit=50"))]),
        ),
        seq(
            "limit with a label selector",
            vec![
                post(CM, cm_labels("a1", json!({"x": "1"}))),
                post(CM, cm_labels("a2", json!({"x": "2"}))),
                post(CM, cm_labels("a3", json!({"x": "1"}))),
                get(&format!("{CM}?limit=1&labelSelector=x=1")),
                get(&format!("{CM}?limit=1&labelSelector=x=1&continue={{continue}}")),
            ],
        ),
        seq(
            "resourceVersion 0 with limit",
            with(vec![get(&format!("{SECRETS}?limit=2&resourceVersion=0"))]),
        ),
        seq(
            "resourceVersionMatch without resourceVersion is refused",
            with(vec![get(&format!("{SECRETS}?resourceVersionMatch=NotOlderThan"))]),
        ),
    ]
}

fn watches() -> Vec<Sequence> {
    let c1 = at(CM, "c1");
    vec![
        seq(
            "watch from a list's resourceVersion sees later writes",
            vec![
                get(CM),
                setup(post(CM, cm("c1", json!({"a": "1"})))),
                setup(patch(&c1, MERGE, json!({"data": {"a": "2"}}))),
                setup(delete(&c1)),
                watch(&format!("{CM}?resourceVersion={{rv@1}}")),
            ],
        ),
        seq(
            "watch from resourceVersion 0 starts with ADDED",
            vec![
                post(CM, cm("c1", json!({}))),
                post(CM, cm("c2", json!({}))),
                watch(&format!("{CM}?resourceVersion=0")),
            ],
        ),
        seq(
            "watch from an object's resourceVersion",
            vec![
                post(CM, cm("c1", json!({"a": "1"}))),
                patch(&c1, MERGE, json!({"data": {"a": "2"}})),
                patch(&c1, MERGE, json!({"data": {"a": "3"}})),
                watch(&format!("{CM}?resourceVersion={{rv@1}}")),
            ],
        ),
        seq(
            "watch from a too old resourceVersion is Expired",
            vec![
                post(CM, cm("c1", json!({}))),
                watch(&format!("{CM}?resourceVersion=1")),
            ],
        ),
        seq(
            "watch with a label selector",
            vec![
                setup(post(CM, cm_labels("a1", json!({"x": "1"})))),
                setup(post(CM, cm_labels("a2", json!({"x": "2"})))),
                watch(&format!("{CM}?resourceVersion=0&labelSelector=x=1")),
            ],
        ),
        seq(
            "watch with a field selector on the name",
            vec![
                post(CM, cm("c1", json!({}))),
                post(CM, cm("c2", json!({}))),
                watch(&format!("{CM}?resourceVersion=0&fieldSelector=metadata.name=c2")),
            ],
        ),
        seq(
            "watch with sendInitialEvents ends the initial events with a bookmark",
            vec![
                post(CM, cm("c1", json!({}))),
                watch(&format!(
                    "{CM}?sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"
                )),
            ],
        ),
        seq(
            "watch with sendInitialEvents but no bookmarks is refused",
            vec![watch(&format!(
                "{CM}?sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
            ))],
        ),
        seq(
            "watch of custom resources from resourceVersion 0",
            vec![
                post(LQ, values::lq("lq")),
                watch(&format!("{LQ}?resourceVersion=0")),
            ],
        ),
        seq(
            "watch with a resourceVersion that does not parse",
            vec![watch(&format!("{CM}?resourceVersion=abc"))],
        ),
    ]
}
