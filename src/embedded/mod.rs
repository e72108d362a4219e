//! An in-process Kubernetes API server (the store behind an axum router) and the simulated cluster
//! components that run against it. The router serves `kube::Client::new` in-process and a loopback
//! TCP port for kubectl. See `README.md` beside this file for where it differs from a real server.

pub mod admission;
mod ages;
pub mod aggregated;
pub mod auth;
pub mod binding;
pub mod builtin_schemas;
pub mod cel;
pub mod cluster;
pub mod connections;
pub mod crd_schema;
pub mod defaults;
pub mod discovery;
pub mod durable;
pub mod error;
mod escalation;
pub mod event_fields;
pub mod events;
pub mod faults;
pub mod field_validation;
pub mod fieldset;
#[cfg(test)]
mod fuzz;
pub mod gc;
mod go_json;
mod http;
pub mod limits;
pub mod listener;
pub mod logs;
pub mod managed_fields;
pub mod meta;
pub mod patch;
pub mod printers;
mod printers_status;
mod priority;
pub mod private;
pub mod protobuf;
pub mod proxy;
pub mod prune;
pub mod quota;
pub mod rbac;
mod rbac_bootstrap;
mod refusals;
pub mod registry;
pub mod review;
pub mod root_ca;
pub mod satoken;
mod scale;
pub mod selector;
mod served;
pub mod service_alloc;
pub mod serviceaccount;
pub mod sim;
mod socket;
pub mod store;
mod stored;
pub mod table;
pub mod validation;
pub mod watch;
pub mod webhook_client;
pub mod webhooks;

pub use admission::{AdmissionHook, AllowAll, Operation, QuotagateAdmission};
pub use cluster::{ClusterOptions, EmbeddedCluster};
pub use error::ApiError;
pub use faults::WriteMatch;
pub use registry::{CrdSchema, CrdSource, QuotagateCrds, Registry, ResourceInfo};
pub use store::{Store, StoreConfig};

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub store: StoreConfig,
    /// How often an idle watch that asked for bookmarks gets one.
    pub bookmark_interval: Duration,
    /// Keep the objects in this directory (`--data-dir`), durable before the API answers; `None`
    /// keeps them in memory only. Honoured by [`EmbeddedServer::open`].
    pub data_dir: Option<PathBuf>,
    /// How long an Event lives after its last write (kube-apiserver's `--event-ttl`, default 1 h).
    pub event_ttl: Duration,
    /// Timeouts and caps of the loopback listener (`listener.rs`).
    pub listener: listener::ListenerLimits,
    /// Behave as a real cluster's API server for a separately installed manager (`apiserver
    /// --real-cluster`): call the admission webhooks registered in the store on every create and
    /// update (`webhooks.rs`) and serve apps/v1 Deployments and CRDs (stored only). Off by default: `run --embedded` admits
    /// in process.
    pub real_cluster: bool,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            store: StoreConfig::default(),
            bookmark_interval: Duration::from_secs(30),
            data_dir: None,
            event_ttl: events::DEFAULT_TTL,
            listener: listener::ListenerLimits::default(),
            real_cluster: false,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("the embedded API server only listens on loopback, not {0}")]
    NotLoopback(SocketAddr),
    #[error("binding {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("writing the kubeconfig to {path}: {source}")]
    Kubeconfig { path: String, source: std::io::Error },
    #[error("serving: {0}")]
    Serve(std::io::Error),
    #[error("making the listener's credentials: {0}")]
    Credentials(#[from] auth::AuthError),
    #[error(transparent)]
    Storage(#[from] durable::DurableError),
}

pub struct EmbeddedServer {
    pub registry: Arc<Registry>,
    pub store: Arc<Store>,
    pub config: ServerConfig,
    /// API groups other components serve through this server (`aggregated.rs`).
    pub aggregated: aggregated::Aggregated,
    /// Held across a pod create's quota check and the create, and across each quota status pass, so
    /// two creates cannot both fit the last of a quota (`quota.rs`).
    pub(crate) quota_lock: std::sync::Mutex<()>,
    /// Process runtimes whose pods have output for `pods/log` (`logs.rs`); none: all simulated.
    pub runtimes: logs::Runtimes,
    /// The key ServiceAccount tokens are signed with (`satoken.rs`).
    pub sa_tokens: satoken::TokenKey,
    /// Pods the `services/proxy` subresource reaches other than by dialling them (`proxy.rs`).
    pub pod_networks: proxy::PodNetworks,
    /// The listener's credentials once it serves (`spawn_tcp`): what [`EmbeddedServer::bearer_may`]
    /// checks the admin token against.
    pub(crate) listener_creds: std::sync::OnceLock<Arc<auth::Credentials>>,
    /// The listener's connections once it serves (`spawn_tcp`): [`EmbeddedServer::connections`].
    listener_stats: std::sync::OnceLock<Arc<listener::ListenerStats>>,
}

fn registry_for(crds: &(impl CrdSource + ?Sized), config: &ServerConfig) -> Registry {
    let mut registry = crds.registry();
    if config.real_cluster {
        registry.serve_real_cluster_kinds();
    }
    registry
}

impl EmbeddedServer {
    /// Serves the built-in kinds plus every served version of `crds`; `hook` admits every write.
    pub fn new(crds: &(impl CrdSource + ?Sized), hook: Arc<dyn AdmissionHook>) -> Arc<Self> {
        Self::with_config(crds, hook, ServerConfig::default())
    }

    /// An in-memory server with `config` (its `data_dir` is not used: see [`EmbeddedServer::open`]).
    pub fn with_config(
        crds: &(impl CrdSource + ?Sized),
        hook: Arc<dyn AdmissionHook>,
        config: ServerConfig,
    ) -> Arc<Self> {
        let store = Store::new(config.store.clone(), hook);
        let srv = Arc::new(EmbeddedServer {
            registry: Arc::new(registry_for(crds, &config)),
            runtimes: logs::Runtimes::for_store(&store),
            store: Arc::new(store),
            config,
            aggregated: aggregated::Aggregated::default(),
            quota_lock: std::sync::Mutex::new(()),
            sa_tokens: satoken::TokenKey::default(),
            pod_networks: proxy::PodNetworks::default(),
            listener_creds: std::sync::OnceLock::new(),
            listener_stats: std::sync::OnceLock::new(),
        });
        for ns in ["default", "kube-system", "kube-public"] {
            serviceaccount::ensure_default(&srv.store, &srv.registry, ns);
        }
        events::spawn_ttl(&srv.store, &srv.registry, srv.config.event_ttl);
        srv
    }

    /// A server whose objects live in `config.data_dir` when it is set (loaded now, every write
    /// durable before it is answered), in memory otherwise. Refused when another process holds the
    /// directory, or its data is of another format or unreadable.
    pub fn open(
        crds: &(impl CrdSource + ?Sized),
        hook: Arc<dyn AdmissionHook>,
        config: ServerConfig,
    ) -> Result<Arc<Self>, durable::DurableError> {
        let store = match &config.data_dir {
            Some(dir) => Store::open(config.store.clone(), hook, dir)?,
            None => Store::new(config.store.clone(), hook),
        };
        let srv = Arc::new(EmbeddedServer {
            registry: Arc::new(registry_for(crds, &config)),
            runtimes: logs::Runtimes::for_store(&store),
            store: Arc::new(store),
            config,
            aggregated: aggregated::Aggregated::default(),
            quota_lock: std::sync::Mutex::new(()),
            sa_tokens: satoken::TokenKey::default(),
            pod_networks: proxy::PodNetworks::default(),
            listener_creds: std::sync::OnceLock::new(),
            listener_stats: std::sync::OnceLock::new(),
        });
        for ns in ["default", "kube-system", "kube-public"] {
            serviceaccount::ensure_default(&srv.store, &srv.registry, ns);
        }
        events::spawn_ttl(&srv.store, &srv.registry, srv.config.event_ttl);
        Ok(srv)
    }

    /// kube-controller-manager's root-CA publisher for a new namespace, once the listener serves,
    /// where a real cluster is modelled (`root_ca.rs`).
    pub(crate) fn publish_root_ca(&self, ns: &str) {
        if let (true, Some(creds)) = (self.config.real_cluster, self.listener_creds.get()) {
            root_ca::publish(&self.store, &self.registry, ns, &creds.ca_pem);
        }
    }

    /// The router: a tower service accepted by `kube::Client::new` and by `axum::serve`.
    pub fn router(self: &Arc<Self>) -> axum::Router {
        axum::Router::new()
            .fallback(aggregated::dispatch)
            .with_state(self.clone())
    }

    /// An in-process client (default namespace "default"); its lists and watches leave out
    /// `metadata.managedFields` (`served.rs`).
    pub fn client(self: &Arc<Self>) -> kube::Client {
        let service = tower::ServiceBuilder::new()
            .map_request(|mut req: ::http::Request<kube::client::Body>| {
                req.extensions_mut().insert(served::InProcess);
                req
            })
            .service(self.router());
        kube::Client::new(service, "default")
    }

    /// An in-process client whose every request is authorized by `authz` (403 when no rule allows
    /// it) and recorded there: the manager run under a Role in tests.
    pub fn client_as(self: &Arc<Self>, authz: Arc<rbac::Authorizer>) -> kube::Client {
        let principal = rbac::Principal(authz);
        let service = tower::ServiceBuilder::new()
            .map_request(move |mut req: ::http::Request<kube::client::Body>| {
                req.extensions_mut().insert(principal.clone());
                req.extensions_mut().insert(served::InProcess);
                req
            })
            .service(self.router());
        kube::Client::new(service, "default")
    }

    /// What the loopback listener holds open (None before `spawn_tcp`): HTTP/2 connections, HTTP/1.1
    /// ones, TLS handshakes, the untrusted among them.
    pub fn connections(&self) -> Option<listener::OpenConnections> {
        self.listener_stats.get().map(|s| s.snapshot())
    }

    /// Binds `listen` (loopback only; port 0 picks one) and serves it over TLS with fresh
    /// credentials (`auth`): a self-signed CA and a bearer token, written only into the kubeconfig
    /// at `kubeconfig_out` (mode 0600); without it nobody can authenticate. Serves in a background
    /// task until `cancel` fires. Returns the bound address.
    pub async fn spawn_tcp(
        self: &Arc<Self>,
        listen: SocketAddr,
        kubeconfig_out: Option<&Path>,
        cancel: CancellationToken,
    ) -> Result<(SocketAddr, tokio::task::JoinHandle<Result<(), ServeError>>), ServeError> {
        if !listen.ip().is_loopback() {
            return Err(ServeError::NotLoopback(listen));
        }
        let creds = Arc::new(match &self.config.data_dir {
            Some(dir) => auth::Credentials::load_or_generate(dir)?,
            None => auth::Credentials::generate()?,
        });
        let listener = listener::bind(listen)
            .await
            .map_err(|source| ServeError::Bind { addr: listen, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| ServeError::Bind { addr: listen, source })?;
        if let Some(path) = kubeconfig_out {
            creds
                .write_kubeconfig(path, addr)
                .map_err(|source| ServeError::Kubeconfig {
                    path: path.display().to_string(),
                    source,
                })?;
        }
        let limits = self.config.listener.clone();
        self.sa_tokens.init_from(&creds.key_pkcs8);
        let _ = self.listener_creds.set(creds.clone());
        if self.config.real_cluster {
            root_ca::publish_all(&self.store, &self.registry, &creds.ca_pem);
        }
        let router = listener::authenticated(self.clone(), creds.clone(), &limits);
        let stats = self
            .listener_stats
            .get_or_init(|| listener::ListenerStats::new(&limits))
            .clone();
        let handle = tokio::spawn(async move {
            listener::serve_tls_authenticated(listener, router, creds.tls.clone(), limits, stats, cancel)
                .await
                .map_err(ServeError::Serve)
        });
        Ok((addr, handle))
    }
}

/// Serves on `listen` until `cancel` fires (what `quotagate run --embedded` calls).
pub async fn serve_tcp(
    server: Arc<EmbeddedServer>,
    listen: SocketAddr,
    kubeconfig_out: Option<&Path>,
    cancel: CancellationToken,
) -> Result<(), ServeError> {
    let (addr, handle) = server.spawn_tcp(listen, kubeconfig_out, cancel).await?;
    tracing::info!(%addr, "embedded API server listening");
    match handle.await {
        Ok(r) => r,
        Err(e) => Err(ServeError::Serve(std::io::Error::other(e))),
    }
}
