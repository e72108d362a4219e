use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::api::ray::{RayCluster, RayService};
use crate::wiring::ui::model::{Sample, Snapshot};

fn cq(name: &str, cohort: Option<&str>, nominal: &str, reserved: &str) -> ClusterQueue {
    let mut spec = json!({"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": nominal}]}]}]});
    if let Some(c) = cohort {
        spec["cohortName"] = json!(c);
    }
    serde_json::from_value(json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec,
        "status": {"flavorsReservation": [{"name": "f", "resources": [{"name": "cpu", "total": reserved, "borrowed": "0"}]}],
                   "flavorsUsage": [{"name": "f", "resources": [{"name": "cpu", "total": reserved, "borrowed": "0"}]}],
                   "conditions": [{"type": "Active", "status": "True", "reason": "Ready", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}))
    .unwrap()
}

fn lq(name: &str, cq: &str) -> crate::api::kueue::LocalQueue {
    serde_json::from_value(json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": name, "namespace": "ns"}, "spec": {"clusterQueue": cq}})).unwrap()
}

fn pending(name: &str, priority: i32, created: &str, message: &str) -> Workload {
    serde_json::from_value(json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": name, "namespace": "ns", "creationTimestamp": created},
        "spec": {"queueName": "lq", "priority": priority, "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": []}}}]},
        "status": {"conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": message, "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}))
    .unwrap()
}

#[test]
fn escapes_what_users_and_the_api_wrote() {
    assert_eq!(
        esc("<a href=\"x\">'&'</a>\r"),
        "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;&#13;"
    );
    let snap = Snapshot {
        cluster_queues: vec![Arc::new(cq("cq", None, "8", "6"))],
        local_queues: vec![Arc::new(lq("lq", "cq"))],
        workloads: vec![Arc::new(pending(
            "w",
            0,
            "2026-01-01T00:00:00Z",
            "<img src=x onerror=alert(1)> needs 2 more cpu",
        ))],
        ..Default::default()
    };
    let html = body(&snap, 0.0);
    assert!(!html.contains("<img"), "{html}");
    assert!(
        html.contains("&lt;img src=x onerror=alert(1)&gt; needs 2 more cpu"),
        "{html}"
    );
}

#[test]
fn bar_carries_quota_and_usage_in_kubernetes_units() {
    let rows = usage_rows(&cq("cq", None, "8", "6500m"));
    assert_eq!(rows.len(), 1);
    let (flavor, res, u) = &rows[0];
    assert_eq!((flavor.as_str(), res.as_str()), ("f", "cpu"));
    assert_eq!(
        (u.nominal, u.reserved, u.in_use, u.borrowed),
        (8000, 6500, 6500, 0)
    );
    let html = bar("cq", flavor, res, u);
    assert!(
        html.contains("data-nominal=\"8\"") && html.contains("data-reserved=\"6500m\""),
        "{html}"
    );
    assert!(html.contains("width:81.2%"), "6.5 of 8: {html}");
}

#[test]
fn pending_workloads_in_queue_order_with_positions_and_shortfall() {
    // Kueue's order: higher priority first, then the earlier one.
    let snap = Snapshot {
        cluster_queues: vec![Arc::new(cq("cq", None, "8", "0"))],
        local_queues: vec![Arc::new(lq("lq", "cq"))],
        workloads: vec![
            Arc::new(pending("late-high", 10, "2026-01-01T00:00:05Z", "needs 3 more")),
            Arc::new(pending("early-low", 0, "2026-01-01T00:00:00Z", "needs 1 more")),
            Arc::new(pending("early-high", 10, "2026-01-01T00:00:01Z", "needs 2 more")),
        ],
        ..Default::default()
    };
    let html = body(&snap, 0.0);
    let at = |n: &str| {
        html.find(&format!("data-workload=\"{n}\""))
            .unwrap_or_else(|| panic!("{n} missing: {html}"))
    };
    assert!(
        at("early-high") < at("late-high") && at("late-high") < at("early-low"),
        "{html}"
    );
    let row = &html[at("early-low")..];
    assert!(
        row.starts_with("data-workload=\"early-low\" data-state=\"Pending\"><td>3</td>"),
        "{row}"
    );
    assert!(
        row.contains("<span class=\"shortfall\">needs 1 more</span>"),
        "{row}"
    );
}

#[test]
fn cohort_tree_nests_and_survives_a_parent_cycle() {
    let cohort = |name: &str, parent: &str| -> crate::api::kueue::Cohort {
        serde_json::from_value(json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": name}, "spec": {"parentName": parent}})).unwrap()
    };
    let snap = Snapshot {
        cluster_queues: vec![
            Arc::new(cq("a-cq", Some("team-a"), "4", "0")),
            Arc::new(cq("loner", None, "1", "0")),
            Arc::new(cq("c-cq", Some("x"), "1", "0")),
        ],
        cohorts: vec![
            Arc::new(cohort("team-a", "org")),
            Arc::new(cohort("x", "y")),
            Arc::new(cohort("y", "x")),
        ],
        ..Default::default()
    };
    let html = body(&snap, 0.0);
    let org = html.find("Cohort org").expect("the implicit root cohort");
    let team = html.find("team-a").unwrap();
    assert!(
        org < team && team < html.find("data-cq=\"a-cq\"").unwrap(),
        "{html}"
    );
    assert!(html.contains("is in a parent cycle"), "{html}");
    assert!(
        html.contains("data-cq=\"c-cq\"") && html.contains("data-cq=\"loner\""),
        "{html}"
    );
}

#[test]
fn chart_draws_traffic_and_marks_the_switch() {
    let s = |t: f64, active: &str, pending: Option<i32>| Sample {
        t,
        active_capacity: None,
        active_traffic: Some(100),
        pending_capacity: None,
        pending_traffic: pending,
        upgrading: pending.is_some(),
        active_cluster: Some(active.to_string()),
    };
    let svg = chart(
        &[s(0.0, "a", None), s(5.0, "a", Some(0)), s(9.0, "b", None)],
        10.0,
    );
    assert!(svg.contains("class=\"active traffic\""), "{svg}");
    assert!(svg.contains("class=\"pending traffic\""), "{svg}");
    assert_eq!(svg.matches("class=\"switch\"").count(), 1, "{svg}");
    assert!(chart(&[], 1.0).is_empty());
}

fn upgrading_service(queue: Option<&str>) -> RayService {
    let mut labels = json!({});
    if let Some(q) = queue {
        labels["kueue.x-k8s.io/queue-name"] = json!(q);
    }
    serde_json::from_value(json!({"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": {"name": "s", "namespace": "ns", "labels": labels},
        "spec": {"rayClusterConfig": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": []}}}}},
        "status": {"activeServiceStatus": {"rayClusterName": "old"}, "pendingServiceStatus": {"rayClusterName": "new"}}}))
    .unwrap()
}

fn gated_cluster(status: &str) -> RayCluster {
    serde_json::from_value(json!({"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "new", "namespace": "ns"},
        "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": []}}}},
        "status": {"conditions": [{"type": "QuotaGated", "status": status, "reason": "WaitingForWorkloadSlice", "message": "no admitted workload slice covers this cluster", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}))
    .unwrap()
}

#[test]
fn gate_follows_the_pending_clusters_condition_and_only_for_queue_managed_services() {
    let snap = |rs: RayService, rc: RayCluster| Snapshot {
        ray_services: vec![Arc::new(rs)],
        ray_clusters: vec![Arc::new(rc)],
        ..Default::default()
    };
    let html = body(&snap(upgrading_service(Some("lq")), gated_cluster("True")), 0.0);
    assert!(
        html.contains("data-gate=\"closed\"")
            && html.contains("no admitted workload slice covers this cluster"),
        "{html}"
    );
    assert!(html.contains(">Upgrade gated: waiting for quota<"), "{html}");
    let html = body(&snap(upgrading_service(Some("lq")), gated_cluster("False")), 0.0);
    assert!(
        html.contains("data-gate=\"open\"") && html.contains(">Upgrade admitted: new cluster starting<"),
        "{html}"
    );
    // KubeRay's own upgrade, no queue: there is no gate, and nothing waits for quota.
    let html = body(&snap(upgrading_service(None), gated_cluster("True")), 0.0);
    assert!(
        html.contains("data-gate=\"none\"") && html.contains("not queue-managed"),
        "{html}"
    );
    assert!(!html.contains("waiting for quota"), "{html}");
}

#[test]
fn a_long_queue_draws_its_head_only() {
    let n = MAX_ROWS + 25;
    let snap = Snapshot {
        cluster_queues: vec![Arc::new(cq("cq", None, "1", "0"))],
        local_queues: vec![Arc::new(lq("lq", "cq"))],
        workloads: (0..n)
            .map(|i| Arc::new(pending(&format!("w{i:03}"), 0, "2026-01-01T00:00:00Z", "m")))
            .collect(),
        ..Default::default()
    };
    let html = body(&snap, 0.0);
    assert_eq!(html.matches("data-state=\"Pending\"").count(), MAX_ROWS, "{html}");
    assert!(html.contains("and 25 more not shown"), "{html}");
}

/// Issue 36: RayJobs are listed with KubeRay's states, their cluster, and what their Workload says
/// about quota (admitted by which ClusterQueue, or the scheduler's reason for waiting).
#[test]
fn ray_jobs_are_listed_with_their_quota_story() {
    let job = |name: &str, status: serde_json::Value| -> crate::api::ray::RayJob {
        serde_json::from_value(
            json!({"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": name, "namespace": "ns"},
            "spec": {"entrypoint": "python t.py", "suspend": status.is_null()}, "status": status}),
        )
        .unwrap()
    };
    let running = job(
        "train",
        json!({"jobDeploymentStatus": "Running", "jobStatus": "RUNNING", "rayClusterName": "train-x1"}),
    );
    let waiting = job("wait", serde_json::Value::Null);
    let mut admitted = pending("rayjob-train-1", 0, "2026-01-01T00:00:00Z", "");
    admitted.metadata.owner_references = Some(vec![serde_json::from_value(json!({"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "train", "uid": "u1", "controller": true})).unwrap()]);
    admitted.status = serde_json::from_value(json!({"admission": {"clusterQueue": "gpus", "podSetAssignments": []},
        "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]})).unwrap();
    let mut queued = pending(
        "rayjob-wait-1",
        0,
        "2026-01-01T00:00:00Z",
        "couldn't assign flavors to pod set head: insufficient unused quota for nvidia.com/gpu",
    );
    queued.metadata.owner_references = Some(vec![serde_json::from_value(json!({"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "wait", "uid": "u2", "controller": true})).unwrap()]);
    let snap = Snapshot {
        ray_jobs: vec![Arc::new(running), Arc::new(waiting)],
        workloads: vec![Arc::new(admitted), Arc::new(queued)],
        ..Default::default()
    };
    let html = body(&snap, 0.0);
    assert!(html.contains("<h2>RayJobs</h2>"), "{html}");
    let row = |name: &str| {
        html.split(&format!("data-rayjob=\"{name}\""))
            .nth(1)
            .and_then(|r| r.split("</tr>").next())
            .unwrap_or_default()
            .to_string()
    };
    let train = row("train");
    assert!(
        train.contains("Running")
            && train.contains("RUNNING")
            && train.contains("train-x1")
            && train.contains("admitted by ClusterQueue gpus"),
        "{train}"
    );
    let wait = row("wait");
    assert!(
        wait.contains("(suspended)") && wait.contains("waiting: couldn&#39;t assign flavors to pod set head"),
        "{wait}"
    );
    assert!(
        !body(&Snapshot::default(), 0.0).contains("RayJobs"),
        "no section without RayJobs"
    );
}

fn mk_object<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> Arc<T> {
    Arc::new(serde_json::from_value(v).unwrap())
}

/// The issue's "the web view shows worker clusters and where each workload runs": the admitted
/// Workload says which worker runs it, the pending one where its copies wait, and the workers'
/// section lists each MultiKueueCluster with its Active status and reason (escaped) and what runs there.
#[test]
fn shows_the_multikueue_workers_and_where_each_workload_runs() {
    let check = |name: &str, state: &str| json!({"name": name, "state": state, "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"});
    let wl = |name: &str, status: serde_json::Value| -> Arc<Workload> {
        mk_object(json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": name, "namespace": "ns", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": []}}}]},
            "status": status}))
    };
    let cluster = |name: &str, status: &str, reason: &str, message: &str| {
        mk_object(
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueCluster",
            "metadata": {"name": name}, "spec": {"clusterSource": {"kubeConfig": {"location": name}}},
            "status": {"conditions": [{"type": "Active", "status": status, "reason": reason, "message": message,
                "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}),
        )
    };
    let snap = Snapshot {
        cluster_queues: vec![Arc::new(cq("cq", None, "8", "1"))],
        local_queues: vec![Arc::new(lq("lq", "cq"))],
        admission_checks: vec![mk_object(
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck",
            "metadata": {"name": "mk"}, "spec": {"controllerName": "kueue.x-k8s.io/multikueue"}}),
        )],
        multikueue_clusters: vec![
            cluster("worker1", "True", "Active", "Connected"),
            cluster("worker2", "False", "BadConfig", "<script>no</script> kubeconfig"),
        ],
        workloads: vec![
            wl(
                "runs",
                json!({"clusterName": "worker1", "admissionChecks": [check("mk", "Ready")],
                "admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "count": 1}]},
                "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"},
                               {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}),
            ),
            wl(
                "waits",
                json!({"nominatedClusterNames": ["worker1", "worker2"], "admissionChecks": [check("mk", "Pending")]}),
            ),
            wl("local", json!({})),
        ],
        ..Default::default()
    };
    let html = body(&snap, 0.0);
    assert!(html.contains("<h2>MultiKueue workers</h2>"), "{html}");
    assert!(
        html.contains("data-worker=\"worker1\" data-active=\"True\" data-running=\"1\""),
        "{html}"
    );
    assert!(
        html.contains("data-worker=\"worker2\" data-active=\"False\" data-running=\"0\""),
        "{html}"
    );
    assert!(
        html.contains("BadConfig: &lt;script&gt;no&lt;/script&gt; kubeconfig"),
        "{html}"
    );
    assert!(!html.contains("<script>"), "{html}");
    assert!(
        html.contains("yaml?kind=MultiKueueCluster&amp;ns=&amp;name=worker1"),
        "{html}"
    );
    let row = |name: &str| {
        let at = html
            .find(&format!("data-workload=\"{name}\""))
            .unwrap_or_else(|| panic!("no row for {name}: {html}"));
        html[at..].split("</tr>").next().unwrap().to_string()
    };
    assert!(row("runs").contains("on worker worker1"), "{}", row("runs"));
    assert!(
        row("waits").contains("copies wait on worker1, worker2"),
        "{}",
        row("waits")
    );
    assert!(!row("local").contains("worker"), "{}", row("local"));

    // A cluster without MultiKueue: no workers' section.
    let plain = Snapshot {
        admission_checks: vec![],
        multikueue_clusters: vec![],
        ..snap
    };
    let html = body(&plain, 0.0);
    assert!(!html.contains("MultiKueue workers"), "{html}");
    assert!(!html.contains("on worker"), "{html}");
}

/// Issue 65's "a web view of domains": a TAS flavor's Topology levels, its hosts under their rack,
/// each host's free room after what the admitted Workload's topology assignment holds there, the
/// Workload named where its pods are; strings escaped; no section without a TAS flavor.
#[test]
fn shows_the_topology_domains_of_a_tas_flavor() {
    const RACK: &str = "cloud.com/topology-rack";
    const HOST: &str = "kubernetes.io/hostname";
    let node = |rack: &str, host: &str| {
        mk_object(json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": host, "labels": {RACK: rack, HOST: host}},
            "status": {"allocatable": {"cpu": "4", "pods": "110"}, "conditions": [{"type": "Ready", "status": "True"}]}}))
    };
    let flavor = |name: &str, topology: Option<&str>| {
        mk_object(
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": name},
            "spec": topology.map_or(json!({}), |t| json!({"topologyName": t}))}),
        )
    };
    let admitted: Arc<Workload> = mk_object(
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": "train", "namespace": "ns"},
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 2, "template": {"spec": {"containers": [
            {"name": "c", "resources": {"requests": {"cpu": "1500m"}}}]}}}]},
        "status": {"admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "count": 2,
                "flavors": {"cpu": "tas"}, "resourceUsage": {"cpu": "3"},
                "topologyAssignment": {"levels": [HOST], "slices": [{"domainCount": 1,
                    "valuesPerLevel": [{"universal": "h2"}], "podCounts": {"universal": 2}}]}}]},
            "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}),
    );
    let snap = Snapshot {
        cluster_queues: vec![Arc::new(cq("cq", None, "8", "3"))],
        flavors: vec![flavor("<i>plain</i>", None), flavor("tas", Some("default"))],
        topologies: vec![mk_object(
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": "default"},
            "spec": {"levels": [{"nodeLabel": RACK}, {"nodeLabel": HOST}]}}),
        )],
        nodes: vec![
            node("r1", "h1"),
            node("r1", "h2"),
            node("r2", "h3"),
            node("r2", "h4"),
        ],
        workloads: vec![admitted],
        non_tas: Some(Default::default()),
        ..Default::default()
    };
    let html = body(&snap, 0.0);
    assert!(html.contains("<h2>Topology domains</h2>"), "{html}");
    assert!(!html.contains("not yet counted"), "{html}");
    assert!(
        html.contains("levels <code>cloud.com/topology-rack</code> › <code>kubernetes.io/hostname</code>"),
        "{html}"
    );
    let row = |domain: &str| {
        let at = html
            .find(&format!("data-domain=\"{domain}\""))
            .unwrap_or_else(|| panic!("no row for {domain}: {html}"));
        html[at..].split("</tr>").next().unwrap().to_string()
    };
    assert!(row("r1/h2").contains("data-free=\"1\""), "{}", row("r1/h2"));
    assert!(row("r1/h2").contains("<b>1</b> · 3 / 4"), "{}", row("r1/h2"));
    // Ours: until the admission loop has listed the pods TAS did not place, the room shown leaves
    // them out: the card says so and each free figure is shown as an upper bound.
    let uncounted = body(
        &Snapshot {
            non_tas: None,
            ..snap.clone()
        },
        0.0,
    );
    assert!(uncounted.contains("non-TAS pods not yet counted"), "{uncounted}");
    assert!(uncounted.contains("<b>≤ 1</b> · 3 + ? other / 4"), "{uncounted}");
    assert!(
        row("r1/h2").contains("yaml?kind=Workload&amp;ns=ns&amp;name=train"),
        "{}",
        row("r1/h2")
    );
    assert!(row("r1/h1").contains("data-free=\"4\""), "{}", row("r1/h1"));
    assert!(row("r2/h3").contains("none"), "{}", row("r2/h3"));
    let r1 = html
        .find("cloud.com/topology-rack <b>r1</b>")
        .expect("a heading per rack");
    let r2 = html
        .find("cloud.com/topology-rack <b>r2</b>")
        .expect("a heading per rack");
    assert!(
        r1 < html.find("data-domain=\"r1/h1\"").unwrap() && r2 > html.find("data-domain=\"r1/h2\"").unwrap()
    );
    assert!(
        html.contains("ResourceFlavors without a topology: &lt;i&gt;plain&lt;/i&gt;"),
        "{html}"
    );
    assert!(!html.contains("<i>plain"), "{html}");

    // The Topology's Nodes gone: one line says so.
    let empty = Snapshot {
        nodes: vec![],
        ..snap.clone()
    };
    let html = body(&empty, 0.0);
    assert!(html.contains("no Node is in this topology"), "{html}");
    assert!(!html.contains("data-domain="), "{html}");

    // No flavor names a topology: no section.
    let plain = Snapshot {
        flavors: vec![flavor("plain", None)],
        ..snap
    };
    assert!(!body(&plain, 0.0).contains("Topology domains"));
}
