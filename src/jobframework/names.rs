//! Workload names, as Kueue derives them: `<lowercase kind>-<job name>-<5 hex of a SHA-1>`, the
//! prefix truncated so the whole name fits 253 characters (63 with Kueue's ShortWorkloadNames).
//! Same inputs give the same name as Kueue, so a Workload Kueue created is recognised and vice versa.

use kube::core::GroupVersionKind;
use sha1::{Digest, Sha1};

const HASH_LENGTH: usize = 5;

/// Kueue's ShortWorkloadNames feature: names short enough to be label values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NameLength {
    #[default]
    Long,
    Short,
}

impl NameLength {
    fn max(self) -> usize {
        match self {
            NameLength::Long => 253,
            NameLength::Short => 63,
        }
    }
    fn max_prefix(self) -> usize {
        self.max() - 1 - HASH_LENGTH
    }
}

/// Byte truncation as Kueue's (names are ASCII); never splits a multi-byte character.
fn truncate(s: &str, n: usize) -> &str {
    if s.len() <= n {
        return s;
    }
    let mut end = n;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

fn hash(owner_name: &str, owner_uid: &str, gvk: &GroupVersionKind, extra: &str) -> String {
    let mut h = Sha1::new();
    for (i, part) in [gvk.kind.as_str(), gvk.group.as_str(), owner_name, owner_uid]
        .into_iter()
        .enumerate()
    {
        if i > 0 {
            h.update(b"\n");
        }
        h.update(part.as_bytes());
    }
    if !extra.is_empty() {
        h.update(b"\n");
        h.update(extra.as_bytes());
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// `<lowercase kind>-<owner name>`, truncated to leave room for `-<hash>`.
pub fn workload_name_prefix(owner_name: &str, gvk: &GroupVersionKind, len: NameLength) -> String {
    truncate(
        &format!("{}-{owner_name}", gvk.kind.to_lowercase()),
        len.max_prefix(),
    )
    .to_string()
}

/// Name of the workload for a job; `extra` (e.g. the generation of an elastic job) makes each slice's name unique.
pub fn workload_name(
    owner_name: &str,
    owner_uid: &str,
    gvk: &GroupVersionKind,
    extra: &str,
    len: NameLength,
) -> String {
    let prefix = workload_name_prefix(owner_name, gvk, len);
    format!(
        "{}-{}",
        truncate(&prefix, len.max_prefix()),
        &hash(owner_name, owner_uid, gvk, extra)[..HASH_LENGTH]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> GroupVersionKind {
        GroupVersionKind::gvk("batch", "v1", "Job")
    }

    const LONG_JOB: &str = "marketing-campaign-autumn-2024-region-north-america-department-digital-strategy-sub-department-social-media-engagement-tracker-and-analytics-dashboard-v2-final-revision-by-engineering-team-lead-senior-architect-validation-checked-approved-by-legal-and-ops-dept";

    #[test]
    fn names_match_kueue() {
        // Expected values from Kueue's own workload_names_test.go.
        let cases = [
            ("name", "uid", "", NameLength::Long, "job-name-ef3a1".to_string()),
            ("name", "uid", "1", NameLength::Long, "job-name-2514c".to_string()),
            (LONG_JOB, "uid", "", NameLength::Long, "job-marketing-campaign-autumn-2024-region-north-america-department-digital-strategy-sub-department-social-media-engagement-tracker-and-analytics-dashboard-v2-final-revision-by-engineering-team-lead-senior-architect-validation-checked-approved-by-l-218b8".to_string()),
            (LONG_JOB, "uid", "", NameLength::Short, "job-marketing-campaign-autumn-2024-region-north-america-d-218b8".to_string()),
        ];
        for (name, uid, extra, len, want) in cases {
            let got = workload_name(name, uid, &job(), extra, len);
            assert_eq!(got, want, "{name}/{extra}/{len:?}");
            assert!(got.len() <= len.max());
        }
    }

    #[test]
    fn hash_separates_kind_group_uid_and_extra() {
        let base = workload_name("a", "u", &job(), "", NameLength::Long);
        assert_ne!(base, workload_name("a", "v", &job(), "", NameLength::Long));
        assert_ne!(
            base,
            workload_name(
                "a",
                "u",
                &GroupVersionKind::gvk("other.io", "v1", "Job"),
                "",
                NameLength::Long
            )
        );
        assert_ne!(base, workload_name("a", "u", &job(), "2", NameLength::Long));
        assert!(
            workload_name(
                "svc",
                "u",
                &GroupVersionKind::gvk("ray.io", "v1", "RayService"),
                "",
                NameLength::Long
            )
            .starts_with("rayservice-svc-")
        );
    }
}
