//! Which of a listener's connections may be closed to make room: those not yet trusted (TLS
//! handshake not done, or no authenticated request yet), oldest first, and among them silent ones
//! (not a byte received: bare sockets) before those in their handshake, and those before the ones
//! past it. Trusted connections are bounded only by the process's descriptor budget, shared by
//! every listener.
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
    /// Untrusted connections closed to make room, since the listener started.
    closed: AtomicU64,
    open: Mutex<Open>,
    warned: Mutex<Option<Instant>>,
}

/// The untrusted connections by id (ids grow with arrival, so the first is the oldest): silent
/// (no byte received yet), greeted (bytes of a handshake received, handshake not done), or secured
/// (handshake done, no authenticated request yet). A flood of bare sockets closes only silent
/// sockets, so a client whose handshake is slow (a loaded machine: the flood arrives faster than
/// either side finishes the handshake's crypto) is safe from it once its first bytes are in. A
/// silent socket is looked at before it is closed: bytes waiting in it that the server has not read
/// yet (its task not yet run) make it greeted instead. Closing greeted or secured connections takes
/// clients that send handshakes, which cost the server's CPU as much as the client's and so pace
/// themselves.
#[derive(Default)]
struct Open {
    silent: BTreeMap<u64, Silent>,
    greeted: BTreeMap<u64, CancellationToken>,
    secured: BTreeMap<u64, CancellationToken>,
}

/// A silent connection: its token, and whether bytes wait in its socket.
struct Silent {
    token: CancellationToken,
    has_bytes: Probe,
}

/// Whether bytes wait unread in a connection's socket (peeked, not taken).
pub type Probe = Box<dyn Fn() -> bool + Send>;

impl Open {
    fn len(&self) -> usize {
        self.silent.len() + self.greeted.len() + self.secured.len()
    }

    /// The oldest silent connection other than `newest` (the arrival being made room for: it is
    /// not closed in favour of older ones) that has no bytes waiting, else the oldest greeted one,
    /// else the oldest secured one. A silent one found with bytes waiting becomes greeted.
    fn pop_oldest(&mut self, newest: Option<u64>) -> Option<CancellationToken> {
        while let Some(entry) = self.silent.first_entry() {
            if Some(*entry.key()) == newest {
                break;
            }
            let (id, silent) = entry.remove_entry();
            if (silent.has_bytes)() {
                self.greeted.insert(id, silent.token);
                continue;
            }
            return Some(silent.token);
        }
        match self.greeted.pop_first() {
            Some((_, token)) => Some(token),
            None => self.secured.pop_first().map(|(_, t)| t),
        }
    }

    fn remove(&mut self, id: u64) -> Option<CancellationToken> {
        self.silent
            .remove(&id)
            .map(|s| s.token)
            .or_else(|| self.greeted.remove(&id))
            .or_else(|| self.secured.remove(&id))
    }
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

    /// The first bytes of the connection have been read: from now on silent sockets no longer
    /// close it.
    pub fn greeted(&self) {
        if !self.is_trusted() {
            let mut open = self.pool.lock();
            if let Some(silent) = open.silent.remove(&self.id) {
                open.greeted.insert(self.id, silent.token);
            }
        }
    }

    /// The connection's TLS handshake is done: from now on connections in their handshake no
    /// longer close it.
    pub fn secured(&self) {
        if !self.is_trusted() {
            let mut open = self.pool.lock();
            if let Some(token) = open.remove(self.id) {
                open.secured.insert(self.id, token);
            }
        }
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
            closed: AtomicU64::new(0),
            open: Mutex::new(Open::default()),
            warned: Mutex::new(None),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Open> {
        // Nothing panics while holding the lock; a poisoned map is still a consistent map.
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn remove(&self, id: u64) {
        self.lock().remove(id);
    }

    /// How many untrusted connections are open.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many untrusted connections were closed to make room, since the listener started.
    pub fn closed_for_room(&self) -> u64 {
        self.closed.load(Ordering::Relaxed)
    }

    /// A new connection, untrusted and silent, closed by its token (a child of `parent`);
    /// `has_bytes` says whether bytes wait unread in its socket. Past the cap the oldest untrusted
    /// connections are closed ([`Open::pop_oldest`]); returns how many.
    pub fn admit(
        self: &Arc<Self>,
        parent: &CancellationToken,
        has_bytes: Probe,
    ) -> (Arc<Conn>, CancellationToken, usize) {
        let token = parent.child_token();
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let mut closed = 0;
        {
            let mut open = self.lock();
            open.silent.insert(
                id,
                Silent {
                    token: token.clone(),
                    has_bytes,
                },
            );
            while open.len() > self.cap {
                match open.pop_oldest(Some(id)) {
                    Some(oldest) => {
                        oldest.cancel();
                        closed += 1;
                    }
                    None => break,
                }
            }
        }
        if closed > 0 {
            self.closed.fetch_add(closed as u64, Ordering::Relaxed);
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
        let oldest = self.lock().pop_oldest(None);
        let closed = oldest.map(|t| t.cancel()).is_some();
        if closed {
            self.closed.fetch_add(1, Ordering::Relaxed);
        }
        closed
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

    fn silent() -> Probe {
        Box::new(|| false)
    }

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
        let (a, ta, n) = pool.admit(&parent, silent());
        assert_eq!(n, 0);
        let (b, tb, _) = pool.admit(&parent, silent());
        // A trusted connection leaves the pool: the cap no longer counts it.
        a.trust();
        assert!(a.is_trusted());
        let (_c, tc, n) = pool.admit(&parent, silent());
        assert_eq!(n, 0);
        assert_eq!(pool.len(), 2);
        let (_d, td, n) = pool.admit(&parent, silent());
        assert_eq!(n, 1);
        assert!(!ta.is_cancelled(), "a trusted connection was closed");
        assert!(tb.is_cancelled(), "the oldest untrusted connection stayed open");
        assert!(!tc.is_cancelled() && !td.is_cancelled());
        drop(b);
        assert_eq!(pool.len(), 2);
        assert!(pool.close_oldest());
        assert!(tc.is_cancelled());
        assert_eq!(pool.len(), 1);
        assert_eq!(pool.closed_for_room(), 2);
        parent.cancel();
        assert!(td.is_cancelled());
    }

    /// Bare sockets close bare sockets: a connection past its TLS handshake is closed for room only
    /// when no silent socket but the newest arrival is left.
    #[test]
    fn bare_sockets_close_bare_sockets_before_handshaken_ones() {
        let parent = CancellationToken::new();
        let pool = Untrusted::new(3);
        let (client, t_client, _) = pool.admit(&parent, silent());
        client.secured();
        let mut bare = Vec::new();
        for _ in 0..10 {
            let (c, t, _) = pool.admit(&parent, silent());
            bare.push((c, t));
        }
        assert!(
            !t_client.is_cancelled(),
            "a flood of bare sockets closed a handshaken connection"
        );
        assert_eq!(pool.len(), 3);
        assert_eq!(bare.iter().filter(|(_, t)| !t.is_cancelled()).count(), 2);
        // Two more get through their handshakes (each arrival closes the oldest bare socket).
        let (a, _ta, _) = pool.admit(&parent, silent());
        a.secured();
        let (b, _tb, _) = pool.admit(&parent, silent());
        b.secured();
        assert!(!t_client.is_cancelled());
        assert!(bare.iter().all(|(_, t)| t.is_cancelled()));
        // Only handshaken connections besides the arrival: the oldest of them goes, not the arrival.
        let (_c, tc, _) = pool.admit(&parent, silent());
        assert!(
            t_client.is_cancelled(),
            "the oldest handshaken connection stayed past the cap"
        );
        assert!(!tc.is_cancelled(), "the arrival was closed for older connections");
        assert_eq!(pool.len(), 3);
        assert_eq!(pool.closed_for_room(), 8 + 2 + 1);
    }

    /// A reconnecting flood of bare sockets never closes a client in its handshake: not once its
    /// first bytes were read, nor while they wait unread in its socket (its task not yet run).
    #[test]
    fn silent_sockets_close_silent_ones_before_clients_in_their_handshake() {
        use std::sync::atomic::AtomicBool;
        let parent = CancellationToken::new();
        let pool = Untrusted::new(4);
        let (read, t_read, _) = pool.admit(&parent, silent());
        read.greeted();
        let waiting = Arc::new(AtomicBool::new(false));
        let probe = waiting.clone();
        let (_unread, t_unread, _) = pool.admit(&parent, Box::new(move || probe.load(Ordering::Relaxed)));
        waiting.store(true, Ordering::Relaxed);
        let mut flood = Vec::new();
        for _ in 0..1000 {
            flood.push(pool.admit(&parent, silent()));
        }
        assert!(
            !t_read.is_cancelled(),
            "a client whose bytes were read was closed"
        );
        assert!(
            !t_unread.is_cancelled(),
            "a client whose bytes wait unread was closed"
        );
        assert_eq!(pool.len(), 4);
        assert_eq!(flood.iter().filter(|(_, t, _)| !t.is_cancelled()).count(), 2);
        // Its handshake done, it outlasts the silent ones and those still in their handshake.
        read.secured();
        assert!(pool.close_oldest() && pool.close_oldest());
        assert!(flood.iter().all(|(_, t, _)| t.is_cancelled()));
        assert!(!t_unread.is_cancelled());
        assert!(pool.close_oldest());
        assert!(t_unread.is_cancelled() && !t_read.is_cancelled());
        assert!(pool.close_oldest());
        assert!(t_read.is_cancelled());
        assert!(!pool.close_oldest());
        assert_eq!(pool.closed_for_room(), 1000 - 2 + 4);
    }
}
