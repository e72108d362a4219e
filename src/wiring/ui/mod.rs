//! The web view (`--ui-addr`): ClusterQueues and cohorts with usage bars, the workloads of each queue
//! in queue order and why a pending one waits, the Topology domains of TAS flavors, and RayServices
//! with their quota gate and traffic chart; every object's YAML on click.
//!
//! It reads the manager's own watch caches (plus its own Ray and Event watchers, started once per
//! process): one render loop turns them into HTML when a resource version changed, and every
//! browser gets that HTML over server-sent events. A browser never causes an API request. The page
//! and its assets are compiled into the binary; nothing is fetched from the internet.

mod domains;
mod model;
mod server;
pub mod shortfall;
pub mod view;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

pub use model::{EventLog, History, Snapshot, Stores};
pub use server::spawn;

/// Where the view listens when `--ui-addr` is given without an address.
pub const DEFAULT_ADDR: &str = "127.0.0.1:8080";

#[derive(Debug, thiserror::Error)]
pub enum UiError {
    #[error(
        "--ui-addr {0} is not a loopback address: the view shows every ClusterQueue, Workload and RayService to whoever reaches it; pass --ui-allow-remote to serve it there anyway"
    )]
    NotLoopback(SocketAddr),
    #[error("web view on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// The view's bound listener, handed to the manager (bound early so the caller can print its address
/// and a busy port fails before anything starts).
#[derive(Clone, Debug)]
pub struct UiListener {
    pub addr: SocketAddr,
    listener: Arc<Mutex<Option<std::net::TcpListener>>>,
}

impl UiListener {
    /// Binds `addr`; a non-loopback address is refused unless `allow_remote`.
    pub fn bind(addr: SocketAddr, allow_remote: bool) -> Result<UiListener, UiError> {
        if !addr.ip().is_loopback() && !allow_remote {
            return Err(UiError::NotLoopback(addr));
        }
        let l = std::net::TcpListener::bind(addr).map_err(|source| UiError::Bind { addr, source })?;
        l.set_nonblocking(true)
            .map_err(|source| UiError::Bind { addr, source })?;
        let bound = l.local_addr().map_err(|source| UiError::Bind { addr, source })?;
        Ok(UiListener {
            addr: bound,
            listener: Arc::new(Mutex::new(Some(l))),
        })
    }

    /// The line to tell the user where the view is and who can reach it.
    pub fn announcement(&self) -> String {
        if self.addr.ip().is_loopback() {
            format!(
                "web view on http://{}/ (loopback only: open it on this machine, or tunnel to it with ssh -L)",
                self.addr
            )
        } else {
            format!(
                "web view on http://{}/ (NOT loopback: anyone who reaches this address sees every ClusterQueue, Workload and RayService)",
                self.addr
            )
        }
    }

    /// The listener, once: a second manager on the same `UiListener` gets `None`.
    fn take(&self) -> Option<std::net::TcpListener> {
        self.listener.lock().ok()?.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_a_non_loopback_address_unless_allowed() {
        let addr: SocketAddr = "0.0.0.0:0".parse().unwrap();
        let err = UiListener::bind(addr, false).unwrap_err();
        assert!(err.to_string().contains("--ui-allow-remote"), "{err}");
        let l = UiListener::bind(addr, true).unwrap();
        assert!(l.announcement().contains("NOT loopback"), "{}", l.announcement());
        let l = UiListener::bind("127.0.0.1:0".parse().unwrap(), false).unwrap();
        assert_ne!(l.addr.port(), 0);
        assert!(l.announcement().contains("loopback only"), "{}", l.announcement());
        assert!(l.take().is_some());
        assert!(l.take().is_none(), "the listener is handed out once");
    }
}
