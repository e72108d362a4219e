use std::time::Duration;

use k8s_openapi::api::core::v1::Container;
use serde_json::json;

use super::*;
use crate::api::ray::RayJob;
use crate::rayservice::dashboard::sim::SimOptions;

fn container(command: &[&str], args: &[&str]) -> Container {
    serde_json::from_value(json!({"name": "ray-job-submitter", "command": command, "args": args})).unwrap()
}

fn job(entrypoint: &str) -> RayJob {
    serde_json::from_value(json!({
        "apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {"name": "rj", "namespace": "ns", "uid": "u1"},
        "spec": {
            "entrypoint": entrypoint,
            "rayClusterSpec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "h", "image": "rayproject/ray:2.9.0"}]}}}}
        },
        "status": {"jobId": "rj-abcde", "dashboardURL": "rj-xyz-head-svc.ns.svc.cluster.local:8265"}
    }))
    .unwrap()
}

/// KubeRay's own submitter script (as `build_submitter` writes it): the address, the job's id, the
/// entrypoint with its quoted `;` intact, and `ray job logs --follow` keeping the process until the end.
#[test]
fn kuberays_submitter_script_is_read_as_the_cli_would() {
    let entrypoint = r#"python -c "import time; time.sleep(3)""#;
    let submitter = crate::rayservice::rayjob::controller::build_submitter(&job(entrypoint), None).unwrap();
    let pod = submitter.spec.unwrap().template.spec.unwrap();
    let sub = parse_container(&pod.containers[0]).expect("a ray job submit");
    assert_eq!(
        sub,
        Submission {
            address: "http://rj-xyz-head-svc.ns.svc.cluster.local:8265".into(),
            submission_id: Some("rj-abcde".into()),
            entrypoint: entrypoint.into(),
            follows: true,
            options: SubmitOptions::default(),
        }
    );
}

/// The options KubeRay's `BuildJobSubmitCommand` writes (runtime env and metadata as quoted JSON, the
/// entrypoint's resources) are read back through the shell's quoting and passed on as the Ray CLI
/// passes them to `POST /api/jobs/`; one it cannot read ends the CLI with exit 1 before submitting.
#[tokio::test]
async fn the_submit_options_reach_the_jobs_api() {
    let mut j = job("python -c 'print(1)'");
    j.spec.runtime_env_yaml = Some("env_vars:\n  GREETING: 'say \"hi\"'\npip: [requests]\n".into());
    j.spec.metadata = Some([("owner".to_string(), "me".to_string())].into());
    j.spec.entrypoint_num_cpus = Some(0.5);
    j.spec.entrypoint_num_gpus = Some(1.0);
    j.spec.entrypoint_resources = Some(r#"{"Custom_1": 1, "Custom_2": 5.5}"#.into());
    let submitter = crate::rayservice::rayjob::controller::build_submitter(&j, None).unwrap();
    let pod = submitter.spec.unwrap().template.spec.unwrap();
    let sub = parse_container(&pod.containers[0]).expect("a ray job submit");
    assert_eq!(sub.entrypoint, "python -c 'print(1)'");
    let o = &sub.options;
    assert_eq!(
        o.runtime_env,
        Some(json!({"env_vars": {"GREETING": "say \"hi\""}, "pip": ["requests"]}))
    );
    assert_eq!(o.metadata.as_ref().unwrap()["owner"], "me");
    assert_eq!(
        (o.entrypoint_num_cpus, o.entrypoint_num_gpus),
        (Some(0.5), Some(1.0))
    );
    assert_eq!(o.entrypoint_resources.as_ref().unwrap()["Custom_2"], 5.5);
    assert_eq!(o.error, None);

    let s = sim();
    let sub = Submission {
        address: "http://head:8265".into(),
        ..sub
    };
    let (_, id) = step(&s, &sub, None).await;
    let info = s
        .job_info(
            &DashboardEndpoint::new(String::from("http://head:8265")),
            id.as_deref().unwrap(),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(info.metadata.as_ref().map(|m| m["owner"].as_str()), Some("me"));
    assert_eq!(
        info.runtime_env.as_ref().map(|e| e["pip"].clone()),
        Some(json!(["requests"]))
    );

    let bad = container(
        &["sh", "-c"],
        &["ray job submit --address http://head:8265 --metadata-json '{not json' -- echo hi"],
    );
    let bad = parse_container(&bad).unwrap();
    assert!(
        bad.options
            .error
            .as_deref()
            .is_some_and(|e| e.contains("--metadata-json")),
        "{:?}",
        bad.options
    );
    let (next, _) = step(&s, &bad, None).await;
    assert!(matches!(next, Step::End(1, _)));
}

#[test]
fn a_hand_written_submit_is_read_too() {
    // `--no-wait` alone: the process ends once the job is accepted.
    let c = container(
        &["sh", "-c"],
        &["ray job submit --address=10.0.0.2:8265 --no-wait -- sleep 5 && echo done"],
    );
    let sub = parse_container(&c).unwrap();
    assert_eq!(
        (sub.address.as_str(), sub.entrypoint.as_str(), sub.follows),
        ("http://10.0.0.2:8265", "sleep 5", false)
    );
    // Without `--no-wait` the CLI waits; the address may come from the environment.
    let mut c = container(&["ray", "job", "submit", "--", "python", "train.py"], &[]);
    c.env = Some(vec![
        serde_json::from_value(json!({"name": "RAY_DASHBOARD_ADDRESS", "value": "head:8265"})).unwrap(),
    ]);
    let sub = parse_container(&c).unwrap();
    assert_eq!(
        (
            sub.address.as_str(),
            sub.entrypoint.as_str(),
            sub.follows,
            sub.submission_id
        ),
        ("http://head:8265", "python train.py", true, None)
    );
    // Not a submitter: no `ray job submit`, or no address anywhere.
    assert_eq!(parse_container(&container(&["sleep", "3"], &[])), None);
    assert_eq!(
        parse_container(&container(&["sh", "-c", "echo 'ray job submit -- x'"], &[])),
        None
    );
    assert_eq!(
        parse_container(&container(&["ray", "job", "submit", "--", "x"], &[])),
        None
    );
}

fn sim() -> RaySim {
    RaySim::new(SimOptions {
        build_delay: Duration::ZERO,
        replica_start_delay: Duration::ZERO,
        ..SimOptions::default()
    })
}

fn submission(entrypoint: &str, follows: bool) -> Submission {
    Submission {
        address: "http://head:8265".into(),
        submission_id: Some("rj-1".into()),
        entrypoint: entrypoint.into(),
        follows,
        options: SubmitOptions::default(),
    }
}

/// Submitted once (a known id is not submitted again, as the script's `ray job status` check does),
/// followed to the job's end, and the process exits 0 whatever the end, as `ray job logs --follow` does.
#[tokio::test(start_paused = true)]
async fn a_followed_job_is_submitted_once_and_the_pod_ends_with_the_job() {
    let sim = sim();
    let sub = submission("sleep 2", true);
    let (next, id) = step(&sim, &sub, None).await;
    assert_eq!((next, id.as_deref()), (Step::Poll, Some("rj-1")));
    let (next, _) = step(&sim, &sub, id.clone()).await;
    assert_eq!(next, Step::Poll, "still running, and not submitted twice");
    tokio::time::advance(Duration::from_secs(3)).await;
    let (next, _) = step(&sim, &sub, id).await;
    assert_eq!(next, Step::End(0, "job rj-1 ended SUCCEEDED".into()));

    let failing = Submission {
        submission_id: Some("rj-2".into()),
        ..submission("exit 3", true)
    };
    let (_, id) = step(&sim, &failing, None).await;
    tokio::time::advance(Duration::from_secs(2)).await;
    let (next, _) = step(&sim, &failing, id).await;
    assert_eq!(
        next,
        Step::End(0, "job rj-2 ended FAILED".into()),
        "ray job logs exits 0; Ray holds the job's end"
    );
}

#[tokio::test(start_paused = true)]
async fn no_wait_ends_at_submission_and_a_refusal_fails_the_pod() {
    let sim = sim();
    let (next, _) = step(&sim, &submission("sleep 60", false), None).await;
    assert_eq!(next, Step::End(0, "submitted rj-1".into()));
    let (next, _) = step(&sim, &submission("", false), Some("rj-9".into())).await;
    assert!(
        matches!(&next, Step::End(1, m) if m.contains("entrypoint")),
        "{next:?}"
    );
    sim.set_reachable("http://head:8265", false);
    let (next, _) = step(
        &sim,
        &Submission {
            submission_id: Some("rj-3".into()),
            ..submission("sleep 1", true)
        },
        None,
    )
    .await;
    assert!(
        matches!(&next, Step::End(1, m) if m.contains("ray job submit")),
        "{next:?}"
    );
}

/// The kubelet with Kubernetes 1.35's per-container restart rules, as KubeRay's SidecarSubmitterRestart
/// relies on (`rayjob_sidecar_mode_test.go` "RayJob Sidecar Mode should restart submitter container on
/// non-zero exit"): a failed `restartPolicy: OnFailure` submitter runs again with its restart count up
/// and its failure as last state; one without the rule ends, and so does one that exits 0.
#[test]
fn a_failed_submitter_with_its_own_on_failure_policy_restarts() {
    let pod = |policy: Option<&str>| -> Pod {
        let mut sidecar = json!({"name": "ray-job-submitter", "image": "ray"});
        if let Some(p) = policy {
            sidecar["restartPolicy"] = json!(p);
        }
        serde_json::from_value(json!({
            "metadata": {"name": "h"},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "ray-head", "image": "ray"}, sidecar]},
            "status": {"phase": "Running", "containerStatuses": [
                {"name": "ray-head", "ready": true, "restartCount": 0, "image": "", "imageID": "", "state": {"running": {}}},
                {"name": "ray-job-submitter", "ready": true, "restartCount": 1, "image": "", "imageID": "", "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]}
        }))
        .unwrap()
    };
    let status = ended_container(
        &pod(Some("OnFailure")),
        "ray-job-submitter",
        1,
        "ray job logs: closed",
    );
    let sub = &status["containerStatuses"][1];
    assert_eq!(sub["restartCount"], 2);
    assert!(sub["state"]["running"].is_object(), "{status}");
    assert_eq!(sub["lastState"]["terminated"]["exitCode"], 1);
    assert_eq!(
        sub["lastState"]["terminated"]["startedAt"],
        "2026-01-01T00:00:00Z"
    );
    assert!(
        status["containerStatuses"][0]["state"]["running"].is_object(),
        "the head is untouched"
    );
    let restarted: Pod =
        serde_json::from_value(json!({"metadata": {"name": "h"}, "status": status})).unwrap();
    assert!(!has_ended(&restarted, "ray-job-submitter"), "it runs again");
    assert!(
        restart_backoff_left(&restarted, "ray-job-submitter").is_some(),
        "after the back-off"
    );

    let ended = ended_container(&pod(None), "ray-job-submitter", 1, "failed");
    assert_eq!(
        ended["containerStatuses"][1]["state"]["terminated"]["exitCode"],
        1
    );
    let done = ended_container(&pod(Some("OnFailure")), "ray-job-submitter", 0, "job ended");
    assert_eq!(done["containerStatuses"][1]["state"]["terminated"]["exitCode"], 0);
}

/// The cluster's DNS as a submitter pod sees it: Services by their short, namespaced and full names,
/// IPs and localhost as they are, anything else (KubeRay e2e's `http://do-not-exist:8265` is a short
/// name whose Service does not exist) for the API to answer or not at all.
#[test]
fn addresses_resolve_as_a_pods_dns_would() {
    assert_eq!(
        host_of("http://rc-head-svc.ns.svc.cluster.local:8265"),
        "rc-head-svc.ns.svc.cluster.local"
    );
    assert_eq!(host_of("do-not-exist:8265"), "do-not-exist");
    assert_eq!(host_of("http://[::1]:8265/api"), "[::1]");
    assert_eq!(
        service_for("rc-head-svc.ns.svc.cluster.local", "default"),
        Some(Some(("rc-head-svc", "ns")))
    );
    assert_eq!(
        service_for("rc-head-svc.ns", "default"),
        Some(Some(("rc-head-svc", "ns")))
    );
    assert_eq!(
        service_for("do-not-exist", "default"),
        Some(Some(("do-not-exist", "default")))
    );
    assert_eq!(service_for("10.0.0.7", "default"), Some(None));
    assert_eq!(service_for("localhost", "default"), Some(None));
    assert_eq!(
        service_for("ray.example.com", "default"),
        None,
        "no Service answers a name outside the cluster"
    );
}

/// `quotagate node-agent` plays only the submitters on its own nodes: a pod bound elsewhere is a real
/// kubelet's (or another agent's), and an unbound one nobody runs yet.
#[test]
fn a_node_scope_plays_only_the_pods_bound_to_its_nodes() {
    let pod = |node: Option<&str>| -> Pod {
        serde_json::from_value(
            json!({"metadata": {"name": "p"}, "spec": {"containers": [], "nodeName": node}}),
        )
        .unwrap()
    };
    let scope = Scope::Nodes(["agent-1".to_string(), "agent-2".to_string()].into());
    assert!(scope.plays(&pod(Some("agent-2"))));
    assert!(!scope.plays(&pod(Some("kubelet-1"))), "another node's pod");
    assert!(!scope.plays(&pod(None)), "a pod not yet bound");
    assert!(
        Scope::Cluster.plays(&pod(None)),
        "the embedded cluster plays every pod"
    );
}

/// On a node agent, a submitter's `http://<head svc>.<ns>.svc.cluster.local:8265` reaches the head the
/// agent serves at its pod address: the Service's port, by name, to the EndpointSlice's target port
/// on a ready endpoint (kube-proxy's path). A port the Service lacks, or a Service with no ready
/// endpoint, refuses the connection, and the CLI fails as it would.
#[tokio::test]
async fn a_node_scope_follows_a_service_address_to_its_ready_endpoint() {
    let svc = json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "rj-head-svc", "namespace": "ns"},
        "spec": {"ports": [{"name": "client", "port": 10001}, {"name": "dashboard", "port": 8265, "targetPort": "dashboard"}]}});
    let slice = |ready: bool| {
        json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "rj-head-svc-x1", "namespace": "ns", "labels": {"kubernetes.io/service-name": "rj-head-svc"}},
            "addressType": "IPv4",
            "ports": [{"name": "client", "port": 10001}, {"name": "dashboard", "port": 8265}],
            "endpoints": [{"addresses": ["10.244.128.9"], "conditions": {"ready": ready}}]})
    };
    let api = crate::rayservice::dashboard::sim::fake_api::FakeApi::new(vec![svc, slice(true)]);
    let client = api.client();
    let nodes = Scope::Nodes(["agent-1".to_string()].into());
    let full = "http://rj-head-svc.ns.svc.cluster.local:8265";
    assert_eq!(
        dialled(&client, &nodes, "other", full).await.unwrap(),
        Ok("http://10.244.128.9:8265".to_string())
    );
    assert_eq!(
        dialled(&client, &nodes, "ns", "rj-head-svc:8265").await.unwrap(),
        Ok("http://10.244.128.9:8265".to_string()),
        "a short name in the pod's own namespace"
    );
    assert_eq!(
        dialled(&client, &Scope::Cluster, "ns", full).await.unwrap(),
        Ok(full.to_string()),
        "the embedded cluster's dashboards are keyed by the address dialled"
    );
    assert_eq!(
        dialled(&client, &nodes, "ns", "http://10.0.0.7:8265")
            .await
            .unwrap(),
        Ok("http://10.0.0.7:8265".to_string()),
        "an IP is dialled as it is"
    );
    let refused = dialled(&client, &nodes, "ns", "http://rj-head-svc:9999")
        .await
        .unwrap();
    assert_eq!(
        refused,
        Err("connection refused: Service rj-head-svc has no port 9999".into())
    );
    api.put(slice(false));
    let refused = dialled(&client, &nodes, "ns", full).await.unwrap();
    assert_eq!(
        refused,
        Err("connection refused: Service rj-head-svc has no ready endpoint".into())
    );
}

#[test]
fn ports_are_read_from_the_address_or_its_scheme() {
    assert_eq!(port_of("http://h.ns.svc:8265"), Some(8265));
    assert_eq!(port_of("http://h/api"), Some(80));
    assert_eq!(port_of("https://h"), Some(443));
    assert_eq!(port_of("http://[::1]:8265/x"), Some(8265));
    assert_eq!(port_of("http://[::1]/x"), Some(80));
    assert_eq!(port_of("h:notaport"), None);
}

/// The cache keeps a pod that runs no submitter as its name alone (`slim`): every pod, slimmed, gets
/// the same decision as whole (played with the same submission, or forgotten by the same uid), in
/// every phase, deleting or not, bound or not, under either scope; a submitter's pod is kept whole.
#[test]
fn a_slimmed_pod_is_played_as_the_whole_one() {
    let template = crate::rayservice::rayjob::controller::build_submitter(&job("python x.py"), None)
        .unwrap()
        .spec
        .unwrap()
        .template
        .spec
        .unwrap();
    let k8s_job_mode = serde_json::to_value(&template).unwrap();
    let sidecar =
        json!({"containers": [{"name": "ray-head", "image": "ray"}, k8s_job_mode["containers"][0]]});
    let worker = json!({"containers": [{"name": "ray-worker", "image": "rayproject/ray:2.46.0",
        "args": ["ray start --address=rc-head-svc:6379 --block"],
        "env": [{"name": "RAY_PORT", "value": "6379"}],
        "resources": {"requests": {"cpu": "1"}}}]});
    let scopes = [Scope::Cluster, Scope::Nodes(["agent-1".to_string()].into())];
    let mut seen_played = 0;
    for (kind, spec) in [
        ("submitter", &k8s_job_mode),
        ("sidecar", &sidecar),
        ("worker", &worker),
    ] {
        for phase in ["Pending", "Running", "Succeeded"] {
            for deleting in [false, true] {
                for node in [None, Some("agent-1"), Some("kubelet-1")] {
                    let mut spec = spec.clone();
                    spec["nodeName"] = json!(node);
                    let mut meta = json!({"name": "p", "namespace": "ns", "uid": "u-p", "resourceVersion": "7",
                        "labels": {"ray.io/cluster": "rc"},
                        "managedFields": [{"manager": "m", "operation": "Update"}]});
                    if deleting {
                        meta["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
                    }
                    let whole: Pod = serde_json::from_value(
                        json!({"metadata": meta, "spec": spec, "status": {"phase": phase}}),
                    )
                    .unwrap();
                    let mut slimmed = whole.clone();
                    slim(&mut slimmed);
                    for scope in &scopes {
                        let decision = playing(&whole, scope);
                        seen_played += usize::from(decision.is_some());
                        assert_eq!(playing(&slimmed, scope), decision, "{kind} {phase} {node:?}");
                    }
                    assert_eq!(slimmed.metadata.uid, whole.metadata.uid);
                    assert_eq!(slimmed.metadata.name, whole.metadata.name);
                    assert_eq!(slimmed.metadata.namespace, whole.metadata.namespace);
                    assert!(slimmed.metadata.managed_fields.is_none());
                    if kind == "worker" {
                        assert!(
                            slimmed.spec.is_none() && slimmed.status.is_none(),
                            "a worker is its name"
                        );
                    } else {
                        let mut kept = whole.clone();
                        kept.metadata.managed_fields = None;
                        assert_eq!(slimmed, kept, "a submitter's pod is kept whole");
                    }
                }
            }
        }
    }
    // Both submitters are played where they run: Running, not deleting, and in scope (the cluster's
    // three nodes, the agent's one).
    assert_eq!(seen_played, 2 * (3 + 1));
}
