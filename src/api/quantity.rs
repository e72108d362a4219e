//! Kubernetes resource quantities, parsed and compared exactly.
//!
//! A quantity is held as an integer count of nano-units (`i128`), which represents every value
//! Kubernetes stores exactly: the API server itself rounds anything finer than `1n` up to `1n`, and the
//! largest suffix (`Ei`, 2^60) times 10^9 still fits with room to add. No floating point anywhere.
//!
//! Grammar (from `k8s.io/apimachinery/pkg/api/resource`):
//! `<quantity> ::= <signedNumber><suffix>`, `<suffix> ::= <binarySI> | <decimalExponent> | <decimalSI>`,
//! binarySI `Ki Mi Gi Ti Pi Ei`, decimalSI `n u m "" k M G T P E`, decimalExponent `e<signedNumber>` /
//! `E<signedNumber>`.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

use thiserror::Error;

const NANO: i128 = 1_000_000_000;
/// Values are capped here so that sums of many quantities cannot overflow `i128`.
const MAX_NANOS: i128 = i128::MAX / 1024;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum QuantityError {
    #[error("quantity is empty")]
    Empty,
    #[error(
        "quantity {0:?} does not match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )]
    Format(String),
    #[error("quantity {0:?} has an unknown suffix {1:?}")]
    Suffix(String, String),
    #[error("quantity {0:?} is too large")]
    TooLarge(String),
}

/// How a quantity was written, which decides how it is printed back (as Kubernetes does).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    DecimalSi,
    BinarySi,
    DecimalExponent,
}

/// An exact Kubernetes quantity.
#[derive(Clone, Copy, Debug)]
pub struct Quantity {
    nanos: i128,
    format: Format,
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.nanos == other.nanos
    }
}
impl Eq for Quantity {}
impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        self.nanos.cmp(&other.nanos)
    }
}
impl std::hash::Hash for Quantity {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.nanos.hash(state)
    }
}

/// Multiplies by `2^bin * 10^dec` and divides by `10^frac_digits`, rounding up away from zero as the
/// API server does for precision it cannot hold.
fn scale(mantissa: i128, bin: u32, dec: i32, frac_digits: i32, raw: &str) -> Result<i128, QuantityError> {
    let too_large = || QuantityError::TooLarge(raw.to_string());
    let mut num = mantissa.checked_mul(1i128 << bin).ok_or_else(too_large)?;
    // nanos = mantissa * 2^bin * 10^(dec + 9 - frac_digits)
    let exp = dec + 9 - frac_digits;
    if exp >= 0 {
        for _ in 0..exp {
            num = num.checked_mul(10).ok_or_else(too_large)?;
            if num.abs() > MAX_NANOS {
                return Err(too_large());
            }
        }
    } else {
        let mut div: i128 = 1;
        for _ in 0..(-exp) {
            div = match div.checked_mul(10) {
                Some(d) => d,
                // Dividing by more than i128 can hold: the value is below one nano-unit.
                None => {
                    return Ok(if num > 0 {
                        1
                    } else if num < 0 {
                        -1
                    } else {
                        0
                    });
                }
            };
        }
        let (q, r) = (num / div, num % div);
        num = if r > 0 {
            q + 1
        } else if r < 0 {
            q - 1
        } else {
            q
        };
    }
    if num.abs() > MAX_NANOS {
        return Err(too_large());
    }
    Ok(num)
}

impl FromStr for Quantity {
    type Err = QuantityError;

    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        // No trimming: the API server's quantity pattern refuses surrounding whitespace.
        let s = raw;
        if s.is_empty() {
            return Err(QuantityError::Empty);
        }
        let bad = || QuantityError::Format(raw.to_string());
        let (negative, body) = match s.as_bytes()[0] {
            b'-' => (true, &s[1..]),
            b'+' => (false, &s[1..]),
            _ => (false, s),
        };
        let num_end = body
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(body.len());
        let (number, suffix) = body.split_at(num_end);
        if number.is_empty() || number == "." || number.matches('.').count() > 1 {
            return Err(bad());
        }
        let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
        let digits: String = format!("{int_part}{frac_part}");
        let digits = digits.trim_start_matches('0');
        if digits.len() > 38 {
            return Err(QuantityError::TooLarge(raw.to_string()));
        }
        let mantissa: i128 = if digits.is_empty() {
            0
        } else {
            digits.parse().map_err(|_| bad())?
        };
        let frac_digits = frac_part.len() as i32;

        let (bin, dec, format) = match suffix {
            "" => (0, 0, Format::DecimalSi),
            "n" => (0, -9, Format::DecimalSi),
            "u" => (0, -6, Format::DecimalSi),
            "m" => (0, -3, Format::DecimalSi),
            "k" => (0, 3, Format::DecimalSi),
            "M" => (0, 6, Format::DecimalSi),
            "G" => (0, 9, Format::DecimalSi),
            "T" => (0, 12, Format::DecimalSi),
            "P" => (0, 15, Format::DecimalSi),
            "E" => (0, 18, Format::DecimalSi),
            "Ki" => (10, 0, Format::BinarySi),
            "Mi" => (20, 0, Format::BinarySi),
            "Gi" => (30, 0, Format::BinarySi),
            "Ti" => (40, 0, Format::BinarySi),
            "Pi" => (50, 0, Format::BinarySi),
            "Ei" => (60, 0, Format::BinarySi),
            other if other.starts_with(['e', 'E']) => {
                let exp: i32 = other[1..]
                    .parse()
                    .map_err(|_| QuantityError::Suffix(raw.to_string(), other.to_string()))?;
                if !(-40..=40).contains(&exp) {
                    return Err(QuantityError::TooLarge(raw.to_string()));
                }
                (0, exp, Format::DecimalExponent)
            }
            other => return Err(QuantityError::Suffix(raw.to_string(), other.to_string())),
        };
        let nanos = scale(mantissa, bin, dec, frac_digits, raw)?;
        Ok(Quantity {
            nanos: if negative { -nanos } else { nanos },
            format,
        })
    }
}

impl Quantity {
    pub const ZERO: Quantity = Quantity {
        nanos: 0,
        format: Format::DecimalSi,
    };

    pub fn parse(s: &str) -> Result<Self, QuantityError> {
        s.parse()
    }

    /// Whole units, as `resource.NewQuantity(v, format)`.
    pub fn from_value(v: i64, format: Format) -> Self {
        Quantity {
            nanos: v as i128 * NANO,
            format,
        }
    }

    /// Thousandths of a unit, as `resource.NewMilliQuantity(v, DecimalSI)`.
    pub fn from_milli(v: i64) -> Self {
        Quantity {
            nanos: v as i128 * 1_000_000,
            format: Format::DecimalSi,
        }
    }

    pub fn format(&self) -> Format {
        self.format
    }

    /// Billionths of a unit (the finest scale a quantity keeps), clamped to the representable range.
    pub fn from_nanos(nanos: i128, format: Format) -> Self {
        Quantity {
            nanos: nanos.clamp(-MAX_NANOS, MAX_NANOS),
            format,
        }
    }

    /// The value in billionths of a unit.
    pub fn nanos(&self) -> i128 {
        self.nanos
    }

    /// Kubernetes `AsApproximateFloat64`.
    pub fn as_f64(&self) -> f64 {
        self.nanos as f64 / NANO as f64
    }

    pub fn is_negative(&self) -> bool {
        self.nanos < 0
    }

    pub fn is_zero(&self) -> bool {
        self.nanos == 0
    }

    /// The value in nano-units (exact), saturating at `i64`.
    pub fn nano_value(&self) -> i64 {
        self.nanos.clamp(i64::MIN as i128, i64::MAX as i128) as i64
    }

    /// The value in whole units, rounded up (Kubernetes `Quantity.Value`), saturating at `i64`.
    pub fn value(&self) -> i64 {
        div_ceil_saturating(self.nanos, NANO)
    }

    /// The value in thousandths, rounded up (Kubernetes `Quantity.MilliValue`), saturating at `i64`.
    pub fn milli_value(&self) -> i64 {
        div_ceil_saturating(self.nanos, 1_000_000)
    }

    pub fn checked_add(&self, other: &Quantity) -> Option<Quantity> {
        let nanos = self.nanos.checked_add(other.nanos)?;
        (nanos.abs() <= MAX_NANOS).then_some(Quantity {
            nanos,
            format: self.format,
        })
    }

    pub fn checked_sub(&self, other: &Quantity) -> Option<Quantity> {
        let nanos = self.nanos.checked_sub(other.nanos)?;
        (nanos.abs() <= MAX_NANOS).then_some(Quantity {
            nanos,
            format: self.format,
        })
    }

    /// Multiplies by a count (pods of a podset), saturating at the representable range.
    pub fn saturating_mul(&self, n: i64) -> Quantity {
        let nanos = self.nanos.saturating_mul(n as i128).clamp(-MAX_NANOS, MAX_NANOS);
        Quantity {
            nanos,
            format: self.format,
        }
    }

    /// Prints the value the way the API server canonicalizes it for this quantity's format.
    pub fn canonical(&self) -> String {
        match self.format {
            Format::BinarySi if self.nanos % NANO == 0 && self.nanos.abs() >= 1024 * NANO => {
                binary_si(self.nanos / NANO)
            }
            Format::DecimalExponent => decimal(self.nanos, true),
            _ => decimal(self.nanos, false),
        }
    }
}

fn div_ceil_saturating(n: i128, d: i128) -> i64 {
    let q = n / d;
    let q = if n % d > 0 { q + 1 } else { q };
    q.clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

fn binary_si(units: i128) -> String {
    const SUFFIXES: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    let mut v = units;
    let mut i = 0;
    while i + 1 < SUFFIXES.len() && v != 0 && v % 1024 == 0 {
        v /= 1024;
        i += 1;
    }
    format!("{v}{}", SUFFIXES[i])
}

/// Largest power-of-1000 suffix whose mantissa stays an integer, as Kubernetes prints decimal quantities.
fn decimal(nanos: i128, exponent_form: bool) -> String {
    // exponent (base 10) of the unit: -9 for nanos
    let mut mantissa = nanos;
    let mut exp: i32 = -9;
    if mantissa == 0 {
        return "0".to_string();
    }
    while mantissa % 1000 == 0 && exp < 18 {
        mantissa /= 1000;
        exp += 3;
    }
    if exponent_form {
        return if exp == 0 {
            format!("{mantissa}")
        } else {
            format!("{mantissa}e{exp}")
        };
    }
    let suffix = match exp {
        -9 => "n",
        -6 => "u",
        -3 => "m",
        0 => "",
        3 => "k",
        6 => "M",
        9 => "G",
        12 => "T",
        15 => "P",
        _ => "E",
    };
    format!("{mantissa}{suffix}")
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.canonical())
    }
}

impl TryFrom<&k8s_openapi::apimachinery::pkg::api::resource::Quantity> for Quantity {
    type Error = QuantityError;
    fn try_from(q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity) -> Result<Self, Self::Error> {
        q.0.parse()
    }
}

impl From<Quantity> for k8s_openapi::apimachinery::pkg::api::resource::Quantity {
    fn from(q: Quantity) -> Self {
        k8s_openapi::apimachinery::pkg::api::resource::Quantity(q.canonical())
    }
}

/// The integer Kueue accounts a resource in: thousandths for `cpu`, whole units for everything else
/// (Kueue's `resources.ResourceValue`).
pub fn resource_value(resource: &str, q: &Quantity) -> i64 {
    if resource == "cpu" {
        q.milli_value()
    } else {
        q.value()
    }
}

/// The quantity Kueue reports for an accounted integer (Kueue's `resources.ResourceQuantity`): cpu in
/// milli DecimalSI, memory, ephemeral storage and hugepages in BinarySI, everything else DecimalSI.
pub fn resource_quantity(resource: &str, v: i64) -> Quantity {
    match resource {
        "cpu" => Quantity::from_milli(v),
        "memory" | "ephemeral-storage" => Quantity::from_value(v, Format::BinarySi),
        r if r.starts_with("hugepages-") => Quantity::from_value(v, Format::BinarySi),
        _ => Quantity::from_value(v, Format::DecimalSi),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn every_suffix_parses_exactly() {
        let cases: &[(&str, i128)] = &[
            ("0", 0),
            ("1", NANO),
            ("1n", 1),
            ("1u", 1_000),
            ("1m", 1_000_000),
            ("1k", 1_000 * NANO),
            ("1M", 1_000_000 * NANO),
            ("1G", 1_000_000_000 * NANO),
            ("1T", 1_000_000_000_000 * NANO),
            ("1P", 1_000_000_000_000_000 * NANO),
            ("1E", 1_000_000_000_000_000_000 * NANO),
            ("1Ki", 1024 * NANO),
            ("1Mi", (1 << 20) * NANO),
            ("1Gi", (1 << 30) * NANO),
            ("1Ti", (1 << 40) * NANO),
            ("1Pi", (1 << 50) * NANO),
            ("1Ei", (1 << 60) * NANO),
            ("1e3", 1000 * NANO),
            ("1E3", 1000 * NANO),
            ("1e-3", 1_000_000),
            ("1.5", 1_500_000_000),
            ("0.5Gi", (1 << 29) * NANO),
            ("-100m", -100_000_000),
            ("+2", 2 * NANO),
            (".5", 500_000_000),
            ("5.", 5 * NANO),
        ];
        for (s, nanos) in cases {
            assert_eq!(q(s).nanos, *nanos, "{s}");
        }
    }

    #[test]
    fn sub_nano_precision_rounds_up_like_the_api_server() {
        assert_eq!(q("0.1n").nanos, 1);
        assert_eq!(q("1e-12").nanos, 1);
        assert_eq!(q("-0.1n").nanos, -1);
    }

    #[test]
    fn malformed_quantities_are_errors_not_panics() {
        for s in [
            "",
            "abc",
            "1.2.3",
            "1x",
            "1Kb",
            "--1",
            "1e",
            "e3",
            "1ee3",
            ".",
            "1e999",
            "99999999999999999999999999999999999999999",
        ] {
            assert!(s.parse::<Quantity>().is_err(), "{s:?} should be rejected");
        }
    }

    #[test]
    fn comparison_is_exact_across_suffixes() {
        assert_eq!(q("1Gi"), q("1073741824"));
        assert_eq!(q("1000m"), q("1"));
        assert_eq!(q("1k"), q("1e3"));
        assert!(q("1Gi") > q("1G"));
        assert!(q("999m") < q("1"));
        assert!(q("100Mi") < q("0.1Gi") || q("100Mi") == q("0.1Gi") || q("100Mi") > q("0.1Gi"));
        assert!(q("0.1Gi") > q("100Mi"));
    }

    #[test]
    fn values_round_up_as_kubernetes_does() {
        assert_eq!(q("100m").value(), 1);
        assert_eq!(q("1500m").milli_value(), 1500);
        assert_eq!(q("1.0001").value(), 2);
        assert_eq!(q("1n").milli_value(), 1);
        assert_eq!(q("1Ei").value(), 1 << 60);
        assert_eq!(q("-1.5").value(), -1);
    }

    #[test]
    fn canonical_strings_match_the_api_server() {
        let cases = [
            ("1000m", "1"),
            ("1500m", "1500m"),
            ("0.5", "500m"),
            ("1000", "1k"),
            ("1200", "1200"),
            ("1200000", "1200k"),
            ("2048Ki", "2Mi"),
            ("1536", "1536"),
            ("1.5Gi", "1536Mi"),
            ("512", "512"),
            ("0", "0"),
            ("1e3", "1e3"),
            ("10", "10"),
        ];
        for (input, want) in cases {
            assert_eq!(q(input).canonical(), want, "{input}");
        }
    }

    #[test]
    fn kueue_accounting_units() {
        assert_eq!(resource_value("cpu", &q("1.5")), 1500);
        assert_eq!(resource_value("memory", &q("1Gi")), 1 << 30);
        assert_eq!(resource_value("nvidia.com/gpu", &q("2")), 2);
        assert_eq!(resource_quantity("cpu", 1500).canonical(), "1500m");
        assert_eq!(resource_quantity("cpu", 2000).canonical(), "2");
        assert_eq!(resource_quantity("memory", 1 << 30).canonical(), "1Gi");
        assert_eq!(resource_quantity("nvidia.com/gpu", 4).canonical(), "4");
    }

    #[test]
    fn arithmetic_is_checked() {
        assert_eq!(q("1").checked_add(&q("500m")), Some(q("1.5")));
        assert_eq!(q("1").checked_sub(&q("2")), Some(q("-1")));
        assert_eq!(q("2Gi").saturating_mul(3), q("6Gi"));
        let huge = q("1000Ei");
        assert!(huge.saturating_mul(i64::MAX) > huge);
    }
}
