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
        let secs: i64 = v.parse().map_err(|_| format!("{v:?}: seconds out of range"))?;
        SignedDuration::from_secs(secs)
    } else {
        parse_go_duration(v)?
    };
    if d.is_negative() || d.is_zero() {
        return Err(format!("{v:?}: must be a positive duration"));
    }
    Ok(d)
}

/// Go's `time.ParseDuration` grammar (`crate::api::goduration`), with this annotation's words on error.
fn parse_go_duration(v: &str) -> Result<SignedDuration, String> {
    let bad = || format!("{v:?}: not a duration like \"30m\", \"1h30m\" or a number of seconds");
    let d = crate::api::goduration::parse(v).map_err(|_| bad())?;
    let magnitude = SignedDuration::try_from(d.value).map_err(|_| bad())?;
    Ok(if d.negative { -magnitude } else { magnitude })
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
