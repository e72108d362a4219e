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
use super::tree::QuotaTree;

/// A candidate as the search sees it: where its usage sits, the usage, and its floor.
pub struct Piece<'a> {
    pub cq_idx: usize,
    pub usage: &'a FrAmounts,
    pub floor: Option<&'a FrAmounts>,
}

/// What a candidate holds above its floor, per flavor-resource (positive parts only); `None`
/// without a floor or when the floor covers all of it.
pub fn growth(usage: &FrAmounts, floor: Option<&FrAmounts>) -> Option<FrAmounts> {
    let floor = floor?;
    let g: FrAmounts = usage
        .iter()
        .map(|(fr, v)| {
            (
                fr.clone(),
                (*v - floor.get(fr).copied().unwrap_or_default()).clamp_zero(),
            )
        })
        .filter(|(_, v)| *v > Amount::ZERO)
        .collect();
    (!g.is_empty()).then_some(g)
}

/// The floor as far as the candidate holds it (never above its usage).
fn rest(c: &Piece<'_>) -> FrAmounts {
    let floor = c.floor.cloned().unwrap_or_default();
    c.usage
        .iter()
        .map(|(fr, v)| {
            (
                fr.clone(),
                (*v).min(floor.get(fr).copied().unwrap_or_default()).clamp_zero(),
            )
        })
        .filter(|(_, v)| *v > Amount::ZERO)
        .collect()
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
    Growth,
    Rest,
}

/// The victims that make the preemptor fit, as (candidate index, growth only), in the candidates'
/// order, or empty. `valid(tree, i)`: candidate `i` may still be taken on the tree as the search
/// has changed it; `fits(tree, whole)`: the preemptor fits with the candidates `whole` out
/// entirely. A candidate with only its growth out is not among them: a check that needs whole
/// workloads gone (the topology's: which pods a shrink deletes is not known) counts it as still
/// there. The tree is left as it was found.
pub(super) fn minimal(
    tree: &mut QuotaTree,
    candidates: &[Piece<'_>],
    valid: impl Fn(&QuotaTree, usize) -> bool,
    fits: impl Fn(&QuotaTree, &[usize]) -> bool,
) -> Vec<(usize, bool)> {
    // Owned before the guard below, which borrows them.
    let growths: Vec<Option<FrAmounts>> = candidates.iter().map(|c| growth(c.usage, c.floor)).collect();
    let rests: Vec<FrAmounts> = candidates.iter().map(rest).collect();
    let mut order: Vec<(usize, Part)> = (0..candidates.len())
        .filter(|i| growths[*i].is_some())
        .map(|i| (i, Part::Growth))
        .collect();
    order.extend((0..candidates.len()).map(|i| (i, Part::Rest)));

    let mut sim = tree.without();
    let mut growth_out = vec![false; candidates.len()];
    // (candidate, part, the maps taken out for it)
    let mut removed: Vec<(usize, Part, Vec<&FrAmounts>)> = Vec::new();
    let mut fit = false;
    for (i, part) in order {
        let c = &candidates[i];
        if !valid(&sim, i) {
            continue;
        }
        let maps: Vec<&FrAmounts> = match (part, &growths[i]) {
            (Part::Growth, Some(g)) => vec![g],
            (Part::Growth, None) => continue,
            // The rest on top of a growth already out; the whole usage otherwise.
            (Part::Rest, Some(_)) if growth_out[i] => vec![&rests[i]],
            (Part::Rest, _) => vec![c.usage],
        };
        for m in &maps {
            sim.remove(c.cq_idx, m);
        }
        if part == Part::Growth {
            growth_out[i] = true;
        }
        removed.push((i, part, maps));
        let whole: Vec<usize> = removed
            .iter()
            .filter(|(_, part, _)| *part == Part::Rest)
            .map(|(i, _, _)| *i)
            .collect();
        if fits(&sim, &whole) {
            fit = true;
            break;
        }
    }
    if !fit {
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
            sim.put_back(candidates[*i].cq_idx, m);
        }
        // Out whole: every rest still out but this piece's.
        let whole: Vec<usize> = removed
            .iter()
            .zip(&keep)
            .enumerate()
            .filter(|(j, ((_, p, _), out))| **out && *j != k && *p == Part::Rest)
            .map(|(_, ((i, _, _), _))| *i)
            .collect();
        if fits(&sim, &whole) {
            keep[k] = false;
        } else {
            for m in maps {
                sim.remove(candidates[*i].cq_idx, m);
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
    (0..candidates.len())
        .filter(|i| rest_kept[*i] || growth_kept[*i])
        .map(|i| (i, !rest_kept[i]))
        .collect()
}
