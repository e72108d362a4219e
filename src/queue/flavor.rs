//! Flavor assignment: per podset and resource group, flavors in ClusterQueue order, eligibility by
//! node labels and taints, flavor fungibility, borrowing level; NoFit / Preempt / Fit with a reason.

use std::collections::{BTreeMap, BTreeSet};

use super::PendingReason;
use super::amount::{Amount, FlavorResource, FrAmounts};
use super::model::{
    BorrowWithinCohortPolicy, ClusterQueueModel, FlavorModel, FungibilityPolicy, FungibilityPreference,
    PodSetAssignment, PodSetModel, ReclaimWithinCohort, ResourceGroup, TaintEffect, WithinClusterQueue,
    WorkloadModel,
};
use super::tree::QuotaTree;

/// Ordered worst to best: a podset's mode is its worst resource's, a workload's its worst podset's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Mode {
    NoFit,
    Preempt,
    Fit,
}

/// A resource short in a flavor, kept to explain who holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shortfall {
    pub fr: FlavorResource,
    pub needed: Amount,
    pub available: Amount,
}

#[derive(Clone, Debug)]
pub struct Assignment {
    pub podsets: Vec<PodSetAssignment>,
    pub usage: FrAmounts,
    pub mode: Mode,
    /// Highest borrowing level over all resources; 0 means within the ClusterQueue's own quota.
    pub borrowing: u32,
    /// Resources (in their chosen flavors) that only fit after preemption.
    pub preempt_frs: BTreeSet<FlavorResource>,
    pub reason: PendingReason,
    pub message: String,
    pub shortfalls: Vec<Shortfall>,
    /// The quota fits but a TAS podset's topology has no room while it would on an empty one: it
    /// preempts to free a domain (Kueue's TAS Preempt mode), and without victims it does not fit.
    pub topology_preempt: bool,
}

impl Assignment {
    /// An outcome known without evaluating (an equivalent workload just got it).
    pub fn no_fit(reason: PendingReason, message: String) -> Assignment {
        Assignment {
            podsets: Vec::new(),
            usage: FrAmounts::new(),
            mode: Mode::NoFit,
            borrowing: 0,
            preempt_frs: BTreeSet::new(),
            reason,
            message,
            shortfalls: Vec::new(),
            topology_preempt: false,
        }
    }
}

pub struct AssignCtx<'a> {
    pub tree: &'a QuotaTree,
    pub cq_idx: usize,
    pub cq: &'a ClusterQueueModel,
    pub flavors: &'a BTreeMap<String, FlavorModel>,
    /// resource -> flavor the replaced slice holds; a replacement must keep it.
    pub forced: Option<&'a BTreeMap<String, String>>,
    /// resource -> flavors of the first assignment of this cycle (Kueue's `NominationMapping`):
    /// an assignment computed again after preemption targets overlapped keeps to them.
    pub nominated: Option<&'a BTreeMap<String, BTreeSet<String>>>,
    /// Kueue's preemption oracle (`SimulatePreemption`): for `val` of a flavor-resource that
    /// only fits by preempting, whether victims exist (in the ClusterQueue or only elsewhere in
    /// the cohort) and the borrowing level once they are gone. Without it every such flavor
    /// counts as preemptible at its current borrowing level.
    pub oracle: Option<Oracle<'a>>,
    /// Fair sharing is on: a ClusterQueue that may reclaim within its cohort may then also
    /// preempt while borrowing.
    pub fair_sharing: bool,
}

/// See [`AssignCtx::oracle`]: for `val` of a flavor-resource, what preemption can do and the
/// borrowing level after it.
pub type Oracle<'a> = &'a dyn Fn(&FlavorResource, Amount) -> (Possibility, u32);

/// What preemption can do for one flavor-resource (Kueue's `PreemptionPossibility`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Possibility {
    NoCandidates,
    /// Victims include workloads of the preemptor's own ClusterQueue.
    Preempt,
    /// Victims are only in other ClusterQueues of the cohort.
    Reclaim,
}

enum FitOutcome {
    Fit(u32),
    /// Fits after preemption; the message says what is short, in Kueue's words.
    Preempt(Possibility, u32, String),
    NoFit(PendingReason, String, Option<Shortfall>),
}

/// Kueue's `preemptionMode`, worst to best.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Grade {
    NoFit,
    NoCandidates,
    Preempt,
    Reclaim,
    Fit,
}

impl Grade {
    fn mode(self) -> Mode {
        match self {
            Grade::NoFit => Mode::NoFit,
            Grade::NoCandidates | Grade::Preempt | Grade::Reclaim => Mode::Preempt,
            Grade::Fit => Mode::Fit,
        }
    }
}

/// Kueue's `granularMode`: how a flavor fits and at which borrowing level.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Rank {
    grade: Grade,
    borrowing: u32,
}

impl Rank {
    /// Kueue's `isPreferred`.
    fn better_than(self, other: Rank, pref: FungibilityPreference) -> bool {
        if self.grade == Grade::NoFit {
            return false;
        }
        if other.grade == Grade::NoFit {
            return true;
        }
        // A flavor without victims cannot be admitted this cycle: below every viable one.
        let (a_none, b_none) = (
            self.grade == Grade::NoCandidates,
            other.grade == Grade::NoCandidates,
        );
        if a_none != b_none {
            return !a_none;
        }
        match pref {
            FungibilityPreference::BorrowingOverPreemption if self.grade != other.grade => {
                self.grade > other.grade
            }
            FungibilityPreference::BorrowingOverPreemption => self.borrowing < other.borrowing,
            FungibilityPreference::PreemptionOverBorrowing if self.borrowing != other.borrowing => {
                self.borrowing < other.borrowing
            }
            FungibilityPreference::PreemptionOverBorrowing => self.grade > other.grade,
        }
    }

    /// Kueue's `shouldTryNextFlavor`, negated.
    fn stops_search(self, fung: super::model::FlavorFungibility) -> bool {
        match self.grade {
            Grade::NoFit | Grade::NoCandidates => false,
            Grade::Preempt | Grade::Reclaim if fung.when_can_preempt == FungibilityPolicy::TryNextFlavor => {
                false
            }
            _ => !(self.borrowing > 0 && fung.when_can_borrow == FungibilityPolicy::TryNextFlavor),
        }
    }
}

impl AssignCtx<'_> {
    fn can_preempt(&self) -> bool {
        self.cq.preemption.within_cluster_queue != WithinClusterQueue::Never
            || (self.tree.nodes[self.cq_idx].parent.is_some()
                && self.cq.preemption.reclaim_within_cohort != ReclaimWithinCohort::Never)
    }

    /// Kueue's `fitsResourceQuota` asks the preemption oracle only when preempting can make `val`
    /// fit: within the ClusterQueue's nominal quota, in a subtree below the root that could
    /// reclaim what it lent, or when the ClusterQueue may preempt while borrowing.
    fn may_preempt_for(&self, fr: &FlavorResource, val: Amount) -> bool {
        let nominal = self.tree.nodes[self.cq_idx]
            .quotas
            .get(fr)
            .map_or(Amount::ZERO, |q| q.nominal);
        val <= nominal
            || self.tree.may_reclaim_in_hierarchy(self.cq_idx, fr, val)
            || self.cq.preemption.borrow_within_cohort.policy != BorrowWithinCohortPolicy::Never
            || (self.fair_sharing && self.cq.preemption.reclaim_within_cohort != ReclaimWithinCohort::Never)
    }

    /// Kueue's `fitsResourceQuota`: `assumed` is what earlier podsets of the workload already
    /// take of `fr`, `request` this podset's part.
    fn fits_quota(&self, fr: &FlavorResource, assumed: Amount, request: Amount) -> FitOutcome {
        let val = assumed + request;
        let max = self.tree.potential_available(self.cq_idx, fr);
        if val > max {
            let msg = format!(
                "insufficient quota for {} in flavor {}, previously considered podsets requests ({}) + current podset request ({}) > maximum capacity ({})",
                fr.resource,
                fr.flavor,
                fr.show(assumed),
                fr.show(request),
                fr.show(max)
            );
            return FitOutcome::NoFit(PendingReason::ExceedsMaxQuota, msg, None);
        }
        let level = self.tree.borrowing_level(self.cq_idx, fr, val);
        let available = self.tree.available(self.cq_idx, fr);
        if val <= available {
            return FitOutcome::Fit(level);
        }
        let short = Shortfall {
            fr: fr.clone(),
            needed: val,
            available: available.clamp_zero(),
        };
        let msg = format!(
            "insufficient unused quota for {fr}, {} more needed",
            fr.show(val - short.available)
        );
        if self.may_preempt_for(fr, val) {
            // With the oracle, policies that allow no victim show as NoCandidates (still a
            // preempt-mode flavor, ranked below viable ones), as in Kueue.
            match self.oracle {
                Some(simulate) if self.can_preempt() => {
                    let (possibility, level) = simulate(fr, val);
                    return FitOutcome::Preempt(possibility, level, msg);
                }
                // No policy allows a victim: no search needed.
                Some(_) => return FitOutcome::Preempt(Possibility::NoCandidates, level, msg),
                None if self.can_preempt() => {
                    return FitOutcome::Preempt(Possibility::Preempt, level, msg);
                }
                None => {}
            }
        }
        FitOutcome::NoFit(PendingReason::WaitingForQuota, msg, Some(short))
    }

    /// Every flavor of the ClusterQueue names a topology (Kueue's `IsTASOnly`): its workloads use
    /// TAS even without asking.
    pub fn tas_only(&self) -> bool {
        let mut flavors = self.cq.resource_groups.iter().flat_map(|g| &g.flavors).peekable();
        flavors.peek().is_some()
            && flavors.all(|fq| self.flavors.get(&fq.name).is_some_and(|f| f.topology.is_some()))
    }

    fn eligible(&self, group: &ResourceGroup, flavor: &str, ps: &PodSetModel) -> Result<(), String> {
        let Some(f) = self.flavors.get(flavor) else {
            return Err(format!("flavor {flavor} not found"));
        };
        // Kueue's `checkPodSetAndFlavorMatchForTAS`.
        if ps.topology.as_ref().is_some_and(|t| t.is_explicit()) {
            if f.topology.is_none() {
                return Err(format!(
                    "Flavor {flavor:?} does not support TopologyAwareScheduling"
                ));
            }
        } else if f.topology.is_some() && !self.tas_only() {
            return Err(format!("Flavor {flavor:?} supports only TopologyAwareScheduling"));
        }
        for t in &f.node_taints {
            if t.effect == TaintEffect::PreferNoSchedule {
                continue;
            }
            let tolerated = ps
                .tolerations
                .iter()
                .chain(&f.tolerations)
                .any(|tol| tol.tolerates(t));
            if !tolerated {
                // Kueue prints the Go struct of the taint (TimeAdded is never set on a flavor).
                return Err(format!(
                    "untolerated taint {{{} {} {:?} <nil>}} in flavor {flavor}",
                    t.key, t.value, t.effect
                ));
            }
        }
        // Only label keys that some flavor of this group defines constrain the choice.
        let keys: BTreeSet<&String> = group
            .flavors
            .iter()
            .filter_map(|fq| self.flavors.get(&fq.name))
            .flat_map(|fm| fm.node_labels.keys())
            .collect();
        for (k, v) in &ps.node_selector {
            if keys.contains(k) && f.node_labels.get(k) != Some(v) {
                return Err(format!("flavor {flavor} doesn't match node selector {k}={v}"));
            }
        }
        if !ps.affinity_terms.is_empty() {
            let any = ps.affinity_terms.iter().any(|term| {
                term.iter()
                    .filter(|r| keys.contains(&r.key))
                    .all(|r| r.matches(&f.node_labels))
            });
            if !any {
                return Err(format!("flavor {flavor} doesn't match node affinity"));
            }
        }
        Ok(())
    }
}

/// The resource Kueue charges one unit of per pod.
pub const POD_RESOURCE: &str = "pods";

/// A shrunk podset keeps paying `pods` (its new count) in the flavor it was admitted with.
pub fn charge_pods_on_shrink(old: Option<&PodSetAssignment>, psa: &mut PodSetAssignment) {
    let Some(f) = old.and_then(|p| p.flavors.get(POD_RESOURCE)) else {
        return;
    };
    psa.flavors.remove(POD_RESOURCE);
    psa.resource_usage.remove(POD_RESOURCE);
    if psa.count > 0 {
        psa.flavors.insert(POD_RESOURCE.to_string(), f.clone());
        psa.resource_usage
            .insert(POD_RESOURCE.to_string(), Amount(psa.count));
    }
}

/// Assigns flavors to every podset of `wl` against the tree as it is now.
pub fn assign(ctx: &AssignCtx<'_>, wl: &WorkloadModel) -> Assignment {
    let mut out = Assignment {
        podsets: Vec::new(),
        usage: FrAmounts::new(),
        mode: Mode::Fit,
        borrowing: 0,
        preempt_frs: BTreeSet::new(),
        reason: PendingReason::Pending,
        message: String::new(),
        shortfalls: Vec::new(),
        topology_preempt: false,
    };
    // Per podset that does not fit outright, Kueue's `Status`: what every flavor tried said.
    let mut messages: Vec<String> = Vec::new();
    let mut reasons: Vec<PendingReason> = Vec::new();
    // Kueue charges each podset's pod count to `pods` when the ClusterQueue covers it, in place of
    // any `pods` a container asked for.
    let pods_key = POD_RESOURCE.to_string();
    let charge_pods = ctx
        .cq
        .resource_groups
        .iter()
        .any(|g| g.covered_resources.contains(&pods_key));
    for ps in &wl.podsets {
        let mut psa = PodSetAssignment {
            name: ps.name.clone(),
            count: ps.count,
            ..Default::default()
        };
        let requested = requested_resources(ctx, ps, charge_pods, &pods_key);
        let mut ps_mode = Mode::Fit;
        let mut ps_notes: Vec<String> = Vec::new();
        if let Some(note) = uncovered_resource(ctx, &requested) {
            ps_mode = Mode::NoFit;
            reasons.push(PendingReason::NoMatchingFlavor);
            ps_notes = vec![note];
        }
        for group in &ctx.cq.resource_groups {
            // Kueue stops at the first resource group that does not fit.
            if ps_mode == Mode::NoFit {
                break;
            }
            let rs: Vec<&(&String, Amount)> = requested
                .iter()
                .filter(|(r, _)| group.covered_resources.contains(r))
                .collect();
            if rs.is_empty() {
                continue;
            }
            let GroupSearch {
                best,
                mut notes,
                reasons: mut group_reasons,
                shorts,
            } = search_group(ctx, group, ps, &rs, &out.usage);
            match best {
                Some((fi, rank, max_borrow, preempt)) if rank.grade != Grade::NoFit => {
                    // A group that fits says nothing; one that needs preemption reports every
                    // flavor it tried (Kueue's `findFlavorForPodSets` status).
                    if rank.grade.mode() == Mode::Preempt {
                        ps_notes.extend(notes);
                    }
                    let fname = &group.flavors[fi].name;
                    for (r, v) in &rs {
                        psa.flavors.insert((*r).clone(), fname.clone());
                        psa.resource_usage.insert((*r).clone(), *v);
                        *out.usage
                            .entry(FlavorResource::new(fname, r.as_str()))
                            .or_default() += *v;
                    }
                    out.preempt_frs.extend(preempt);
                    out.borrowing = out.borrowing.max(max_borrow);
                    ps_mode = ps_mode.min(rank.grade.mode());
                }
                _ => {
                    ps_mode = Mode::NoFit;
                    if notes.is_empty() {
                        notes.push("no flavor in the resource group".to_string());
                        group_reasons.push(PendingReason::NoMatchingFlavor);
                    }
                    // The failing group's status replaces what earlier groups said.
                    ps_notes = notes;
                    reasons.extend(group_reasons);
                    out.shortfalls.extend(shorts);
                }
            }
        }
        if !ps_notes.is_empty() {
            // Kueue sorts a podset's reasons (`Status.Message`).
            ps_notes.sort();
            messages.push(format!(
                "couldn't assign flavors to pod set {}: {}",
                ps.name,
                ps_notes.join(", ")
            ));
        }
        out.mode = out.mode.min(ps_mode);
        out.podsets.push(psa);
    }
    if out.mode == Mode::NoFit {
        out.reason = most_actionable(&reasons);
    }
    if out.mode != Mode::Fit {
        // Kueue's `Assignment.Message`: what each podset's flavors said.
        out.message = messages.join("; ");
    }
    out
}

/// The resources a podset requests, with their totals. A zero request (count 0, or a pod asking 0)
/// still gets a flavor, with zero usage, when the ClusterQueue covers the resource; one it does not
/// cover is ignored (Kueue's flavorassigner "zero resource request" cases). With `charge_pods`, the
/// pod count is charged to `pods` in place of any `pods` a container asked for.
fn requested_resources<'a>(
    ctx: &AssignCtx<'_>,
    ps: &'a PodSetModel,
    charge_pods: bool,
    pods_key: &'a String,
) -> Vec<(&'a String, Amount)> {
    let covered = |r: &String| {
        ctx.cq
            .resource_groups
            .iter()
            .any(|g| g.covered_resources.contains(r))
    };
    let mut requested: Vec<(&String, Amount)> = ps
        .requests
        .keys()
        .filter(|r| !charge_pods || *r != pods_key)
        .map(|r| (r, ps.total(r)))
        .filter(|(r, v)| *v > Amount::ZERO || covered(r))
        .collect();
    if charge_pods {
        requested.push((pods_key, Amount(ps.count.max(0))));
    }
    requested
}

/// The note for the first requested resource no resource group of the ClusterQueue covers.
fn uncovered_resource(ctx: &AssignCtx<'_>, requested: &[(&String, Amount)]) -> Option<String> {
    requested
        .iter()
        .find(|(r, _)| {
            !ctx.cq
                .resource_groups
                .iter()
                .any(|g| g.covered_resources.contains(r))
        })
        .map(|(r, _)| format!("resource {r} unavailable in ClusterQueue"))
}

/// What trying the flavors of one resource group for a podset found: the best flavor (its index,
/// rank, borrowing level and the flavor-resources that need preemption), and what the others said.
struct GroupSearch {
    best: Option<(usize, Rank, u32, Vec<FlavorResource>)>,
    notes: Vec<String>,
    reasons: Vec<PendingReason>,
    shorts: Vec<Shortfall>,
}

/// Tries the group's flavors in the ClusterQueue's order for the podset's resources `rs` (Kueue's
/// `findFlavorForPodSetResource`), on top of the `usage` earlier podsets of the workload assumed,
/// until flavor fungibility says to stop.
fn search_group(
    ctx: &AssignCtx<'_>,
    group: &ResourceGroup,
    ps: &PodSetModel,
    rs: &[&(&String, Amount)],
    usage: &FrAmounts,
) -> GroupSearch {
    let fung = ctx.cq.flavor_fungibility;
    let forced: Option<&String> = ctx
        .forced
        .and_then(|f| rs.iter().find_map(|(r, _)| f.get(r.as_str())));
    let mut search = GroupSearch {
        best: None,
        notes: Vec::new(),
        reasons: Vec::new(),
        shorts: Vec::new(),
    };
    for (fi, fq) in group.flavors.iter().enumerate() {
        if let Some(ff) = forced
            && *ff != fq.name
        {
            search.notes.push(format!(
                "could not assign {} flavor since the original workload is assigned: {ff}",
                fq.name
            ));
            search.reasons.push(PendingReason::NoMatchingFlavor);
            continue;
        }
        // Kueue's `shouldSkipBasedOnNominationMapping`, in its words.
        if let Some(r) = ctx.nominated.and_then(|n| {
            rs.iter()
                .map(|(r, _)| r.as_str())
                .find(|r| n.get(*r).is_some_and(|fs| !fs.contains(&fq.name)))
        }) {
            search.notes.push(format!(
                "skipping flavor {} as it is not found in the nomination mapping for resource {r}",
                fq.name
            ));
            search.reasons.push(PendingReason::NoMatchingFlavor);
            continue;
        }
        if let Err(e) = ctx.eligible(group, &fq.name, ps) {
            search.notes.push(e);
            search.reasons.push(PendingReason::NoMatchingFlavor);
            continue;
        }
        let (rank, max_borrow, preempt) = rank_flavor(ctx, &fq.name, rs, usage, &mut search);
        let chosen = (fi, rank, max_borrow, preempt);
        if rank.stops_search(fung) {
            search.best = Some(chosen);
            break;
        }
        if search
            .best
            .as_ref()
            .is_none_or(|(_, b, _, _)| rank.better_than(*b, fung.preference))
        {
            search.best = Some(chosen);
        }
    }
    search
}

/// How one flavor serves the resources `rs`: it ranks as its worst resource (Kueue's
/// representative mode), with the highest borrowing level and the flavor-resources that need
/// preemption; what does not fit is noted in `search`.
fn rank_flavor(
    ctx: &AssignCtx<'_>,
    flavor: &str,
    rs: &[&(&String, Amount)],
    usage: &FrAmounts,
    search: &mut GroupSearch,
) -> (Rank, u32, Vec<FlavorResource>) {
    let fung = ctx.cq.flavor_fungibility;
    let mut rank = Rank {
        grade: Grade::Fit,
        borrowing: 0,
    };
    let mut max_borrow = 0;
    let mut preempt = Vec::new();
    for (r, v) in rs {
        let fr = FlavorResource::new(flavor, r.as_str());
        let assumed = usage.get(&fr).copied().unwrap_or_default();
        let this = match ctx.fits_quota(&fr, assumed, *v) {
            FitOutcome::Fit(l) => Rank {
                grade: Grade::Fit,
                borrowing: l,
            },
            FitOutcome::Preempt(possibility, l, msg) => {
                preempt.push(fr);
                search.notes.push(msg);
                let grade = match possibility {
                    Possibility::NoCandidates => Grade::NoCandidates,
                    Possibility::Preempt => Grade::Preempt,
                    Possibility::Reclaim => Grade::Reclaim,
                };
                Rank { grade, borrowing: l }
            }
            FitOutcome::NoFit(reason, msg, short) => {
                search.reasons.push(reason);
                search.notes.push(msg);
                search.shorts.extend(short);
                Rank {
                    grade: Grade::NoFit,
                    borrowing: 0,
                }
            }
        };
        max_borrow = max_borrow.max(this.borrowing);
        if rank.better_than(this, fung.preference) {
            rank = this;
        }
    }
    (rank, max_borrow, preempt)
}

/// A workload that does not fit is pending for the most actionable of its podsets' reasons: quota
/// that may free up, then capacity, then labels.
fn most_actionable(reasons: &[PendingReason]) -> PendingReason {
    [
        PendingReason::WaitingForQuota,
        PendingReason::ExceedsMaxQuota,
        PendingReason::NoMatchingFlavor,
    ]
    .into_iter()
    .find(|r| reasons.contains(r))
    .unwrap_or(PendingReason::NoMatchingFlavor)
}
