//! Leader election on a `coordination.k8s.io/v1` Lease, with client-go's semantics: the holder renews
//! every `retry_period`; anyone may take the lease once `renewTime + leaseDurationSeconds` has passed.
//! Writes use the Lease's resourceVersion, so two candidates can never both win the same round.
//! Only the leader writes (admissions, status, child objects); every replica keeps its caches warm.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use thiserror::Error;
use tokio::sync::watch;

#[derive(Debug, Error)]
pub enum LeaderError {
    #[error("lost the lease {0}: could not renew it within the renew deadline")]
    Lost(String),
    #[error("leader election stopped: nobody listens for leadership changes")]
    Closed,
}

/// What this candidate should do with the lease it just read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Nobody holds a valid lease: take it (create when missing, else replace with transitions + 1,
    /// whether it was run out, released or never held, as client-go counts every acquisition by a
    /// candidate that was not the leader).
    Acquire,
    /// We hold it: bump renewTime.
    Renew,
    /// Someone else holds a lease that has not expired.
    Follow { holder: String },
}

/// Pure decision from the lease as read (None = no Lease object yet).
pub fn decide(spec: Option<&LeaseSpec>, me: &str, now: Timestamp) -> Decision {
    let Some(spec) = spec else {
        return Decision::Acquire;
    };
    let holder = spec.holder_identity.clone().unwrap_or_default();
    if holder.is_empty() {
        return Decision::Acquire;
    }
    if holder == me {
        return Decision::Renew;
    }
    let duration = SignedDuration::from_secs(spec.lease_duration_seconds.unwrap_or(15).max(1) as i64);
    let renewed = spec
        .renew_time
        .as_ref()
        .or(spec.acquire_time.as_ref())
        .map(|t| t.0);
    match renewed {
        Some(t) if t.checked_add(duration).map(|end| end > now).unwrap_or(true) => {
            Decision::Follow { holder }
        }
        _ => Decision::Acquire,
    }
}

/// The spec to write for a decision; `None` for `Follow`.
pub fn next_spec(
    old: Option<&LeaseSpec>,
    decision: &Decision,
    me: &str,
    now: Timestamp,
    duration: Duration,
) -> Option<LeaseSpec> {
    let spec_existed = old.is_some();
    let old = old.cloned().unwrap_or_default();
    match decision {
        Decision::Follow { .. } => None,
        Decision::Renew => Some(LeaseSpec {
            renew_time: Some(MicroTime(now)),
            ..old
        }),
        Decision::Acquire => {
            // client-go's `tryAcquireOrRenew`: a candidate that is not the leader adds one to the
            // transitions of the record it read, even one released (holder empty) or its own stale
            // one; only a Lease created anew starts at 0.
            let existed = spec_existed;
            Some(LeaseSpec {
                holder_identity: Some(me.to_string()),
                lease_duration_seconds: Some(duration.as_secs().max(1) as i32),
                acquire_time: Some(MicroTime(now)),
                renew_time: Some(MicroTime(now)),
                lease_transitions: Some(old.lease_transitions.unwrap_or(0) + i32::from(existed)),
                ..old
            })
        }
    }
}

/// A candidate's identity as controller-runtime makes it: `<prefix>_<UUID>`, the UUID (version 4) new
/// at each start, so a restarted process is a new candidate that waits out (or is handed) its previous
/// incarnation's lease instead of renewing it at once as if it had never stopped. The prefix (a pod's
/// name in a pod, where controller-runtime takes the host name) keeps `kubectl get lease` readable.
pub fn unique_identity(prefix: &str) -> String {
    let mut b: [u8; 16] = rand::random();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{prefix}_{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// The readable part of a holder identity: what precedes the first `_` (a pod's or host's name, which
/// cannot hold one), or the whole identity when it has none (one given with `--identity`).
pub fn identity_prefix(identity: &str) -> &str {
    identity.split_once('_').map_or(identity, |(p, _)| p)
}

#[derive(Clone, Debug)]
pub struct LeaderConfig {
    pub lease_name: String,
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

impl LeaderConfig {
    /// controller-runtime's defaults: 15 s lease, 10 s renew deadline, 2 s retry.
    pub fn new(lease_name: &str, identity: &str) -> Self {
        Self {
            lease_name: lease_name.to_string(),
            identity: identity.to_string(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// One read-decide-write round. Returns whether we hold the lease afterwards.
async fn round(api: &Api<Lease>, cfg: &LeaderConfig) -> Result<bool, kube::Error> {
    let current = api.get_opt(&cfg.lease_name).await?;
    let now = Timestamp::now();
    let decision = decide(current.as_ref().and_then(|l| l.spec.as_ref()), &cfg.identity, now);
    let Some(spec) = next_spec(
        current.as_ref().and_then(|l| l.spec.as_ref()),
        &decision,
        &cfg.identity,
        now,
        cfg.lease_duration,
    ) else {
        return Ok(false);
    };
    let result = match current {
        None => {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(cfg.lease_name.clone()),
                    ..Default::default()
                },
                spec: Some(spec),
            };
            api.create(&PostParams::default(), &lease).await
        }
        Some(mut lease) => {
            lease.spec = Some(spec);
            api.replace(&cfg.lease_name, &PostParams::default(), &lease).await
        }
    };
    match result {
        Ok(_) => Ok(true),
        // Someone else wrote first: they won this round.
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
}

/// The spec that gives the lease up (client-go's `ReleaseOnCancel`): no holder and a one-second
/// duration, so the next candidate takes it on its next round instead of waiting out the lease.
/// `None` when `me` does not hold it.
pub fn released_spec(old: Option<&LeaseSpec>, me: &str, now: Timestamp) -> Option<LeaseSpec> {
    let old = old?;
    if old.holder_identity.as_deref() != Some(me) {
        return None;
    }
    // client-go's `release` writes the holder as an empty string, not absent.
    Some(LeaseSpec {
        holder_identity: Some(String::new()),
        lease_duration_seconds: Some(1),
        renew_time: Some(MicroTime(now)),
        acquire_time: Some(MicroTime(now)),
        ..old.clone()
    })
}

/// Gives the lease up on a clean shutdown, once nothing of this replica writes any more. A write
/// that loses a race (409) means someone else already holds it: nothing to release.
pub async fn release(api: &Api<Lease>, cfg: &LeaderConfig) -> Result<(), kube::Error> {
    let Some(mut lease) = api.get_opt(&cfg.lease_name).await? else {
        return Ok(());
    };
    let Some(spec) = released_spec(lease.spec.as_ref(), &cfg.identity, Timestamp::now()) else {
        return Ok(());
    };
    lease.spec = Some(spec);
    match api.replace(&cfg.lease_name, &PostParams::default(), &lease).await {
        Ok(_) => {
            tracing::info!(identity = %cfg.identity, lease = %cfg.lease_name, "released the lease");
            Ok(())
        }
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

/// How long one round may take. client-go gives its lock's client a timeout of half the renew deadline
/// (`resourcelock.NewFromKubeconfig`) and bounds a leader's renewal by the renew deadline; without a
/// bound, a request that never answers (kube's client has no read timeout) or that the client retries
/// (up to 15 times on 429, 503 and 504, its back-off growing towards 1000 s) stalls the election: a
/// follower never takes a lease given up or run out, a leader never notices it lost its lease.
/// A leader's round ends by its renew deadline; a follower's after half of it (1 s at least).
pub fn round_budget(
    cfg: &LeaderConfig,
    last_renew: Option<tokio::time::Instant>,
    now: tokio::time::Instant,
) -> Duration {
    let per_round = (cfg.renew_deadline / 2).max(Duration::from_secs(1));
    match last_renew {
        Some(t) => per_round.min((t + cfg.renew_deadline).saturating_duration_since(now)),
        None => per_round,
    }
}

/// Runs the election until leadership is lost (an error: the process should exit, as controller-runtime
/// does, so no stale leader keeps writing) or every receiver is dropped.
pub async fn run(api: Api<Lease>, cfg: LeaderConfig, tx: watch::Sender<bool>) -> Result<(), LeaderError> {
    let mut last_renew: Option<tokio::time::Instant> = None;
    loop {
        let started = tokio::time::Instant::now();
        let budget = round_budget(&cfg, last_renew, started);
        let ok = match tokio::time::timeout(budget, round(&api, &cfg)).await {
            Ok(Ok(held)) => held,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, lease = %cfg.lease_name, "leader election round failed");
                false
            }
            Err(_) => {
                tracing::warn!(lease = %cfg.lease_name, ?budget, "leader election round did not complete in time");
                false
            }
        };
        let now = tokio::time::Instant::now();
        if ok {
            // The renewTime written is at most this old: others count the lease from it.
            last_renew = Some(started);
            if !*tx.borrow() {
                tracing::info!(identity = %cfg.identity, lease = %cfg.lease_name, "became leader");
            }
            tx.send(true).map_err(|_| LeaderError::Closed)?;
        } else if let Some(t) = last_renew
            && now.duration_since(t) >= cfg.renew_deadline
        {
            let _ = tx.send(false);
            return Err(LeaderError::Lost(cfg.lease_name.clone()));
        }
        if tx.is_closed() {
            return Err(LeaderError::Closed);
        }
        tokio::time::sleep(cfg.retry_period).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(holder: &str, renewed_secs_ago: i64, duration: i32, now: Timestamp) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(holder.to_string()),
            lease_duration_seconds: Some(duration),
            renew_time: Some(MicroTime(now - SignedDuration::from_secs(renewed_secs_ago))),
            ..Default::default()
        }
    }

    #[test]
    fn decisions() {
        let now = Timestamp::from_second(1_800_000_000).unwrap();
        let cases = [
            (None, Decision::Acquire),
            (Some(spec("", 0, 15, now)), Decision::Acquire),
            (Some(spec("me", 100, 15, now)), Decision::Renew),
            (
                Some(spec("other", 5, 15, now)),
                Decision::Follow {
                    holder: "other".into(),
                },
            ),
            (Some(spec("other", 16, 15, now)), Decision::Acquire),
            (
                Some(LeaseSpec {
                    holder_identity: Some("other".into()),
                    ..Default::default()
                }),
                Decision::Acquire,
            ),
        ];
        for (lease, want) in cases {
            assert_eq!(decide(lease.as_ref(), "me", now), want, "{lease:?}");
        }
    }

    #[test]
    fn taking_over_counts_a_transition_and_renewing_does_not() {
        let now = Timestamp::from_second(1_800_000_000).unwrap();
        let mut old = spec("other", 30, 15, now);
        old.lease_transitions = Some(3);
        let taken = next_spec(Some(&old), &Decision::Acquire, "me", now, Duration::from_secs(15)).unwrap();
        assert_eq!(taken.holder_identity.as_deref(), Some("me"));
        assert_eq!(taken.lease_transitions, Some(4));
        let renewed = next_spec(Some(&taken), &Decision::Renew, "me", now, Duration::from_secs(15)).unwrap();
        assert_eq!(renewed.lease_transitions, Some(4));
        assert_eq!(renewed.renew_time, Some(MicroTime(now)));
        assert!(
            next_spec(
                Some(&old),
                &Decision::Follow {
                    holder: "other".into()
                },
                "me",
                now,
                Duration::from_secs(15)
            )
            .is_none()
        );
    }

    /// controller-runtime's `id = hostname + "_" + uuid.NewUUID()` (pkg/leaderelection): unique per
    /// start, its prefix readable.
    #[test]
    fn identities_are_unique_per_start_with_a_readable_prefix() {
        let (a, b) = (unique_identity("pod-1"), unique_identity("pod-1"));
        assert_ne!(a, b, "two starts of one pod are two candidates");
        assert_eq!(identity_prefix(&a), "pod-1");
        let uuid = a.strip_prefix("pod-1_").unwrap();
        let groups: Vec<usize> = uuid.split('-').map(str::len).collect();
        assert_eq!(groups, [8, 4, 4, 4, 12], "{uuid}");
        assert!(uuid.chars().all(|c| c == '-' || c.is_ascii_hexdigit()), "{uuid}");
        assert_eq!(&uuid[14..15], "4", "a version 4 UUID: {uuid}");
        assert_eq!(identity_prefix("m0"), "m0");
        // A restarted process does not renew its previous incarnation's unexpired lease as its own.
        let now = Timestamp::now();
        assert_eq!(
            decide(Some(&spec(&a, 1, 15, now)), &b, now),
            Decision::Follow { holder: a.clone() }
        );
    }

    #[test]
    fn releasing_hands_the_lease_to_the_next_round() {
        let now = Timestamp::now();
        let held = spec("me", 1, 15, now);
        assert_eq!(
            released_spec(Some(&held), "other", now),
            None,
            "only the holder releases"
        );
        let released = released_spec(Some(&held), "me", now).unwrap();
        assert_eq!(released.holder_identity.as_deref(), Some(""));
        assert_eq!(released.lease_transitions, held.lease_transitions);
        assert_eq!(decide(Some(&released), "other", now), Decision::Acquire);
        let taken = next_spec(
            Some(&released),
            &Decision::Acquire,
            "other",
            now,
            Duration::from_secs(15),
        )
        .unwrap();
        assert_eq!(taken.holder_identity.as_deref(), Some("other"));
        // client-go counts the acquisition of a released lease as a transition.
        assert_eq!(
            taken.lease_transitions,
            Some(held.lease_transitions.unwrap_or(0) + 1)
        );
    }

    /// client-go `leaderelection_test.go` (TestTryAcquireOrRenew): a new Lease starts at 0 transitions;
    /// each acquisition by a non-leader adds one, run out or released alike, renewals add none.
    #[test]
    fn a_created_lease_starts_at_zero_and_each_acquisition_counts() {
        let now = Timestamp::from_second(1_800_000_000).unwrap();
        let d = Duration::from_secs(15);
        let created = next_spec(None, &Decision::Acquire, "a", now, d).unwrap();
        assert_eq!(created.lease_transitions, Some(0));
        let released = released_spec(Some(&created), "a", now).unwrap();
        let by_b = next_spec(Some(&released), &Decision::Acquire, "b", now, d).unwrap();
        assert_eq!(by_b.lease_transitions, Some(1));
        let stale = spec("b", 60, 15, now);
        let by_c = next_spec(
            Some(&LeaseSpec {
                lease_transitions: Some(1),
                ..stale
            }),
            &Decision::Acquire,
            "c",
            now,
            d,
        )
        .unwrap();
        assert_eq!(by_c.lease_transitions, Some(2));
    }

    /// A client of `server` whose requests, while `hang` is set, never answer (a dead connection,
    /// which kube's client, with no read timeout, waits on for good); each such request is counted.
    fn hanging_client(
        server: &std::sync::Arc<crate::embedded::EmbeddedServer>,
        hang: std::sync::Arc<std::sync::atomic::AtomicBool>,
        hung: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    ) -> kube::Client {
        use std::sync::atomic::Ordering::SeqCst;
        let router = server.router();
        let svc = tower::service_fn(move |req: http::Request<kube::client::Body>| {
            let router = router.clone();
            let hang = hang.load(SeqCst);
            let hung = hung.clone();
            async move {
                if hang {
                    hung.fetch_add(1, SeqCst);
                    std::future::pending::<()>().await;
                }
                tower::ServiceExt::oneshot(router, req).await
            }
        });
        kube::Client::new(svc, "default")
    }

    fn quick(identity: &str) -> LeaderConfig {
        LeaderConfig {
            renew_deadline: Duration::from_secs(2),
            retry_period: Duration::from_millis(100),
            ..LeaderConfig::new("quotagate-leader", identity)
        }
    }

    /// The helm test's flake (issue 66): the new pod did not lead within 120 s of a rolling update.
    /// A round that never answers must not stall a follower: the old leader gives the lease up (as
    /// a pod stopped by a Deployment's rollout does), and the follower takes it within a round's
    /// budget and a retry, although its round in flight at that moment never answers.
    #[tokio::test]
    async fn a_request_that_never_answers_does_not_keep_a_follower_from_a_released_lease() {
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
        let server = crate::wiring::manager::embedded_server();
        let leases: Api<Lease> = Api::namespaced(server.client(), "default");
        let old = quick("old_1");
        assert!(
            round(&leases, &old).await.unwrap(),
            "the old replica takes the lease"
        );
        let hang = std::sync::Arc::new(AtomicBool::new(false));
        let hung = std::sync::Arc::new(AtomicUsize::new(0));
        let api = Api::namespaced(hanging_client(&server, hang.clone(), hung.clone()), "default");
        let (tx, mut rx) = watch::channel(false);
        let follower = crate::wiring::tasks::AbortOnDrop(tokio::spawn(run(api, quick("new_1"), tx)));
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!*rx.borrow(), "the follower took a held lease");
        hang.store(true, SeqCst);
        while hung.load(SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        release(&leases, &old).await.unwrap();
        hang.store(false, SeqCst);
        let released = std::time::Instant::now();
        let led = tokio::time::timeout(Duration::from_secs(20), rx.wait_for(|l| *l)).await;
        assert!(
            led.is_ok(),
            "the follower did not take the released lease within 20 s: its round never ended"
        );
        let took = released.elapsed();
        // A round's budget (1 s) and a retry (0.1 s), with room for a loaded machine.
        assert!(
            took < Duration::from_secs(5),
            "took the lease {took:?} after its release"
        );
        let holder = leases
            .get("quotagate-leader")
            .await
            .unwrap()
            .spec
            .unwrap()
            .holder_identity;
        assert_eq!(holder.as_deref(), Some("new_1"));
        drop(follower);
    }

    /// A leader whose renewals never answer steps down by its renew deadline (client-go's), before
    /// the lease runs out for the others, instead of leading on while another replica takes over.
    #[tokio::test]
    async fn a_leader_whose_renewals_never_answer_steps_down_by_the_renew_deadline() {
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
        let server = crate::wiring::manager::embedded_server();
        let (hang, hung) = (
            std::sync::Arc::new(AtomicBool::new(false)),
            std::sync::Arc::new(AtomicUsize::new(0)),
        );
        let api = Api::namespaced(hanging_client(&server, hang.clone(), hung.clone()), "default");
        let (tx, mut rx) = watch::channel(false);
        let cfg = quick("leader_1");
        let task = tokio::spawn(run(api, cfg.clone(), tx));
        tokio::time::timeout(Duration::from_secs(10), rx.wait_for(|l| *l))
            .await
            .expect("leads")
            .unwrap();
        hang.store(true, SeqCst);
        let hanging = std::time::Instant::now();
        let ended = tokio::time::timeout(Duration::from_secs(20), task).await;
        let Ok(Ok(Err(LeaderError::Lost(_)))) = ended else {
            panic!("the leader did not step down within 20 s: {ended:?}");
        };
        let took = hanging.elapsed();
        assert!(!*rx.borrow(), "still says it leads");
        assert!(hung.load(SeqCst) >= 1);
        // Its last renewal was at most a retry before the hang: out by the renew deadline, well
        // before the lease (15 s) runs out for the others.
        assert!(
            took <= cfg.renew_deadline + Duration::from_secs(2),
            "stepped down {took:?} after its renewals stopped answering"
        );
    }
}
