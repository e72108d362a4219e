//! Pure readiness decision over a Serve status snapshot, and the summary of Ray's failure messages.
//!
//! KubeRay calls a cluster ready when every app is RUNNING, and reads that status before its own
//! `target_capacity` PUT in the same pass (kuberay.md §3.6). We also require every deployment to
//! have at least `target_num_replicas` RUNNING replicas and, given the config that was sent, the
//! reported `target_capacity` and app names to match it, so a status read before Ray applied a
//! change is never taken as ready. (Ray 2.60 itself keeps an app DEPLOYING while a deployment
//! scales; the replica check keeps us correct on versions or states where it does not.)

use super::config::ServeConfig;
use super::types::{AppStatus, ServeDetails};

/// Longest failure summary kept in a status message.
const MAX_SUMMARY: usize = 300;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServeReadiness {
    Ready,
    /// Still converging (or nothing deployed yet); `reason` says what is missing.
    NotReady {
        reason: String,
    },
    /// An app failed to deploy (DEPLOY_FAILED) or became UNHEALTHY; `message` is the last meaningful
    /// line of Ray's message. Old replicas may still serve traffic (ray-peer.md pitfall 4).
    Failed {
        app: String,
        status: AppStatus,
        message: String,
    },
}

impl ServeReadiness {
    pub fn is_ready(&self) -> bool {
        matches!(self, Self::Ready)
    }

    /// One line for a condition message or an event.
    pub fn reason(&self) -> String {
        match self {
            Self::Ready => "all Serve applications are RUNNING with their target replicas".into(),
            Self::NotReady { reason } => reason.clone(),
            Self::Failed { app, status, message } => format!("application {app:?} is {status}: {message}"),
        }
    }
}

/// Decides readiness. `expected` is the config as last sent (after `with_target_capacity`): apps
/// named in it but absent from Ray (a PUT not yet applied, or a head that restarted without GCS
/// fault tolerance) or a different reported `target_capacity` also make it not ready.
pub fn serve_readiness(details: &ServeDetails, expected: Option<&ServeConfig>) -> ServeReadiness {
    // Failures first: they need a user's fix, so they outrank "still starting".
    for (key, app) in &details.applications {
        if matches!(app.status, AppStatus::DeployFailed | AppStatus::Unhealthy) {
            return ServeReadiness::Failed {
                app: app_name(key, &app.name),
                status: app.status.clone(),
                message: deploy_failure_summary(&app.message),
            };
        }
    }
    if details.applications.is_empty() {
        return not_ready("no Serve applications reported yet".into());
    }
    if let Some(config) = expected {
        let (want, got) = (config.target_capacity(), details.target_capacity);
        let same = match (want, got) {
            (Some(a), Some(b)) => (a - b).abs() < 1e-6,
            (None, None) => true,
            _ => false,
        };
        if !same {
            return not_ready(format!(
                "Ray reports target_capacity {}, the config sent has {}",
                fmt_capacity(got),
                fmt_capacity(want)
            ));
        }
        for name in config.app_names() {
            let present = details
                .applications
                .iter()
                .any(|(key, app)| app_name(key, &app.name) == name);
            if !present {
                return not_ready(format!("application {name:?} is not reported by Ray yet"));
            }
        }
    }
    for (key, app) in &details.applications {
        let name = app_name(key, &app.name);
        if app.status != AppStatus::Running {
            return not_ready(format!("application {name:?} is {}", app.status));
        }
        for (dep_key, dep) in &app.deployments {
            let running = dep.running_replicas();
            match dep.target_num_replicas {
                Some(target) if running < target as usize => {
                    return not_ready(format!(
                        "deployment {dep_key:?} of application {name:?} has {running}/{target} replicas RUNNING"
                    ));
                }
                Some(_) => {}
                // Older Ray without the field: fall back to the deployment's own status.
                None if dep.status != super::types::DeploymentStatus::Healthy => {
                    return not_ready(format!(
                        "deployment {dep_key:?} of application {name:?} is {}",
                        dep.status
                    ));
                }
                None => {}
            }
        }
    }
    ServeReadiness::Ready
}

fn fmt_capacity(tc: Option<f64>) -> String {
    tc.map_or_else(|| "unset".to_owned(), |v| format!("{v}%"))
}

fn not_ready(reason: String) -> ServeReadiness {
    ServeReadiness::NotReady { reason }
}

/// KubeRay shows an app with an empty name as "default", as Ray names it.
fn app_name(key: &str, name: &str) -> String {
    let n = if name.is_empty() { key } else { name };
    if n.is_empty() {
        super::config::DEFAULT_APP_NAME.to_owned()
    } else {
        n.to_owned()
    }
}

/// The last meaningful line of a Ray failure message: for a traceback that is the line naming the
/// exception (`ModuleNotFoundError: No module named 'x'`). ANSI colour escapes are removed, caret
/// marker lines (`^^^^`) skipped, and the result is capped in length.
pub fn deploy_failure_summary(message: &str) -> String {
    let clean = strip_ansi(message);
    let line = clean
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty() && !l.chars().all(|c| matches!(c, '^' | '~' | ' ')))
        .unwrap_or("");
    truncate_chars(line, MAX_SUMMARY)
}

/// Removes ANSI CSI sequences (`ESC [ params final`) and other two-byte ESC sequences.
pub fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            out.push(c);
            continue;
        }
        // Other ESC sequences are two characters; the second one is dropped with the ESC.
        if chars.next() == Some('[') {
            // Parameters and intermediates, then one final byte in '@'..='~'.
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) {
                    break;
                }
            }
        }
    }
    out
}

fn truncate_chars(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let mut out: String = s.chars().take(max - 1).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rayservice::dashboard::types::ServeDetails;
    use serde_json::json;

    fn details(v: serde_json::Value) -> ServeDetails {
        serde_json::from_value(v).unwrap()
    }

    fn app(status: &str, deps: serde_json::Value) -> serde_json::Value {
        json!({"name": "hello", "status": status, "message": "", "deployments": deps})
    }

    fn dep(status: &str, target: u32, states: &[&str]) -> serde_json::Value {
        let replicas: Vec<_> = states
            .iter()
            .map(|s| json!({"replica_id": "r", "state": s}))
            .collect();
        json!({"name": "Hello", "status": status, "target_num_replicas": target, "replicas": replicas})
    }

    #[test]
    fn readiness_table() {
        let cases: Vec<(&str, serde_json::Value, Option<&str>)> = vec![
            (
                "no apps",
                json!({"applications": {}}),
                Some("no Serve applications"),
            ),
            (
                "running with all replicas",
                json!({"applications": {"hello": app("RUNNING", json!({"Hello": dep("HEALTHY", 2, &["RUNNING", "RUNNING"])}))}}),
                None,
            ),
            (
                "deploying",
                json!({"applications": {"hello": app("DEPLOYING", json!({}))}}),
                Some("is DEPLOYING"),
            ),
            (
                // KubeRay would call this ready: app RUNNING while the deployment upscales.
                "running but upscaling",
                json!({"applications": {"hello": app("RUNNING", json!({"Hello": dep("UPSCALING", 2, &["RUNNING", "STARTING"])}))}}),
                Some("1/2 replicas RUNNING"),
            ),
            (
                "target zero is ready",
                json!({"applications": {"hello": app("RUNNING", json!({"Hello": dep("HEALTHY", 0, &[])}))}}),
                None,
            ),
            (
                "more running than target (downscaling) is ready",
                json!({"applications": {"hello": app("RUNNING", json!({"Hello": dep("DOWNSCALING", 1, &["RUNNING", "RUNNING"])}))}}),
                None,
            ),
            (
                "no target field falls back to status",
                json!({"applications": {"hello": app("RUNNING", json!({"Hello": {"name": "Hello", "status": "UPDATING"}}))}}),
                Some("is UPDATING"),
            ),
            (
                "one of two apps not running",
                json!({"applications": {
                    "hello": app("RUNNING", json!({"Hello": dep("HEALTHY", 1, &["RUNNING"])})),
                    "other": {"name": "other", "status": "NOT_STARTED"}}}),
                Some("\"other\" is NOT_STARTED"),
            ),
        ];
        for (name, v, want) in cases {
            let r = serve_readiness(&details(v), None);
            match want {
                None => assert_eq!(r, ServeReadiness::Ready, "{name}"),
                Some(text) => {
                    assert!(!r.is_ready(), "{name}");
                    assert!(r.reason().contains(text), "{name}: {}", r.reason());
                }
            }
        }
    }

    #[test]
    fn failure_outranks_not_ready_and_is_summarized() {
        let v = json!({"applications": {
            "a": {"name": "a", "status": "DEPLOYING"},
            "broken": {"name": "broken", "status": "DEPLOY_FAILED",
                       "message": "Deploying app 'broken' failed with exception:\nTraceback (most recent call last):\n  File \"x.py\", line 1\n    f()\n    ^^^\nModuleNotFoundError: No module named 'no_such_module'\n",
                       "deployments": {}}}});
        let r = serve_readiness(&details(v), None);
        assert_eq!(
            r,
            ServeReadiness::Failed {
                app: "broken".into(),
                status: AppStatus::DeployFailed,
                message: "ModuleNotFoundError: No module named 'no_such_module'".into(),
            }
        );
    }

    #[test]
    fn expected_apps_must_be_reported() {
        let cfg = ServeConfig::from_yaml(
            "applications:\n  - name: hello\n    import_path: a:b\n  - name: new\n    import_path: c:d\n",
        )
        .unwrap();
        let v = json!({"applications": {"hello": app("RUNNING", json!({"Hello": dep("HEALTHY", 1, &["RUNNING"])}))}});
        let r = serve_readiness(&details(v.clone()), Some(&cfg));
        assert!(r.reason().contains("\"new\" is not reported"), "{}", r.reason());
        let cfg = ServeConfig::from_yaml("applications:\n  - name: hello\n    import_path: a:b\n").unwrap();
        assert!(serve_readiness(&details(v.clone()), Some(&cfg)).is_ready());

        // Capacity sent vs reported.
        let with_tc = |tc: Option<f64>| {
            let mut v = v.clone();
            v["target_capacity"] = tc.map_or(serde_json::Value::Null, |t| json!(t));
            details(v)
        };
        let sent = cfg.with_target_capacity(Some(50.0)).unwrap();
        assert!(serve_readiness(&with_tc(Some(50.0)), Some(&sent)).is_ready());
        let r = serve_readiness(&with_tc(None), Some(&sent));
        assert_eq!(
            r.reason(),
            "Ray reports target_capacity unset, the config sent has 50%"
        );
        let r = serve_readiness(&with_tc(Some(50.0)), Some(&cfg));
        assert_eq!(
            r.reason(),
            "Ray reports target_capacity 50%, the config sent has unset"
        );
        let r = serve_readiness(&with_tc(Some(100.0)), Some(&sent));
        assert!(!r.is_ready());
    }

    #[test]
    fn summary_of_real_traceback() {
        // Shape of a real Ray 2.60 DEPLOY_FAILED message (paths shortened), ANSI escapes included.
        let msg = "Deploying app 'broken' failed with exception:\nTraceback (most recent call last):\n  File \"/v/ray/serve/_private/application_state.py\", line 926, in _reconcile_build_app_task\n    serialized, args, err = ray.get(\n                            ^^^^^^^^\nray.exceptions.RayTaskError(RuntimeError): \u{1b}[36mray::build_serve_application()\u{1b}[39m (pid=9418, ip=127.0.0.1)\n  File \"/v/ray/serve/_private/application_state.py\", line 1843, in build_serve_application\n    raise RuntimeError(err_str) from None\nRuntimeError: Traceback (most recent call last):\n  File \"<frozen importlib._bootstrap>\", line 1140, in _find_and_load_unlocked\nModuleNotFoundError: No module named 'no_such_module'\n";
        assert_eq!(
            deploy_failure_summary(msg),
            "ModuleNotFoundError: No module named 'no_such_module'"
        );
    }

    #[test]
    fn summary_edge_cases() {
        let cases: &[(&str, &str)] = &[
            ("", ""),
            ("plain message", "plain message"),
            ("\u{1b}[31mValueError: red\u{1b}[0m\n\n   \n", "ValueError: red"),
            ("Error: x\n    ^^^^ ~~~\n", "Error: x"),
            ("dangling escape \u{1b}", "dangling escape"),
        ];
        for (input, want) in cases {
            assert_eq!(deploy_failure_summary(input), *want, "{input:?}");
        }
        let long = format!("E: {}", "x".repeat(1000));
        let s = deploy_failure_summary(&long);
        assert_eq!(s.chars().count(), MAX_SUMMARY);
        assert!(s.ends_with('…'));
    }
}
