//! A process-run pod's status from its containers' states, as the kubelet computes it
//! (`kubelet_pods.go` `getPhase`, `status/generate.go` for the Ready and ContainersReady conditions).

use serde_json::{Value, json};

use super::super::condition;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum State {
    Waiting {
        reason: String,
        message: String,
    },
    Running {
        started: String,
    },
    Terminated {
        code: i32,
        reason: String,
        started: String,
        finished: String,
    },
}

impl State {
    pub fn waiting(reason: &str, message: impl Into<String>) -> State {
        State::Waiting {
            reason: reason.into(),
            message: message.into(),
        }
    }

    fn to_json(&self) -> Value {
        match self {
            State::Waiting { reason, message } if message.is_empty() => {
                json!({"waiting": {"reason": reason}})
            }
            State::Waiting { reason, message } => json!({"waiting": {"reason": reason, "message": message}}),
            State::Running { started } => json!({"running": {"startedAt": started}}),
            State::Terminated {
                code,
                reason,
                started,
                finished,
            } => {
                json!({"terminated": {"exitCode": code, "reason": reason, "startedAt": started, "finishedAt": finished}})
            }
        }
    }
}

/// One container as the pod status shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct View {
    pub name: String,
    pub image: String,
    pub state: State,
    /// The previous run's end, once the container has restarted.
    pub last: Option<State>,
    pub restarts: u32,
    pub ready: bool,
    /// Its startup probe passed (or it has none) while running.
    pub started: bool,
}

impl View {
    pub fn new(name: &str, image: &str, state: State) -> View {
        View {
            name: name.into(),
            image: image.into(),
            state,
            last: None,
            restarts: 0,
            ready: false,
            started: false,
        }
    }

    fn to_json(&self) -> Value {
        let mut v = json!({
            "name": self.name, "image": self.image, "imageID": "", "ready": self.ready,
            "started": self.started, "restartCount": self.restarts, "state": self.state.to_json(),
        });
        if let Some(last) = &self.last {
            v["lastState"] = last.to_json();
        }
        v
    }
}

/// The pod phase from its containers under `restart_policy` (kubelet `getPhase`, without init containers).
pub fn phase(views: &[View], restart_policy: &str) -> &'static str {
    let (mut waiting, mut running, mut stopped, mut succeeded) = (0, 0, 0, 0);
    for v in views {
        match &v.state {
            State::Running { .. } => running += 1,
            State::Terminated { code, .. } => {
                stopped += 1;
                if *code == 0 {
                    succeeded += 1;
                }
            }
            // Waiting to restart after a run counts as stopped, never having run as pending.
            State::Waiting { .. } if v.last.is_some() => stopped += 1,
            State::Waiting { .. } => waiting += 1,
        }
    }
    if waiting > 0 || views.is_empty() {
        return "Pending";
    }
    if running > 0 {
        return "Running";
    }
    match restart_policy {
        "Always" => "Running",
        _ if stopped == succeeded => "Succeeded",
        "OnFailure" => "Running",
        _ => "Failed",
    }
}

/// The whole `status` to write, for a pod without init containers.
pub fn pod_status(
    views: &[View],
    restart_policy: &str,
    pod_ip: &str,
    host_ip: &str,
    start_time: &str,
) -> Value {
    pod_status_with_inits(views, &[], restart_policy, pod_ip, host_ip, start_time)
}

/// An init container that has not run yet, or a container waiting for the init containers.
pub fn initializing(name: &str, image: &str) -> View {
    View::new(name, image, State::waiting("PodInitializing", ""))
}

/// The whole `status` to write: `inits` are the init containers' views (kubelet: `Initialized` is
/// False, `ContainersNotInitialized`, until each has exited 0).
pub fn pod_status_with_inits(
    views: &[View],
    inits: &[View],
    restart_policy: &str,
    pod_ip: &str,
    host_ip: &str,
    start_time: &str,
) -> Value {
    let phase = phase(views, restart_policy);
    let unready: Vec<&str> = views
        .iter()
        .filter(|v| !v.ready)
        .map(|v| v.name.as_str())
        .collect();
    let incomplete: Vec<&str> = inits
        .iter()
        .filter(|v| !matches!(v.state, State::Terminated { code: 0, .. }))
        .map(|v| v.name.as_str())
        .collect();
    let initialized = incomplete.is_empty();
    let ready = unready.is_empty() && phase == "Running" && initialized;
    let (reason, message) = match phase {
        "Succeeded" | "Failed" => ("PodCompleted", String::new()),
        _ if ready => ("", String::new()),
        _ => (
            "ContainersNotReady",
            format!("containers with unready status: [{}]", unready.join(" ")),
        ),
    };
    let (init_reason, init_message) = if initialized {
        ("", String::new())
    } else {
        (
            "ContainersNotInitialized",
            format!("containers with incomplete status: [{}]", incomplete.join(" ")),
        )
    };
    let mut status = json!({
        "phase": phase,
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "startTime": start_time,
        "conditions": [
            condition("PodReadyToStartContainers", !pod_ip.is_empty(), "", "", None),
            condition("Initialized", initialized, init_reason, &init_message, None),
            condition("ContainersReady", ready, reason, &message, None),
            condition("Ready", ready, reason, &message, None),
            condition("PodScheduled", true, "", "", None),
        ],
        "containerStatuses": views.iter().map(View::to_json).collect::<Vec<_>>(),
    });
    if !inits.is_empty() {
        status["initContainerStatuses"] = json!(inits.iter().map(View::to_json).collect::<Vec<_>>());
    }
    if !pod_ip.is_empty() {
        status["podIP"] = json!(pod_ip);
        status["podIPs"] = json!([{"ip": pod_ip}]);
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run() -> State {
        State::Running { started: "t0".into() }
    }
    fn end(code: i32) -> State {
        State::Terminated {
            code,
            reason: if code == 0 { "Completed" } else { "Error" }.into(),
            started: "t0".into(),
            finished: "t1".into(),
        }
    }

    /// Expectations of kubernetes pkg/kubelet/kubelet_pods_test.go (TestPodPhaseWithRestartAlways,
    /// ...WithRestartNever, ...WithRestartOnFailure), without init containers.
    #[test]
    fn phase_as_the_kubelet_computes_it() {
        let v = |s: State| View::new("c", "i", s);
        let mut restarting = v(State::waiting("CrashLoopBackOff", "back-off"));
        restarting.last = Some(end(1));
        let cases: &[(&[View], &str, &str)] = &[
            (&[v(run()), v(run())], "Always", "Running"),
            (&[v(run()), v(end(0))], "Always", "Running"),
            (&[v(end(0)), v(end(1))], "Always", "Running"),
            (
                &[v(run()), v(State::waiting("ContainerCreating", ""))],
                "Always",
                "Pending",
            ),
            (&[restarting.clone()], "Always", "Running"),
            (&[v(end(0)), v(end(0))], "Never", "Succeeded"),
            (&[v(end(0)), v(end(137))], "Never", "Failed"),
            (&[v(run()), v(end(1))], "Never", "Running"),
            (&[v(end(0)), v(end(0))], "OnFailure", "Succeeded"),
            (&[v(end(0)), v(end(1))], "OnFailure", "Running"),
            (&[restarting], "OnFailure", "Running"),
            (&[], "Always", "Pending"),
        ];
        for (views, policy, want) in cases {
            assert_eq!(phase(views, policy), *want, "{views:?} {policy}");
        }
    }

    #[test]
    fn status_carries_ip_readiness_and_states() {
        let mut head = View::new("ray-head", "rayproject/ray:2.60.0", run());
        let sidecar = View {
            ready: true,
            started: true,
            ..View::new("autoscaler", "rayproject/ray:2.60.0", run())
        };
        let s = pod_status(
            &[head.clone(), sidecar.clone()],
            "Always",
            "10.244.130.2",
            "10.244.130.1",
            "t0",
        );
        assert_eq!(s["phase"], "Running");
        assert_eq!(s["podIP"], "10.244.130.2");
        assert_eq!(s["conditions"][3]["type"], "Ready");
        assert_eq!(s["conditions"][3]["status"], "False");
        assert_eq!(
            s["conditions"][3]["message"],
            "containers with unready status: [ray-head]"
        );
        assert_eq!(s["containerStatuses"][0]["state"]["running"]["startedAt"], "t0");
        head.ready = true;
        head.restarts = 2;
        head.last = Some(end(137));
        let s = pod_status(&[head, sidecar], "Always", "10.244.130.2", "10.244.130.1", "t0");
        assert_eq!(
            (
                s["conditions"][2]["status"].as_str(),
                s["conditions"][3]["status"].as_str()
            ),
            (Some("True"), Some("True"))
        );
        assert_eq!(s["containerStatuses"][0]["restartCount"], 2);
        assert_eq!(
            s["containerStatuses"][0]["lastState"]["terminated"]["exitCode"],
            137
        );
        let done = pod_status(&[View::new("c", "i", end(3))], "Never", "", "10.244.130.1", "t0");
        assert_eq!(
            (done["phase"].as_str(), done["conditions"][3]["reason"].as_str()),
            (Some("Failed"), Some("PodCompleted"))
        );
        assert!(done.get("podIP").is_none());
        assert!(done.get("initContainerStatuses").is_none());
    }

    /// As the kubelet shows a pod whose init container runs (KubeRay's `wait-gcs-ready`): Pending,
    /// Initialized=False ContainersNotInitialized naming it, the containers waiting PodInitializing;
    /// then, once it exited 0, Initialized=True and its status Terminated/Completed.
    #[test]
    fn init_containers_show_in_their_own_statuses() {
        let worker = initializing("ray-worker", "rayproject/ray:2.60.0");
        let waiting = View::new("wait-gcs-ready", "rayproject/ray:2.60.0", run());
        let s = pod_status_with_inits(
            &[worker],
            &[waiting],
            "Always",
            "10.244.130.3",
            "10.244.130.1",
            "t0",
        );
        assert_eq!(s["phase"], "Pending");
        assert_eq!(
            (
                s["conditions"][1]["type"].as_str(),
                s["conditions"][1]["status"].as_str()
            ),
            (Some("Initialized"), Some("False"))
        );
        assert_eq!(s["conditions"][1]["reason"], "ContainersNotInitialized");
        assert_eq!(
            s["conditions"][1]["message"],
            "containers with incomplete status: [wait-gcs-ready]"
        );
        assert_eq!(
            s["initContainerStatuses"][0]["state"]["running"]["startedAt"],
            "t0"
        );
        assert_eq!(
            s["containerStatuses"][0]["state"]["waiting"]["reason"],
            "PodInitializing"
        );
        let worker = View {
            ready: true,
            started: true,
            ..View::new("ray-worker", "rayproject/ray:2.60.0", run())
        };
        let done = View::new("wait-gcs-ready", "rayproject/ray:2.60.0", end(0));
        let s = pod_status_with_inits(&[worker], &[done], "Always", "10.244.130.3", "10.244.130.1", "t0");
        assert_eq!(
            (
                s["phase"].as_str(),
                s["conditions"][1]["status"].as_str(),
                s["conditions"][3]["status"].as_str()
            ),
            (Some("Running"), Some("True"), Some("True"))
        );
        assert_eq!(
            s["initContainerStatuses"][0]["state"]["terminated"]["reason"],
            "Completed"
        );
        assert_eq!(s["initContainerStatuses"][0]["ready"], false);
    }
}
