//! KubeRay's `ValidateRayCronJobSpec` (`utils/validation.go`): the name leaves room for the RayJobs'
//! suffix, the schedule is robfig/cron's standard syntax with no zone prefix, `timeZone` is a zone the
//! time zone database knows, and `jobTemplate` is a valid RayJob spec.

use std::collections::BTreeMap;

use jiff::tz::TimeZone;

use super::super::constants as c;
use super::super::cron::Schedule;
use super::super::raycronjob::{RayCronJob, RayCronJobSpec};
use super::rayjob::validate_spec_at;
use super::{RayFeatureGates, validate_name};
use crate::api::validation::{FieldError, Path};

/// Validates a RayCronJob as KubeRay would with `gates` (its template's RayJob rules read them).
pub fn validate_ray_cron_job_with(job: &RayCronJob, gates: RayFeatureGates) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let meta = Path::root("metadata");
    validate_name(
        job.metadata.name.as_deref(),
        c::MAX_RAY_CRON_JOB_NAME_LENGTH,
        "RayCronJob",
        &meta,
        &mut errs,
    );
    errs.extend(validate_ray_cron_job_spec(&job.spec, gates));
    errs
}

/// The spec's rules, every broken one reported.
pub fn validate_ray_cron_job_spec(spec: &RayCronJobSpec, gates: RayFeatureGates) -> Vec<FieldError> {
    let p = Path::root("spec");
    let mut errs = Vec::new();
    if spec.schedule.contains("TZ") {
        errs.push(FieldError::invalid(
            &p.child("schedule"),
            "cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
        ));
    } else if let Err(e) = Schedule::parse(&spec.schedule) {
        errs.push(FieldError::invalid(
            &p.child("schedule"),
            format!("invalid cron schedule: {e}"),
        ));
    }
    if let Some(zone) = &spec.time_zone {
        if zone.is_empty() {
            errs.push(FieldError::invalid(
                &p.child("timeZone"),
                "timeZone must not be empty string, omit the field to use the local time zone of the KubeRay operator",
            ));
        } else if let Err(e) = time_zone(zone) {
            errs.push(FieldError::invalid(
                &p.child("timeZone"),
                format!("invalid time zone: {e}"),
            ));
        }
    }
    errs.extend(validate_spec_at(
        &spec.job_template,
        &BTreeMap::new(),
        &p.child("jobTemplate"),
        gates,
    ));
    errs
}

/// The zone a schedule runs in: Go's `time.LoadLocation` (`UTC`, `Local` for the operator's own, or
/// an IANA name); absent is the operator's local zone.
pub fn time_zone(name: &str) -> Result<TimeZone, String> {
    match name {
        "UTC" => Ok(TimeZone::UTC),
        "Local" => Ok(TimeZone::system()),
        _ => TimeZone::get(name).map_err(|_| format!("unknown time zone {name}")),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn cron(name: &str, spec: Value) -> RayCronJob {
        serde_json::from_value(json!({"apiVersion": "ray.io/v1", "kind": "RayCronJob", "metadata": {"name": name, "namespace": "default"}, "spec": spec}))
            .unwrap()
    }

    fn template() -> Value {
        json!({"entrypoint": "python test.py", "rayClusterSpec": {"headGroupSpec": {"template": {"spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray:2.52.0"}]}}}}})
    }

    /// KubeRay `ray-operator/controllers/ray/utils/validation_test.go`, `TestValidateRayCronJobSpec`, its
    /// cases by name with the text each expects in the error.
    #[test]
    fn kuberay_validate_ray_cron_job_spec_cases() {
        let with = |schedule: &str, tz: Option<&str>, tmpl: Value| {
            let mut spec = json!({"schedule": schedule, "jobTemplate": tmpl});
            if let Some(tz) = tz {
                spec["timeZone"] = json!(tz);
            }
            spec
        };
        let no_containers = json!({"entrypoint": "python test.py", "rayClusterSpec": {"headGroupSpec": {"template": {"spec": {"containers": []}}}}});
        let long = "a".repeat(c::MAX_RAY_CRON_JOB_NAME_LENGTH + 1);
        let cases: Vec<(&str, &str, Value, Option<&str>)> = vec![
            (
                "Valid cron schedule and RayJob spec",
                "test-cronjob",
                with("*/5 * * * *", None, template()),
                None,
            ),
            (
                "Invalid cron schedule",
                "test-cronjob",
                with("invalid cron", None, template()),
                Some("invalid cron schedule"),
            ),
            (
                "Empty JobTemplate",
                "test-cronjob",
                with("*/5 * * * *", None, json!({})),
                Some("one of RayClusterSpec or ClusterSelector must be set"),
            ),
            (
                "Invalid RayJob spec - no containers",
                "test-cronjob",
                with("*/5 * * * *", None, no_containers),
                Some("spec.jobTemplate.rayClusterSpec.headGroupSpec"),
            ),
            (
                "Valid schedule with valid timezone",
                "test-cronjob",
                with("0 9 * * *", Some("Asia/Taipei"), template()),
                None,
            ),
            (
                "Valid schedule with UTC timezone",
                "test-cronjob",
                with("0 0 * * *", Some("UTC"), template()),
                None,
            ),
            (
                "Invalid timezone",
                "test-cronjob",
                with("*/5 * * * *", Some("Invalid/Zone"), template()),
                Some("invalid time zone"),
            ),
            (
                "Schedule with TZ= prefix is rejected",
                "test-cronjob",
                with("TZ=UTC */5 * * * *", None, template()),
                Some("cannot use TZ or CRON_TZ in schedule"),
            ),
            (
                "Schedule with CRON_TZ= prefix is rejected",
                "test-cronjob",
                with("CRON_TZ=UTC */5 * * * *", None, template()),
                Some("cannot use TZ or CRON_TZ in schedule"),
            ),
            (
                "RayCronJob name too long",
                &long,
                with("*/5 * * * *", None, template()),
                Some("RayCronJob name should be no more than 36 characters"),
            ),
        ];
        for (case, name, spec, want) in cases {
            let errs = validate_ray_cron_job_with(&cron(name, spec), RayFeatureGates::default());
            let text: Vec<String> = errs
                .iter()
                .map(|e| format!("{}: {}", e.field, e.message))
                .collect();
            match want {
                None => assert!(errs.is_empty(), "{case}: {text:?}"),
                Some(want) => assert!(
                    text.iter().any(|t| t.contains(want)),
                    "{case}: want {want:?} in {text:?}"
                ),
            }
        }
    }

    #[test]
    fn empty_time_zone_and_template_rules_name_their_fields() {
        let errs = validate_ray_cron_job_with(
            &cron(
                "c",
                json!({"schedule": "@hourly", "timeZone": "", "jobTemplate": {"rayClusterSpec": template()["rayClusterSpec"], "suspend": true}}),
            ),
            RayFeatureGates::default(),
        );
        let fields: Vec<&str> = errs.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["spec.timeZone", "spec.jobTemplate.suspend"], "{errs:?}");
        assert!(errs[0].message.contains("must not be empty"));
        assert!(
            time_zone("Local").is_ok()
                && time_zone("Europe/Paris").is_ok()
                && time_zone("Mars/Olympus").is_err()
        );
    }
}
