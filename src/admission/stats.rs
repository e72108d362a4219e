//! Where the admission loop spends its time, phase by phase, for `quotagate bench e2e` to print
//! (issue 11: "where a target is missed, the output says where the time went"). Counters only: cheap
//! enough to keep on in production, read by whoever holds a clone.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The phases of one admission cycle, in the order they run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Copying the caches into a snapshot.
    Snapshot,
    /// Feeding the core what changed and running the scheduling cycle (pure, synchronous).
    Step,
    /// Workload writes: admissions, evictions, pending conditions, finished slices.
    Writes,
    /// ClusterQueue, Cohort and LocalQueue status.
    QueueStatus,
}

impl Phase {
    pub const ALL: [Phase; 4] = [Phase::Snapshot, Phase::Step, Phase::Writes, Phase::QueueStatus];

    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Snapshot => "snapshot",
            Phase::Step => "step",
            Phase::Writes => "workload writes",
            Phase::QueueStatus => "queue status",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

#[derive(Debug, Default)]
struct Inner {
    cycles: AtomicU64,
    nanos: [AtomicU64; 4],
    /// Workloads in the snapshot, summed over cycles.
    examined: AtomicU64,
    /// Workloads the step read (not skipped as unchanged), summed over cycles.
    read: AtomicU64,
}

/// Shared counters; clones see the same figures.
#[derive(Clone, Debug, Default)]
pub struct CycleStats(Arc<Inner>);

/// What the counters held at one moment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CycleFigures {
    pub cycles: u64,
    /// Time per phase, in `Phase::ALL` order.
    pub phases: [Duration; 4],
    pub examined: u64,
    pub read: u64,
}

impl CycleStats {
    pub fn add(&self, phase: Phase, d: Duration) {
        let n = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.0.nanos[phase.index()].fetch_add(n, Ordering::Relaxed);
    }

    /// One cycle: `examined` Workloads in its snapshot, `read` of them read by the step.
    pub fn cycle(&self, examined: usize, read: usize) {
        self.0.cycles.fetch_add(1, Ordering::Relaxed);
        self.0.examined.fetch_add(examined as u64, Ordering::Relaxed);
        self.0.read.fetch_add(read as u64, Ordering::Relaxed);
    }

    pub fn figures(&self) -> CycleFigures {
        let mut phases = [Duration::ZERO; 4];
        for p in Phase::ALL {
            phases[p.index()] = Duration::from_nanos(self.0.nanos[p.index()].load(Ordering::Relaxed));
        }
        CycleFigures {
            cycles: self.0.cycles.load(Ordering::Relaxed),
            phases,
            examined: self.0.examined.load(Ordering::Relaxed),
            read: self.0.read.load(Ordering::Relaxed),
        }
    }
}

impl CycleFigures {
    /// One line: cycles, then each phase's total time and share of the loop's busy time.
    pub fn summary(&self) -> String {
        let busy: Duration = self.phases.iter().sum();
        let parts: Vec<String> = Phase::ALL
            .iter()
            .map(|p| {
                let d = self.phases[p.index()];
                let share = if busy.is_zero() {
                    0.0
                } else {
                    100.0 * d.as_secs_f64() / busy.as_secs_f64()
                };
                format!("{} {:.1} s ({share:.0}%)", p.as_str(), d.as_secs_f64())
            })
            .collect();
        let per = self.examined.checked_div(self.cycles).unwrap_or(0);
        let read = self.read.checked_div(self.cycles).unwrap_or(0);
        format!(
            "admission loop: {} cycles, busy {:.1} s: {}; {} workloads in a cycle's snapshot on average, {} of them read",
            self.cycles,
            busy.as_secs_f64(),
            parts.join(", "),
            per,
            read
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_sum_what_was_added_per_phase() {
        let s = CycleStats::default();
        s.add(Phase::Step, Duration::from_millis(30));
        s.add(Phase::Writes, Duration::from_millis(10));
        s.add(Phase::Step, Duration::from_millis(30));
        s.cycle(100, 10);
        s.cycle(50, 50);
        let f = s.clone().figures();
        assert_eq!(f.cycles, 2);
        assert_eq!(f.examined, 150);
        assert_eq!(f.read, 60);
        assert_eq!(
            f.phases,
            [
                Duration::ZERO,
                Duration::from_millis(60),
                Duration::from_millis(10),
                Duration::ZERO
            ]
        );
        let line = f.summary();
        assert!(line.contains("2 cycles"), "{line}");
        assert!(line.contains("step 0.1 s (86%)"), "{line}");
        assert!(
            line.contains("75 workloads in a cycle's snapshot on average, 30 of them read"),
            "{line}"
        );
    }
}
