//! Kueue v0.20's per-workload waitForPodsReady (KEP-4803, kubernetes-sigs/kueue #15503, alpha gate
//! `WorkloadLevelWaitForPodsReady`, off by default): a job (or a Workload) annotated
//! `kueue.x-k8s.io/wait-for-pods-ready: '{"timeoutSeconds": 600, "recoveryTimeoutSeconds": 300}'`
//! overrides the cluster-wide `timeout` and `recoveryTimeout` for its own Workload. The job webhook
//! refuses a malformed value, a timeout that is not a positive integer or is above
//! `waitForPodsReady.maxTimeoutOnWorkload` (2h by default), a recovery timeout without a timeout, and
//! a change of the annotation while the job runs. The annotation is copied onto the job's Workload
//! when it is constructed; the admission loop reads it from there.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use crate::api::validation::{FieldError, Path};

/// The annotation key (Kueue's `WaitForPodsReadyAnnotation`).
pub const ANNOTATION: &str = "kueue.x-k8s.io/wait-for-pods-ready";

/// Kueue's default `maxTimeoutOnWorkload` when the configuration leaves it out.
pub const DEFAULT_MAX_TIMEOUT_ON_WORKLOAD: Duration = Duration::from_secs(2 * 60 * 60);

/// The annotation's value: whole seconds.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkloadPodsReady {
    pub timeout_seconds: Option<i64>,
    pub recovery_timeout_seconds: Option<i64>,
}

impl WorkloadPodsReady {
    /// The timeout this workload waits for its pods, given the cluster-wide one.
    pub fn timeout(&self, cluster: Duration) -> Duration {
        self.timeout_seconds.map_or(cluster, secs)
    }

    /// The recovery timeout, given the cluster-wide one (`None`: off). KEP-4803: a workload that sets
    /// only `timeoutSeconds` recovers within that too.
    pub fn recovery_timeout(&self, cluster: Option<Duration>) -> Option<Duration> {
        match (self.recovery_timeout_seconds, self.timeout_seconds) {
            (Some(r), _) => Some(secs(r)),
            (None, Some(t)) => Some(secs(t)),
            (None, None) => cluster,
        }
    }
}

fn secs(s: i64) -> Duration {
    Duration::from_secs(u64::try_from(s).unwrap_or(0))
}

/// The annotation's value on `annotations`, if any.
pub fn value(annotations: Option<&BTreeMap<String, String>>) -> Option<&str> {
    annotations?.get(ANNOTATION).map(String::as_str)
}

/// Parses the value (strict JSON: unknown keys and non-integers are refused).
pub fn parse(v: &str) -> Result<WorkloadPodsReady, String> {
    serde_json::from_str::<WorkloadPodsReady>(v).map_err(|e| {
        format!(
            "{v:?}: must be a JSON object like {{\"timeoutSeconds\": 600, \"recoveryTimeoutSeconds\": 300}}: {e}"
        )
    })
}

/// The settings a workload's annotation asks for; `None` when absent or malformed (a malformed one
/// never gets past the job webhook; on a hand-made Workload it is ignored and the cluster-wide
/// timeouts apply).
pub fn of(annotations: Option<&BTreeMap<String, String>>) -> Option<WorkloadPodsReady> {
    parse(value(annotations)?).ok()
}

fn path() -> Path {
    Path::root("metadata").child("annotations").key(ANNOTATION)
}

/// The webhook's rules for the annotation on a job being created (or changed while suspended), with
/// `max` the configured `maxTimeoutOnWorkload`.
pub fn validate(annotations: Option<&BTreeMap<String, String>>, max: Duration) -> Vec<FieldError> {
    let Some(v) = value(annotations) else {
        return Vec::new();
    };
    let p = path();
    let w = match parse(v) {
        Ok(w) => w,
        Err(e) => return vec![FieldError::invalid(&p, e)],
    };
    let mut errs = Vec::new();
    for (name, s) in [
        ("timeoutSeconds", w.timeout_seconds),
        ("recoveryTimeoutSeconds", w.recovery_timeout_seconds),
    ] {
        let Some(s) = s else { continue };
        if s <= 0 {
            errs.push(FieldError::invalid(
                &p,
                format!("{name}: {s}: must be a positive number of seconds"),
            ));
        } else if u64::try_from(s).is_ok_and(|s| s > max.as_secs()) {
            errs.push(FieldError::invalid(
                &p,
                format!(
                    "{name}: {s}: must not exceed waitForPodsReady.maxTimeoutOnWorkload ({}s)",
                    max.as_secs()
                ),
            ));
        }
    }
    if w.recovery_timeout_seconds.is_some() && w.timeout_seconds.is_none() {
        errs.push(FieldError::invalid(
            &p,
            "recoveryTimeoutSeconds: cannot be set without timeoutSeconds",
        ));
    }
    errs
}

/// The webhook's rules on an update: the annotation may change only while the job is suspended
/// (`old_suspended`), and an unchanged one is not judged again (so lowering `maxTimeoutOnWorkload`
/// does not lock running jobs out of updates).
pub fn validate_update(
    new: Option<&BTreeMap<String, String>>,
    old: Option<&BTreeMap<String, String>>,
    old_suspended: bool,
    max: Duration,
) -> Vec<FieldError> {
    if value(new) == value(old) {
        return Vec::new();
    }
    if !old_suspended {
        return vec![FieldError::invalid(
            &path(),
            "field is immutable while the job is not suspended",
        )];
    }
    validate(new, max)
}

/// [`validate`]/[`validate_update`] on JSON objects (the Ray kinds, judged as JSON), where
/// `suspended` reads the old object's `spec.suspend`.
pub fn validate_object(
    new: &serde_json::Value,
    old: Option<&serde_json::Value>,
    max: Duration,
) -> Vec<FieldError> {
    let annotations = |o: &serde_json::Value| -> Option<BTreeMap<String, String>> {
        serde_json::from_value(o.pointer("/metadata/annotations")?.clone()).ok()
    };
    let new_a = annotations(new);
    match old {
        None => validate(new_a.as_ref(), max),
        Some(old) => {
            let suspended = old.pointer("/spec/suspend").and_then(serde_json::Value::as_bool) == Some(true);
            validate_update(new_a.as_ref(), annotations(old).as_ref(), suspended, max)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ann(v: &str) -> Option<BTreeMap<String, String>> {
        Some(BTreeMap::from([(ANNOTATION.to_string(), v.to_string())]))
    }

    fn msgs(errs: Vec<FieldError>) -> Vec<String> {
        errs.into_iter()
            .map(|e| format!("{}: {}", e.field, e.message))
            .collect()
    }

    /// KEP-4803's webhook unit tests (`controller/jobframework/validation`), as Kueue #15503 lists
    /// them: valid timeout; valid timeout and recoveryTimeout; recoveryTimeout alone refused; zero or
    /// negative timeout refused; above `maxTimeoutOnWorkload` refused; malformed JSON refused.
    #[test]
    fn kep_4803_webhook_cases() {
        let max = DEFAULT_MAX_TIMEOUT_ON_WORKLOAD;
        let at = "metadata.annotations[kueue.x-k8s.io/wait-for-pods-ready]";
        assert_eq!(validate(ann(r#"{"timeoutSeconds": 30}"#).as_ref(), max), vec![]);
        assert_eq!(
            validate(
                ann(r#"{"timeoutSeconds": 30, "recoveryTimeoutSeconds": 40}"#).as_ref(),
                max
            ),
            vec![]
        );
        assert_eq!(validate(None, max), vec![]);
        let cases = [
            (
                r#"{"recoveryTimeoutSeconds": 40}"#,
                "recoveryTimeoutSeconds: cannot be set without timeoutSeconds",
            ),
            (
                r#"{"timeoutSeconds": 0}"#,
                "timeoutSeconds: 0: must be a positive number of seconds",
            ),
            (
                r#"{"timeoutSeconds": -5}"#,
                "timeoutSeconds: -5: must be a positive number of seconds",
            ),
            (
                r#"{"timeoutSeconds": 7201}"#,
                "timeoutSeconds: 7201: must not exceed waitForPodsReady.maxTimeoutOnWorkload (7200s)",
            ),
            (
                r#"{"timeoutSeconds": 60, "recoveryTimeoutSeconds": 99999999999999}"#,
                "recoveryTimeoutSeconds: 99999999999999: must not exceed waitForPodsReady.maxTimeoutOnWorkload (7200s)",
            ),
        ];
        for (v, want) in cases {
            assert_eq!(
                msgs(validate(ann(v).as_ref(), max)),
                [format!("{at}: {want}")],
                "{v}"
            );
        }
        for bad in [
            "30",
            "{\"timeoutSeconds\": \"30\"}",
            "{\"timeoutSeconds\": 1.5}",
            "{\"timeout\": 30}",
            "{",
        ] {
            let got = msgs(validate(ann(bad).as_ref(), max));
            assert_eq!(got.len(), 1, "{bad}: {got:?}");
            assert!(
                got[0].starts_with(&format!("{at}: {bad:?}: must be a JSON object like")),
                "{bad}: {got:?}"
            );
        }
        // A lower cap set by the admin.
        assert_eq!(
            msgs(validate(
                ann(r#"{"timeoutSeconds": 120}"#).as_ref(),
                Duration::from_secs(60)
            )),
            [format!(
                "{at}: timeoutSeconds: 120: must not exceed waitForPodsReady.maxTimeoutOnWorkload (60s)"
            )]
        );
    }

    /// KEP-4803 "Changing the annotation on an unsuspended Job is rejected at admission time"; a
    /// suspended job may change it; an unchanged one is not judged again (Kueue #15503 review: a
    /// lowered `maxTimeoutOnWorkload` must not lock running jobs out).
    #[test]
    fn kep_4803_annotation_is_immutable_while_running() {
        let max = Duration::from_secs(60);
        let a = ann(r#"{"timeoutSeconds": 30}"#);
        let b = ann(r#"{"timeoutSeconds": 50}"#);
        assert_eq!(
            msgs(validate_update(b.as_ref(), a.as_ref(), false, max)),
            [
                "metadata.annotations[kueue.x-k8s.io/wait-for-pods-ready]: field is immutable while the job is not suspended"
            ]
        );
        assert_eq!(validate_update(b.as_ref(), a.as_ref(), true, max), vec![]);
        assert_eq!(validate_update(None, a.as_ref(), false, max).len(), 1);
        let old_big = ann(r#"{"timeoutSeconds": 3600}"#);
        assert_eq!(
            validate_update(old_big.as_ref(), old_big.as_ref(), false, max),
            vec![]
        );
    }

    /// KEP-4803 "Controller / Workload": each value falls back to the cluster-wide one on its own; a
    /// timeout alone is also the recovery timeout.
    #[test]
    fn effective_timeouts() {
        let cluster = Duration::from_secs(1800);
        let w = |v: &str| parse(v).unwrap();
        let only_t = w(r#"{"timeoutSeconds": 30}"#);
        assert_eq!(only_t.timeout(cluster), Duration::from_secs(30));
        assert_eq!(
            only_t.recovery_timeout(Some(cluster)),
            Some(Duration::from_secs(30))
        );
        assert_eq!(only_t.recovery_timeout(None), Some(Duration::from_secs(30)));
        let both = w(r#"{"timeoutSeconds": 30, "recoveryTimeoutSeconds": 40}"#);
        assert_eq!(both.recovery_timeout(None), Some(Duration::from_secs(40)));
        let none = w("{}");
        assert_eq!(none.timeout(cluster), cluster);
        assert_eq!(none.recovery_timeout(None), None);
        assert_eq!(of(ann("nonsense").as_ref()), None);
    }
}
