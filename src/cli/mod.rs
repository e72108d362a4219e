//! The `quotagate` command line: its clap types (`args`), the dispatch from a parsed command line to
//! a command (`dispatch`), and each command's body (`run`, `apiserver`, `demo`, `crds`, `validate`,
//! `plan`, `explain`, kueuectl's `list`, `stop`, `resume`, `create`, ...).

pub mod apiserver;
pub mod args;
pub mod chaos;
pub mod demo;
pub mod dispatch;
pub mod explain;
pub mod kueue_runner;
pub mod kueuectl;
pub mod load;
pub mod node_agent;
pub mod pending;
pub mod plan;
pub mod run;
pub mod validate;

use crate::api;

/// Every CRD quotagate serves, as one multi-document YAML stream (what `config/crd/` holds).
pub fn crds_yaml() -> Result<String, serde_saphyr::SerializeError> {
    let mut out = String::new();
    for crd in api::all_crds() {
        out.push_str("---\n");
        // Whole-number bounds as integers, as Kueue's CRDs print them.
        let text = match api::crd_markers::to_value(&crd) {
            Ok(v) => serde_saphyr::to_string(&v)?,
            Err(_) => serde_saphyr::to_string(&crd)?,
        };
        out.push_str(&text);
    }
    Ok(out)
}
pub mod bench;

/// The field manager of every write quotagate makes to a real API server: `metadata.managedFields` names
/// it (rather than `unknown`), so a GitOps tool's server-side apply can tell quotagate's fields from its own.
pub const FIELD_MANAGER: &str = "quotagate";

/// A client for `kubeconfig`, or the default one ($KUBECONFIG, ~/.kube/config, in-cluster), whose writes
/// carry [`FIELD_MANAGER`].
pub async fn kube_client(kubeconfig: Option<&std::path::Path>) -> Result<kube::Client, String> {
    let config = match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path).map_err(|e| e.to_string())?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(|e| e.to_string())?
        }
        None => kube::Config::infer().await.map_err(|e| e.to_string())?,
    };
    client_for(config).map_err(|e| e.to_string())
}

/// A client for `config` that names [`FIELD_MANAGER`] on every create, update and patch that names no
/// field manager of its own (a server-side apply names its own). One layer rather than a
/// `PostParams { field_manager, .. }` at each of the many write sites: a site added later cannot forget it.
pub fn client_for(config: kube::Config) -> Result<kube::Client, kube::Error> {
    Ok(kube::client::ClientBuilder::try_from(config)?
        .with_layer(&tower::util::MapRequestLayer::new(with_field_manager))
        .build())
}

pub(crate) fn with_field_manager<B>(mut req: http::Request<B>) -> http::Request<B> {
    use http::Method;
    if matches!(*req.method(), Method::POST | Method::PUT | Method::PATCH)
        && let Some(uri) = uri_with_field_manager(req.uri())
    {
        *req.uri_mut() = uri;
    }
    req
}

/// `uri` with `fieldManager=quotagate` added, or None when it names a field manager already.
fn uri_with_field_manager(uri: &http::Uri) -> Option<http::Uri> {
    let pq = uri.path_and_query()?;
    let query = pq.query().unwrap_or("");
    if query
        .split('&')
        .any(|kv| kv.split('=').next() == Some("fieldManager"))
    {
        return None;
    }
    let sep = if query.is_empty() { "" } else { "&" };
    let new_pq = format!("{}?{query}{sep}fieldManager={FIELD_MANAGER}", pq.path());
    let mut parts = uri.clone().into_parts();
    parts.path_and_query = Some(new_pq.parse().ok()?);
    http::Uri::from_parts(parts).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_name_quotagate_as_their_field_manager() {
        let req = |method: http::Method, uri: &str| {
            let r = http::Request::builder().method(method).uri(uri).body(()).unwrap();
            with_field_manager(r).uri().to_string()
        };
        assert_eq!(
            req(http::Method::POST, "https://h:6443/api/v1/namespaces/a/pods?"),
            "https://h:6443/api/v1/namespaces/a/pods?fieldManager=quotagate"
        );
        assert_eq!(
            req(
                http::Method::PUT,
                "/apis/ray.io/v1/namespaces/a/rayclusters/r/status"
            ),
            "/apis/ray.io/v1/namespaces/a/rayclusters/r/status?fieldManager=quotagate"
        );
        assert_eq!(
            req(
                http::Method::PATCH,
                "/apis/batch/v1/namespaces/a/jobs/j?dryRun=All"
            ),
            "/apis/batch/v1/namespaces/a/jobs/j?dryRun=All&fieldManager=quotagate"
        );
        // A server-side apply names its own manager; reads and deletes name none.
        assert_eq!(
            req(
                http::Method::PATCH,
                "/api/v1/namespaces/a/pods/p?fieldManager=other&force=true"
            ),
            "/api/v1/namespaces/a/pods/p?fieldManager=other&force=true"
        );
        assert_eq!(
            req(http::Method::GET, "/api/v1/pods?watch=true"),
            "/api/v1/pods?watch=true"
        );
        assert_eq!(
            req(http::Method::DELETE, "/api/v1/namespaces/a/pods/p"),
            "/api/v1/namespaces/a/pods/p"
        );
    }
}
