//! The one kube-runtime shell every controller runs in (kube-runtime gives one `applier`; this is the
//! little around it that each controller used to write again): running a `Controller` with a logging
//! error policy, publishing events, the API answers a reconciler treats as success, and KubeRay's name
//! suffixes.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::Resource;
use kube::runtime::Controller;
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use super::events::Recorder;
use rand::Rng;
use serde::de::DeserializeOwned;

/// What the shell needs from a controller's error type.
pub trait ReconcileError: std::error::Error + Send + Sync + 'static {
    /// Low-cardinality label for logs and metrics.
    fn category(&self) -> &'static str;
    /// The API error behind this one, if any.
    fn kube_error(&self) -> Option<&kube::Error>;
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
        .run(reconcile, policy, ctx)
        .for_each(|res| async move {
            if let Err(e) = res {
                tracing::debug!(controller = name, error = %e, "reconcile");
            }
        })
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16) -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure("x", "y")
                .with_code(code)
                .boxed(),
        )
    }

    #[test]
    fn not_found_and_conflict_are_recognised() {
        assert!(
            ignore_not_found::<()>(Err(api_error(404)))
                .unwrap()
                .is_none()
        );
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
    fn suffixes_use_kuberays_alphabet() {
        let s = random_suffix();
        assert_eq!(s.len(), 5);
        assert!(s.chars().all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c)));
    }
}
