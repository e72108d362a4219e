//! Fault injection for resilience tests: failing writes, delayed responses. (Closing watch streams and
//! compacting history live on the store, which owns those.)

use super::error::ApiError;
use std::sync::Mutex;
use std::time::Duration;

/// Which writes a fault counts. `None` matches anything.
#[derive(Clone, Debug, Default)]
pub struct WriteMatch {
    /// "create", "update", "patch" or "delete".
    pub verb: Option<String>,
    /// Resource plural, e.g. "pods".
    pub plural: Option<String>,
    pub name: Option<String>,
    /// Only `/status` writes (`Some(true)`) or only main-resource writes (`Some(false)`).
    pub status: Option<bool>,
}

struct WriteFault {
    matcher: WriteMatch,
    /// Matching writes still to let through before failing.
    skip: u32,
    error: ApiError,
}

#[derive(Default)]
pub struct Faults {
    writes: Mutex<Vec<WriteFault>>,
    delay: Mutex<Option<Duration>>,
}

impl Faults {
    /// Fail the `nth` (1-based) write matching `matcher` with `error` (then the fault is spent).
    pub fn fail_nth_write(&self, matcher: WriteMatch, nth: u32, error: ApiError) {
        if let Ok(mut w) = self.writes.lock() {
            w.push(WriteFault {
                matcher,
                skip: nth.saturating_sub(1),
                error,
            });
        }
    }

    /// 500 InternalError for the nth matching write.
    pub fn fail_nth_write_500(&self, matcher: WriteMatch, nth: u32) {
        self.fail_nth_write(matcher, nth, ApiError::internal("injected fault"));
    }

    /// 409 Conflict for the nth matching write.
    pub fn fail_nth_write_409(&self, matcher: WriteMatch, nth: u32) {
        let e = ApiError::new(
            409,
            "Conflict",
            "Operation cannot be fulfilled: injected conflict; please apply your changes to the latest version and try again",
        );
        self.fail_nth_write(matcher, nth, e);
    }

    /// Drops every write fault not yet spent.
    pub fn clear_write_faults(&self) {
        if let Ok(mut w) = self.writes.lock() {
            w.clear();
        }
    }

    /// Injected write faults not yet spent.
    pub fn pending_write_faults(&self) -> usize {
        self.writes.lock().map_or(0, |w| w.len())
    }

    /// Delay every response by `d` (None: no delay).
    pub fn set_delay(&self, d: Option<Duration>) {
        if let Ok(mut x) = self.delay.lock() {
            *x = d;
        }
    }

    pub fn delay(&self) -> Option<Duration> {
        self.delay.lock().ok().and_then(|d| *d)
    }

    /// Called for every write; returns the injected error if this write is the one to fail.
    pub fn check_write(&self, verb: &str, plural: &str, name: &str, status: bool) -> Option<ApiError> {
        let mut w = self.writes.lock().ok()?;
        let idx = w.iter_mut().position(|f| {
            let m = &f.matcher;
            let hit = m.verb.as_deref().is_none_or(|v| v == verb)
                && m.plural.as_deref().is_none_or(|p| p == plural)
                && m.name.as_deref().is_none_or(|n| n == name)
                && m.status.is_none_or(|s| s == status);
            if hit && f.skip > 0 {
                f.skip -= 1;
                return false;
            }
            hit
        })?;
        Some(w.remove(idx).error)
    }
}
