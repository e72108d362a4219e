//! One call that starts a whole embedded cluster: API server, simulators, optional loopback listener.
//! What `quotagate run --embedded`, `quotagate demo` and end-to-end tests need.

use super::sim::{self, SimConfig};
use super::{AdmissionHook, EmbeddedServer, ServeError, ServerConfig};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

#[derive(Clone, Debug, Default)]
pub struct ClusterOptions {
    pub server: ServerConfig,
    pub sims: SimConfig,
    /// Also serve on this loopback address (port 0 picks one), for kubectl.
    pub listen: Option<SocketAddr>,
    /// Where to write a kubeconfig for the listener.
    pub kubeconfig_out: Option<PathBuf>,
}

pub struct EmbeddedCluster {
    pub server: Arc<EmbeddedServer>,
    /// An in-process client (namespace "default").
    pub client: kube::Client,
    /// The bound loopback address, when `listen` was given.
    pub addr: Option<SocketAddr>,
    cancel: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
}

impl EmbeddedCluster {
    pub async fn start(
        crds: &(impl super::CrdSource + ?Sized),
        hook: Arc<dyn AdmissionHook>,
        opts: ClusterOptions,
    ) -> Result<Self, ServeError> {
        let server = EmbeddedServer::open(crds, hook, opts.server.clone())?;
        let cancel = CancellationToken::new();
        let client = server.client();
        let addr = match opts.listen {
            Some(listen) => {
                let (addr, _serving) = server
                    .spawn_tcp(listen, opts.kubeconfig_out.as_deref(), cancel.clone())
                    .await?;
                Some(addr)
            }
            None => None,
        };
        if let Some(rt) = opts.sims.node.as_ref().and_then(|n| n.runtime.clone()) {
            server.runtimes.register(rt);
        }
        let tasks = sim::spawn(client.clone(), &opts.sims, cancel.clone());
        Ok(EmbeddedCluster {
            server,
            client,
            addr,
            cancel,
            tasks,
        })
    }

    /// Stops the listener and the simulators (the in-process client keeps working on the store).
    pub fn shutdown(&self) {
        self.cancel.cancel();
    }

    /// Resolves once everything started by `start` has stopped (after `shutdown`).
    pub async fn stopped(mut self) {
        self.cancel.cancel();
        for t in self.tasks.drain(..) {
            let _ = t.await;
        }
    }
}

impl Drop for EmbeddedCluster {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}
