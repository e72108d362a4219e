//! The validating and defaulting webhook: AdmissionReview in, AdmissionReview out, over TLS. The
//! decision is `api::on_write::admit`, the same function the embedded API server calls in-process.

use crate::embedded::listener::ListenerLimits;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::routing::post;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation as KubeOp};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::Value;
use thiserror::Error;

use crate::api::kueue::LocalQueue;
use crate::api::kueue::config::Frameworks;
use crate::api::kueue::constants::DEFAULT_LOCAL_QUEUE_NAME;
use crate::api::kueue::managed_jobs::{JobNamespace, ManagedJobs};
use crate::api::on_write::{Operation, admit_in};
use crate::api::ray::validation::RayFeatureGates;
use crate::api::validation::FieldError;
use k8s_openapi::api::core::v1::Namespace;
use kube::runtime::reflector::{ObjectRef, Store};

/// What the webhook judges by: the KubeRay feature gates (`--feature-gates`) and the job kinds managed
/// (`integrations.frameworks` of `--config`: a kind not managed is let through unchanged, as Kueue
/// registers no webhook for it).
#[derive(Clone, Debug, Default)]
pub struct Policy {
    pub gates: RayFeatureGates,
    pub frameworks: Frameworks,
    /// `manageJobsWithoutQueueName` and `managedJobsNamespaceSelector`.
    pub managed: ManagedJobs,
    /// Where a job's namespace is read from (Kueue's webhooks read the Namespace and the `default`
    /// LocalQueue); `None`: as if it had no labels and no `default` LocalQueue.
    pub namespaces: Option<NamespaceLookup>,
}

/// The manager's caches of Namespaces and LocalQueues, read by the webhook.
#[derive(Clone)]
pub struct NamespaceLookup {
    pub namespaces: Store<Namespace>,
    pub local_queues: Store<LocalQueue>,
}

impl std::fmt::Debug for NamespaceLookup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NamespaceLookup")
    }
}

impl NamespaceLookup {
    pub fn facts(&self, ns: &str) -> JobNamespace {
        let labels = self
            .namespaces
            .get(&ObjectRef::new(ns))
            .and_then(|n| n.metadata.labels.clone())
            .unwrap_or_default();
        let default_queue = self
            .local_queues
            .get(&ObjectRef::new(DEFAULT_LOCAL_QUEUE_NAME).within(ns))
            .is_some();
        JobNamespace {
            labels,
            default_queue,
        }
    }
}

#[derive(Debug, Error)]
pub enum WebhookError {
    #[error("cannot read TLS certificate {path}: {source}")]
    Cert {
        path: String,
        source: rustls_pki_types::pem::Error,
    },
    #[error("TLS configuration rejected: {0}")]
    Tls(#[from] rustls::Error),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// The message a real API server prints for an invalid object: `Kind "name" is invalid: [a, b]`.
pub fn invalid_message(kind: &str, name: &str, errors: &[FieldError]) -> String {
    let list: Vec<String> = errors.iter().map(ToString::to_string).collect();
    if list.len() == 1 {
        format!("{kind} {name:?} is invalid: {}", list[0])
    } else {
        format!("{kind} {name:?} is invalid: [{}]", list.join(", "))
    }
}

/// Decides one request. `mutate` allows a defaulting patch; a validating webhook must not return one.
pub fn review(req: &AdmissionRequest<DynamicObject>, mutate: bool) -> AdmissionResponse {
    review_for(req, mutate, Policy::default())
}

/// `review` under `policy`.
pub fn review_for(req: &AdmissionRequest<DynamicObject>, mutate: bool, policy: Policy) -> AdmissionResponse {
    let resp = AdmissionResponse::from(req);
    let op = match req.operation {
        KubeOp::Create => Operation::Create,
        KubeOp::Update => Operation::Update,
        KubeOp::Delete | KubeOp::Connect => return resp,
    };
    // Status writes carry no user intent we validate here (and the webhook is not registered for them).
    if req.sub_resource.is_some() {
        return resp;
    }
    let Some(obj) = req.object.as_ref() else {
        return resp.deny("the request carries no object");
    };
    let new = match serde_json::to_value(obj) {
        Ok(v) => v,
        Err(e) => return resp.deny(format!("cannot read the object: {e}")),
    };
    let old = req.old_object.as_ref().and_then(|o| serde_json::to_value(o).ok());
    let mut defaulted = new.clone();
    let ns = match (&policy.namespaces, req.namespace.as_deref()) {
        (Some(lookup), Some(ns)) => lookup.facts(ns),
        _ => JobNamespace::default(),
    };
    if let Err(errors) = admit_in(
        op,
        &mut defaulted,
        old.as_ref(),
        policy.gates,
        policy.frameworks,
        &policy.managed,
        &ns,
    ) {
        let name = obj
            .metadata
            .name
            .clone()
            .or_else(|| obj.metadata.generate_name.clone())
            .unwrap_or_default();
        return resp.deny(invalid_message(&req.kind.kind, &name, &errors));
    }
    if !mutate || defaulted == new {
        return resp;
    }
    let patch = json_patch::diff(&new, &defaulted);
    match resp.clone().with_patch(patch) {
        Ok(r) => r,
        Err(e) => resp.deny(format!("cannot encode the defaulting patch: {e}")),
    }
}

fn answer(body: Value, mutate: bool, policy: &Policy) -> Json<AdmissionReview<DynamicObject>> {
    let parsed: Result<AdmissionReview<DynamicObject>, _> = serde_json::from_value(body);
    let response = match parsed.map_err(|e| e.to_string()).and_then(|r| {
        let req: Result<AdmissionRequest<DynamicObject>, _> = r.try_into();
        req.map_err(|e| e.to_string())
    }) {
        Ok(req) => review_for(&req, mutate, policy.clone()),
        Err(e) => AdmissionResponse::invalid(format!("malformed AdmissionReview: {e}")),
    };
    Json(response.into_review())
}

/// One webhook a cluster registers (`config/webhook/manifests.yaml`), named and pathed as Kueue's
/// (`config/components/webhook/manifests.yaml`, controller-runtime's `/mutate-<group>-<version>-<kind>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hook {
    pub name: &'static str,
    pub mutating: bool,
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub resource: &'static str,
    pub operations: &'static [&'static str],
}

impl Hook {
    /// `/validate-kueue-x-k8s-io-v1beta2-clusterqueue`.
    pub fn path(&self) -> String {
        let verb = if self.mutating { "mutate" } else { "validate" };
        format!(
            "/{verb}-{}-{}-{}",
            self.group.replace('.', "-"),
            self.version,
            self.kind.to_lowercase()
        )
    }
}

const CREATE: &[&str] = &["CREATE"];
const CREATE_UPDATE: &[&str] = &["CREATE", "UPDATE"];

const fn hook(
    name: &'static str,
    mutating: bool,
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    resource: &'static str,
) -> Hook {
    Hook {
        name,
        mutating,
        group,
        version,
        kind,
        resource,
        operations: if mutating { CREATE } else { CREATE_UPDATE },
    }
}

/// Every kind quotagate defaults (the queue-managed Ray jobs and batch Jobs: created suspended) or
/// validates.
/// Kueue registers mutating hooks for ClusterQueue, ResourceFlavor and Workload too, to add its
/// finalizer and defaults; quotagate's manager adds the finalizer itself and the schema carries
/// the defaults, so those would change nothing. Status writes are not sent (`workloads/status` is
/// in Kueue's rule): the manager is their only writer.
pub const HOOKS: &[Hook] = &[
    hook(
        "mraycluster.kb.io",
        true,
        "ray.io",
        "v1",
        "RayCluster",
        "rayclusters",
    ),
    hook(
        "mrayservice.kb.io",
        true,
        "ray.io",
        "v1",
        "RayService",
        "rayservices",
    ),
    hook("mrayjob.kb.io", true, "ray.io", "v1", "RayJob", "rayjobs"),
    hook("mjob.kb.io", true, "batch", "v1", "Job", "jobs"),
    hook(POD_MUTATING, true, "", "v1", "Pod", "pods"),
    hook(
        "vadmissioncheck.kb.io",
        false,
        "kueue.x-k8s.io",
        "v1beta2",
        "AdmissionCheck",
        "admissionchecks",
    ),
    hook(
        "vclusterqueue.kb.io",
        false,
        "kueue.x-k8s.io",
        "v1beta2",
        "ClusterQueue",
        "clusterqueues",
    ),
    hook(
        "vcohort.kb.io",
        false,
        "kueue.x-k8s.io",
        "v1beta2",
        "Cohort",
        "cohorts",
    ),
    hook(
        "vlocalqueue.kb.io",
        false,
        "kueue.x-k8s.io",
        "v1beta2",
        "LocalQueue",
        "localqueues",
    ),
    hook(
        "vresourceflavor.kb.io",
        false,
        "kueue.x-k8s.io",
        "v1beta2",
        "ResourceFlavor",
        "resourceflavors",
    ),
    hook(
        "vworkload.kb.io",
        false,
        "kueue.x-k8s.io",
        "v1beta2",
        "Workload",
        "workloads",
    ),
    hook(
        "vworkloadpriorityclass.kb.io",
        false,
        "kueue.x-k8s.io",
        "v1beta2",
        "WorkloadPriorityClass",
        "workloadpriorityclasses",
    ),
    hook(
        "vraycluster.kb.io",
        false,
        "ray.io",
        "v1",
        "RayCluster",
        "rayclusters",
    ),
    hook(
        "vrayservice.kb.io",
        false,
        "ray.io",
        "v1",
        "RayService",
        "rayservices",
    ),
    hook("vrayjob.kb.io", false, "ray.io", "v1", "RayJob", "rayjobs"),
    hook(
        "vraycronjob.kb.io",
        false,
        "ray.io",
        "v1",
        "RayCronJob",
        "raycronjobs",
    ),
    hook("vjob.kb.io", false, "batch", "v1", "Job", "jobs"),
    hook(POD_VALIDATING, false, "", "v1", "Pod", "pods"),
];

/// Kueue's pod webhooks. A cluster registers them only when `integrations.frameworks` names `pod`
/// (Kueue's Helm chart does the same): every pod creation in the cluster passes through them.
pub const POD_MUTATING: &str = "mpod.kb.io";
pub const POD_VALIDATING: &str = "vpod.kb.io";

/// `/mutate` (defaulting, then validation), `/validate` (validation only), and each of [`HOOKS`]'
/// paths (every kind shares the one decision; the path says only whether to mutate).
pub fn router() -> Router {
    router_for(Policy::default())
}

/// `router` under `policy`.
pub fn router_for(policy: Policy) -> Router {
    let handler = move |mutate: bool| {
        let policy = policy.clone();
        post(move |Json(body): Json<Value>| {
            let policy = policy.clone();
            async move { answer(body, mutate, &policy) }
        })
    };
    HOOKS
        .iter()
        .fold(Router::new(), |r, h| r.route(&h.path(), handler(h.mutating)))
        .route("/mutate", handler(true))
        .route("/validate", handler(false))
}

/// Loads `tls.crt` and `tls.key` from a directory, as controller-runtime's webhook server does.
pub fn tls_config(cert_dir: &Path) -> Result<Arc<rustls::ServerConfig>, WebhookError> {
    let cert_path = cert_dir.join("tls.crt");
    let key_path = cert_dir.join("tls.key");
    let certs = CertificateDer::pem_file_iter(&cert_path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|source| WebhookError::Cert {
            path: cert_path.display().to_string(),
            source,
        })?;
    let key = PrivateKeyDer::from_pem_file(&key_path).map_err(|source| WebhookError::Cert {
        path: key_path.display().to_string(),
        source,
    })?;
    let config =
        rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(certs, key)?;
    Ok(Arc::new(config))
}

/// Serves the webhook over TLS until `shutdown` completes. Returns the bound address through `bound`.
pub async fn serve(
    addr: SocketAddr,
    tls: Arc<rustls::ServerConfig>,
    bound: tokio::sync::oneshot::Sender<SocketAddr>,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), WebhookError> {
    serve_with(addr, tls, Policy::default(), bound, shutdown, Router::new()).await
}

/// As [`serve`], under `policy`, with `extra` routes on the same
/// TLS port: the aggregated API groups (explain, visibility) an `APIService` sends the kube-apiserver's
/// requests to (it only speaks TLS).
pub async fn serve_with(
    addr: SocketAddr,
    tls: Arc<rustls::ServerConfig>,
    policy: Policy,
    bound: tokio::sync::oneshot::Sender<SocketAddr>,
    shutdown: impl std::future::Future<Output = ()>,
    extra: Router,
) -> Result<(), WebhookError> {
    let listener = crate::embedded::listener::bind(addr)
        .await
        .map_err(|source| WebhookError::Bind { addr, source })?;
    let _ = bound.send(listener.local_addr().unwrap_or(addr));
    let app = router_for(policy).merge(extra);
    // The embedded API server's listener: kube-apiserver's header, idle and handshake timeouts, a cap
    // on open connections, and a pause (not a spin) when accept fails. On a real cluster this is the
    // port the API server and anything in the cluster network reach.
    let cancel = tokio_util::sync::CancellationToken::new();
    let serving =
        crate::embedded::listener::serve_tls(listener, app, tls, ListenerLimits::default(), cancel.clone());
    tokio::pin!(serving);
    tokio::select! {
        _ = shutdown => {
            cancel.cancel();
            let _ = serving.await;
            Ok(())
        }
        served = &mut serving => served.map_err(|source| WebhookError::Bind { addr, source }),
    }
}

/// Where the webhook's certificate comes from.
#[derive(Clone, Debug)]
pub enum WebhookCerts {
    /// Loaded once (`--webhook-cert-dir`: cert-manager's mounted Secret).
    Static(Arc<rustls::ServerConfig>),
    /// Kept by the manager (`internalCertManagement`, `certs.rs`).
    Managed(super::certs::CertOptions),
}

/// The webhook a manager serves (`run`): where, and with which certificate.
#[derive(Clone, Debug)]
pub struct WebhookServing {
    pub addr: SocketAddr,
    pub certs: WebhookCerts,
}

/// Serves the webhook (with `extra` routes) until `cancel`, once its certificate is in place, and
/// marks `health` serving when it is bound. With managed certificates, also runs the certificate
/// loop (the leader writes, every replica loads).
pub fn spawn(
    client: kube::Client,
    w: WebhookServing,
    leader: tokio::sync::watch::Receiver<bool>,
    health: super::health::Health,
    policy: Policy,
    extra: Router,
    cancel: tokio_util::sync::CancellationToken,
) -> Vec<tokio::task::JoinHandle<()>> {
    health.require_webhook();
    let mut tasks = Vec::new();
    let (tls, resolver) = match w.certs {
        WebhookCerts::Static(tls) => (Ok(tls), None),
        WebhookCerts::Managed(opts) => {
            let resolver = Arc::new(super::certs::CertResolver::default());
            tasks.push(tokio::spawn(super::certs::run(
                client,
                opts,
                leader,
                resolver.clone(),
                cancel.clone(),
            )));
            (resolver.server_config(), Some(resolver))
        }
    };
    let (bound_tx, bound_rx) = tokio::sync::oneshot::channel();
    let c = cancel.clone();
    tasks.push(tokio::spawn(async move {
        let tls = match tls {
            Ok(t) => t,
            Err(e) => return tracing::error!(error = %e, "webhook TLS configuration rejected"),
        };
        if let Some(r) = &resolver {
            tokio::select! {
                _ = c.cancelled() => return,
                _ = r.loaded() => {}
            }
        }
        if let Err(e) = serve_with(w.addr, tls, policy, bound_tx, c.cancelled_owned(), extra).await {
            tracing::error!(error = %e, "webhook server stopped");
        }
    }));
    tasks.push(tokio::spawn(async move {
        if let Ok(addr) = bound_rx.await {
            tracing::info!(%addr, "webhook serving");
            health.set_webhook_serving(true);
        }
    }));
    tasks
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod_review() -> AdmissionRequest<DynamicObject> {
        let review: AdmissionReview<DynamicObject> = serde_json::from_value(json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "3f1c2b6e-0000-4000-8000-000000000002",
                "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "name": "p", "namespace": "default", "operation": "CREATE", "userInfo": {"username": "alice"},
                "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default",
                    "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
                    "spec": {"containers": [{"name": "c", "image": "busybox"}]}},
                "dryRun": false
            }
        }))
        .unwrap();
        review.try_into().unwrap()
    }

    /// The pod webhook (Kueue's `/mutate--v1-pod`) gates a queue-labelled Pod only where the
    /// configuration manages pods; elsewhere it lets the Pod through unchanged.
    #[test]
    fn the_pod_webhook_follows_the_configured_frameworks() {
        assert!(
            HOOKS
                .iter()
                .any(|h| h.name == POD_MUTATING && h.path() == "/mutate--v1-pod")
        );
        let req = pod_review();
        let off = review_for(&req, true, Policy::default());
        assert!(off.allowed && off.patch.is_none(), "{off:?}");
        let frameworks = Frameworks::from_names(["batch/job", "pod"]);
        let on = review_for(
            &req,
            true,
            Policy {
                frameworks,
                ..Policy::default()
            },
        );
        assert!(on.allowed, "{on:?}");
        let patch = String::from_utf8(on.patch.clone().unwrap_or_default()).unwrap();
        assert!(
            patch.contains("kueue.x-k8s.io/admission"),
            "the admission gate is added: {patch}"
        );
    }

    /// On a real cluster the webhook reads the job's Namespace and LocalQueues from the manager's
    /// caches, as Kueue's webhooks do: under manageJobsWithoutQueueName a Job naming no queue in a
    /// selected namespace is created suspended, and the `default` LocalQueue is named when it exists
    /// (Kueue: jobframework/defaults_test.go TestWorkloadShouldBeSuspended, job_webhook_test.go
    /// "LocalQueueDefaulting enabled, default lq is created, job doesn't have queue label").
    #[test]
    fn the_job_webhook_reads_the_namespace_from_the_caches() {
        use kube::runtime::{reflector, watcher};
        let job_review = |ns: &str| -> AdmissionRequest<DynamicObject> {
            let review: AdmissionReview<DynamicObject> = serde_json::from_value(json!({
                "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "request": {
                    "uid": "3f1c2b6e-0000-4000-8000-000000000003",
                    "kind": {"group": "batch", "version": "v1", "kind": "Job"},
                    "resource": {"group": "batch", "version": "v1", "resource": "jobs"},
                    "name": "j", "namespace": ns, "operation": "CREATE", "userInfo": {"username": "alice"},
                    "object": {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": ns},
                        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}},
                    "dryRun": false
                }
            }))
            .unwrap();
            review.try_into().unwrap()
        };
        let (namespaces, mut ns_writer) = reflector::store::<Namespace>();
        let (local_queues, mut lq_writer) = reflector::store::<LocalQueue>();
        for name in ["batch", "with-default"] {
            let ns: Namespace = serde_json::from_value(
                json!({"metadata": {"name": name, "labels": {"kueue-managed": "true"}}}),
            )
            .unwrap();
            ns_writer.apply_watcher_event(&watcher::Event::Apply(ns));
        }
        lq_writer.apply_watcher_event(&watcher::Event::Apply(
            LocalQueue::build("default", "with-default")
                .cluster_queue("cq")
                .build(),
        ));
        let selector = crate::api::kueue::managed_jobs::parse_selector(
            &json!({"matchLabels": {"kueue-managed": "true"}}),
        )
        .unwrap();
        let policy = Policy {
            managed: ManagedJobs {
                without_queue_name: true,
                namespace_selector: selector,
                ..ManagedJobs::default()
            },
            namespaces: Some(NamespaceLookup {
                namespaces,
                local_queues,
            }),
            ..Policy::default()
        };
        let patch = |ns: &str| {
            String::from_utf8(
                review_for(&job_review(ns), true, policy.clone())
                    .patch
                    .unwrap_or_default(),
            )
            .unwrap()
        };
        let selected = patch("batch");
        assert!(
            selected.contains("/spec/suspend") && !selected.contains("queue-name"),
            "selected: suspended, no queue named: {selected}"
        );
        assert_eq!(
            patch("elsewhere"),
            "",
            "not selected, no default queue: left alone"
        );
        let named = patch("with-default");
        assert!(
            named.contains("queue-name") && named.contains("\"default\"") && named.contains("/spec/suspend"),
            "{named}"
        );
        let off = review_for(&job_review("batch"), true, Policy::default());
        assert!(
            off.patch.is_none(),
            "without the switch a queue-less Job is not Kueue's"
        );
    }
}
