//! Go's `time.ParseDuration` grammar, as Kubernetes and its operators write durations (`metav1.Duration`
//! in Kueue's configuration, KubeRay's `ray.io/initializing-timeout`): one parser for every place
//! quotagate reads one.

use std::time::Duration;

use serde::Deserialize;

/// A `metav1.Duration`: Go's duration syntax (`"30m"`, `"1h30m"`, `"1.5s"`, `"0s"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GoDuration {
    /// Negative durations parse (validation names them).
    pub negative: bool,
    pub value: Duration,
}

impl<'de> Deserialize<'de> for GoDuration {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        parse(&s).map_err(serde::de::Error::custom)
    }
}

/// Go's `time.ParseDuration`: an optional sign, then `<decimal><unit>` terms (ns, us, ms, s, m, h).
pub fn parse(v: &str) -> Result<GoDuration, String> {
    let bad = || format!("{v:?} is not a duration like \"30s\", \"5m\" or \"1h30m\"");
    let (negative, mut rest) = match v.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, v.strip_prefix('+').unwrap_or(v)),
    };
    if rest == "0" {
        return Ok(GoDuration {
            negative,
            value: Duration::ZERO,
        });
    }
    if rest.is_empty() {
        return Err(bad());
    }
    let mut nanos: u128 = 0;
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let (num, tail) = rest.split_at(num_end);
        let unit_end = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_end);
        let per: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return Err(bad()),
        };
        let (int, frac) = num.split_once('.').unwrap_or((num, ""));
        if (int.is_empty() && frac.is_empty()) || frac.contains('.') {
            return Err(bad());
        }
        let whole: u128 = if int.is_empty() {
            0
        } else {
            int.parse().map_err(|_| bad())?
        };
        let mut part: u128 = 0;
        let mut scale: u128 = 1;
        // Digits past nanosecond precision change nothing.
        for b in frac.bytes().take(18) {
            part = part * 10 + u128::from(b - b'0');
            scale *= 10;
        }
        nanos = whole
            .checked_mul(per)
            .and_then(|n| n.checked_add(part * per / scale))
            .and_then(|n| nanos.checked_add(n))
            .ok_or_else(|| format!("{v:?}: duration out of range"))?;
        rest = tail;
    }
    let value = u64::try_from(nanos / 1_000_000_000)
        .map(|s| Duration::new(s, (nanos % 1_000_000_000) as u32))
        .map_err(|_| format!("{v:?}: duration out of range"))?;
    Ok(GoDuration { negative, value })
}
