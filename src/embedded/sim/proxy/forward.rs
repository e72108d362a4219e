//! One ClusterIP port's listener: every accepted connection goes to a ready endpoint of the Service
//! as the EndpointSlices say at that moment (round robin), bytes copied both ways until either side
//! closes. No endpoint, or none accepting: the connection is closed, as kube-proxy's userspace mode did.

use std::collections::{BTreeMap, HashMap};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use k8s_openapi::api::core::v1::ServicePort;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// Ready endpoints of one Service: slice port name -> (target port, addresses).
pub type Targets = BTreeMap<String, (u16, Vec<Ipv4Addr>)>;
/// By `namespace/name`: the Service's ports and its ready endpoints.
pub type Backends = Arc<RwLock<HashMap<String, (Vec<ServicePort>, Targets)>>>;

/// How long one endpoint gets to accept before the next is tried.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// Where a connection to `port` of `service` may go now.
fn endpoints(backends: &Backends, service: &str, port: u16) -> Vec<SocketAddrV4> {
    service_endpoints(backends, service, port).unwrap_or_default()
}

/// The ready endpoints behind `port` of `service` (`namespace/name`); None when there is no such
/// Service or it has no such port.
pub fn service_endpoints(backends: &Backends, service: &str, port: u16) -> Option<Vec<SocketAddrV4>> {
    let b = backends.read().unwrap_or_else(PoisonError::into_inner);
    let (ports, targets) = b.get(service)?;
    let p = ports.iter().find(|p| u16::try_from(p.port).ok() == Some(port))?;
    let name = p.name.clone().unwrap_or_default();
    Some(
        targets
            .get(&name)
            .map(|(tp, ips)| ips.iter().map(|ip| SocketAddrV4::new(*ip, *tp)).collect())
            .unwrap_or_default(),
    )
}

/// Binds `addr` (a ClusterIP already on the bridge) and serves it until the task is aborted.
pub fn listen(addr: SocketAddrV4, service: String, backends: Backends) -> std::io::Result<JoinHandle<()>> {
    let std = std::net::TcpListener::bind(addr)?;
    std.set_nonblocking(true)?;
    let listener = TcpListener::from_std(std)?;
    Ok(tokio::spawn(async move {
        let mut next = 0usize;
        loop {
            let conn = match listener.accept().await {
                Ok((c, _)) => c,
                Err(e) => {
                    // Out of descriptors or the like: wait rather than spin.
                    tracing::debug!(%service, error = %e, "service proxy: accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let targets = endpoints(&backends, &service, addr.port());
            next = next.wrapping_add(1);
            tokio::spawn(forward(conn, targets, next, service.clone()));
        }
    }))
}

async fn forward(mut conn: TcpStream, targets: Vec<SocketAddrV4>, start: usize, service: String) {
    let _ = conn.set_nodelay(true);
    for i in 0..targets.len() {
        let Some(t) = targets.get(start.wrapping_add(i) % targets.len()) else {
            break;
        };
        match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(t)).await {
            Ok(Ok(mut up)) => {
                let _ = up.set_nodelay(true);
                let _ = tokio::io::copy_bidirectional(&mut conn, &mut up).await;
                return;
            }
            Ok(Err(e)) => {
                tracing::debug!(%service, endpoint = %t, error = %e, "service proxy: endpoint refused; trying the next")
            }
            Err(_) => {
                tracing::debug!(%service, endpoint = %t, "service proxy: endpoint did not accept in time; trying the next")
            }
        }
    }
    tracing::debug!(%service, "service proxy: no endpoint accepted; closing the connection");
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Two loopback "endpoints" behind a loopback listener: connections alternate, a dead endpoint is
    /// skipped, and a Service without endpoints closes the connection.
    #[tokio::test]
    async fn forwards_round_robin_and_skips_refusing_endpoints() {
        async fn echo_server(tag: u8) -> u16 {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let port = l.local_addr().unwrap().port();
            tokio::spawn(async move {
                while let Ok((mut c, _)) = l.accept().await {
                    tokio::spawn(async move {
                        let mut b = [0u8; 1];
                        if c.read_exact(&mut b).await.is_ok() {
                            let _ = c.write_all(&[tag, b[0]]).await;
                        }
                    });
                }
            });
            port
        }
        // Both endpoints on 127.0.0.x with one port: bind two loopback addresses on the same port.
        let port = echo_server(1).await;
        let l2 = TcpListener::bind(("127.0.0.2", port)).await.unwrap();
        tokio::spawn(async move {
            while let Ok((mut c, _)) = l2.accept().await {
                let mut b = [0u8; 1];
                if c.read_exact(&mut b).await.is_ok() {
                    let _ = c.write_all(&[2, b[0]]).await;
                }
            }
        });
        let sp: ServicePort = serde_json::from_value(serde_json::json!({"name": "web", "port": 80})).unwrap();
        let backends: Backends = Arc::default();
        let targets: Targets = BTreeMap::from([(
            "web".to_string(),
            (
                port,
                vec![
                    Ipv4Addr::new(127, 0, 0, 1),
                    Ipv4Addr::new(127, 0, 0, 2),
                    Ipv4Addr::new(127, 0, 0, 3),
                ],
            ),
        )]);
        backends
            .write()
            .unwrap()
            .insert("ns/s".into(), (vec![sp.clone()], targets));
        // The proxy listens on a free loopback port; the Service port it serves is 80.
        let probe = std::net::TcpListener::bind("127.0.0.4:0").unwrap();
        let addr = match probe.local_addr().unwrap() {
            std::net::SocketAddr::V4(a) => a,
            std::net::SocketAddr::V6(_) => unreachable!(),
        };
        drop(probe);
        let mut sp80 = sp.clone();
        sp80.port = i32::from(addr.port());
        backends.write().unwrap().get_mut("ns/s").unwrap().0 = vec![sp80];
        let task = listen(addr, "ns/s".into(), backends.clone()).unwrap();
        let mut seen = Vec::new();
        for i in 0..6u8 {
            let mut c = TcpStream::connect(addr).await.unwrap();
            c.write_all(&[i]).await.unwrap();
            let mut b = [0u8; 2];
            c.read_exact(&mut b).await.unwrap();
            assert_eq!(b[1], i);
            seen.push(b[0]);
        }
        // 127.0.0.3 refuses: its turns go to the next endpoint, so both answer and nothing fails.
        assert!(seen.contains(&1) && seen.contains(&2), "{seen:?}");
        backends.write().unwrap().get_mut("ns/s").unwrap().1.clear();
        let mut c = TcpStream::connect(addr).await.unwrap();
        let mut b = Vec::new();
        assert_eq!(c.read_to_end(&mut b).await.unwrap(), 0, "no endpoints: closed");
        task.abort();
    }
}
