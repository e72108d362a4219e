//! `bench e2e --kubeconfig FILE`: the same run against any API server over HTTPS (a real control
//! plane, another `quotagate run --embedded`, a user's cluster). The runner installs the CRDs the server
//! lacks, starts the manager in this process against that server (admission only, as the embedded run
//! does) unless one already runs there (`--no-manager`), and drives and measures as on the embedded
//! server.
//!
//! On a shared server it keeps to its own: every Namespace, ClusterQueue, cohort and ResourceFlavor
//! it makes is named `qgb-<run>-…` and labelled [`RUN_LABEL`]`=<run>`, so a rerun never meets an
//! earlier run's objects, and at the end it deletes what carries its run's label, nothing else. CRDs
//! it installed stay (deleting a CRD deletes every object of its kind, a later run's or a user's).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::{Client, Resource, ResourceExt};

use super::config::Plan;
use super::runner::{Manager, Measured, counter, drive};
use crate::api::kueue::{ClusterQueue, ResourceFlavor};

/// The label on every object a run creates; its value is the run's id.
pub const RUN_LABEL: &str = "quotagate.io/bench-e2e-run";

/// How long the server may take to answer the first request.
const PROBE: Duration = Duration::from_secs(15);
/// How long installed CRDs may take to be Established.
const ESTABLISHED: Duration = Duration::from_secs(60);

/// Who admits during the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admitter {
    /// The manager `quotagate run` runs, started in this process against the server.
    InProcess,
    /// A quotagate (or Kueue) already running against the server; the runner only drives and measures.
    AlreadyRunning,
}

/// Runs `plan` against the server `kubeconfig` names and deletes what it created.
pub async fn run(
    plan: &Plan,
    kubeconfig: &Path,
    admitter: Admitter,
    progress: bool,
) -> Result<Measured, String> {
    if plan.tas.is_some() {
        return Err(
            "--kubeconfig: a TAS config creates Nodes, which a shared server's node lifecycle \
                    controller taints and evicts from; TAS configs run on the embedded server only"
                .into(),
        );
    }
    let by = Arc::new(Mutex::new(BTreeMap::new()));
    let (client, url) = connect(kubeconfig, by.clone()).await?;
    let installed = ensure_crds(&client).await?;
    if !installed.is_empty() {
        eprintln!(
            "bench e2e: installed {} CRD(s) on {url} (left in place): {}",
            installed.len(),
            installed.join(", ")
        );
    }
    let id = format!("{:06x}", rand::random::<u32>() & 0xff_ffff);
    let plan = own_names(plan, &id);
    let manager = (admitter == Admitter::InProcess).then(|| Manager::start(&client));
    let measured = drive(&client, &plan, &by, manager.as_ref(), progress).await;
    // Before the manager stops: a ClusterQueue's deletion may wait on its finalizer.
    let left = clean_up(&client, &plan, &id).await;
    if let Some(m) = manager {
        m.stop().await;
    }
    match left {
        Ok(()) => {}
        Err(what) => eprintln!(
            "bench e2e: {what} still there; they carry {RUN_LABEL}={id} \
             (kubectl delete namespaces,clusterqueues,resourceflavors -l {RUN_LABEL}={id})"
        ),
    }
    let mut m = measured?;
    m.ground = url;
    m.process = match admitter {
        Admitter::InProcess => "controllers + runner; the API server is elsewhere".into(),
        Admitter::AlreadyRunning => "runner only; the API server and controllers are elsewhere".into(),
    };
    Ok(m)
}

/// A client of the server `kubeconfig` names, counting its requests in `by`, once that server has
/// answered; its URL.
async fn connect(
    kubeconfig: &Path,
    by: Arc<Mutex<BTreeMap<String, u64>>>,
) -> Result<(Client, String), String> {
    let at = |e: &dyn std::fmt::Display| format!("--kubeconfig {}: {e}", kubeconfig.display());
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).map_err(|e| at(&e))?;
    let mut config = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .map_err(|e| at(&e))?;
    config.connect_timeout = Some(PROBE);
    let url = config.cluster_url.to_string();
    let client = kube::client::ClientBuilder::try_from(config)
        .map_err(|e| at(&e))?
        .with_layer(&tower::util::MapRequestLayer::new(crate::cli::with_field_manager))
        .with_layer(&tower::util::MapRequestLayer::new(counter(by)))
        .build();
    match tokio::time::timeout(PROBE, client.apiserver_version()).await {
        Ok(Ok(_)) => Ok((client, url)),
        Ok(Err(e)) => Err(format!(
            "the API server at {url} (--kubeconfig {}): {e}",
            kubeconfig.display()
        )),
        Err(_) => Err(format!(
            "the API server at {url} (--kubeconfig {}) did not answer within {} s",
            kubeconfig.display(),
            PROBE.as_secs()
        )),
    }
}

/// Creates (server-side apply, as `kubectl apply --server-side -f <(quotagate crds)`) each quotagate
/// CRD the server lacks and waits until they are Established; those present are used as they are (a
/// Kueue install's own, an earlier quotagate's). The names it installed.
async fn ensure_crds(client: &Client) -> Result<Vec<String>, String> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut installed = Vec::new();
    for crd in crate::api::all_crds() {
        let name = crd.name_any();
        match api.get_opt(&name).await {
            Ok(Some(_)) => continue,
            Ok(None) => {}
            Err(e) => return Err(format!("reading CRD {name}: {e}")),
        }
        let body = crate::api::crd_markers::to_value(&crd).map_err(|e| format!("CRD {name}: {e}"))?;
        api.patch(
            &name,
            &PatchParams::apply(crate::cli::FIELD_MANAGER),
            &Patch::Apply(&body),
        )
        .await
        .map_err(|e| format!("installing CRD {name}: {e}"))?;
        installed.push(name);
    }
    let deadline = tokio::time::Instant::now() + ESTABLISHED;
    for name in &installed {
        loop {
            let crd = api
                .get(name)
                .await
                .map_err(|e| format!("reading CRD {name}: {e}"))?;
            let established = crd
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| {
                    c.iter()
                        .any(|c| c.type_ == "Established" && c.status == crate::api::conditions::TRUE)
                });
            if established {
                break;
            }
            if tokio::time::Instant::now() > deadline {
                return Err(format!(
                    "CRD {name} not Established within {} s",
                    ESTABLISHED.as_secs()
                ));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    Ok(installed)
}

/// `plan` with every cluster-scoped name and Namespace its run's own (`qgb-<id>-…`) and [`RUN_LABEL`]
/// on everything it creates. Cohorts are renamed too: a ClusterQueue of the run must not borrow from,
/// nor lend to, a cohort of the server's.
pub fn own_names(plan: &Plan, id: &str) -> Plan {
    let prefix = format!("qgb-{id}-");
    let mut p = plan.clone();
    p.flavor = format!("{prefix}{}", p.flavor);
    for q in &mut p.queues {
        q.name = format!("{prefix}{}", q.name);
        q.cohort = format!("{prefix}{}", q.cohort);
    }
    p.labels.insert(RUN_LABEL.to_string(), id.to_string());
    p
}

/// Deletes the run's Namespaces (with their LocalQueues and Workloads), ClusterQueues and
/// ResourceFlavor, each only if it carries the run's label (its uid a precondition of the delete), and
/// waits until they are gone; what is left, named, when they are not gone in time.
async fn clean_up(client: &Client, plan: &Plan, id: &str) -> Result<(), String> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let cqs: Api<ClusterQueue> = Api::all(client.clone());
    let flavors: Api<ResourceFlavor> = Api::all(client.clone());
    let names: Vec<String> = plan.queues.iter().map(|q| q.name.clone()).collect();
    futures::stream::iter(names.iter())
        .for_each_concurrent(16, |n| async {
            delete_own(&namespaces, n, id).await;
            delete_own(&cqs, n, id).await;
        })
        .await;
    delete_own(&flavors, &plan.flavor, id).await;
    // A namespace's deletion deletes its Workloads one by one: allow for the run's count.
    let wait = Duration::from_secs(60) + Duration::from_millis(10 * plan.workloads);
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let mut left = Vec::new();
        let ns = still_there(&namespaces, &names).await;
        let cq = still_there(&cqs, &names).await;
        let rf = still_there(&flavors, std::slice::from_ref(&plan.flavor)).await;
        for (n, kind) in [
            (ns, "Namespace(s)"),
            (cq, "ClusterQueue(s)"),
            (rf, "ResourceFlavor"),
        ] {
            if n > 0 {
                left.push(format!("{n} {kind}"));
            }
        }
        if left.is_empty() {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            return Err(format!(
                "{} s after the run's end, {}",
                wait.as_secs(),
                left.join(", ")
            ));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Deletes `name` if it carries `RUN_LABEL=id`, with its uid as the precondition (never an object of
/// the same name made since).
async fn delete_own<K>(api: &Api<K>, name: &str, id: &str)
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let Ok(Some(o)) = api.get_opt(name).await else {
        return;
    };
    if o.labels().get(RUN_LABEL).map(String::as_str) != Some(id) {
        return;
    }
    let dp = DeleteParams {
        preconditions: Some(Preconditions {
            uid: o.uid(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    if let Err(e) = api.delete(name, &dp).await {
        tracing::debug!(object = %name, error = %e, "bench clean-up: delete failed");
    }
}

/// How many of `names` still exist (an unanswered read counts as there).
async fn still_there<K>(api: &Api<K>, names: &[String]) -> usize
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    futures::stream::iter(names)
        .map(|n| async move { !matches!(api.get_opt(n).await, Ok(None)) })
        .buffer_unordered(16)
        .filter(|there| futures::future::ready(*there))
        .count()
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The run's names never meet the server's: every queue, Namespace, cohort and the flavor carry the
    /// run's prefix, and the label names the run.
    #[test]
    fn a_run_names_and_labels_its_own_objects() {
        let (generator, _) = super::super::config::builtin("ci").unwrap();
        let plan = super::super::config::Generator::parse(generator)
            .unwrap()
            .plan(1.0)
            .unwrap();
        let own = own_names(&plan, "abc123");
        assert_eq!(own.queues.len(), plan.queues.len());
        for (a, b) in plan.queues.iter().zip(&own.queues) {
            assert_eq!(b.name, format!("qgb-abc123-{}", a.name));
            assert_eq!(b.cohort, format!("qgb-abc123-{}", a.cohort));
            assert_eq!(b.class, a.class, "classes are reported as the config names them");
        }
        assert_eq!(own.flavor, format!("qgb-abc123-{}", plan.flavor));
        assert_eq!(own.labels.get(RUN_LABEL).map(String::as_str), Some("abc123"));
        assert!(
            own.queues.iter().all(|q| q.name.len() <= 63),
            "Namespace names are DNS labels"
        );
    }
}
