//! Milli-unit helpers for `ray start` flags and the desired-resource status, over the crate's exact
//! quantities (`crate::api::quantity`).

use crate::api::quantity::{Format, Quantity};

/// Milli-units of a quantity (`"500m"` -> 500, `"2Gi"` -> 2 * 2^30 * 1000), rounded up like
/// `Quantity.MilliValue()`; `None` if it does not parse.
pub fn parse_milli(raw: &str) -> Option<i128> {
    Quantity::parse(raw).ok().map(|q| i128::from(q.milli_value()))
}

/// `Quantity.Value()`: whole units, rounded up (`"500m"` -> 1).
pub fn ceil_units(milli: i128) -> i128 {
    if milli >= 0 {
        (milli + 999) / 1000
    } else {
        milli / 1000
    }
}

fn milli_i64(milli: i128) -> i64 {
    milli.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

/// Canonical text for a CPU-like amount, as the API server prints it: `"3"`, `"1500m"`, `"1k"`.
pub fn format_decimal(milli: i128) -> String {
    Quantity::from_milli(milli_i64(milli)).canonical()
}

/// Canonical text for a byte amount (BinarySI): `"3Gi"`, `"1536Mi"`; fractions of a byte print in milli.
pub fn format_binary(milli: i128) -> String {
    if milli % 1000 != 0 {
        return format_decimal(milli);
    }
    Quantity::from_value(milli_i64(milli / 1000), Format::BinarySi).canonical()
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
        assert_eq!(format_binary(1000 * 1000), "1k");
    }
}
