use serde_json::json;

use super::*;

fn cluster(extra_spec: serde_json::Value, labels: serde_json::Value) -> RayCluster {
    let mut spec = json!({
        "rayVersion": "2.52.0",
        "headGroupSpec": {"rayStartParams": {}, "template": {"metadata": {"labels": {"team": "a", "ray.io/cluster": "evil"}},
            "spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray:2.52.0",
                "resources": {"limits": {"cpu": "2", "memory": "5Gi"}}}]}}},
        "workerGroupSpecs": [{"groupName": "small", "replicas": 1, "minReplicas": 1, "maxReplicas": 5,
            "rayStartParams": {}, "template": {"spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray:2.52.0",
                "resources": {"limits": {"cpu": "1", "memory": "2Gi"}}}]}}}]
    });
    if let (Some(s), Some(e)) = (spec.as_object_mut(), extra_spec.as_object()) {
        s.extend(e.clone());
    }
    serde_json::from_value(json!({"apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": "rc", "namespace": "ns", "labels": labels}, "spec": spec}))
    .unwrap()
}

fn env(pod: &Pod) -> BTreeMap<String, String> {
    pod.spec.as_ref().unwrap().containers[0]
        .env
        .iter()
        .flatten()
        .map(|e| {
            let v = e.value.clone().unwrap_or_else(|| {
                e.value_from
                    .as_ref()
                    .and_then(|f| f.field_ref.as_ref())
                    .map(|f| format!("field:{}", f.field_path))
                    .unwrap_or_default()
            });
            (e.name.clone(), v)
        })
        .collect()
}

#[test]
fn head_pod_matches_kuberay() {
    let pod = build_head_pod(&cluster(json!({}), json!({})), &BuildOptions::default()).unwrap();
    let meta = &pod.metadata;
    assert_eq!(meta.generate_name.as_deref(), Some("rc-head-"));
    assert_eq!(meta.namespace.as_deref(), Some("ns"));
    let labels = meta.labels.as_ref().unwrap();
    assert_eq!(
        labels["ray.io/cluster"], "rc",
        "template cannot override the cluster label"
    );
    assert_eq!(labels["ray.io/group"], "headgroup");
    assert_eq!(labels["ray.io/node-type"], "head");
    assert_eq!(labels["team"], "a");
    assert!(
        !labels.contains_key("ray.io/serve"),
        "only RayService clusters get the serve label"
    );

    let spec = pod.spec.as_ref().unwrap();
    let ray = &spec.containers[0];
    assert_eq!(
        ray.command.as_deref(),
        Some(&["/bin/bash".to_string(), "-c".into(), "--".into()][..])
    );
    let start = "ray start --head  --block  --dashboard-agent-listen-port=52365  --dashboard-host=0.0.0.0  \
                 --memory=5368709120  --metrics-export-port=8080  --num-cpus=2 ";
    assert_eq!(
        ray.args.as_ref().unwrap()[0],
        format!("ulimit -n ${{RAY_START_ULIMIT_OPEN_FILES:-65536}}; {start}")
    );
    let e = env(&pod);
    assert_eq!(e["KUBERAY_GEN_RAY_START_CMD"], start);
    assert_eq!(e["RAY_ADDRESS"], "127.0.0.1:6379");
    assert_eq!(e["RAY_PORT"], "6379");
    assert_eq!(e["RAY_CLUSTER_NAME"], "field:metadata.labels['ray.io/cluster']");
    assert_eq!(
        e["RAY_USAGE_STATS_EXTRA_TAGS"],
        "kuberay_version=v1.7.0;kuberay_crd=RayCluster"
    );
    assert!(
        !e.contains_key("FQ_RAY_IP"),
        "the head does not dial itself through the Service"
    );
    // Metrics port added, /dev/shm sized from the memory limit.
    assert!(
        ray.ports
            .iter()
            .flatten()
            .any(|p| p.name.as_deref() == Some("metrics") && p.container_port == 8080)
    );
    let shm = spec
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == "shared-mem")
        .unwrap();
    let ed = shm.empty_dir.as_ref().unwrap();
    assert_eq!(
        (ed.medium.as_deref(), ed.size_limit.as_ref().map(|q| q.0.as_str())),
        (Some("Memory"), Some("5Gi"))
    );
    // Ray 2.52 predates the unified health endpoint: exec probes checking raylet and GCS.
    let ready = ray.readiness_probe.as_ref().unwrap();
    let cmd = &ready.exec.as_ref().unwrap().command.as_ref().unwrap()[2];
    assert!(
        cmd.contains("52365/api/local_raylet_healthz") && cmd.contains("8265/api/gcs_healthz"),
        "{cmd}"
    );
    assert_eq!(
        (ready.timeout_seconds, ready.failure_threshold),
        (Some(5), Some(10))
    );
    assert_eq!(ray.liveness_probe.as_ref().unwrap().failure_threshold, Some(120));
}

#[test]
fn worker_pod_dials_the_head_service() {
    let rc = cluster(json!({}), json!({}));
    let pod = build_worker_pod(&rc, "small", &WorkerSlot::default(), &BuildOptions::default()).unwrap();
    assert_eq!(pod.metadata.generate_name.as_deref(), Some("rc-small-worker-"));
    assert_eq!(
        pod.metadata.labels.as_ref().unwrap()["ray.io/worker-group-replica-index"],
        "0"
    );
    let e = env(&pod);
    assert_eq!(e["FQ_RAY_IP"], "rc-head-svc.ns.svc.cluster.local");
    assert_eq!(e["RAY_IP"], "rc-head-svc");
    assert_eq!(e["RAY_ADDRESS"], "rc-head-svc.ns.svc.cluster.local:6379");
    assert!(
        e["KUBERAY_GEN_RAY_START_CMD"]
            .starts_with("ray start  --address=rc-head-svc.ns.svc.cluster.local:6379 ")
    );
    let spec = pod.spec.as_ref().unwrap();
    let init = &spec.init_containers.as_ref().unwrap()[0];
    assert_eq!(init.name, "wait-gcs-ready");
    assert!(
        init.args.as_ref().unwrap()[0]
            .contains("ray health-check --address rc-head-svc.ns.svc.cluster.local:6379")
    );
    assert!(init.env.iter().flatten().any(|e| e.name == "FQ_RAY_IP"));
    assert!(matches!(
        build_worker_pod(&rc, "nope", &WorkerSlot::default(), &BuildOptions::default()),
        Err(BuildError::NoSuchGroup(_))
    ));
}

#[test]
fn rayservice_pods_get_serve_labels_and_proxy_readiness() {
    let rc = cluster(
        json!({"rayVersion": "2.53.0"}),
        json!({"ray.io/originated-from-crd": "RayService"}),
    );
    let head = build_head_pod(&rc, &BuildOptions::default()).unwrap();
    assert_eq!(head.metadata.labels.as_ref().unwrap()["ray.io/serve"], "false");
    let hp = head.spec.as_ref().unwrap().containers[0]
        .readiness_probe
        .clone()
        .unwrap();
    assert_eq!(
        hp.http_get.unwrap().path.as_deref(),
        Some("/api/healthz"),
        "Ray >= 2.53 uses the unified endpoint"
    );
    assert!(env(&head).contains_key("RAY_SERVE_KV_TIMEOUT_S"));
    let worker = build_worker_pod(&rc, "small", &WorkerSlot::default(), &BuildOptions::default()).unwrap();
    assert_eq!(worker.metadata.labels.as_ref().unwrap()["ray.io/serve"], "true");
    let wp = worker.spec.as_ref().unwrap().containers[0]
        .readiness_probe
        .clone()
        .unwrap();
    assert_eq!(wp.failure_threshold, Some(1));
    assert!(wp.exec.unwrap().command.unwrap()[2].contains("localhost:8000/-/healthz"));
}

#[test]
fn autoscaler_sidecar_and_v2() {
    let rc = cluster(
        json!({"enableInTreeAutoscaling": true, "autoscalerOptions": {"version": "v2", "image": "custom:1"}}),
        json!({}),
    );
    let pod = build_head_pod(&rc, &BuildOptions::default()).unwrap();
    let spec = pod.spec.as_ref().unwrap();
    assert_eq!(spec.containers[1].name, "autoscaler");
    assert_eq!(spec.containers[1].image.as_deref(), Some("custom:1"));
    assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
    assert_eq!(spec.service_account_name.as_deref(), Some("rc"));
    assert_eq!(env(&pod)["RAY_enable_autoscaler_v2"], "true");
    assert!(env(&pod)["KUBERAY_GEN_RAY_START_CMD"].contains(" --no-monitor "));
    for c in &spec.containers {
        assert!(
            c.volume_mounts
                .iter()
                .flatten()
                .any(|m| m.mount_path == "/tmp/ray"),
            "{} shares the log dir",
            c.name
        );
    }
}

#[test]
fn user_commands_run_before_ray_start_and_can_opt_out() {
    let mut rc = cluster(json!({}), json!({}));
    let head = rc.spec.head_group_spec.template.spec.as_mut().unwrap();
    head.containers[0].command = Some(vec!["echo".into(), "hi".into()]);
    let pod = build_head_pod(&rc, &BuildOptions::default()).unwrap();
    assert!(pod.spec.unwrap().containers[0].args.as_ref().unwrap()[0].starts_with(" echo  hi  && ulimit -n"));

    rc.metadata.annotations = Some(BTreeMap::from([(
        "ray.io/overwrite-container-cmd".to_string(),
        "true".to_string(),
    )]));
    let pod = build_head_pod(&rc, &BuildOptions::default()).unwrap();
    let ray = &pod.spec.as_ref().unwrap().containers[0];
    assert_eq!(
        ray.command.as_deref(),
        Some(&["echo".to_string(), "hi".into()][..]),
        "user command kept"
    );
    assert!(
        env(&pod).contains_key("KUBERAY_GEN_RAY_START_CMD"),
        "the generated command is still exported"
    );
}

#[test]
fn multi_host_labels() {
    let rc = cluster(
        json!({"workerGroupSpecs": [{"groupName": "tpu", "replicas": 1, "numOfHosts": 2,
        "template": {"spec": {"containers": [{"name": "ray"}]}}}]}),
        json!({}),
    );
    let slot = WorkerSlot {
        replica_index: 3,
        host_index: 1,
        replica_name: "tpu-abcde".into(),
    };
    let pod = build_worker_pod(&rc, "tpu", &slot, &BuildOptions::default()).unwrap();
    let l = pod.metadata.labels.unwrap();
    assert_eq!(
        (
            l["ray.io/worker-group-replica-index"].as_str(),
            l["ray.io/worker-group-replica-name"].as_str(),
            l["ray.io/replica-host-index"].as_str()
        ),
        ("3", "tpu-abcde", "1")
    );
}

#[test]
fn plasma_directory_skips_shm() {
    let mut rc = cluster(json!({}), json!({}));
    rc.spec.head_group_spec.ray_start_params = Some(BTreeMap::from([(
        "plasma-directory".to_string(),
        "/data".to_string(),
    )]));
    let pod = build_head_pod(&rc, &BuildOptions::default()).unwrap();
    assert!(
        !pod.spec
            .unwrap()
            .volumes
            .iter()
            .flatten()
            .any(|v| v.name == "shared-mem")
    );
}

#[test]
fn every_sample_cluster_builds() {
    for (file, doc) in crate::api::ray::roundtrip_tests::kuberay_docs() {
        let spec_value = match doc["kind"].as_str() {
            Some("RayCluster") => doc["spec"].clone(),
            Some("RayService") => doc["spec"]["rayClusterConfig"].clone(),
            _ => continue,
        };
        let rc: RayCluster = serde_json::from_value(json!({"apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": "c", "namespace": "ns"}, "spec": spec_value}))
        .unwrap();
        let head = build_head_pod(&rc, &BuildOptions::default()).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(
            head.spec.unwrap().containers[0].args.is_some() || file.contains("overwrite"),
            "{file}"
        );
        for g in rc.spec.worker_groups() {
            build_worker_pod(
                &rc,
                &g.group_name,
                &WorkerSlot::default(),
                &BuildOptions::default(),
            )
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        }
        super::super::service::head_service(&rc, &BuildOptions::default())
            .unwrap_or_else(|e| panic!("{file}: {e}"));
    }
}

#[test]
fn redis_fault_tolerance_wiring() {
    let mut rc = cluster(
        json!({"gcsFaultToleranceOptions": {"redisAddress": "redis:6379",
            "redisPassword": {"valueFrom": {"secretKeyRef": {"name": "redis-pw", "key": "pw"}}}}}),
        json!({}),
    );
    rc.metadata.uid = Some("uid-1".into());
    let head = build_head_pod(&rc, &BuildOptions::default()).unwrap();
    let ann = head.metadata.annotations.as_ref().unwrap();
    assert_eq!(ann["ray.io/ft-enabled"], "true");
    assert_eq!(ann["ray.io/external-storage-namespace"], "uid-1");
    let e = env(&head);
    assert_eq!(e["RAY_REDIS_ADDRESS"], "redis:6379");
    assert_eq!(e["RAY_external_storage_namespace"], "uid-1");
    assert!(e.contains_key("REDIS_PASSWORD"));
    assert!(e["KUBERAY_GEN_RAY_START_CMD"].contains(" --redis-password=$REDIS_PASSWORD "));
    let worker = build_worker_pod(&rc, "small", &WorkerSlot::default(), &BuildOptions::default()).unwrap();
    assert_eq!(env(&worker)["RAY_gcs_rpc_server_reconnect_timeout_s"], "600");
    let plain = build_head_pod(&cluster(json!({}), json!({})), &BuildOptions::default()).unwrap();
    assert_eq!(plain.metadata.annotations.unwrap()["ray.io/ft-enabled"], "false");
}

#[test]
fn embedded_fault_tolerance_mounts_the_pvc() {
    let rc = cluster(
        json!({"gcsFaultToleranceOptions": {"backend": "rocksdb", "storage": {"subPath": "gcs"}}}),
        json!({}),
    );
    let head = build_head_pod(&rc, &BuildOptions::default()).unwrap();
    let e = env(&head);
    assert_eq!(
        (e["RAY_gcs_storage"].as_str(), e["RAY_gcs_storage_path"].as_str()),
        ("rocksdb", "/data/gcs")
    );
    let spec = head.spec.unwrap();
    let vol = spec
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == "gcs-storage")
        .unwrap();
    assert_eq!(
        vol.persistent_volume_claim.as_ref().unwrap().claim_name,
        "rc-gcs-pvc"
    );
    assert!(
        spec.containers[0]
            .volume_mounts
            .iter()
            .flatten()
            .any(|m| m.mount_path == "/data/gcs" && m.sub_path.as_deref() == Some("gcs"))
    );
}

#[test]
fn token_auth_wiring() {
    let rc = cluster(
        json!({"authOptions": {"mode": "token"}, "enableInTreeAutoscaling": true}),
        json!({}),
    );
    let head = build_head_pod(&rc, &BuildOptions::default()).unwrap();
    let spec = head.spec.as_ref().unwrap();
    for c in &spec.containers {
        let token = c
            .env
            .iter()
            .flatten()
            .find(|e| e.name == "RAY_AUTH_TOKEN")
            .unwrap_or_else(|| panic!("{} has no token", c.name));
        let sel = token
            .value_from
            .as_ref()
            .unwrap()
            .secret_key_ref
            .as_ref()
            .unwrap();
        assert_eq!((sel.name.as_str(), sel.key.as_str()), ("rc", "auth_token"));
    }
    let worker = build_worker_pod(&rc, "small", &WorkerSlot::default(), &BuildOptions::default()).unwrap();
    let init = &worker.spec.as_ref().unwrap().init_containers.as_ref().unwrap()[0];
    assert!(init.env.iter().flatten().any(|e| e.name == "RAY_AUTH_MODE"));

    let rc = cluster(
        json!({"authOptions": {"mode": "token", "enableK8sTokenAuth": true}}),
        json!({}),
    );
    let head = build_head_pod(&rc, &BuildOptions::default()).unwrap();
    let spec = head.spec.unwrap();
    assert!(
        spec.volumes
            .iter()
            .flatten()
            .any(|v| v.name == "ray-token" && v.projected.is_some())
    );
    assert!(
        spec.containers[0]
            .env
            .iter()
            .flatten()
            .any(|e| e.name == "RAY_ENABLE_K8S_TOKEN_AUTH")
    );
}
