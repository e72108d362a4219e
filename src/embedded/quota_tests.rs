use super::*;
use crate::embedded::{AllowAll, EmbeddedServer};
use k8s_openapi::api::core::v1::{Pod, ResourceQuota};
use kube::api::{Api, DeleteParams, PostParams};

fn q(s: &str) -> Quantity {
    Quantity::parse(s).unwrap()
}

fn pod(name: &str, cpu_req: Option<&str>, cpu_lim: Option<&str>) -> Value {
    let mut res = json!({});
    if let Some(r) = cpu_req {
        res["requests"] = json!({"cpu": r, "memory": "1G"});
    }
    if let Some(l) = cpu_lim {
        res["limits"] = json!({"cpu": l, "memory": "2G"});
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"containers": [{"name": "ray-head", "image": "ray", "resources": res}]}})
}

/// Kubernetes' pod evaluator: containers sum, an init container counts when larger, the overhead adds,
/// a request left out is its limit, and cpu and memory count under both their bare and `requests.` names.
#[test]
fn pod_usage_follows_the_pod_evaluator() {
    let p = json!({"spec": {
        "containers": [
            {"name": "a", "resources": {"requests": {"cpu": "300m"}, "limits": {"cpu": "500m", "memory": "1Gi"}}},
            {"name": "b", "resources": {"requests": {"cpu": "200m", "nvidia.com/gpu": "1"}}}],
        "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "2"}}}],
        "overhead": {"cpu": "100m"}}});
    let u = pod_usage(&p);
    assert_eq!(u["requests.cpu"], q("2100m"));
    assert_eq!(u["cpu"], q("2100m"));
    assert_eq!(u["requests.memory"], q("1Gi"), "defaulted from the limit");
    assert_eq!(u["limits.cpu"], q("600m"), "the overhead adds to limits too");
    assert_eq!(u["requests.nvidia.com/gpu"], q("1"));
    assert_eq!(u["pods"], q("1"));
    assert!(
        !u.contains_key("nvidia.com/gpu"),
        "extended resources count only as requests.<name>"
    );
}

#[test]
fn terminal_and_expired_pods_do_not_count() {
    let now = jiff::Timestamp::now();
    assert!(counts(&json!({"status": {"phase": "Running"}}), now));
    assert!(!counts(&json!({"status": {"phase": "Succeeded"}}), now));
    let held = json!({"metadata": {"deletionTimestamp": now.to_string()}});
    assert!(
        counts(&held, now),
        "a pod held by finalizers without a grace period still counts"
    );
    let past = now.checked_sub(jiff::SignedDuration::from_secs(60)).unwrap();
    let expired =
        json!({"metadata": {"deletionTimestamp": past.to_string(), "deletionGracePeriodSeconds": 30}});
    assert!(!counts(&expired, now));
}

/// The plugin's words: which resources, what the pod asks, what is used, what the quota allows.
#[test]
fn refusal_names_what_exceeds() {
    let hard: Usage = [
        ("limits.cpu".to_string(), q("100m")),
        ("limits.memory".to_string(), q("0.1Gi")),
    ]
    .into();
    let p = pod("p", Some("300m"), Some("500m"));
    let why = refusal("test-quota", &hard, &Usage::new(), &p, &pod_usage(&p)).expect("over the quota");
    assert_eq!(
        why,
        "exceeded quota: test-quota, requested: limits.cpu=500m,limits.memory=2G, used: limits.cpu=0,limits.memory=0, limited: limits.cpu=100m,limits.memory=107374182400m"
    );
    let roomy: Usage = [("limits.cpu".to_string(), q("1"))].into();
    assert_eq!(refusal("q", &roomy, &Usage::new(), &p, &pod_usage(&p)), None);
    let no_limits = pod("p", Some("300m"), None);
    assert_eq!(
        refusal("q", &roomy, &Usage::new(), &no_limits, &pod_usage(&no_limits)).as_deref(),
        Some("failed quota: q: must specify limits.cpu for: ray-head")
    );
}

fn quota(hard: Value) -> ResourceQuota {
    serde_json::from_value(json!({"metadata": {"name": "test-quota"}, "spec": {"hard": hard}})).unwrap()
}

fn typed(v: Value) -> Pod {
    serde_json::from_value(v).unwrap()
}

fn status(rq: &ResourceQuota, which: &str) -> BTreeMap<String, String> {
    let s = rq.status.as_ref().expect("status");
    let m = if which == "used" {
        s.used.clone()
    } else {
        s.hard.clone()
    };
    m.unwrap_or_default().into_iter().map(|(k, v)| (k, v.0)).collect()
}

/// Through the API: the second pod past `pods: 1` is a 403 naming the quota, `status.used` follows
/// creates and deletes, and a quota with an unparsable value is refused naming the field.
#[tokio::test]
async fn the_server_enforces_and_maintains_a_quota() {
    let srv = EmbeddedServer::new(&[], std::sync::Arc::new(AllowAll));
    let quotas: Api<ResourceQuota> = Api::namespaced(srv.client(), "default");
    let pods: Api<Pod> = Api::namespaced(srv.client(), "default");
    let pp = PostParams::default();
    quotas
        .create(
            &pp,
            &quota(json!({"pods": "1", "requests.cpu": "1", "services": "3"})),
        )
        .await
        .unwrap();
    let rq = quotas.get("test-quota").await.unwrap();
    assert_eq!(status(&rq, "hard")["pods"], "1");
    assert_eq!(
        status(&rq, "used"),
        [("pods".into(), "0".into()), ("requests.cpu".into(), "0".into())].into()
    );

    pods.create(&pp, &typed(pod("a", Some("300m"), None)))
        .await
        .unwrap();
    let rq = quotas.get("test-quota").await.unwrap();
    assert_eq!(
        status(&rq, "used"),
        [
            ("pods".into(), "1".into()),
            ("requests.cpu".into(), "300m".into())
        ]
        .into()
    );

    let err = pods
        .create(&pp, &typed(pod("b", Some("300m"), None)))
        .await
        .expect_err("over pods: 1");
    let kube::Error::Api(s) = err else { panic!("{err}") };
    assert_eq!((s.code, s.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        s.message,
        "pods \"b\" is forbidden: exceeded quota: test-quota, requested: pods=1, used: pods=1, limited: pods=1"
    );

    let no_cpu = json!({"metadata": {"name": "c"}, "spec": {"containers": [{"name": "x", "image": "i"}]}});
    pods.delete("a", &DeleteParams::default()).await.unwrap();
    let err = pods
        .create(&pp, &typed(no_cpu))
        .await
        .expect_err("no cpu request");
    assert!(
        err.to_string()
            .contains("failed quota: test-quota: must specify requests.cpu for: x"),
        "{err}"
    );
    let rq = quotas.get("test-quota").await.unwrap();
    assert_eq!(status(&rq, "used")["pods"], "0", "the delete released the pod");
    pods.create(&pp, &typed(pod("b", Some("1"), None)))
        .await
        .expect("fits again");

    let mut bad = quota(json!({"requests.memory": "lots"}));
    bad.metadata.name = Some("bad".into());
    let err = quotas.create(&pp, &bad).await.expect_err("not a quantity");
    let kube::Error::Api(s) = err else { panic!("{err}") };
    assert_eq!(s.code, 422);
    assert!(s.message.contains("spec.hard[requests.memory]"), "{}", s.message);
}

/// Twenty concurrent creates against `pods: 5`: five get in and `status.used` says so. (The lock that
/// keeps a check and its create together is what makes this hold under any interleaving; the window it
/// closes is too narrow for this test to hit reliably without it.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_creates_stop_at_the_quota() {
    let srv = EmbeddedServer::new(&[], std::sync::Arc::new(AllowAll));
    let quotas: Api<ResourceQuota> = Api::namespaced(srv.client(), "default");
    let pods: Api<Pod> = Api::namespaced(srv.client(), "default");
    quotas
        .create(&PostParams::default(), &quota(json!({"pods": "5"})))
        .await
        .unwrap();
    let tasks: Vec<_> = (0..20)
        .map(|i| {
            let pods = pods.clone();
            tokio::spawn(async move {
                pods.create(&PostParams::default(), &typed(pod(&format!("p{i}"), None, None)))
                    .await
                    .is_ok()
            })
        })
        .collect();
    let mut created = 0;
    for t in tasks {
        created += usize::from(t.await.unwrap());
    }
    assert_eq!(created, 5);
    let rq = quotas.get("test-quota").await.unwrap();
    assert_eq!(status(&rq, "used")["pods"], "5");
}
