//! The host side of pod networking, with `ip` (iproute2): each runtime instance takes one /24 of the
//! pod CIDR 10.244.0.0/16 (as kube-controller-manager gives each node a `podCIDR`), a bridge holding
//! its gateway address, and per pod a network namespace with a veth pair whose host end is on the bridge.
//!
//! Every name carries the /24's index (`qgbr130`, `qg-130-7`, `qg130v7`), so instances on one host
//! never touch each other's. An instance holds an exclusive `flock` on `<state_dir>/<index>.lock` for
//! as long as it lives; the kernel drops it when the process dies, however it dies. So whoever can take
//! a lock knows that every namespace and bridge of that index is a leftover of a crashed run, and
//! removes them (killing what still runs in them) before using the index or moving on.

use std::fs::{File, OpenOptions};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Indexes of 10.244.X.0/24 this runtime uses. The simulated node agent hands out addresses from the
/// bottom of 10.244.0.0/16, which are not routed; real pods stay clear of them.
const FIRST_BLOCK: u8 = 128;
const LAST_BLOCK: u8 = 254;
/// Pod addresses within the /24: .1 is the bridge (the pods' gateway and the node's address).
pub const FIRST_HOST: u8 = 2;
pub const LAST_HOST: u8 = 254;

#[derive(Debug, thiserror::Error)]
pub enum NetError {
    #[error("`ip {args}` failed: {message}")]
    Ip { args: String, message: String },
    #[error("{path}: {source}")]
    State { path: PathBuf, source: std::io::Error },
    #[error(
        "every pod network 10.244.{FIRST_BLOCK}.0/24 to 10.244.{LAST_BLOCK}.0/24 is held by a live quotagate"
    )]
    NoFreeBlock,
    #[error("no free pod address in {0}")]
    NoFreeAddress(String),
}

/// One instance's /24 and the names derived from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Subnet {
    pub block: u8,
}

impl Subnet {
    pub fn bridge(&self) -> String {
        format!("qgbr{}", self.block)
    }
    pub fn gateway(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 244, self.block, 1)
    }
    pub fn pod_ip(&self, host: u8) -> Ipv4Addr {
        Ipv4Addr::new(10, 244, self.block, host)
    }
    pub fn netns(&self, host: u8) -> String {
        format!("qg-{}-{host}", self.block)
    }
    /// What every pod namespace name of this block starts with.
    pub fn netns_prefix(&self) -> String {
        format!("qg-{}-", self.block)
    }
    /// At most 15 bytes, the kernel's limit on interface names ("qg254v254" is 9).
    pub fn veth(&self, host: u8) -> String {
        format!("qg{}v{host}", self.block)
    }
    /// Whether `ip` is a pod address of this block.
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        let o = ip.octets();
        o[0] == 10 && o[1] == 244 && o[2] == self.block
    }
    pub fn cidr(&self) -> String {
        format!("10.244.{}.0/24", self.block)
    }
    /// A pod's namespace with its address and a default route through the bridge.
    pub fn add_pod(&self, host: u8) -> Result<(), NetError> {
        let s = *self;
        let (ns, veth) = (s.netns(host), s.veth(host));
        // A namespace of this name can only be a leftover of this instance (a failed earlier setup).
        if ip(&["netns", "list"])?
            .lines()
            .any(|l| l.split_whitespace().next() == Some(ns.as_str()))
        {
            remove_netns(&ns);
        }
        clear_stale_link(&veth);
        let addr = format!("{}/24", s.pod_ip(host));
        let gw = s.gateway().to_string();
        let result = (|| {
            ip(&["netns", "add", &ns])?;
            ip(&[
                "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", &ns,
            ])?;
            ip(&["link", "set", &veth, "master", &s.bridge(), "up"])?;
            ip(&["-n", &ns, "addr", "add", &addr, "dev", "eth0"])?;
            ip(&["-n", &ns, "link", "set", "eth0", "up"])?;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
            ip(&["-n", &ns, "route", "add", "default", "via", &gw])?;
            Ok(())
        })();
        if result.is_err() {
            remove_netns(&ns);
        }
        result
    }

    pub fn remove_pod(&self, host: u8) {
        remove_netns(&self.netns(host));
    }

    /// The block an `ip netns` name belongs to, for names this module makes.
    fn block_of_netns(name: &str) -> Option<u8> {
        name.strip_prefix("qg-")?.split('-').next()?.parse().ok()
    }
    fn block_of_bridge(name: &str) -> Option<u8> {
        name.strip_prefix("qgbr")?.parse().ok()
    }
}

/// A claimed /24 with its bridge up; dropping it does not remove anything (see [`Host::release`]).
#[derive(Debug)]
pub struct Host {
    pub subnet: Subnet,
    /// Holds the flock for the life of the process (or until released).
    _lock: File,
}

pub fn ip(args: &[&str]) -> Result<String, NetError> {
    let out = Command::new("ip").args(args).output().map_err(|e| NetError::Ip {
        args: args.join(" "),
        message: e.to_string(),
    })?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(NetError::Ip {
            args: args.join(" "),
            message: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        })
    }
}

/// Whether this host can make network namespaces (`ip` present, and allowed to).
pub fn available() -> Result<(), NetError> {
    ip(&["netns", "list"]).map(|_| ())
}

/// Names of our namespaces and bridges now on the host.
fn present() -> Result<(Vec<String>, Vec<String>), NetError> {
    let ns = ip(&["netns", "list"])?
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with("qg-"))
        .map(String::from)
        .collect();
    let bridges = ip(&["-o", "link", "show", "type", "bridge"])?
        .lines()
        .filter_map(|l| l.split(':').nth(1))
        .map(|n| n.trim().split('@').next().unwrap_or("").to_owned())
        .filter(|n| n.starts_with("qgbr"))
        .collect();
    Ok((ns, bridges))
}

/// Makes sure no host link named `veth` is left before a pod's pair is made with that name. The
/// block is this instance's (its lock is held) and the host index is free, so such a link is a
/// leftover: the host end of a namespace deleted while its processes were still exiting (a crashed
/// or killed earlier instance of this block), which the kernel frees once they are gone. Wait a
/// little for that, then delete the link (which destroys the pair); `ip link add` would otherwise
/// fail with "File exists" and the pod with it.
fn clear_stale_link(veth: &str) {
    for _ in 0..20 {
        if ip(&["link", "show", veth]).is_err() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    tracing::warn!(
        link = veth,
        "a leftover pod link of this block is still there; deleting it"
    );
    if let Err(e) = ip(&["link", "del", veth]) {
        tracing::warn!(link = veth, error = %e, "could not delete a leftover pod link");
    }
}

/// Kills whatever runs in namespace `name` and deletes it (its veth goes with it).
pub fn remove_netns(name: &str) {
    if let Ok(pids) = ip(&["netns", "pids", name]) {
        let pids: Vec<&str> = pids.split_whitespace().collect();
        if !pids.is_empty() {
            let _ = Command::new("kill").arg("-KILL").args(&pids).output();
        }
    }
    if let Err(e) = ip(&["netns", "del", name]) {
        tracing::warn!(netns = name, error = %e, "could not delete a pod network namespace");
    }
}

impl Host {
    /// Takes the first free /24 (removing leftovers of crashed runs on the way, for every index whose
    /// lock is free) and brings its bridge up.
    pub fn claim(state_dir: &Path) -> Result<Host, NetError> {
        let state = |source| NetError::State {
            path: state_dir.to_owned(),
            source,
        };
        std::fs::create_dir_all(state_dir).map_err(state)?;
        let (netns, bridges) = present()?;
        let mut claimed: Option<Host> = None;
        for block in FIRST_BLOCK..=LAST_BLOCK {
            let subnet = Subnet { block };
            let leftovers = netns.iter().any(|n| Subnet::block_of_netns(n) == Some(block))
                || bridges.iter().any(|b| Subnet::block_of_bridge(b) == Some(block));
            if claimed.is_some() && !leftovers {
                continue;
            }
            let lock_path = state_dir.join(format!("{block}.lock"));
            let file = OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&lock_path)
                .map_err(|source| NetError::State {
                    path: lock_path.clone(),
                    source,
                })?;
            if file.try_lock().is_err() {
                continue; // A live instance's.
            }
            if leftovers {
                tracing::info!(subnet = %subnet.cidr(), "removing pod networks left by a quotagate that is gone");
                for n in netns.iter().filter(|n| Subnet::block_of_netns(n) == Some(block)) {
                    remove_netns(n);
                }
                if bridges.contains(&subnet.bridge()) {
                    ip(&["link", "del", &subnet.bridge()])?;
                }
            }
            if claimed.is_none() {
                let gw = format!("{}/24", subnet.gateway());
                ip(&["link", "add", &subnet.bridge(), "type", "bridge"])?;
                ip(&["addr", "add", &gw, "dev", &subnet.bridge()])?;
                ip(&["link", "set", &subnet.bridge(), "up"])?;
                claimed = Some(Host { subnet, _lock: file });
            }
            // An index only cleaned is unlocked when `file` drops here.
        }
        claimed.ok_or(NetError::NoFreeBlock)
    }

    /// Removes every namespace of this instance and its bridge, and gives the /24 up.
    pub fn release(self) {
        if let Ok((netns, _)) = present() {
            for n in netns
                .iter()
                .filter(|n| Subnet::block_of_netns(n) == Some(self.subnet.block))
            {
                remove_netns(n);
            }
        }
        if let Err(e) = ip(&["link", "del", &self.subnet.bridge()]) {
            tracing::warn!(bridge = %self.subnet.bridge(), error = %e, "could not delete the pod bridge");
        }
        // The lock file stays: removing it could let two later instances lock two different files.
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fit_and_parse_back() {
        let s = Subnet { block: 254 };
        assert!(s.veth(254).len() <= 15 && s.bridge().len() <= 15);
        assert_eq!(s.pod_ip(7).to_string(), "10.244.254.7");
        assert_eq!(s.gateway().to_string(), "10.244.254.1");
        assert_eq!(Subnet::block_of_netns(&s.netns(7)), Some(254));
        assert_eq!(Subnet::block_of_bridge(&s.bridge()), Some(254));
        assert_eq!(Subnet::block_of_netns("qg-x-1"), None);
        assert_eq!(Subnet::block_of_netns("other"), None);
        // Distinct pods of distinct blocks never share a veth name.
        assert_ne!(Subnet { block: 130 }.veth(25), Subnet { block: 13 }.veth(25));
    }
}
