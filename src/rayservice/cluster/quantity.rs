//! Just enough Kubernetes quantity arithmetic for `ray start` flags and the desired-resource status:
//! parse to an exact milli-unit count, round up like `Quantity.Value()`, and print canonical strings.
//! (Kept local because the crate's shared quantity module is owned elsewhere; switch to it once it lands.)

/// Milli-units of a quantity (`"500m"` -> 500, `"2Gi"` -> 2 * 2^30 * 1000); `None` if it does not parse.
pub fn parse_milli(raw: &str) -> Option<i128> {
    let s = raw.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(s.len());
    let (num, suffix) = s.split_at(split);
    if num.is_empty() || num == "." || num == "+" || num == "-" {
        return None;
    }
    let (neg, num) = match num.strip_prefix('-') {
        Some(n) => (true, n),
        None => (false, num.strip_prefix('+').unwrap_or(num)),
    };
    let (int_part, frac_part) = num.split_once('.').unwrap_or((num, ""));
    if !int_part.chars().all(|c| c.is_ascii_digit())
        || !frac_part.chars().all(|c| c.is_ascii_digit())
    {
        return None;
    }
    // value = digits / 10^frac_len * multiplier; kept as (numerator, denominator) to stay exact.
    let digits: i128 = format!("{int_part}{frac_part}").parse().ok()?;
    let mut den: i128 = 10i128.checked_pow(u32::try_from(frac_part.len()).ok()?)?;
    let mut num: i128 = digits.checked_mul(1000)?;
    let (mul, div): (i128, i128) = match suffix {
        "" => (1, 1),
        "m" => (1, 1000),
        "k" => (1_000, 1),
        "M" => (1_000_000, 1),
        "G" => (1_000_000_000, 1),
        "T" => (1_000_000_000_000, 1),
        "P" => (1_000_000_000_000_000, 1),
        "E" => (1_000_000_000_000_000_000, 1),
        "Ki" => (1 << 10, 1),
        "Mi" => (1 << 20, 1),
        "Gi" => (1 << 30, 1),
        "Ti" => (1 << 40, 1),
        "Pi" => (1 << 50, 1),
        "Ei" => (1 << 60, 1),
        e if e.starts_with(['e', 'E']) => {
            let exp: i32 = e[1..].parse().ok()?;
            if exp >= 0 {
                (10i128.checked_pow(exp.unsigned_abs())?, 1)
            } else {
                (1, 10i128.checked_pow(exp.unsigned_abs())?)
            }
        }
        _ => return None,
    };
    num = num.checked_mul(mul)?;
    den = den.checked_mul(div)?;
    // Round up to a whole milli-unit, as Kubernetes does for sub-milli precision.
    let milli = (num + den - 1) / den;
    Some(if neg { -milli } else { milli })
}

/// `Quantity.Value()`: whole units, rounded up (`"500m"` -> 1).
pub fn ceil_units(milli: i128) -> i128 {
    if milli >= 0 {
        (milli + 999) / 1000
    } else {
        milli / 1000
    }
}

/// Canonical text for a CPU-like amount: `"3"` or `"1500m"`.
pub fn format_decimal(milli: i128) -> String {
    if milli % 1000 == 0 {
        (milli / 1000).to_string()
    } else {
        format!("{milli}m")
    }
}

/// Canonical text for a byte amount: the largest binary suffix that divides it (`"3Gi"`), else plain units.
pub fn format_binary(milli: i128) -> String {
    if milli % 1000 != 0 {
        return format!("{milli}m");
    }
    let units = milli / 1000;
    for (suffix, size) in [
        ("Ei", 1i128 << 60),
        ("Pi", 1 << 50),
        ("Ti", 1 << 40),
        ("Gi", 1 << 30),
        ("Mi", 1 << 20),
        ("Ki", 1 << 10),
    ] {
        if units != 0 && units % size == 0 {
            return format!("{}{suffix}", units / size);
        }
    }
    units.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kubernetes_quantities() {
        let cases = [
            ("1", Some(1000)),
            ("500m", Some(500)),
            ("0.5", Some(500)),
            ("2Gi", Some(2 * (1 << 30) * 1000)),
            ("1k", Some(1_000_000)),
            ("1e3", Some(1_000_000)),
            ("1.5Mi", Some(1_572_864_000)),
            ("0.0001", Some(1)),
            ("abc", None),
            ("1Zi", None),
            ("", None),
        ];
        for (raw, want) in cases {
            assert_eq!(parse_milli(raw), want, "{raw}");
        }
    }

    #[test]
    fn rounds_and_prints() {
        assert_eq!(ceil_units(500), 1);
        assert_eq!(ceil_units(2000), 2);
        assert_eq!(format_decimal(1500), "1500m");
        assert_eq!(format_decimal(3000), "3");
        assert_eq!(format_binary(3 * (1 << 30) * 1000), "3Gi");
        assert_eq!(format_binary(1536 * (1 << 20) * 1000), "1536Mi");
        assert_eq!(format_binary(1000 * 1000), "1000");
    }
}
