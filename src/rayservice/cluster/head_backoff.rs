//! A head pod that keeps failing is recreated with exponential back-off, as kubelet spaces the
//! restarts of a crash-looping container (CrashLoopBackOff: 10 s, doubling, at most 5 min, reset
//! after 10 min of running fine). KubeRay recreates a failed head at once, every pass: 81 heads in
//! 60 s in issue 47, with nothing said.
//!
//! The record lives on the RayCluster (`quotagate.io/head-restarts: "<count> <last failure> <pod>"`),
//! not in memory, so a restart of the operator neither forgets a crash loop nor counts one failure
//! twice. The first failure is replaced at once (kubelet restarts a container the first time
//! without delay); from the second on the next head waits `delay(count)`.

use jiff::{SignedDuration, Timestamp};

/// The annotation on the RayCluster.
pub const ANNOTATION: &str = "quotagate.io/head-restarts";

/// Kubelet's initial and maximum back-off, and how long a container must run fine to reset it.
pub const INITIAL: SignedDuration = SignedDuration::from_secs(10);
pub const MAX: SignedDuration = SignedDuration::from_secs(300);
pub const RESET_AFTER: SignedDuration = SignedDuration::from_secs(600);

/// Prefix of `status.reason` (RayCluster) while the head fails; the RayService shows such a reason.
pub const REASON_PREFIX: &str = "CrashLoopBackOff:";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeadRestarts {
    /// Head pods that failed in a row.
    pub count: u32,
    pub last_failure: Timestamp,
    /// The head pod whose failure was counted last (the same pod is never counted twice).
    pub pod: String,
}

impl HeadRestarts {
    pub fn parse(v: &str) -> Option<Self> {
        let mut it = v.split_whitespace();
        let count = it.next()?.parse().ok()?;
        let last_failure = it.next()?.parse().ok()?;
        let pod = it.next()?.to_owned();
        Some(Self {
            count,
            last_failure,
            pod,
        })
    }

    pub fn encode(&self) -> String {
        format!("{} {} {}", self.count, self.last_failure, self.pod)
    }

    /// When the next head pod may be created.
    pub fn next_create(&self) -> Timestamp {
        self.last_failure
            .saturating_add(delay(self.count))
            .unwrap_or(self.last_failure)
    }
}

/// The wait before the head pod that replaces the `count`-th failed one in a row.
pub fn delay(count: u32) -> SignedDuration {
    if count <= 1 {
        return SignedDuration::ZERO;
    }
    // 10 s * 2^(count-2), capped; the shift is bounded so it cannot overflow.
    let doublings = (count - 2).min(8);
    let secs = INITIAL.as_secs().saturating_mul(1i64 << doublings);
    SignedDuration::from_secs(secs).min(MAX)
}

/// The record after head pod `pod` failed at `now`; `None` if this failure is already counted.
pub fn after_failure(prev: Option<&HeadRestarts>, pod: &str, now: Timestamp) -> Option<HeadRestarts> {
    match prev {
        Some(p) if p.pod == pod => None,
        Some(p) => Some(HeadRestarts {
            count: p.count.saturating_add(1),
            last_failure: now,
            pod: pod.to_owned(),
        }),
        None => Some(HeadRestarts {
            count: 1,
            last_failure: now,
            pod: pod.to_owned(),
        }),
    }
}

/// Whether a head that is Ready now has run long enough since the last failure to forget the loop.
pub fn resets(r: &HeadRestarts, head_ready: bool, now: Timestamp) -> bool {
    head_ready && r.last_failure.saturating_add(RESET_AFTER).is_ok_and(|t| now >= t)
}

/// `status.reason` while a head loop is recorded and no head is Ready: what failed and when the next
/// head comes; `None` otherwise.
pub fn status_reason(r: Option<&HeadRestarts>, head_ready: bool, now: Timestamp) -> Option<String> {
    let r = r.filter(|_| !head_ready)?;
    let next = r.next_create();
    let when = if next > now {
        format!(
            "the next head pod is created at {next} ({}s back-off)",
            delay(r.count).as_secs()
        )
    } else {
        "a new head pod is being created".to_owned()
    };
    Some(format!(
        "{REASON_PREFIX} head pod {} failed ({} in a row); {when}",
        r.pod, r.count
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    /// Kubelet's CrashLoopBackOff spacing (`pkg/kubelet/kubelet.go`: backOffPeriod 10 s,
    /// MaxContainerBackOff 300 s), the first replacement immediate.
    #[test]
    fn delays_double_from_ten_seconds_to_five_minutes() {
        let secs: Vec<i64> = (0..=10).map(|n| delay(n).as_secs()).collect();
        assert_eq!(secs, vec![0, 0, 10, 20, 40, 80, 160, 300, 300, 300, 300]);
        assert_eq!(delay(u32::MAX), MAX);
    }

    #[test]
    fn a_failure_is_counted_once_per_pod() {
        let now = t("2026-11-25T04:00:00Z");
        let first = after_failure(None, "h-1", now).unwrap();
        assert_eq!(first.count, 1);
        assert_eq!(after_failure(Some(&first), "h-1", now), None);
        let second = after_failure(Some(&first), "h-2", now).unwrap();
        assert_eq!((second.count, second.pod.as_str()), (2, "h-2"));
        assert_eq!(second.next_create(), t("2026-11-25T04:00:10Z"));
    }

    #[test]
    fn the_record_round_trips_and_bad_text_is_no_record() {
        let r = HeadRestarts {
            count: 3,
            last_failure: t("2026-11-25T04:00:00Z"),
            pod: "rc-head-x".into(),
        };
        assert_eq!(HeadRestarts::parse(&r.encode()), Some(r));
        for bad in [
            "",
            "3",
            "x 2026-11-25T04:00:00Z p",
            "3 yesterday p",
            "3 2026-11-25T04:00:00Z",
        ] {
            assert_eq!(HeadRestarts::parse(bad), None, "{bad:?}");
        }
    }

    /// While the back-off runs no head pod is planned; workers are planned as before.
    #[test]
    fn no_head_is_created_while_the_back_off_runs() {
        use crate::rayservice::clusterctl::pods::{PodAction, PodInputs, plan_pods};
        let mut i = PodInputs::default();
        assert_eq!(plan_pods(&i), vec![PodAction::CreateHead]);
        i.head_backoff = true;
        assert!(plan_pods(&i).is_empty());
    }

    #[test]
    fn ten_minutes_ready_resets_the_loop() {
        let r = HeadRestarts {
            count: 4,
            last_failure: t("2026-11-25T04:00:00Z"),
            pod: "p".into(),
        };
        assert!(!resets(&r, true, t("2026-11-25T04:09:59Z")));
        assert!(resets(&r, true, t("2026-11-25T04:10:00Z")));
        assert!(!resets(&r, false, t("2026-11-25T05:00:00Z")));
    }

    #[test]
    fn the_status_reason_says_what_failed_and_when_the_next_head_comes() {
        let r = HeadRestarts {
            count: 3,
            last_failure: t("2026-11-25T04:00:00Z"),
            pod: "rc-head-x".into(),
        };
        let reason = status_reason(Some(&r), false, t("2026-11-25T04:00:05Z")).unwrap();
        assert!(reason.starts_with(REASON_PREFIX), "{reason}");
        assert!(
            reason.contains("rc-head-x failed (3 in a row)")
                && reason.contains("2026-11-25T04:00:20Z (20s back-off)"),
            "{reason}"
        );
        assert_eq!(status_reason(Some(&r), true, t("2026-11-25T04:00:05Z")), None);
        assert_eq!(status_reason(None, false, t("2026-11-25T04:00:05Z")), None);
    }
}
