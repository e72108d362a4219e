//! Syntax checks: Kubernetes names and labels, Go durations, Ray versions.

use std::sync::LazyLock;

use regex::Regex;

use crate::api::ray::constants as c;

/// `ray.io/initializing-timeout`: a Go duration (`30m`, `1h30m`) or integer seconds, positive.
pub fn parse_initializing_timeout(raw: &str) -> Result<std::time::Duration, String> {
    parse_annotation_duration(c::ANNOTATION_INITIALIZING_TIMEOUT, raw)
}

/// A duration annotation (`key`): a Go duration (`30m`, `1h30m`) or integer seconds, positive.
pub fn parse_annotation_duration(key: &str, raw: &str) -> Result<std::time::Duration, String> {
    if let Ok(secs) = raw.parse::<i64>() {
        return u64::try_from(secs)
            .ok()
            .filter(|s| *s > 0)
            .map(std::time::Duration::from_secs)
            .ok_or_else(|| format!("annotation {key} must be a positive integer (seconds), got {raw}"));
    }
    match parse_go_duration(raw) {
        Some(d) if d > 0.0 => Ok(std::time::Duration::from_secs_f64(d)),
        Some(_) => Err(format!("annotation {key} must be a positive duration, got {raw}")),
        None => Err(format!(
            "annotation {key} has invalid format {raw:?}: expected a Go duration such as 5m or 1h, or positive integer seconds"
        )),
    }
}

/// Seconds of a Go `time.ParseDuration` string; `None` if it is not one.
fn parse_go_duration(raw: &str) -> Option<f64> {
    let d = crate::api::goduration::parse(raw).ok()?;
    let secs = d.value.as_secs_f64();
    Some(if d.negative { -secs } else { secs })
}

/// `major.minor[.patch]` with an optional `v` prefix and `-`/`+` suffix, like apimachinery's ParseGeneric.
pub(super) fn parse_version(raw: &str) -> Option<(u64, u64, u64)> {
    let core = raw.trim().trim_start_matches('v');
    let core = core.split(['-', '+']).next()?;
    let parts: Vec<&str> = core.split('.').collect();
    if !(2..=3).contains(&parts.len()) {
        return None;
    }
    let num = |s: &str| s.parse::<u64>().ok();
    Some((
        num(parts[0])?,
        num(parts[1])?,
        if parts.len() == 3 { num(parts[2])? } else { 0 },
    ))
}

pub(crate) fn is_dns1035_label(s: &str) -> bool {
    static RE: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"^[a-z]([-a-z0-9]*[a-z0-9])?$").expect("static regex"));
    s.len() <= 63 && RE.is_match(s)
}

pub(super) fn is_label_value(s: &str) -> bool {
    static RE: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$").expect("static regex"));
    s.len() <= 63 && RE.is_match(s)
}

pub(super) fn is_qualified_name(s: &str) -> bool {
    static SUBDOMAIN: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
            .expect("static regex")
    });
    let (prefix, name) = match s.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, s),
    };
    if prefix.is_some_and(|p| p.is_empty() || p.len() > 253 || !SUBDOMAIN.is_match(p)) {
        return false;
    }
    !name.is_empty() && is_label_value(name)
}
