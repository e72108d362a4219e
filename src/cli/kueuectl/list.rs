//! `quotagate list clusterqueue|localqueue|workload|resourceflavor`: kueuectl's list tables
//! (kubernetes-sigs/kueue:cmd/kueuectl/app/list/list_*_printer.go), same columns and filters;
//! `list pods` is in `pods.rs`.

use std::collections::{BTreeSet, HashMap};

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ListParams};
use serde::Serialize;

use super::printed::Printed;
use super::{CliError, ListCmd, Output, Selectors, human_duration};
use crate::api::kueue::constants::condition;
use crate::api::kueue::{ClusterQueue, LocalQueue, ResourceFlavor, Workload};
use crate::cli::plan::render::table;
use crate::wiring::visibility::pending;

/// Kueue's `workload.Status`: the first that holds of finished, admitted, quota reserved, pending.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkloadStatus {
    Pending,
    QuotaReserved,
    Admitted,
    Finished,
}

impl WorkloadStatus {
    pub fn of(wl: &Workload) -> Self {
        if wl.is_finished() {
            WorkloadStatus::Finished
        } else if wl.is_admitted() {
            WorkloadStatus::Admitted
        } else if wl.has_quota_reservation() {
            WorkloadStatus::QuotaReserved
        } else {
            WorkloadStatus::Pending
        }
    }

    fn column(self) -> &'static str {
        match self {
            WorkloadStatus::Pending => "PENDING",
            WorkloadStatus::QuotaReserved => "QUOTARESERVED",
            WorkloadStatus::Admitted => "ADMITTED",
            WorkloadStatus::Finished => "FINISHED",
        }
    }
}

/// `--status` values, as kueuectl parses them (case-insensitive; `all` or none means no filter).
pub fn parse_statuses(values: &[String]) -> Result<Option<BTreeSet<u8>>, CliError> {
    let mut set = BTreeSet::new();
    for v in values {
        match v.to_ascii_lowercase().as_str() {
            "all" => return Ok(None),
            "pending" => set.insert(WorkloadStatus::Pending as u8),
            "quotareserved" => set.insert(WorkloadStatus::QuotaReserved as u8),
            "admitted" => set.insert(WorkloadStatus::Admitted as u8),
            "finished" => set.insert(WorkloadStatus::Finished as u8),
            _ => {
                return Err(CliError::Flag {
                    flag: "status",
                    message: format!(
                        "{v:?}: must be \"all\", \"pending\", \"quotareserved\", \"admitted\" or \"finished\""
                    ),
                });
            }
        };
    }
    Ok(if set.is_empty() { None } else { Some(set) })
}

fn age(meta: &ObjectMeta, now: Timestamp) -> String {
    meta.creation_timestamp
        .as_ref()
        .map(|t| human_duration(now.duration_since(t.0)))
        .unwrap_or_else(|| "<unknown>".into())
}

fn name(meta: &ObjectMeta) -> String {
    meta.name.clone().unwrap_or_default()
}

/// Prepends NAMESPACE to every row (kubectl's `WithNamespace`, for `-A`).
fn with_namespace(mut rows: Vec<Vec<String>>, metas: &[&ObjectMeta]) -> Vec<Vec<String>> {
    for (i, row) in rows.iter_mut().enumerate() {
        let ns = if i == 0 {
            "NAMESPACE".to_string()
        } else {
            metas
                .get(i - 1)
                .and_then(|m| m.namespace.clone())
                .unwrap_or_default()
        };
        row.insert(0, ns);
    }
    rows
}

fn header(cols: &[&str]) -> Vec<String> {
    cols.iter().map(|c| c.to_string()).collect()
}

pub fn cluster_queue_rows(cqs: &[ClusterQueue], now: Timestamp) -> Vec<Vec<String>> {
    let mut rows = vec![header(&[
        "NAME",
        "COHORT",
        "PENDING WORKLOADS",
        "ADMITTED WORKLOADS",
        "ACTIVE",
        "AGE",
    ])];
    for cq in cqs {
        let status = cq.status.clone().unwrap_or_default();
        rows.push(vec![
            name(&cq.metadata),
            cq.spec.cohort_name.clone().unwrap_or_default(),
            status.pending_workloads.to_string(),
            status.admitted_workloads.to_string(),
            cluster_queue_active(cq).to_string(),
            age(&cq.metadata, now),
        ]);
    }
    rows
}

fn cluster_queue_active(cq: &ClusterQueue) -> bool {
    cq.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == condition::ACTIVE && c.status == "True")
    })
}

pub fn local_queue_rows(lqs: &[LocalQueue], all_namespaces: bool, now: Timestamp) -> Vec<Vec<String>> {
    let mut rows = vec![header(&[
        "NAME",
        "CLUSTERQUEUE",
        "PENDING WORKLOADS",
        "ADMITTED WORKLOADS",
        "AGE",
    ])];
    for lq in lqs {
        let status = lq.status.clone().unwrap_or_default();
        rows.push(vec![
            name(&lq.metadata),
            lq.spec.cluster_queue.clone().unwrap_or_default(),
            status.pending_workloads.to_string(),
            status.admitted_workloads.to_string(),
            age(&lq.metadata, now),
        ]);
    }
    if all_namespaces {
        with_namespace(rows, &lqs.iter().map(|l| &l.metadata).collect::<Vec<_>>())
    } else {
        rows
    }
}

pub fn resource_flavor_rows(rfs: &[ResourceFlavor], now: Timestamp) -> Vec<Vec<String>> {
    let mut rows = vec![header(&["NAME", "NODE LABELS", "AGE"])];
    for rf in rfs {
        // A BTreeMap is already sorted, as kueuectl sorts the key=value pairs.
        let labels: Vec<String> = rf
            .spec
            .as_ref()
            .and_then(|s| s.node_labels.as_ref())
            .into_iter()
            .flatten()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        rows.push(vec![
            name(&rf.metadata),
            labels.join(", "),
            age(&rf.metadata, now),
        ]);
    }
    rows
}

/// kueuectl's JOB TYPE: `<singular>.<group>` of each owner, cut at 20 characters.
fn job_type(api_version: &str, kind: &str) -> String {
    let group = api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("");
    let t = if group.is_empty() {
        kind.to_lowercase()
    } else {
        format!("{}.{group}", kind.to_lowercase())
    };
    match t.char_indices().nth(20) {
        Some((i, _)) => format!("{}...", &t[..i]),
        None => t,
    }
}

/// The workload table. `lqs` gives the ClusterQueue of a workload with no admission and the
/// position of pending ones in their LocalQueue, computed as the visibility API computes it.
pub fn workload_rows(
    wls: &[Workload],
    lqs: &[LocalQueue],
    all_namespaces: bool,
    now: Timestamp,
) -> Vec<Vec<String>> {
    let lq_cq: HashMap<(String, String), String> = lqs
        .iter()
        .map(|l| {
            (
                (
                    l.metadata.namespace.clone().unwrap_or_default(),
                    name(&l.metadata),
                ),
                l.spec.cluster_queue.clone().unwrap_or_default(),
            )
        })
        .collect();
    let mut position: HashMap<(String, String), usize> = HashMap::new();
    let mut per_lq: HashMap<(String, String), usize> = HashMap::new();
    for p in pending(wls, lqs) {
        let ns = p.workload.metadata.namespace.clone().unwrap_or_default();
        let n = per_lq.entry((ns.clone(), p.local_queue.clone())).or_default();
        position.insert((ns, name(&p.workload.metadata)), *n);
        *n += 1;
    }
    let mut rows = vec![header(&[
        "NAME",
        "JOB TYPE",
        "JOB NAME",
        "LOCALQUEUE",
        "CLUSTERQUEUE",
        "STATUS",
        "POSITION IN QUEUE",
        "EXEC TIME",
        "AGE",
    ])];
    for wl in wls {
        let ns = wl.metadata.namespace.clone().unwrap_or_default();
        let lq = wl.spec.queue_name().to_string();
        let cq = wl
            .admission()
            .map(|a| a.cluster_queue.clone())
            .or_else(|| lq_cq.get(&(ns.clone(), lq.clone())).cloned())
            .unwrap_or_default();
        let owners = wl.metadata.owner_references.as_deref().unwrap_or_default();
        let types: BTreeSet<String> = owners.iter().map(|o| job_type(&o.api_version, &o.kind)).collect();
        let names: BTreeSet<&str> = owners.iter().map(|o| o.name.as_str()).collect();
        let pos = position
            .get(&(ns, name(&wl.metadata)))
            .map(|p| p.to_string())
            .unwrap_or_default();
        let status = wl.status.as_ref();
        let exec = status
            .and_then(|s| s.condition(condition::ADMITTED))
            .filter(|c| c.status == "True")
            .map(|admitted| {
                let end = status
                    .and_then(|s| s.condition(condition::FINISHED))
                    .filter(|c| c.status == "True")
                    .map_or(now, |f| f.last_transition_time.0);
                human_duration(end.duration_since(admitted.last_transition_time.0))
            })
            .unwrap_or_default();
        rows.push(vec![
            name(&wl.metadata),
            types.into_iter().collect::<Vec<_>>().join(", "),
            names.into_iter().collect::<Vec<_>>().join(", "),
            lq,
            cq,
            WorkloadStatus::of(wl).column().to_string(),
            pos,
            exec,
            age(&wl.metadata, now),
        ]);
    }
    if all_namespaces {
        with_namespace(rows, &wls.iter().map(|w| &w.metadata).collect::<Vec<_>>())
    } else {
        rows
    }
}

/// Filters of `list workload` that the API cannot apply (kueuectl filters them client-side too).
#[derive(Clone, Debug, Default)]
pub struct WorkloadFilter {
    pub cluster_queue: Option<String>,
    pub local_queue: Option<String>,
    pub statuses: Option<BTreeSet<u8>>,
    /// UID of the `--for` object.
    pub owner_uid: Option<String>,
}

impl WorkloadFilter {
    pub fn keeps(&self, wl: &Workload) -> bool {
        self.local_queue
            .as_ref()
            .is_none_or(|q| wl.spec.queue_name() == q)
            && self
                .cluster_queue
                .as_ref()
                .is_none_or(|c| wl.admission().is_some_and(|a| &a.cluster_queue == c))
            && self
                .statuses
                .as_ref()
                .is_none_or(|s| s.contains(&(WorkloadStatus::of(wl) as u8)))
            && self.owner_uid.as_ref().is_none_or(|uid| {
                wl.metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|o| &o.uid == uid)
            })
    }
}

fn list_params(f: &Selectors) -> ListParams {
    let mut lp = ListParams::default();
    if let Some(l) = &f.selector {
        lp = lp.labels(l);
    }
    if let Some(fs) = &f.field_selector {
        lp = lp.fields(fs);
    }
    lp
}

fn print_list<K: Serialize>(
    items: &[K],
    kind: &str,
    resource: &str,
    output: Output,
) -> Result<String, CliError> {
    let list = serde_json::json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": format!("{kind}List"), "metadata": {}, "items": items});
    match output {
        Output::Json => serde_json::to_string_pretty(&list)
            .map(|s| s + "\n")
            .map_err(|e| CliError::Print(e.to_string())),
        Output::Yaml => serde_saphyr::to_string(&list).map_err(|e| CliError::Print(e.to_string())),
        Output::Name => Ok(list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|i| {
                format!(
                    "{resource}.kueue.x-k8s.io/{}\n",
                    i["metadata"]["name"].as_str().unwrap_or_default()
                )
            })
            .collect()),
    }
}

fn printed<K: Serialize>(
    items: &[K],
    rows: Vec<Vec<String>>,
    f: &Selectors,
    kind: &str,
    resource: &str,
    empty: String,
) -> Result<Printed, CliError> {
    if items.is_empty() {
        return Ok(Printed {
            stdout: String::new(),
            stderr: empty,
        });
    }
    let stdout = match f.output {
        Some(o) => print_list(items, kind, resource, o)?,
        None => table(&rows),
    };
    Ok(Printed {
        stdout,
        stderr: String::new(),
    })
}

fn not_found(all_namespaces: bool, ns: &str) -> String {
    if all_namespaces {
        "No resources found\n".into()
    } else {
        format!("No resources found in {ns} namespace.\n")
    }
}

/// Resolves `--for TYPE[.GROUP]/NAME` to the object's UID (kueuectl finds workloads by owner).
async fn owner_uid(client: &kube::Client, ns: &str, spec: &str) -> Result<Option<String>, CliError> {
    let bad = |m: &str| CliError::Flag {
        flag: "for",
        message: format!("{spec:?}: {m}"),
    };
    let (ty, obj) = spec
        .split_once('/')
        .ok_or_else(|| bad("must be in resource/name form"))?;
    if obj.contains('/') {
        return Err(bad(
            "arguments in resource/name form may not have more than one slash",
        ));
    }
    let (resource, group) = ty.split_once('.').map_or((ty, None), |(r, g)| (r, Some(g)));
    let discovery = kube::Discovery::new(client.clone()).run().await?;
    let found = discovery
        .groups()
        .filter(|g| group.is_none_or(|want| g.name() == want))
        .flat_map(|g| g.recommended_resources())
        .find(|(ar, _)| {
            let r = resource.to_ascii_lowercase();
            ar.plural == r || ar.kind.to_ascii_lowercase() == r
        });
    let Some((ar, caps)) = found else {
        return Err(bad(&format!("the server doesn't have a resource type {ty:?}")));
    };
    let api: Api<kube::api::DynamicObject> = if caps.scope == kube::discovery::Scope::Namespaced {
        Api::namespaced_with(client.clone(), ns, &ar)
    } else {
        Api::all_with(client.clone(), &ar)
    };
    Ok(api.get_opt(obj).await?.and_then(|o| o.metadata.uid))
}

pub async fn run(client: &kube::Client, ns: &str, cmd: &ListCmd) -> Result<Printed, CliError> {
    let now = Timestamp::now();
    match cmd {
        ListCmd::Clusterqueue { filter, active } => {
            let mut cqs = Api::<ClusterQueue>::all(client.clone())
                .list(&list_params(filter))
                .await?
                .items;
            if let Some(a) = active {
                cqs.retain(|cq| cluster_queue_active(cq) == *a);
            }
            let rows = cluster_queue_rows(&cqs, now);
            printed(
                &cqs,
                rows,
                filter,
                "ClusterQueue",
                "clusterqueue",
                "No resources found\n".into(),
            )
        }
        ListCmd::Localqueue {
            filter,
            all_namespaces,
            clusterqueue,
        } => {
            let api = if *all_namespaces {
                Api::<LocalQueue>::all(client.clone())
            } else {
                Api::namespaced(client.clone(), ns)
            };
            let mut lqs = api.list(&list_params(filter)).await?.items;
            if let Some(cq) = clusterqueue {
                lqs.retain(|l| l.spec.cluster_queue.as_ref() == Some(cq));
            }
            let rows = local_queue_rows(&lqs, *all_namespaces, now);
            printed(
                &lqs,
                rows,
                filter,
                "LocalQueue",
                "localqueue",
                not_found(*all_namespaces, ns),
            )
        }
        ListCmd::Workload {
            filter,
            all_namespaces,
            clusterqueue,
            localqueue,
            status,
            for_object,
        } => {
            let statuses = super::list::parse_statuses(status)?;
            let owner = match for_object {
                Some(spec) => match owner_uid(client, ns, spec).await? {
                    Some(uid) => Some(uid),
                    None => {
                        return Ok(Printed {
                            stdout: String::new(),
                            stderr: not_found(*all_namespaces, ns),
                        });
                    }
                },
                None => None,
            };
            let f = WorkloadFilter {
                cluster_queue: clusterqueue.clone(),
                local_queue: localqueue.clone(),
                statuses,
                owner_uid: owner,
            };
            let api = if *all_namespaces {
                Api::<Workload>::all(client.clone())
            } else {
                Api::namespaced(client.clone(), ns)
            };
            let mut wls = api.list(&list_params(filter)).await?.items;
            wls.retain(|w| f.keeps(w));
            // Every LocalQueue: positions are counted over the whole queue, not only what is shown.
            let lqs = Api::<LocalQueue>::all(client.clone())
                .list(&ListParams::default())
                .await?
                .items;
            let all = if *all_namespaces {
                wls.clone()
            } else {
                Api::<Workload>::namespaced(client.clone(), ns)
                    .list(&ListParams::default())
                    .await?
                    .items
            };
            let mut rows = workload_rows(&all, &lqs, *all_namespaces, now);
            // Keep the header and the rows of the workloads that passed the filters.
            let shown: BTreeSet<(String, String)> = wls
                .iter()
                .map(|w| {
                    (
                        w.metadata.namespace.clone().unwrap_or_default(),
                        name(&w.metadata),
                    )
                })
                .collect();
            let mut keep = vec![true];
            keep.extend(all.iter().map(|w| {
                shown.contains(&(
                    w.metadata.namespace.clone().unwrap_or_default(),
                    name(&w.metadata),
                ))
            }));
            let mut k = keep.into_iter();
            rows.retain(|_| k.next().unwrap_or(false));
            printed(
                &wls,
                rows,
                filter,
                "Workload",
                "workload",
                not_found(*all_namespaces, ns),
            )
        }
        ListCmd::Resourceflavor { filter } => {
            let rfs = Api::<ResourceFlavor>::all(client.clone())
                .list(&list_params(filter))
                .await?
                .items;
            let rows = resource_flavor_rows(&rfs, now);
            printed(
                &rfs,
                rows,
                filter,
                "ResourceFlavor",
                "resourceflavor",
                "No resources found\n".into(),
            )
        }
        ListCmd::Pods {
            filter,
            all_namespaces,
            for_object,
        } => super::pods::run(client, ns, filter, *all_namespaces, for_object).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn wl(name: &str, extra: serde_json::Value) -> Workload {
        let mut v = json!({"metadata": {"name": name, "namespace": "ns", "uid": name, "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": []}}}]}});
        json_patch::merge(&mut v, &extra);
        serde_json::from_value(v).unwrap()
    }

    fn cond(t: &str, at: &str) -> serde_json::Value {
        json!({"type": t, "status": "True", "reason": t, "message": "", "lastTransitionTime": at})
    }

    // Columns and cells of kueuectl's list_workload_printer_test: job type and name from the owner,
    // the ClusterQueue from the admission (else the LocalQueue), status upper-cased, position only for
    // pending ones, exec time from Admitted to Finished (or now).
    #[test]
    fn workload_rows_follow_kueuectl() {
        let lqs: Vec<LocalQueue> = vec![
            serde_json::from_value(
                json!({"metadata": {"name": "lq", "namespace": "ns"}, "spec": {"clusterQueue": "cq"}}),
            )
            .unwrap(),
        ];
        let running = wl(
            "running",
            json!({"metadata": {"ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "rc", "uid": "u1"}]},
            "status": {"admission": {"clusterQueue": "cq"}, "conditions": [cond("QuotaReserved", "2026-01-01T00:01:00Z"), cond("Admitted", "2026-01-01T00:01:00Z")]}}),
        );
        let done = wl(
            "done",
            json!({"status": {"admission": {"clusterQueue": "cq"}, "conditions": [cond("Admitted", "2026-01-01T00:00:10Z"), cond("Finished", "2026-01-01T00:00:40Z")]}}),
        );
        let waiting = wl("waiting", json!({}));
        let rows = workload_rows(&[running, done, waiting], &lqs, false, at("2026-01-01T00:05:00Z"));
        assert_eq!(
            rows[0].join("|"),
            "NAME|JOB TYPE|JOB NAME|LOCALQUEUE|CLUSTERQUEUE|STATUS|POSITION IN QUEUE|EXEC TIME|AGE"
        );
        assert_eq!(
            rows[1].join("|"),
            "running|raycluster.ray.io|rc|lq|cq|ADMITTED||4m|5m"
        );
        assert_eq!(rows[2].join("|"), "done|||lq|cq|FINISHED||30s|5m");
        assert_eq!(rows[3].join("|"), "waiting|||lq|cq|PENDING|0||5m");
    }

    #[test]
    fn long_job_types_are_cut_as_kueuectl_cuts_them() {
        assert_eq!(
            job_type("jobset.x-k8s.io/v1alpha2", "JobSet"),
            "jobset.jobset.x-k8s...."
        );
        assert_eq!(
            job_type("kubeflow.org/v1", "PyTorchJob"),
            "pytorchjob.kubeflow...."
        );
        assert_eq!(job_type("v1", "Pod"), "pod");
    }

    #[test]
    fn status_filter_is_kueuectls() {
        assert_eq!(parse_statuses(&[]).unwrap(), None);
        assert_eq!(parse_statuses(&["Pending".into(), "all".into()]).unwrap(), None);
        let s = parse_statuses(&["admitted".into()]).unwrap();
        let f = WorkloadFilter {
            statuses: s,
            ..Default::default()
        };
        assert!(!f.keeps(&wl("w", json!({}))));
        let e = parse_statuses(&["running".into()]).unwrap_err().to_string();
        assert!(e.contains("--status") && e.contains("running"), "{e}");
    }

    #[test]
    fn cluster_queue_and_flavor_tables() {
        let cq: ClusterQueue = serde_json::from_value(json!({"metadata": {"name": "cq", "creationTimestamp": "2026-01-01T00:00:00Z"}, "spec": {"cohortName": "co"},
            "status": {"pendingWorkloads": 2, "admittedWorkloads": 1, "conditions": [cond("Active", "2026-01-01T00:00:00Z")]}})).unwrap();
        let t = table(&cluster_queue_rows(&[cq], at("2026-01-01T00:00:30Z")));
        assert_eq!(
            t,
            "NAME   COHORT   PENDING WORKLOADS   ADMITTED WORKLOADS   ACTIVE   AGE\ncq     co       2                   1                    true     30s\n"
        );
        let rf: ResourceFlavor = serde_json::from_value(json!({"metadata": {"name": "rf", "creationTimestamp": "2026-01-01T00:00:00Z"}, "spec": {"nodeLabels": {"b": "2", "a": "1"}}})).unwrap();
        assert_eq!(
            resource_flavor_rows(&[rf], at("2026-01-01T00:00:30Z"))[1],
            ["rf", "a=1, b=2", "30s"]
        );
    }
}
