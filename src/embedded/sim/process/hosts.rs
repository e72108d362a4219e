//! Service names inside pods without a DNS server: `ip netns exec NAME` bind-mounts every file of
//! `/etc/netns/NAME/` over its namesake in `/etc`, so each pod's namespace gets a `hosts` file listing
//! `<svc>.<ns>.svc.cluster.local` (and `<svc>.<ns>.svc`, `<svc>.<ns>`, and `<svc>` for the pod's own
//! namespace) with the Service's ClusterIP, or its ready endpoints' addresses for a headless Service.
//!
//! The file is rewritten in place (same inode) when Services change: a renamed file would leave the
//! running processes' bind mount on the old one.

use std::collections::HashMap;
use std::io::Write;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};

/// The cluster domain, as a kubelet's `--cluster-domain` default.
pub const CLUSTER_DOMAIN: &str = "cluster.local";

/// The pods' `/etc/resolv.conf`: no DNS server serves the pod network (no NAT to the host's either), so
/// a lookup that goes past the hosts file (an AAAA query for a name that has only an IPv4 entry, as
/// `getaddrinfo` with AF_UNSPEC and gRPC's c-ares resolver make) must fail at once, not wait for the
/// host's nameserver: nothing listens on the pod's own 127.0.0.1:53, so it is refused immediately.
const RESOLV_CONF: &str = "# written by quotagate's process runtime: no DNS server here; Service names are in /etc/hosts\nnameserver 127.0.0.1\noptions timeout:1 attempts:1\n";

/// One Service's addresses as DNS would answer for its name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub namespace: String,
    pub name: String,
    pub ips: Vec<Ipv4Addr>,
    /// Whether a ready endpoint is a pod of the process runtime (else its pods are simulated and the
    /// addresses lead nowhere).
    pub process: bool,
}

#[derive(Clone, Debug)]
struct PodHosts {
    namespace: String,
    name: String,
    ip: Ipv4Addr,
    written: String,
}

/// The hosts files of the running pods, and the records they show.
#[derive(Debug)]
pub struct Names {
    /// Where per-namespace `/etc` overlays live (`/etc/netns` for `ip netns exec`).
    root: PathBuf,
    records: Mutex<Vec<Record>>,
    /// By network namespace name.
    pods: Mutex<HashMap<String, PodHosts>>,
}

/// The hosts file of a pod in `namespace` named `pod` at `ip`.
pub fn render(records: &[Record], namespace: &str, pod: &str, ip: Ipv4Addr) -> String {
    let mut out = format!(
        "# written by quotagate's process runtime: Service names of the embedded cluster\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n{ip}\t{pod}\n"
    );
    for r in records {
        let full = format!("{}.{}.svc.{CLUSTER_DOMAIN}", r.name, r.namespace);
        let mut names = vec![
            full,
            format!("{}.{}.svc", r.name, r.namespace),
            format!("{}.{}", r.name, r.namespace),
        ];
        if r.namespace == namespace {
            names.push(r.name.clone());
        }
        for a in &r.ips {
            out.push_str(&format!("{a}\t{}\n", names.join(" ")));
        }
    }
    out
}

/// Overwrites `path` in place (truncate and write: the inode stays).
fn write_in_place(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(path)?;
    f.write_all(text.as_bytes())
}

impl Names {
    pub fn new(root: impl Into<PathBuf>) -> Names {
        Names {
            root: root.into(),
            records: Mutex::new(Vec::new()),
            pods: Mutex::new(HashMap::new()),
        }
    }

    fn file(&self, netns: &str) -> PathBuf {
        self.root.join(netns).join("hosts")
    }

    /// Writes the hosts file of a new pod; before its first process starts, so `ip netns exec` mounts it.
    pub fn add_pod(&self, netns: &str, namespace: &str, name: &str, ip: Ipv4Addr) -> std::io::Result<()> {
        let text = render(
            &self.records.lock().unwrap_or_else(PoisonError::into_inner),
            namespace,
            name,
            ip,
        );
        let path = self.file(netns);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        write_in_place(&path, &text)?;
        write_in_place(&self.root.join(netns).join("resolv.conf"), RESOLV_CONF)?;
        let entry = PodHosts {
            namespace: namespace.into(),
            name: name.into(),
            ip,
            written: text,
        };
        self.pods
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(netns.into(), entry);
        Ok(())
    }

    pub fn remove_pod(&self, netns: &str) {
        self.pods
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(netns);
        let _ = std::fs::remove_dir_all(self.root.join(netns));
    }

    /// Removes overlays of namespaces whose names `ours` recognises (a crashed run's).
    pub fn remove_leftovers(&self, ours: impl Fn(&str) -> bool) {
        let Ok(dir) = std::fs::read_dir(&self.root) else {
            return;
        };
        for e in dir.flatten() {
            if e.file_name().to_str().is_some_and(&ours) {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }

    /// New records: every pod's file whose text changes is rewritten.
    pub fn set_records(&self, mut records: Vec<Record>) {
        records.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        let mut current = self.records.lock().unwrap_or_else(PoisonError::into_inner);
        if *current == records {
            return;
        }
        *current = records;
        let mut pods = self.pods.lock().unwrap_or_else(PoisonError::into_inner);
        for (netns, p) in pods.iter_mut() {
            let text = render(&current, &p.namespace, &p.name, p.ip);
            if text != p.written {
                match write_in_place(&self.file(netns), &text) {
                    Ok(()) => p.written = text,
                    Err(e) => {
                        tracing::warn!(netns = %netns, error = %e, "process runtime: a pod's hosts file was not rewritten")
                    }
                }
            }
        }
    }

    /// The addresses a name resolves to, for the host side (the operator reaching a head Service):
    /// `<svc>.<ns>.svc.cluster.local`, `<svc>.<ns>.svc` or `<svc>.<ns>`.
    pub fn resolve(&self, host: &str) -> Option<Vec<Ipv4Addr>> {
        let host = host.trim_end_matches('.');
        let rest = host
            .strip_suffix(&format!(".svc.{CLUSTER_DOMAIN}"))
            .or_else(|| host.strip_suffix(".svc"))
            .unwrap_or(host);
        let (name, ns) = rest.split_once('.')?;
        let records = self.records.lock().unwrap_or_else(PoisonError::into_inner);
        records
            .iter()
            .find(|r| r.name == name && r.namespace == ns)
            .map(|r| r.ips.clone())
    }

    /// The first address of `host` when the Service behind it has a process-run pod ready; None for
    /// other names and for Services of simulated pods.
    pub fn resolve_process(&self, host: &str) -> Option<Ipv4Addr> {
        let records = self.records.lock().unwrap_or_else(PoisonError::into_inner);
        let host = host.trim_end_matches('.');
        let rest = host
            .strip_suffix(&format!(".svc.{CLUSTER_DOMAIN}"))
            .or_else(|| host.strip_suffix(".svc"))
            .unwrap_or(host);
        let (name, ns) = rest.split_once('.')?;
        records
            .iter()
            .find(|r| r.name == name && r.namespace == ns && r.process)
            .and_then(|r| r.ips.first().copied())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(ns: &str, name: &str, ips: &[[u8; 4]]) -> Record {
        Record {
            namespace: ns.into(),
            name: name.into(),
            ips: ips.iter().map(|a| Ipv4Addr::from(*a)).collect(),
            process: ns != "sim",
        }
    }

    #[test]
    fn names_short_forms_only_in_the_own_namespace() {
        let r = [
            rec("ml", "rs-serve-svc", &[[10, 96, 130, 2]]),
            rec("other", "db", &[[10, 244, 130, 5], [10, 244, 130, 6]]),
        ];
        let text = render(&r, "ml", "head-0", Ipv4Addr::new(10, 244, 130, 3));
        assert!(text.contains("10.244.130.3\thead-0\n"), "{text}");
        assert!(text.contains("10.96.130.2\trs-serve-svc.ml.svc.cluster.local rs-serve-svc.ml.svc rs-serve-svc.ml rs-serve-svc\n"), "{text}");
        assert!(
            text.contains("10.244.130.5\tdb.other.svc.cluster.local db.other.svc db.other\n"),
            "{text}"
        );
        assert!(
            text.contains("10.244.130.6\tdb.other.svc.cluster.local"),
            "{text}"
        );
    }

    #[test]
    fn rewritten_in_place_and_resolved() {
        let root = std::env::temp_dir().join(format!("qg-hosts-test-{}", std::process::id()));
        let names = Names::new(&root);
        names
            .add_pod("qg-1-2", "ml", "p", Ipv4Addr::new(10, 244, 1, 2))
            .unwrap();
        let path = root.join("qg-1-2/hosts");
        let inode = |p: &std::path::Path| std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(p).unwrap());
        let before = inode(&path);
        assert!(!std::fs::read_to_string(&path).unwrap().contains("svc"));
        assert!(
            std::fs::read_to_string(root.join("qg-1-2/resolv.conf"))
                .unwrap()
                .contains("nameserver 127.0.0.1\n")
        );
        names.set_records(vec![rec("ml", "head-svc", &[[10, 244, 1, 3]])]);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.contains("10.244.1.3\thead-svc.ml.svc.cluster.local"),
            "{text}"
        );
        assert_eq!(
            inode(&path),
            before,
            "rewritten in place, so the bind mount keeps seeing it"
        );
        assert_eq!(
            names.resolve("head-svc.ml.svc.cluster.local"),
            Some(vec![Ipv4Addr::new(10, 244, 1, 3)])
        );
        assert_eq!(
            names.resolve("head-svc.ml"),
            Some(vec![Ipv4Addr::new(10, 244, 1, 3)])
        );
        assert_eq!(names.resolve("head-svc.other.svc.cluster.local"), None);
        assert_eq!(names.resolve("example.com"), None);
        assert_eq!(
            names.resolve_process("head-svc.ml.svc.cluster.local"),
            Some(Ipv4Addr::new(10, 244, 1, 3))
        );
        names.set_records(vec![rec("sim", "head-svc", &[[10, 244, 0, 3]])]);
        assert_eq!(
            names.resolve("head-svc.sim"),
            Some(vec![Ipv4Addr::new(10, 244, 0, 3)])
        );
        assert_eq!(
            names.resolve_process("head-svc.sim.svc.cluster.local"),
            None,
            "a simulated pod's Service stays simulated"
        );
        names.remove_pod("qg-1-2");
        assert!(!path.exists());
        let _ = std::fs::remove_dir_all(&root);
    }
}
