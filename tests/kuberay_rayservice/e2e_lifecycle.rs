//! KubeRay's `ray-operator/test/e2erayservice/` lifecycle tests, ported: auth, initializing timeout,
//! redeploy, suspend, validation and managedBy.

use super::*;

/// Source: `rayservice_auth_test.go` TestRayServiceAuthToken: with `authOptions.mode: token` the
/// RayService becomes Ready, names its active cluster, the head's Ray container gets `RAY_AUTH_MODE=token`
/// and `RAY_AUTH_TOKEN` from a Secret named after the cluster (key `auth_token`), and it has endpoints.
#[test]
fn rayservice_with_token_auth() {
    scenario(async {
        let h = Harness::start_admitted(true);
        let name = "rayservice-auth";
        let mut rs = rayservice(name, "rayproject/ray:2.52.0");
        rs.spec.ray_cluster_config.ray_version = Some("2.52.0".into());
        rs.spec.ray_cluster_config.auth_options =
            Some(serde_json::from_value(json!({"mode": "token"})).unwrap());
        create(&h, &rs).await;
        let rs = h
            .wait_rs(name, "Ready", |rs| is_true(rs, "Ready") && active(rs).is_some())
            .await;
        let cluster = active(&rs).unwrap();
        let head = head_pod(&h, &cluster).await.expect("the head pod");
        let container = &head.spec.as_ref().unwrap().containers[0];
        let env = |n: &str| container.env.iter().flatten().find(|e| e.name == n).cloned();
        assert_eq!(
            env("RAY_AUTH_MODE").and_then(|e| e.value).as_deref(),
            Some("token")
        );
        let token = env("RAY_AUTH_TOKEN").expect("RAY_AUTH_TOKEN");
        let key_ref = token
            .value_from
            .and_then(|v| v.secret_key_ref)
            .expect("from a Secret");
        assert!(key_ref.name.contains(&cluster), "{}", key_ref.name);
        assert_eq!(key_ref.key, "auth_token");
        assert!(endpoints(&rs) > 0);
    });
}

fn with_timeout(mut rs: RayService, timeout: &str) -> RayService {
    let annotation = quotagate::api::ray::constants::ANNOTATION_INITIALIZING_TIMEOUT;
    rs.metadata.annotations = Some([(annotation.to_string(), timeout.to_string())].into());
    rs
}

/// Source: `rayservice_initializing_timeout_test.go` TestRayServiceBecomesReadyBeforeTimeout: with a
/// generous `ray.io/initializing-timeout` the RayService becomes Ready, not InitializingTimeout.
#[test]
fn rayservice_becomes_ready_before_the_timeout() {
    scenario(async {
        let h = Harness::start_admitted(true);
        let name = "rayservice-sample";
        let created = create(
            &h,
            &with_timeout(rayservice(name, "rayproject/ray:2.46.0"), "10m"),
        )
        .await;
        assert_eq!(created.annotations()["ray.io/initializing-timeout"], "10m");
        let rs = h.wait_rs(name, "Ready", |rs| is_true(rs, "Ready")).await;
        assert_ne!(cond(&rs, "Ready").unwrap().reason, "InitializingTimeout");
    });
}

/// Source: `rayservice_initializing_timeout_test.go` TestRayServiceInitializingTimeoutTerminalFailure: a
/// service whose head never answers fails with Ready=False/InitializingTimeout and KubeRay's message,
/// its cluster names cleared and observedGeneration current; a later valid spec does not revive it.
/// Here the head never answers because the simulator never starts it (KubeRay uses an image that cannot
/// be pulled), and the timeout is 2 s instead of 10 s. KubeRay expects observedGeneration to be the
/// created generation + 1 because it adds its finalizer with a full Update that moves the generation on;
/// quotagate adds it with a metadata-only patch, so observedGeneration is the stored generation (README,
/// "Differences from KubeRay").
#[test]
fn initializing_timeout_is_a_terminal_failure() {
    scenario(async {
        let h = Harness::start_admitted(false);
        let name = "rayservice-timeout-test";
        let created = create(&h, &with_timeout(rayservice(name, "rayproject/ray:2.46.0"), "2s")).await;
        let initial_generation = created.metadata.generation.unwrap();
        let rs = h
            .wait_rs(name, "InitializingTimeout", |rs| {
                cond(rs, "Ready").is_some_and(|c| c.reason == "InitializingTimeout")
            })
            .await;
        let ready = cond(&rs, "Ready").unwrap();
        assert_eq!(ready.status, "False");
        assert!(
            ready
                .message
                .contains("RayService failed to become ready within the configured timeout"),
            "{}",
            ready.message
        );
        assert_eq!((active(&rs), pending(&rs)), (None, None));
        assert!(rs.finalizers().iter().any(|f| f == "ray.io/rayservice-finalizer"));
        assert_eq!(
            rs.metadata.generation,
            Some(initial_generation),
            "the finalizer write is no spec change"
        );
        assert_eq!(
            rs.status.as_ref().and_then(|s| s.observed_generation),
            rs.metadata.generation
        );

        // A valid update with a long timeout: the failure is terminal.
        let mut fixed = with_timeout(rayservice(name, "rayproject/ray:2.47.0"), "10m");
        fixed.metadata.resource_version = None;
        let patch = Patch::Merge(
            json!({"metadata": {"annotations": fixed.metadata.annotations}, "spec": fixed.spec}),
        );
        let updated = h
            .services()
            .patch(name, &PatchParams::default(), &patch)
            .await
            .unwrap();
        assert!(updated.metadata.generation.unwrap() > initial_generation);
        let svc = h.services();
        consistently("the terminal failure", Duration::from_secs(3), || {
            let svc = svc.clone();
            async move {
                let rs = svc
                    .get("rayservice-timeout-test")
                    .await
                    .map_err(|e| e.to_string())?;
                let ready = cond(&rs, "Ready").ok_or("no Ready")?;
                match (
                    ready.status.as_str(),
                    ready.reason.as_str(),
                    active(&rs),
                    pending(&rs),
                ) {
                    ("False", "InitializingTimeout", None, None) => Ok(()),
                    other => Err(format!("{other:?}")),
                }
            }
        })
        .await;
    });
}

/// Source: `rayservice_redeploy_test.go` TestRedeployRayServe: the head pod of a serving RayService is
/// deleted; the serve Service ends with one ready endpoint that is not the old head, and the RayService
/// is Ready again. The simulator plays the restarted head: a new Ray head with no Serve apps (no GCS
/// fault tolerance), so the operator must deploy the config again.
#[test]
fn redeploy_after_the_head_pod_is_deleted() {
    scenario(async {
        let h = Harness::start_admitted(true);
        let name = "rayservice-sample";
        let svc = format!("{name}-serve-svc");
        create(&h, &head_only(name)).await;
        let rs = h
            .wait_rs(name, "Ready", |rs| is_true(rs, "Ready") && endpoints(rs) > 0)
            .await;
        let cluster = active(&rs).unwrap();
        let old = head_pod(&h, &cluster).await.expect("the head pod");
        let old_uid = old.uid().unwrap();
        let pods_api: Api<Pod> = Api::namespaced(h.client.clone(), NS);
        pods_api
            .delete(&old.name_any(), &Default::default())
            .await
            .unwrap();
        h.sim.stop_cluster(&endpoint_of(&cluster));
        let uid = old_uid.clone();
        eventually("a new head pod running", || async {
            let p = head_pod(&h, &cluster).await?;
            let running = p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
            (p.uid().as_deref() != Some(uid.as_str()) && running).then_some(())
        })
        .await;
        start_head(&h, &cluster);
        eventually("one serve endpoint, not the old head", || async {
            let t = ready_targets(&h, &svc).await;
            (t.len() == 1 && t[0].1 != old_uid).then_some(())
        })
        .await;
        h.wait_rs(name, "Ready again", |rs| is_true(rs, "Ready")).await;
        assert_eq!(
            served_price(&h, &cluster).await,
            Some(3),
            "the config is deployed on the new head"
        );
    });
}

/// Source: `rayservice_suspend_test.go` TestRayServiceSuspendAtomic: once Suspending is True, flipping
/// `spec.suspend` back and forth does not unwind it while a RayCluster is held by a finalizer; once
/// released, the cluster is deleted and the RayService comes back Ready on another cluster.
#[test]
fn suspend_is_atomic() {
    scenario(async {
        let h = Harness::start_admitted(true);
        let name = "rayservice-suspend-atomic";
        let blocker = "ray.io/test-suspend-block";
        create(&h, &rayservice(name, "rayproject/ray:2.46.0")).await;
        let rs = h
            .wait_rs(name, "Ready", |rs| is_true(rs, "Ready") && active(rs).is_some())
            .await;
        let original = active(&rs).unwrap();
        add_finalizer(&h, &original, blocker).await;
        h.patch_spec(name, json!({"suspend": true})).await;
        h.wait_rs(name, "Suspending=True", |rs| is_true(rs, "Suspending"))
            .await;
        let svc = h.services();
        for flip in [false, true] {
            h.patch_spec(name, json!({"suspend": flip})).await;
            consistently("Suspending=True", Duration::from_secs(1), || {
                let svc = svc.clone();
                async move {
                    let rs = svc
                        .get("rayservice-suspend-atomic")
                        .await
                        .map_err(|e| e.to_string())?;
                    is_true(&rs, "Suspending")
                        .then_some(())
                        .ok_or(format!("{:?}", cond(&rs, "Suspending")))
                }
            })
            .await;
        }
        h.patch_spec(name, json!({"suspend": false})).await;
        remove_finalizer(&h, &original, blocker).await;
        eventually("the original cluster deleted", || async {
            h.clusters()
                .get_opt(&original)
                .await
                .unwrap()
                .is_none()
                .then_some(())
        })
        .await;
        let rs = h
            .wait_rs(name, "Ready again", |rs| {
                is_true(rs, "Ready") && active(rs).is_some()
            })
            .await;
        assert_ne!(active(&rs).unwrap(), original);
    });
}

/// Source: `rayservice_suspend_test.go` TestRayServiceCreatedSuspended: created with `suspend: true` it
/// reaches Suspended without ever creating a RayCluster or Service; `suspend: false` brings it up.
#[test]
fn created_suspended() {
    scenario(async {
        let h = Harness::start_admitted(true);
        let name = "rayservice-born-suspended";
        let mut rs = rayservice(name, "rayproject/ray:2.46.0");
        rs.spec.suspend = Some(true);
        create(&h, &rs).await;
        h.wait_rs(name, "Suspended=True", |rs| is_true(rs, "Suspended"))
            .await;
        let (svc, clusters, services) = (h.services(), h.clusters(), h.svcs());
        consistently("nothing created", Duration::from_secs(2), || {
            let (svc, clusters, services) = (svc.clone(), clusters.clone(), services.clone());
            async move {
                let lp =
                    ListParams::default().labels("ray.io/originated-from-cr-name=rayservice-born-suspended");
                let rcs = clusters
                    .list(&ListParams::default())
                    .await
                    .map_err(|e| e.to_string())?
                    .items;
                let svcs = services.list(&lp).await.map_err(|e| e.to_string())?.items;
                let rs = svc
                    .get("rayservice-born-suspended")
                    .await
                    .map_err(|e| e.to_string())?;
                match (rcs.len(), svcs.len(), active(&rs), pending(&rs), endpoints(&rs)) {
                    (0, 0, None, None, 0) => Ok(()),
                    other => Err(format!("{other:?}")),
                }
            }
        })
        .await;
        h.patch_spec(name, json!({"suspend": false})).await;
        let rs = h.wait_rs(name, "Ready", |rs| is_true(rs, "Ready")).await;
        assert!(!is_true(&rs, "Suspended"));
    });
}

/// Source: `rayservice_suspend_test.go` TestRayServiceSuspendDuringUpgrade: a suspend while both clusters
/// exist deletes both and reaches Suspended; on resume the RayService is Ready on the upgraded spec.
/// KubeRay appends `-upgrade` to rayVersion; here it moves to 2.47.0, and the check is on the cluster.
#[test]
fn suspend_during_an_upgrade() {
    scenario(async {
        let h = Harness::start_admitted(false);
        let name = "rayservice-suspend-upgrade";
        create(&h, &rayservice(name, "rayproject/ray:2.46.0")).await;
        let rs = h
            .wait_rs(name, "a pending cluster", |rs| pending(rs).is_some())
            .await;
        start_head(&h, &pending(&rs).unwrap());
        h.wait_rs(name, "Ready", |rs| is_true(rs, "Ready") && active(rs).is_some())
            .await;
        h.patch_spec(name, json!({"rayClusterConfig": {"rayVersion": "2.47.0"}}))
            .await;
        let rs = h
            .wait_rs(name, "a pending cluster", |rs| pending(rs).is_some())
            .await;
        let next = pending(&rs).unwrap();
        eventually("the pending RayCluster", || async {
            h.clusters().get_opt(&next).await.unwrap()
        })
        .await;
        h.patch_spec(name, json!({"suspend": true})).await;
        h.wait_rs(name, "Suspended=True", |rs| is_true(rs, "Suspended"))
            .await;
        eventually("no RayCluster left", || async {
            originated_clusters(&h, name).await.is_empty().then_some(())
        })
        .await;

        h.patch_spec(name, json!({"suspend": false})).await;
        let rs = h
            .wait_rs(name, "a new cluster named", |rs| {
                pending(rs).is_some() || active(rs).is_some()
            })
            .await;
        let resumed = pending(&rs).or_else(|| active(&rs)).unwrap();
        start_head(&h, &resumed);
        let rs = h
            .wait_rs(name, "Ready", |rs| is_true(rs, "Ready") && active(rs).is_some())
            .await;
        let rc = h.clusters().get(&active(&rs).unwrap()).await.unwrap();
        assert_eq!(rc.spec.ray_version.as_deref(), Some("2.47.0"));
    });
}

/// Source: `rayservice_validation_test.go` TestRayServiceValidation, "RayService name too long with 48
/// characters": the apply succeeds and the RayService reports Ready=False/ValidationFailed, as KubeRay
/// (webhook off, its default install) does, with `ValidateRayServiceMetadata`'s message; nothing is
/// created (its clusters' names would pass 53 characters). Admission on, as a quotagate install runs.
#[test]
fn a_48_character_name_is_stored_and_fails_validation() {
    scenario(async {
        let name = "a".repeat(48);
        let h = Harness::start_admitted(true);
        create(&h, &rayservice(&name, "rayproject/ray:2.46.0")).await;
        let rs = h
            .wait_rs(&name, "ValidationFailed", |rs| cond(rs, "Ready").is_some())
            .await;
        let ready = cond(&rs, "Ready").unwrap();
        assert_eq!(
            (
                ready.status.as_str(),
                ready.reason.as_str(),
                ready.message.as_str()
            ),
            (
                "False",
                "ValidationFailed",
                "The RayService metadata is invalid: RayService name should be no more than 47 characters"
            )
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(originated_clusters(&h, &name).await.is_empty());
    });
}

/// Source: `rayservice_validation_test.go` TestRayServiceManagedBy: `ray.io/kuberay-operator` is
/// reconciled to Ready; `kueue.x-k8s.io/multikueue` is left alone (no Ready condition, no cluster names,
/// no RayCluster) and cannot be changed; any other manager is refused as Invalid.
#[test]
fn managed_by() {
    scenario(async {
        let h = Harness::start_admitted(true);
        let mut ok = rayservice("rayservice-ok", "rayproject/ray:2.46.0");
        ok.spec.managed_by = Some("ray.io/kuberay-operator".into());
        create(&h, &ok).await;
        h.wait_rs("rayservice-ok", "Ready", |rs| is_true(rs, "Ready"))
            .await;

        let mut skip = rayservice("rayservice-skip", "rayproject/ray:2.46.0");
        skip.spec.managed_by = Some("kueue.x-k8s.io/multikueue".into());
        create(&h, &skip).await;
        let svc = h.services();
        consistently("not reconciled", Duration::from_secs(2), || {
            let svc = svc.clone();
            async move {
                let rs = svc.get("rayservice-skip").await.map_err(|e| e.to_string())?;
                let status = rs.status.as_ref();
                let service_status = status.and_then(|s| s.service_status);
                let not_running = service_status
                    .is_none_or(|s| s == quotagate::api::ray::rayservice::ServiceStatus::NotRunning);
                match (
                    cond(&rs, "Ready").is_none(),
                    not_running,
                    active(&rs),
                    pending(&rs),
                ) {
                    (true, true, None, None) => Ok(()),
                    other => Err(format!("{other:?}")),
                }
            }
        })
        .await;
        let flip = Patch::Merge(json!({"spec": {"managedBy": "ray.io/kuberay-operator"}}));
        h.services()
            .patch("rayservice-skip", &PatchParams::default(), &flip)
            .await
            .expect_err("managedBy is immutable");
        let got = h.services().get("rayservice-skip").await.unwrap();
        assert_eq!(got.spec.managed_by.as_deref(), Some("kueue.x-k8s.io/multikueue"));
        assert!(
            h.cluster_names()
                .await
                .iter()
                .all(|c| !c.starts_with("rayservice-skip"))
        );
        h.services()
            .delete("rayservice-skip", &Default::default())
            .await
            .unwrap();

        let mut fail = rayservice("rayservice-fail", "rayproject/ray:2.46.0");
        fail.spec.managed_by = Some("controller.com/not-supported".into());
        match h.services().create(&PostParams::default(), &fail).await {
            Err(kube::Error::Api(e)) => {
                assert_eq!(e.code, 422, "Invalid: {e:?}");
                assert!(e.message.contains("spec.managedBy"), "{}", e.message);
            }
            other => panic!("an unsupported managedBy must be refused as Invalid: {other:?}"),
        }
    });
}
