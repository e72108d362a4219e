//! The command line that runs one container as a process "in its pod": `ip netns exec` puts it in the
//! pod's network namespace and a mount namespace of its own (whose mounts do not reach the host), where a
//! small shell prelude gives it a private `/tmp` and the pod's volumes, remounts read-only what must
//! be (the root and `/tmp` under `readOnlyRootFilesystem`, `readOnly` volume mounts), then execs the
//! container's command. Paths from the pod spec go in as arguments, never into the script's text.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, PodSpec, Volume};

/// `$1`: the pod's /tmp; `$2`: how many (source, mount path) pairs follow; then how many paths to
/// remount read-only follow, and those; then the working directory; then the command.
const PRELUDE: &str = r#"set -e
mount --bind "$1" /tmp
shift
n=$1
shift
while [ "$n" -gt 0 ]; do
  if [ -f "$1" ]; then
    [ -e "$2" ] || { mkdir -p "$(dirname "$2")"; : >"$2"; }
  else
    mkdir -p "$2"
  fi
  mount --bind "$1" "$2"
  shift 2
  n=$((n - 1))
done
n=$1
shift
while [ "$n" -gt 0 ]; do
  mount -o remount,bind,ro "$1"
  shift
  n=$((n - 1))
done
cd "$1"
shift
exec "$@""#;

/// Where a pod's files live on the host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodDir(pub PathBuf);

impl PodDir {
    pub fn tmp(&self) -> PathBuf {
        self.0.join("tmp")
    }
    pub fn volume(&self, name: &str) -> PathBuf {
        self.0.join("volumes").join(name)
    }
    pub fn log(&self, container: &str) -> PathBuf {
        self.0.join("logs").join(format!("{container}.log"))
    }
}

/// Whether the runtime makes this volume's files (`incluster::write_volumes`) and so bind-mounts it.
pub fn has_files(v: &Volume) -> bool {
    v.config_map.is_some() || v.secret.is_some() || v.projected.is_some()
}

/// The container's `emptyDir` mounts as (host directory, mount path). A memory-backed emptyDir at
/// `/dev/shm` is the host's `/dev/shm` (Ray's object store files there have unique names); other
/// volume kinds are not mounted.
pub fn binds(spec: &PodSpec, c: &Container, dir: &PodDir) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    for m in c.volume_mounts.iter().flatten() {
        let Some(v) = spec.volumes.iter().flatten().find(|v| v.name == m.name) else {
            continue;
        };
        if has_files(v) {
            let mut src = dir.volume(&v.name);
            if let Some(sub) = m.sub_path.as_deref().filter(|s| !s.is_empty()) {
                if !safe_sub_path(sub) {
                    continue;
                }
                src = src.join(sub);
            }
            // Written by the runtime when it makes them (`incluster::write_volumes`); else not mounted.
            if src.exists() {
                out.push((src, m.mount_path.clone()));
            }
            continue;
        }
        let Some(e) = &v.empty_dir else { continue };
        if e.medium.as_deref() == Some("Memory") && m.mount_path.trim_end_matches('/') == "/dev/shm" {
            continue;
        }
        let mut src = dir.volume(&v.name);
        if let Some(sub) = m.sub_path.as_deref().filter(|s| !s.is_empty()) {
            if !safe_sub_path(sub) {
                continue;
            }
            src = src.join(sub);
        }
        out.push((src, m.mount_path.clone()));
    }
    out
}

/// A `subPath` stays inside its volume (the API server refuses `..` and absolute paths too).
fn safe_sub_path(s: &str) -> bool {
    !s.starts_with('/') && !s.split('/').any(|p| p == "..")
}

/// What the container's mount namespace has read-only: the root and `/tmp` (the image's, here the
/// pod's) under `readOnlyRootFilesystem`, and the `readOnly` volume mounts among `binds`.
pub fn read_only(c: &Container, binds: &[(PathBuf, String)], root: bool) -> Vec<String> {
    let mut out: Vec<String> = if root {
        vec!["/".into(), "/tmp".into()]
    } else {
        Vec::new()
    };
    for m in c.volume_mounts.iter().flatten() {
        if m.read_only == Some(true) && binds.iter().any(|(_, p)| *p == m.mount_path) {
            out.push(m.mount_path.clone());
        }
    }
    out
}

/// The full argv: `ip netns exec NS /bin/sh -c PRELUDE qg-pod ARGS... COMMAND...`.
pub fn argv(
    netns: &str,
    dir: &PodDir,
    binds: &[(PathBuf, String)],
    read_only: &[String],
    workdir: &str,
    command: &[String],
) -> Vec<String> {
    let mut v: Vec<String> = ["netns", "exec", netns, "/bin/sh", "-c", PRELUDE, "qg-pod"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    v.push(path(&dir.tmp()));
    v.push(binds.len().to_string());
    for (src, dst) in binds {
        v.push(path(src));
        v.push(dst.clone());
    }
    v.push(read_only.len().to_string());
    v.extend(read_only.iter().cloned());
    v.push(workdir.to_owned());
    v.extend(command.iter().cloned());
    v
}

fn path(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn kuberay_volumes_and_the_argv() {
        let spec: PodSpec = serde_json::from_value(json!({
            "containers": [{"name": "ray-head", "volumeMounts": [
                {"name": "shared-mem", "mountPath": "/dev/shm"}, {"name": "ray-logs", "mountPath": "/tmp/ray"},
                {"name": "cfg", "mountPath": "/etc/cfg"}, {"name": "ray-logs", "mountPath": "/x", "subPath": "../../etc"}]}],
            "volumes": [{"name": "shared-mem", "emptyDir": {"medium": "Memory"}}, {"name": "ray-logs", "emptyDir": {}},
                {"name": "cfg", "configMap": {"name": "c"}}]
        }))
        .unwrap();
        let dir = PodDir("/var/tmp/qg/p".into());
        let b = binds(&spec, &spec.containers[0], &dir);
        assert_eq!(
            b,
            vec![(
                PathBuf::from("/var/tmp/qg/p/volumes/ray-logs"),
                "/tmp/ray".to_string()
            )]
        );
        let cmd = vec![
            "/bin/bash".to_string(),
            "-c".into(),
            "--".into(),
            "ray start --head --block".into(),
        ];
        let a = argv("qg-130-2", &dir, &b[..1], &[], "/tmp", &cmd);
        assert_eq!(&a[..3], &["netns", "exec", "qg-130-2"]);
        assert_eq!(
            &a[6..],
            &[
                "qg-pod",
                "/var/tmp/qg/p/tmp",
                "1",
                "/var/tmp/qg/p/volumes/ray-logs",
                "/tmp/ray",
                "0",
                "/tmp",
                "/bin/bash",
                "-c",
                "--",
                "ray start --head --block"
            ]
        );
    }

    /// A configMap or projected volume is mounted once the runtime wrote its files
    /// (`incluster::write_volumes`), a `subPath` file included; before that it is not.
    #[test]
    fn written_volumes_are_mounted() {
        let spec: PodSpec = serde_json::from_value(json!({
            "containers": [{"name": "manager", "volumeMounts": [
                {"name": "cfg", "mountPath": "/controller_manager_config.yaml", "subPath": "config.yaml"},
                {"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]}],
            "volumes": [{"name": "cfg", "configMap": {"name": "c"}},
                {"name": "kube-api-access", "projected": {"sources": []}}]
        }))
        .unwrap();
        let root = std::env::temp_dir().join(format!("qg-launch-test-{}", std::process::id()));
        let dir = PodDir(root.clone());
        assert!(binds(&spec, &spec.containers[0], &dir).is_empty());
        std::fs::create_dir_all(dir.volume("cfg")).unwrap();
        std::fs::write(dir.volume("cfg").join("config.yaml"), "a: 1").unwrap();
        std::fs::create_dir_all(dir.volume("kube-api-access")).unwrap();
        let b = binds(&spec, &spec.containers[0], &dir);
        let _ = std::fs::remove_dir_all(&root);
        assert_eq!(
            b,
            vec![
                (
                    dir.volume("cfg").join("config.yaml"),
                    "/controller_manager_config.yaml".to_string()
                ),
                (
                    dir.volume("kube-api-access"),
                    "/var/run/secrets/kubernetes.io/serviceaccount".to_string()
                ),
            ]
        );
    }

    /// The prelude really runs: with `sh` and no namespaces, its argument handling ends in the command.
    #[test]
    fn prelude_passes_the_command_through() {
        let out = std::process::Command::new("/bin/sh")
            .args([
                "-c",
                &PRELUDE
                    .replace("mount --bind", "true")
                    .replace("mount -o remount,bind,ro", "true"),
                "qg-pod",
                "/tmp",
                "1",
                "/a",
                "/tmp",
                "1",
                "/",
                "/",
                "echo",
                "a b",
                "$(c)",
            ])
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "a b $(c)\n");
    }
}
