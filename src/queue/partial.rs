//! Partial admission (`podSets[].minCount`): the largest pod counts, each between its podset's
//! `minCount` and `count`, that pass a fit test, found by binary search over one shared reduction
//! step as Kueue's `flavorassigner.PodSetReducer` does. The search calls the test about
//! log2(total reduction) times and allocates only one count vector per call, whatever counts a
//! user wrote.

/// Counts for reduction step `i` of `total`: each podset gives up its share `delta * i / total`.
fn counts_at(full: &[i64], deltas: &[i64], i: i64, total: i64) -> Vec<i64> {
    full.iter()
        .zip(deltas)
        .map(|(f, d)| {
            // i128: delta * i may pass i64 for absurd counts; the quotient fits again.
            let cut = i128::from(*d) * i128::from(i) / i128::from(total.max(1));
            f - i64::try_from(cut).unwrap_or(*d)
        })
        .collect()
}

/// The first (largest) counts for which `fits` returns a result, and that result. `None` when no
/// podset may shrink or nothing between full and minimum counts fits. `fits` must be monotone
/// (fewer pods never fit worse), as it is for quota.
pub fn search<R>(
    full: &[i64],
    min: &[Option<i64>],
    mut fits: impl FnMut(&[i64]) -> Option<R>,
) -> Option<(Vec<i64>, R)> {
    let deltas: Vec<i64> = full
        .iter()
        .zip(min)
        .map(|(f, m)| f - m.unwrap_or(*f).max(0).min(*f))
        .collect();
    let total = deltas.iter().fold(0i64, |a, d| a.saturating_add(*d));
    if total == 0 {
        return None;
    }
    // Smallest step in [0, total] that fits; the best fit seen so far is kept.
    let (mut lo, mut hi) = (0i64, total);
    let mut best: Option<(Vec<i64>, R)> = None;
    while lo <= hi {
        let mid = lo + (hi - lo) / 2;
        let counts = counts_at(full, &deltas, mid, total);
        match fits(&counts) {
            Some(r) => {
                best = Some((counts, r));
                if mid == 0 {
                    break;
                }
                hi = mid - 1;
            }
            None => lo = mid + 1,
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kueue `pkg/scheduler/flavorassigner/podset_reducer_test.go` (`TestSearch`): podsets as
    /// (count, minCount), a limit on the total pod count, the total found.
    #[test]
    fn podset_reducer_cases() {
        let four = || vec![(5, Some(3)), (5, Some(4)), (5, Some(1)), (5, Some(2))];
        let one_big = || {
            let mut v = vec![(1, None); 8];
            v[0] = (150_000, Some(1));
            v
        };
        type PodSets = Vec<(i64, Option<i64>)>;
        let cases: Vec<(&str, PodSets, i64, Option<i64>)> = vec![
            ("empty", vec![], 10, None),
            ("partial not available", vec![(1, None), (2, Some(2))], 2, None),
            ("partial available", four(), 15, Some(15)),
            (
                "one partial available",
                vec![(5, Some(3)), (5, None), (5, None), (5, None)],
                19,
                Some(19),
            ),
            ("to min", four(), 10, Some(10)),
            ("to max", four(), 20, Some(20)),
            ("no overflow", vec![(150_000, Some(1)); 8], 150_000, Some(150_000)),
            ("max pods on 1.27", one_big(), 150_000, Some(150_000)),
            ("podset with replica count 0", vec![(0, Some(0))], 0, None),
        ];
        for (name, podsets, limit, want) in cases {
            let full: Vec<i64> = podsets.iter().map(|p| p.0).collect();
            let min: Vec<Option<i64>> = podsets.iter().map(|p| p.1).collect();
            let mut calls = 0;
            let got = search(&full, &min, |c| {
                calls += 1;
                let total: i64 = c.iter().sum();
                (total <= limit).then_some(total)
            });
            assert_eq!(got.map(|g| g.1), want, "{name}");
            assert!(calls <= 64, "{name}: {calls} calls");
        }
    }

    #[test]
    fn counts_stay_between_min_and_full() {
        let got = search(&[7], &[Some(3)], |c| (c[0] <= 5).then_some(())).unwrap();
        assert_eq!(got.0, vec![5]);
        assert!(search(&[7], &[Some(3)], |c| (c[0] <= 2).then_some(())).is_none());
    }
}
