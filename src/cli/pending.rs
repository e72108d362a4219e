//! `quotagate pending-workloads (--cluster-queue NAME | --local-queue NAME [-n NS])`: the visibility
//! API's answer as a kubectl-like table, computed by the same code (`wiring::visibility`).

use kube::api::{Api, ListParams};
use serde_json::Value;

use crate::api::kueue::{LocalQueue, Workload};
use crate::cli::plan::render::table;
use crate::wiring::visibility::{DEFAULT_LIMIT, Pending, pending, summary};

/// Which queue to list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Queue {
    Cluster(String),
    Local { namespace: String, name: String },
}

/// The table for `all` pending workloads restricted to `queue`.
pub fn render(all: &[Pending], queue: &Queue) -> String {
    let s = match queue {
        Queue::Cluster(cq) => summary(all, |p| &p.cluster_queue == cq, 0, DEFAULT_LIMIT),
        Queue::Local { namespace, name } => summary(
            all,
            |p| {
                &p.local_queue == name && p.workload.metadata.namespace.as_deref() == Some(namespace.as_str())
            },
            0,
            DEFAULT_LIMIT,
        ),
    };
    let mut rows = vec![
        [
            "NAMESPACE",
            "NAME",
            "LOCALQUEUE",
            "PRIORITY",
            "POSITION IN CQ",
            "POSITION IN LQ",
        ]
        .map(String::from)
        .to_vec(),
    ];
    let cell = |v: &Value| v.as_str().map(String::from).unwrap_or_else(|| v.to_string());
    for i in s["items"].as_array().into_iter().flatten() {
        rows.push(vec![
            cell(&i["metadata"]["namespace"]),
            cell(&i["metadata"]["name"]),
            cell(&i["localQueueName"]),
            cell(&i["priority"]),
            cell(&i["positionInClusterQueue"]),
            cell(&i["positionInLocalQueue"]),
        ]);
    }
    if rows.len() == 1 {
        return "No pending workloads found.\n".into();
    }
    table(&rows)
}

pub async fn run(client: &kube::Client, queue: &Queue) -> Result<String, kube::Error> {
    let wls = Api::<Workload>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items;
    let lqs = Api::<LocalQueue>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items;
    Ok(render(&pending(&wls, &lqs), queue))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn wl(name: &str, lq: &str, priority: i32, ts: &str) -> Workload {
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ns", "uid": name, "creationTimestamp": ts},
            "spec": {"queueName": lq, "priority": priority, "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": []}}}]}}))
        .unwrap()
    }

    // Kueue's visibility tests order pending workloads by priority, then creation, and count
    // positions within the ClusterQueue and within each LocalQueue.
    #[test]
    fn positions_follow_priority_then_creation_per_queue() {
        let lqs: Vec<LocalQueue> = ["a", "b"]
            .iter()
            .map(|n| {
                serde_json::from_value(
                    json!({"metadata": {"name": n, "namespace": "ns"}, "spec": {"clusterQueue": "cq"}}),
                )
                .unwrap()
            })
            .collect();
        let wls = vec![
            wl("old-a", "a", 0, "2026-01-01T00:00:00Z"),
            wl("new-b", "b", 0, "2026-01-01T00:00:05Z"),
            wl("urgent-a", "a", 9, "2026-01-01T00:00:09Z"),
            wl("lost", "nowhere", 99, "2026-01-01T00:00:00Z"),
        ];
        let all = pending(&wls, &lqs);
        let t = render(&all, &Queue::Cluster("cq".into()));
        let names: Vec<(String, String, String)> = t
            .lines()
            .skip(1)
            .map(|l| {
                let c: Vec<&str> = l.split_whitespace().collect();
                (c[1].to_string(), c[4].to_string(), c[5].to_string())
            })
            .collect();
        let want = [("urgent-a", "0", "0"), ("old-a", "1", "1"), ("new-b", "2", "0")]
            .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()));
        assert_eq!(names, want);
        let lq = render(
            &all,
            &Queue::Local {
                namespace: "ns".into(),
                name: "b".into(),
            },
        );
        assert_eq!(lq.lines().count(), 2, "{lq}");
        assert_eq!(
            render(&all, &Queue::Cluster("other".into())),
            "No pending workloads found.\n"
        );
    }
}
