//! The options of the submitter's `ray job submit`, as KubeRay's `BuildJobSubmitCommand`
//! (`controllers/ray/common/job.go`) writes them: the runtime env (from `runtimeEnvYAML`) and the
//! metadata as JSON, the job's id, and the entrypoint's resources, each JSON value quoted as Go's
//! `strconv.Quote` quotes it (the shell reads it back as written).

use crate::api::ray::RayJob;

/// ` --runtime-env-json "…" --metadata-json "…" --submission-id ID --entrypoint-num-cpus N
/// --entrypoint-num-gpus N --entrypoint-resources "…"`, each only when the job sets it, in KubeRay's
/// order; the caller puts them after `--address` (and `--no-wait`). Errors name the field.
pub fn options(job: &RayJob, job_id: &str) -> Result<String, String> {
    let mut out = String::new();
    let spec = &job.spec;
    if let Some(yaml) = spec.runtime_env_yaml.as_deref().filter(|y| !y.is_empty()) {
        let env: serde_json::Value =
            serde_saphyr::from_str(yaml).map_err(|e| format!("spec.runtimeEnvYAML: {e}"))?;
        // An empty document is `null`, which KubeRay's YAMLToJSON also passes on as "null".
        out.push_str(&format!(" --runtime-env-json {}", go_quote(&env.to_string())));
    }
    if let Some(metadata) = spec.metadata.as_ref().filter(|m| !m.is_empty()) {
        check_metadata_version(job)?;
        let json = serde_json::to_string(metadata).map_err(|e| format!("spec.metadata: {e}"))?;
        out.push_str(&format!(" --metadata-json {}", go_quote(&json)));
    }
    if !job_id.is_empty() {
        out.push_str(&format!(" --submission-id {job_id}"));
    }
    if let Some(n) = spec.entrypoint_num_cpus.filter(|n| *n > 0.0) {
        out.push_str(&format!(" --entrypoint-num-cpus {n:.6}"));
    }
    if let Some(n) = spec.entrypoint_num_gpus.filter(|n| *n > 0.0) {
        out.push_str(&format!(" --entrypoint-num-gpus {n:.6}"));
    }
    if let Some(r) = spec.entrypoint_resources.as_deref().filter(|r| !r.is_empty()) {
        out.push_str(&format!(" --entrypoint-resources {}", go_quote(r)));
    }
    Ok(out)
}

/// KubeRay's `getMetadataJSONForSubmitCommand`: Ray takes `--metadata-json` from 2.6.0 on, so a
/// `rayVersion` written below it (or not a version) is refused; none written is taken as recent.
fn check_metadata_version(job: &RayJob) -> Result<(), String> {
    let Some(rv) = job
        .spec
        .ray_cluster_spec
        .as_ref()
        .and_then(|s| s.ray_version.as_deref())
        .filter(|v| !v.is_empty())
    else {
        return Ok(());
    };
    let parsed = parse_version(rv)
        .ok_or_else(|| format!("spec.rayClusterSpec.rayVersion: failed to parse Ray version: {rv}"))?;
    if parsed < (2, 6, 0, true) {
        return Err("spec.metadata: the Ray version must be at least 2.6.0 to use the metadata field".into());
    }
    Ok(())
}

/// `major[.minor[.patch]][-pre][+build]` (an optional leading `v`), as semver's loose parser reads it;
/// the last field is false for a pre-release, which sorts below its release.
fn parse_version(v: &str) -> Option<(u64, u64, u64, bool)> {
    let v = v.strip_prefix('v').unwrap_or(v);
    let v = v.split('+').next().unwrap_or(v);
    let (core, pre) = match v.split_once('-') {
        Some((core, pre)) if !pre.is_empty() => (core, true),
        Some(_) => return None,
        None => (v, false),
    };
    let mut parts = core.split('.');
    let mut next = |required: bool| -> Option<u64> {
        match parts.next() {
            Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => p.parse().ok(),
            None if !required => Some(0),
            _ => None,
        }
    };
    let version = (next(true)?, next(false)?, next(false)?, !pre);
    parts.next().is_none().then_some(version)
}

/// Go's `strconv.Quote`: double quotes around, `"` and `\` escaped, control characters as escapes.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// KubeRay `job_test.go` `rayJobTemplate`.
    fn template() -> RayJob {
        serde_json::from_value(json!({
            "apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "rj", "namespace": "ns"},
            "spec": {
                "runtimeEnvYAML": "test: test", "metadata": {"testKey": "testValue"},
                "rayClusterSpec": {"rayVersion": "2.6.0", "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "h", "image": "ray"}]}}}},
                "entrypoint": "echo no quote 'single quote' \"double quote\"",
                "entrypointNumCpus": 1, "entrypointNumGpus": 0.5, "entrypointResources": "{\"Custom_1\": 1, \"Custom_2\": 5.5}"
            },
            "status": {"dashboardURL": "http://127.0.0.1:8265", "jobId": "testJobId"}
        }))
        .unwrap()
    }

    // KubeRay: ray-operator/controllers/ray/common/job_test.go TestBuildJobSubmitCommandWithK8sJobMode
    // (and ...WithSidecarMode, which has the same options): every option in order, the JSON quoted.
    #[test]
    fn options_follow_kuberays_submit_command() {
        let got = options(&template(), "testJobId").unwrap();
        let want = [
            " --runtime-env-json \"{\\\"test\\\":\\\"test\\\"}\"",
            " --metadata-json \"{\\\"testKey\\\":\\\"testValue\\\"}\"",
            " --submission-id testJobId",
            " --entrypoint-num-cpus 1.000000",
            " --entrypoint-num-gpus 0.500000",
            " --entrypoint-resources \"{\\\"Custom_1\\\": 1, \\\"Custom_2\\\": 5.5}\"",
        ]
        .concat();
        assert_eq!(got, want);
    }

    // KubeRay: TestGetRuntimeEnvJsonFromYAML / TestBuildJobSubmitCommandWithK8sJobModeAndYAML (the
    // runtime env as JSON, compared as a map there: here its keys keep the YAML's order; no entrypoint
    // resource options when none are set).
    #[test]
    fn a_yaml_runtime_env_becomes_json() {
        let mut j = template();
        j.spec.runtime_env_yaml =
            Some("working_dir: \"https://example.com/a.zip\"\npip: [\"python-multipart==0.0.6\"]\n".into());
        j.spec.entrypoint_num_cpus = None;
        j.spec.entrypoint_num_gpus = None;
        j.spec.entrypoint_resources = None;
        let got = options(&j, "testJobId").unwrap();
        assert_eq!(
            got,
            " --runtime-env-json \"{\\\"working_dir\\\":\\\"https://example.com/a.zip\\\",\\\"pip\\\":[\\\"python-multipart==0.0.6\\\"]}\" --metadata-json \"{\\\"testKey\\\":\\\"testValue\\\"}\" --submission-id testJobId"
        );
        j.spec.runtime_env_yaml = Some("pip: [unclosed".into());
        assert!(options(&j, "x").unwrap_err().starts_with("spec.runtimeEnvYAML: "));
    }

    // KubeRay: TestBuildJobSubmitCommandWithUnparseableRayVersion, ...WithOldRayVersion,
    // ...WithUnsetRayVersion and ...WithClusterSelector: metadata needs Ray >= 2.6.0 when a version is
    // written; none written (or no cluster spec) is taken as recent.
    #[test]
    fn metadata_needs_ray_2_6() {
        let with_version = |v: Option<&str>| {
            let mut j = template();
            if let Some(s) = j.spec.ray_cluster_spec.as_mut() {
                s.ray_version = v.map(str::to_string);
            }
            options(&j, "id")
        };
        assert!(
            with_version(Some("not-a-version"))
                .unwrap_err()
                .contains("failed to parse Ray version")
        );
        assert!(
            with_version(Some("2.5.0"))
                .unwrap_err()
                .contains("at least 2.6.0")
        );
        assert!(
            with_version(Some("2.6.0-rc1")).is_err(),
            "a pre-release is below its release"
        );
        assert!(with_version(None).unwrap().contains("--metadata-json"));
        assert!(with_version(Some("2.9")).unwrap().contains("--metadata-json"));
        let mut selector = template();
        selector.spec.ray_cluster_spec = None;
        assert!(options(&selector, "id").unwrap().contains("--metadata-json"));
        let mut old_no_metadata = template();
        old_no_metadata.spec.metadata = None;
        if let Some(s) = old_no_metadata.spec.ray_cluster_spec.as_mut() {
            s.ray_version = Some("2.0.0".into());
        }
        assert!(
            !options(&old_no_metadata, "id")
                .unwrap()
                .contains("--metadata-json"),
            "no metadata, no check"
        );
    }

    #[test]
    fn quoting_is_gos() {
        assert_eq!(go_quote("a\"b\\c\nd\u{1}"), "\"a\\\"b\\\\c\\nd\\x01\"");
        assert_eq!(go_quote("ünï"), "\"ünï\"");
    }
}
