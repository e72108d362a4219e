//! `quotagate list pods --for TYPE[.GROUP]/NAME`: kueuectl's list pods
//! (kubernetes-sigs/kueue:cmd/kueuectl/app/list/list_pods.go): the pods of a job, found by the label
//! selector Kueue's integration for that kind uses (`PodLabelSelector`), printed as kubectl prints
//! pods (NAME, READY, STATUS, RESTARTS, AGE). Beyond kueuectl, `--for workload/NAME` lists the pods
//! of the Workload's owning job.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, ListParams};

use super::printed::Printed;
use super::{CliError, Output, Selectors, human_duration};
use crate::cli::plan::render::table;

/// The label selector of a job's pods, as Kueue's integration for `kind` (in `group`) builds it;
/// `None` for a kind Kueue has no pod selector for, or a Ray job with no cluster yet.
pub fn pod_selector(group: &str, kind: &str, obj: &DynamicObject) -> Option<String> {
    let name = obj.metadata.name.clone().unwrap_or_default();
    let status = |path: &[&str]| {
        let mut v = obj.data.get("status")?;
        for p in path {
            v = v.get(p)?;
        }
        v.as_str().filter(|s| !s.is_empty()).map(str::to_string)
    };
    match (group, kind) {
        ("batch", "Job") => Some(format!("batch.kubernetes.io/job-name={name}")),
        ("ray.io", "RayCluster") => Some(format!("ray.io/cluster={name}")),
        ("ray.io", "RayJob") => status(&["rayClusterName"]).map(|c| format!("ray.io/cluster={c}")),
        ("ray.io", "RayService") => {
            status(&["activeServiceStatus", "rayClusterName"]).map(|c| format!("ray.io/cluster={c}"))
        }
        ("jobset.x-k8s.io", "JobSet") => Some(format!("jobset.sigs.k8s.io/jobset-name={name}")),
        ("kubeflow.org", "PyTorchJob" | "TFJob" | "PaddleJob" | "XGBoostJob" | "JAXJob" | "MPIJob") => {
            Some(format!("training.kubeflow.org/job-name={name}"))
        }
        _ => None,
    }
}

/// kubectl's READY column: ready and running containers over all containers (sidecars included).
fn ready(pod: &Pod) -> String {
    let spec = pod.spec.as_ref();
    let sidecars = spec
        .and_then(|s| s.init_containers.as_ref())
        .into_iter()
        .flatten()
        .filter(|c| c.restart_policy.as_deref() == Some("Always"))
        .count();
    let total = spec.map_or(0, |s| s.containers.len()) + sidecars;
    let status = pod.status.as_ref();
    let statuses = status
        .and_then(|s| s.container_statuses.as_ref())
        .into_iter()
        .flatten();
    let init = status
        .and_then(|s| s.init_container_statuses.as_ref())
        .into_iter()
        .flatten();
    let n = statuses
        .chain(init)
        .filter(|c| c.ready && c.state.as_ref().is_some_and(|s| s.running.is_some()))
        .count();
    format!("{n}/{total}")
}

/// kubectl's STATUS column (printPod): the pod's reason or phase, overridden by an init container
/// still running or failed, then by a container waiting or terminated with a reason, then by
/// Terminating while it is being deleted.
fn status(pod: &Pod) -> String {
    let st = pod.status.clone().unwrap_or_default();
    let mut reason = st.reason.clone().or(st.phase.clone()).unwrap_or_default();
    let inits = st.init_container_statuses.clone().unwrap_or_default();
    let init_total = pod
        .spec
        .as_ref()
        .and_then(|s| s.init_containers.as_ref())
        .map_or(0, Vec::len);
    let mut initializing = false;
    for (i, c) in inits.iter().enumerate() {
        let state = c.state.clone().unwrap_or_default();
        if let Some(t) = &state.terminated
            && t.exit_code == 0
        {
            continue;
        }
        if state.running.is_some() && c.started == Some(true) {
            continue;
        }
        initializing = true;
        reason = if let Some(t) = &state.terminated {
            match &t.reason {
                Some(r) if !r.is_empty() => format!("Init:{r}"),
                _ if t.signal.unwrap_or(0) != 0 => format!("Init:Signal:{}", t.signal.unwrap_or(0)),
                _ => format!("Init:ExitCode:{}", t.exit_code),
            }
        } else if let Some(w) = state
            .waiting
            .as_ref()
            .and_then(|w| w.reason.clone())
            .filter(|r| !r.is_empty() && r != "PodInitializing")
        {
            format!("Init:{w}")
        } else {
            format!("Init:{i}/{init_total}")
        };
        break;
    }
    if !initializing {
        let mut running = false;
        for c in st.container_statuses.clone().unwrap_or_default().iter().rev() {
            let state = c.state.clone().unwrap_or_default();
            if let Some(w) = state
                .waiting
                .as_ref()
                .and_then(|w| w.reason.clone())
                .filter(|r| !r.is_empty())
            {
                reason = w;
            } else if let Some(t) = &state.terminated {
                reason = match &t.reason {
                    Some(r) if !r.is_empty() => r.clone(),
                    _ if t.signal.unwrap_or(0) != 0 => format!("Signal:{}", t.signal.unwrap_or(0)),
                    _ => format!("ExitCode:{}", t.exit_code),
                };
            } else if state.running.is_some() && c.ready {
                running = true;
            }
        }
        // A completed container next to running ones, in a ready pod, shows the pod as Running.
        if reason == "Completed" && running {
            let ready = st
                .conditions
                .iter()
                .flatten()
                .any(|c| c.type_ == "Ready" && c.status == "True");
            reason = if ready {
                "Running".into()
            } else {
                "NotReady".into()
            };
        }
    }
    if pod.metadata.deletion_timestamp.is_some() {
        reason = if st.reason.as_deref() == Some("NodeLost") {
            "Unknown".into()
        } else {
            "Terminating".into()
        };
    }
    reason
}

/// kubectl's RESTARTS column: the sum over containers, with how long ago the last one ended.
fn restarts(pod: &Pod, now: Timestamp) -> String {
    let st = pod.status.clone().unwrap_or_default();
    let all: Vec<_> = st
        .container_statuses
        .unwrap_or_default()
        .into_iter()
        .chain(st.init_container_statuses.unwrap_or_default())
        .collect();
    let n: i32 = all.iter().map(|c| c.restart_count).sum();
    let last = all
        .iter()
        .filter_map(|c| {
            c.last_state
                .as_ref()?
                .terminated
                .as_ref()?
                .finished_at
                .as_ref()
                .map(|t| t.0)
        })
        .max();
    match last {
        Some(t) if n > 0 => format!("{n} ({} ago)", human_duration(now.duration_since(t))),
        _ => n.to_string(),
    }
}

pub fn pod_rows(pods: &[Pod], all_namespaces: bool, now: Timestamp) -> Vec<Vec<String>> {
    let mut rows = vec![
        ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
            .map(String::from)
            .to_vec(),
    ];
    for p in pods {
        let age = p.metadata.creation_timestamp.as_ref().map_or_else(
            || "<unknown>".to_string(),
            |t| human_duration(now.duration_since(t.0)),
        );
        rows.push(vec![
            p.metadata.name.clone().unwrap_or_default(),
            ready(p),
            status(p),
            restarts(p, now),
            age,
        ]);
    }
    if all_namespaces {
        for (i, row) in rows.iter_mut().enumerate() {
            let ns = if i == 0 {
                "NAMESPACE".to_string()
            } else {
                pods[i - 1].metadata.namespace.clone().unwrap_or_default()
            };
            row.insert(0, ns);
        }
    }
    rows
}

fn not_found(all_namespaces: bool, ns: &str) -> String {
    if all_namespaces {
        "No resources found.\n".into()
    } else {
        format!("No resources found in {ns} namespace.\n")
    }
}

/// The object `--for` names, found through discovery as kubectl resolves `TYPE[.GROUP]/NAME`, with
/// its API group and kind; `None` when no such object exists.
async fn find(
    client: &kube::Client,
    ns: &str,
    spec: &str,
) -> Result<Option<(String, String, DynamicObject)>, CliError> {
    let bad = |m: &str| CliError::Flag {
        flag: "for",
        message: format!("{spec:?}: {m}"),
    };
    let (ty, name) = spec
        .split_once('/')
        .ok_or_else(|| bad("must be in the format TYPE[.API-GROUP]/NAME"))?;
    if name.is_empty() || name.contains('/') {
        return Err(bad("must be in the format TYPE[.API-GROUP]/NAME"));
    }
    let (resource, group) = ty.split_once('.').map_or((ty, None), |(r, g)| (r, Some(g)));
    let r = resource.to_ascii_lowercase();
    let discovery = kube::Discovery::new(client.clone()).run().await?;
    let found = discovery
        .groups()
        .filter(|g| group.is_none_or(|want| g.name() == want))
        .flat_map(|g| g.recommended_resources())
        .find(|(ar, _)| {
            ar.plural == r
                || ar.kind.to_ascii_lowercase() == r
                || (r.ends_with('s') && ar.kind.to_ascii_lowercase() == r[..r.len() - 1])
        });
    let Some((ar, caps)) = found else {
        return Err(bad(&format!("the server doesn't have a resource type {ty:?}")));
    };
    let api: Api<DynamicObject> = if caps.scope == kube::discovery::Scope::Namespaced {
        Api::namespaced_with(client.clone(), ns, &ar)
    } else {
        Api::all_with(client.clone(), &ar)
    };
    Ok(api
        .get_opt(name)
        .await?
        .map(|o| (ar.group.clone(), ar.kind.clone(), o)))
}

/// The selector of the pods `spec` names: a job's own, or for a Workload its owning job's.
async fn selector_for(client: &kube::Client, ns: &str, spec: &str) -> Result<Option<String>, CliError> {
    let Some((group, kind, obj)) = find(client, ns, spec).await? else {
        return Ok(None);
    };
    if (group.as_str(), kind.as_str()) == ("kueue.x-k8s.io", "Workload") {
        let owner = obj
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true))
            .or_else(|| obj.metadata.owner_references.iter().flatten().next());
        let Some(o) = owner else {
            return Err(CliError::Flag {
                flag: "for",
                message: format!("{spec:?}: the Workload has no owning job, so no pods of its own"),
            });
        };
        let group = o.api_version.rsplit_once('/').map_or("", |(g, _)| g);
        let owner_spec = if group.is_empty() {
            format!("{}/{}", o.kind.to_lowercase(), o.name)
        } else {
            format!("{}.{group}/{}", o.kind.to_lowercase(), o.name)
        };
        return Box::pin(selector_for(client, ns, &owner_spec)).await;
    }
    match pod_selector(&group, &kind, &obj) {
        Some(s) => Ok(Some(s)),
        None => Err(CliError::Flag {
            flag: "for",
            message: format!("unsupported kind: {kind}"),
        }),
    }
}

pub async fn run(
    client: &kube::Client,
    ns: &str,
    filter: &Selectors,
    all_namespaces: bool,
    for_object: &str,
) -> Result<Printed, CliError> {
    let Some(selector) = selector_for(client, ns, for_object).await? else {
        return Ok(Printed {
            stdout: String::new(),
            stderr: not_found(all_namespaces, ns),
        });
    };
    let labels = match &filter.selector {
        Some(l) if !l.is_empty() => format!("{l},{selector}"),
        _ => selector,
    };
    let mut lp = ListParams::default().labels(&labels);
    if let Some(f) = &filter.field_selector {
        lp = lp.fields(f);
    }
    let api: Api<Pod> = if all_namespaces {
        Api::all(client.clone())
    } else {
        Api::namespaced(client.clone(), ns)
    };
    let pods = api.list(&lp).await?.items;
    if pods.is_empty() {
        return Ok(Printed {
            stdout: String::new(),
            stderr: not_found(all_namespaces, ns),
        });
    }
    let list = || serde_json::json!({"apiVersion": "v1", "kind": "List", "metadata": {}, "items": pods});
    let stdout = match filter.output {
        None => table(&pod_rows(&pods, all_namespaces, Timestamp::now())),
        Some(Output::Name) => pods
            .iter()
            .map(|p| format!("pod/{}\n", p.metadata.name.as_deref().unwrap_or_default()))
            .collect(),
        Some(Output::Json) => serde_json::to_string_pretty(&list())
            .map(|s| s + "\n")
            .map_err(|e| CliError::Print(e.to_string()))?,
        Some(Output::Yaml) => serde_saphyr::to_string(&list()).map_err(|e| CliError::Print(e.to_string()))?,
    };
    Ok(Printed {
        stdout,
        stderr: String::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(v: serde_json::Value) -> Pod {
        let mut base = json!({"metadata": {"name": "p", "namespace": "ns", "creationTimestamp": "2026-01-01T00:00:00Z"}, "spec": {"containers": [{"name": "c"}]}});
        json_patch::merge(&mut base, &v);
        serde_json::from_value(base).unwrap()
    }

    fn running(ready: bool) -> serde_json::Value {
        json!({"name": "c", "ready": ready, "restartCount": 0, "image": "i", "imageID": "", "state": {"running": {"startedAt": "2026-01-01T00:00:01Z"}}})
    }

    // kueuectl's list_pods_test "list pods for valid batch/job type" and "for ray.io/raycluster
    // type": a running pod reads `1/1 Running 0`; the ages are kubectl's.
    #[test]
    fn pods_print_as_kubectl_prints_them() {
        let now: Timestamp = "2026-01-01T01:00:00Z".parse().unwrap();
        let ok = pod(json!({"status": {"phase": "Running", "containerStatuses": [running(true)]}}));
        let rows = pod_rows(&[ok], false, now);
        assert_eq!(
            table(&rows),
            "NAME   READY   STATUS    RESTARTS   AGE\np      1/1     Running   0          60m\n"
        );
        let crash = pod(
            json!({"status": {"phase": "Running", "containerStatuses": [{"name": "c", "ready": false, "restartCount": 3, "image": "i", "imageID": "",
            "state": {"waiting": {"reason": "CrashLoopBackOff"}}, "lastState": {"terminated": {"exitCode": 1, "finishedAt": "2026-01-01T00:58:00Z"}}}]}}),
        );
        assert_eq!(
            pod_rows(&[crash], false, now)[1],
            ["p", "0/1", "CrashLoopBackOff", "3 (2m ago)", "60m"]
        );
        let init = pod(
            json!({"spec": {"initContainers": [{"name": "i"}]}, "status": {"phase": "Pending", "initContainerStatuses": [{"name": "i", "ready": false, "restartCount": 0, "image": "i", "imageID": "", "state": {"waiting": {"reason": "PodInitializing"}}}]}}),
        );
        assert_eq!(
            pod_rows(&[init], true, now)[1][..4],
            ["ns", "p", "0/1", "Init:0/1"]
        );
        let going = pod(
            json!({"metadata": {"deletionTimestamp": "2026-01-01T00:59:00Z"}, "status": {"phase": "Running", "containerStatuses": [running(true)]}}),
        );
        assert_eq!(pod_rows(&[going], false, now)[1][2], "Terminating");
        let done = pod(
            json!({"status": {"phase": "Failed", "containerStatuses": [{"name": "c", "ready": false, "restartCount": 0, "image": "i", "imageID": "", "state": {"terminated": {"exitCode": 137, "signal": 9}}}]}}),
        );
        assert_eq!(pod_rows(&[done], false, now)[1][2], "Signal:9");
    }

    // Kueue's PodLabelSelector per integration (pkg/controller/jobs/{job,raycluster,rayjob,
    // rayservice}): a RayService's pods are its active cluster's, and without one there is none.
    #[test]
    fn selectors_are_kueues_per_integration() {
        let obj = |status: serde_json::Value| -> DynamicObject {
            serde_json::from_value(
                json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "j"}, "status": status}),
            )
            .unwrap()
        };
        assert_eq!(
            pod_selector("batch", "Job", &obj(json!({}))).as_deref(),
            Some("batch.kubernetes.io/job-name=j")
        );
        assert_eq!(
            pod_selector("ray.io", "RayCluster", &obj(json!({}))).as_deref(),
            Some("ray.io/cluster=j")
        );
        assert_eq!(
            pod_selector(
                "ray.io",
                "RayService",
                &obj(json!({"activeServiceStatus": {"rayClusterName": "j-abc"}}))
            )
            .as_deref(),
            Some("ray.io/cluster=j-abc")
        );
        assert_eq!(pod_selector("ray.io", "RayService", &obj(json!({}))), None);
        assert_eq!(
            pod_selector("ray.io", "RayJob", &obj(json!({"rayClusterName": "j-x"}))).as_deref(),
            Some("ray.io/cluster=j-x")
        );
        assert_eq!(pod_selector("apps", "Deployment", &obj(json!({}))), None);
    }
}
