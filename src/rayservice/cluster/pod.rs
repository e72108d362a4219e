//! Head and worker Pods from a RayCluster spec, following KubeRay's `DefaultHeadPodTemplate`,
//! `DefaultWorkerPodTemplate` and `BuildPod`.
//!
//! Not covered (KubeRay gates them behind alpha feature gates that are off by default): mTLS and the
//! history-server collector sidecar.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, ContainerPort, EmptyDirVolumeSource, Pod, PodTemplateSpec, ResourceRequirements, Volume,
    VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::pod_env::{autoscaler_container, set_container_env, set_init_container_env, set_probes};
use super::pod_features::{configure_gcs_ft, configure_token_auth};
use super::startcmd::{self, NodeType, shell_command};
use super::{BuildError, BuildOptions, Creator, labels, names};
use crate::api::ray::constants as c;
use crate::api::ray::raycluster::AutoscalerVersion;
use crate::api::ray::{RayCluster, WorkerGroupSpec};

const SHM_VOLUME: &str = "shared-mem";
const SHM_PATH: &str = "/dev/shm";
const LOG_VOLUME: &str = "ray-logs";
const LOG_PATH: &str = "/tmp/ray";
const AUTOSCALER_CONTAINER: &str = "autoscaler";

/// Where a worker Pod sits in a (possibly multi-host) group; KubeRay stamps these as labels.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkerSlot {
    /// Ordered replica index within the group.
    pub replica_index: usize,
    /// Host index within a multi-host replica (0 for single-host groups).
    pub host_index: usize,
    /// `<group>-<random>` shared by the hosts of one multi-host replica; the caller picks the suffix.
    pub replica_name: String,
}

/// The head Pod (with `generateName`, or a fixed name when deterministic names are on).
pub fn build_head_pod(cluster: &RayCluster, opts: &BuildOptions) -> Result<Pod, BuildError> {
    let name = cluster.metadata.name.clone().unwrap_or_default();
    let spec = &cluster.spec;
    let head = &spec.head_group_spec;
    let mut template = head.template.clone();
    let meta = template.metadata.get_or_insert_with(ObjectMeta::default);
    let pod_name = names::head_pod_name(&name, opts.deterministic_head_name);
    if opts.deterministic_head_name {
        meta.name = Some(pod_name);
    } else {
        meta.generate_name = Some(pod_name);
    }
    meta.namespace = cluster.metadata.namespace.clone();

    let mut params = head.ray_start_params.clone().unwrap_or_default();
    startcmd::apply_group_resources(&mut params, head.resources.as_ref());
    startcmd::apply_group_labels(&mut params, head.labels.as_ref());
    let merged = labels::merge(
        head.template.metadata.as_ref().and_then(|m| m.labels.as_ref()),
        head.labels.as_ref(),
    );
    meta.labels = Some(labels::pod_labels(
        c::NODE_TYPE_HEAD,
        &name,
        c::HEAD_GROUP_NAME,
        &merged,
    ));
    let head_port = startcmd::head_port(head.ray_start_params.as_ref());
    startcmd::fill_missing(&mut params, NodeType::Head, &head_port, "");
    mark_overwrite_cmd(cluster, meta);

    let pod_spec = template.spec.get_or_insert_with(Default::default);
    if pod_spec.containers.is_empty() {
        return Err(BuildError::NoContainer(format!("{name} head group")));
    }
    let autoscaling = spec.autoscaling_enabled();
    if autoscaling {
        // The in-tree monitor does not work on Kubernetes; the KubeRay autoscaler sidecar replaces it.
        params.insert("no-monitor".into(), "true".into());
        let sa = pod_spec
            .service_account_name
            .clone()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| name.clone());
        pod_spec.service_account_name = Some(names::check_name(&sa));
        let image = pod_spec.containers[0].image.clone().unwrap_or_default();
        pod_spec.containers.push(autoscaler_container(
            &image,
            spec.autoscaler_options.as_ref(),
            opts.login_shell,
        ));
        match spec.autoscaler_options.as_ref().and_then(|o| o.version) {
            Some(AutoscalerVersion::V2) => {
                push_env(
                    &mut pod_spec.containers[0],
                    c::ENV_RAY_ENABLE_AUTOSCALER_V2,
                    "true",
                );
                pod_spec.restart_policy = Some("Never".into());
            }
            Some(AutoscalerVersion::V1) => push_env(
                &mut pod_spec.containers[0],
                c::ENV_RAY_ENABLE_AUTOSCALER_V2,
                "false",
            ),
            None => {}
        }
    }
    ensure_metrics_port(&mut pod_spec.containers[0]);
    add_features(cluster, NodeType::Head, &mut template, &mut params);

    let fqdn = names::head_fqdn(
        &name,
        cluster.metadata.namespace.as_deref().unwrap_or(""),
        spec,
        &opts.cluster_domain,
    );
    Ok(build_pod(
        template,
        NodeType::Head,
        &mut params,
        &head_port,
        autoscaling,
        Creator::of(cluster),
        &fqdn,
        spec.ray_version.as_deref(),
        opts,
    ))
}

/// One worker Pod of `group` (with `generateName`).
pub fn build_worker_pod(
    cluster: &RayCluster,
    group: &str,
    slot: &WorkerSlot,
    opts: &BuildOptions,
) -> Result<Pod, BuildError> {
    let name = cluster.metadata.name.clone().unwrap_or_default();
    let spec = &cluster.spec;
    let wg: &WorkerGroupSpec = spec
        .worker_groups()
        .iter()
        .find(|g| g.group_name == group)
        .ok_or_else(|| BuildError::NoSuchGroup(group.to_string()))?;
    let namespace = cluster.metadata.namespace.clone().unwrap_or_default();
    let fqdn = names::head_fqdn(&name, &namespace, spec, &opts.cluster_domain);
    let head_port = startcmd::head_port(spec.head_group_spec.ray_start_params.as_ref());

    let mut template: PodTemplateSpec = wg.template.clone();
    let pod_spec = template.spec.get_or_insert_with(Default::default);
    let Some(ray) = pod_spec.containers.first().cloned() else {
        return Err(BuildError::NoContainer(format!("{name} worker group {group}")));
    };
    if opts.inject_init_container {
        pod_spec
            .init_containers
            .get_or_insert_with(Vec::new)
            .push(wait_gcs_container(&ray, &fqdn, &head_port, opts.login_shell));
    }
    if spec.autoscaling_enabled()
        && spec.autoscaler_options.as_ref().and_then(|o| o.version) == Some(AutoscalerVersion::V2)
    {
        pod_spec.restart_policy = Some("Never".into());
    }
    ensure_metrics_port(&mut pod_spec.containers[0]);

    let meta = template.metadata.get_or_insert_with(ObjectMeta::default);
    // Several replicas share the template, so only generateName can be used.
    meta.name = None;
    meta.generate_name = Some(names::worker_pod_generate_name(&name, group));
    meta.namespace = Some(namespace);
    let mut params = wg.ray_start_params.clone().unwrap_or_default();
    startcmd::apply_group_resources(&mut params, wg.resources.as_ref());
    startcmd::apply_group_labels(&mut params, wg.labels.as_ref());
    let merged = labels::merge(
        wg.template.metadata.as_ref().and_then(|m| m.labels.as_ref()),
        wg.labels.as_ref(),
    );
    let mut pod_labels = labels::pod_labels(c::NODE_TYPE_WORKER, &name, group, &merged);
    if opts.multi_host_indexing {
        pod_labels.insert(
            c::LABEL_WORKER_REPLICA_INDEX.into(),
            slot.replica_index.to_string(),
        );
        if wg.num_of_hosts_or_default() > 1 {
            pod_labels.insert(c::LABEL_WORKER_REPLICA_NAME.into(), slot.replica_name.clone());
            pod_labels.insert(c::LABEL_REPLICA_HOST_INDEX.into(), slot.host_index.to_string());
        }
    }
    meta.labels = Some(pod_labels);
    startcmd::fill_missing(&mut params, NodeType::Worker, &head_port, &fqdn);
    mark_overwrite_cmd(cluster, meta);
    add_features(cluster, NodeType::Worker, &mut template, &mut params);

    Ok(build_pod(
        template,
        NodeType::Worker,
        &mut params,
        &head_port,
        spec.autoscaling_enabled(),
        Creator::of(cluster),
        &fqdn,
        spec.ray_version.as_deref(),
        opts,
    ))
}

/// KubeRay's `BuildPod`: serve label, shared memory and log volumes, the generated `ray start` command, env, probes.
#[allow(clippy::too_many_arguments)]
fn build_pod(
    template: PodTemplateSpec,
    node: NodeType,
    params: &mut BTreeMap<String, String>,
    head_port: &str,
    autoscaling: bool,
    creator: Creator,
    fqdn: &str,
    ray_version: Option<&str>,
    opts: &BuildOptions,
) -> Pod {
    let mut metadata = template.metadata.unwrap_or_default();
    if creator == Creator::RayService {
        // Workers serve as soon as their readiness probe (which includes the proxy) passes; the RayService
        // controller flips the head's label after checking its proxy.
        let serve = if node == NodeType::Head { "false" } else { "true" };
        metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(c::LABEL_SERVE.into(), serve.into());
    }
    let mut spec = template.spec.unwrap_or_default();

    if !params.contains_key("plasma-directory") {
        let size = memory_of(&spec.containers[0]);
        add_empty_dir(&mut spec, 0, SHM_VOLUME, SHM_PATH, Some("Memory"), size);
    }
    if node == NodeType::Head
        && autoscaling
        && let Some(i) = spec
            .containers
            .iter()
            .position(|c| c.name == AUTOSCALER_CONTAINER)
    {
        // The autoscaler writes event logs the head reads.
        add_empty_dir(&mut spec, 0, LOG_VOLUME, LOG_PATH, None, None);
        add_empty_dir(&mut spec, i, LOG_VOLUME, LOG_PATH, None, None);
    }

    let ray = &mut spec.containers[0];
    let mut user_cmd = String::new();
    for part in ray.command.iter().flatten().chain(ray.args.iter().flatten()) {
        user_cmd.push_str(&format!(" {part} "));
    }
    let ray_start = startcmd::ray_start_command(node, params, ray.resources.as_ref());
    let overwrite = metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(c::ANNOTATION_OVERWRITE_CONTAINER_CMD))
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    if !overwrite && !user_cmd.contains("ray start") {
        let generated = format!(
            "ulimit -n ${{{}:-65536}}; {ray_start}",
            c::ENV_RAY_START_ULIMIT_OPEN_FILES
        );
        ray.command = Some(shell_command(opts.login_shell));
        // `ray start --block` never returns, so the user's command must run first.
        ray.args = Some(vec![if user_cmd.is_empty() {
            generated
        } else {
            format!("{user_cmd} && {generated}")
        }]);
    }

    for init in spec.init_containers.iter_mut().flatten() {
        set_init_container_env(init, fqdn);
    }
    set_container_env(
        &mut spec.containers[0],
        node,
        fqdn,
        head_port,
        &ray_start,
        creator,
        &opts.kuberay_version,
    );
    if opts.inject_probes {
        set_probes(&mut spec.containers[0], node, creator, params, ray_version);
    }
    Pod {
        metadata,
        spec: Some(spec),
        status: None,
    }
}

/// GCS fault tolerance and token auth, which touch annotations, params, env and volumes together.
fn add_features(
    cluster: &RayCluster,
    node: NodeType,
    template: &mut PodTemplateSpec,
    params: &mut BTreeMap<String, String>,
) {
    let meta = template.metadata.get_or_insert_with(ObjectMeta::default);
    let annotations = meta.annotations.get_or_insert_with(BTreeMap::new);
    let spec = template.spec.get_or_insert_with(Default::default);
    configure_gcs_ft(cluster, node, annotations, params, spec);
    configure_token_auth(cluster, spec);
}

fn mark_overwrite_cmd(cluster: &RayCluster, meta: &mut ObjectMeta) {
    let annotations = meta.annotations.get_or_insert_with(BTreeMap::new);
    let set = cluster
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(c::ANNOTATION_OVERWRITE_CONTAINER_CMD));
    if set.is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        annotations.insert(c::ANNOTATION_OVERWRITE_CONTAINER_CMD.into(), "true".into());
    }
}

fn ensure_metrics_port(ray: &mut Container) {
    let ports = ray.ports.get_or_insert_with(Vec::new);
    if !ports
        .iter()
        .any(|p| p.name.as_deref() == Some(c::METRICS_PORT_NAME))
    {
        ports.push(ContainerPort {
            name: Some(c::METRICS_PORT_NAME.into()),
            container_port: c::DEFAULT_METRICS_PORT,
            ..Default::default()
        });
    }
}

fn push_env(container: &mut Container, name: &str, value: &str) {
    container
        .env
        .get_or_insert_with(Vec::new)
        .push(k8s_openapi::api::core::v1::EnvVar {
            name: name.into(),
            value: Some(value.into()),
            ..Default::default()
        });
}

/// Memory limit, else request: the size of the /dev/shm emptyDir.
fn memory_of(c: &Container) -> Option<Quantity> {
    let r = c.resources.as_ref()?;
    r.limits
        .as_ref()
        .and_then(|l| l.get("memory"))
        .or_else(|| r.requests.as_ref().and_then(|l| l.get("memory")))
        .cloned()
}

/// Mount an emptyDir at `path` in container `idx` unless something is already mounted there.
fn add_empty_dir(
    spec: &mut k8s_openapi::api::core::v1::PodSpec,
    idx: usize,
    volume: &str,
    path: &str,
    medium: Option<&str>,
    size: Option<Quantity>,
) {
    let Some(container) = spec.containers.get_mut(idx) else {
        return;
    };
    if container
        .volume_mounts
        .iter()
        .flatten()
        .any(|m| m.mount_path == path)
    {
        return;
    }
    container
        .volume_mounts
        .get_or_insert_with(Vec::new)
        .push(VolumeMount {
            name: volume.into(),
            mount_path: path.into(),
            ..Default::default()
        });
    let volumes = spec.volumes.get_or_insert_with(Vec::new);
    if !volumes.iter().any(|v| v.name == volume) {
        volumes.push(Volume {
            name: volume.into(),
            empty_dir: Some(EmptyDirVolumeSource {
                medium: medium.map(str::to_string),
                size_limit: size,
            }),
            ..Default::default()
        });
    }
}

/// Worker init container that waits until the head's GCS answers `ray health-check`.
fn wait_gcs_container(ray: &Container, fqdn: &str, port: &str, login: bool) -> Container {
    let script = format!(
        "\n\t\t\t\t\tSECONDS=0\n\t\t\t\t\twhile true; do\n\t\t\t\t\t\tif (( SECONDS <= 120 )); then\n\t\t\t\t\t\t\tif ray health-check --address {fqdn}:{port} > /dev/null 2>&1; then\n\t\t\t\t\t\t\t\techo \"GCS is ready.\"\n\t\t\t\t\t\t\t\tbreak\n\t\t\t\t\t\t\tfi\n\t\t\t\t\t\t\techo \"$SECONDS seconds elapsed: Waiting for GCS to be ready.\"\n\t\t\t\t\t\telse\n\t\t\t\t\t\t\tif ray health-check --address {fqdn}:{port}; then\n\t\t\t\t\t\t\t\techo \"GCS is ready. Any error messages above can be safely ignored.\"\n\t\t\t\t\t\t\t\tbreak\n\t\t\t\t\t\t\tfi\n\t\t\t\t\t\t\techo \"$SECONDS seconds elapsed: Still waiting for GCS to be ready. For troubleshooting, refer to the FAQ at https://docs.ray.io/en/master/cluster/kubernetes/troubleshooting.html.\"\n\t\t\t\t\t\tfi\n\t\t\t\t\t\tsleep 5\n\t\t\t\t\tdone\n\t\t\t\t"
    );
    // Fixed small resources: a namespace ResourceQuota needs them set, and copying GPU limits would not schedule.
    let fixed = BTreeMap::from([
        ("cpu".to_string(), Quantity("200m".into())),
        ("memory".to_string(), Quantity("256Mi".into())),
    ]);
    Container {
        name: "wait-gcs-ready".into(),
        image: ray.image.clone(),
        image_pull_policy: ray.image_pull_policy.clone(),
        command: Some(shell_command(login)),
        args: Some(vec![script]),
        security_context: ray.security_context.clone(),
        // TLS settings may live in env vars that reference mounted files.
        env: ray.env.clone(),
        volume_mounts: ray.volume_mounts.clone(),
        resources: Some(ResourceRequirements {
            limits: Some(fixed.clone()),
            requests: Some(fixed),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[cfg(test)]
#[path = "pod_tests.rs"]
mod tests;
