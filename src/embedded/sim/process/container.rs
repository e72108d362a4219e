//! One container run as a process: started in its own process group, probed, restarted per the pod's
//! `restartPolicy` with the kubelet's back-off (immediately, then 10 s doubling to 5 min, reset after
//! 10 min of running), stopped with SIGTERM to the group and SIGKILL after the grace period. After its
//! main process ends, whatever it left in the group is killed too (the kubelet kills the whole cgroup).
//! Every change of what the pod status shows is sent to the pod's supervisor.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::probe::{self, Spec, Tally};
use super::status::{State, View};

const BACKOFF_START: Duration = Duration::from_secs(10);
const BACKOFF_MAX: Duration = Duration::from_secs(300);
const BACKOFF_RESET: Duration = Duration::from_secs(600);

/// Everything needed to run one container.
#[derive(Clone, Debug)]
pub struct Launch {
    pub index: usize,
    pub name: String,
    pub image: String,
    /// Arguments of `ip` (see `launch::argv`).
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    pub log: PathBuf,
    pub pod_ip: String,
    /// `namespace/name`, for messages.
    pub pod: String,
    pub restart_policy: String,
    pub grace: Duration,
    pub startup: Option<Spec>,
    pub readiness: Option<Spec>,
    pub liveness: Option<Spec>,
    /// The pod's CPU group: the process goes there as soon as it starts (what it forks follows).
    pub cgroup: Option<std::path::PathBuf>,
}

/// The stop request a pod sends its containers: the grace period to give them.
pub type Stop = watch::Receiver<Option<Duration>>;

fn now() -> String {
    crate::embedded::meta::now_rfc3339()
}

/// Exit code as the kubelet reports it: the code, or 128 + the signal that ended the process.
fn exit_code(s: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    s.code()
        .or_else(|| s.signal().map(|sig| 128 + sig))
        .unwrap_or(128)
}

async fn signal_group(pgid: u32, signal: &str) {
    let _ = Command::new("kill")
        .args([&format!("-{signal}"), "--", &format!("-{pgid}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await;
}

/// SIGTERM to the group, SIGKILL after `grace`; returns the main process's exit code.
pub async fn terminate(child: &mut Child, pgid: u32, grace: Duration) -> i32 {
    signal_group(pgid, "TERM").await;
    let code = match tokio::time::timeout(grace, child.wait()).await {
        Ok(Ok(s)) => exit_code(s),
        _ => {
            signal_group(pgid, "KILL").await;
            child.wait().await.map(exit_code).unwrap_or(137)
        }
    };
    // Whatever outlived the main process in its group.
    signal_group(pgid, "KILL").await;
    code
}

fn spawn(l: &Launch) -> Result<Child, String> {
    if let Some(dir) = l.log.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&l.log)
        .map_err(|e| format!("{}: {e}", l.log.display()))?;
    let err = out.try_clone().map_err(|e| e.to_string())?;
    Command::new("ip")
        .args(&l.argv)
        .env_clear()
        .envs(l.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0)
        .spawn()
        .map_err(|e| format!("starting `ip netns exec`: {e}"))
}

struct Probing {
    spec: Spec,
    tally: Tally,
    next: Instant,
}

impl Probing {
    fn new(spec: &Option<Spec>, started: Instant) -> Option<Probing> {
        spec.as_ref().map(|s| Probing {
            spec: s.clone(),
            tally: Tally::default(),
            next: started + s.initial_delay,
        })
    }
}

/// The delay before the next restart, after this many restarts in a row.
pub fn backoff(restarts_in_a_row: u32) -> Duration {
    if restarts_in_a_row == 0 {
        return Duration::ZERO;
    }
    let doublings = (restarts_in_a_row - 1).min(8);
    (BACKOFF_START * 2u32.pow(doublings)).min(BACKOFF_MAX)
}

pub fn restarts(policy: &str, code: i32) -> bool {
    policy == "Always" || (policy == "OnFailure" && code != 0)
}

/// Runs the container until it ends for good or the pod stops it.
pub async fn run(l: Launch, tx: mpsc::UnboundedSender<(usize, View)>, mut stop: Stop) {
    let mut view = View::new(&l.name, &l.image, State::waiting("ContainerCreating", ""));
    let mut in_a_row = 0u32;
    loop {
        let mut child = match spawn(&l) {
            Ok(c) => c,
            Err(message) => {
                view.state = State::waiting("RunContainerError", message);
                let _ = tx.send((l.index, view.clone()));
                return;
            }
        };
        let Some(pid) = child.id() else { return };
        if let Some(dir) = &l.cgroup {
            super::cgroup::add(dir, pid);
        }
        let started_at = Instant::now();
        let started = now();
        view.state = State::Running {
            started: started.clone(),
        };
        view.started = l.startup.is_none();
        view.ready = view.started && l.readiness.is_none();
        let _ = tx.send((l.index, view.clone()));
        let mut startup = Probing::new(&l.startup, started_at);
        let mut readiness = Probing::new(&l.readiness, started_at);
        let mut liveness = Probing::new(&l.liveness, started_at);
        let code = loop {
            // Startup first; readiness and liveness only once it passed.
            let due = if !view.started {
                startup.as_ref().map(|p| p.next)
            } else {
                [&readiness, &liveness]
                    .iter()
                    .filter_map(|p| p.as_ref().map(|p| p.next))
                    .min()
            };
            let sleep = async {
                match due {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                status = child.wait() => {
                    let code = status.map(exit_code).unwrap_or(128);
                    signal_group(pid, "KILL").await;
                    break code;
                }
                _ = stop.changed() => {
                    let grace = (*stop.borrow()).unwrap_or(l.grace);
                    let code = terminate(&mut child, pid, grace).await;
                    view.ready = false;
                    view.state = State::Terminated { code, reason: reason(code).into(), started, finished: now() };
                    let _ = tx.send((l.index, view));
                    return;
                }
                _ = sleep => {
                    let t = Instant::now();
                    if !view.started {
                        if let Some(p) = startup.as_mut() {
                            let ok = probe::run(&p.spec.check, &l.pod_ip, pid, &l.env, p.spec.timeout).await;
                            p.next = t + p.spec.period;
                            match p.tally.record(ok, &p.spec) {
                                Some(true) => {
                                    view.started = true;
                                    view.ready = l.readiness.is_none();
                                    let now = Instant::now();
                                    for q in [&mut readiness, &mut liveness].into_iter().flatten() {
                                        q.next = now + q.spec.initial_delay;
                                    }
                                    let _ = tx.send((l.index, view.clone()));
                                }
                                Some(false) => {
                                    tracing::info!(pod = %l.pod, container = %l.name, "startup probe failed; restarting the container");
                                    break terminate(&mut child, pid, l.grace).await;
                                }
                                None => {}
                            }
                        }
                        continue;
                    }
                    if let Some(p) = readiness.as_mut().filter(|p| p.next <= t) {
                        let ok = probe::run(&p.spec.check, &l.pod_ip, pid, &l.env, p.spec.timeout).await;
                        p.next = t + p.spec.period;
                        if let Some(ready) = p.tally.record(ok, &p.spec) {
                            view.ready = ready;
                            let _ = tx.send((l.index, view.clone()));
                        }
                    }
                    if let Some(p) = liveness.as_mut().filter(|p| p.next <= t) {
                        let ok = probe::run(&p.spec.check, &l.pod_ip, pid, &l.env, p.spec.timeout).await;
                        p.next = t + p.spec.period;
                        if p.tally.record(ok, &p.spec) == Some(false) {
                            tracing::info!(pod = %l.pod, container = %l.name, "liveness probe failed; restarting the container");
                            break terminate(&mut child, pid, l.grace).await;
                        }
                    }
                }
            }
        };
        let ended = State::Terminated {
            code,
            reason: reason(code).into(),
            started,
            finished: now(),
        };
        view.ready = false;
        view.started = false;
        if !restarts(&l.restart_policy, code) {
            view.state = ended;
            let _ = tx.send((l.index, view));
            return;
        }
        if started_at.elapsed() >= BACKOFF_RESET {
            in_a_row = 0;
        }
        let delay = backoff(in_a_row);
        in_a_row = in_a_row.saturating_add(1);
        view.last = Some(ended.clone());
        view.state = if delay.is_zero() {
            ended
        } else {
            State::waiting(
                "CrashLoopBackOff",
                format!(
                    "back-off {}s restarting failed container={} pod={}",
                    delay.as_secs(),
                    l.name,
                    l.pod
                ),
            )
        };
        let _ = tx.send((l.index, view.clone()));
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = stop.changed() => {
                if let Some(last) = view.last.take() {
                    view.state = last;
                }
                let _ = tx.send((l.index, view));
                return;
            }
        }
        view.restarts = view.restarts.saturating_add(1);
    }
}

fn reason(code: i32) -> &'static str {
    if code == 0 { "Completed" } else { "Error" }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_as_the_kubelet() {
        let s = Duration::from_secs;
        assert_eq!(
            [0, 1, 2, 3, 4, 5, 6, 40].map(backoff),
            [s(0), s(10), s(20), s(40), s(80), s(160), s(300), s(300)]
        );
        assert!(
            restarts("Always", 0)
                && restarts("OnFailure", 1)
                && !restarts("OnFailure", 0)
                && !restarts("Never", 1)
        );
    }
}
