//! Services for the process runtime's pods, as kube-proxy's old userspace mode did it, in process:
//! each Service (not headless, not ExternalName) gets a ClusterIP from this instance's service range
//! (`alloc.rs`), added as a /32 to the pod bridge so the host and every pod reach it, and each of its
//! TCP ports a listener there that forwards every accepted connection to a ready endpoint of the
//! Service's EndpointSlices (round robin; the next endpoint when one refuses). A connection keeps its
//! endpoint for its life: a selector switch moves new connections only, as with kube-proxy.
//!
//! Gateways (`l7.rs`, `routes.rs`): each Gateway gets an address from the same range, and each of its
//! HTTP listeners an HTTP/1.1 proxy there that routes by the attached HTTPRoutes and splits requests by
//! their backends' weights, straight to the backend Services' ready endpoints. The gateway controller
//! (`sim/gateway.rs`) reports a Gateway Programmed, with this address, once its listeners are bound,
//! and accepts an HTTPRoute's generation once the table here was built from it.
//!
//! Names: the pods' hosts files (`process/hosts.rs`) list every Service's ClusterIP, or for a headless
//! Service its ready endpoints' addresses, as cluster DNS would answer.

pub mod alloc;
mod forward;
mod l7;
pub mod routes;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use serde_json::json;
use tokio::task::JoinHandle;

use super::process::ProcessRuntime;
use super::process::hosts::{Names, Record};
use super::process::net::{self, Subnet};
use crate::api::gateway::{Gateway, HTTPRoute};
use forward::{Backends, Targets};

/// A listener of one Service port (`service` is its `namespace/name`), or of a Gateway's HTTP port
/// (`service` is `gateway <namespace/name>`).
struct Listener {
    service: String,
    task: JoinHandle<()>,
}

/// What the data plane made of a Gateway, for its status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GatewayState {
    pub address: Ipv4Addr,
    /// By listener name: whether its port is bound (an HTTP listener) and how many routes attach.
    pub listeners: BTreeMap<String, (bool, i32)>,
}

#[derive(Default)]
struct State {
    /// ClusterIPs (and Gateway addresses) by object UID.
    ips: HashMap<String, (String, Ipv4Addr)>,
    listeners: HashMap<SocketAddrV4, Listener>,
    gateways: HashMap<String, GatewayState>,
    /// The generation of each HTTPRoute (`namespace/name`) the routing table was last built from.
    routes: HashMap<String, i64>,
    /// Per HTTPRoute (`namespace/name`), per parentRef in order: why the Gateway refuses it
    /// (`routes::parent_refusal`), `None` where it is taken.
    refusals: HashMap<String, Vec<Option<(&'static str, String)>>>,
}

pub struct ServiceProxy {
    subnet: Subnet,
    names: Arc<Names>,
    backends: Backends,
    tables: l7::Tables,
    plane: l7::DataPlane,
    state: Mutex<State>,
}

impl std::fmt::Debug for ServiceProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceProxy")
            .field("service_cidr", &alloc::cidr(self.subnet.block))
            .finish_non_exhaustive()
    }
}

fn gateway_key(k: &str) -> String {
    format!("gateway {k}")
}

fn key(ns: &str, name: &str) -> String {
    format!("{ns}/{name}")
}

/// Whether a Service gets a ClusterIP (not headless, not ExternalName).
fn wants_ip(svc: &Service) -> bool {
    let Some(spec) = svc.spec.as_ref() else {
        return false;
    };
    spec.type_.as_deref() != Some("ExternalName") && spec.cluster_ip.as_deref() != Some("None")
}

/// Ready addresses and ports of a Service's slices: port name -> (port, addresses).
fn slice_targets(slices: &[Arc<EndpointSlice>]) -> Targets {
    let mut out: Targets = BTreeMap::new();
    for s in slices {
        if s.address_type != "IPv4" {
            continue;
        }
        let ready: Vec<Ipv4Addr> = s
            .endpoints
            .iter()
            .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) != Some(false))
            .flat_map(|e| e.addresses.iter().filter_map(|a| a.parse().ok()))
            .collect();
        for p in s.ports.iter().flatten() {
            let Some(port) = p.port.and_then(|p| u16::try_from(p).ok()) else {
                continue;
            };
            if p.protocol.as_deref().is_some_and(|pr| pr != "TCP") {
                continue;
            }
            let e = out
                .entry(p.name.clone().unwrap_or_default())
                .or_insert_with(|| (port, Vec::new()));
            e.1.extend(ready.iter().copied());
        }
    }
    for (_, ips) in out.values_mut() {
        ips.sort();
        ips.dedup();
    }
    out
}

impl ServiceProxy {
    pub fn new(rt: &ProcessRuntime) -> Arc<ServiceProxy> {
        let backends: Backends = Arc::new(RwLock::new(HashMap::new()));
        let tables: l7::Tables = Arc::default();
        let plane = l7::DataPlane::new(tables.clone(), backends.clone());
        Arc::new(ServiceProxy {
            subnet: rt.subnet(),
            names: rt.names(),
            backends,
            tables,
            plane,
            state: Mutex::new(State::default()),
        })
    }

    /// The Gateway's address and listeners as the data plane serves them; None until it has an address.
    pub fn gateway(&self, ns: &str, name: &str) -> Option<GatewayState> {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .gateways
            .get(&key(ns, name))
            .cloned()
    }

    /// The generation of the HTTPRoute the routing table holds now.
    pub fn route_generation(&self, ns: &str, name: &str) -> Option<i64> {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .routes
            .get(&key(ns, name))
            .copied()
    }

    /// Per parentRef of the HTTPRoute, in order, as the routing table was last built: why its
    /// Gateway does not take the route (Gateway API's `Accepted=False` reason and message, e.g.
    /// `NotAllowedByListeners` for a namespace the listeners' `allowedRoutes` do not allow), or
    /// `None` where it does (or the parent is no Gateway served here). `None` for a route not seen.
    pub fn route_refusals(&self, ns: &str, name: &str) -> Option<Vec<Option<(&'static str, String)>>> {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .refusals
            .get(&key(ns, name))
            .cloned()
    }

    /// Follows Services and EndpointSlices until dropped (then its listeners close).
    pub async fn run(self: Arc<Self>, client: kube::Client) {
        tracing::info!(service_cidr = %alloc::cidr(self.subnet.block), bridge = %self.subnet.bridge(), "service proxy: ClusterIPs on the pod bridge");
        let _guard = CloseOnDrop(self.clone());
        let (svc_r, svc_w) = reflector::store::<Service>();
        let (eps_r, eps_w) = reflector::store::<EndpointSlice>();
        let (gw_r, gw_w) = reflector::store::<Gateway>();
        let (rt_r, rt_w) = reflector::store::<HTTPRoute>();
        let (ns_r, ns_w) = reflector::store::<Namespace>();
        let svcs = reflector(
            svc_w,
            watcher(Api::<Service>::all(client.clone()), watcher::Config::default()),
        )
        .default_backoff()
        .map(|_| ());
        let eps = reflector(
            eps_w,
            watcher(
                Api::<EndpointSlice>::all(client.clone()),
                watcher::Config::default(),
            ),
        )
        .default_backoff()
        .map(|_| ());
        let gws = reflector(
            gw_w,
            watcher(Api::<Gateway>::all(client.clone()), watcher::Config::default()),
        )
        .default_backoff()
        .map(|_| ());
        let rts = reflector(
            rt_w,
            watcher(Api::<HTTPRoute>::all(client.clone()), watcher::Config::default()),
        )
        .default_backoff()
        .map(|_| ());
        // Namespace labels: a listener's `allowedRoutes` may select route namespaces by them.
        let nss = reflector(
            ns_w,
            watcher(Api::<Namespace>::all(client.clone()), watcher::Config::default()),
        )
        .default_backoff()
        .map(|_| ());
        let mut events = std::pin::pin!(futures::stream::select(
            futures::stream::select(svcs, eps),
            futures::stream::select(futures::stream::select(gws, rts), nss)
        ));
        while events.next().await.is_some() {
            // Apply every event already waiting before one sync.
            while let Some(Some(())) = futures::FutureExt::now_or_never(events.next()) {}
            let traffic = Traffic {
                gateways: gw_r.state(),
                routes: rt_r
                    .state()
                    .iter()
                    .filter_map(|r| serde_json::to_value(&**r).ok())
                    .collect(),
                namespaces: ns_r
                    .state()
                    .iter()
                    .filter_map(|n| {
                        Some((
                            n.metadata.name.clone()?,
                            n.metadata.labels.clone().unwrap_or_default(),
                        ))
                    })
                    .collect(),
            };
            self.sync(&client, &svc_r.state(), &eps_r.state(), &traffic);
        }
    }

    fn sync(
        &self,
        client: &kube::Client,
        services: &[Arc<Service>],
        slices: &[Arc<EndpointSlice>],
        traffic: &Traffic,
    ) {
        let mut by_service: HashMap<String, Vec<Arc<EndpointSlice>>> = HashMap::new();
        for s in slices {
            let ns = s.metadata.namespace.clone().unwrap_or_default();
            if let Some(svc) = s
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("kubernetes.io/service-name"))
            {
                by_service.entry(key(&ns, svc)).or_default().push(s.clone());
            }
        }
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let mut records = Vec::new();
        let mut wanted: HashMap<SocketAddrV4, String> = HashMap::new();
        let mut backends = HashMap::new();
        let mut live = HashSet::new();
        for svc in services {
            let (Some(name), Some(uid)) = (svc.metadata.name.clone(), svc.metadata.uid.clone()) else {
                continue;
            };
            let ns = svc.metadata.namespace.clone().unwrap_or_default();
            let k = key(&ns, &name);
            let targets = slice_targets(by_service.get(&k).map_or(&[][..], |v| &v[..]));
            let process = targets
                .values()
                .any(|(_, ips)| ips.iter().any(|ip| self.subnet.contains(*ip)));
            if !wants_ip(svc) {
                // Headless: the name is the ready endpoints' addresses.
                let mut ips: Vec<Ipv4Addr> = targets
                    .values()
                    .flat_map(|(_, ips)| ips.iter().copied())
                    .collect();
                ips.sort();
                ips.dedup();
                if !ips.is_empty() {
                    records.push(Record {
                        namespace: ns,
                        name,
                        ips,
                        process,
                    });
                }
                continue;
            }
            live.insert(uid.clone());
            let ip = match state.ips.get(&uid) {
                Some((_, ip)) => *ip,
                None => {
                    let taken: HashSet<Ipv4Addr> = state.ips.values().map(|(_, ip)| *ip).collect();
                    let asked = svc
                        .spec
                        .as_ref()
                        .and_then(|s| s.cluster_ip.as_deref())
                        .and_then(|s| s.parse().ok());
                    let Some(ip) = alloc::pick(self.subnet.block, &taken, asked) else {
                        tracing::warn!(service = %k, range = %alloc::cidr(self.subnet.block), "service proxy: no free ClusterIP; the Service is not reachable");
                        continue;
                    };
                    if let Err(e) =
                        net::ip(&["addr", "add", &format!("{ip}/32"), "dev", &self.subnet.bridge()])
                    {
                        tracing::warn!(service = %k, %ip, error = %e, "service proxy: the ClusterIP could not be added to the bridge");
                        continue;
                    }
                    state.ips.insert(uid.clone(), (k.clone(), ip));
                    if asked != Some(ip) {
                        record_cluster_ip(client, &ns, &name, ip);
                    }
                    ip
                }
            };
            records.push(Record {
                namespace: ns,
                name,
                ips: vec![ip],
                process,
            });
            for p in svc.spec.iter().flat_map(|s| s.ports.iter().flatten()) {
                if p.protocol.as_deref().is_some_and(|pr| pr != "TCP") {
                    continue;
                }
                let Ok(port) = u16::try_from(p.port) else { continue };
                wanted.insert(SocketAddrV4::new(ip, port), k.clone());
            }
            backends.insert(
                k,
                (
                    svc.spec
                        .as_ref()
                        .and_then(|s| s.ports.clone())
                        .unwrap_or_default(),
                    targets,
                ),
            );
        }
        *self.backends.write().unwrap_or_else(PoisonError::into_inner) = backends;
        let gateway_ips = self.sync_gateways(&mut state, traffic, &mut live, &mut wanted);
        // Listeners of ports gone (or moved to another Service) close; new ones open.
        state.listeners.retain(|addr, l| {
            let keep = wanted.get(addr) == Some(&l.service);
            if !keep {
                l.task.abort();
            }
            keep
        });
        for (addr, service) in wanted {
            if state.listeners.contains_key(&addr) {
                continue;
            }
            let bound = if service.starts_with("gateway ") {
                self.plane.listen(addr)
            } else {
                forward::listen(addr, service.clone(), self.backends.clone())
            };
            match bound {
                Ok(task) => {
                    state.listeners.insert(addr, Listener { service, task });
                }
                Err(e) => {
                    tracing::warn!(%service, %addr, error = %e, "service proxy: cannot listen on the ClusterIP")
                }
            }
        }
        let gone: Vec<String> = state.ips.keys().filter(|u| !live.contains(*u)).cloned().collect();
        for uid in gone {
            if let Some((_, ip)) = state.ips.remove(&uid) {
                let _ = net::ip(&["addr", "del", &format!("{ip}/32"), "dev", &self.subnet.bridge()]);
            }
        }
        // A Gateway's listeners are bound (or not) now: that is what its status reports.
        let bound: HashSet<SocketAddrV4> = state.listeners.keys().copied().collect();
        for (gw, ip, ports) in gateway_ips {
            if let Some(g) = state.gateways.get_mut(&gw) {
                for (name, port) in ports {
                    if let Some(l) = g.listeners.get_mut(&name) {
                        l.0 = bound.contains(&SocketAddrV4::new(ip, port));
                    }
                }
            }
        }
        drop(state);
        self.names.set_records(records);
    }

    /// Gateways: an address each (from the ClusterIP range), their HTTP listeners wanted, the routing
    /// table rebuilt from the HTTPRoutes. Returns each Gateway's address and HTTP listener ports.
    fn sync_gateways(
        &self,
        state: &mut State,
        traffic: &Traffic,
        live: &mut HashSet<String>,
        wanted: &mut HashMap<SocketAddrV4, String>,
    ) -> Vec<GatewayPorts> {
        let mut tables: HashMap<Ipv4Addr, Vec<routes::Listener>> = HashMap::new();
        let mut gateways = HashMap::new();
        let mut out = Vec::new();
        let gw_json: Vec<serde_json::Value> = traffic
            .gateways
            .iter()
            .filter_map(|g| serde_json::to_value(&**g).ok())
            .collect();
        let attached = routes::attached_routes(&gw_json, &traffic.routes, &traffic.namespaces);
        let mut all_listeners = Vec::new();
        for (gw, v) in traffic.gateways.iter().zip(&gw_json) {
            let (Some(name), Some(uid)) = (gw.metadata.name.clone(), gw.metadata.uid.clone()) else {
                continue;
            };
            let ns = gw.metadata.namespace.clone().unwrap_or_default();
            let k = key(&ns, &name);
            live.insert(uid.clone());
            let ip = match state.ips.get(&uid) {
                Some((_, ip)) => *ip,
                None => {
                    let taken: HashSet<Ipv4Addr> = state.ips.values().map(|(_, ip)| *ip).collect();
                    let Some(ip) = alloc::pick(self.subnet.block, &taken, None) else {
                        tracing::warn!(gateway = %k, range = %alloc::cidr(self.subnet.block), "gateway: no free address; the Gateway is not reachable");
                        continue;
                    };
                    if let Err(e) =
                        net::ip(&["addr", "add", &format!("{ip}/32"), "dev", &self.subnet.bridge()])
                    {
                        tracing::warn!(gateway = %k, %ip, error = %e, "gateway: the address could not be added to the bridge");
                        continue;
                    }
                    state.ips.insert(uid.clone(), (gateway_key(&k), ip));
                    ip
                }
            };
            let mut ls = routes::listeners(v);
            all_listeners.extend(ls.iter().cloned());
            for r in &traffic.routes {
                routes::attach_with(r, &mut ls, &traffic.namespaces);
            }
            let counts = attached.get(&k);
            let mut listeners: BTreeMap<String, (bool, i32)> = BTreeMap::new();
            // Listeners of other protocols are reported, not served.
            for l in &gw.spec.listeners {
                listeners.insert(
                    l.name.clone(),
                    (false, counts.and_then(|c| c.get(&l.name)).copied().unwrap_or(0)),
                );
            }
            let ports: BTreeSet<u16> = ls.iter().map(|l| l.port).collect();
            for p in &ports {
                wanted.insert(SocketAddrV4::new(ip, *p), gateway_key(&k));
            }
            out.push((
                k.clone(),
                ip,
                ls.iter().map(|l| (l.name.clone(), l.port)).collect(),
            ));
            tables.entry(ip).or_default().extend(ls);
            gateways.insert(
                k,
                GatewayState {
                    address: ip,
                    listeners,
                },
            );
        }
        *self.tables.write().unwrap_or_else(PoisonError::into_inner) = tables;
        state.gateways = gateways;
        state.refusals = traffic
            .routes
            .iter()
            .filter_map(|r| {
                let m = r.get("metadata")?;
                let k = key(m.get("namespace")?.as_str()?, m.get("name")?.as_str()?);
                let parents = r
                    .pointer("/spec/parentRefs")
                    .and_then(serde_json::Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(|p| routes::parent_refusal(r, p, &all_listeners, &traffic.namespaces))
                    .collect();
                Some((k, parents))
            })
            .collect();
        state.routes = traffic
            .routes
            .iter()
            .filter_map(|r| {
                let m = r.get("metadata")?;
                let k = key(m.get("namespace")?.as_str()?, m.get("name")?.as_str()?);
                Some((
                    k,
                    m.get("generation")
                        .and_then(serde_json::Value::as_i64)
                        .unwrap_or(0),
                ))
            })
            .collect();
        out
    }

    fn close(&self) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        for (_, l) in state.listeners.drain() {
            l.task.abort();
        }
        for (_, (_, ip)) in state.ips.drain() {
            let _ = net::ip(&["addr", "del", &format!("{ip}/32"), "dev", &self.subnet.bridge()]);
        }
    }
}

/// A Gateway (`namespace/name`), its address and its HTTP listeners' names and ports.
type GatewayPorts = (String, Ipv4Addr, Vec<(String, u16)>);

/// The Gateways and HTTPRoutes (as JSON, what `routes.rs` reads) one sync sees.
struct Traffic {
    gateways: Vec<Arc<Gateway>>,
    routes: Vec<serde_json::Value>,
    namespaces: routes::NamespaceLabels,
}

struct CloseOnDrop(Arc<ServiceProxy>);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// Writes the address into `spec.clusterIP`, as the API server's allocator would have at create.
fn record_cluster_ip(client: &kube::Client, ns: &str, name: &str, ip: Ipv4Addr) {
    let api: Api<Service> = Api::namespaced(client.clone(), ns);
    let name = name.to_owned();
    tokio::spawn(async move {
        let patch = json!({"spec": {"clusterIP": ip.to_string(), "clusterIPs": [ip.to_string()]}});
        if let Err(e) = api
            .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
            .await
        {
            tracing::debug!(service = %name, error = %e, "service proxy: clusterIP not written");
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_targets_by_port_name() {
        let s: EndpointSlice = serde_json::from_value(json!({
            "addressType": "IPv4", "metadata": {"name": "a"},
            "ports": [{"name": "serve", "port": 8000, "protocol": "TCP"}, {"name": "dns", "port": 53, "protocol": "UDP"}],
            "endpoints": [{"addresses": ["10.244.130.3"], "conditions": {"ready": true}},
                          {"addresses": ["10.244.130.4"], "conditions": {"ready": false}},
                          {"addresses": ["10.244.130.2"]}]
        }))
        .unwrap();
        let t = slice_targets(&[Arc::new(s)]);
        assert_eq!(t.len(), 1, "{t:?}");
        assert_eq!(
            t["serve"],
            (
                8000,
                vec![Ipv4Addr::new(10, 244, 130, 2), Ipv4Addr::new(10, 244, 130, 3)]
            )
        );
    }

    #[test]
    fn headless_and_external_names_get_no_cluster_ip() {
        let svc = |spec: serde_json::Value| -> Service {
            serde_json::from_value(json!({"metadata": {"name": "s"}, "spec": spec})).unwrap()
        };
        assert!(wants_ip(&svc(json!({"ports": [{"port": 80}]}))));
        assert!(wants_ip(&svc(json!({"type": "NodePort"}))));
        assert!(!wants_ip(&svc(json!({"clusterIP": "None"}))));
        assert!(!wants_ip(&svc(
            json!({"type": "ExternalName", "externalName": "x.example"})
        )));
    }
}
