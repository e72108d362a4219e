//! The embedded cluster's scheduler, when it has nodes with capacity (`--nodes`, `--node-pool`): it
//! registers the Nodes, then binds each pending pod to a node where it fits, as kube-scheduler's
//! default filters decide (v1.36.3, in their order, the first that fails a node naming why):
//! `NodeUnschedulable`, `TaintToleration` (NoSchedule and NoExecute taints against the pod's
//! tolerations), `NodeAffinity` (`nodeSelector` and the required node-affinity terms) and
//! `NodeResourcesFit` (the pod's requests, init containers and sidecars counted as
//! `resourcehelper.PodRequests` does, against allocatable minus the requests of the pods bound there
//! and not finished; the node's `pods` count). Among the nodes that fit, the least allocated (cpu and
//! memory, `LeastAllocated`) wins; ties by name. A pod that fits nowhere stays Pending with
//! `PodScheduled=False`, reason `Unschedulable` and kube-scheduler's message
//! (`FitError.Error()` with the post-filters' part: `DynamicResources`' and `DefaultPreemption`'s,
//! checked against a real kube-scheduler v1.36.3 fed by `quotagate node-agent`); a gated pod is never bound
//! (`PodScheduled=False`, `SchedulingGated`). Pods go by priority, then age (`PrioritySort`), and
//! every pass starts over when a pod or node changes, so a pod that ends frees its node for the next.
//!
//! Not done: preemption (a pod that lower-priority pods would make room for waits and says so),
//! pod (anti-)affinity, topology spread, host ports, volumes, preferred terms.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, NodeSelectorRequirement, NodeSelectorTerm, Pod, Toleration};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use serde_json::json;
use tokio::sync::Notify;

use super::nodes::{NodePool, node_object};
use super::{RETRY, condition};
use crate::api::quantity::{Quantity, resource_value};

/// kube-scheduler's reason for a pod that fits no node.
pub const UNSCHEDULABLE: &str = "Unschedulable";
/// `NodeAffinity`'s reason (`ErrReasonPod`).
pub const NODE_AFFINITY_MISMATCH: &str = "node(s) didn't match Pod's node affinity/selector";
/// `TaintToleration`'s reason.
pub const UNTOLERATED_TAINT: &str = "node(s) had untolerated taint(s)";
/// `NodeUnschedulable`'s reason (`ErrReasonUnschedulable`).
pub const NODE_UNSCHEDULABLE: &str = "node(s) were unschedulable";
/// `DynamicResources`' post-filter message for a pod without resource claims.
pub const NO_CLAIMS: &str = "no new claims to deallocate";
/// `DefaultPreemption`'s, for a node with no lower-priority pod to evict.
pub const NO_VICTIMS: &str = "No preemption victims found for incoming pod";
/// The preemption evaluator's, for a node no eviction can help (a filter other than resources failed,
/// or the request exceeds the node's allocatable).
pub const NOT_HELPFUL: &str = "Preemption is not helpful for scheduling";
/// Ours: lower-priority pods would make room, and a real scheduler would preempt them.
pub const NOT_PREEMPTING: &str = "Preemption of lower-priority pods is not done by the embedded scheduler";

/// A node as the filters see it.
#[derive(Clone, Debug, Default)]
pub struct NodeInfo {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<k8s_openapi::api::core::v1::Taint>,
    pub unschedulable: bool,
    /// Resource -> amount in `resource_value` units (milli-cpu; `pods` a count).
    pub allocatable: BTreeMap<String, i64>,
    /// What its bound, unfinished pods request, and how many they are, with their priorities.
    pub requested: BTreeMap<String, i64>,
    pub pods: Vec<(i32, BTreeMap<String, i64>)>,
}

impl NodeInfo {
    pub fn of(node: &Node) -> Self {
        let spec = node.spec.clone().unwrap_or_default();
        NodeInfo {
            name: node.metadata.name.clone().unwrap_or_default(),
            labels: node.metadata.labels.clone().unwrap_or_default(),
            taints: spec.taints.unwrap_or_default(),
            unschedulable: spec.unschedulable.unwrap_or(false),
            allocatable: amounts(node.status.as_ref().and_then(|s| s.allocatable.as_ref())),
            ..Default::default()
        }
    }

    /// Counts a bound pod's requests.
    pub fn add(&mut self, priority: i32, req: BTreeMap<String, i64>) {
        for (r, v) in &req {
            *self.requested.entry(r.clone()).or_default() += v;
        }
        self.pods.push((priority, req));
    }
}

fn amounts(
    list: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
) -> BTreeMap<String, i64> {
    list.into_iter()
        .flatten()
        .filter_map(|(r, q)| {
            Quantity::try_from(q)
                .ok()
                .map(|q| (r.clone(), resource_value(r, &q)))
        })
        .collect()
}

fn add_into(to: &mut BTreeMap<String, i64>, from: &BTreeMap<String, i64>) {
    for (r, v) in from {
        *to.entry(r.clone()).or_default() += v;
    }
}

fn max_into(to: &mut BTreeMap<String, i64>, from: &BTreeMap<String, i64>) {
    for (r, v) in from {
        let e = to.entry(r.clone()).or_default();
        *e = (*e).max(*v);
    }
}

/// What a pod asks of a node, as `resourcehelper.PodRequests`: its containers' requests summed,
/// sidecars (init containers with `restartPolicy: Always`) added, each other init container with
/// the sidecars started before it as a floor, the pod's overhead on top; pod-level requests (the
/// `PodLevelResources` gate, on in v1.36) replace cpu and memory when set.
pub fn pod_requests(pod: &Pod) -> BTreeMap<String, i64> {
    let Some(spec) = pod.spec.as_ref() else {
        return BTreeMap::new();
    };
    let of = |r: &Option<k8s_openapi::api::core::v1::ResourceRequirements>| {
        amounts(r.as_ref().and_then(|r| r.requests.as_ref()))
    };
    let mut reqs = BTreeMap::new();
    for c in &spec.containers {
        add_into(&mut reqs, &of(&c.resources));
    }
    let mut sidecars = BTreeMap::new();
    let mut init = BTreeMap::new();
    for c in spec.init_containers.iter().flatten() {
        let own = of(&c.resources);
        if c.restart_policy.as_deref() == Some("Always") {
            add_into(&mut sidecars, &own);
            max_into(&mut init, &sidecars);
        } else {
            let mut with = own;
            add_into(&mut with, &sidecars);
            max_into(&mut init, &with);
        }
    }
    add_into(&mut reqs, &sidecars);
    max_into(&mut reqs, &init);
    let pod_level = of(&spec.resources);
    for r in ["cpu", "memory"] {
        if let Some(v) = pod_level.get(r) {
            reqs.insert(r.to_string(), *v);
        }
    }
    add_into(&mut reqs, &amounts(spec.overhead.as_ref()));
    reqs
}

/// The resources `NodeResourcesFit` checks: cpu, memory, ephemeral storage and scalar resources
/// (extended `domain/name`, `hugepages-*`, `attachable-volumes-*`); other names are not its.
fn checked(resource: &str) -> bool {
    matches!(resource, "cpu" | "memory" | "ephemeral-storage")
        || resource.starts_with("hugepages-")
        || resource.starts_with("attachable-volumes-")
        || (resource.contains('/') && !resource.starts_with("kubernetes.io/"))
}

/// `v1helper.ToleratesTaint`.
fn tolerates(t: &Toleration, key: &str, value: &str, effect: &str) -> bool {
    if t.effect.as_deref().is_some_and(|e| !e.is_empty() && e != effect) {
        return false;
    }
    if t.key.as_deref().is_some_and(|k| !k.is_empty() && k != key) {
        return false;
    }
    match t.operator.as_deref().unwrap_or("") {
        "" | "Equal" => t.value.as_deref().unwrap_or("") == value,
        "Exists" => true,
        _ => false,
    }
}

fn tolerations(pod: &Pod) -> &[Toleration] {
    pod.spec
        .as_ref()
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or_default()
}

/// One requirement of a node selector term on the node's labels (`In`, `NotIn`, `Exists`,
/// `DoesNotExist`, `Gt`, `Lt`, as `nodeaffinity`'s label selector reads them).
fn requirement_matches(r: &NodeSelectorRequirement, labels: &BTreeMap<String, String>) -> bool {
    let have = labels.get(&r.key);
    let values = r.values.as_deref().unwrap_or_default();
    match r.operator.as_str() {
        "In" => have.is_some_and(|v| values.contains(v)),
        "NotIn" => have.is_none_or(|v| !values.contains(v)),
        "Exists" => have.is_some(),
        "DoesNotExist" => have.is_none(),
        "Gt" | "Lt" => {
            let (Some(have), [want]) = (have.and_then(|v| v.parse::<i64>().ok()), values) else {
                return false;
            };
            let Ok(want) = want.parse::<i64>() else {
                return false;
            };
            if r.operator == "Gt" {
                have > want
            } else {
                have < want
            }
        }
        _ => false,
    }
}

/// A term matches when all its expressions and fields do; a term with neither matches nothing.
fn term_matches(t: &NodeSelectorTerm, node: &NodeInfo) -> bool {
    let exprs = t.match_expressions.as_deref().unwrap_or_default();
    let fields = t.match_fields.as_deref().unwrap_or_default();
    if exprs.is_empty() && fields.is_empty() {
        return false;
    }
    let name = BTreeMap::from([("metadata.name".to_string(), node.name.clone())]);
    exprs.iter().all(|r| requirement_matches(r, &node.labels))
        && fields
            .iter()
            .all(|r| matches!(r.operator.as_str(), "In" | "NotIn") && requirement_matches(r, &name))
}

/// `nodeSelector` and the required node-affinity terms (any term).
pub fn affinity_matches(pod: &Pod, node: &NodeInfo) -> bool {
    let Some(spec) = pod.spec.as_ref() else {
        return true;
    };
    if let Some(sel) = &spec.node_selector
        && !sel.iter().all(|(k, v)| node.labels.get(k) == Some(v))
    {
        return false;
    }
    match spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref())
    {
        Some(req) => req.node_selector_terms.iter().any(|t| term_matches(t, node)),
        None => true,
    }
}

/// A node's verdict: fits, or the first failing filter's reasons and whether preemption could help.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    Fits,
    /// `Unschedulable`: evicting pods could make room.
    Unschedulable(Vec<String>),
    /// `UnschedulableAndUnresolvable`.
    Unresolvable(Vec<String>),
}

/// The filters, in kube-scheduler's default order, on one node.
pub fn filter(pod: &Pod, req: &BTreeMap<String, i64>, node: &NodeInfo) -> Verdict {
    let tols = tolerations(pod);
    if node.unschedulable
        && !tols
            .iter()
            .any(|t| tolerates(t, "node.kubernetes.io/unschedulable", "", "NoSchedule"))
    {
        return Verdict::Unresolvable(vec![NODE_UNSCHEDULABLE.into()]);
    }
    let untolerated = node.taints.iter().any(|taint| {
        matches!(taint.effect.as_str(), "NoSchedule" | "NoExecute")
            && !tols
                .iter()
                .any(|t| tolerates(t, &taint.key, taint.value.as_deref().unwrap_or(""), &taint.effect))
    });
    if untolerated {
        return Verdict::Unresolvable(vec![UNTOLERATED_TAINT.into()]);
    }
    if !affinity_matches(pod, node) {
        return Verdict::Unresolvable(vec![NODE_AFFINITY_MISMATCH.into()]);
    }
    fits(req, node)
}

/// `noderesources.fitsRequest`: the pod count, then cpu, memory, ephemeral storage, then scalar
/// resources in name order; unresolvable when a request exceeds the node's whole allocatable.
fn fits(req: &BTreeMap<String, i64>, node: &NodeInfo) -> Verdict {
    let mut reasons = Vec::new();
    let mut unresolvable = false;
    let allowed = node.allocatable.get("pods").copied().unwrap_or(0);
    if i64::try_from(node.pods.len())
        .unwrap_or(i64::MAX)
        .saturating_add(1)
        > allowed
    {
        reasons.push("Too many pods".to_string());
    }
    let order = ["cpu", "memory", "ephemeral-storage"]
        .into_iter()
        .map(str::to_string)
        .chain(
            req.keys()
                .filter(|r| !matches!(r.as_str(), "cpu" | "memory" | "ephemeral-storage"))
                .cloned(),
        );
    for r in order {
        let want = req.get(&r).copied().unwrap_or(0);
        if want <= 0 || !checked(&r) {
            continue;
        }
        let alloc = node.allocatable.get(&r).copied().unwrap_or(0);
        let used = node.requested.get(&r).copied().unwrap_or(0);
        if want > alloc.saturating_sub(used) {
            reasons.push(format!("Insufficient {r}"));
            unresolvable |= want > alloc;
        }
    }
    match (reasons.is_empty(), unresolvable) {
        (true, _) => Verdict::Fits,
        (false, false) => Verdict::Unschedulable(reasons),
        (false, true) => Verdict::Unresolvable(reasons),
    }
}

/// `LeastAllocated` over cpu and memory (weights 1), 0-100.
fn score(req: &BTreeMap<String, i64>, node: &NodeInfo) -> i64 {
    let part = |r: &str| {
        let alloc = node.allocatable.get(r).copied().unwrap_or(0);
        let used = node.requested.get(r).copied().unwrap_or(0) + req.get(r).copied().unwrap_or(0);
        if alloc <= 0 || used > alloc {
            0
        } else {
            i64::try_from((i128::from(alloc - used) * 100) / i128::from(alloc)).unwrap_or(0)
        }
    };
    (part("cpu") + part("memory")) / 2
}

/// `FitError.Error()`: `0/N nodes are available: <count reason, ...sorted>.`
fn fit_error(total: usize, reasons: &BTreeMap<String, usize>) -> String {
    let mut parts: Vec<String> = reasons.iter().map(|(r, n)| format!("{n} {r}")).collect();
    parts.sort();
    let mut msg = format!("0/{total} nodes are available:");
    if !parts.is_empty() {
        msg.push_str(&format!(" {}.", parts.join(", ")));
    }
    msg
}

fn priority(pod: &Pod) -> i32 {
    pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0)
}

/// Where the pod goes: the best node that fits, or kube-scheduler's message for why none does.
pub fn schedule(pod: &Pod, nodes: &[NodeInfo]) -> Result<String, String> {
    let req = pod_requests(pod);
    let mut verdicts = Vec::with_capacity(nodes.len());
    let mut best: Option<(i64, &str)> = None;
    for n in nodes {
        let v = filter(pod, &req, n);
        if v == Verdict::Fits {
            let s = score(&req, n);
            if best.is_none_or(|(b, name)| s > b || (s == b && n.name.as_str() < name)) {
                best = Some((s, &n.name));
            }
        }
        verdicts.push(v);
    }
    if let Some((_, name)) = best {
        return Ok(name.to_string());
    }
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    for v in &verdicts {
        if let Verdict::Unschedulable(rs) | Verdict::Unresolvable(rs) = v {
            for r in rs {
                *reasons.entry(r.clone()).or_default() += 1;
            }
        }
    }
    // The post-filter plugins' messages, joined by ", ": `DynamicResources` (on in v1.36; a pod
    // without resource claims has none to free) before `DefaultPreemption`.
    let mut msg = fit_error(nodes.len(), &reasons);
    msg.push(' ');
    msg.push_str(NO_CLAIMS);
    msg.push_str(", ");
    msg.push_str(&preemption_message(pod, &req, nodes, &verdicts));
    Err(msg)
}

/// `DefaultPreemption`'s post-filter message when it finds no candidate: per node that only lacked
/// resources, whether lower-priority pods are there to evict (without them, whether it would then
/// fit); every other node "not helpful".
fn preemption_message(
    pod: &Pod,
    req: &BTreeMap<String, i64>,
    nodes: &[NodeInfo],
    verdicts: &[Verdict],
) -> String {
    if pod.spec.as_ref().and_then(|s| s.preemption_policy.as_deref()) == Some("Never") {
        return "preemption: not eligible due to preemptionPolicy=Never.".into();
    }
    let prio = priority(pod);
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    let mut explicit = 0;
    for (n, v) in nodes.iter().zip(verdicts) {
        if !matches!(v, Verdict::Unschedulable(_)) {
            continue;
        }
        explicit += 1;
        let lower: Vec<_> = n.pods.iter().filter(|(p, _)| *p < prio).collect();
        if lower.is_empty() {
            *reasons.entry(NO_VICTIMS.into()).or_default() += 1;
            continue;
        }
        let mut without = n.clone();
        for (_, r) in lower {
            for (k, v) in r {
                *without.requested.entry(k.clone()).or_default() -= v;
            }
        }
        without.pods.retain(|(p, _)| *p >= prio);
        match fits(req, &without) {
            Verdict::Fits => *reasons.entry(NOT_PREEMPTING.into()).or_default() += 1,
            Verdict::Unschedulable(rs) | Verdict::Unresolvable(rs) => {
                for r in rs {
                    *reasons.entry(r).or_default() += 1;
                }
            }
        }
    }
    if nodes.len() > explicit {
        *reasons.entry(NOT_HELPFUL.into()).or_default() += nodes.len() - explicit;
    }
    format!("preemption: {}", fit_error(nodes.len(), &reasons))
}

fn pod_key(p: &Pod) -> String {
    format!(
        "{}/{}",
        p.metadata.namespace.as_deref().unwrap_or(""),
        p.metadata.name.as_deref().unwrap_or("")
    )
}

fn bound_to(p: &Pod) -> Option<&str> {
    p.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
}

fn finished(p: &Pod) -> bool {
    matches!(
        p.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

fn gated(p: &Pod) -> bool {
    p.spec
        .as_ref()
        .and_then(|s| s.scheduling_gates.as_ref())
        .is_some_and(|g| !g.is_empty())
}

/// The pod's `PodScheduled` condition: (status, reason, message).
fn scheduled_condition(p: &Pod) -> Option<(String, String, String, Option<String>)> {
    p.status.as_ref()?.conditions.as_ref()?.iter().find_map(|c| {
        (c.type_ == "PodScheduled").then(|| {
            (
                c.status.clone(),
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default(),
                c.last_transition_time.as_ref().map(|t| t.0.to_string()),
            )
        })
    })
}

/// What one pass decided for one pending pod.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    Bind(String),
    /// Write `PodScheduled=False` with this reason and message (not said yet).
    Unschedulable {
        reason: String,
        message: String,
    },
}

/// One scheduling pass over a snapshot: every pending, unbound pod in `PrioritySort` order, each
/// placed with the nodes' usage including the pods placed before it in this pass.
/// `assumed` are bindings written but not yet seen (pod key -> node).
pub fn pass(
    pods: &[Arc<Pod>],
    nodes: &[Arc<Node>],
    assumed: &HashMap<String, String>,
) -> Vec<(Arc<Pod>, Decision)> {
    let mut infos: Vec<NodeInfo> = nodes.iter().map(|n| NodeInfo::of(n)).collect();
    infos.sort_by(|a, b| a.name.cmp(&b.name));
    let mut pending = Vec::new();
    for p in pods {
        if finished(p) {
            continue;
        }
        let key = pod_key(p);
        let node = bound_to(p).or_else(|| assumed.get(&key).map(String::as_str));
        match node {
            Some(node) => {
                if let Some(info) = infos.iter_mut().find(|i| i.name == node) {
                    info.add(priority(p), pod_requests(p));
                }
            }
            None if p.metadata.deletion_timestamp.is_none() => pending.push(p.clone()),
            None => {}
        }
    }
    pending.sort_by(|a, b| {
        priority(b)
            .cmp(&priority(a))
            .then_with(|| a.metadata.creation_timestamp.cmp(&b.metadata.creation_timestamp))
            .then_with(|| pod_key(a).cmp(&pod_key(b)))
    });
    let mut out = Vec::new();
    for p in pending {
        let said = scheduled_condition(&p);
        let say = |reason: &str, message: &str| {
            let already = said
                .as_ref()
                .is_some_and(|(s, r, m, _)| s == "False" && r == reason && m == message);
            (!already).then(|| Decision::Unschedulable {
                reason: reason.into(),
                message: message.into(),
            })
        };
        if gated(&p) {
            if let Some(d) = say(
                super::node::SCHEDULING_GATED,
                super::node::SCHEDULING_GATED_MESSAGE,
            ) {
                out.push((p, d));
            }
            continue;
        }
        match schedule(&p, &infos) {
            Ok(node) => {
                if let Some(info) = infos.iter_mut().find(|i| i.name == node) {
                    info.add(priority(&p), pod_requests(&p));
                }
                out.push((p, Decision::Bind(node)));
            }
            Err(message) => {
                if let Some(d) = say(UNSCHEDULABLE, &message) {
                    out.push((p, d));
                }
            }
        }
    }
    out
}

/// Registers the nodes (again on every start: a kept cluster gets the flags' nodes), then schedules
/// until the API goes away.
pub async fn run(client: kube::Client, nodes: Vec<(String, NodePool)>) {
    let node_api: Api<Node> = Api::all(client.clone());
    let pp = PatchParams::apply("quotagate-node-agent").force();
    for (i, (name, pool)) in nodes.iter().enumerate() {
        let obj = node_object(name, u32::try_from(i + 1).unwrap_or(u32::MAX), pool);
        loop {
            let made = node_api.patch(name, &pp, &Patch::Apply(&obj)).await;
            let status = match made {
                Ok(_) => {
                    node_api
                        .patch_status(
                            name,
                            &PatchParams::default(),
                            &Patch::Merge(json!({"status": obj["status"]})),
                        )
                        .await
                }
                Err(e) => Err(e),
            };
            match status {
                Ok(_) => break,
                Err(e) => {
                    tracing::warn!(node = %name, error = %e, "scheduler: registering the node failed; retrying");
                    tokio::time::sleep(RETRY).await;
                }
            }
        }
    }
    tracing::info!(nodes = nodes.len(), "scheduler: nodes registered");
    let ours: std::collections::HashSet<String> = nodes.iter().map(|(n, _)| n.clone()).collect();

    let changed = Arc::new(Notify::new());
    let (pods_r, pods_w) = reflector::store::<Pod>();
    let (nodes_r, nodes_w) = reflector::store::<Node>();
    let pods_stream = {
        let changed = changed.clone();
        reflector(
            pods_w,
            watcher(Api::<Pod>::all(client.clone()), watcher::Config::default()).default_backoff(),
        )
        .for_each(move |_| {
            changed.notify_one();
            async {}
        })
    };
    let nodes_stream = {
        let changed = changed.clone();
        reflector(
            nodes_w,
            watcher(node_api, watcher::Config::default()).default_backoff(),
        )
        .for_each(move |_| {
            changed.notify_one();
            async {}
        })
    };
    let schedule_loop = async {
        if pods_r.wait_until_ready().await.is_err() || nodes_r.wait_until_ready().await.is_err() {
            return;
        }
        let mut assumed: HashMap<String, String> = HashMap::new();
        loop {
            let pods = pods_r.state();
            // A binding seen (or its pod gone) is no longer assumed.
            assumed.retain(|key, _| pods.iter().any(|p| pod_key(p) == *key && bound_to(p).is_none()));
            let mut failed = false;
            // Only the nodes this cluster's agent is the kubelet of: a Node kept by --data-dir from an
            // earlier start with other flags, or made with kubectl, has nobody to run its pods.
            let mine: Vec<Arc<Node>> = nodes_r
                .state()
                .into_iter()
                .filter(|n| n.metadata.name.as_ref().is_some_and(|name| ours.contains(name)))
                .collect();
            for (pod, d) in pass(&pods, &mine, &assumed) {
                match write(&client, &pod, &d).await {
                    Ok(()) => {
                        if let Decision::Bind(node) = d {
                            assumed.insert(pod_key(&pod), node);
                        }
                    }
                    Err(e) => {
                        tracing::debug!(pod = %pod_key(&pod), error = %e, "scheduler: write failed; retrying");
                        failed = true;
                    }
                }
            }
            if failed {
                tokio::select! {
                    _ = changed.notified() => {}
                    _ = tokio::time::sleep(RETRY) => {}
                }
            } else {
                changed.notified().await;
            }
        }
    };
    tokio::select! {
        _ = pods_stream => {}
        _ = nodes_stream => {}
        _ = schedule_loop => {}
    }
}

/// The pod's conditions other than `PodScheduled`, as JSON: what a write of `PodScheduled` keeps.
fn conditions_but_scheduled(pod: &Pod) -> Vec<serde_json::Value> {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .filter(|c| c.type_ != "PodScheduled")
        .filter_map(|c| serde_json::to_value(c).ok())
        .collect()
}

async fn write(client: &kube::Client, pod: &Pod, d: &Decision) -> kube::Result<()> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let name = pod.metadata.name.as_deref().unwrap_or("");
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let pp = PatchParams::default();
    // The resourceVersion read makes both writes conditional: a pod changed since is looked at again.
    let rv = pod.metadata.resource_version.clone();
    match d {
        Decision::Bind(node) => {
            let bound = api
                .patch(
                    name,
                    &pp,
                    &Patch::Merge(json!({"metadata": {"resourceVersion": rv}, "spec": {"nodeName": node}})),
                )
                .await?;
            // What the binding subresource sets with the node. The node agent may start the pod
            // between the two writes, and a merge patch replaces the whole conditions list: an
            // unguarded list of PodScheduled alone erased its Ready, and the pod ran never Ready.
            // So the other conditions are kept, and the write is guarded by the bound pod's
            // version; a conflict means the agent wrote first, and its status says PodScheduled.
            let mut conditions = conditions_but_scheduled(&bound);
            conditions.insert(0, condition("PodScheduled", true, "", "", None));
            let written = api
                .patch_status(
                    name,
                    &pp,
                    &Patch::Merge(json!({
                        "metadata": {"resourceVersion": bound.metadata.resource_version},
                        "status": {"conditions": conditions},
                    })),
                )
                .await;
            match written {
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                other => {
                    other?;
                }
            }
        }
        Decision::Unschedulable { reason, message } => {
            let mut c = condition("PodScheduled", false, reason, message, None);
            // The transition time stays while the status does (`podutil.UpdatePodCondition`).
            if let Some((status, _, _, Some(at))) = scheduled_condition(pod)
                && status == "False"
            {
                c["lastTransitionTime"] = json!(at);
            }
            let mut others = conditions_but_scheduled(pod);
            others.insert(0, c);
            api.patch_status(
                name,
                &pp,
                &Patch::Merge(json!({"metadata": {"resourceVersion": rv}, "status": {"phase": "Pending", "conditions": others}})),
            )
            .await?;
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "scheduler_tests.rs"]
mod tests;
