//! Serves the Ray operator's metrics (`rayservice::metrics`): RayCluster, RayService and RayJob watchers
//! keep stores for KubeRay's scrape-time gauges and feed every change, with the Workloads', to the gate
//! tracker. Reads only, so every replica serves them.

use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use kube::runtime::reflector::Store;
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;

use crate::admission::WorkloadEvents;
use crate::api::ray::{RayCluster, RayJob, RayService};
use crate::rayservice::metrics::{GateMetrics, render, render_jobs};

/// Reflects `api` into a store and hands each applied or deleted object to `on`.
fn watch<K>(api: Api<K>, tasks: &mut Vec<JoinHandle<()>>, on: impl Fn(&K, bool) + Send + 'static) -> Store<K>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    crate::admission::reflect_each(api, tasks, move |ev| match ev {
        Some(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => on(o, false),
        Some(watcher::Event::Delete(o)) => on(o, true),
        _ => {}
    })
}

/// Starts the watchers; the returned closure renders the series for `/metrics`.
pub fn spawn(
    client: &Client,
    workload_events: &WorkloadEvents,
    tasks: &mut Vec<JoinHandle<()>>,
) -> impl Fn() -> String + Send + Sync + 'static {
    let gate = Arc::new(GateMetrics::default());
    let g = gate.clone();
    let clusters = watch(
        Api::<RayCluster>::all(client.clone()),
        tasks,
        move |rc, deleted| {
            let mut t = g.tracker();
            if deleted {
                t.cluster_deleted(rc);
            } else {
                let o = t.cluster(rc, Instant::now());
                drop(t);
                g.record(o);
            }
        },
    );
    let g = gate.clone();
    let services = watch(
        Api::<RayService>::all(client.clone()),
        tasks,
        move |rs, deleted| {
            if !deleted {
                let o = g.tracker().service(rs);
                g.record(o);
            }
        },
    );
    let g = gate.clone();
    // The RayServices' workload slices, from the manager's shared Workload watch.
    let slices = workload_events.whole(|wl| wl.owner_references().iter().any(|o| o.kind == "RayService"));
    tasks.push(tokio::spawn(async move {
        futures::pin_mut!(slices);
        while let Some(Ok(wl)) = slices.next().await {
            g.tracker().workload(&wl, Instant::now());
        }
    }));
    let jobs = watch(Api::<RayJob>::all(client.clone()), tasks, |_, _| {});
    move || {
        let cs: Vec<RayCluster> = clusters.state().iter().map(|c| (**c).clone()).collect();
        let ss: Vec<RayService> = services.state().iter().map(|s| (**s).clone()).collect();
        let js: Vec<RayJob> = jobs.state().iter().map(|j| (**j).clone()).collect();
        let mut text = render(&cs, &ss, jiff::Timestamp::now());
        text.push_str(&render_jobs(&js));
        text.push_str(&gate.render());
        text
    }
}
