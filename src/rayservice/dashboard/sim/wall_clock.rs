//! Tokio's clock as wall-clock milliseconds and back, for the simulator's saved state (`persist`):
//! instants of one process mean nothing to the next, wall-clock times do.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

fn wall_ms_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// An instant of tokio's clock as wall-clock milliseconds since the epoch.
pub(super) fn to_wall(at: Instant) -> i64 {
    let now = Instant::now();
    let ms = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
    if at >= now {
        wall_ms_now().saturating_add(ms(at - now))
    } else {
        wall_ms_now().saturating_sub(ms(now - at))
    }
}

/// Wall-clock milliseconds back to tokio's clock. A moment too far back for the monotonic clock
/// (older than the machine's uptime) becomes now; the state it times is long settled anyway.
pub(super) fn from_wall(wall: i64) -> Instant {
    let now = Instant::now();
    let delta = wall.saturating_sub(wall_ms_now());
    let millis = |v: i64| Duration::from_millis(v.unsigned_abs());
    if delta >= 0 {
        now.checked_add(millis(delta)).unwrap_or(now)
    } else {
        now.checked_sub(millis(delta)).unwrap_or(now)
    }
}

/// `#[serde(with = "instant")]`.
pub(super) mod instant {
    use serde::{Deserialize, Deserializer, Serializer};
    use tokio::time::Instant;

    pub fn serialize<S: Serializer>(at: &Instant, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_i64(super::to_wall(*at))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Instant, D::Error> {
        Ok(super::from_wall(i64::deserialize(d)?))
    }
}

/// `#[serde(with = "opt_instant")]`.
pub(super) mod opt_instant {
    use serde::{Deserialize, Deserializer, Serializer};
    use tokio::time::Instant;

    pub fn serialize<S: Serializer>(at: &Option<Instant>, s: S) -> Result<S::Ok, S::Error> {
        match at {
            Some(at) => s.serialize_some(&super::to_wall(*at)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Instant>, D::Error> {
        Ok(Option::<i64>::deserialize(d)?.map(super::from_wall))
    }
}
