//! `metav1.Condition` building and merging, once for every controller (Kueue's and KubeRay's both follow
//! apimachinery's `SetStatusCondition`: the transition time moves only when the status flips).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// `"True"` / `"False"` as conditions spell them.
pub const TRUE: &str = "True";
pub const FALSE: &str = "False";

/// The status string for a boolean.
pub fn status_str(status: bool) -> &'static str {
    if status { TRUE } else { FALSE }
}

/// A condition stamped `now`.
pub fn new(
    type_: &str,
    status: bool,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    now: jiff::Timestamp,
) -> Condition {
    Condition {
        type_: type_.to_string(),
        status: status_str(status).to_string(),
        reason: reason.to_string(),
        message: message.to_string(),
        last_transition_time: Time(now),
        observed_generation: generation,
    }
}

/// Sets `c` in `conds`, keeping the stored transition time when the status did not flip. True when
/// anything but the transition time changed (so a no-op makes no write).
pub fn set(conds: &mut Vec<Condition>, mut c: Condition) -> bool {
    match conds.iter_mut().find(|x| x.type_ == c.type_) {
        Some(old) => {
            if old.status == c.status
                && old.reason == c.reason
                && old.message == c.message
                && old.observed_generation == c.observed_generation
            {
                return false;
            }
            if old.status == c.status {
                c.last_transition_time = old.last_transition_time.clone();
            }
            *old = c;
            true
        }
        None => {
            conds.push(c);
            true
        }
    }
}

/// The condition of this type, if present.
pub fn find<'a>(conds: Option<&'a [Condition]>, type_: &str) -> Option<&'a Condition> {
    conds.into_iter().flatten().find(|c| c.type_ == type_)
}

/// The condition of this type is present with status `True`.
pub fn is_true(conds: Option<&[Condition]>, type_: &str) -> bool {
    find(conds, type_).is_some_and(|c| c.status == TRUE)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> jiff::Timestamp {
        jiff::Timestamp::from_second(s).unwrap()
    }

    #[test]
    fn transition_time_moves_only_when_the_status_flips() {
        let mut conds = vec![];
        assert!(set(&mut conds, new("Ready", false, "A", "m", Some(1), at(10))));
        assert!(
            !set(&mut conds, new("Ready", false, "A", "m", Some(1), at(20))),
            "a no-op is not a change"
        );
        assert!(set(&mut conds, new("Ready", false, "B", "m2", Some(2), at(30))));
        assert_eq!(
            conds[0].last_transition_time,
            Time(at(10)),
            "same status keeps its time"
        );
        assert_eq!(conds[0].reason, "B");
        assert!(set(&mut conds, new("Ready", true, "C", "", Some(2), at(40))));
        assert_eq!(conds[0].last_transition_time, Time(at(40)));
        assert!(is_true(Some(&conds), "Ready"));
        assert!(!is_true(Some(&conds), "Other"));
        assert_eq!(conds.len(), 1);
    }
}
