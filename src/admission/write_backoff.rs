//! Backoff for admission writes that fail. A write that fails is released at once (the quota it
//! assumed goes back to the queue), and the workload is not tried again before its backoff expires:
//! a failure that retrying cannot fix (a 4xx other than a conflict) must not become a hot loop, and a
//! transient one (5xx, unreachable) is retried soon but not at once.

use crate::queue::WorkloadKey;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// First delay after a transient failure; doubles per consecutive failure up to [`TRANSIENT_MAX`].
const TRANSIENT_BASE: Duration = Duration::from_millis(20);
const TRANSIENT_MAX: Duration = Duration::from_secs(2);
/// First delay after a failure retrying cannot fix; doubles up to [`PERMANENT_MAX`].
const PERMANENT_BASE: Duration = Duration::from_secs(1);
const PERMANENT_MAX: Duration = Duration::from_secs(300);

/// Whether retrying the same write cannot succeed: the server understood the request and refused
/// it for what it is (4xx), not for a race (409) or load (429).
pub fn is_permanent(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if (400..500).contains(&s.code) && s.code != 409 && s.code != 429)
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    failures: u32,
    not_before: Instant,
}

#[derive(Debug, Default)]
pub struct WriteBackoff {
    entries: HashMap<WorkloadKey, Entry>,
}

fn delay(failures: u32, permanent: bool) -> Duration {
    let (base, max) = if permanent {
        (PERMANENT_BASE, PERMANENT_MAX)
    } else {
        (TRANSIENT_BASE, TRANSIENT_MAX)
    };
    base.saturating_mul(1u32 << failures.saturating_sub(1).min(16))
        .min(max)
}

impl WriteBackoff {
    /// Whether `key`'s last write failed and its backoff has not expired.
    pub fn blocked(&self, key: &WorkloadKey, now: Instant) -> bool {
        self.entries.get(key).is_some_and(|e| e.not_before > now)
    }

    /// Records a failure; returns the number of consecutive failures and the delay before the next try.
    pub fn failed(&mut self, key: &WorkloadKey, permanent: bool, now: Instant) -> (u32, Duration) {
        let e = self.entries.entry(key.clone()).or_insert(Entry {
            failures: 0,
            not_before: now,
        });
        e.failures = e.failures.saturating_add(1);
        let d = delay(e.failures, permanent);
        e.not_before = now + d;
        (e.failures, d)
    }

    /// No write is backing off (the loop skips its per-cycle bookkeeping then).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn succeeded(&mut self, key: &WorkloadKey) {
        self.entries.remove(key);
    }

    /// Forgets workloads that are gone.
    pub fn retain(&mut self, live: impl Fn(&WorkloadKey) -> bool) {
        self.entries.retain(|k, _| live(k));
    }

    /// How long until the earliest backoff expires: the loop wakes then to retry.
    pub fn next_wake(&self, now: Instant) -> Option<Duration> {
        self.entries
            .values()
            .filter(|e| e.not_before > now)
            .map(|e| e.not_before - now)
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: &str) -> WorkloadKey {
        WorkloadKey {
            namespace: "ns".into(),
            name: n.into(),
        }
    }

    #[test]
    fn delays_double_and_cap_and_success_clears() {
        let mut b = WriteBackoff::default();
        let t0 = Instant::now();
        assert_eq!(b.failed(&key("a"), true, t0), (1, Duration::from_secs(1)));
        assert_eq!(b.failed(&key("a"), true, t0), (2, Duration::from_secs(2)));
        for _ in 0..40 {
            b.failed(&key("a"), true, t0);
        }
        assert_eq!(
            b.failed(&key("a"), true, t0).1,
            PERMANENT_MAX,
            "capped, no overflow"
        );
        assert!(b.blocked(&key("a"), t0) && !b.blocked(&key("b"), t0));
        assert_eq!(b.failed(&key("t"), false, t0).1, TRANSIENT_BASE);
        assert_eq!(b.next_wake(t0), Some(TRANSIENT_BASE));
        b.succeeded(&key("t"));
        b.retain(|k| k.name != "a");
        assert_eq!(b.next_wake(t0), None);
    }

    #[test]
    fn only_refusals_retrying_cannot_fix_are_permanent() {
        let api = |code: u16| {
            kube::Error::Api(
                kube::core::Status::failure("refused", "Test")
                    .with_code(code)
                    .boxed(),
            )
        };
        assert!(is_permanent(&api(422)) && is_permanent(&api(404)) && is_permanent(&api(400)));
        assert!(!is_permanent(&api(409)) && !is_permanent(&api(429)) && !is_permanent(&api(500)));
    }
}
