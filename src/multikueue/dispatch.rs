//! Which workers get a copy of a Workload (`status.nominatedClusterNames`): Kueue's two built-in
//! dispatchers. `AllAtOnce` nominates every connected worker of the MultiKueueConfig. `Incremental`
//! (Kueue's `pkg/controller/workloaddispatcher/incrementaldispatcher.go`) nominates `stepSize` (3)
//! workers not yet nominated, in the config's order (Kueue's `RespectConfigOrder` gate, on by
//! default), and `roundTimeout` (5 minutes) later, if none of them admitted the copy, `stepSize`
//! more, keeping the earlier ones; when every worker is nominated it waits. The start of each
//! Workload's round is kept in memory, as Kueue keeps it (a restarted manager starts a new round).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::Dispatcher;

/// What the dispatcher decides for one Workload now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Nomination {
    /// Keep the current nominations; the round ends in this long.
    Wait(Duration),
    /// Nominate these (the earlier ones and the new round's), then call [`Nominator::round_started`].
    Next(Vec<String>),
    /// Every worker of the config is nominated already (Kueue's `ErrNoMoreWorkers`).
    NoMoreWorkers,
}

/// Kueue's `getNextNominatedWorkers`: the config's workers not nominated yet, in the config's
/// order, at most `step` of them.
pub fn next_workers(already: &[String], clusters: &[String], step: usize) -> Vec<String> {
    clusters
        .iter()
        .filter(|c| !already.contains(c))
        .take(step.max(1))
        .cloned()
        .collect()
}

/// Kueue's `nominateWorkers` round check: `Some(remaining)` while the round that started at
/// `start` still runs (its end included, as Kueue's `<=`), `None` when a new round is due.
pub fn round_remaining(start: Option<Instant>, now: Instant, timeout: Duration) -> Option<Duration> {
    let elapsed = now.saturating_duration_since(start?);
    (elapsed <= timeout).then(|| timeout - elapsed)
}

/// The Incremental dispatcher's round starts, by Workload (namespace, name).
pub struct Nominator {
    pub mode: Dispatcher,
    round_timeout: Duration,
    rounds: Mutex<HashMap<(String, String), Instant>>,
}

impl Nominator {
    pub fn new(mode: Dispatcher, round_timeout: Duration) -> Self {
        Nominator {
            mode,
            round_timeout,
            rounds: Mutex::new(HashMap::new()),
        }
    }

    /// For the Incremental dispatcher: whether a new round is due for the Workload `key`, whose
    /// nominations are `already`, among the config's `clusters`.
    pub fn incremental(
        &self,
        key: &(String, String),
        step: usize,
        already: &[String],
        clusters: &[String],
        now: Instant,
    ) -> Nomination {
        let start = self.rounds.lock().ok().and_then(|r| r.get(key).copied());
        if let Some(left) = round_remaining(start, now, self.round_timeout) {
            return Nomination::Wait(left);
        }
        let next = next_workers(already, clusters, step);
        if next.is_empty() {
            return Nomination::NoMoreWorkers;
        }
        let mut all = already.to_vec();
        all.extend(next);
        Nomination::Next(all)
    }

    /// The new round's nominations were written at `now`.
    pub fn round_started(&self, key: &(String, String), now: Instant) {
        if let Ok(mut r) = self.rounds.lock() {
            r.insert(key.clone(), now);
        }
    }

    /// Kueue's `clearRoundStartTime`: the Workload is gone, finished or lost its quota.
    pub fn forget(&self, key: &(String, String)) {
        if let Ok(mut r) = self.rounds.lock() {
            r.remove(key);
        }
    }

    pub fn round_timeout(&self) -> Duration {
        self.round_timeout
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    /// Kueue `incrementaldispatcher_test.go` `TestIncrementalDispatcherNominateWorkers` (names
    /// anti-alphabetical, so the config's order shows; `RespectConfigOrder` on, its default).
    #[test]
    fn next_workers_in_config_order_by_step() {
        let fifteen = names(&[
            "O", "N", "M", "L", "K", "J", "I", "H", "G", "F", "E", "D", "C", "B", "A",
        ]);
        // "one remote", "two remotes", "three remotes", "fifteen remotes"
        assert_eq!(next_workers(&[], &names(&["A"]), 3), names(&["A"]));
        assert_eq!(next_workers(&[], &names(&["B", "A"]), 3), names(&["B", "A"]));
        assert_eq!(
            next_workers(&[], &names(&["C", "B", "A"]), 3),
            names(&["C", "B", "A"])
        );
        assert_eq!(next_workers(&[], &fifteen, 3), names(&["O", "N", "M"]));
        // "all already nominated (3)", "no remotes": ErrNoMoreWorkers
        let cba = names(&["C", "B", "A"]);
        assert!(next_workers(&cba, &cba, 3).is_empty());
        assert!(next_workers(&[], &[], 3).is_empty());
        // "round expired, next set nominated", "round expired, nominate all"
        let six = names(&["F", "E", "D", "C", "B", "A"]);
        assert_eq!(next_workers(&names(&["F", "E", "D"]), &six, 3), cba);
        let eight = names(&["H", "G", "F", "E", "D", "C", "B", "A"]);
        assert_eq!(
            next_workers(&names(&["H", "G", "F", "E", "D", "C"]), &eight, 3),
            names(&["B", "A"])
        );
        // "stepSize=2, five remotes", "stepSize=2, round expired"
        let five = names(&["E", "D", "C", "B", "A"]);
        assert_eq!(next_workers(&[], &five, 2), names(&["E", "D"]));
        assert_eq!(next_workers(&names(&["E", "D"]), &five, 2), names(&["C", "B"]));
    }

    /// Kueue `nominateWorkers`: no round yet, or one older than the timeout: a new round; otherwise
    /// wait for what is left of it (the boundary still belongs to the round).
    #[test]
    fn rounds_last_the_timeout() {
        let t0 = Instant::now();
        let to = Duration::from_secs(300);
        assert_eq!(round_remaining(None, t0, to), None);
        assert_eq!(round_remaining(Some(t0), t0, to), Some(to));
        let later = t0 + Duration::from_secs(120);
        assert_eq!(
            round_remaining(Some(t0), later, to),
            Some(Duration::from_secs(180))
        );
        assert_eq!(round_remaining(Some(t0), t0 + to, to), Some(Duration::ZERO));
        assert_eq!(
            round_remaining(Some(t0), t0 + to + Duration::from_millis(1), to),
            None
        );
    }

    /// Kueue `incrementaldispatcher_test.go` rounds: 3, then 3 more after the round timeout, then
    /// the rest; a Workload forgotten (lost its quota) starts over.
    #[test]
    fn a_round_every_timeout_keeping_earlier_nominations() {
        let cfg = names(&["w1", "w2", "w3", "w4", "w5", "w6", "w7"]);
        let n = Nominator::new(Dispatcher::Incremental { step: 3 }, Duration::from_secs(300));
        let key = ("ns".to_string(), "wl".to_string());
        let t0 = Instant::now();
        let Nomination::Next(r1) = n.incremental(&key, 3, &[], &cfg, t0) else {
            panic!("the first round starts at once")
        };
        assert_eq!(r1, names(&["w1", "w2", "w3"]));
        n.round_started(&key, t0);
        assert_eq!(
            n.incremental(&key, 3, &r1, &cfg, t0 + Duration::from_secs(60)),
            Nomination::Wait(Duration::from_secs(240))
        );
        let t1 = t0 + Duration::from_secs(301);
        let Nomination::Next(r2) = n.incremental(&key, 3, &r1, &cfg, t1) else {
            panic!("a second round after the timeout")
        };
        assert_eq!(r2, names(&["w1", "w2", "w3", "w4", "w5", "w6"]));
        n.round_started(&key, t1);
        let t2 = t1 + Duration::from_secs(301);
        let Nomination::Next(r3) = n.incremental(&key, 3, &r2, &cfg, t2) else {
            panic!("a third round")
        };
        assert_eq!(r3, cfg);
        n.round_started(&key, t2);
        let t3 = t2 + Duration::from_secs(301);
        assert_eq!(n.incremental(&key, 3, &r3, &cfg, t3), Nomination::NoMoreWorkers);
        n.forget(&key);
        assert_eq!(
            n.incremental(&key, 3, &[], &cfg, t3),
            Nomination::Next(names(&["w1", "w2", "w3"]))
        );
    }
}
