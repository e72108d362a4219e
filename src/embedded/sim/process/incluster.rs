//! What a kubelet gives a pod to reach its API server, for the node agent against a real one
//! (`quotagate node-agent --runtime process`): the files of its `configMap`, `secret` and `projected`
//! volumes (the ServiceAccount token from the TokenRequest API, `kube-root-ca.crt`, the namespace:
//! what the ServiceAccount admission plugin mounts at `/var/run/secrets/kubernetes.io/serviceaccount`),
//! and the API server at `127.0.0.1:<port>` inside the pod's network namespace, forwarded to where it
//! listens on the host's loopback (its serving certificate names 127.0.0.1; no kube-proxy here).

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Volume};
use kube::api::Api;

use super::launch::{PodDir, has_files};
use super::token::{self, TokenFile};

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
/// The ServiceAccount tokens written go into `tokens`, for their refresh.
async fn write_volume(
    client: &kube::Client,
    pod: &Pod,
    v: &Volume,
    dir: &Path,
    tokens: &mut Vec<(TokenFile, token::Granted)>,
) -> Result<(), String> {
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
                if t.path.starts_with('/') || t.path.split('/').any(|p| p == "..") {
                    return Err(format!("item path {:?} leaves the volume", t.path));
                }
                let file = TokenFile {
                    path: dir.join(&t.path),
                    expiration_seconds: t.expiration_seconds.unwrap_or(token::DEFAULT_EXPIRATION),
                    audience: t.audience.clone().filter(|a| !a.is_empty()),
                };
                let got = token::request(client, pod, &file).await?;
                token::write_atomic(&file.path, got.token.as_bytes())?;
                tokens.push((file, got));
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
/// The ServiceAccount token files written come back, for [`refresh_tokens`].
pub async fn write_volumes(
    client: &kube::Client,
    pod: &Pod,
    dir: &PodDir,
) -> Result<Vec<(TokenFile, token::Granted)>, MountError> {
    let mut tokens = Vec::new();
    for v in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        if !has_files(v) {
            continue;
        }
        let target: PathBuf = dir.volume(&v.name);
        let mut tries = 0u32;
        loop {
            let r = async {
                std::fs::create_dir_all(&target).map_err(|e| format!("{}: {e}", target.display()))?;
                tokens.retain(|(f, _): &(TokenFile, token::Granted)| !f.path.starts_with(&target));
                write_volume(client, pod, v, &target, &mut tokens).await
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
    Ok(tokens)
}

/// Keeps the pod's ServiceAccount tokens fresh (`token.rs`) until the task is aborted.
pub fn refresh_tokens(
    client: &kube::Client,
    pod: &Pod,
    tokens: Vec<(TokenFile, token::Granted)>,
) -> Option<tokio::task::JoinHandle<()>> {
    if tokens.is_empty() {
        return None;
    }
    let (client, pod) = (client.clone(), pod.clone());
    Some(tokio::spawn(async move {
        let all = tokens.into_iter().map(|(file, first)| {
            let (client, pod) = (client.clone(), pod.clone());
            let path = file.path.clone();
            token::keep_fresh(path, first, move || {
                let (client, pod, file) = (client.clone(), pod.clone(), file.clone());
                async move { token::request(&client, &pod, &file).await }
            })
        });
        futures::future::join_all(all).await;
    }))
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
