//! The one kube-runtime shell every controller runs in (kube-runtime gives one `applier`; this is the
//! little around it that each controller used to write again): running a `Controller` with a logging
//! error policy, publishing events, the API answers a reconciler treats as success, and KubeRay's name
//! suffixes.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use super::events::Recorder;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::Resource;
use kube::runtime::Controller;
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use rand::Rng;
use serde::de::DeserializeOwned;

/// What the shell needs from a controller's error type.
pub trait ReconcileError: std::error::Error + Send + Sync + 'static {
    /// Low-cardinality label for logs and metrics.
    fn category(&self) -> &'static str;
    /// The API error behind this one, if any: by default the error's direct source when that is a
    /// `kube::Error` (what thiserror's `Kube(#[from] kube::Error)` variant gives).
    fn kube_error(&self) -> Option<&kube::Error> {
        self.source()?.downcast_ref::<kube::Error>()
    }
}

/// A deleted object (404) or a write that lost a race (409) is normal between controllers: the next
/// event settles it, so it is not worth a warning.
fn is_expected<E: ReconcileError>(e: &E) -> bool {
    e.kube_error().is_some_and(|k| is_not_found(k) || is_conflict(k))
}

/// True for the API's 404 answer.
pub fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404 || s.is_not_found())
}

/// True for the API's 409 answer (AlreadyExists on create, Conflict on update).
pub fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

/// A delete whose object is already gone succeeded.
pub fn ignore_not_found<T>(r: Result<T, kube::Error>) -> Result<Option<T>, kube::Error> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e) if is_not_found(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// A create that lost a race to an identical create succeeded.
pub fn ignore_already_exists<T>(r: Result<T, kube::Error>) -> Result<Option<T>, kube::Error> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e) if is_conflict(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Records an event; a failure to record is logged, never fatal to the reconcile.
pub async fn publish(
    recorder: &Recorder,
    obj: &ObjectReference,
    type_: EventType,
    reason: &str,
    note: impl Into<String>,
) {
    let ev = Event {
        type_,
        reason: reason.into(),
        note: Some(note.into()),
        action: reason.into(),
        secondary: None,
    };
    if let Err(e) = recorder.publish(&ev, obj).await {
        tracing::debug!(error = %e, reason, "could not record event");
    }
}

/// KubeRay's `rand.String(5)` alphabet (no vowels, no confusable digits) for generated names.
pub fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..5)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

/// Runs `controller` until its stream ends. A failed pass is logged (as debug when it only raced a
/// delete or another write) and retried after `backoff(ctx)`.
pub async fn run<K, C, E, F, Fut>(
    controller: Controller<K>,
    name: &'static str,
    reconcile: F,
    ctx: Arc<C>,
    backoff: fn(&C) -> Duration,
) where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    C: Send + Sync + 'static,
    E: ReconcileError,
    F: FnMut(Arc<K>, Arc<C>) -> Fut,
    Fut: std::future::Future<Output = Result<Action, E>> + Send + 'static,
{
    let policy = move |_: Arc<K>, e: &E, ctx: Arc<C>| {
        if is_expected(e) {
            tracing::debug!(controller = name, error = %e, "reconcile raced a delete or a write; retrying");
        } else {
            tracing::warn!(controller = name, error = %e, category = e.category(), "reconcile failed; retrying");
        }
        Action::requeue(backoff(&ctx))
    };
    controller
        .trigger_backoff(TriggerBackoff::default())
        .run(reconcile, policy, ctx)
        .for_each(|res| async move {
            if let Err(e) = res {
                tracing::debug!(controller = name, error = %e, "reconcile");
            }
        })
        .await;
}

/// The pause after an error on a controller's merged watch streams.
///
/// kube-runtime puts one backoff on all of a controller's watches together (its own kind and every
/// owned or watched kind), and resets it only on a good event. When the API server has forgotten the
/// versions they hold (a 410 Expired on resume, routine after its history is compacted), every watch
/// answers with one error before it relists, and those errors arrive back to back. With client-go's
/// delays (0.8 s doubling to 30 s), six watches stall every trigger of the controller for about a
/// minute while its cache is stale, so its guarded writes keep conflicting and nothing it owns moves
/// (chaos seed 23). Here the delays start at 100 ms and stop doubling at 5 s: a burst of expired watches
/// costs a few seconds, and an API server that fails every request still sees one request every 5 s
/// from each controller.
pub struct TriggerBackoff {
    next: Duration,
}

impl TriggerBackoff {
    const FIRST: Duration = Duration::from_millis(100);
    const MAX: Duration = Duration::from_secs(5);
}

impl Default for TriggerBackoff {
    fn default() -> Self {
        TriggerBackoff { next: Self::FIRST }
    }
}

impl Iterator for TriggerBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let now = self.next;
        self.next = (now * 2).min(Self::MAX);
        // Up to a fifth less, so controllers that failed together do not retry together.
        let jitter = rand::rng().random_range(0.8..=1.0);
        Some(now.mul_f64(jitter))
    }
}

impl kube::runtime::utils::Backoff for TriggerBackoff {
    fn reset(&mut self) {
        self.next = Self::FIRST;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16) -> kube::Error {
        kube::Error::Api(kube::core::Status::failure("x", "y").with_code(code).boxed())
    }

    #[test]
    fn not_found_and_conflict_are_recognised() {
        assert!(ignore_not_found::<()>(Err(api_error(404))).unwrap().is_none());
        assert!(ignore_not_found::<()>(Err(api_error(409))).is_err());
        assert!(
            ignore_already_exists::<()>(Err(api_error(409)))
                .unwrap()
                .is_none()
        );
        assert!(ignore_already_exists::<()>(Err(api_error(500))).is_err());
        assert_eq!(ignore_not_found(Ok(1)).unwrap(), Some(1));
    }

    #[test]
    fn the_api_error_is_found_as_the_direct_source_only() {
        #[derive(Debug, thiserror::Error)]
        enum E {
            #[error("kube: {0}")]
            Kube(#[from] kube::Error),
            #[error("encoding: {source}")]
            Encode { source: serde_json::Error },
            #[error("no namespace")]
            NoNamespace,
        }
        impl ReconcileError for E {
            fn category(&self) -> &'static str {
                "test"
            }
        }
        let e = E::Kube(api_error(404));
        assert!(e.kube_error().is_some_and(is_not_found));
        assert!(is_expected(&e));
        let encode = E::Encode {
            source: serde_json::from_str::<u8>("x").unwrap_err(),
        };
        assert!(encode.kube_error().is_none());
        assert!(E::NoNamespace.kube_error().is_none());
    }

    #[test]
    fn suffixes_use_kuberays_alphabet() {
        let s = random_suffix();
        assert_eq!(s.len(), 5);
        assert!(s.chars().all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c)));
    }

    #[test]
    fn a_burst_of_expired_watches_stalls_the_triggers_for_seconds_not_a_minute() {
        use kube::runtime::utils::Backoff;
        let mut b = TriggerBackoff::default();
        // Six watches (a RayService's own, RayClusters, Services, Workloads, Gateways, HTTPRoutes)
        // each answering 410 once, back to back.
        let burst: Duration = b.by_ref().take(6).sum();
        assert!(burst <= Duration::from_millis(6_300), "{burst:?}");
        assert!(burst >= Duration::from_millis(4_000), "{burst:?}");
        // A server failing every request is still asked only every 5 s at most.
        let later: Vec<Duration> = b.by_ref().take(20).collect();
        assert!(
            later
                .iter()
                .all(|d| *d <= Duration::from_secs(5) && *d >= Duration::from_secs(4)),
            "{later:?}"
        );
        b.reset();
        assert!(b.next().unwrap() <= Duration::from_millis(100));
    }
}
