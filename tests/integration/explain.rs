//! `quotagate explain` end to end: the real manager admits against the embedded server, keeps the
//! scheduler's record of a pending workload, and serves it through the server's aggregated mount;
//! the CLI's own function reads it. The record must name the shortfall and the holder.

use std::time::Duration;

use kube::api::DeleteParams;
use quotagate::admission::Explanations;
use quotagate::wiring::manager::{ManagerOptions, embedded_server};

use super::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_names_the_shortfall_and_the_holder_until_admitted() {
    let server = embedded_server();
    let explanations = Explanations::default();
    server.aggregated.mount(
        quotagate::wiring::explain::GROUP,
        quotagate::wiring::explain::router(explanations.clone()),
    );
    let mut c = Cluster::start_on(server, Limits::default()).await;
    if let Some(m) = c.manager.take() {
        m.stop().await;
    }
    let opts = ManagerOptions {
        leader_election: false,
        resync: Duration::from_millis(300),
        explanations: explanations.clone(),
        ..Default::default()
    };
    c.manager = Some(Manager::start_opts(c.client.clone(), opts));
    c.simple("cq", "lq", "4").await;
    c.workload("holder", "lq", 0, "3").await;
    wait_for(&c.workloads(), "holder", "admitted", reserved).await;
    c.workload("waiting", "lq", 0, "2").await;
    wait_for(&c.workloads(), "waiting", "pending for quota", |w| {
        condition(w, "QuotaReserved").is_some_and(|(s, r, _)| s == "False" && r == "WaitingForQuota")
    })
    .await;

    let e = quotagate::cli::explain::record(&c.client, "default", "waiting")
        .await
        .unwrap()
        .expect("a record");
    assert_eq!(e.reason, "WaitingForQuota");
    assert_eq!(e.cluster_queue, "cq");
    assert_eq!(e.position_in_cluster_queue, Some(0));
    let cpu = e.podsets[0]
        .resources
        .iter()
        .find(|r| r.resource == "cpu")
        .unwrap();
    let f = &cpu.flavors[0];
    assert_eq!(
        (
            cpu.requested.as_str(),
            f.nominal.as_str(),
            f.used.as_str(),
            f.available.as_str()
        ),
        ("2", "4", "3", "1")
    );
    assert_eq!(e.holders[0].workload, "default/holder");
    let text = quotagate::cli::explain::run(
        &c.client,
        quotagate::cli::explain::Kind::Workload,
        "default",
        "waiting",
    )
    .await
    .unwrap();
    assert!(
        text.contains("default/holder") && text.contains("WaitingForQuota"),
        "{text}"
    );

    c.workloads()
        .delete("holder", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(&c.workloads(), "waiting", "admitted", reserved).await;
    assert!(
        explanations
            .get(&quotagate::queue::WorkloadKey::new("default", "waiting"))
            .is_none(),
        "dropped once admitted"
    );
    assert!(
        quotagate::cli::explain::record(&c.client, "default", "waiting")
            .await
            .unwrap()
            .is_none()
    );
    let text = quotagate::cli::explain::run(
        &c.client,
        quotagate::cli::explain::Kind::Workload,
        "default",
        "waiting",
    )
    .await
    .unwrap();
    assert!(text.contains("admitted by ClusterQueue cq"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_rayservice_shows_the_upgrade_the_gate_and_the_waiting_slice() {
    use super::gated::{Scenario, pending, poll, service};
    // 3 CPU: the service (head 1 + worker 1) is admitted; the blue/green upgrade needs 4 and waits.
    let s = Scenario::start("3", 4000).await;
    let a = s.serving(service("rs", "1", "2.46.0")).await;
    s.patch_version("rs", "2.47.0").await;
    let rs = s
        .wait_rs("rs", "a pending cluster", |r| pending(r).is_some())
        .await;
    let p = pending(&rs).unwrap();
    let waiting = poll("the upgrade's slice to be refused quota", || async {
        s.workloads_of("rs")
            .await
            .into_iter()
            .find(|w| condition(w, "QuotaReserved").is_some_and(|(st, r, _)| st == "False" && r != "Pending"))
    })
    .await;
    let (_, reason, _) = condition(&waiting, "QuotaReserved").unwrap();
    let text = quotagate::cli::explain::run(
        &s.c.client,
        quotagate::cli::explain::Kind::Rayservice,
        "default",
        "rs",
    )
    .await
    .unwrap();
    assert!(
        text.contains(&format!("active cluster {a}, pending cluster {p}")),
        "{text}"
    );
    // Gate rows: CHILD GATED GROUP WANTS COVERS. The active cluster is covered, the pending one not.
    let row = |child: &str, group: &str| -> Vec<String> {
        text.lines()
            .find(|l| l.starts_with(child) && l.contains(group))
            .unwrap_or_else(|| panic!("no {child}/{group} row in {text}"))
            .split_whitespace()
            .map(String::from)
            .collect()
    };
    assert_eq!(row(&a, "head")[3..], ["1", "1"]);
    assert_eq!(row(&p, "head")[1..], ["true", "head", "1", "0"]);
    assert_eq!(row(&p, "workers")[3..], ["1", "0"]);
    assert!(
        text.contains("pending slice") && text.contains(&reason),
        "{reason}: {text}"
    );
    // Through the RayCluster, the same story.
    let via = quotagate::cli::explain::run(
        &s.c.client,
        quotagate::cli::explain::Kind::Raycluster,
        "default",
        &p,
    )
    .await
    .unwrap();
    assert!(via.contains("belongs to RayService rs"), "{via}");
}
