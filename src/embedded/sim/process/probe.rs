//! Probes as the kubelet runs them: `exec` inside the container's namespaces (`nsenter`), `httpGet` and
//! `tcpSocket` from the host to the pod's address, each with its timeout; a result counts after
//! `successThreshold`/`failureThreshold` consecutive results. gRPC probes are not run (they fail).

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Check {
    Exec(Vec<String>),
    Http {
        port: u16,
        path: String,
        host: Option<String>,
        headers: Vec<(String, String)>,
    },
    Tcp {
        port: u16,
    },
    /// What the runtime cannot run (gRPC, HTTPS, a port name the container does not declare).
    Unsupported(String),
}

/// A probe with the API's defaults filled in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spec {
    pub check: Check,
    pub initial_delay: Duration,
    pub period: Duration,
    pub timeout: Duration,
    pub success_threshold: u32,
    pub failure_threshold: u32,
}

fn secs(v: Option<i32>, default: u64, min: u64) -> Duration {
    Duration::from_secs(v.and_then(|s| u64::try_from(s).ok()).unwrap_or(default).max(min))
}

fn count(v: Option<i32>, default: u32) -> u32 {
    v.and_then(|s| u32::try_from(s).ok())
        .filter(|n| *n > 0)
        .unwrap_or(default)
}

fn port(p: &IntOrString, c: &Container) -> Result<u16, String> {
    match p {
        IntOrString::Int(n) => u16::try_from(*n).map_err(|_| format!("port {n} is out of range")),
        IntOrString::String(name) => c
            .ports
            .iter()
            .flatten()
            .find(|cp| cp.name.as_deref() == Some(name.as_str()))
            .and_then(|cp| u16::try_from(cp.container_port).ok())
            .ok_or_else(|| format!("the container declares no port named {name:?}")),
    }
}

pub fn spec(p: &Probe, c: &Container) -> Spec {
    let check = if let Some(e) = &p.exec {
        Check::Exec(e.command.clone().unwrap_or_default())
    } else if let Some(h) = &p.http_get {
        match (port(&h.port, c), h.scheme.as_deref()) {
            (Ok(_), Some("HTTPS")) => {
                Check::Unsupported("HTTPS probes are not run by the process runtime".into())
            }
            (Ok(port), _) => Check::Http {
                port,
                path: h
                    .path
                    .clone()
                    .filter(|p| p.starts_with('/'))
                    .unwrap_or_else(|| "/".into()),
                host: h.host.clone().filter(|h| !h.is_empty()),
                headers: h
                    .http_headers
                    .iter()
                    .flatten()
                    .map(|x| (x.name.clone(), x.value.clone()))
                    .collect(),
            },
            (Err(e), _) => Check::Unsupported(e),
        }
    } else if let Some(t) = &p.tcp_socket {
        match port(&t.port, c) {
            Ok(port) => Check::Tcp { port },
            Err(e) => Check::Unsupported(e),
        }
    } else {
        Check::Unsupported("gRPC probes are not run by the process runtime".into())
    };
    Spec {
        check,
        initial_delay: secs(p.initial_delay_seconds, 0, 0),
        period: secs(p.period_seconds, 10, 1),
        timeout: secs(p.timeout_seconds, 1, 1),
        success_threshold: count(p.success_threshold, 1),
        failure_threshold: count(p.failure_threshold, 3),
    }
}

/// Runs one check; `pid` is the container's main process (its namespaces are the pod's).
pub async fn run(check: &Check, pod_ip: &str, pid: u32, env: &[(String, String)], timeout: Duration) -> bool {
    let attempt = async {
        match check {
            Check::Exec(cmd) if !cmd.is_empty() => {
                let mut c = Command::new("nsenter");
                c.arg("-t")
                    .arg(pid.to_string())
                    .args(["-n", "-m", "--"])
                    .args(cmd);
                c.env_clear().envs(env.iter().map(|(k, v)| (k, v)));
                c.stdin(std::process::Stdio::null())
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null());
                c.kill_on_drop(true);
                matches!(c.status().await, Ok(s) if s.success())
            }
            Check::Exec(_) | Check::Unsupported(_) => false,
            Check::Tcp { port } => tokio::net::TcpStream::connect((pod_ip, *port)).await.is_ok(),
            Check::Http {
                port,
                path,
                host,
                headers,
            } => http(pod_ip, *port, path, host.as_deref(), headers)
                .await
                .is_some_and(|code| (200..400).contains(&code)),
        }
    };
    tokio::time::timeout(timeout, attempt).await.unwrap_or(false)
}

/// The status code of one `GET`, read from at most the first KiB of the answer.
async fn http(
    ip: &str,
    port: u16,
    path: &str,
    host: Option<&str>,
    headers: &[(String, String)],
) -> Option<u16> {
    let mut s = tokio::net::TcpStream::connect((ip, port)).await.ok()?;
    let host_header = format!("{}:{port}", host.unwrap_or(ip));
    let mut req = format!(
        "GET {path} HTTP/1.1\r\nHost: {host_header}\r\nUser-Agent: kube-probe/1.33\r\nAccept: */*\r\nConnection: close\r\n"
    );
    for (k, v) in headers {
        // A header a user wrote must not split the request.
        if !k.contains(['\r', '\n']) && !v.contains(['\r', '\n']) {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).await.ok()?;
    let mut buf = [0u8; 1024];
    let mut n = 0;
    while n < buf.len() {
        let got = s.read(&mut buf[n..]).await.ok()?;
        if got == 0 {
            break;
        }
        n += got;
        if buf[..n].contains(&b'\n') {
            break;
        }
    }
    let line = std::str::from_utf8(&buf[..n]).ok()?.lines().next()?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Consecutive results against the thresholds: `Some(verdict)` when the verdict changes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    successes: u32,
    failures: u32,
    pub verdict: Option<bool>,
}

impl Tally {
    pub fn record(&mut self, ok: bool, spec: &Spec) -> Option<bool> {
        if ok {
            self.successes = self.successes.saturating_add(1);
            self.failures = 0;
        } else {
            self.failures = self.failures.saturating_add(1);
            self.successes = 0;
        }
        let verdict = if self.successes >= spec.success_threshold {
            Some(true)
        } else if self.failures >= spec.failure_threshold {
            Some(false)
        } else {
            self.verdict
        };
        let changed = verdict != self.verdict;
        self.verdict = verdict;
        changed.then_some(verdict).flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn kuberay_probes_with_defaults() {
        let c: Container = serde_json::from_value(
            json!({"name": "ray-head", "ports": [{"name": "dashboard", "containerPort": 8265}]}),
        )
        .unwrap();
        // KubeRay's head probes for Ray >= 2.53 (pod_env.rs set_probes).
        let http: Probe = serde_json::from_value(json!({"httpGet": {"path": "/api/healthz", "port": 52365},
            "initialDelaySeconds": 10, "timeoutSeconds": 5, "periodSeconds": 5, "successThreshold": 1, "failureThreshold": 10})).unwrap();
        let s = spec(&http, &c);
        assert_eq!(
            s.check,
            Check::Http {
                port: 52365,
                path: "/api/healthz".into(),
                host: None,
                headers: vec![]
            }
        );
        assert_eq!(
            (s.initial_delay, s.period, s.timeout, s.failure_threshold),
            (
                Duration::from_secs(10),
                Duration::from_secs(5),
                Duration::from_secs(5),
                10
            )
        );
        let exec: Probe = serde_json::from_value(json!({"exec": {"command": ["bash", "-c", "wget -q -O- http://localhost:52365/api/local_raylet_healthz | grep success"]}})).unwrap();
        let s = spec(&exec, &c);
        assert!(matches!(s.check, Check::Exec(ref v) if v.len() == 3));
        assert_eq!(
            (s.period, s.timeout, s.success_threshold, s.failure_threshold),
            (Duration::from_secs(10), Duration::from_secs(1), 1, 3)
        );
        let named: Probe = serde_json::from_value(json!({"tcpSocket": {"port": "dashboard"}})).unwrap();
        assert_eq!(spec(&named, &c).check, Check::Tcp { port: 8265 });
        let unknown: Probe = serde_json::from_value(json!({"tcpSocket": {"port": "nope"}})).unwrap();
        assert!(matches!(spec(&unknown, &c).check, Check::Unsupported(_)));
    }

    #[test]
    fn thresholds_count_consecutive_results() {
        let s = Spec {
            check: Check::Tcp { port: 1 },
            initial_delay: Duration::ZERO,
            period: Duration::from_secs(1),
            timeout: Duration::from_secs(1),
            success_threshold: 2,
            failure_threshold: 3,
        };
        let mut t = Tally::default();
        assert_eq!(t.record(true, &s), None);
        assert_eq!(t.record(true, &s), Some(true));
        assert_eq!(t.record(false, &s), None);
        assert_eq!(t.record(false, &s), None);
        assert_eq!(t.record(true, &s), None, "a success resets the failures");
        assert_eq!(t.record(false, &s), None);
        assert_eq!(t.record(false, &s), None);
        assert_eq!(t.record(false, &s), Some(false));
        assert_eq!(t.verdict, Some(false));
    }

    #[tokio::test]
    async fn http_and_tcp_checks_against_a_local_server() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                let mut buf = [0u8; 512];
                let n = s.read(&mut buf).await.unwrap_or(0);
                let code = if String::from_utf8_lossy(&buf[..n]).starts_with("GET /ok ") {
                    "200 OK"
                } else {
                    "503 Service Unavailable"
                };
                let _ = s
                    .write_all(format!("HTTP/1.1 {code}\r\ncontent-length: 0\r\n\r\n").as_bytes())
                    .await;
            }
        });
        let t = Duration::from_secs(2);
        let http = |path: &str| Check::Http {
            port,
            path: path.into(),
            host: None,
            headers: vec![],
        };
        assert!(run(&http("/ok"), "127.0.0.1", 0, &[], t).await);
        assert!(!run(&http("/bad"), "127.0.0.1", 0, &[], t).await);
        assert!(run(&Check::Tcp { port }, "127.0.0.1", 0, &[], t).await);
        let closed = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        assert!(!run(&Check::Tcp { port: closed }, "127.0.0.1", 0, &[], t).await);
        assert!(!run(&Check::Unsupported("x".into()), "127.0.0.1", 0, &[], t).await);
    }
}
