//! The cycle breaker end to end (issue 45 item 1's safety net, `queue/wait_cycle.rs`,
//! `admission/cycle_breaker.rs`): a wait-for cycle between two upgrades that the banker's
//! check could not prevent, because the quota was cut after it had admitted both first steps. Each
//! upgrade then waits for quota the other's admitted slice holds. Once the cycle has lasted
//! `--cycle-break-after` (3 s here; 60 s by default), the growth of the younger upgrade (equal
//! priorities) is released: `GrowthPreempted=True` with reason `WaitForCycle` on its slice and a
//! Warning on its RayService; its old cluster keeps serving, the other upgrade completes, and then
//! the released one retries and completes. No peer has this (Kueue admits a RayService whole).

use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
use quotagate::api::kueue::{ClusterQueue, Workload};
use serde_json::json;

use super::banker::{cluster_config, service, wait_upgrades_complete};
use super::gated::{Scenario, cq_cpu, poll};
use super::reclaim_gap::{GapWatch, growth_event};
use super::support::*;

/// The banker's fixture (tests/integration/banker.rs): each service 6.5 CPU at steady state, 11
/// with its head and first step, 10 once the old half is gone, 13 with the new cluster whole, 7.5
/// when done. 25 CPU let the banker admit both first steps (22, and 3 free let either finish);
/// cut to 21 after that, both old halves go (20) and neither next grow (3 each) fits in the 1
/// free: a cycle. Released, one upgrade shrinks to its old cluster (5.5), the other finishes
/// (13 + 5.5), then the released one does (13 + 7.5 = 20.5).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_for_cycle_between_upgrades_releases_the_younger_ones_growth_and_both_complete() {
    let mut s = Scenario::start("25", 25000).await;
    s.c.restart_manager_with(|o| o.cycle_break_after = Duration::from_secs(3))
        .await;
    let names = ["big-a", "big-b"];
    let mut old = Vec::new();
    for n in names {
        old.push(s.serving(service(n, "4", "1")).await);
    }
    s.wait_cq_cpu(13000).await;
    let watches = [
        GapWatch::start(s.services(), "big-a"),
        GapWatch::start(s.services(), "big-b"),
    ];
    for n in names {
        let patch = json!({"spec": {"rayClusterConfig": cluster_config("1", "3")}});
        s.services()
            .patch(n, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
    }
    // Both first steps admitted: cut the quota before either old half goes.
    let cqs: Api<ClusterQueue> = Api::all(s.c.client.clone());
    poll("both first steps admitted (22 CPU)", || async {
        (cq_cpu(&cqs.get("cq").await.unwrap()) == 22000).then_some(())
    })
    .await;
    s.set_quota("21").await;
    // The cycle breaker releases one upgrade's growth, with its reason.
    let (released, message) = poll("GrowthPreempted=True with reason WaitForCycle", || async {
        let wls = s.c.workloads().list(&Default::default()).await.unwrap().items;
        wls.iter().find_map(|w: &Workload| {
            let (st, reason, msg) = condition(w, "GrowthPreempted")?;
            let owner = w
                .metadata
                .owner_references
                .as_ref()?
                .iter()
                .find(|o| o.kind == "RayService")?
                .name
                .clone();
            (st == "True" && reason == "WaitForCycle").then_some((owner, msg))
        })
    })
    .await;
    assert!(
        message.contains("waited for each other's quota for 3 s"),
        "{message}"
    );
    let note = growth_event(&s, &released).await;
    assert!(note.contains("(WaitForCycle)"), "{note}");
    // Both upgrades complete, their old clusters serving until then.
    wait_upgrades_complete(
        &s,
        &names,
        &old,
        &format!("after the cycle was broken ({released} released)"),
    )
    .await;
    for w in &watches {
        w.assert_no_gap();
    }
    for o in &old {
        s.wait_gone(o).await;
    }
    s.wait_cq_cpu(15000).await;
    s.inv.assert_clean();
    s.c.quota.assert_safe();
}
