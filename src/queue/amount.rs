//! Quota amounts in Kueue's accounting units (milli for cpu, units otherwise) with saturating
//! arithmetic, so that an unlimited limit (a missing borrowingLimit) never overflows.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::{Add, AddAssign, Sub, SubAssign};

/// An amount of one resource in one flavor. `Amount::UNLIMITED` absorbs additions and
/// subtractions of finite amounts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Amount(pub i64);

impl Amount {
    pub const ZERO: Amount = Amount(0);
    pub const UNLIMITED: Amount = Amount(i64::MAX);

    pub fn is_unlimited(self) -> bool {
        self.0 == i64::MAX
    }

    /// Saturating multiplication, used for per-pod requests times a pod count.
    pub fn times(self, n: i64) -> Amount {
        if self.is_unlimited() {
            return self;
        }
        Amount(self.0.saturating_mul(n))
    }

    pub fn max(self, other: Amount) -> Amount {
        if self >= other { self } else { other }
    }

    pub fn min(self, other: Amount) -> Amount {
        if self <= other { self } else { other }
    }

    pub fn clamp_zero(self) -> Amount {
        self.max(Amount::ZERO)
    }
}

impl Add for Amount {
    type Output = Amount;
    fn add(self, rhs: Amount) -> Amount {
        if self.is_unlimited() || rhs.is_unlimited() {
            return Amount::UNLIMITED;
        }
        let v = self.0.saturating_add(rhs.0);
        // Keep i64::MAX reserved for "unlimited" only when it was produced on purpose.
        Amount(v.min(i64::MAX - 1))
    }
}

impl Sub for Amount {
    type Output = Amount;
    fn sub(self, rhs: Amount) -> Amount {
        if self.is_unlimited() {
            return Amount::UNLIMITED;
        }
        if rhs.is_unlimited() {
            return Amount(i64::MIN);
        }
        Amount(self.0.saturating_sub(rhs.0).min(i64::MAX - 1))
    }
}

impl AddAssign for Amount {
    fn add_assign(&mut self, rhs: Amount) {
        *self = *self + rhs;
    }
}

impl SubAssign for Amount {
    fn sub_assign(&mut self, rhs: Amount) {
        *self = *self - rhs;
    }
}

impl fmt::Display for Amount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_unlimited() {
            f.write_str("unlimited")
        } else {
            write!(f, "{}", self.0)
        }
    }
}

/// A (flavor, resource) pair: the unit in which quota is defined and usage is tracked.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FlavorResource {
    pub flavor: String,
    pub resource: String,
}

impl FlavorResource {
    pub fn new(flavor: impl Into<String>, resource: impl Into<String>) -> Self {
        FlavorResource {
            flavor: flavor.into(),
            resource: resource.into(),
        }
    }
}

impl FlavorResource {
    /// An amount of this resource as a person reads it: a Kubernetes quantity (`5` CPU, not `5000`
    /// milli-CPU; `4Gi`, not `4294967296`).
    pub fn show(&self, a: Amount) -> String {
        if a.is_unlimited() {
            return "unlimited".to_string();
        }
        crate::api::quantity::resource_quantity(&self.resource, a.0).canonical()
    }
}

impl fmt::Display for FlavorResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} in flavor {}", self.resource, self.flavor)
    }
}

/// Amounts per (flavor, resource); ordered so that every report and message is deterministic.
pub type FrAmounts = BTreeMap<FlavorResource, Amount>;

/// Adds `b` into `a`.
pub fn add_into(a: &mut FrAmounts, b: &FrAmounts) {
    for (fr, v) in b {
        *a.entry(fr.clone()).or_default() += *v;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saturating_table() {
        let cases = [
            (Amount(1), Amount(2), Amount(3), Amount(-1)),
            (Amount::UNLIMITED, Amount(5), Amount::UNLIMITED, Amount::UNLIMITED),
            (Amount(5), Amount::UNLIMITED, Amount::UNLIMITED, Amount(i64::MIN)),
            (
                Amount(i64::MAX - 1),
                Amount(10),
                Amount(i64::MAX - 1),
                Amount(i64::MAX - 11),
            ),
            (
                Amount(i64::MIN),
                Amount(1),
                Amount(i64::MIN + 1),
                Amount(i64::MIN),
            ),
        ];
        for (a, b, sum, diff) in cases {
            assert_eq!(a + b, sum, "{a} + {b}");
            assert_eq!(a - b, diff, "{a} - {b}");
        }
        assert!(!(Amount(i64::MAX - 1) + Amount(1)).is_unlimited());
        assert_eq!(Amount(3).times(4), Amount(12));
        assert_eq!(Amount::UNLIMITED.times(0), Amount::UNLIMITED);
    }
}
