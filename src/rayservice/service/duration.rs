//! `ray.io/initializing-timeout` values: a Go duration (`"30m"`, `"1h30m"`, `"1.5h"`) or whole seconds
//! (`"1800"`), as KubeRay accepts them (#4143).

use jiff::SignedDuration;

/// Parses the annotation value; the error says what was wrong so it can go into `ValidationFailed`.
pub fn parse_timeout(value: &str) -> Result<SignedDuration, String> {
    let v = value.trim();
    if v.is_empty() {
        return Err("empty duration".into());
    }
    let d = if v.bytes().all(|b| b.is_ascii_digit()) {
        let secs: i64 = v
            .parse()
            .map_err(|_| format!("{v:?}: seconds out of range"))?;
        SignedDuration::from_secs(secs)
    } else {
        parse_go_duration(v)?
    };
    if d.is_negative() || d.is_zero() {
        return Err(format!("{v:?}: must be a positive duration"));
    }
    Ok(d)
}

/// Go's `time.ParseDuration` grammar: an optional sign, then one or more `<decimal><unit>` terms with
/// units ns, us (µs), ms, s, m, h.
fn parse_go_duration(v: &str) -> Result<SignedDuration, String> {
    let bad = || format!("{v:?}: not a duration like \"30m\", \"1h30m\" or a number of seconds");
    let (negative, mut rest) = match v.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, v.strip_prefix('+').unwrap_or(v)),
    };
    if rest == "0" {
        return Ok(SignedDuration::ZERO);
    }
    let mut total_nanos: i128 = 0;
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let (num, tail) = rest.split_at(num_end);
        if num.is_empty() || num == "." {
            return Err(bad());
        }
        let unit_end = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_end);
        let unit_nanos: i128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return Err(bad()),
        };
        let (int_part, frac_part) = num.split_once('.').unwrap_or((num, ""));
        if !frac_part.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let int: i128 = if int_part.is_empty() {
            0
        } else {
            int_part.parse().map_err(|_| bad())?
        };
        let mut term = int.checked_mul(unit_nanos).ok_or_else(bad)?;
        let mut scale = unit_nanos;
        for digit in frac_part.bytes() {
            scale /= 10;
            term += i128::from(digit - b'0') * scale;
        }
        total_nanos = total_nanos.checked_add(term).ok_or_else(bad)?;
        rest = tail;
    }
    if negative {
        total_nanos = -total_nanos;
    }
    let secs = i64::try_from(total_nanos / 1_000_000_000).map_err(|_| bad())?;
    let nanos = i32::try_from(total_nanos % 1_000_000_000).map_err(|_| bad())?;
    Ok(SignedDuration::new(secs, nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepted_forms() {
        let cases = [
            ("30m", 1800, 0),
            ("1h30m", 5400, 0),
            ("1.5h", 5400, 0),
            ("90s", 90, 0),
            ("1800", 1800, 0),
            ("500ms", 0, 500_000_000),
            ("2m0.5s", 120, 500_000_000),
        ];
        for (input, secs, nanos) in cases {
            assert_eq!(
                parse_timeout(input),
                Ok(SignedDuration::new(secs, nanos)),
                "{input}"
            );
        }
    }

    #[test]
    fn rejected_forms() {
        for input in [
            "",
            "abc",
            "-5m",
            "0",
            "0s",
            "5x",
            "m",
            "1..5h",
            "99999999999999999999h",
        ] {
            assert!(parse_timeout(input).is_err(), "{input} should be rejected");
        }
    }
}
