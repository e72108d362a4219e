//! The configuration the admission core is built from: ClusterQueues, Cohorts and ResourceFlavors
//! taken into the core when their spec changes, dropped when they are gone; a ClusterQueue whose
//! admission checks are missing or inactive is taken as one that admits nothing more.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::collections::{BTreeMap, HashMap, HashSet};

use super::checks::CheckProblems;
use super::snapshot::{Snapshot, rv};
use crate::queue::{self, AdmissionCore};

/// What a configuration object's model is built from has changed when its spec generation (or the
/// object: a new uid) has. The resourceVersion also moves on every status write, and this loop
/// writes ClusterQueue status every cycle: keyed on it, each cycle rebuilt the quota tree and requeued
/// every parked workload. Objects without a generation fall back to the resourceVersion.
fn config_version(meta: &ObjectMeta) -> String {
    match (meta.generation, meta.uid.as_deref()) {
        (Some(g), Some(uid)) => format!("{uid}/{g}"),
        _ => rv(meta),
    }
}

/// The kinds of configuration object the core is built from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum ConfigKind {
    ClusterQueue,
    Cohort,
    ResourceFlavor,
}

impl ConfigKind {
    fn as_str(self) -> &'static str {
        match self {
            ConfigKind::ClusterQueue => "ClusterQueue",
            ConfigKind::Cohort => "Cohort",
            ConfigKind::ResourceFlavor => "ResourceFlavor",
        }
    }
}

/// A configuration object by kind and name.
type ConfigKey = (ConfigKind, String);

/// The version of each configuration object the core was last given.
#[derive(Default)]
pub(super) struct ConfigMirror {
    versions: HashMap<ConfigKey, String>,
}

/// Brings the core's ClusterQueues, Cohorts and flavors in line with the snapshot; conversion or
/// model errors land in `errors` under "<Kind> <name>" (logged by the shell). `unready`: the
/// ClusterQueues whose admission checks are missing or inactive, with what they lack.
pub(super) fn sync_config(
    mirror: &mut ConfigMirror,
    core: &mut AdmissionCore,
    errors: &mut BTreeMap<String, String>,
    snap: &Snapshot,
    unready: &HashMap<String, CheckProblems>,
) {
    let mut seen: HashSet<ConfigKey> = HashSet::new();
    for cq in &snap.cluster_queues {
        // A ClusterQueue whose admission checks are missing or inactive admits nothing (Kueue's
        // cache marks it pending): the core is handed it as one that admits nothing more, the
        // state it already has for a terminating queue. What the checks lack is part of the
        // version, so a check appearing or turning Active re-takes the queue (and requeues its
        // workloads).
        let problems = cq.metadata.name.as_ref().and_then(|n| unready.get(n));
        let meta = match problems {
            None => std::borrow::Cow::Borrowed(&cq.metadata),
            Some(problems) => {
                let mut m = cq.metadata.clone();
                m.resource_version = Some(format!("{}|checks:{:?}", config_version(&cq.metadata), problems));
                m.generation = None;
                std::borrow::Cow::Owned(m)
            }
        };
        sync_one(
            mirror,
            core,
            errors,
            &mut seen,
            ConfigKind::ClusterQueue,
            &meta,
            |core| {
                queue::ClusterQueueModel::try_from(cq.as_ref())
                    .and_then(|mut m| {
                        m.terminating |= problems.is_some();
                        core.upsert_cluster_queue(m)
                    })
                    .map_err(|e| e.to_string())
            },
        );
    }
    for c in &snap.cohorts {
        sync_one(
            mirror,
            core,
            errors,
            &mut seen,
            ConfigKind::Cohort,
            &c.metadata,
            |core| {
                queue::CohortModel::try_from(c.as_ref())
                    .and_then(|m| core.upsert_cohort(m))
                    .map_err(|e| e.to_string())
            },
        );
    }
    for f in &snap.flavors {
        sync_one(
            mirror,
            core,
            errors,
            &mut seen,
            ConfigKind::ResourceFlavor,
            &f.metadata,
            |core| {
                queue::FlavorModel::try_from(f.as_ref())
                    .map(|m| core.upsert_flavor(m))
                    .map_err(|e| e.to_string())
            },
        );
    }
    core.set_tas_cluster(tas_cluster(snap, errors));
    let gone: Vec<ConfigKey> = mirror
        .versions
        .keys()
        .filter(|k| !seen.contains(*k))
        .cloned()
        .collect();
    for (kind, name) in gone {
        mirror.versions.remove(&(kind, name.clone()));
        match kind {
            ConfigKind::ClusterQueue => core.delete_cluster_queue(&name),
            ConfigKind::Cohort => core.delete_cohort(&name),
            ConfigKind::ResourceFlavor => core.delete_flavor(&name),
        };
    }
}

/// The Topologies, Nodes and non-TAS pods' requests for the TAS flavors; empty while no flavor names
/// a topology, so Node changes (heartbeats included) cost nothing then. A Node that does not convert is left out, its
/// error kept under "Node <name>".
fn tas_cluster(snap: &Snapshot, errors: &mut BTreeMap<String, String>) -> queue::tas::TasCluster {
    errors.retain(|k, _| !k.starts_with("Node "));
    let tas = snap
        .flavors
        .iter()
        .any(|f| f.spec.as_ref().is_some_and(|s| s.topology_name.is_some()));
    if !tas {
        return queue::tas::TasCluster::default();
    }
    let (cluster, failed) = queue::convert::tas_cluster(
        snap.topologies.iter().map(|t| &**t),
        snap.nodes.iter().map(|n| &**n),
    );
    for (name, e) in failed {
        errors.insert(format!("Node {name}"), e.to_string());
    }
    cluster.with_non_tas(snap.non_tas.clone())
}

/// Takes one configuration object into the core when its version changed; a conversion or model
/// error is kept under "<Kind> <name>".
fn sync_one(
    mirror: &mut ConfigMirror,
    core: &mut AdmissionCore,
    errors: &mut BTreeMap<String, String>,
    seen: &mut HashSet<ConfigKey>,
    kind: ConfigKind,
    meta: &ObjectMeta,
    apply: impl FnOnce(&mut AdmissionCore) -> Result<(), String>,
) {
    let name = meta.name.clone().unwrap_or_default();
    let key = (kind, name.clone());
    seen.insert(key.clone());
    let version = config_version(meta);
    if mirror.versions.get(&key) == Some(&version) {
        return;
    }
    mirror.versions.insert(key, version);
    let label = format!("{} {name}", kind.as_str());
    match apply(core) {
        Ok(()) => {
            errors.remove(&label);
        }
        Err(e) => {
            errors.insert(label, e);
        }
    }
}
