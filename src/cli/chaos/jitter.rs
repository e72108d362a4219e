//! Induced timing variation for a run (issue 67): a stall that shows only when the machine is loaded
//! should fail on every run of its seed, not one in three. A run under jitter keeps its seed's world
//! and actions; beside them a task drawn from its own seeded stream (the schedule is the same on every
//! run of the seed) makes the timing a loaded machine makes:
//!
//! - it stalls a runtime worker thread for a few to tens of milliseconds at random moments (the OS
//!   taking the CPU from the process: every task on that worker, a watch's event handling, the
//!   admission loop or a reconcile, waits, and the others run on meanwhile);
//! - it slows every API request by a varying delay for a while (a busy API server: watches restart
//!   later, a fault injector's writes and a controller's land in another order);
//! - and pods start after a seeded delay, not the fixed one.
//!
//! What it cannot make is a reordering no loaded machine makes: every delay is one the real
//! components may see. `quotagate chaos --jitter` (or `CHAOS_JITTER=1`) turns it on; the CI regression tests
//! run their seeds under it.

use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::embedded::EmbeddedServer;

/// How a run's timing goes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Timing {
    /// As the machine gives it.
    #[default]
    Plain,
    /// Under the seeded jitter of this module.
    Jitter,
}

impl Timing {
    /// `CHAOS_JITTER=1` (or `true`): jitter; unset, empty or `0`: plain. Anything else is an error
    /// naming the variable.
    pub fn from_env() -> Result<Timing, String> {
        Timing::parse(std::env::var("CHAOS_JITTER").ok().as_deref())
    }

    fn parse(v: Option<&str>) -> Result<Timing, String> {
        match v {
            None | Some("" | "0" | "false") => Ok(Timing::Plain),
            Some("1" | "true") => Ok(Timing::Jitter),
            Some(other) => Err(format!("CHAOS_JITTER: {other:?} is not 0, 1, true or false")),
        }
    }
}

/// The jitter's own stream for `seed`, apart from the world's, the actions' and the pacing's.
fn stream(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed ^ 0x0071_77e4_0071_77e4)
}

/// How long pods take to start in a run of `seed`: the usual 150 ms, or a seeded 50-400 ms.
pub(super) fn pod_start(timing: Timing, seed: u64) -> Duration {
    match timing {
        Timing::Plain => Duration::from_millis(150),
        Timing::Jitter => Duration::from_millis(stream(seed).random_range(50..=400)),
    }
}

/// The longest a worker is stalled at once, and the longest API delay.
const MAX_STALL_MS: u64 = 40;
const MAX_API_DELAY_MS: u64 = 30;

/// Starts the jitter of a run of `seed` on `server` (nothing under `Timing::Plain`); it stops when
/// the guard is dropped. The API delay is cleared on every way out.
pub(super) fn start(timing: Timing, seed: u64, server: &Arc<EmbeddedServer>) -> Option<DropGuard> {
    if timing == Timing::Plain {
        return None;
    }
    let cancel = CancellationToken::new();
    let stop = cancel.clone();
    let server = server.clone();
    let mut rng = stream(seed);
    // The first draw went to the pod start delay.
    let _ = rng.random_range(50..=400u64);
    tokio::spawn(async move {
        loop {
            let pause = Duration::from_millis(rng.random_range(10..=200));
            tokio::select! {
                () = stop.cancelled() => break,
                () = tokio::time::sleep(pause) => {}
            }
            match rng.random_range(0..10) {
                // A worker thread taken away, as the OS does under load. Blocking is the point.
                0..=4 => std::thread::sleep(Duration::from_millis(rng.random_range(2..=MAX_STALL_MS))),
                5..=7 => server.store.faults.set_delay(Some(Duration::from_millis(
                    rng.random_range(1..=MAX_API_DELAY_MS),
                ))),
                _ => server.store.faults.set_delay(None),
            }
        }
        server.store.faults.set_delay(None);
    });
    Some(cancel.drop_guard())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_switch_is_checked() {
        for (v, want) in [
            (None, Timing::Plain),
            (Some(""), Timing::Plain),
            (Some("0"), Timing::Plain),
            (Some("1"), Timing::Jitter),
            (Some("true"), Timing::Jitter),
        ] {
            assert_eq!(Timing::parse(v), Ok(want), "{v:?}");
        }
        let err = Timing::parse(Some("yes")).unwrap_err();
        assert!(err.contains("CHAOS_JITTER"), "{err}");
    }

    #[test]
    fn a_seed_has_one_pod_start_delay() {
        assert_eq!(pod_start(Timing::Plain, 7), Duration::from_millis(150));
        let d = pod_start(Timing::Jitter, 7);
        assert_eq!(d, pod_start(Timing::Jitter, 7));
        assert!((50..=400).contains(&d.as_millis()), "{d:?}");
    }
}
