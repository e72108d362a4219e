//! What a kubelet gives a pod to reach its API server, for the node agent against a real one
//! (`quotagate node-agent --runtime process`): the files of its `configMap`, `secret` and `projected`
//! volumes (the ServiceAccount token from the TokenRequest API, `kube-root-ca.crt`, the namespace:
//! what the ServiceAccount admission plugin mounts at `/var/run/secrets/kubernetes.io/serviceaccount`),
//! and the API server at `127.0.0.1:<port>` inside the pod's network namespace, forwarded to where it
//! listens on the host's loopback (its serving certificate names 127.0.0.1; no kube-proxy here).

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, ServiceAccount, Volume};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

use super::launch::{PodDir, has_files};

/// A volume's files could not be made (the pod waits, as a kubelet's `FailedMount`, then fails).
#[derive(Debug, thiserror::Error)]
#[error("volume {volume:?}: {message}")]
pub struct MountError {
    pub volume: String,
    pub message: String,
}

/// The files of `key -> path` items (all keys when none are named), written under `dir`.
fn write_items(
    dir: &Path,
    data: &std::collections::BTreeMap<String, Vec<u8>>,
    items: Option<&Vec<k8s_openapi::api::core::v1::KeyToPath>>,
    optional: bool,
) -> Result<(), String> {
    let pairs: Vec<(String, String)> = match items {
        Some(items) => items.iter().map(|i| (i.key.clone(), i.path.clone())).collect(),
        None => data.keys().map(|k| (k.clone(), k.clone())).collect(),
    };
    for (key, path) in pairs {
        if path.starts_with('/') || path.split('/').any(|p| p == "..") {
            return Err(format!("item path {path:?} leaves the volume"));
        }
        let Some(bytes) = data.get(&key) else {
            if optional {
                continue;
            }
            return Err(format!("no key {key:?}"));
        };
        let file = dir.join(&path);
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
        }
        std::fs::write(&file, bytes).map_err(|e| format!("{}: {e}", file.display()))?;
    }
    Ok(())
}

async fn config_map(client: &kube::Client, ns: &str, name: &str) -> Result<Option<ConfigMap>, String> {
    Api::<ConfigMap>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await
        .map_err(|e| format!("configMap {name}: {e}"))
}

fn config_map_data(cm: ConfigMap) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut out: std::collections::BTreeMap<String, Vec<u8>> = cm
        .data
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.into_bytes()))
        .collect();
    out.extend(
        cm.binary_data
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v.0)),
    );
    out
}

/// A token for the pod's ServiceAccount, bound to the pod, as a kubelet requests it.
async fn token(
    client: &kube::Client,
    pod: &Pod,
    expiration: Option<i64>,
    audience: Option<&str>,
) -> Result<String, String> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let sa = pod
        .spec
        .as_ref()
        .and_then(|s| s.service_account_name.as_deref())
        .unwrap_or("default");
    let mut spec = json!({
        "expirationSeconds": expiration.unwrap_or(3607),
        "boundObjectRef": {"apiVersion": "v1", "kind": "Pod",
            "name": pod.metadata.name, "uid": pod.metadata.uid},
    });
    if let Some(a) = audience.filter(|a| !a.is_empty()) {
        spec["audiences"] = json!([a]);
    }
    let body = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec});
    let got: Value = Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .create_subresource("token", sa, &PostParams::default(), &body)
        .await
        .map_err(|e| format!("a token for ServiceAccount {ns}/{sa}: {e}"))?;
    got["status"]["token"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("a token for ServiceAccount {ns}/{sa}: the answer has none"))
}

/// `metadata.namespace`, `metadata.name`, `metadata.uid` of the pod (what a downward API file reads).
fn field(pod: &Pod, path: &str) -> Option<String> {
    match path {
        "metadata.namespace" => pod.metadata.namespace.clone(),
        "metadata.name" => pod.metadata.name.clone(),
        "metadata.uid" => pod.metadata.uid.clone(),
        _ => None,
    }
}

/// Writes one volume's files into `dir.volume(name)`. `emptyDir` and other kinds: nothing to write.
async fn write_volume(client: &kube::Client, pod: &Pod, v: &Volume, dir: &Path) -> Result<(), String> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    if let Some(src) = &v.config_map {
        let optional = src.optional.unwrap_or(false);
        match config_map(client, ns, &src.name).await? {
            Some(cm) => write_items(dir, &config_map_data(cm), src.items.as_ref(), optional)?,
            None if optional => {}
            None => return Err(format!("configmap {:?} not found", src.name)),
        }
    }
    if let Some(src) = &v.secret {
        let name = src.secret_name.clone().unwrap_or_default();
        let optional = src.optional.unwrap_or(false);
        match Api::<Secret>::namespaced(client.clone(), ns)
            .get_opt(&name)
            .await
            .map_err(|e| format!("secret {name}: {e}"))?
        {
            Some(s) => {
                let data = s
                    .data
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k, v.0))
                    .collect();
                write_items(dir, &data, src.items.as_ref(), optional)?;
            }
            None if optional => {}
            None => return Err(format!("secret {name:?} not found")),
        }
    }
    if let Some(p) = &v.projected {
        for s in p.sources.iter().flatten() {
            if let Some(t) = &s.service_account_token {
                let tok = token(client, pod, t.expiration_seconds, t.audience.as_deref()).await?;
                write_items(dir, &[(t.path.clone(), tok.into_bytes())].into(), None, false)?;
            }
            if let Some(src) = &s.config_map {
                let optional = src.optional.unwrap_or(false);
                match config_map(client, ns, &src.name).await? {
                    Some(cm) => write_items(dir, &config_map_data(cm), src.items.as_ref(), optional)?,
                    None if optional => {}
                    None => return Err(format!("configmap {:?} not found", src.name)),
                }
            }
            if let Some(d) = &s.downward_api {
                for item in d.items.iter().flatten() {
                    let Some(f) = &item.field_ref else { continue };
                    let value = field(pod, &f.field_path)
                        .ok_or_else(|| format!("downward API field {:?} is not served", f.field_path))?;
                    write_items(
                        dir,
                        &[(item.path.clone(), value.into_bytes())].into(),
                        None,
                        false,
                    )?;
                }
            }
        }
    }
    Ok(())
}

/// Writes every `configMap`, `secret` and `projected` volume of the pod, retrying for up to 30 s what
/// is not there yet (`kube-root-ca.crt` is published by the controller manager a moment after the
/// namespace is made), as a kubelet retries a mount.
pub async fn write_volumes(client: &kube::Client, pod: &Pod, dir: &PodDir) -> Result<(), MountError> {
    for v in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        if !has_files(v) {
            continue;
        }
        let target: PathBuf = dir.volume(&v.name);
        let mut tries = 0u32;
        loop {
            let r = async {
                std::fs::create_dir_all(&target).map_err(|e| format!("{}: {e}", target.display()))?;
                write_volume(client, pod, v, &target).await
            }
            .await;
            match r {
                Ok(()) => break,
                Err(message) if tries >= 15 => {
                    return Err(MountError {
                        volume: v.name.clone(),
                        message,
                    });
                }
                Err(message) => {
                    tracing::debug!(volume = %v.name, %message, "process runtime: volume not ready; retrying");
                    tries += 1;
                    tokio::time::sleep(Duration::from_secs(2)).await;
                }
            }
        }
    }
    Ok(())
}

/// A listener on `127.0.0.1:port` inside the network namespace `netns` (`ip netns` names it), made
/// by a thread that enters the namespace and ends: the socket stays in the namespace it was made in.
fn listen_in(netns: &str, port: u16) -> std::io::Result<std::net::TcpListener> {
    let path = Path::new("/run/netns").join(netns);
    std::thread::scope(|s| {
        s.spawn(|| {
            use std::os::fd::AsRawFd;
            let ns = std::fs::File::open(&path)?;
            // SAFETY: setns(2) on a namespace file this thread opened; it changes only this thread,
            // which ends right after making the socket.
            if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
            let l = std::net::TcpListener::bind(("127.0.0.1", port))?;
            l.set_nonblocking(true)?;
            Ok(l)
        })
        .join()
        .unwrap_or_else(|_| Err(std::io::Error::other("the namespace thread panicked")))
    })
}

/// Forwards `127.0.0.1:port` in the pod's namespace to the API server on the host's loopback, until
/// the task is dropped.
pub fn forward_api(netns: &str, port: u16) -> std::io::Result<tokio::task::JoinHandle<()>> {
    let listener = tokio::net::TcpListener::from_std(listen_in(netns, port)?)?;
    Ok(tokio::spawn(async move {
        loop {
            let Ok((mut inbound, _)) = listener.accept().await else {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            };
            tokio::spawn(async move {
                if let Ok(mut out) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut out).await;
                }
            });
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_stay_inside_the_volume() {
        let dir = std::env::temp_dir().join(format!("qg-incluster-test-{}", std::process::id()));
        let data: std::collections::BTreeMap<String, Vec<u8>> =
            [("ca.crt".to_string(), b"PEM".to_vec())].into();
        write_items(&dir, &data, None, false).unwrap();
        assert_eq!(std::fs::read(dir.join("ca.crt")).unwrap(), b"PEM");
        let item = |key: &str, path: &str| k8s_openapi::api::core::v1::KeyToPath {
            key: key.into(),
            path: path.into(),
            mode: None,
        };
        let escape = vec![item("ca.crt", "../../etc/x")];
        assert!(
            write_items(&dir, &data, Some(&escape), false)
                .unwrap_err()
                .contains("leaves the volume")
        );
        let missing = vec![item("other", "o")];
        assert!(
            write_items(&dir, &data, Some(&missing), false)
                .unwrap_err()
                .contains("no key \"other\"")
        );
        write_items(&dir, &data, Some(&missing), true).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
