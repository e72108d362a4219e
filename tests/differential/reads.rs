//! Reads: label and field selectors, pagination, watches.

use super::engine::*;
use super::sequences::*;
use super::values;
use serde_json::json;

pub fn selectors() -> Vec<Sequence> {
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

pub fn pagination() -> Vec<Sequence> {
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
                // a4 does not match; it stays unscanned after a3, so the second page carries a
                // continue token on both servers, whenever the namespace's kube-root-ca.crt lands.
                post(CM, cm_labels("a4", json!({"x": "2"}))),
                get(&format!("{CM}?limit=1&labelSelector=x=1")),
                get(&format!("{CM}?limit=1&labelSelector=x=1&continue={{continue}}")),
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

pub fn watches() -> Vec<Sequence> {
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
            "watch with sendInitialEvents but no bookmarks",
            vec![
                post(CM, cm("c1", json!({}))),
                watch(&format!(
                    "{CM}?sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
                )),
            ],
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
