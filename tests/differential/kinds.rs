//! Tables, the Events APIs, RBAC and impersonation, ServiceAccount tokens.

use super::engine::*;
use super::sequences::*;
use super::values;
use serde_json::{Value, json};

const CORE_EVENTS: &str = "/api/v1/namespaces/{ns}/events";
const EVENTS: &str = "/apis/events.k8s.io/v1/namespaces/{ns}/events";
const ROLES: &str = "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles";
const BINDINGS: &str = "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings";
const SSAR: &str = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
const SARS: &str = "/apis/authorization.k8s.io/v1/subjectaccessreviews";

/// `kubectl get` as a Table: columns and rows, with and without objects.
pub fn tables() -> Vec<Sequence> {
    vec![
        seq(
            "configmap table",
            vec![
                setup(post(CM, cm("c1", json!({"a": "1", "b": "2"})))),
                table(get(CM)),
            ],
        ),
        seq(
            "configmap table of one object",
            vec![
                setup(post(CM, cm("c1", json!({"a": "1"})))),
                table(get(&at(CM, "c1"))),
            ],
        ),
        seq(
            "configmap table without objects",
            vec![
                setup(post(CM, cm("c1", json!({"a": "1"})))),
                table(get(&format!("{CM}?includeObject=None"))),
            ],
        ),
        seq(
            "pod table",
            vec![setup(post(PODS, values::pod())), table(get(PODS))],
        ),
        seq(
            "secret table",
            vec![
                setup(post(
                    SECRETS,
                    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s1"},
                "type": "Opaque", "data": {"k": "dg=="}}),
                )),
                table(get(SECRETS)),
            ],
        ),
        seq(
            "localqueue table with printer columns",
            vec![setup(post(LQ, values::lq("lq"))), table(get(LQ))],
        ),
        seq(
            "raycluster table with printer columns",
            vec![
                setup(post(
                    "/apis/ray.io/v1/namespaces/{ns}/rayclusters",
                    json!({"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "rc"}, "spec": {
                    "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
                        {"name": "ray-head", "image": "rayproject/ray:2.9.0"}]}}}}}),
                )),
                table(get("/apis/ray.io/v1/namespaces/{ns}/rayclusters")),
            ],
        ),
        seq("empty table", vec![table(get(SECRETS))]),
        seq(
            "service table",
            vec![setup(post(SVCS, values::service())), table(get(SVCS))],
        ),
        seq(
            "namespace table of one object",
            vec![table(get("/api/v1/namespaces/{ns}"))],
        ),
        seq(
            "role table is the generic one",
            vec![setup(post(ROLES, role(&["get"]))), table(get(ROLES))],
        ),
        seq(
            "rolebinding table",
            vec![
                setup(post(ROLES, role(&["get"]))),
                setup(post(BINDINGS, binding("jane"))),
                table(get(BINDINGS)),
            ],
        ),
    ]
}

fn core_event(name: &str, involved: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": name},
        "involvedObject": {"kind": "Pod", "name": involved, "namespace": "{ns}", "apiVersion": "v1"},
        "reason": "Started", "message": "m", "type": "Normal", "source": {"component": "test"},
        "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:00Z", "count": 1})
}

fn event(name: &str) -> Value {
    json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": name},
        "eventTime": "2026-01-01T00:00:00.000000Z", "action": "Started", "reason": "Started",
        "type": "Normal", "reportingController": "example.com/test", "reportingInstance": "test-1",
        "regarding": {"kind": "Pod", "name": "p", "namespace": "{ns}", "apiVersion": "v1"}, "note": "n"})
}

/// Source: pkg/apis/core/validation/events.go, pkg/registry/core/event/strategy.go.
pub fn events() -> Vec<Sequence> {
    vec![
        seq(
            "core event create and read back",
            vec![
                post(CORE_EVENTS, core_event("e1", "p")),
                get(&at(CORE_EVENTS, "e1")),
            ],
        ),
        seq(
            "core event read through events.k8s.io",
            vec![
                setup(post(CORE_EVENTS, core_event("e1", "p"))),
                get(&at(EVENTS, "e1")),
            ],
        ),
        seq(
            "events.k8s.io event create and read back",
            vec![post(EVENTS, event("e1")), get(&at(EVENTS, "e1"))],
        ),
        seq(
            "events.k8s.io event read through core v1",
            vec![setup(post(EVENTS, event("e1"))), get(&at(CORE_EVENTS, "e1"))],
        ),
        seq(
            "core events by involvedObject.name",
            vec![
                setup(post(CORE_EVENTS, core_event("e1", "p"))),
                setup(post(CORE_EVENTS, core_event("e2", "q"))),
                get(&format!("{CORE_EVENTS}?fieldSelector=involvedObject.name=q")),
            ],
        ),
        seq(
            "core events by reason and type",
            vec![
                setup(post(CORE_EVENTS, core_event("e1", "p"))),
                get(&format!("{CORE_EVENTS}?fieldSelector=reason=Started,type=Normal")),
            ],
        ),
        seq(
            "events.k8s.io events by regarding.name",
            vec![
                setup(post(EVENTS, event("e1"))),
                get(&format!("{EVENTS}?fieldSelector=regarding.name=p")),
            ],
        ),
        seq(
            "events.k8s.io event with a type Bogus",
            vec![post(EVENTS, {
                let mut e = event("e1");
                e["type"] = json!("Bogus");
                e
            })],
        ),
        seq(
            "events.k8s.io event note longer than 1kB",
            vec![post(EVENTS, {
                let mut e = event("e1");
                e["note"] = json!("x".repeat(1025));
                e
            })],
        ),
        seq(
            "core event update of the count",
            vec![
                setup(post(CORE_EVENTS, core_event("e1", "p"))),
                patch(
                    &at(CORE_EVENTS, "e1"),
                    MERGE,
                    json!({"count": 2, "lastTimestamp": "2026-01-01T00:01:00Z"}),
                ),
            ],
        ),
    ]
}

fn role(verbs: &[&str]) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "r"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": verbs}]})
}

fn binding(user: &str) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "rb"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
        "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user}]})
}

fn ssar(verb: &str, resource: &str) -> Value {
    json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"namespace": "{ns}", "verb": verb, "resource": resource}}})
}

/// Source: plugin/pkg/auth/authorizer/rbac (denial wording), pkg/registry/authorization, and
/// staging/src/k8s.io/apiserver/pkg/endpoints/filters/impersonation.go.
pub fn rbac() -> Vec<Sequence> {
    let jane = |s: Step| as_user(s, "jane", &["system:authenticated"]);
    vec![
        seq("list denied to a user without a role", vec![jane(get(CM))]),
        seq(
            "get denied to a user without a role",
            vec![
                setup(post(CM, cm("c1", json!({"a": "1"})))),
                jane(get(&at(CM, "c1"))),
            ],
        ),
        seq(
            "create denied to a user without a role",
            vec![jane(post(CM, cm("c1", json!({"a": "1"}))))],
        ),
        seq(
            "cluster-scoped list denied",
            vec![jane(get("/api/v1/namespaces"))],
        ),
        seq("custom resource list denied", vec![jane(get(LQ))]),
        seq(
            "a role binding grants list",
            vec![
                setup(post(ROLES, role(&["get", "list"]))),
                setup(post(BINDINGS, binding("jane"))),
                eventually_allowed(jane(get(CM))),
                jane(get(CM)),
            ],
        ),
        seq(
            "a role binding grants list but not create",
            vec![
                setup(post(ROLES, role(&["get", "list"]))),
                setup(post(BINDINGS, binding("jane"))),
                eventually_allowed(jane(get(CM))),
                jane(post(CM, cm("c1", json!({"a": "1"})))),
            ],
        ),
        seq(
            "a binding to another user grants nothing",
            vec![
                setup(post(ROLES, role(&["get", "list"]))),
                setup(post(BINDINGS, binding("joe"))),
                jane(get(CM)),
            ],
        ),
        seq(
            "selfsubjectaccessreview allowed",
            vec![
                setup(post(ROLES, role(&["list"]))),
                setup(post(BINDINGS, binding("jane"))),
                eventually_allowed(jane(get(CM))),
                jane(post(SSAR, ssar("list", "configmaps"))),
            ],
        ),
        seq(
            "selfsubjectaccessreview denied",
            vec![jane(post(SSAR, ssar("delete", "configmaps")))],
        ),
        seq(
            "subjectaccessreview for another user",
            vec![
                setup(post(ROLES, role(&["list"]))),
                setup(post(BINDINGS, binding("jane"))),
                eventually_allowed(jane(get(CM))),
                post(
                    SARS,
                    json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {
                    "user": "jane", "groups": ["system:authenticated"],
                    "resourceAttributes": {"namespace": "{ns}", "verb": "list", "resource": "configmaps"}}}),
                ),
            ],
        ),
        seq(
            "subjectaccessreview without a user is Invalid",
            vec![post(
                SARS,
                json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {
                "resourceAttributes": {"namespace": "{ns}", "verb": "list", "resource": "configmaps"}}}),
            )],
        ),
        seq(
            "a role granting more than its creator holds is refused",
            vec![
                setup(post(ROLES, role(&["create"]))),
                setup(post(
                    BINDINGS,
                    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                    "metadata": {"name": "rb"},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
                    "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "jane"}]}),
                )),
                eventually_allowed(jane(get(CM))),
                jane(post(
                    ROLES,
                    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "big"},
                    "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}),
                )),
            ],
        ),
    ]
}

/// Source: pkg/registry/core/serviceaccount/storage/token.go.
pub fn tokens() -> Vec<Sequence> {
    let token = |secs: i64| {
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"expirationSeconds": secs}})
    };
    let path = "/api/v1/namespaces/{ns}/serviceaccounts/default/token";
    vec![
        seq(
            "token request for the default service account",
            vec![post(path, token(3600))],
        ),
        seq(
            "token request shorter than ten minutes is Invalid",
            vec![post(path, token(60))],
        ),
        seq(
            "token request for a missing service account",
            vec![post(
                "/api/v1/namespaces/{ns}/serviceaccounts/nobody/token",
                token(3600),
            )],
        ),
    ]
}
