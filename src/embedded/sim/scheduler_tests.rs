//! Expectations ported from kube-scheduler v1.36.3's plugin tests:
//! `noderesources/fit_test.go` (`TestEnoughRequests`), `tainttoleration/taint_toleration_test.go`
//! (`TestTaintTolerationFilter`), `nodeaffinity/node_affinity_test.go` (`TestNodeAffinity`), and the
//! message of `framework/types.go`'s `FitError.Error()` with `preemption.Evaluator.Preempt`'s part.

use super::*;
use serde_json::{Value, json};

fn pod(spec: Value) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "default"}, "spec": spec})).unwrap()
}

fn res(cpu_milli: i64, mem: i64) -> Value {
    json!({"requests": {"cpu": format!("{cpu_milli}m"), "memory": mem.to_string()}})
}

fn node(name: &str, alloc: &[(&str, i64)]) -> NodeInfo {
    let mut allocatable: BTreeMap<String, i64> = alloc.iter().map(|(r, v)| (r.to_string(), *v)).collect();
    allocatable.entry("pods".into()).or_insert(32);
    NodeInfo {
        name: name.into(),
        allocatable,
        ..Default::default()
    }
}

/// `TestEnoughRequests`: a node of 10 milli-cpu and 20 bytes with a pod using (used_cpu, used_mem).
fn enough(p: &Pod, used_cpu: i64, used_mem: i64) -> Verdict {
    let mut n = node("n", &[("cpu", 10), ("memory", 20)]);
    n.add(
        0,
        BTreeMap::from([("cpu".into(), used_cpu), ("memory".into(), used_mem)]),
    );
    filter(p, &pod_requests(p), &n)
}

fn with_init(c: (i64, i64), inits: &[(i64, i64)]) -> Pod {
    pod(json!({
        "containers": [{"name": "c", "resources": res(c.0, c.1)}],
        "initContainers": inits.iter().enumerate().map(|(i, r)| json!({"name": format!("i{i}"), "resources": res(r.0, r.1)})).collect::<Vec<_>>(),
    }))
}

#[test]
fn requests_fit_as_node_resources_fit_counts_them() {
    let insufficient =
        |rs: &[&str]| Verdict::Unschedulable(rs.iter().map(|r| format!("Insufficient {r}")).collect());
    // "no resources requested always fits"
    assert_eq!(
        enough(&pod(json!({"containers": [{"name": "c"}]})), 10, 20),
        Verdict::Fits
    );
    // "too many resources fails"
    assert_eq!(
        enough(&with_init((1, 1), &[]), 10, 20),
        insufficient(&["cpu", "memory"])
    );
    // "too many resources fails due to init container cpu"
    assert_eq!(
        enough(&with_init((1, 1), &[(3, 1)]), 8, 19),
        insufficient(&["cpu"])
    );
    // "too many resources fails due to highest init container cpu"
    assert_eq!(
        enough(&with_init((1, 1), &[(3, 1), (2, 1)]), 8, 19),
        insufficient(&["cpu"])
    );
    // "too many resources fails due to init container memory"
    assert_eq!(
        enough(&with_init((1, 1), &[(1, 3)]), 9, 19),
        insufficient(&["memory"])
    );
    // "init container fits because it's the max, not sum, of containers and init containers"
    assert_eq!(enough(&with_init((1, 1), &[(1, 1)]), 9, 19), Verdict::Fits);
    // "multiple init containers fit because it's the max, not sum, ..."
    assert_eq!(
        enough(&with_init((1, 1), &[(1, 1), (1, 1)]), 9, 19),
        Verdict::Fits
    );
    // "both resources fit", "equal edge case"
    assert_eq!(enough(&with_init((1, 1), &[]), 5, 5), Verdict::Fits);
    assert_eq!(enough(&with_init((5, 1), &[]), 5, 19), Verdict::Fits);
    // "requests + overhead does not fit for memory"
    let mut over = with_init((1, 1), &[]);
    over.spec.as_mut().unwrap().overhead = Some(BTreeMap::from([(
        "memory".into(),
        k8s_openapi::apimachinery::pkg::api::resource::Quantity("15".into()),
    )]));
    assert_eq!(enough(&over, 5, 5), insufficient(&["memory"]));
    // A request larger than the whole node: no eviction can help (`Unresolvable`).
    assert_eq!(
        enough(&with_init((11, 1), &[]), 0, 0),
        Verdict::Unresolvable(vec!["Insufficient cpu".into()])
    );
}

#[test]
fn sidecars_add_and_pod_level_requests_replace() {
    // resourcehelper.PodRequests: a sidecar (restartPolicy Always) runs beside the containers.
    let p = pod(json!({
        "containers": [{"name": "c", "resources": res(1000, 0)}],
        "initContainers": [
            {"name": "side", "restartPolicy": "Always", "resources": res(500, 0)},
            {"name": "init", "resources": res(2000, 0)},
        ],
    }));
    // max(1000 + 500, 2000 + 500) = 2500
    assert_eq!(pod_requests(&p)["cpu"], 2500);
    let p = pod(
        json!({"resources": {"requests": {"cpu": "3"}}, "containers": [{"name": "c", "resources": res(1000, 0)}]}),
    );
    assert_eq!(pod_requests(&p)["cpu"], 3000);
}

#[test]
fn extended_resources_and_the_pod_count() {
    let gpu = |n: i64| {
        pod(
            json!({"containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": n.to_string()}, "limits": {"nvidia.com/gpu": n.to_string()}}}]}),
        )
    };
    let n = node("n", &[("cpu", 8000), ("nvidia.com/gpu", 4)]);
    assert_eq!(filter(&gpu(4), &pod_requests(&gpu(4)), &n), Verdict::Fits);
    // "extended resource allocatable enforced"; a node without the resource at all cannot help.
    assert_eq!(
        filter(&gpu(5), &pod_requests(&gpu(5)), &n),
        Verdict::Unresolvable(vec!["Insufficient nvidia.com/gpu".into()])
    );
    let cpu_only = node("c", &[("cpu", 8000)]);
    assert_eq!(
        filter(&gpu(1), &pod_requests(&gpu(1)), &cpu_only),
        Verdict::Unresolvable(vec!["Insufficient nvidia.com/gpu".into()])
    );
    // A resource that is not the scheduler's (no domain) is not checked.
    let odd = pod(json!({"containers": [{"name": "c", "resources": {"requests": {"widgets": "3"}}}]}));
    assert_eq!(filter(&odd, &pod_requests(&odd), &cpu_only), Verdict::Fits);
    // "Too many pods" counts even a pod requesting nothing.
    let mut full = node("f", &[("cpu", 8000), ("pods", 1)]);
    full.add(0, BTreeMap::new());
    let empty = pod(json!({"containers": [{"name": "c"}]}));
    assert_eq!(
        filter(&empty, &pod_requests(&empty), &full),
        Verdict::Unschedulable(vec!["Too many pods".into()])
    );
}

fn taint(key: &str, value: &str, effect: &str) -> k8s_openapi::api::core::v1::Taint {
    serde_json::from_value(json!({"key": key, "value": value, "effect": effect})).unwrap()
}

#[test]
fn taints_and_tolerations_as_taint_toleration_filters_them() {
    let tainted = |t: &[k8s_openapi::api::core::v1::Taint]| NodeInfo {
        taints: t.to_vec(),
        ..node("a", &[("cpu", 1000)])
    };
    let with = |tols: Value| pod(json!({"containers": [{"name": "c"}], "tolerations": tols}));
    let untolerated = Verdict::Unresolvable(vec![UNTOLERATED_TAINT.into()]);
    let dedicated1 = tainted(&[taint("dedicated", "user1", "NoSchedule")]);
    let cases = [
        (
            "no tolerations, a NoSchedule taint",
            with(json!([])),
            &dedicated1,
            &untolerated,
        ),
        (
            "tolerated by key, value and effect",
            with(json!([{"key": "dedicated", "value": "user1", "effect": "NoSchedule"}])),
            &dedicated1,
            &Verdict::Fits,
        ),
        (
            "another value",
            with(
                json!([{"key": "dedicated", "operator": "Equal", "value": "user2", "effect": "NoSchedule"}]),
            ),
            &dedicated1,
            &untolerated,
        ),
        (
            "the toleration's effect differs",
            with(
                json!([{"key": "dedicated", "operator": "Equal", "value": "user1", "effect": "PreferNoSchedule"}]),
            ),
            &dedicated1,
            &untolerated,
        ),
        (
            "an empty effect tolerates every effect",
            with(json!([{"key": "dedicated", "operator": "Equal", "value": "user1"}])),
            &dedicated1,
            &Verdict::Fits,
        ),
        (
            "Exists with no key tolerates everything",
            with(json!([{"operator": "Exists"}])),
            &dedicated1,
            &Verdict::Fits,
        ),
    ];
    for (name, p, n, want) in cases {
        assert_eq!(&filter(&p, &BTreeMap::new(), n), want, "{name}");
    }
    let multi = tainted(&[
        taint("dedicated", "user2", "NoSchedule"),
        taint("foo", "bar", "NoSchedule"),
    ]);
    let p = with(
        json!([{"key": "dedicated", "operator": "Equal", "value": "user2", "effect": "NoSchedule"}, {"key": "foo", "operator": "Exists", "effect": "NoSchedule"}]),
    );
    assert_eq!(
        filter(&p, &BTreeMap::new(), &multi),
        Verdict::Fits,
        "all taints tolerated"
    );
    let prefer = tainted(&[taint("dedicated", "user1", "PreferNoSchedule")]);
    assert_eq!(
        filter(&with(json!([])), &BTreeMap::new(), &prefer),
        Verdict::Fits,
        "PreferNoSchedule does not filter"
    );
    let exec = tainted(&[taint("spot", "", "NoExecute")]);
    assert_eq!(
        filter(&with(json!([])), &BTreeMap::new(), &exec),
        untolerated,
        "NoExecute filters"
    );
    let cordoned = NodeInfo {
        unschedulable: true,
        ..node("c", &[("cpu", 1000)])
    };
    assert_eq!(
        filter(&with(json!([])), &BTreeMap::new(), &cordoned),
        Verdict::Unresolvable(vec![NODE_UNSCHEDULABLE.into()])
    );
}

#[test]
fn node_selector_and_required_affinity_as_node_affinity_filters_them() {
    let labelled = |l: Value| NodeInfo {
        labels: serde_json::from_value(l).unwrap(),
        ..node("node1", &[("cpu", 1000)])
    };
    let required = |terms: Value| {
        pod(
            json!({"containers": [{"name": "c"}], "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}}),
        )
    };
    let expr = |key: &str, op: &str, values: Value| json!([{"matchExpressions": [{"key": key, "operator": op, "values": values}]}]);
    let n = labelled(json!({"foo": "bar", "gpu": "a100", "kernel": "6"}));
    let no = Verdict::Unresolvable(vec![NODE_AFFINITY_MISMATCH.into()]);
    let cases = [
        (
            "nodeSelector matches",
            pod(json!({"containers": [{"name": "c"}], "nodeSelector": {"foo": "bar"}})),
            Verdict::Fits,
        ),
        (
            "nodeSelector misses",
            pod(json!({"containers": [{"name": "c"}], "nodeSelector": {"foo": "baz"}})),
            no.clone(),
        ),
        (
            "In",
            required(expr("gpu", "In", json!(["a100", "h100"]))),
            Verdict::Fits,
        ),
        (
            "In misses",
            required(expr("gpu", "In", json!(["h100"]))),
            no.clone(),
        ),
        (
            "NotIn",
            required(expr("gpu", "NotIn", json!(["h100"]))),
            Verdict::Fits,
        ),
        (
            "NotIn of an absent label",
            required(expr("zone", "NotIn", json!(["z"]))),
            Verdict::Fits,
        ),
        (
            "Exists",
            required(expr("gpu", "Exists", json!(null))),
            Verdict::Fits,
        ),
        (
            "DoesNotExist",
            required(expr("gpu", "DoesNotExist", json!(null))),
            no.clone(),
        ),
        ("Gt", required(expr("kernel", "Gt", json!(["5"]))), Verdict::Fits),
        (
            "Gt fails",
            required(expr("kernel", "Gt", json!(["6"]))),
            no.clone(),
        ),
        ("Lt", required(expr("kernel", "Lt", json!(["7"]))), Verdict::Fits),
        (
            "Gt of a non-number",
            required(expr("gpu", "Gt", json!(["1"]))),
            no.clone(),
        ),
        (
            "terms are ORed",
            required(
                json!([{"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["h100"]}]}, {"matchExpressions": [{"key": "foo", "operator": "In", "values": ["bar"]}]}]),
            ),
            Verdict::Fits,
        ),
        (
            "expressions are ANDed",
            required(
                json!([{"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["a100"]}, {"key": "foo", "operator": "In", "values": ["x"]}]}]),
            ),
            no.clone(),
        ),
        ("an empty term matches nothing", required(json!([{}])), no.clone()),
        (
            "matchFields on metadata.name",
            required(
                json!([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node1"]}]}]),
            ),
            Verdict::Fits,
        ),
        (
            "matchFields on another node's name",
            required(
                json!([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node2"]}]}]),
            ),
            no.clone(),
        ),
    ];
    for (name, p, want) in cases {
        assert_eq!(filter(&p, &BTreeMap::new(), &n), want, "{name}");
    }
}

#[test]
fn the_message_is_kube_schedulers() {
    let cpu = |m: i64| pod(json!({"containers": [{"name": "c", "resources": res(m, 0)}]}));
    let nodes: Vec<NodeInfo> = (1..=3)
        .map(|i| node(&format!("n{i}"), &[("cpu", 1000), ("memory", 1 << 30)]))
        .collect();
    // Three nodes, each too small while others run there: what a real cluster prints.
    let mut busy = nodes.clone();
    for n in &mut busy {
        n.add(0, BTreeMap::from([("cpu".into(), 600)]));
    }
    assert_eq!(
        schedule(&cpu(500), &busy).unwrap_err(),
        "0/3 nodes are available: 3 Insufficient cpu. no new claims to deallocate, preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod."
    );
    // Larger than any node: preemption cannot help anywhere.
    assert_eq!(
        schedule(&cpu(2000), &nodes).unwrap_err(),
        "0/3 nodes are available: 3 Insufficient cpu. no new claims to deallocate, preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    );
    // Mixed reasons, sorted as strings.
    let mut mixed = busy.clone();
    mixed[0].taints = vec![taint("dedicated", "gpu", "NoSchedule")];
    mixed[1].labels.insert("zone".into(), "b".into());
    let p =
        pod(json!({"containers": [{"name": "c", "resources": res(500, 0)}], "nodeSelector": {"zone": "b"}}));
    let mut p2 = p.clone();
    mixed[1].requested.clear();
    mixed[1].pods.clear();
    assert_eq!(schedule(&p, &mixed), Ok("n2".into()));
    mixed[1].add(0, BTreeMap::from([("cpu".into(), 600)]));
    assert_eq!(
        schedule(&p, &mixed).unwrap_err(),
        "0/3 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) had untolerated taint(s). no new claims to deallocate, preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling."
    );
    p2.spec.as_mut().unwrap().preemption_policy = Some("Never".into());
    assert!(
        schedule(&p2, &mixed).unwrap_err().ends_with(
            ". no new claims to deallocate, preemption: not eligible due to preemptionPolicy=Never."
        ),
    );
    // Lower-priority pods that would make room: said, not evicted.
    let mut hi = cpu(500);
    hi.spec.as_mut().unwrap().priority = Some(10);
    assert!(
        schedule(&hi, &busy)
            .unwrap_err()
            .contains(&format!("3 {NOT_PREEMPTING}"))
    );
}

#[test]
fn the_least_allocated_node_wins_and_a_pass_counts_its_own_bindings() {
    let mk_node = |name: &str, cpu: &str, labels: Value| -> Arc<Node> {
        Arc::new(
            serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}, "status": {"allocatable": {"cpu": cpu, "memory": "1Gi", "pods": "110"}}}))
                .unwrap(),
        )
    };
    let mk_pod = |name: &str, cpu: &str, extra: Value| -> Arc<Pod> {
        let mut v = json!({"metadata": {"name": name, "namespace": "default", "creationTimestamp": format!("2026-01-01T00:00:0{}Z", name.len() % 10)},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}, "status": {"phase": "Pending"}});
        if let Value::Object(m) = extra {
            for (k, x) in m {
                v["spec"][k] = x;
            }
        }
        Arc::new(serde_json::from_value(v).unwrap())
    };
    let nodes = vec![mk_node("a", "2", json!({})), mk_node("b", "4", json!({}))];
    let pods = vec![
        mk_pod("p", "2", json!({})),
        mk_pod("pp", "2", json!({})),
        mk_pod("ppp", "3", json!({})),
    ];
    let got: Vec<(String, Decision)> = pass(&pods, &nodes, &HashMap::new())
        .into_iter()
        .map(|(p, d)| (p.metadata.name.clone().unwrap(), d))
        .collect();
    assert_eq!(
        got[..2],
        [
            ("p".to_string(), Decision::Bind("b".into())),
            ("pp".to_string(), Decision::Bind("a".into())),
        ],
        "b has the most room, then a"
    );
    let Decision::Unschedulable { reason, message } = &got[2].1 else {
        panic!("{got:?}")
    };
    assert_eq!(reason, UNSCHEDULABLE);
    assert!(
        message.starts_with("0/2 nodes are available: 2 Insufficient cpu."),
        "{message}"
    );

    // A bound pod counts; a finished one does not; a gated one is never bound.
    let mut bound = (*mk_pod("x", "2", json!({"nodeName": "a"}))).clone();
    bound.status = serde_json::from_value(json!({"phase": "Running"})).unwrap();
    let mut done = (*mk_pod("y", "4", json!({"nodeName": "b"}))).clone();
    done.status = serde_json::from_value(json!({"phase": "Succeeded"})).unwrap();
    let gated = mk_pod(
        "gated",
        "1",
        json!({"schedulingGates": [{"name": "kueue.x-k8s.io/admission"}]}),
    );
    let pods = vec![
        Arc::new(bound),
        Arc::new(done),
        mk_pod("z", "4", json!({})),
        gated,
    ];
    let got = pass(&pods, &nodes, &HashMap::new());
    assert_eq!(got[0].1, Decision::Bind("b".into()));
    assert_eq!(
        got[1].1,
        Decision::Unschedulable {
            reason: "SchedulingGated".into(),
            message: "Scheduling is blocked due to non-empty scheduling gates".into()
        }
    );
    // An assumed binding counts until the pod shows it.
    let assumed = HashMap::from([("default/z".to_string(), "b".to_string())]);
    let pods = vec![mk_pod("z", "4", json!({})), mk_pod("w", "1", json!({}))];
    let got = pass(&pods, &nodes, &assumed);
    assert_eq!(got.len(), 1, "z is not placed again");
    assert_eq!(
        (got[0].0.metadata.name.as_deref(), &got[0].1),
        (Some("w"), &Decision::Bind("a".into())),
        "b is full with z"
    );
    // Said once: the same message is not written again.
    let mut said = (*mk_pod("big", "8", json!({}))).clone();
    let first = pass(&[Arc::new(said.clone())], &nodes, &HashMap::new());
    let Decision::Unschedulable { message, .. } = &first[0].1 else {
        panic!()
    };
    said.status = serde_json::from_value(
        json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}]}),
    )
    .unwrap();
    assert!(pass(&[Arc::new(said)], &nodes, &HashMap::new()).is_empty());
}

/// The node agent may start a pod between the bind's two writes (nodeName, then PodScheduled): the
/// second write keeps the conditions already there, so a started pod stays Ready.
#[tokio::test]
async fn a_bind_keeps_the_conditions_the_pod_already_has() {
    let srv = crate::embedded::EmbeddedServer::new(&[], Arc::new(crate::embedded::AllowAll));
    let client = srv.client();
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pp = kube::api::PostParams::default();
    api.create(
        &pp,
        &pod(json!({"containers": [{"name": "c", "image": "busybox"}]})),
    )
    .await
    .unwrap();
    let started = json!({"status": {"phase": "Running", "conditions": [
        condition("Ready", true, "", "", None),
        condition("ContainersReady", true, "", "", None),
    ]}});
    let current = api
        .patch_status("p", &PatchParams::default(), &Patch::Merge(&started))
        .await
        .unwrap();
    write(&client, &current, &Decision::Bind("n1".into()))
        .await
        .unwrap();
    let after = api.get("p").await.unwrap();
    assert_eq!(after.spec.and_then(|s| s.node_name).as_deref(), Some("n1"));
    let conds: Vec<(String, String)> = after
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .into_iter()
        .map(|c| (c.type_, c.status))
        .collect();
    for want in ["PodScheduled", "Ready", "ContainersReady"] {
        assert!(
            conds.iter().any(|(t, s)| t == want && s == "True"),
            "{want}=True missing: {conds:?}"
        );
    }
}
