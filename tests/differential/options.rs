//! Request options and subresources: fieldValidation, dryRun, status and scale, deletion.

use super::engine::*;
use super::sequences::*;
use super::values;
use serde_json::json;

pub fn field_validation() -> Vec<Sequence> {
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

pub fn dry_run() -> Vec<Sequence> {
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

pub fn subresources() -> Vec<Sequence> {
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
                // By code only: whether kube-controller-manager's deployment controller has
                // written the Deployment's status before this read (its resourceVersion then one
                // more) is timing. The patch below answers the same Scale, at its own write.
                setup(get(&at(DEPLOYS, "d/scale"))),
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

pub fn deletion() -> Vec<Sequence> {
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
            "delete of a job with no policy orphans: the orphan finalizer",
            vec![setup(post(JOBS, values::job())), delete(&at(JOBS, "j"))],
        ),
        seq(
            "delete of a custom resource",
            vec![
                post(LQ, values::lq("lq")),
                delete(&at(LQ, "lq")),
                get(&at(LQ, "lq")),
            ],
        ),
        // Kinds whose storage returns the deleted object (`ReturnDeletedObject`) and one whose does not.
        // The pod carries a scheduling gate, so no kube-scheduler status write races the delete: with
        // one in flight kube-apiserver now and then answered with a pod lacking its resourceVersion.
        seq(
            "delete of an unscheduled pod returns the pod",
            vec![
                post(PODS, {
                    let mut p = values::pod();
                    p["spec"]["schedulingGates"] = json!([{"name": "example.com/gate"}]);
                    p
                }),
                delete(&at(PODS, "p")),
            ],
        ),
        seq(
            "delete of a service returns the service",
            vec![post(SVCS, values::service()), delete(&at(SVCS, "s"))],
        ),
        seq(
            "delete of a service account returns it",
            vec![
                post(
                    "/api/v1/namespaces/{ns}/serviceaccounts",
                    json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa"}}),
                ),
                delete("/api/v1/namespaces/{ns}/serviceaccounts/sa"),
            ],
        ),
        seq(
            "delete of a secret is a Success status",
            vec![
                post(
                    SECRETS,
                    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}),
                ),
                delete(&at(SECRETS, "s")),
            ],
        ),
    ]
}

fn owned(name: &str, owner: &str, block: bool) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "ownerReferences": [{
        "apiVersion": "v1", "kind": "ConfigMap", "name": owner, "uid": "{uid}",
        "blockOwnerDeletion": block}]}, "data": {"a": "1"}})
}

/// The garbage collector by owner (kube-controller-manager's on the real ground): each sequence creates
/// an owner, a dependent naming its uid, deletes the owner with a propagation policy and waits for the
/// dependent's fate. Source: test/integration/garbagecollector/garbage_collector_test.go.
pub fn garbage_collection() -> Vec<Sequence> {
    let owner = at(CM, "owner");
    let dep = at(CM, "dep");
    let scene = |block: bool| {
        vec![
            setup(post(CM, cm("owner", json!({"a": "1"})))),
            setup(post(CM, owned("dep", "owner", block))),
        ]
    };
    let with = |block: bool, more: Vec<Step>| {
        let mut s = scene(block);
        s.extend(more);
        s
    };
    vec![
        seq(
            "a dependent keeps its ownerReference",
            with(false, vec![get(&dep)]),
        ),
        seq(
            "background deletion removes the dependent",
            with(
                false,
                vec![
                    setup(delete(&format!("{owner}?propagationPolicy=Background"))),
                    eventually_gone(&dep),
                ],
            ),
        ),
        seq(
            "deletion without a policy removes the dependent",
            with(false, vec![setup(delete(&owner)), eventually_gone(&dep)]),
        ),
        seq(
            "foreground deletion answers with the foregroundDeletion finalizer",
            with(
                true,
                vec![delete(&format!("{owner}?propagationPolicy=Foreground"))],
            ),
        ),
        seq(
            "foreground deletion removes the dependent then the owner",
            with(
                true,
                vec![
                    setup(delete(&format!("{owner}?propagationPolicy=Foreground"))),
                    eventually_gone(&dep),
                    eventually_gone(&owner),
                ],
            ),
        ),
        seq(
            "orphan deletion keeps the dependent without its owner",
            with(
                false,
                vec![
                    setup(delete(&format!("{owner}?propagationPolicy=Orphan"))),
                    eventually_gone(&owner),
                    eventually_orphaned(&dep),
                ],
            ),
        ),
        seq(
            "orphanDependents true keeps the dependent without its owner",
            with(
                true,
                vec![
                    delete_with(
                        &owner,
                        json!({"kind": "DeleteOptions", "apiVersion": "v1", "orphanDependents": true}),
                    ),
                    eventually_gone(&owner),
                    eventually_orphaned(&dep),
                ],
            ),
        ),
        seq(
            "a dependent whose owner does not exist is collected",
            vec![
                setup(post(CM, cm("other", json!({"a": "1"})))),
                setup(post(CM, {
                    let mut d = owned("dep", "owner", false);
                    d["metadata"]["ownerReferences"][0]["uid"] =
                        json!("00000000-0000-0000-0000-000000000001");
                    d
                })),
                eventually_gone(&dep),
            ],
        ),
    ]
}
