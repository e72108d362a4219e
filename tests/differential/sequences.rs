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
            source: "apiserver endpoints/handlers/patch.go; test/integration/apiserver/patch_test.go",
            sequences: patches,
        },
        Area {
            name: "apply",
            source: "test/integration/apiserver/apply/apply_test.go",
            sequences: applies,
        },
        Area {
            name: "fieldValidation",
            source: "test/integration/apiserver/field_validation_test.go",
            sequences: super::options::field_validation,
        },
        Area {
            name: "dryRun",
            source: "test/integration/dryrun/dryrun_test.go",
            sequences: super::options::dry_run,
        },
        Area {
            name: "subresources",
            source: "pkg/registry/*/strategy.go (status, scale, generation)",
            sequences: super::options::subresources,
        },
        Area {
            name: "deletion",
            source: "apiserver registry/generic/registry/store.go (finalizers, propagationPolicy, preconditions)",
            sequences: super::options::deletion,
        },
        Area {
            name: "garbage collection",
            source: "test/integration/garbagecollector/garbage_collector_test.go",
            sequences: super::options::garbage_collection,
        },
        Area {
            name: "selectors",
            source: "apimachinery pkg/labels, pkg/fields; pkg/registry/core/*/strategy.go field sets",
            sequences: super::reads::selectors,
        },
        Area {
            name: "pagination",
            source: "test/integration/apiserver/apiserver_test.go (limit/continue pagination)",
            sequences: super::reads::pagination,
        },
        Area {
            name: "watch",
            source: "apiserver pkg/storage/cacher; test/integration/apiserver/watchcache_test.go",
            sequences: super::reads::watches,
        },
        Area {
            name: "tables",
            source: "staging/src/k8s.io/apiserver/pkg/endpoints/handlers/response.go (as=Table); printers",
            sequences: super::kinds::tables,
        },
        Area {
            name: "events",
            source: "pkg/apis/core/validation/events.go; pkg/registry/core/event/strategy.go",
            sequences: super::kinds::events,
        },
        Area {
            name: "rbac",
            source: "plugin/pkg/auth/authorizer/rbac; apiserver endpoints/filters/impersonation.go",
            sequences: super::kinds::rbac,
        },
        Area {
            name: "tokens",
            source: "pkg/registry/core/serviceaccount/storage/token.go",
            sequences: super::kinds::tokens,
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
            sequences: super::crds::crds,
        },
        Area {
            name: "samples",
            source: "Kueue's and KubeRay's shared samples (../shared/manifests/)",
            sequences: super::crds::samples,
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

pub fn cm_labels(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels},
        "data": {"a": "1"}})
}

pub fn at(base: &str, name: &str) -> String {
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
