//! Which of a listener's connections may be closed to make room: those not yet trusted (TLS
//! handshake not done, or no authenticated request yet), oldest first. Trusted connections are
//! bounded only by the process's descriptor budget, shared by every listener.
//!
//! kube-apiserver caps no sockets and is a Go program, which raises its soft descriptor limit to the
//! hard one at start; we keep a cap so that bare sockets cannot take the descriptors the data
//! directory needs, but it applies to untrusted connections only, so it can never keep out a client
//! that holds a token.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// Descriptors kept back from the listeners: the data directory's files, outgoing connections
/// (webhooks, the manager's client), logs.
const RESERVE: usize = 256;

/// How many connections all listeners of the process may hold at once: the soft `RLIMIT_NOFILE`
/// (read from `/proc/self/limits`; 1,024, the usual default, when it cannot be read) less
/// [`RESERVE`], and never below 64.
pub fn descriptor_budget() -> usize {
    static BUDGET: OnceLock<usize> = OnceLock::new();
    *BUDGET.get_or_init(|| {
        let soft = std::fs::read_to_string("/proc/self/limits")
            .ok()
            .and_then(|t| soft_open_files(&t))
            .unwrap_or(1024);
        budget_from(soft)
    })
}

fn budget_from(soft: usize) -> usize {
    soft.saturating_sub(RESERVE).max(64)
}

/// The soft "Max open files" of a `/proc/PID/limits` text (`unlimited` as a very large number).
fn soft_open_files(limits: &str) -> Option<usize> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    let soft = line
        .trim_start_matches("Max open files")
        .split_whitespace()
        .next()?;
    if soft == "unlimited" {
        return Some(1 << 20);
    }
    soft.parse().ok()
}

/// The process-wide semaphore of [`descriptor_budget`] permits, one per open connection.
pub fn descriptors() -> Arc<Semaphore> {
    static SEM: OnceLock<Arc<Semaphore>> = OnceLock::new();
    SEM.get_or_init(|| Arc::new(Semaphore::new(descriptor_budget())))
        .clone()
}

/// A listener's untrusted connections, each with the token that closes it.
pub struct Untrusted {
    cap: usize,
    next: AtomicU64,
    open: Mutex<BTreeMap<u64, CancellationToken>>,
    warned: Mutex<Option<Instant>>,
}

/// One connection's place in [`Untrusted`]; it leaves when trusted or dropped.
pub struct Conn {
    id: u64,
    pool: Arc<Untrusted>,
    trusted: AtomicBool,
}

impl Conn {
    /// The connection has shown it is trusted: never closed to make room from now on.
    pub fn trust(&self) {
        if !self.trusted.swap(true, Ordering::AcqRel) {
            self.pool.remove(self.id);
        }
    }

    pub fn is_trusted(&self) -> bool {
        self.trusted.load(Ordering::Acquire)
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        if !self.trusted.load(Ordering::Acquire) {
            self.pool.remove(self.id);
        }
    }
}

impl Untrusted {
    pub fn new(cap: usize) -> Arc<Self> {
        Arc::new(Untrusted {
            cap: cap.max(1),
            next: AtomicU64::new(0),
            open: Mutex::new(BTreeMap::new()),
            warned: Mutex::new(None),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, CancellationToken>> {
        // Nothing panics while holding the lock; a poisoned map is still a consistent map.
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn remove(&self, id: u64) {
        self.lock().remove(&id);
    }

    /// How many untrusted connections are open.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A new connection, untrusted, closed by its token (a child of `parent`). Past the cap the
    /// oldest untrusted connections are closed; returns how many.
    pub fn admit(self: &Arc<Self>, parent: &CancellationToken) -> (Arc<Conn>, CancellationToken, usize) {
        let token = parent.child_token();
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let mut closed = 0;
        {
            let mut open = self.lock();
            open.insert(id, token.clone());
            while open.len() > self.cap {
                if let Some((_, oldest)) = open.pop_first() {
                    oldest.cancel();
                    closed += 1;
                }
            }
        }
        if closed > 0 {
            self.warn_at_most_once_a_minute();
        }
        let conn = Arc::new(Conn {
            id,
            pool: self.clone(),
            trusted: AtomicBool::new(false),
        });
        (conn, token, closed)
    }

    /// Closes the oldest untrusted connection, if there is one.
    pub fn close_oldest(&self) -> bool {
        let oldest = self.lock().pop_first();
        oldest.map(|(_, t)| t.cancel()).is_some()
    }

    fn warn_at_most_once_a_minute(&self) {
        let mut warned = self.warned.lock().unwrap_or_else(|e| e.into_inner());
        if warned.is_none_or(|at| at.elapsed().as_secs() >= 60) {
            *warned = Some(Instant::now());
            tracing::warn!(
                limit = self.cap,
                "connections without a completed handshake or an authenticated request at the limit: \
                 closing the oldest of them"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_soft_limit() {
        let text = "Limit                     Soft Limit           Hard Limit           Units     \n\
                    Max processes             63704                63704                processes \n\
                    Max open files            20000                524288               files     \n";
        assert_eq!(soft_open_files(text), Some(20000));
        assert_eq!(budget_from(20000), 19744);
        assert_eq!(budget_from(100), 64);
        let unlimited = "Max open files            unlimited            unlimited            files\n";
        assert_eq!(soft_open_files(unlimited), Some(1 << 20));
        assert_eq!(soft_open_files("garbage"), None);
    }

    #[test]
    fn past_the_cap_the_oldest_untrusted_is_closed_and_trusted_ones_never() {
        let parent = CancellationToken::new();
        let pool = Untrusted::new(2);
        let (a, ta, n) = pool.admit(&parent);
        assert_eq!(n, 0);
        let (b, tb, _) = pool.admit(&parent);
        // A trusted connection leaves the pool: the cap no longer counts it.
        a.trust();
        assert!(a.is_trusted());
        let (_c, tc, n) = pool.admit(&parent);
        assert_eq!(n, 0);
        assert_eq!(pool.len(), 2);
        let (_d, td, n) = pool.admit(&parent);
        assert_eq!(n, 1);
        assert!(!ta.is_cancelled(), "a trusted connection was closed");
        assert!(tb.is_cancelled(), "the oldest untrusted connection stayed open");
        assert!(!tc.is_cancelled() && !td.is_cancelled());
        drop(b);
        assert_eq!(pool.len(), 2);
        assert!(pool.close_oldest());
        assert!(tc.is_cancelled());
        assert_eq!(pool.len(), 1);
        parent.cancel();
        assert!(td.is_cancelled());
    }
}
