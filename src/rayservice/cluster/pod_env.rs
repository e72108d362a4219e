//! Environment, probes and the autoscaler sidecar of Ray Pods (KubeRay's `setContainerEnvVars`,
//! `initLivenessAndReadinessProbe`, `BuildAutoscalerContainer`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, EnvVar, EnvVarSource, ExecAction, HTTPGetAction, ObjectFieldSelector, Probe,
    ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::Creator;
use super::startcmd::{NodeType, shell_command};
use crate::api::ray::constants as c;
use crate::api::ray::raycluster::AutoscalerOptions;

const AUTOSCALER_START_CMD: &str =
    "ray kuberay-autoscaler --cluster-name $(RAY_CLUSTER_NAME) --cluster-namespace $(RAY_CLUSTER_NAMESPACE)";

fn value(name: &str, v: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: Some(v.into()),
        ..Default::default()
    }
}

fn field(name: &str, path: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: path.into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn has(env: &[EnvVar], name: &str) -> bool {
    env.iter().any(|e| e.name == name)
}

/// `RAY_IP` is the head Service name: the first label of the FQDN.
fn ray_ip(fqdn: &str) -> &str {
    fqdn.split('.').next().unwrap_or(fqdn)
}

pub(super) fn set_init_container_env(container: &mut Container, fqdn: &str) {
    let env = container.env.get_or_insert_with(Vec::new);
    env.push(value(c::ENV_FQ_RAY_IP, fqdn));
    env.push(value(c::ENV_RAY_IP, ray_ip(fqdn)));
}

/// Env of the Ray container; user-set values of the defaultable variables are kept.
pub(super) fn set_container_env(
    container: &mut Container,
    node: NodeType,
    fqdn: &str,
    head_port: &str,
    ray_start: &str,
    creator: Creator,
    kuberay_version: &str,
) {
    let env = container.env.get_or_insert_with(Vec::new);
    let ip = match node {
        NodeType::Head => "127.0.0.1",
        NodeType::Worker => {
            env.push(value(c::ENV_FQ_RAY_IP, fqdn));
            env.push(value(c::ENV_RAY_IP, ray_ip(fqdn)));
            fqdn
        }
    };
    env.push(field(
        c::ENV_RAY_CLUSTER_NAME,
        &format!("metadata.labels['{}']", c::LABEL_CLUSTER),
    ));
    env.push(field(c::ENV_RAY_CLUSTER_NAMESPACE, "metadata.namespace"));
    env.push(field(c::ENV_RAY_CLOUD_INSTANCE_ID, "metadata.name"));
    env.push(field(
        c::ENV_RAY_NODE_TYPE_NAME,
        &format!("metadata.labels['{}']", c::LABEL_GROUP),
    ));
    env.push(value(c::ENV_KUBERAY_GEN_RAY_START_CMD, ray_start));
    if !has(env, c::ENV_RAY_PORT) {
        env.push(value(c::ENV_RAY_PORT, head_port));
    }
    if creator == Creator::RayService {
        // Fail fast on dead actors and GCS hiccups so Serve replicas recover quickly.
        for (k, v) in [
            ("RAY_timeout_ms_task_wait_for_death_info", "0"),
            ("RAY_gcs_server_request_timeout_seconds", "5"),
            ("RAY_SERVE_KV_TIMEOUT_S", "5"),
        ] {
            if !has(env, k) {
                env.push(value(k, v));
            }
        }
    }
    if !has(env, c::ENV_RAY_ADDRESS) {
        env.push(value(c::ENV_RAY_ADDRESS, &format!("{ip}:{head_port}")));
    }
    if !has(env, c::ENV_RAY_USAGE_STATS_KUBERAY_IN_USE) {
        env.push(value(c::ENV_RAY_USAGE_STATS_KUBERAY_IN_USE, "1"));
    }
    if node == NodeType::Head {
        env.push(value(
            c::ENV_RAY_USAGE_STATS_EXTRA_TAGS,
            &format!(
                "kuberay_version={kuberay_version};kuberay_crd={}",
                creator.as_str()
            ),
        ));
    }
    if !has(env, c::ENV_RAY_DASHBOARD_ENABLE_K8S_DISK_USAGE) {
        env.push(value(c::ENV_RAY_DASHBOARD_ENABLE_K8S_DISK_USAGE, "1"));
    }
}

/// Liveness and readiness probes unless the user set them. Ray >= 2.53 has one HTTP health endpoint on the
/// dashboard agent; older versions need wget checks of raylet (and GCS on the head). RayService workers also
/// check their Serve proxy and leave the endpoints after one failure.
pub(super) fn set_probes(
    ray: &mut Container,
    node: NodeType,
    creator: Creator,
    params: &BTreeMap<String, String>,
    ray_version: Option<&str>,
) {
    let port = |key: &str, default: i32| {
        params
            .get(key)
            .and_then(|v| v.parse::<i32>().ok())
            .unwrap_or(default)
    };
    let agent_port = port(
        "dashboard-agent-listen-port",
        c::DEFAULT_DASHBOARD_AGENT_LISTEN_PORT,
    );
    let unified = ray_version
        .and_then(parse_version)
        .is_some_and(|v| v >= (2, 53, 0));
    let wget = |timeout: i32, port: i32, path: &str| {
        format!("wget --tries 1 -T {timeout} -q -O- http://localhost:{port}/{path} | grep success")
    };
    let mut commands = vec![wget(2, agent_port, "api/local_raylet_healthz")];
    if node == NodeType::Head {
        // KubeRay passes the readiness failure threshold (10) as this wget timeout; kept for identical Pods.
        commands.push(wget(
            10,
            port("dashboard-port", c::DEFAULT_DASHBOARD_PORT),
            "api/gcs_healthz",
        ));
    }
    let http = HTTPGetAction {
        path: Some("/api/healthz".into()),
        port: IntOrString::Int(agent_port),
        ..Default::default()
    };
    let exec = |cmds: &[String]| ExecAction {
        command: Some(vec!["bash".into(), "-c".into(), cmds.join(" && ")]),
    };
    let head_timeout = if node == NodeType::Head { 5 } else { 2 };

    if ray.liveness_probe.is_none() {
        ray.liveness_probe = Some(Probe {
            initial_delay_seconds: Some(30),
            timeout_seconds: Some(head_timeout),
            period_seconds: Some(5),
            success_threshold: Some(1),
            failure_threshold: Some(120),
            http_get: unified.then(|| http.clone()),
            exec: (!unified).then(|| exec(&commands)),
            ..Default::default()
        });
    }
    if ray.readiness_probe.is_none() {
        let mut probe = Probe {
            initial_delay_seconds: Some(10),
            timeout_seconds: Some(head_timeout),
            period_seconds: Some(5),
            success_threshold: Some(1),
            failure_threshold: Some(10),
            http_get: unified.then(|| http.clone()),
            exec: (!unified).then(|| exec(&commands)),
            ..Default::default()
        };
        if creator == Creator::RayService && node == NodeType::Worker {
            let serve_port = ray
                .ports
                .iter()
                .flatten()
                .find(|p| p.name.as_deref() == Some(c::SERVING_PORT_NAME))
                .map(|p| p.container_port)
                .unwrap_or(c::DEFAULT_SERVING_PORT);
            // KubeRay passes the readiness initial delay (10) as this wget timeout.
            commands.push(wget(
                10,
                serve_port,
                c::SERVE_PROXY_HEALTH_PATH.trim_start_matches('/'),
            ));
            probe.failure_threshold = Some(1);
            probe.http_get = None;
            probe.exec = Some(exec(&commands));
        }
        ray.readiness_probe = Some(probe);
    }
}

/// The KubeRay autoscaler sidecar, with `autoscalerOptions` overrides merged in.
pub(super) fn autoscaler_container(
    image: &str,
    opts: Option<&AutoscalerOptions>,
    login_shell: bool,
) -> Container {
    let fixed = BTreeMap::from([
        ("cpu".to_string(), Quantity("500m".into())),
        ("memory".to_string(), Quantity("512Mi".into())),
    ]);
    let mut container = Container {
        name: "autoscaler".into(),
        image: Some(image.into()),
        image_pull_policy: Some("IfNotPresent".into()),
        env: Some(vec![
            field(
                c::ENV_RAY_CLUSTER_NAME,
                &format!("metadata.labels['{}']", c::LABEL_CLUSTER),
            ),
            field(c::ENV_RAY_CLUSTER_NAMESPACE, "metadata.namespace"),
            field("RAY_HEAD_POD_NAME", "metadata.name"),
            value("KUBERAY_CRD_VER", "v1"),
            value("KUBERAY_GEN_AUTOSCALER_START_CMD", AUTOSCALER_START_CMD),
        ]),
        command: Some(shell_command(login_shell)),
        args: Some(vec![AUTOSCALER_START_CMD.into()]),
        resources: Some(ResourceRequirements {
            limits: Some(fixed.clone()),
            requests: Some(fixed),
            ..Default::default()
        }),
        ..Default::default()
    };
    let Some(o) = opts else { return container };
    if let Some(r) = &o.resources {
        container.resources = Some(r.clone());
    }
    if let Some(i) = &o.image {
        container.image = Some(i.clone());
    }
    if let Some(p) = &o.image_pull_policy {
        container.image_pull_policy = Some(p.clone());
    }
    if let Some(env) = o.env.as_ref().filter(|e| !e.is_empty()) {
        container
            .env
            .get_or_insert_with(Vec::new)
            .extend(env.iter().cloned());
    }
    if let Some(from) = o.env_from.as_ref().filter(|e| !e.is_empty()) {
        container
            .env_from
            .get_or_insert_with(Vec::new)
            .extend(from.iter().cloned());
    }
    if let Some(m) = o.volume_mounts.as_ref().filter(|e| !e.is_empty()) {
        container
            .volume_mounts
            .get_or_insert_with(Vec::new)
            .extend(m.iter().cloned());
    }
    if let Some(sc) = &o.security_context {
        container.security_context = Some(sc.clone());
    }
    if let Some(cmd) = o.command.as_ref().filter(|v| !v.is_empty()) {
        container.command = Some(cmd.clone());
    }
    if let Some(args) = o.args.as_ref().filter(|v| !v.is_empty()) {
        container.args = Some(args.clone());
    }
    container
}

fn parse_version(raw: &str) -> Option<(u64, u64, u64)> {
    let core = raw.trim().trim_start_matches('v').split(['-', '+']).next()?;
    let mut it = core.split('.').map(|p| p.parse::<u64>().ok());
    let major = it.next()??;
    let minor = it.next()??;
    let patch = match it.next() {
        Some(p) => p?,
        None => 0,
    };
    Some((major, minor, patch))
}
