//! `quotagate load --url URL --rps N --duration D`: an open-loop HTTP/1.1 load generator for watching
//! a Service through an upgrade. Requests leave at a fixed rate on a bounded pool of keep-alive
//! connections; each second of the run counts what was sent, 2xx and other answers, connection errors,
//! timeouts, requests the pool had no room for (`skipped`), and which cluster answered (the answer's
//! JSON field `--cluster-field`, `cluster` by default). The report is JSON.

mod conn;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::Semaphore;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

pub use conn::{Outcome, cluster_of};

/// Bounds on what a user may ask for (nothing is allocated in proportion to these up front; the
/// per-second table grows with the run).
pub const MAX_RPS: u32 = 100_000;
pub const MAX_CONNECTIONS: usize = 4096;
pub const MAX_DURATION: Duration = Duration::from_secs(24 * 3600);

#[derive(Clone, Debug)]
pub struct Options {
    pub url: String,
    pub rps: u32,
    pub duration: Duration,
    /// Requests in flight at most (and so connections open at most).
    pub connections: usize,
    pub timeout: Duration,
    pub cluster_field: String,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            url: String::new(),
            rps: 10,
            duration: Duration::from_secs(10),
            connections: 8,
            timeout: Duration::from_secs(5),
            cluster_field: "cluster".into(),
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LoadError {
    #[error("--url {0:?}: {1}")]
    Url(String, String),
    #[error("--rps must be 1 to {MAX_RPS}, got {0}")]
    Rps(u32),
    #[error("--connections must be 1 to {MAX_CONNECTIONS}, got {0}")]
    Connections(usize),
    #[error("--duration must be more than 0 and at most 24h")]
    Duration,
    #[error("--timeout must be more than 0")]
    Timeout,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub sent: u64,
    pub ok: u64,
    pub non_2xx: u64,
    pub conn_errors: u64,
    pub timeouts: u64,
    /// Not sent: every connection of the pool was busy (the server is slower than the rate).
    pub skipped: u64,
    /// Sent again on a new connection after the server had closed an idle one (not failures).
    pub retried: u64,
}

impl Counts {
    /// Requests sent that did not get a 2xx answer. Skipped ones were never sent (the generator's own
    /// limit): they are reported beside, not counted here.
    pub fn failed(&self) -> u64 {
        self.non_2xx + self.conn_errors + self.timeouts
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Second {
    pub second: u64,
    #[serde(flatten)]
    pub counts: Counts,
    /// 2xx answers by the cluster they named.
    pub clusters: BTreeMap<String, u64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Report {
    pub url: String,
    pub rps: u32,
    pub seconds: f64,
    pub total: Counts,
    pub failed: u64,
    /// Clusters in the order they first answered.
    pub clusters_in_order: Vec<String>,
    /// How often the answering cluster changed from one answer to the next (in completion order):
    /// 1 for a clean switch from one cluster to the next.
    pub cluster_changes: u64,
    pub per_second: Vec<Second>,
}

/// A URL the generator can use: `http://host:port/path` (no TLS), host resolved once.
pub async fn target(opts: &Options) -> Result<conn::Target, LoadError> {
    let bad = |m: &str| LoadError::Url(opts.url.clone(), m.to_owned());
    let uri: http::Uri = opts
        .url
        .parse()
        .map_err(|e: http::uri::InvalidUri| bad(&e.to_string()))?;
    if uri.scheme_str() != Some("http") {
        return Err(bad("only http:// URLs are supported"));
    }
    let host = uri.host().ok_or_else(|| bad("no host"))?;
    let port = uri.port_u16().unwrap_or(80);
    let addr: SocketAddr =
        tokio::net::lookup_host((host.trim_start_matches('[').trim_end_matches(']'), port))
            .await
            .map_err(|e| bad(&format!("cannot resolve {host}: {e}")))?
            .next()
            .ok_or_else(|| bad(&format!("{host} has no address")))?;
    let path = uri
        .path_and_query()
        .map_or("/".to_owned(), |p| p.as_str().to_owned());
    let authority = uri.authority().map_or(host.to_owned(), |a| a.as_str().to_owned());
    Ok(conn::Target {
        addr,
        authority,
        path,
        timeout: opts.timeout,
        cluster_field: opts.cluster_field.clone(),
    })
}

pub fn validate(opts: &Options) -> Result<(), LoadError> {
    if opts.rps == 0 || opts.rps > MAX_RPS {
        return Err(LoadError::Rps(opts.rps));
    }
    if opts.connections == 0 || opts.connections > MAX_CONNECTIONS {
        return Err(LoadError::Connections(opts.connections));
    }
    if opts.duration.is_zero() || opts.duration > MAX_DURATION {
        return Err(LoadError::Duration);
    }
    if opts.timeout.is_zero() {
        return Err(LoadError::Timeout);
    }
    Ok(())
}

#[derive(Default)]
struct Tally {
    report: Report,
    last_cluster: Option<String>,
}

impl Tally {
    fn second(&mut self, s: u64) -> &mut Second {
        let per = &mut self.report.per_second;
        while per.last().is_none_or(|l| l.second < s) {
            let next = per.last().map_or(0, |l| l.second + 1);
            per.push(Second {
                second: next,
                ..Second::default()
            });
        }
        // Seconds only grow by one at a time from 0, so `s` is an index.
        let i = usize::try_from(s)
            .unwrap_or(usize::MAX)
            .min(per.len().saturating_sub(1));
        &mut per[i]
    }

    fn count(&mut self, s: u64, f: impl Fn(&mut Counts)) {
        f(&mut self.second(s).counts);
        f(&mut self.report.total);
    }

    fn record(&mut self, s: u64, outcome: Outcome, retried: bool) {
        self.count(s, |c| c.retried += u64::from(retried));
        match outcome {
            Outcome::Timeout => self.count(s, |c| c.timeouts += 1),
            Outcome::ConnError => self.count(s, |c| c.conn_errors += 1),
            Outcome::Answered { status, .. } if !(200..300).contains(&status) => {
                self.count(s, |c| c.non_2xx += 1)
            }
            Outcome::Answered { cluster, .. } => {
                self.count(s, |c| c.ok += 1);
                if let Some(name) = cluster {
                    *self.second(s).clusters.entry(name.clone()).or_default() += 1;
                    if !self.report.clusters_in_order.contains(&name) {
                        self.report.clusters_in_order.push(name.clone());
                    }
                    if self.last_cluster.as_ref().is_some_and(|l| *l != name) {
                        self.report.cluster_changes += 1;
                    }
                    self.last_cluster = Some(name);
                }
            }
        }
    }
}

/// Sends requests at `rps` until `duration` passes or `stop` fires, then waits for those in flight.
/// `progress` gets the report so far after every second (for a caller printing as it goes).
pub async fn run(
    opts: &Options,
    stop: CancellationToken,
    progress: Option<&(dyn Fn(&Report) + Sync)>,
) -> Result<Report, LoadError> {
    validate(opts)?;
    let target = Arc::new(target(opts).await?);
    let pool = Arc::new(conn::Pool::default());
    let slots = Arc::new(Semaphore::new(opts.connections));
    let tally = Arc::new(Mutex::new(Tally::default()));
    let start = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_secs(1) / opts.rps);
    // Behind (a slow machine): catch up at once, so the rate over the run holds.
    tick.set_missed_tick_behavior(MissedTickBehavior::Burst);
    let mut reported = 0u64;
    let end = start + opts.duration;
    loop {
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tokio::time::sleep_until(end) => break,
            t = tick.tick() => {
                let s = t.saturating_duration_since(start).as_secs();
                if let (Some(p), true) = (progress, s > reported) {
                    reported = s;
                    let r = tally.lock().unwrap_or_else(PoisonError::into_inner).report.clone();
                    p(&r);
                }
                let Ok(permit) = slots.clone().try_acquire_owned() else {
                    tally.lock().unwrap_or_else(PoisonError::into_inner).count(s, |c| c.skipped += 1);
                    continue;
                };
                tally.lock().unwrap_or_else(PoisonError::into_inner).count(s, |c| c.sent += 1);
                let (target, pool, tally) = (target.clone(), pool.clone(), tally.clone());
                tokio::spawn(async move {
                    let (outcome, retried) = conn::request(&target, &pool).await;
                    tally.lock().unwrap_or_else(PoisonError::into_inner).record(s, outcome, retried);
                    drop(permit);
                });
            }
        }
    }
    // Every request in flight ends within its timeout (twice, for a retried one).
    let _ = slots
        .acquire_many(u32::try_from(opts.connections).unwrap_or(u32::MAX))
        .await;
    let mut r = std::mem::take(&mut tally.lock().unwrap_or_else(PoisonError::into_inner).report);
    r.url = opts.url.clone();
    r.rps = opts.rps;
    r.seconds = start.elapsed().as_secs_f64();
    r.failed = r.total.failed();
    Ok(r)
}

#[cfg(test)]
mod tests;
