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
    /// Nobody holds a valid lease: take it (create when missing, else replace with transitions + 1).
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
    let old = old.cloned().unwrap_or_default();
    match decision {
        Decision::Follow { .. } => None,
        Decision::Renew => Some(LeaseSpec {
            renew_time: Some(MicroTime(now)),
            ..old
        }),
        Decision::Acquire => {
            let taken_from_someone = old
                .holder_identity
                .as_deref()
                .is_some_and(|h| !h.is_empty() && h != me);
            Some(LeaseSpec {
                holder_identity: Some(me.to_string()),
                lease_duration_seconds: Some(duration.as_secs().max(1) as i32),
                acquire_time: Some(MicroTime(now)),
                renew_time: Some(MicroTime(now)),
                lease_transitions: Some(old.lease_transitions.unwrap_or(0) + i32::from(taken_from_someone)),
                ..old
            })
        }
    }
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
    Some(LeaseSpec {
        holder_identity: None,
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

/// Runs the election until leadership is lost (an error: the process should exit, as controller-runtime
/// does, so no stale leader keeps writing) or every receiver is dropped.
pub async fn run(api: Api<Lease>, cfg: LeaderConfig, tx: watch::Sender<bool>) -> Result<(), LeaderError> {
    let mut last_renew: Option<tokio::time::Instant> = None;
    loop {
        let ok = match round(&api, &cfg).await {
            Ok(held) => held,
            Err(e) => {
                tracing::warn!(error = %e, lease = %cfg.lease_name, "leader election round failed");
                false
            }
        };
        let now = tokio::time::Instant::now();
        if ok {
            last_renew = Some(now);
            if !*tx.borrow() {
                tracing::info!(identity = %cfg.identity, lease = %cfg.lease_name, "became leader");
            }
            tx.send(true).map_err(|_| LeaderError::Closed)?;
        } else if let Some(t) = last_renew
            && now.duration_since(t) > cfg.renew_deadline
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
        assert_eq!(released.holder_identity, None);
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
    }
}
