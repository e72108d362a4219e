//! The cron schedules KubeRay's RayCronJob accepts: `robfig/cron/v3`'s `ParseStandard` (five fields,
//! `minute hour day-of-month month day-of-week`, with `*`, `?`, lists, ranges, steps, month and weekday
//! names, and the descriptors `@yearly` .. `@hourly` and `@every <duration>`), and its `Next` rule, in a
//! time zone. [`Schedule::latest`] finds the most recent time at or before a moment without walking the
//! times in between (batch CronJob's missed-schedule rule needs it; a schedule missed for a year costs
//! no more than one missed for a minute).
//!
//! Written here rather than taken from a crate: the cron crates on crates.io parse other dialects (a
//! seconds field, `L`/`W`/`#`, Sunday as 7, always-OR day matching) and bring chrono beside the jiff the
//! Kubernetes crates already use; RayCronJob must accept exactly what KubeRay accepts.

use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp, ToSpan, Zoned};

/// A field's bit for "written as `*` or `?`": the day rule (below) depends on it.
const STAR: u64 = 1 << 63;

/// How far `next` and `latest` look before giving up (robfig stops after five years).
const YEARS: i16 = 5;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Schedule {
    /// The five fields as bit sets (bit N set: value N matches; [`STAR`] for `*`/`?`).
    Spec {
        minute: u64,
        hour: u64,
        dom: u64,
        month: u64,
        dow: u64,
    },
    /// `@every D`: whole seconds, at least one.
    Every { seconds: i64 },
}

struct Bounds {
    min: u32,
    max: u32,
    names: &'static [(&'static str, u32)],
}

const MINUTES: Bounds = Bounds {
    min: 0,
    max: 59,
    names: &[],
};
const HOURS: Bounds = Bounds {
    min: 0,
    max: 23,
    names: &[],
};
const DOM: Bounds = Bounds {
    min: 1,
    max: 31,
    names: &[],
};
const MONTHS: Bounds = Bounds {
    min: 1,
    max: 12,
    names: &[
        ("jan", 1),
        ("feb", 2),
        ("mar", 3),
        ("apr", 4),
        ("may", 5),
        ("jun", 6),
        ("jul", 7),
        ("aug", 8),
        ("sep", 9),
        ("oct", 10),
        ("nov", 11),
        ("dec", 12),
    ],
};
const DOW: Bounds = Bounds {
    min: 0,
    max: 6,
    names: &[
        ("sun", 0),
        ("mon", 1),
        ("tue", 2),
        ("wed", 3),
        ("thu", 4),
        ("fri", 5),
        ("sat", 6),
    ],
};

fn all(b: &Bounds) -> u64 {
    bits(b.min, b.max, 1) | STAR
}

fn bits(start: u32, end: u32, step: u32) -> u64 {
    (start..=end)
        .step_by(step.max(1) as usize)
        .fold(0, |acc, v| acc | 1 << v)
}

impl Schedule {
    /// `cron.ParseStandard`, with robfig's error texts. A `TZ=`/`CRON_TZ=` prefix is not accepted here
    /// (RayCronJob refuses it and has `timeZone` instead).
    pub fn parse(spec: &str) -> Result<Schedule, String> {
        if spec.is_empty() {
            return Err("empty spec string".into());
        }
        if spec.starts_with('@') {
            return descriptor(spec);
        }
        let fields: Vec<&str> = spec.split_whitespace().collect();
        if fields.len() != 5 {
            return Err(format!(
                "expected exactly 5 fields, found {}: {spec}",
                fields.len()
            ));
        }
        Ok(Schedule::Spec {
            minute: field(fields[0], &MINUTES)?,
            hour: field(fields[1], &HOURS)?,
            dom: field(fields[2], &DOM)?,
            month: field(fields[3], &MONTHS)?,
            dow: field(fields[4], &DOW)?,
        })
    }

    /// The first time strictly after `after` (robfig's `Next`: from the next whole second), or `None`
    /// when there is none within five years (`0 0 30 2 *`).
    pub fn next(&self, after: Timestamp, tz: &TimeZone) -> Option<Timestamp> {
        match *self {
            Schedule::Every { seconds } => floor_second(after)
                .checked_add(SignedDuration::from_secs(seconds))
                .ok(),
            Schedule::Spec { .. } => self.next_spec(after.to_zoned(tz.clone())).map(|z| z.timestamp()),
        }
    }

    /// The most recent time at or before `at` that follows `anchor` in the chain `next(anchor)`,
    /// `next(next(anchor))`, ..., or `None` when `next(anchor)` is after `at`. Work is bounded by the
    /// calendar, not by how many times were missed.
    pub fn latest(&self, anchor: Timestamp, at: Timestamp, tz: &TimeZone) -> Option<Timestamp> {
        let first = self.next(anchor, tz)?;
        if first > at {
            return None;
        }
        match *self {
            Schedule::Every { seconds } => {
                let step = i128::from(seconds.max(1));
                let elapsed = i128::from(at.as_second()) - i128::from(first.as_second());
                let k = i64::try_from(elapsed / step * step).ok()?;
                first.checked_add(SignedDuration::from_secs(k)).ok()
            }
            // Never before `first`, and `first` itself if the backward walk finds nothing (it agrees
            // with `next` everywhere tested; a disagreement must still move the schedule on).
            Schedule::Spec { .. } => Some(
                self.latest_spec(at.to_zoned(tz.clone()))
                    .map_or(first, |z| z.timestamp().max(first)),
            ),
        }
    }

    fn month_ok(&self, z: &Zoned) -> bool {
        matches!(self, Schedule::Spec { month, .. } if month & (1 << z.month()) != 0)
    }

    fn hour_ok(&self, z: &Zoned) -> bool {
        matches!(self, Schedule::Spec { hour, .. } if hour & (1 << z.hour()) != 0)
    }

    fn minute_ok(&self, z: &Zoned) -> bool {
        matches!(self, Schedule::Spec { minute, .. } if minute & (1 << z.minute()) != 0)
    }

    /// robfig's `dayMatches`: both day fields must match when either was written `*` (or `?`),
    /// either one when both are restricted (Vixie cron's rule).
    fn day_ok(&self, z: &Zoned) -> bool {
        let Schedule::Spec { dom, dow, .. } = *self else {
            return false;
        };
        let dom_ok = dom & (1 << z.day()) != 0;
        let dow_ok = dow & (1 << z.weekday().to_sunday_zero_offset()) != 0;
        if dom & STAR != 0 || dow & STAR != 0 {
            dom_ok && dow_ok
        } else {
            dom_ok || dow_ok
        }
    }

    /// robfig's `SpecSchedule.Next`, field by field from the month down, restarting when a field
    /// wraps into the next larger unit.
    fn next_spec(&self, after: Zoned) -> Option<Zoned> {
        let mut t = floor_second_z(&after)?.checked_add(1.second()).ok()?;
        let limit = t.year().saturating_add(YEARS);
        let mut added = false;
        'wrap: loop {
            if t.year() > limit {
                return None;
            }
            while !self.month_ok(&t) {
                if !added {
                    added = true;
                    t = t.first_of_month().ok()?.start_of_day().ok()?;
                }
                t = t
                    .date()
                    .first_of_month()
                    .checked_add(1.month())
                    .ok()?
                    .to_zoned(t.time_zone().clone())
                    .ok()?;
                if t.month() == 1 {
                    continue 'wrap;
                }
            }
            while !self.day_ok(&t) {
                if !added {
                    added = true;
                    t = t.start_of_day().ok()?;
                }
                t = t.date().tomorrow().ok()?.to_zoned(t.time_zone().clone()).ok()?;
                if t.day() == 1 {
                    continue 'wrap;
                }
            }
            while !self.hour_ok(&t) {
                if !added {
                    added = true;
                    t = truncate(&t, Unit::Hour)?;
                }
                t = t.checked_add(1.hour()).ok()?;
                if t.hour() == 0 {
                    continue 'wrap;
                }
            }
            while !self.minute_ok(&t) {
                if !added {
                    added = true;
                    t = truncate(&t, Unit::Minute)?;
                }
                t = t.checked_add(1.minute()).ok()?;
                if t.minute() == 0 {
                    continue 'wrap;
                }
            }
            // The seconds field is always 0: a time inside a matching minute moves to the next one.
            if t.second() != 0 {
                t = truncate(&t, Unit::Minute)?.checked_add(1.minute()).ok()?;
                continue 'wrap;
            }
            return Some(t);
        }
    }

    /// The mirror of `next_spec`: the latest matching time at or before `at`, stepping each field
    /// back to the last second of the previous unit.
    fn latest_spec(&self, at: Zoned) -> Option<Zoned> {
        let mut t = floor_second_z(&at)?;
        let limit = t.year().saturating_sub(YEARS);
        let back = |z: Zoned| z.checked_sub(1.second()).ok();
        'wrap: loop {
            if t.year() < limit {
                return None;
            }
            while !self.month_ok(&t) {
                t = back(t.first_of_month().ok()?.start_of_day().ok()?)?;
                if t.month() == 12 {
                    continue 'wrap;
                }
            }
            while !self.day_ok(&t) {
                t = back(t.start_of_day().ok()?)?;
                if t.date().tomorrow().ok()?.day() == 1 {
                    continue 'wrap;
                }
            }
            while !self.hour_ok(&t) {
                t = back(truncate(&t, Unit::Hour)?)?;
                if t.hour() == 23 {
                    continue 'wrap;
                }
            }
            while !self.minute_ok(&t) {
                t = back(truncate(&t, Unit::Minute)?)?;
                if t.minute() == 59 {
                    continue 'wrap;
                }
            }
            return truncate(&t, Unit::Minute);
        }
    }
}

enum Unit {
    Hour,
    Minute,
}

fn truncate(z: &Zoned, unit: Unit) -> Option<Zoned> {
    let b = z.with().second(0).subsec_nanosecond(0);
    let b = match unit {
        Unit::Hour => b.minute(0),
        Unit::Minute => b,
    };
    b.build().ok()
}

fn floor_second(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second()).unwrap_or(t)
}

fn floor_second_z(z: &Zoned) -> Option<Zoned> {
    z.with().subsec_nanosecond(0).build().ok()
}

/// robfig's `parseDescriptor` (case-sensitive).
fn descriptor(spec: &str) -> Result<Schedule, String> {
    let fixed = |minute: u64, hour: u64, dom: u64, month: u64, dow: u64| {
        Ok(Schedule::Spec {
            minute,
            hour,
            dom,
            month,
            dow,
        })
    };
    let one = 1;
    match spec {
        "@yearly" | "@annually" => fixed(one, one, 1 << 1, 1 << 1, all(&DOW)),
        "@monthly" => fixed(one, one, 1 << 1, all(&MONTHS), all(&DOW)),
        "@weekly" => fixed(one, one, all(&DOM), all(&MONTHS), one),
        "@daily" | "@midnight" => fixed(one, one, all(&DOM), all(&MONTHS), all(&DOW)),
        "@hourly" => fixed(one, all(&HOURS), all(&DOM), all(&MONTHS), all(&DOW)),
        _ => {
            let Some(text) = spec.strip_prefix("@every ") else {
                return Err(format!("unrecognized descriptor: {spec}"));
            };
            let d = crate::api::goduration::parse(text)
                .map_err(|e| format!("failed to parse duration {spec}: {e}"))?;
            // robfig's `Every`: below a second is one second; the rest is cut to whole seconds.
            let seconds = if d.negative {
                1
            } else {
                i64::try_from(d.value.as_secs()).unwrap_or(i64::MAX).max(1)
            };
            Ok(Schedule::Every { seconds })
        }
    }
}

/// robfig's `getField`: comma-separated ranges, OR-ed.
fn field(text: &str, b: &Bounds) -> Result<u64, String> {
    text.split(',').try_fold(0, |acc, part| Ok(acc | range(part, b)?))
}

/// robfig's `getRange`: `*`/`?`, `N`, `N-M`, each optionally `/STEP`; `N/STEP` runs to the maximum.
fn range(expr: &str, b: &Bounds) -> Result<u64, String> {
    let slashes: Vec<&str> = expr.split('/').collect();
    let hyphens: Vec<&str> = slashes[0].split('-').collect();
    let single = hyphens.len() == 1;
    let (start, mut end, mut extra) = if hyphens[0] == "*" || hyphens[0] == "?" {
        (b.min, b.max, STAR)
    } else {
        let start = int_or_name(hyphens[0], b)?;
        let end = match hyphens.len() {
            1 => start,
            2 => int_or_name(hyphens[1], b)?,
            _ => return Err(format!("too many hyphens: {expr}")),
        };
        (start, end, 0)
    };
    let step = match slashes.len() {
        1 => 1,
        2 => {
            let step = int(slashes[1])?;
            if single {
                end = b.max;
            }
            if step > 1 {
                extra = 0;
            }
            step
        }
        _ => return Err(format!("too many slashes: {expr}")),
    };
    if start < b.min {
        return Err(format!(
            "beginning of range ({start}) below minimum ({}): {expr}",
            b.min
        ));
    }
    if end > b.max {
        return Err(format!("end of range ({end}) above maximum ({}): {expr}", b.max));
    }
    if start > end {
        return Err(format!(
            "beginning of range ({start}) beyond end of range ({end}): {expr}"
        ));
    }
    if step == 0 {
        return Err(format!("step of range should be a positive number: {expr}"));
    }
    Ok(bits(start, end, step) | extra)
}

fn int_or_name(text: &str, b: &Bounds) -> Result<u32, String> {
    let lower = text.to_ascii_lowercase();
    match b.names.iter().find(|(n, _)| *n == lower) {
        Some((_, v)) => Ok(*v),
        None => int(text),
    }
}

/// Go's `strconv.Atoi` on a field (an optional `+`; a `-` cannot reach here, it splits ranges).
fn int(text: &str) -> Result<u32, String> {
    let digits = text.strip_prefix('+').unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return Err(format!(
            "failed to parse int from {text}: strconv.Atoi: parsing {text:?}: invalid syntax"
        ));
    }
    // Anything above 63 is out of every field's range; keep the number only to say so.
    let value: u64 = digits.parse().unwrap_or(u64::MAX);
    Ok(u32::try_from(value).unwrap_or(u32::MAX))
}

#[cfg(test)]
#[path = "cron_tests.rs"]
mod tests;
