//! `quotagate demo --real-ray`: what the demo needs beyond the simulated story. Pods with a
//! rayproject/ray image run the pinned Ray as real processes (the process runtime), the RayService
//! deploys a real Serve app (the one the tests ship, written to a temporary directory and put on the
//! head's PYTHONPATH, as a user's image would bring it), and `quotagate load` sends real requests
//! through the serve Service's ClusterIP from the moment the service is Ready to the end, its counts
//! printed at every step.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::cli::load::{self, LoadError, Report};

/// The Serve app: one deployment answering with its cluster's name and Ray version.
const ECHO_APP: &str = include_str!("../../tests/ray_serve_app/echo_app.py");
/// The requests per second the demo sends.
pub const LOAD_RPS: u32 = 20;

/// The real-Ray side of one demo run: the app's directory (removed when dropped) and the load.
pub struct RealRay {
    app_dir: PathBuf,
    load: Mutex<Option<LoadRun>>,
    latest: Arc<Mutex<Report>>,
}

struct LoadRun {
    stop: CancellationToken,
    task: JoinHandle<Result<Report, LoadError>>,
}

impl RealRay {
    /// Writes the Serve app to a fresh directory under /var/tmp (not /tmp: each pod has a /tmp of its
    /// own, as in a container).
    pub fn new() -> std::io::Result<RealRay> {
        let app_dir = PathBuf::from("/var/tmp").join(format!("quotagate-demo-app-{}", std::process::id()));
        std::fs::create_dir_all(&app_dir)?;
        std::fs::write(app_dir.join("echo_app.py"), ECHO_APP)?;
        Ok(RealRay {
            app_dir,
            load: Mutex::new(None),
            latest: Arc::default(),
        })
    }

    pub fn app_dir(&self) -> &Path {
        &self.app_dir
    }

    /// Starts the load on `url`; `latest` follows it second by second.
    pub fn start_load(&self, url: String) {
        let stop = CancellationToken::new();
        let latest = self.latest.clone();
        let opts = load::Options {
            url,
            rps: LOAD_RPS,
            duration: load::MAX_DURATION,
            connections: 64,
            timeout: Duration::from_secs(5),
            ..Default::default()
        };
        let s = stop.clone();
        let task = tokio::spawn(async move {
            let progress =
                move |r: &Report| *latest.lock().unwrap_or_else(PoisonError::into_inner) = r.clone();
            load::run(&opts, s, Some(&progress)).await
        });
        *self.load.lock().unwrap_or_else(PoisonError::into_inner) = Some(LoadRun { stop, task });
    }

    /// The load's counts so far, as a clause to append to a step ("" before it started).
    pub fn counts(&self) -> String {
        if self.load.lock().unwrap_or_else(PoisonError::into_inner).is_none() {
            return String::new();
        }
        format!(
            " [load: {}]",
            summary(&self.latest.lock().unwrap_or_else(PoisonError::into_inner))
        )
    }

    /// Whether `cluster` has answered a request of the load yet.
    pub fn answered_by(&self, cluster: &str) -> bool {
        self.latest
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clusters_in_order
            .iter()
            .any(|c| c == cluster)
    }

    /// Stops the load and returns its whole report (None if it never started).
    pub async fn finish_load(&self) -> Option<Result<Report, LoadError>> {
        let run = self.load.lock().unwrap_or_else(PoisonError::into_inner).take()?;
        run.stop.cancel();
        Some(run.task.await.unwrap_or_else(|e| {
            Err(LoadError::Url(
                String::new(),
                format!("the load generator stopped: {e}"),
            ))
        }))
    }
}

impl Drop for RealRay {
    fn drop(&mut self) {
        if let Some(run) = self.load.lock().unwrap_or_else(PoisonError::into_inner).take() {
            run.stop.cancel();
        }
        let _ = std::fs::remove_dir_all(&self.app_dir);
    }
}

/// `1204` -> `1,204`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// "1,204 requests, 0 failed, served by fruit-stand-abc then fruit-stand-def".
pub fn summary(r: &Report) -> String {
    let served = if r.clusters_in_order.is_empty() {
        "no answer yet".to_owned()
    } else {
        format!("served by {}", r.clusters_in_order.join(" then "))
    };
    format!(
        "{} requests, {} failed, {served}",
        thousands(r.total.sent),
        thousands(r.total.failed())
    )
}

/// The demo's RayService on real Ray: the same quota story as the simulated one (its cluster asks 2
/// CPU), head-only with Serve on the head (the replicas ask no CPU), the app on the head's PYTHONPATH.
/// `color` goes into the head's environment: changing it is the upgrade.
pub fn ray_service(app_dir: &Path, color: &str) -> Value {
    let res = json!({"requests": {"cpu": "2", "memory": "2Gi"}, "limits": {"cpu": "2", "memory": "2Gi"}});
    json!({
        "apiVersion": "ray.io/v1", "kind": "RayService",
        "metadata": {"name": "fruit-stand", "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": "demo-queue"}},
        "spec": {
            "rayClusterDeletionDelaySeconds": 3,
            "serveConfigV2": "applications:\n  - name: echo\n    import_path: echo_app:app\n    route_prefix: /\n    deployments:\n      - name: Echo\n        num_replicas: 2\n        ray_actor_options:\n          num_cpus: 0\n",
            "rayClusterConfig": {
                "rayVersion": "2.60.0",
                "headGroupSpec": {"rayStartParams": {"num-cpus": "1", "object-store-memory": "100000000"}, "template": {"spec": {
                    // Ray drains for up to 30 s on SIGTERM; 5 s then SIGKILL keeps the demo short.
                    "terminationGracePeriodSeconds": 5,
                    "containers": [{"name": "ray-head", "image": "rayproject/ray:2.60.0", "resources": res,
                        "env": [{"name": "PYTHONPATH", "value": app_dir.display().to_string()}, {"name": "COLOR", "value": color}],
                        "ports": [{"containerPort": 6379, "name": "gcs-server"}, {"containerPort": 8265, "name": "dashboard"},
                                  {"containerPort": 10001, "name": "client"}, {"containerPort": 8000, "name": "serve"}]}]}}},
                "workerGroupSpecs": []
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_read_as_a_person_would_say_them() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1204), "1,204");
        assert_eq!(thousands(1_234_567), "1,234,567");
        let mut r = Report::default();
        assert_eq!(summary(&r), "0 requests, 0 failed, no answer yet");
        r.total.sent = 1204;
        r.total.timeouts = 2;
        r.clusters_in_order = vec!["fruit-stand-abc".into(), "fruit-stand-def".into()];
        assert_eq!(
            summary(&r),
            "1,204 requests, 2 failed, served by fruit-stand-abc then fruit-stand-def"
        );
    }

    #[test]
    fn the_app_is_written_and_removed() {
        let real = RealRay::new().unwrap();
        let dir = real.app_dir().to_owned();
        assert!(
            std::fs::read_to_string(dir.join("echo_app.py"))
                .unwrap()
                .contains("serve.deployment")
        );
        assert_eq!(real.counts(), "", "no load yet, no counts");
        let rs = ray_service(&dir, "blue");
        assert_eq!(
            rs.pointer("/spec/rayClusterConfig/headGroupSpec/template/spec/containers/0/env/0/value")
                .and_then(Value::as_str),
            dir.to_str()
        );
        drop(real);
        assert!(!dir.exists());
    }
}
