//! A container's `securityContext` as the kubelet and a container runtime (containerd's defaults)
//! apply it, for a container the process runtime runs:
//!
//! - the user: `runAsUser`/`runAsGroup` (container over pod), else the image's user (quotagate's image
//!   runs as 65532:65532, its Dockerfile's `USER`); supplementary groups from the pod's
//!   `supplementalGroups` and `fsGroup`;
//! - `runAsNonRoot`: a container that would run as uid 0 is not started, with the kubelet's
//!   `CreateContainerConfigError` message (`kuberuntime/security_context_others.go`,
//!   `verifyRunAsNonRoot`);
//! - capabilities: containerd's default set, less `drop` (`ALL` empties it), plus `add`; `privileged`
//!   gives all. They bound what the process can ever have; a uid-0 process has them all, a non-root
//!   one none (as with containerd, which sets no ambient capabilities);
//! - `allowPrivilegeEscalation: false`: `no_new_privs`;
//! - `readOnlyRootFilesystem`: the root and the pod's `/tmp` remounted read-only in the container's
//!   mount namespace; its volumes stay as mounted (`readOnly` ones read-only).
//!
//! The user, groups, capabilities and `no_new_privs` are set by util-linux's `setpriv` as the last
//! step before the container's command (after the mounts, which need root), making the same system
//! calls a runtime makes (`setgroups`, `setresgid`, `setresuid`, `PR_SET_NO_NEW_PRIVS`,
//! `PR_CAPBSET_DROP`, `capset`). What the runtime cannot apply here is listed by [`not_enforced`] and
//! reported on the pod as a Warning event: seccomp and AppArmor profiles, SELinux options, `procMount`,
//! sysctls, the ownership `fsGroup` asks for on volumes.

use k8s_openapi::api::core::v1::{Capabilities, Container, Pod, PodSecurityContext, SecurityContext};

use super::image::{Runs, runs};

/// containerd's default capabilities (`oci.defaultUnixCaps`), as `setpriv` names them.
pub const DEFAULT_CAPS: [&str; 14] = [
    "chown",
    "dac_override",
    "fsetid",
    "fowner",
    "mknod",
    "net_raw",
    "setgid",
    "setuid",
    "setfcap",
    "setpcap",
    "net_bind_service",
    "sys_chroot",
    "kill",
    "audit_write",
];

/// The uid and gid a container runs as when its securityContext names none.
pub fn image_user(c: &Container) -> (i64, i64) {
    match runs(c) {
        // The Dockerfile's `USER 65532:65532`.
        Runs::Quotagate => (65532, 65532),
        // rayproject/ray's user is `ray` (1000:100), but its processes here are the host venv's Ray,
        // whose files the runtime's user owns: they run as root unless the pod says otherwise.
        Runs::Ray | Runs::Simulated => (0, 0),
    }
}

/// What a container's process runs with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Applied {
    pub uid: i64,
    pub gid: i64,
    pub groups: Vec<i64>,
    /// The capability bounding set, lowercase without `CAP_`; `None`: all of them.
    pub caps: Option<Vec<String>>,
    pub no_new_privs: bool,
    pub read_only_root: bool,
}

fn pick<T: Clone>(
    c: Option<&SecurityContext>,
    p: Option<&PodSecurityContext>,
    f: impl Fn(Sc) -> Option<T>,
) -> Option<T> {
    c.and_then(|c| f(Sc::C(c)))
        .or_else(|| p.and_then(|p| f(Sc::P(p))))
}

/// A container's or a pod's security context, for the fields they share.
enum Sc<'a> {
    C(&'a SecurityContext),
    P(&'a PodSecurityContext),
}

impl Sc<'_> {
    fn run_as_user(&self) -> Option<i64> {
        match self {
            Sc::C(c) => c.run_as_user,
            Sc::P(p) => p.run_as_user,
        }
    }
    fn run_as_group(&self) -> Option<i64> {
        match self {
            Sc::C(c) => c.run_as_group,
            Sc::P(p) => p.run_as_group,
        }
    }
    fn run_as_non_root(&self) -> Option<bool> {
        match self {
            Sc::C(c) => c.run_as_non_root,
            Sc::P(p) => p.run_as_non_root,
        }
    }
    fn seccomp(&self) -> Option<String> {
        match self {
            Sc::C(c) => c.seccomp_profile.as_ref().map(|s| s.type_.clone()),
            Sc::P(p) => p.seccomp_profile.as_ref().map(|s| s.type_.clone()),
        }
    }
    fn app_armor(&self) -> Option<String> {
        match self {
            Sc::C(c) => c.app_armor_profile.as_ref().map(|s| s.type_.clone()),
            Sc::P(p) => p.app_armor_profile.as_ref().map(|s| s.type_.clone()),
        }
    }
    fn se_linux(&self) -> bool {
        match self {
            Sc::C(c) => c.se_linux_options.is_some(),
            Sc::P(p) => p.se_linux_options.is_some(),
        }
    }
}

/// `name_namespace(uid)`, the kubelet's `format.Pod`.
fn format_pod(pod: &Pod) -> String {
    format!(
        "{}_{}({})",
        pod.metadata.name.as_deref().unwrap_or(""),
        pod.metadata.namespace.as_deref().unwrap_or(""),
        pod.metadata.uid.as_deref().unwrap_or("")
    )
}

fn cap_name(c: &str) -> String {
    let c = c.trim().to_ascii_lowercase();
    c.strip_prefix("cap_").map(str::to_owned).unwrap_or(c)
}

/// containerd's rule: start from the default set, or nothing when `drop` has `ALL`; drop the others;
/// add `add` (`ALL`: every capability).
fn capabilities(caps: Option<&Capabilities>, privileged: bool) -> Option<Vec<String>> {
    if privileged {
        return None;
    }
    let add: Vec<String> = caps.and_then(|c| c.add.clone()).unwrap_or_default();
    let drop: Vec<String> = caps.and_then(|c| c.drop.clone()).unwrap_or_default();
    if add.iter().any(|a| a.eq_ignore_ascii_case("ALL")) {
        return None;
    }
    let mut set: Vec<String> = if drop.iter().any(|d| d.eq_ignore_ascii_case("ALL")) {
        Vec::new()
    } else {
        DEFAULT_CAPS.iter().map(|s| s.to_string()).collect()
    };
    let dropped: Vec<String> = drop.iter().map(|d| cap_name(d)).collect();
    set.retain(|c| !dropped.contains(c));
    for a in add.iter().map(|a| cap_name(a)) {
        if !set.contains(&a) {
            set.push(a);
        }
    }
    Some(set)
}

/// What the container runs with, or the kubelet's `CreateContainerConfigError` message when it must
/// not start (`runAsNonRoot`).
pub fn resolve(pod: &Pod, c: &Container) -> Result<Applied, String> {
    let psc = pod.spec.as_ref().and_then(|s| s.security_context.as_ref());
    let csc = c.security_context.as_ref();
    let (image_uid, image_gid) = image_user(c);
    let run_as_user = pick(csc, psc, |s| s.run_as_user());
    if pick(csc, psc, |s| s.run_as_non_root()) == Some(true) {
        match run_as_user {
            Some(0) => {
                return Err(format!(
                    "container's runAsUser breaks non-root policy (pod: {:?}, container: {})",
                    format_pod(pod),
                    c.name
                ));
            }
            Some(_) => {}
            None if image_uid == 0 => {
                return Err(format!(
                    "container has runAsNonRoot and image will run as root (pod: {:?}, container: {})",
                    format_pod(pod),
                    c.name
                ));
            }
            None => {}
        }
    }
    let uid = run_as_user.unwrap_or(image_uid);
    // containerd: without runAsGroup, the image's group for the image's user, else group 0.
    let gid =
        pick(csc, psc, |s| s.run_as_group()).unwrap_or(if run_as_user.is_some() { 0 } else { image_gid });
    let mut groups = vec![gid];
    if let Some(p) = psc {
        groups.extend(p.supplemental_groups.iter().flatten().copied());
        groups.extend(p.fs_group);
    }
    groups.sort_unstable();
    groups.dedup();
    for (what, id) in [("runAsUser", uid), ("runAsGroup", gid)] {
        if !(0..=i64::from(u32::MAX - 1)).contains(&id) {
            return Err(format!("{what} {id} is not a valid id (container: {})", c.name));
        }
    }
    let privileged = csc.and_then(|s| s.privileged).unwrap_or(false);
    Ok(Applied {
        uid,
        gid,
        groups,
        caps: capabilities(csc.and_then(|s| s.capabilities.as_ref()), privileged),
        no_new_privs: csc.and_then(|s| s.allow_privilege_escalation) == Some(false),
        read_only_root: csc.and_then(|s| s.read_only_root_filesystem).unwrap_or(false),
    })
}

impl Applied {
    /// `setpriv`'s arguments that make the process this, before its command.
    pub fn setpriv_args(&self) -> Vec<String> {
        let mut v = vec![
            format!("--reuid={}", self.uid),
            format!("--regid={}", self.gid),
            format!(
                "--groups={}",
                self.groups
                    .iter()
                    .map(i64::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            "--inh-caps=-all".into(),
        ];
        if let Some(caps) = &self.caps {
            let mut b = "-all".to_string();
            for c in caps {
                b.push_str(",+");
                b.push_str(c);
            }
            v.push(format!("--bounding-set={b}"));
        }
        if self.no_new_privs {
            v.push("--no-new-privs".into());
        }
        v.push("--".into());
        v
    }
}

/// util-linux's `setpriv`, by absolute path (a container's own PATH may not have it).
pub fn setpriv() -> &'static str {
    [
        "/usr/bin/setpriv",
        "/bin/setpriv",
        "/usr/sbin/setpriv",
        "/sbin/setpriv",
    ]
    .into_iter()
    .find(|p| std::path::Path::new(p).exists())
    .unwrap_or("setpriv")
}

/// A container's command and the paths its mount namespace has read-only, its securityContext
/// applied; `Err`: the kubelet's `CreateContainerConfigError` message.
pub fn secure(
    pod: &Pod,
    c: &Container,
    binds: &[(std::path::PathBuf, String)],
    command: Vec<String>,
) -> Result<(Vec<String>, Vec<String>), String> {
    let applied = resolve(pod, c)?;
    let mut out = vec![setpriv().to_string()];
    out.extend(applied.setpriv_args());
    out.extend(command);
    Ok((out, super::launch::read_only(c, binds, applied.read_only_root)))
}

/// The securityContext fields of the pod and this container that the process runtime does not apply,
/// as `field: value` (empty: everything it was asked is applied).
pub fn not_enforced(pod: &Pod, c: &Container) -> Vec<String> {
    let psc = pod.spec.as_ref().and_then(|s| s.security_context.as_ref());
    let csc = c.security_context.as_ref();
    let mut out = Vec::new();
    if let Some(t) = pick(csc, psc, |s| s.seccomp()).filter(|t| t != "Unconfined") {
        out.push(format!("seccompProfile: {t} (no seccomp filter is loaded)"));
    }
    if let Some(t) = pick(csc, psc, |s| s.app_armor()).filter(|t| t != "Unconfined") {
        out.push(format!("appArmorProfile: {t}"));
    }
    if pick(csc, psc, |s| s.se_linux().then_some(())).is_some() {
        out.push("seLinuxOptions".into());
    }
    if let Some(m) = csc
        .and_then(|s| s.proc_mount.as_deref())
        .filter(|m| *m != "Default")
    {
        out.push(format!("procMount: {m}"));
    }
    if let Some(p) = psc {
        if p.sysctls.as_ref().is_some_and(|s| !s.is_empty()) {
            out.push("sysctls".into());
        }
        if let Some(g) = p.fs_group {
            out.push(format!(
                "fsGroup: {g} (a supplementary group of the process; volume files keep their owner, root, and mode 0644)"
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(
            json!({"metadata": {"name": "p", "namespace": "ns", "uid": "u1"}, "spec": spec}),
        )
        .unwrap()
    }

    /// The shipped Deployment's pod (config/manager/manager.yaml): the image's user, no capability,
    /// no_new_privs, a read-only root; its RuntimeDefault seccomp profile reported as not applied.
    #[test]
    fn the_shipped_deployment() {
        let p = pod(json!({
            "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{"name": "manager", "image": "quotagate:0.1.0", "securityContext": {
                "allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
                "capabilities": {"drop": ["ALL"]}}}]
        }));
        let c = &p.spec.as_ref().unwrap().containers[0];
        let a = resolve(&p, c).unwrap();
        assert_eq!(
            a,
            Applied {
                uid: 65532,
                gid: 65532,
                groups: vec![65532],
                caps: Some(vec![]),
                no_new_privs: true,
                read_only_root: true
            }
        );
        assert_eq!(
            a.setpriv_args(),
            [
                "--reuid=65532",
                "--regid=65532",
                "--groups=65532",
                "--inh-caps=-all",
                "--bounding-set=-all",
                "--no-new-privs",
                "--"
            ]
        );
        assert_eq!(
            not_enforced(&p, c),
            ["seccompProfile: RuntimeDefault (no seccomp filter is loaded)"]
        );
    }

    /// The kubelet's `verifyRunAsNonRoot` (pkg/kubelet/kuberuntime/security_context_others.go): an
    /// image running as root, or runAsUser 0, is refused with its messages; a non-zero runAsUser
    /// passes; the container's fields win over the pod's.
    #[test]
    fn run_as_non_root_as_the_kubelet() {
        let root = pod(json!({"securityContext": {"runAsNonRoot": true},
            "containers": [{"name": "ray-head", "image": "rayproject/ray:2.46.0"}]}));
        assert_eq!(
            resolve(&root, &root.spec.as_ref().unwrap().containers[0]).unwrap_err(),
            r#"container has runAsNonRoot and image will run as root (pod: "p_ns(u1)", container: ray-head)"#
        );
        let zero = pod(json!({"securityContext": {"runAsNonRoot": true},
            "containers": [{"name": "c", "image": "quotagate:1", "securityContext": {"runAsUser": 0}}]}));
        assert_eq!(
            resolve(&zero, &zero.spec.as_ref().unwrap().containers[0]).unwrap_err(),
            r#"container's runAsUser breaks non-root policy (pod: "p_ns(u1)", container: c)"#
        );
        let user = pod(
            json!({"securityContext": {"runAsNonRoot": true, "runAsUser": 0, "fsGroup": 2000,
            "supplementalGroups": [3000]},
            "containers": [{"name": "c", "image": "rayproject/ray:2.46.0",
                "securityContext": {"runAsUser": 1000, "runAsGroup": 100}}]}),
        );
        let c = &user.spec.as_ref().unwrap().containers[0];
        let a = resolve(&user, c).unwrap();
        assert_eq!(
            (a.uid, a.gid, a.groups.clone()),
            (1000, 100, vec![100, 2000, 3000])
        );
        assert_eq!(a.caps.as_ref().map(Vec::len), Some(DEFAULT_CAPS.len()));
        assert!(!a.no_new_privs && !a.read_only_root);
        assert!(not_enforced(&user, c)[0].starts_with("fsGroup: 2000"));
        // Without runAsNonRoot, root is fine; runAsUser without runAsGroup runs with group 0.
        let plain = pod(json!({"containers": [{"name": "c", "image": "quotagate:1",
            "securityContext": {"runAsUser": 7}}]}));
        let a = resolve(&plain, &plain.spec.as_ref().unwrap().containers[0]).unwrap();
        assert_eq!((a.uid, a.gid), (7, 0));
    }

    /// containerd's capability rule: the default set less `drop` plus `add`; `drop: [ALL]` empties it;
    /// `add: [ALL]` and `privileged` leave every capability.
    #[test]
    fn capabilities_as_containerd() {
        let caps = |v: serde_json::Value| -> Option<Capabilities> { serde_json::from_value(v).ok() };
        assert_eq!(
            capabilities(
                caps(json!({"drop": ["ALL"], "add": ["NET_BIND_SERVICE", "CAP_SYS_PTRACE"]})).as_ref(),
                false
            ),
            Some(vec!["net_bind_service".to_string(), "sys_ptrace".into()])
        );
        let some = capabilities(caps(json!({"drop": ["NET_RAW", "chown"]})).as_ref(), false).unwrap();
        assert_eq!(some.len(), DEFAULT_CAPS.len() - 2);
        assert!(!some.contains(&"net_raw".to_string()) && !some.contains(&"chown".to_string()));
        assert_eq!(capabilities(caps(json!({"add": ["ALL"]})).as_ref(), false), None);
        assert_eq!(capabilities(None, true), None);
        assert_eq!(capabilities(None, false).map(|c| c.len()), Some(14));
    }
}
