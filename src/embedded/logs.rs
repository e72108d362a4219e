//! `GET /api/v1/namespaces/{ns}/pods/{name}/log` (`kubectl logs`). A pod whose container runs as a
//! process here (a runtime registered with [`Runtimes::register`], e.g. the real-Ray runtime) gets
//! that process's output; a pod only the node simulator runs has no process and no output, and
//! gets a 400 Status saying so (kubectl prints `Error from server (BadRequest): ...`), the way the
//! real server answers for a container that has no log yet. NotFound is only for a pod that does
//! not exist. The query is checked as the real server checks it (`container`, `follow`, `previous`,
//! `timestamps`, `tailLines`, `limitBytes`, `sinceSeconds`).

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use bytes::Bytes;
use futures::Stream;
use serde_json::Value;

use super::error::ApiError;
use super::registry::Registry;
use super::store::Store;

/// What a log request asks for, checked.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LogRequest {
    pub namespace: String,
    pub pod: String,
    pub container: String,
    pub follow: bool,
    pub previous: bool,
    pub timestamps: bool,
    pub tail_lines: Option<u64>,
    pub limit_bytes: Option<u64>,
    pub since_seconds: Option<u64>,
}

/// A container's output, as it comes.
pub type LogStream = Pin<Box<dyn Stream<Item = Bytes> + Send>>;

/// Something that runs pods' containers as processes and has their output.
pub trait LogSource: Send + Sync {
    /// The output of `req.container` of `req.pod`; `None` when this runtime does not run it. The
    /// source honours `follow` and `since_seconds`; [`tail`] applies `tail_lines` and `limit_bytes`
    /// to a finished output.
    fn logs(&self, req: &LogRequest) -> Option<LogStream>;
}

/// The runtimes registered with a server (none by default: every pod is simulated).
#[derive(Default)]
pub struct Runtimes {
    sources: RwLock<Vec<Arc<dyn LogSource>>>,
    /// The store's flag that leaves Services' ClusterIPs to the process runtime's Service proxy
    /// (`service_alloc.rs`): the only runtime there is routes the addresses it hands out.
    cluster_ips_elsewhere: Option<Arc<AtomicBool>>,
}

impl Runtimes {
    /// The runtimes of the server over `store`.
    pub fn for_store(store: &Store) -> Runtimes {
        Runtimes {
            sources: RwLock::default(),
            cluster_ips_elsewhere: Some(store.cluster_ips_elsewhere()),
        }
    }

    pub fn register(&self, source: Arc<dyn LogSource>) {
        if let Some(flag) = &self.cluster_ips_elsewhere {
            flag.store(true, Ordering::Relaxed);
        }
        self.sources
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .push(source);
    }

    fn logs(&self, req: &LogRequest) -> Option<LogStream> {
        let sources = self
            .sources
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        sources.iter().find_map(|s| s.logs(req))
    }
}

/// `tail_lines` and `limit_bytes` of a finished output, as the kubelet applies them: the last lines
/// first, then the first bytes of those. Allocates no more than the output's own size.
pub fn tail(output: &[u8], req: &LogRequest) -> Bytes {
    let mut start = 0;
    if let Some(n) = req.tail_lines {
        let body = output.strip_suffix(b"\n").unwrap_or(output);
        let mut seen = 0u64;
        start = output.len();
        if n > 0 {
            start = 0;
            for (i, b) in body.iter().enumerate().rev() {
                if *b == b'\n' {
                    seen += 1;
                    if seen == n {
                        start = i + 1;
                        break;
                    }
                }
            }
        }
    }
    let rest = &output[start..];
    let end = req.limit_bytes.map_or(rest.len(), |l| {
        usize::try_from(l).unwrap_or(usize::MAX).min(rest.len())
    });
    Bytes::copy_from_slice(&rest[..end])
}

fn bad(message: impl Into<String>) -> ApiError {
    ApiError::bad_request(message)
}

fn flag(query: &[(String, String)], k: &str) -> Result<bool, ApiError> {
    match query
        .iter()
        .rev()
        .find(|(key, _)| key == k)
        .map(|(_, v)| v.as_str())
    {
        None | Some("" | "false" | "0") => Ok(false),
        Some("true" | "1") => Ok(true),
        Some(v) => Err(bad(format!("{k}: Invalid value: {v:?}: must be true or false"))),
    }
}

/// A non-negative count; `positive` refuses 0 too (`limitBytes`, `sinceSeconds` must be > 0).
fn count(query: &[(String, String)], k: &str, positive: bool) -> Result<Option<u64>, ApiError> {
    let Some(v) = query
        .iter()
        .rev()
        .find(|(key, _)| key == k)
        .map(|(_, v)| v.as_str())
        .filter(|v| !v.is_empty())
    else {
        return Ok(None);
    };
    let n: i64 = v
        .parse()
        .map_err(|_| bad(format!("{k}: Invalid value: {v:?}: must be an integer")))?;
    if n < 0 || (positive && n == 0) {
        let rule = if positive {
            "must be greater than 0"
        } else {
            "must be greater than or equal to 0"
        };
        return Err(bad(format!("{k}: Invalid value: {n}: {rule}")));
    }
    Ok(Some(n.unsigned_abs()))
}

fn container_names(pod: &Value) -> Vec<String> {
    let names = |field: &str| {
        pod.pointer(&format!("/spec/{field}"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| c.get("name").and_then(Value::as_str).map(String::from))
            .collect::<Vec<_>>()
    };
    [
        names("containers"),
        names("initContainers"),
        names("ephemeralContainers"),
    ]
    .concat()
}

/// The checked request for pod `name` in `namespace`: NotFound when there is no such pod, 400 for a
/// container it does not have or a malformed parameter.
pub fn request(
    store: &Store,
    registry: &Registry,
    namespace: &str,
    name: &str,
    query: &[(String, String)],
) -> Result<LogRequest, ApiError> {
    let info = registry
        .find("", "v1", "pods")
        .ok_or_else(|| ApiError::not_found("pods", name))?;
    let pod = store.get(&info, Some(namespace), name)?;
    let all = container_names(&pod);
    let main: Vec<&Value> = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .collect();
    let asked = query
        .iter()
        .rev()
        .find(|(k, _)| k == "container")
        .map(|(_, v)| v.clone())
        .filter(|v| !v.is_empty());
    let container = match asked {
        Some(c) if all.contains(&c) => c,
        Some(c) => return Err(bad(format!("container {c} is not valid for pod {name}"))),
        None if main.len() == 1 => main[0]
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        None => {
            return Err(bad(format!(
                "a container name must be specified for pod {name}, choose one of: [{}]",
                all.join(" ")
            )));
        }
    };
    Ok(LogRequest {
        namespace: namespace.to_string(),
        pod: name.to_string(),
        container,
        follow: flag(query, "follow")?,
        previous: flag(query, "previous")?,
        timestamps: flag(query, "timestamps")?,
        tail_lines: count(query, "tailLines", false)?,
        limit_bytes: count(query, "limitBytes", true)?,
        since_seconds: count(query, "sinceSeconds", true)?,
    })
}

/// The log of a checked request: the runtime's output, or the 400 that says the pod is simulated.
pub fn logs(runtimes: &Runtimes, req: &LogRequest) -> Result<LogStream, ApiError> {
    if let Some(s) = runtimes.logs(req) {
        return Ok(s);
    }
    Err(bad(format!(
        "container {:?} in pod {:?} has no log: the pod is simulated by the embedded cluster's node agent and no process runs it (only pods of a process runtime have output)",
        req.container, req.pod
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embedded::{AllowAll, EmbeddedServer};
    use serde_json::json;

    fn q(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn tail_and_limit_cut_as_the_kubelet_does() {
        let out = b"a\nb\nc\n";
        let req = |tail: Option<u64>, limit: Option<u64>| LogRequest {
            tail_lines: tail,
            limit_bytes: limit,
            ..Default::default()
        };
        assert_eq!(&tail(out, &req(None, None))[..], b"a\nb\nc\n");
        assert_eq!(&tail(out, &req(Some(2), None))[..], b"b\nc\n");
        assert_eq!(&tail(out, &req(Some(0), None))[..], b"");
        assert_eq!(&tail(out, &req(Some(u64::MAX), None))[..], b"a\nb\nc\n");
        assert_eq!(&tail(out, &req(Some(2), Some(3)))[..], b"b\nc");
        assert_eq!(&tail(out, &req(None, Some(u64::MAX)))[..], b"a\nb\nc\n");
        assert_eq!(&tail(b"no newline", &req(Some(1), None))[..], b"no newline");
    }

    #[test]
    fn the_request_is_checked_as_the_real_server_checks_it() {
        let srv = EmbeddedServer::new(&[], Arc::new(AllowAll));
        let pods = srv.registry.find("", "v1", "pods").unwrap();
        let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "x"}], "initContainers": [{"name": "init", "image": "x"}]}});
        srv.store.create(&pods, Some("default"), pod, false).unwrap();
        let r = |pairs: &[(&str, &str)]| request(&srv.store, &srv.registry, "default", "p", &q(pairs));
        let missing = request(&srv.store, &srv.registry, "default", "nope", &[]).unwrap_err();
        assert_eq!((missing.code, missing.reason.as_str()), (404, "NotFound"));
        let e = r(&[]).unwrap_err();
        assert_eq!(e.code, 400);
        assert!(e.message.contains("choose one of: [a b init]"), "{}", e.message);
        assert!(
            r(&[("container", "zzz")])
                .unwrap_err()
                .message
                .contains("container zzz is not valid for pod p")
        );
        let ok = r(&[("container", "b"), ("tailLines", "5"), ("follow", "true")]).unwrap();
        assert_eq!(
            (ok.container.as_str(), ok.tail_lines, ok.follow),
            ("b", Some(5), true)
        );
        assert!(r(&[("container", "init")]).is_ok());
        for (k, v) in [
            ("tailLines", "-1"),
            ("limitBytes", "0"),
            ("sinceSeconds", "x"),
            ("follow", "maybe"),
            ("tailLines", "99999999999999999999"),
        ] {
            let e = r(&[("container", "a"), (k, v)]).unwrap_err();
            assert!(
                e.code == 400 && e.message.starts_with(k),
                "{k}={v}: {}",
                e.message
            );
        }
        let simulated = logs(&srv.runtimes, &ok).err().unwrap();
        assert_eq!(simulated.code, 400);
        assert!(simulated.message.contains("simulated"), "{}", simulated.message);
    }

    struct Fixed;
    impl LogSource for Fixed {
        fn logs(&self, req: &LogRequest) -> Option<LogStream> {
            (req.pod == "p").then(|| Box::pin(futures::stream::iter([tail(b"one\ntwo\n", req)])) as LogStream)
        }
    }

    #[tokio::test]
    async fn a_registered_runtime_answers_for_its_pods() {
        use futures::StreamExt;
        let rt = Runtimes::default();
        rt.register(Arc::new(Fixed));
        let req = LogRequest {
            pod: "p".into(),
            tail_lines: Some(1),
            ..Default::default()
        };
        let out: Vec<Bytes> = logs(&rt, &req).unwrap().collect().await;
        assert_eq!(out.concat(), b"two\n");
        assert!(
            logs(
                &rt,
                &LogRequest {
                    pod: "q".into(),
                    ..Default::default()
                }
            )
            .is_err()
        );
    }
}
