//! KubeRay's `ray-operator/test/e2erayservice/` upgrade tests, ported (what is observable without a real
//! Ray: cluster names, conditions, Services, endpoints, and what each head's Serve was sent).

use super::*;

/// Creates `rs` on a harness started with `auto_start: false`, starts its first head, waits for Ready.
/// Returns the active cluster.
async fn ready(h: &Harness, rs: &RayService) -> String {
    let name = rs.name_any();
    create(h, rs).await;
    let got = h
        .wait_rs(&name, "a pending cluster", |rs| pending(rs).is_some())
        .await;
    let first = pending(&got).unwrap();
    start_head(h, &first);
    let got = h
        .wait_rs(&name, "Ready", |rs| is_true(rs, "Ready") && active(rs).is_some())
        .await;
    active(&got).unwrap()
}

/// KubeRay's `waitingForRayClusterSwitch`: UpgradeInProgress becomes True, the active cluster changes
/// (here once the test starts the new head), then UpgradeInProgress is False. Returns the new active.
async fn cluster_switch(h: &Harness, name: &str, old: &str) -> String {
    let rs = h
        .wait_rs(name, "UpgradeInProgress=True", |rs| {
            is_true(rs, "UpgradeInProgress")
        })
        .await;
    let next = eventually("a pending cluster", || async {
        let rs = h.services().get(name).await.unwrap();
        pending(&rs)
    })
    .await;
    assert_eq!(active(&rs).as_deref(), Some(old));
    start_head(h, &next);
    let old_name = old.to_string();
    let rs = h
        .wait_rs(name, "the switch", move |rs| {
            active(rs).is_some_and(|a| a != old_name)
        })
        .await;
    assert!(!is_true(&rs, "UpgradeInProgress"), "{:?}", rs.status);
    active(&rs).unwrap()
}

/// Source: `rayservice_ha_test.go` TestRayServiceZeroDowntimeUpgrade, its observable part (the Locust run
/// needs a real Ray): clearing `rayVersion` starts a zero-downtime upgrade that switches clusters.
#[test]
fn zero_downtime_upgrade_switches_clusters() {
    scenario(async {
        let h = Harness::start_admitted(false);
        let name = "test-rayservice";
        let old = ready(&h, &rayservice(name, "rayproject/ray:2.46.0")).await;
        h.patch_spec(name, json!({"rayClusterConfig": {"rayVersion": null}}))
            .await;
        let new = cluster_switch(&h, name, &old).await;
        assert_eq!(
            selector_cluster(&h, &format!("{name}-serve-svc")).await,
            Some(new)
        );
    });
}

/// Source: `rayservice_ha_test.go` TestRayServiceRayClusterDeletionDelaySeconds (with
/// `waitingForRayClusterSwitchWithDeletionDelay`): after the switch the old cluster stays for
/// `rayClusterDeletionDelaySeconds`, then is deleted within 5 s more; UpgradeInProgress is False.
#[test]
fn the_old_cluster_stays_for_the_deletion_delay() {
    scenario(async {
        let h = Harness::start_admitted(false);
        let name = "test-rayservice-deletion-delay";
        let delay = Duration::from_secs(3);
        let mut rs = rayservice(name, "rayproject/ray:2.46.0");
        rs.spec.ray_cluster_deletion_delay_seconds = Some(3);
        let old = ready(&h, &rs).await;
        h.patch_spec(name, json!({"rayClusterConfig": {"rayVersion": null}}))
            .await;
        cluster_switch(&h, name, &old).await;
        // Seen up to one poll (50 ms) after the switch: the old cluster must exist for the rest of the
        // delay; 200 ms are left for that uncertainty.
        let clusters = h.clusters();
        consistently(
            "the old cluster exists",
            delay - Duration::from_millis(200),
            || {
                let (clusters, old) = (clusters.clone(), old.clone());
                async move {
                    match clusters.get_opt(&old).await {
                        Ok(Some(rc)) if rc.metadata.deletion_timestamp.is_none() => Ok(()),
                        other => Err(format!(
                            "{:?}",
                            other.map(|o| o.map(|rc| rc.metadata.deletion_timestamp))
                        )),
                    }
                }
            },
        )
        .await;
        let start = tokio::time::Instant::now();
        eventually("the old cluster deleted", || async {
            h.clusters().get_opt(&old).await.unwrap().is_none().then_some(())
        })
        .await;
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "deleted {:?} after the delay",
            start.elapsed()
        );
        assert!(!is_true(
            &h.services().get(name).await.unwrap(),
            "UpgradeInProgress"
        ));
    });
}

/// Source: `rayservice_in_place_update_test.go` TestUpdateServeConfigAndRayClusterSpec: a change to both
/// the Serve config and the head's env is a zero-downtime upgrade; the new config goes to the new cluster
/// only, the old cluster (kept by a finalizer) still runs the old one.
#[test]
fn serve_config_and_cluster_spec_changed_together_upgrade() {
    scenario(async {
        let h = Harness::start_admitted(false);
        let name = "rayservice-sample";
        let old = ready(&h, &rayservice(name, "rayproject/ray:2.46.0")).await;
        assert_eq!(served_price(&h, &old).await, Some(3));
        add_finalizer(&h, &old, "no-existed-finalizer").await;
        let rs = h.services().get(name).await.unwrap();
        let mut head = serde_json::to_value(&rs.spec.ray_cluster_config.head_group_spec).unwrap();
        head["template"]["spec"]["containers"][0]["env"] = json!([{"name": "FOO", "value": "BAR"}]);
        h.patch_spec(
            name,
            json!({"serveConfigV2": serve_config("fruit.deployment_graph", 456), "rayClusterConfig": {"headGroupSpec": head}}),
        )
        .await;
        let new = cluster_switch(&h, name, &old).await;
        let price = eventually("the new config on the new cluster", || async {
            served_price(&h, &new).await.filter(|p| *p == 456)
        })
        .await;
        assert_eq!(price, 456);
        assert_eq!(
            served_price(&h, &old).await,
            Some(3),
            "the old cluster is not updated"
        );
        assert_eq!(h.sim.put_count(&endpoint_of(&old)), 1);
        remove_finalizer(&h, &old, "no-existed-finalizer").await;
    });
}

/// Source: `rayservice_in_place_update_test.go` TestUpdateServeConfigAndRayClusterSpecWithUpgradeDisabled:
/// with `upgradeStrategy.type: None` the same two changes apply the new Serve config in place and leave
/// the RayCluster as it was (no new cluster, the head's env unchanged).
#[test]
fn with_upgrade_strategy_none_only_the_serve_config_changes() {
    scenario(async {
        let h = Harness::start_admitted(false);
        let name = "rayservice-sample";
        let mut rs = rayservice(name, "rayproject/ray:2.46.0");
        rs.spec.upgrade_strategy = Some(serde_json::from_value(json!({"type": "None"})).unwrap());
        let old = ready(&h, &rs).await;
        let before = h.clusters().get(&old).await.unwrap();
        let rs = h.services().get(name).await.unwrap();
        let mut head = serde_json::to_value(&rs.spec.ray_cluster_config.head_group_spec).unwrap();
        head["template"]["spec"]["containers"][0]["env"] = json!([{"name": "FOO", "value": "BAR"}]);
        h.patch_spec(
            name,
            json!({"serveConfigV2": serve_config("fruit.deployment_graph", 456), "rayClusterConfig": {"headGroupSpec": head}}),
        )
        .await;
        eventually("the new config in place", || async {
            served_price(&h, &old).await.filter(|p| *p == 456)
        })
        .await;
        let rs = h
            .wait_rs(name, "Ready on the new config", |rs| is_true(rs, "Ready"))
            .await;
        assert_eq!((active(&rs), pending(&rs)), (Some(old.clone()), None));
        assert_eq!(h.cluster_names().await, vec![old.clone()]);
        let after = h.clusters().get(&old).await.unwrap();
        assert_eq!(after.spec, before.spec, "the RayCluster is not changed");
        assert_eq!(after.metadata.generation, before.metadata.generation);
    });
}

/// Source: `rayservice_upgrade_test.go` TestOldHeadPodFailDuringUpgrade: while the new cluster is not
/// ready, the old head's proxy stops answering: its `ray.io/serve` label goes `false`, UpgradeInProgress
/// is True and Ready False (no endpoint left); once the new cluster serves, the serve Service has one
/// endpoint that is not the old head, UpgradeInProgress is False and Ready True.
#[test]
fn old_head_pod_fails_during_upgrade() {
    scenario(async {
        let h = Harness::start_admitted(false);
        let name = "rayservice-sample";
        let svc = format!("{name}-serve-svc");
        let old = ready(&h, &head_only(name)).await;
        let targets = eventually("one serve endpoint", || async {
            let t = ready_targets(&h, &svc).await;
            (t.len() == 1).then_some(t)
        })
        .await;
        let (old_head, old_uid) = targets[0].clone();

        let rs = h.services().get(name).await.unwrap();
        let mut head = serde_json::to_value(&rs.spec.ray_cluster_config.head_group_spec).unwrap();
        head["template"]["spec"]["initContainers"] = json!([{"name": "sleep", "image": "rayproject/ray:2.46.0", "command": ["/bin/bash"], "args": ["-c", "sleep 30"]}]);
        h.patch_spec(name, json!({"rayClusterConfig": {"headGroupSpec": head}}))
            .await;
        let pod = head_pod(&h, &old).await.expect("the old head pod");
        assert_eq!(pod.name_any(), old_head);
        assert!(pod.status.as_ref().and_then(|s| s.pod_ip.as_ref()).is_some());
        assert_eq!(head_serve_label(&h, &old).await.as_deref(), Some("true"));

        h.sim.set_reachable(&endpoint_of(&old), false);
        eventually("the old head's ray.io/serve=false", || async {
            (head_serve_label(&h, &old).await.as_deref() == Some("false")).then_some(())
        })
        .await;
        h.wait_rs(name, "UpgradeInProgress=True", |rs| {
            is_true(rs, "UpgradeInProgress")
        })
        .await;
        h.wait_rs(name, "Ready=False with no endpoint", |rs| !is_true(rs, "Ready"))
            .await;

        let next = eventually("a pending cluster", || async {
            pending(&h.services().get(name).await.unwrap())
        })
        .await;
        start_head(&h, &next);
        let new_targets = eventually("one serve endpoint, not the old head", || async {
            let t = ready_targets(&h, &svc).await;
            (t.len() == 1 && t[0].0 != old_head && t[0].1 != old_uid).then_some(t)
        })
        .await;
        assert_eq!(new_targets.len(), 1);
        h.wait_rs(name, "UpgradeInProgress=False", |rs| {
            !is_true(rs, "UpgradeInProgress")
        })
        .await;
        h.wait_rs(name, "Ready=True", |rs| is_true(rs, "Ready")).await;
    });
}
