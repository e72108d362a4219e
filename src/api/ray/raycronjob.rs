//! `ray.io/v1` RayCronJob, field for field as KubeRay v1.7 (`raycronjob_types.go`): a RayJob created
//! from `jobTemplate` at each time of the cron `schedule`. Served with KubeRay's `RayCronJob` feature
//! gate (alpha, off), as KubeRay runs its controller only with it.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::rayjob::RayJobSpec;

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[kube(
    group = "ray.io",
    version = "v1",
    kind = "RayCronJob",
    namespaced,
    status = "RayCronJobStatus",
    derive = "PartialEq",
    category = "all",
    printcolumn = r#"{"name": "schedule", "type": "string", "jsonPath": ".spec.schedule"}"#,
    printcolumn = r#"{"name": "timezone", "type": "string", "jsonPath": ".spec.timeZone"}"#,
    printcolumn = r#"{"name": "last schedule", "type": "date", "jsonPath": ".status.lastScheduleTime"}"#,
    printcolumn = r#"{"name": "age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name": "suspend", "type": "boolean", "jsonPath": ".spec.suspend"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct RayCronJobSpec {
    /// The spec of each RayJob the schedule creates.
    pub job_template: RayJobSpec,
    /// Five-field cron (`*/5 * * * *`) or a descriptor (`@hourly`, `@every 10m`), as robfig/cron parses it.
    pub schedule: String,
    /// IANA zone of the schedule; the operator's local zone when absent. Empty is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub time_zone: Option<String>,
    /// Stops new RayJobs being created; those already created run on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct RayCronJobStatus {
    /// The schedule time of the last RayJob created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_schedule_time: Option<Time>,
}

impl RayCronJobSpec {
    pub fn is_suspended(&self) -> bool {
        self.suspend.unwrap_or(false)
    }
}
