//! The `quotagate` command line: its clap types (`args`), the dispatch from a parsed command line to
//! a command (`dispatch`), and each command's body (`run`, `apiserver`, `demo`, `crds`, `validate`,
//! `plan`, `explain`, kueuectl's `list`, `stop`, `resume`, `create`, ...).

pub mod apiserver;
pub mod args;
pub mod chaos;
pub mod demo;
pub mod dispatch;
pub mod explain;
pub mod kueuectl;
pub mod load;
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
        out.push_str(&serde_saphyr::to_string(&crd)?);
    }
    Ok(out)
}
pub mod bench;

/// A client for `kubeconfig`, or the default one ($KUBECONFIG, ~/.kube/config, in-cluster).
pub async fn kube_client(kubeconfig: Option<&std::path::Path>) -> Result<kube::Client, String> {
    match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path).map_err(|e| e.to_string())?;
            let config =
                kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                    .await
                    .map_err(|e| e.to_string())?;
            kube::Client::try_from(config).map_err(|e| e.to_string())
        }
        None => kube::Client::try_default().await.map_err(|e| e.to_string()),
    }
}
