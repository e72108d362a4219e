//! Growth-first preemption (beyond Kueue): a candidate that carries a floor (what it can shrink
//! back to, e.g. a RayService's serving cluster while its upgrade's growth is admitted) offers its
//! growth, `usage - floor`, as a partial victim before any whole victim is taken.
//!
//! The search is Kueue's greedy one over a longer list of pieces: first the growth of every
//! candidate that has one (in the candidates' order), then every candidate's rest (its floor; the
//! whole usage for one without growth). Pieces are removed in that order until the preemptor fits,
//! then put back in reverse (except the last) when not needed. A candidate whose rest stays out is
//! evicted whole; one whose growth alone stays out only shrinks back to its floor. With no floor
//! anywhere the list is exactly Kueue's candidate list, so the answer is Kueue's.

use super::amount::{Amount, FrAmounts};
use super::preemption::{Candidate, Elem, Preemptor, Target, still_valid, workload_fits};
use super::tree::QuotaTree;

/// What the candidate holds above its floor, per flavor-resource (positive parts only); `None`
/// without a floor or when the floor covers all of it.
pub fn growth(c: &Candidate<'_>) -> Option<FrAmounts> {
    let floor = c.floor?;
    let g: FrAmounts = c
        .usage
        .iter()
        .map(|(fr, v)| (fr.clone(), (*v - floor.get(fr).copied().unwrap_or_default()).clamp_zero()))
        .filter(|(_, v)| *v > Amount::ZERO)
        .collect();
    (!g.is_empty()).then_some(g)
}

/// The floor as far as the candidate holds it (never above its usage).
fn rest(c: &Candidate<'_>) -> FrAmounts {
    let floor = c.floor.cloned().unwrap_or_default();
    c.usage
        .iter()
        .map(|(fr, v)| (fr.clone(), (*v).min(floor.get(fr).copied().unwrap_or_default()).clamp_zero()))
        .filter(|(_, v)| *v > Amount::ZERO)
        .collect()
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
    Growth,
    Rest,
}

/// The victims (whole or growth only) that make the preemptor fit, or empty. The tree is left as
/// it was found.
pub(super) fn minimal(
    tree: &mut QuotaTree,
    p: &Preemptor<'_>,
    candidates: &[Elem<'_>],
    allow_borrowing: bool,
) -> Vec<Target> {
    // Owned before the guard below, which borrows them.
    let growths: Vec<Option<FrAmounts>> = candidates.iter().map(|e| growth(&e.c)).collect();
    let rests: Vec<FrAmounts> = candidates.iter().map(|e| rest(&e.c)).collect();
    let mut order: Vec<(usize, Part)> = (0..candidates.len())
        .filter(|i| growths[*i].is_some())
        .map(|i| (i, Part::Growth))
        .collect();
    order.extend((0..candidates.len()).map(|i| (i, Part::Rest)));

    let mut sim = tree.without();
    let mut growth_out = vec![false; candidates.len()];
    // (candidate, part, the maps taken out for it)
    let mut removed: Vec<(usize, Part, Vec<&FrAmounts>)> = Vec::new();
    let mut fits = false;
    for (i, part) in order {
        let e = &candidates[i];
        if !still_valid(&sim, p, e, allow_borrowing) {
            continue;
        }
        let maps: Vec<&FrAmounts> = match (part, &growths[i]) {
            (Part::Growth, Some(g)) => vec![g],
            (Part::Growth, None) => continue,
            // The rest on top of a growth already out; the whole usage otherwise.
            (Part::Rest, Some(_)) if growth_out[i] => vec![&rests[i]],
            (Part::Rest, _) => vec![e.c.usage],
        };
        for m in &maps {
            sim.remove(e.c.cq_idx, m);
        }
        if part == Part::Growth {
            growth_out[i] = true;
        }
        removed.push((i, part, maps));
        if workload_fits(&sim, p, allow_borrowing) {
            fits = true;
            break;
        }
    }
    if !fits {
        return Vec::new();
    }
    let mut keep = vec![true; removed.len()];
    let mut rest_kept = vec![false; candidates.len()];
    if let Some((i, Part::Rest, _)) = removed.last() {
        rest_kept[*i] = true;
    }
    for k in (0..removed.len().saturating_sub(1)).rev() {
        let (i, part, maps) = &removed[k];
        // The growth of a candidate evicted whole goes with it.
        if *part == Part::Growth && rest_kept[*i] {
            continue;
        }
        for m in maps {
            sim.put_back(candidates[*i].c.cq_idx, m);
        }
        if workload_fits(&sim, p, allow_borrowing) {
            keep[k] = false;
        } else {
            for m in maps {
                sim.remove(candidates[*i].c.cq_idx, m);
            }
            if *part == Part::Rest {
                rest_kept[*i] = true;
            }
        }
    }
    let mut growth_kept = vec![false; candidates.len()];
    for ((i, part, _), k) in removed.iter().zip(&keep) {
        if *k && *part == Part::Growth {
            growth_kept[*i] = true;
        }
    }
    candidates
        .iter()
        .enumerate()
        .filter(|(i, _)| rest_kept[*i] || growth_kept[*i])
        .map(|(i, e)| Target {
            key: e.c.key.clone(),
            reason: e.reason(),
            growth_only: !rest_kept[i],
        })
        .collect()
}
