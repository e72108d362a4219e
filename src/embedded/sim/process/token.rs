//! A projected ServiceAccount token as a kubelet keeps it (`pkg/kubelet/token/token_manager.go`):
//! requested from the TokenRequest API bound to the pod, then requested again once it is older than
//! 80% of its lifetime or than 24 hours (each less a jitter of up to 10 s), and rewritten atomically
//! in the volume (a new file renamed over the old one, so a reader sees the old token or the new,
//! never a part of one).

use std::path::{Path, PathBuf};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

/// The kubelet's default `expirationSeconds` (an hour and seven seconds, the "legacy token" value the
/// API server recognises).
pub const DEFAULT_EXPIRATION: i64 = 3607;
/// A token is refreshed after this long whatever its lifetime.
const MAX_TTL: SignedDuration = SignedDuration::from_hours(24);
const MAX_JITTER_SECS: u64 = 10;
/// After a failed request, the next try.
const RETRY: Duration = Duration::from_secs(10);

/// One token file of a pod's projected volume.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenFile {
    pub path: PathBuf,
    pub expiration_seconds: i64,
    pub audience: Option<String>,
}

/// A token as the API server granted it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Granted {
    pub token: String,
    /// `status.expirationTimestamp`.
    pub expires: Timestamp,
    /// `spec.expirationSeconds` of the answer (the API server may grant another lifetime).
    pub lifetime: i64,
}

/// When a token granted for `lifetime` seconds and expiring at `expires` is due for a refresh: the
/// kubelet's `requiresRefresh` as a time, the earlier of 24 h after its issue and 20% of its lifetime
/// before its end, each less `jitter`.
pub fn refresh_at(expires: Timestamp, lifetime: i64, jitter: Duration) -> Timestamp {
    let lifetime = lifetime.max(0);
    let jitter = SignedDuration::try_from(jitter).unwrap_or(SignedDuration::ZERO);
    let issued = expires - SignedDuration::from_secs(lifetime);
    let by_age = issued + MAX_TTL - jitter;
    let by_end = expires - SignedDuration::from_secs(lifetime * 20 / 100) - jitter;
    by_age.min(by_end)
}

/// A jitter in `[0, 10 s)`, as the kubelet draws one for each check.
pub fn jitter() -> Duration {
    Duration::from_secs(rand::random_range(0..MAX_JITTER_SECS))
}

/// A token for the pod's ServiceAccount, bound to the pod, as a kubelet requests it.
pub async fn request(client: &kube::Client, pod: &Pod, file: &TokenFile) -> Result<Granted, String> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let sa = pod
        .spec
        .as_ref()
        .and_then(|s| s.service_account_name.as_deref())
        .unwrap_or("default");
    let mut spec = json!({
        "expirationSeconds": file.expiration_seconds,
        "boundObjectRef": {"apiVersion": "v1", "kind": "Pod",
            "name": pod.metadata.name, "uid": pod.metadata.uid},
    });
    if let Some(a) = &file.audience {
        spec["audiences"] = json!([a]);
    }
    let body = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec});
    let got: Value = Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .create_subresource("token", sa, &PostParams::default(), &body)
        .await
        .map_err(|e| format!("a token for ServiceAccount {ns}/{sa}: {e}"))?;
    granted(&got).map_err(|e| format!("a token for ServiceAccount {ns}/{sa}: {e}"))
}

/// The token, its end and its lifetime from a TokenRequest answer.
pub fn granted(answer: &Value) -> Result<Granted, String> {
    let token = answer["status"]["token"]
        .as_str()
        .filter(|t| !t.is_empty())
        .ok_or("the answer has no status.token")?;
    let expires: Timestamp = answer["status"]["expirationTimestamp"]
        .as_str()
        .ok_or("the answer has no status.expirationTimestamp")?
        .parse()
        .map_err(|e| format!("status.expirationTimestamp: {e}"))?;
    let lifetime = answer["spec"]["expirationSeconds"]
        .as_i64()
        .ok_or("the answer has no spec.expirationSeconds")?;
    Ok(Granted {
        token: token.to_owned(),
        expires,
        lifetime,
    })
}

/// Writes `bytes` to `path` through a file beside it renamed over it (readable by all, as the
/// kubelet's default mode 0644).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| format!("{}: not a file path", path.display()))?;
    let tmp = path.with_file_name(format!("..{name}.tmp"));
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    }
    std::fs::write(&tmp, bytes).map_err(|e| format!("{}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("{}: {e}", path.display())
    })
}

/// Keeps one token file fresh until the task is dropped: sleeps until its refresh is due, asks
/// `fetch` for a new one and writes it; a failed request is tried again after 10 s, while the old
/// token (still valid for a fifth of its life) stays in place.
pub async fn keep_fresh<F, Fut>(path: PathBuf, first: Granted, mut fetch: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Granted, String>>,
{
    let mut current = first;
    loop {
        let due = refresh_at(current.expires, current.lifetime, jitter());
        let wait = Timestamp::now().duration_until(due);
        if wait.is_positive() {
            tokio::time::sleep(wait.unsigned_abs()).await;
        }
        current = loop {
            let written = match fetch().await {
                Ok(next) => write_atomic(&path, next.token.as_bytes()).map(|()| next),
                Err(e) => Err(e),
            };
            match written {
                Ok(next) => {
                    tracing::info!(file = %path.display(), expires = %next.expires, "process runtime: ServiceAccount token refreshed");
                    break next;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "process runtime: token refresh failed; retrying in 10 s");
                    tokio::time::sleep(RETRY).await;
                }
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    /// The kubelet's schedule (token_manager.go `requiresRefresh`, its tests' cases): an hour's token
    /// at 80% of its life; the API's minimum of 600 s at 480 s; a year's token after 24 h; the jitter
    /// taken off both.
    #[test]
    fn refresh_schedule_as_the_kubelet() {
        let exp = at("2026-01-01T01:00:07Z");
        // 3607 s: refreshed 721 s (20%) before its end.
        assert_eq!(refresh_at(exp, 3607, Duration::ZERO), at("2026-01-01T00:48:06Z"));
        let exp = at("2026-01-01T00:10:00Z");
        assert_eq!(refresh_at(exp, 600, Duration::ZERO), at("2026-01-01T00:08:00Z"));
        assert_eq!(
            refresh_at(exp, 600, Duration::from_secs(7)),
            at("2026-01-01T00:07:53Z")
        );
        // A year: 24 h after issue.
        let exp = at("2027-01-01T00:00:00Z");
        assert_eq!(
            refresh_at(exp, 365 * 24 * 3600, Duration::ZERO),
            at("2026-01-02T00:00:00Z")
        );
        assert_eq!(
            refresh_at(exp, 365 * 24 * 3600, Duration::from_secs(3)),
            at("2026-01-01T23:59:57Z")
        );
        for _ in 0..50 {
            assert!(jitter() < Duration::from_secs(10));
        }
    }

    #[test]
    fn a_tokenrequest_answer() {
        let got = granted(&json!({"spec": {"expirationSeconds": 3607},
            "status": {"token": "abc", "expirationTimestamp": "2026-01-01T01:00:07Z"}}))
        .unwrap();
        assert_eq!(
            got,
            Granted {
                token: "abc".into(),
                expires: at("2026-01-01T01:00:07Z"),
                lifetime: 3607
            }
        );
        assert!(
            granted(&json!({"status": {"token": ""}}))
                .unwrap_err()
                .contains("status.token")
        );
    }

    /// The refresh loop on tokio's paused clock: a 600-s token is replaced at about 480 s (less the
    /// jitter), atomically (no temporary file left), and again by the next one's schedule; a failed
    /// request is retried without touching the file.
    #[tokio::test(start_paused = true)]
    async fn tokens_are_replaced_before_they_expire() {
        let dir = std::env::temp_dir().join(format!("qg-token-test-{}", std::process::id()));
        let path = dir.join("token");
        write_atomic(&path, b"token-0").unwrap();
        let grant = |n: u32| Granted {
            token: format!("token-{n}"),
            expires: Timestamp::now() + SignedDuration::from_secs(600),
            lifetime: 600,
        };
        let calls = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
        let task = tokio::spawn(keep_fresh(path.clone(), grant(0), {
            let calls = calls.clone();
            move || {
                let n = calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                // The second request fails once.
                let r = if n == 2 {
                    Err("refused".to_string())
                } else {
                    Ok(grant(n))
                };
                async move { r }
            }
        }));
        let read = || std::fs::read_to_string(&path).unwrap();
        tokio::time::sleep(Duration::from_secs(460)).await;
        assert_eq!(read(), "token-0", "not refreshed before 80% less the jitter");
        tokio::time::sleep(Duration::from_secs(21)).await;
        assert_eq!(read(), "token-1", "refreshed by 480 s");
        tokio::time::sleep(Duration::from_secs(480 + 20)).await;
        assert_eq!(read(), "token-3", "the failed request retried after 10 s");
        task.abort();
        let left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(left, [std::ffi::OsString::from("token")]);
    }
}
