//! One definition of what a RayCluster's pods request: for generated specs, the requests of the pods the
//! RayCluster controller plans and builds add up to the job's podsets' requests times their counts
//! (Kueue's rules: containers summed, init containers max'd, pod overhead added).

use proptest::prelude::*;
use serde_json::json;

use crate::api::ray::RayCluster;
use crate::jobframework::GenericJob;
use crate::queue::amount::Amount;
use crate::queue::requests::{Requests, pod_requests, podset_total};
use crate::rayservice::cluster::BuildOptions;
use crate::rayservice::cluster::pod::{WorkerSlot, build_head_pod, build_worker_pod};
use crate::rayservice::clusterctl::pods::{GroupView, PodAction, PodInputs, plan_pods};

use super::raycluster::RayClusterJob;

fn add(into: &mut Requests, r: &Requests) {
    for (k, v) in r {
        let e = into.entry(k.clone()).or_insert(Amount::ZERO);
        *e += *v;
    }
}

fn nonzero(r: Requests) -> Requests {
    r.into_iter().filter(|(_, v)| *v != Amount::ZERO).collect()
}

fn resources(cpu_m: Option<u32>, mem_mi: Option<u32>) -> serde_json::Value {
    let mut req = serde_json::Map::new();
    if let Some(c) = cpu_m {
        req.insert("cpu".into(), json!(format!("{c}m")));
    }
    if let Some(m) = mem_mi {
        req.insert("memory".into(), json!(format!("{m}Mi")));
    }
    if req.is_empty() {
        json!({})
    } else {
        json!({"requests": req})
    }
}

prop_compose! {
    fn arb_container(prefix: &'static str)(cpu in proptest::option::of(0u32..4000), mem in proptest::option::of(0u32..8192), n in 0u8..3)
        -> serde_json::Value {
        json!({"name": format!("{prefix}{n}"), "image": "rayproject/ray:2.46.0", "resources": resources(cpu, mem)})
    }
}

prop_compose! {
    fn arb_template()(main in arb_container("ray"), extra in proptest::collection::vec(arb_container("side"), 0..2),
                      init in proptest::collection::vec(arb_container("init"), 0..2),
                      overhead in proptest::option::of(0u32..500)) -> serde_json::Value {
        let mut containers = vec![main];
        for (i, mut c) in extra.into_iter().enumerate() {
            c["name"] = json!(format!("side-{i}"));
            containers.push(c);
        }
        let init: Vec<_> = init.into_iter().enumerate().map(|(i, mut c)| { c["name"] = json!(format!("init-{i}")); c }).collect();
        let mut spec = json!({"containers": containers});
        if !init.is_empty() {
            spec["initContainers"] = json!(init);
        }
        if let Some(o) = overhead {
            spec["overhead"] = json!({"cpu": format!("{o}m")});
        }
        json!({"spec": spec})
    }
}

prop_compose! {
    fn arb_group(i: usize)(template in arb_template(), replicas in proptest::option::of(0i32..4), min in proptest::option::of(0i32..3),
                           hosts in proptest::option::of(1i32..3)) -> serde_json::Value {
        let mut g = json!({"groupName": format!("group-{i}"), "template": template, "rayStartParams": {}});
        if let Some(r) = replicas { g["replicas"] = json!(r); }
        if let Some(m) = min { g["minReplicas"] = json!(m); g["maxReplicas"] = json!(m + 3); }
        if let Some(h) = hosts { g["numOfHosts"] = json!(h); }
        g
    }
}

prop_compose! {
    fn arb_cluster()(head in arb_template(), g0 in arb_group(0), g1 in arb_group(1), groups in 0usize..3,
                     autoscaling in any::<bool>(), scaler in proptest::option::of((1u32..2000, 1u32..2048))) -> RayCluster {
        let workers: Vec<_> = [g0, g1].into_iter().take(groups).collect();
        let mut spec = json!({"headGroupSpec": {"template": head, "rayStartParams": {}}, "workerGroupSpecs": workers});
        if autoscaling {
            spec["enableInTreeAutoscaling"] = json!(true);
            if let Some((c, m)) = scaler {
                spec["autoscalerOptions"] = json!({"resources": resources(Some(c), Some(m))});
            }
        }
        serde_json::from_value(json!({"apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": "rc", "namespace": "default", "uid": "u"}, "spec": spec})).unwrap()
    }
}

/// What the controller's pods request, summed over the pods it plans for an empty cluster.
fn planned_pod_requests(rc: &RayCluster) -> Requests {
    let opts = BuildOptions::default();
    let inputs = PodInputs {
        autoscaling: rc.spec.autoscaling_enabled(),
        groups: GroupView::of(rc),
        ..Default::default()
    };
    let mut total = Requests::new();
    for action in plan_pods(&inputs) {
        match action {
            PodAction::CreateHead => {
                let pod = build_head_pod(rc, &opts).unwrap();
                add(
                    &mut total,
                    &pod_requests("head", pod.spec.as_ref().unwrap()).unwrap(),
                );
            }
            PodAction::CreateWorkers { group, workers } => {
                for w in workers {
                    let slot = WorkerSlot {
                        replica_index: w.replica_index,
                        host_index: w.host_index,
                        replica_name: format!("{group}-x"),
                    };
                    let pod = build_worker_pod(rc, &group, &slot, &opts).unwrap();
                    add(
                        &mut total,
                        &pod_requests("worker", pod.spec.as_ref().unwrap()).unwrap(),
                    );
                }
            }
            other => panic!("an empty cluster plans only creations, got {other:?}"),
        }
    }
    total
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn podsets_request_what_the_pods_request(rc in arb_cluster()) {
        let mut from_podsets = Requests::new();
        for ps in RayClusterJob::new(rc.clone()).pod_sets().unwrap() {
            let per_pod = pod_requests("podset", ps.template.spec.as_ref().unwrap()).unwrap();
            add(&mut from_podsets, &podset_total(&per_pod, i64::from(ps.count())));
        }
        prop_assert_eq!(nonzero(from_podsets), nonzero(planned_pod_requests(&rc)));
    }
}

mod demand_and_gate {
    use std::collections::BTreeMap;

    use serde_json::json;

    use crate::api::kueue::PodSet;
    use crate::api::ray::RayCluster;
    use crate::jobframework::interface::DemandChange;
    use crate::rayservice::cluster::BuildOptions;
    use crate::rayservice::job::demand::{
        ChildDemand, LivePods, allowed_pods, at_least_live, child_demand, compare, covers, podsets,
    };

    /// A child with a head of `head_cpu` and `workers` workers of 1 CPU, image tag `tag`.
    fn child(name: &str, head_cpu: &str, workers: i32, tag: &str) -> RayCluster {
        let c = |n: &str, cpu: &str| json!({"name": n, "image": format!("rayproject/ray:{tag}"), "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}});
        serde_json::from_value(json!({
            "apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [c("ray-head", head_cpu)]}}},
                     "workerGroupSpecs": [{"groupName": "small", "replicas": workers, "minReplicas": 0, "maxReplicas": 9, "rayStartParams": {},
                                           "template": {"spec": {"containers": [c("ray-worker", "1")]}}}]}
        }))
        .unwrap()
    }

    fn demand(children: &[RayCluster]) -> Vec<ChildDemand> {
        children
            .iter()
            .map(|c| child_demand(c, &BuildOptions::default()).unwrap())
            .collect()
    }

    fn counts(ps: &[PodSet]) -> Vec<(String, i32)> {
        ps.iter().map(|p| (p.name.clone().unwrap(), p.count())).collect()
    }

    #[test]
    fn an_image_bump_stays_one_podset_per_group_with_counts_summed() {
        let d = demand(&[child("a", "2", 1, "2.46.0"), child("b", "2", 1, "2.47.0")]);
        let ps = podsets(&d).unwrap();
        assert_eq!(counts(&ps), vec![("head".into(), 2), ("small".into(), 2)]);
    }

    #[test]
    fn a_resized_head_is_a_podset_of_its_own_with_its_own_requests() {
        let d = demand(&[child("a", "2", 1, "2.46.0"), child("b", "3", 1, "2.46.0")]);
        let ps = podsets(&d).unwrap();
        let names: Vec<String> = ps.iter().map(|p| p.name.clone().unwrap()).collect();
        assert_eq!(names.len(), 3, "{names:?}");
        assert!(
            names[0].starts_with("head-") && names[2].starts_with("head-") && names[0] != names[2],
            "{names:?}"
        );
        assert_eq!(names[1], "small");
        assert_eq!(counts(&ps).iter().map(|c| c.1).collect::<Vec<_>>(), vec![1, 2, 1]);
    }

    #[test]
    fn compare_classifies_growth_shrink_and_pending_changes() {
        let one = podsets(&demand(&[child("a", "2", 1, "x")])).unwrap();
        let two = podsets(&demand(&[child("a", "2", 1, "x"), child("b", "2", 1, "y")])).unwrap();
        let resized = podsets(&demand(&[child("a", "2", 1, "x"), child("b", "3", 1, "x")])).unwrap();
        assert_eq!(compare(&one, &one, true), DemandChange::Same);
        assert_eq!(
            compare(&two, &one, true),
            DemandChange::Grow,
            "a second cluster needs a slice"
        );
        assert_eq!(
            compare(&resized, &one, true),
            DemandChange::Grow,
            "a new shape needs a slice"
        );
        match compare(&one, &two, true) {
            DemandChange::PodSets(ps) => {
                assert_eq!(counts(&ps), vec![("head".into(), 1), ("small".into(), 1)])
            }
            other => panic!("old cluster gone: shrink in place, got {other:?}"),
        }
        // The new shape alone, against the slice holding both shapes: kept podsets, the old one at 0.
        let only_new = podsets(&demand(&[child("b", "3", 1, "x")])).unwrap();
        match compare(&only_new, &resized, true) {
            DemandChange::PodSets(ps) => {
                assert_eq!(ps.len(), 3);
                assert_eq!(ps.iter().map(|p| p.count()).collect::<Vec<_>>(), vec![0, 1, 1]);
            }
            other => panic!("expected a shrink keeping the podsets, got {other:?}"),
        }
        assert_eq!(
            compare(&two, &one, false),
            DemandChange::PodSets(two.clone()),
            "pending: taken as is"
        );
        assert_eq!(compare(&one, &one, false), DemandChange::Same);
    }

    /// Found by the seeded chaos runs: a spec change while the first cluster is still pending makes a
    /// new pending cluster and leaves the first one dangling with its pods running. Both were made in
    /// the same second, and by name the new one came first, so the slice's coverage went to it while
    /// the dangling cluster's pods still ran (I2). The pending cluster now always comes last.
    #[test]
    fn the_pending_cluster_comes_after_a_dangling_one_made_in_the_same_second() {
        use crate::rayservice::job::rayservice::children_in_gate_order;
        let rs: crate::api::ray::RayService = serde_json::from_value(json!({
            "apiVersion": "ray.io/v1", "kind": "RayService",
            "metadata": {"name": "svc", "namespace": "default", "uid": "u1"},
            "spec": {"rayClusterConfig": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": []}}}}},
            "status": {"pendingServiceStatus": {"rayClusterName": "svc-aaaaa"}}
        }))
        .unwrap();
        let owned = |name: &str| {
            let mut c = child(name, "1", 1, "x");
            c.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                "2026-01-01T00:00:00Z".parse().unwrap(),
            ));
            c.metadata.owner_references = Some(vec![
                k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                    api_version: "ray.io/v1".into(),
                    kind: "RayService".into(),
                    name: "svc".into(),
                    uid: "u1".into(),
                    controller: Some(true),
                    ..Default::default()
                },
            ]);
            c
        };
        let order = |rs: &crate::api::ray::RayService| -> Vec<String> {
            children_in_gate_order(rs, vec![owned("svc-aaaaa"), owned("svc-zzzzz")])
                .iter()
                .map(|c| c.metadata.name.clone().unwrap())
                .collect()
        };
        assert_eq!(
            order(&rs),
            vec!["svc-zzzzz", "svc-aaaaa"],
            "the dangling cluster first, the pending one last"
        );
        let mut serving = rs.clone();
        serving.status = serde_json::from_value(json!({"activeServiceStatus": {"rayClusterName": "svc-zzzzz"}, "pendingServiceStatus": {"rayClusterName": "svc-aaaaa"}})).unwrap();
        assert_eq!(
            order(&serving),
            vec!["svc-zzzzz", "svc-aaaaa"],
            "the active cluster first"
        );

        // Seed 26: two dangling clusters made within one second (each upgrade left the previous
        // pending one behind); the older one runs pods and keeps its coverage, whatever the names.
        let stamped = |name: &str, at: &str| {
            let mut c = owned(name);
            c.metadata
                .annotations
                .get_or_insert_with(Default::default)
                .insert(
                    crate::api::ray::constants::ANNOTATION_CREATED_AT.into(),
                    at.into(),
                );
            c
        };
        let mut third = rs.clone();
        third.status =
            serde_json::from_value(json!({"pendingServiceStatus": {"rayClusterName": "svc-mmmmm"}})).unwrap();
        let listed = vec![
            stamped("svc-aaaaa", "2026-01-01T00:00:00.700000000Z"),
            stamped("svc-zzzzz", "2026-01-01T00:00:00.200000000Z"),
            stamped("svc-mmmmm", "2026-01-01T00:00:00.900000000Z"),
        ];
        let names: Vec<String> = children_in_gate_order(&third, listed)
            .iter()
            .map(|c| c.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(
            names,
            vec!["svc-zzzzz", "svc-aaaaa", "svc-mmmmm"],
            "dangling by their stamps, the pending one last"
        );
    }

    /// A scale-down releases quota only once its pods are gone: workers the autoscaler named in
    /// `workersToDelete` still count until it clears the list (I2).
    #[test]
    fn workers_named_for_deletion_count_until_the_list_is_cleared() {
        let mut rc = child("a", "1", 2, "x");
        let wg = &mut rc.spec.worker_group_specs.as_mut().unwrap()[0];
        wg.scale_strategy = Some(crate::api::ray::raycluster::ScaleStrategy {
            workers_to_delete: Some(vec!["a-small-worker-x".into()]),
        });
        assert_eq!(
            counts(&podsets(&demand(&[rc.clone()])).unwrap()),
            vec![("head".into(), 1), ("small".into(), 3)]
        );
        let wg = &mut rc.spec.worker_group_specs.as_mut().unwrap()[0];
        wg.scale_strategy = Some(crate::api::ray::raycluster::ScaleStrategy {
            workers_to_delete: Some(vec![]),
        });
        assert_eq!(
            counts(&podsets(&demand(&[rc])).unwrap()),
            vec![("head".into(), 1), ("small".into(), 2)]
        );
    }

    /// Seen by the seeded chaos runs (seed 27) and in gated.rs: a service preempted mid-upgrade is
    /// suspended, and its children are deleted one at a time. Once one is gone the demand no longer
    /// matches the evicted Workload, which was then deleted as "edited while suspended", releasing the
    /// quota while the other child's pods still ran (I2). The reservation must stay until the job is
    /// inactive: the evicted Workload is stopped (and waited on), not deleted.
    #[test]
    fn an_evicted_service_keeps_its_reservation_while_a_child_remains() {
        use crate::admission as conditions;
        use crate::api::kueue::{Admission, Workload};
        use crate::jobframework::job_controller::{Step, plan};
        use crate::rayservice::job::rayservice::RayServiceJob;
        let rs: crate::api::ray::RayService = serde_json::from_value(json!({
            "apiVersion": "ray.io/v1", "kind": "RayService",
            "metadata": {"name": "svc", "namespace": "default", "uid": "u1",
                         "labels": {crate::api::kueue::constants::label::QUEUE_NAME: "lq"}},
            "spec": {"suspend": true, "rayClusterConfig": {"headGroupSpec": {"rayStartParams": {},
                "template": {"spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray:y"}]}}}}}
        }))
        .unwrap();
        let (a, b) = (child("a", "2", 1, "x"), child("b", "3", 1, "x"));
        let mut wl = Workload::build("w", "default").queue("lq").build();
        wl.spec.pod_sets = podsets(&demand(&[a.clone(), b.clone()])).unwrap();
        let now = jiff::Timestamp::UNIX_EPOCH;
        let admission = Admission {
            cluster_queue: "cq".into(),
            pod_set_assignments: vec![],
        };
        wl.status = Some(conditions::admitted(&wl, admission, now));
        let cause = conditions::EvictionCause {
            by: conditions::EvictedBy::Preempted(crate::queue::PreemptedReason::InClusterQueue),
            message: "preempted".into(),
        };
        wl.status = conditions::evicted(&wl, &cause, now);
        let job = |children: Vec<RayCluster>| RayServiceJob {
            rs: rs.clone(),
            children,
            live: Default::default(),
            slices: vec![],
            growth_taken: None,
            pins: Default::default(),
            admitted: Vec::new(),
            scheduling: None,
        };
        // Child `a` deleted, `b` (and its pods) still there: stop and wait, keeping the reservation.
        assert_eq!(plan(&job(vec![b]), &[&wl]).unwrap(), Step::Stop("w".into()));
        // Every child gone: nothing runs, the Workload may go.
        assert_eq!(
            plan(&job(vec![]), &[&wl]).unwrap(),
            Step::DeleteWorkloads(vec!["w".into()])
        );
    }

    #[test]
    fn the_gate_covers_the_serving_child_first_and_the_new_one_only_once_its_slice_is_admitted() {
        let children = [child("active", "2", 1, "x"), child("pending", "2", 1, "y")];
        let d = demand(&children);
        let old_slice = podsets(&d[..1]).unwrap();
        let allowed = allowed_pods(Some(&old_slice), &d, &LivePods::new());
        assert!(covers(&allowed["active"], &d[0]));
        assert_eq!(
            allowed["pending"],
            BTreeMap::from([("head".to_string(), 0), ("small".to_string(), 0)])
        );
        let new_slice = podsets(&d).unwrap();
        let allowed = allowed_pods(Some(&new_slice), &d, &LivePods::new());
        assert!(covers(&allowed["active"], &d[0]) && covers(&allowed["pending"], &d[1]));
        let none = allowed_pods(None, &d, &LivePods::new());
        assert!(
            !covers(&none["active"], &d[0]),
            "no admitted slice covers nothing"
        );
    }

    #[test]
    fn a_resized_child_is_not_covered_by_the_old_shape() {
        let children = [child("active", "2", 1, "x"), child("pending", "3", 1, "x")];
        let d = demand(&children);
        // The old slice holds two 2-CPU heads' worth of count, but of the old shape only.
        let mut old = podsets(&d[..1]).unwrap();
        old[0].count = Some(2);
        old[1].count = Some(2);
        let allowed = allowed_pods(Some(&old), &d, &LivePods::new());
        assert!(covers(&allowed["active"], &d[0]));
        assert_eq!(
            allowed["pending"]["head"], 0,
            "a 3-CPU head needs a slice with a 3-CPU podset"
        );
    }

    /// Chaos seed 46 (I2, an incremental upgrade under the autoscaler): the slice was made while the old
    /// cluster had scaled its workers to 0 and the new one ran 2; the autoscaler then asked for 2 on the
    /// old one again. Covered oldest first by demand alone, the old cluster took the 2 workers the new
    /// one was running (which keeps running pods), so 4 ran on a slice of 2.
    #[test]
    fn a_child_that_grows_does_not_take_the_coverage_of_pods_another_child_runs() {
        let slice = podsets(&demand(&[child("old", "2", 0, "x"), child("new", "2", 2, "y")])).unwrap();
        let d = demand(&[child("old", "2", 2, "x"), child("new", "2", 2, "y")]);
        let live = LivePods::from([
            ("old".to_string(), BTreeMap::from([("head".to_string(), 1)])),
            (
                "new".to_string(),
                BTreeMap::from([("head".to_string(), 1), ("small".to_string(), 2)]),
            ),
        ]);
        let allowed = allowed_pods(Some(&slice), &d, &live);
        assert_eq!(
            allowed["new"]["small"], 2,
            "the pods the new cluster runs stay covered"
        );
        assert_eq!(
            allowed["old"]["small"], 0,
            "the old cluster's growth waits for a larger slice"
        );
        assert!(covers(&allowed["new"], &d[1]) && !covers(&allowed["old"], &d[0]));
        // With nothing running yet, the older child is still covered first.
        let allowed = allowed_pods(Some(&slice), &d, &LivePods::new());
        assert_eq!((allowed["old"]["small"], allowed["new"]["small"]), (2, 0));
    }

    /// Chaos seed 629 (I2, once settled): the autoscaler lowered an autoscaled group from 2 to 1
    /// while the operator was still creating its second pod, so no worker was named in
    /// `workersToDelete` and (autoscaling on) the operator kept both. From the spec alone the demand
    /// fell to 1 and the slice shrank in place under a running pod. Raised to the pods that run, the
    /// demand stays 2 (no shrink) and the gate keeps both covered.
    #[test]
    fn a_group_running_more_pods_than_its_spec_keeps_their_quota() {
        let slice = podsets(&demand(&[child("c", "2", 2, "x")])).unwrap();
        let live = LivePods::from([(
            "c".to_string(),
            BTreeMap::from([("head".to_string(), 1), ("small".to_string(), 2)]),
        )]);
        let spec_only = demand(&[child("c", "2", 1, "x")]);
        assert!(
            matches!(
                compare(&podsets(&spec_only).unwrap(), &slice, true),
                DemandChange::PodSets(_)
            ),
            "from the spec alone the slice would shrink"
        );
        let d = at_least_live(spec_only, &live);
        assert_eq!(
            counts(&podsets(&d).unwrap()),
            vec![("head".into(), 1), ("small".into(), 2)]
        );
        assert_eq!(compare(&podsets(&d).unwrap(), &slice, true), DemandChange::Same);
        assert_eq!(allowed_pods(Some(&slice), &d, &live)["c"]["small"], 2);
        // Once the surplus pod is gone, the demand is the spec's again and the slice may shrink.
        let gone = LivePods::from([(
            "c".to_string(),
            BTreeMap::from([("head".to_string(), 1), ("small".to_string(), 1)]),
        )]);
        let d = at_least_live(demand(&[child("c", "2", 1, "x")]), &gone);
        assert!(matches!(
            compare(&podsets(&d).unwrap(), &slice, true),
            DemandChange::PodSets(_)
        ));
    }

    #[test]
    fn more_shapes_than_kueues_podset_limit_is_refused_with_a_reason() {
        // Kueue v1beta2 allows 18 podsets per Workload: 18 head shapes plus the workers make 19.
        let children: Vec<RayCluster> = (1..=18)
            .map(|i| child(&format!("c{i}"), &i.to_string(), 1, "x"))
            .collect();
        let err = podsets(&demand(&children)).unwrap_err();
        assert!(
            err.to_string().contains("19 podsets") && err.to_string().contains("limit of 18"),
            "{err}"
        );
        assert!(podsets(&demand(&children[..17])).is_ok(), "18 podsets fit");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(128))]
        /// I2 and I3 on the pure rule: whatever the children, the pods the gate allows never exceed the
        /// slice's counts per identity, and a slice built from the children covers every one of them.
        #[test]
        fn gate_never_allows_more_than_the_slice_and_an_exact_slice_covers_all(
            shapes in proptest::collection::vec((1u8..4, 0i32..4, 0u8..2), 1..4),
            admitted_prefix in 0usize..4,
            running in proptest::collection::vec((0i64..2, 0i64..5), 4),
        ) {
            let children: Vec<RayCluster> = shapes.iter().enumerate()
                .map(|(i, (cpu, w, tag))| child(&format!("c{i}"), &cpu.to_string(), *w, &tag.to_string()))
                .collect();
            let d = demand(&children);
            let k = admitted_prefix.min(d.len());
            let slice = podsets(&d[..k.max(1)]).unwrap();
            let allowed = allowed_pods(Some(&slice), &d, &LivePods::new());
            let granted: i64 = allowed.values().flat_map(|g| g.values()).sum();
            let held: i64 = slice.iter().map(|p| i64::from(p.count())).sum();
            proptest::prop_assert!(granted <= held);
            for c in &d[..k.max(1)] {
                proptest::prop_assert!(covers(&allowed[&c.name], c), "{} is in the slice", c.name);
            }
            // Whatever runs now: never more than the slice holds, never more than a child wants.
            let live: LivePods = d.iter().zip(&running).map(|(c, (h, w))| {
                (c.name.clone(), BTreeMap::from([("head".to_string(), *h), ("small".to_string(), *w)]))
            }).collect();
            let allowed = allowed_pods(Some(&slice), &d, &live);
            let granted: i64 = allowed.values().flat_map(|g| g.values()).sum();
            proptest::prop_assert!(granted <= held);
            for c in &d {
                for (group, g) in &allowed[&c.name] {
                    let want: i64 = c.pods.iter().filter(|(id, _, _)| &id.group == group).map(|(_, n, _)| *n).sum();
                    proptest::prop_assert!(*g <= want, "{} gets no more {group} than it wants", c.name);
                }
            }
        }
    }

    /// A Ray pod of `cluster`: the head, or a worker of group `small`; bound to a node or not.
    fn ray_pod(name: &str, cluster: &str, head: bool, bound: bool) -> k8s_openapi::api::core::v1::Pod {
        use crate::api::ray::constants as c;
        let node_type = if head {
            c::NODE_TYPE_HEAD
        } else {
            c::NODE_TYPE_WORKER
        };
        let mut labels = json!({c::LABEL_CLUSTER: cluster, c::LABEL_NODE_TYPE: node_type});
        if !head {
            labels[c::LABEL_GROUP] = json!("small");
        }
        let node = if bound { json!("sim-node-0") } else { json!(null) };
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": labels},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "ray"}]},
            "status": {"phase": "Pending"}
        }))
        .unwrap()
    }

    /// Kueue v0.20's unscheduled-pods tracker (KEP-13502) over a RayService's slice: only the pods
    /// the latest admitted slice covers count, each in the podset standing for its child's group. A
    /// gated upgrade's pending cluster (resized head, so a podset of its own once admitted) counts
    /// for nothing while the slice holding only the serving cluster is the admitted one; once the
    /// slice covering both is admitted, its pods fill their podsets, and a worker not yet made is a
    /// required pod not scheduled.
    #[test]
    fn a_services_pods_scheduled_counts_only_what_its_admitted_slice_covers() {
        use crate::rayservice::job::rayservice::service_pods_scheduling;
        let children = [child("active", "2", 1, "x"), child("pending", "3", 1, "x")];
        let d = demand(&children);
        let old_slice = podsets(&d[..1]).unwrap();
        let pods = [
            ray_pod("a-head", "active", true, true),
            ray_pod("a-w0", "active", false, false),
            ray_pod("p-head", "pending", true, true),
        ];
        let s = service_pods_scheduling(&old_slice, &children, &pods);
        assert_eq!(
            s.live, 2,
            "the pending cluster's head is none of the admitted slice's"
        );
        assert_eq!(s.scheduled, BTreeMap::from([("head".to_string(), 1)]));
        // The slice covering both admitted: the shared worker podset holds two and has one bound.
        let new_slice = podsets(&d).unwrap();
        let pods = [
            ray_pod("a-head", "active", true, true),
            ray_pod("a-w0", "active", false, true),
            ray_pod("p-head", "pending", true, true),
        ];
        let s = service_pods_scheduling(&new_slice, &children, &pods);
        assert_eq!(s.live, 3);
        // Each head has a podset of its own (`head-<hash>`), each filled by its cluster's head.
        let heads: Vec<i64> = s
            .scheduled
            .iter()
            .filter(|(n, _)| n.starts_with("head-"))
            .map(|(_, v)| *v)
            .collect();
        assert_eq!(heads, vec![1, 1], "{:?}", s.scheduled);
        assert_eq!(
            (s.scheduled.get("small"), s.scheduled.len()),
            (Some(&1), 3),
            "{:?}",
            s.scheduled
        );
        let small = new_slice.iter().find(|p| p.name() == "small").unwrap();
        assert_eq!(small.count(), 2, "both clusters' workers in one podset");
        // No admitted slice: nothing counts.
        let s = service_pods_scheduling(&[], &children, &pods);
        assert_eq!((s.live, s.scheduled.len()), (0, 0));
    }
}

/// Starting a RayService writes nothing of its admission into the spec its user owns (issue 46): a
/// GitOps re-apply of the manifest would undo it and start an upgrade nobody asked for. The
/// templates stay as written (a slice name an older version left there included), the service is
/// unsuspended, and a podset that stands for none of its groups is refused.
#[test]
fn starting_a_service_leaves_its_templates_as_the_user_wrote_them() {
    use crate::api::kueue::constants::label::WORKLOAD_SLICE_NAME;
    use crate::api::ray::RayService;
    use crate::jobframework::JobFrameworkError;
    use crate::jobframework::podset_info::PodSetInfo;
    let annotated = json!({"annotations": {WORKLOAD_SLICE_NAME: "rayservice-rs-old", "user": "kept"}});
    let rs: RayService = serde_json::from_value(json!({
        "apiVersion": "ray.io/v1", "kind": "RayService",
        "metadata": {"name": "rs", "namespace": "default"},
        "spec": {"suspend": true, "rayClusterConfig": {
            "headGroupSpec": {"rayStartParams": {}, "template": {"metadata": annotated,
                "spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray"}]}}},
            "workerGroupSpecs": [{"groupName": "Small", "rayStartParams": {}, "template": {
                "spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray"}]}}}]
        }}
    }))
    .unwrap();
    let as_written = rs.spec.ray_cluster_config.clone();
    let mut job = super::rayservice::RayServiceJob {
        rs,
        children: vec![],
        live: Default::default(),
        slices: vec![],
        growth_taken: None,
        pins: Default::default(),
        admitted: Vec::new(),
        scheduling: None,
    };
    let mut head = PodSetInfo {
        name: "head".into(),
        count: 1,
        ..Default::default()
    };
    head.annotations
        .insert(WORKLOAD_SLICE_NAME.into(), "rayservice-rs-new".into());
    head.node_selector.insert("pool".into(), "a".into());
    let workers = PodSetInfo {
        name: "small-1a2b3".into(),
        count: 2,
        ..Default::default()
    };
    job.run_with_podsets_info(&[head.clone(), workers])
        .expect("started");
    assert_eq!(job.rs.spec.suspend, Some(false));
    assert_eq!(
        job.rs.spec.ray_cluster_config, as_written,
        "nothing written into spec.rayClusterConfig"
    );
    assert!(!job.restore_podsets_info(&[head]), "nothing to restore");

    let unknown = PodSetInfo {
        name: "gpu".into(),
        count: 1,
        ..Default::default()
    };
    assert!(
        matches!(job.run_with_podsets_info(&[unknown]), Err(JobFrameworkError::UnknownPodSet(n)) if n == "gpu")
    );
}

/// waitForPodsReady's signal from the Ray jobs: all of a cluster's pods Running and Ready, as the
/// RayCluster controller counted them (HeadPodReady, ready workers against desired), not KubeRay's
/// sticky `state: ready`; a RayService's children the quota does not cover yet (an upgrade's gated
/// cluster, no pods) are not waited on.
#[test]
fn ray_jobs_report_pods_ready_from_their_pods() {
    use super::raycluster::cluster_pods_ready;
    use super::rayservice::RayServiceJob;
    use crate::api::ray::RayService;
    let rc = |name: &str,
              head: &str,
              ready: i32,
              desired: i32,
              gated: Option<&str>,
              observed: i64|
     -> RayCluster {
        let mut conds = vec![
            json!({"type": "HeadPodReady", "status": head, "reason": "r", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}),
        ];
        if let Some(g) = gated {
            conds.push(json!({"type": "QuotaGated", "status": g, "reason": "r", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}));
        }
        serde_json::from_value(json!({
            "apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": name, "namespace": "default", "generation": 2},
            "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "h"}]}}}},
            "status": {"state": "ready", "readyWorkerReplicas": ready, "desiredWorkerReplicas": desired,
                "observedGeneration": observed, "conditions": conds}
        }))
        .unwrap()
    };
    let cases = [
        ("all ready", rc("a", "True", 2, 2, None, 2), true),
        (
            "a worker not ready (state stays ready)",
            rc("a", "True", 1, 2, None, 2),
            false,
        ),
        ("head not ready", rc("a", "False", 2, 2, None, 2), false),
        (
            "status of an older generation",
            rc("a", "True", 2, 2, None, 1),
            false,
        ),
    ];
    for (name, cluster, want) in cases {
        assert_eq!(cluster_pods_ready(&cluster), want, "{name}");
        assert_eq!(RayClusterJob::new(cluster).pods_ready(), want, "{name}");
    }
    let mut suspended = rc("a", "True", 2, 2, None, 2);
    suspended.spec.suspend = Some(true);
    assert!(
        !RayClusterJob::new(suspended).pods_ready(),
        "a suspended cluster runs no pods"
    );
    let rs: RayService = serde_json::from_value(json!({
        "apiVersion": "ray.io/v1", "kind": "RayService",
        "metadata": {"name": "svc", "namespace": "default"},
        "spec": {"rayClusterConfig": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "h"}]}}}}}
    }))
    .unwrap();
    let with_ready = |status: &str| {
        let mut rs = rs.clone();
        rs.status = Some(
            serde_json::from_value(json!({"conditions": [{"type": "Ready", "status": status,
            "reason": "x", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}))
            .unwrap(),
        );
        rs
    };
    let job = |rs: RayService, children: Vec<RayCluster>| RayServiceJob {
        rs,
        children,
        live: Default::default(),
        slices: vec![],
        growth_taken: None,
        pins: Default::default(),
        admitted: Vec::new(),
        scheduling: None,
    };
    let serving = rc("svc-a", "True", 1, 1, Some("False"), 2);
    let broken_pending = rc("svc-b", "False", 0, 1, Some("False"), 2);
    // Kueue's RayService integration: the service's Ready condition, not its clusters' pods.
    assert!(
        !job(with_ready("True"), vec![]).pods_ready(),
        "no cluster, no pods"
    );
    assert!(
        !job(rs.clone(), vec![serving.clone()]).pods_ready(),
        "no Ready condition yet"
    );
    assert!(job(with_ready("True"), vec![serving.clone()]).pods_ready());
    assert!(
        !job(with_ready("False"), vec![serving.clone()]).pods_ready(),
        "a service not serving is not ready"
    );
    assert!(
        job(with_ready("True"), vec![serving, broken_pending]).pods_ready(),
        "a broken pending cluster does not make a serving service not ready"
    );
}

/// A new slice's name is none of the slices the service owns, even once one of them is gone: with a
/// count of slices in the name, the retention policy deleting a finished slice (or a user deleting
/// the waiting one) made the next slice take the name of one still there, its create answered
/// AlreadyExists, and no slice waited for the upgrade (hostile chaos seed 302, a 21 s stall).
#[test]
fn a_new_slice_is_never_named_as_one_the_service_still_owns() {
    use super::rayservice::RayServiceJob;
    use crate::api::ray::RayService;
    use crate::jobframework::workload::workload_name_for_job;
    let rs: RayService = serde_json::from_value(json!({"apiVersion": "ray.io/v1", "kind": "RayService",
        "metadata": {"name": "svc", "namespace": "ns", "uid": "u1", "generation": 3}, "spec": {"rayClusterConfig": {
            "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "h", "image": "ray"}]}}}}}}))
    .unwrap();
    let name_with = |owned: &[String]| {
        let job = RayServiceJob {
            rs: rs.clone(),
            children: vec![],
            live: Default::default(),
            slices: owned.to_vec(),
            growth_taken: None,
            pins: Default::default(),
            admitted: Vec::new(),
            scheduling: None,
        };
        workload_name_for_job(&job, Default::default()).unwrap()
    };
    let a = name_with(&[]);
    let b = name_with(std::slice::from_ref(&a));
    let c = name_with(&[a.clone(), b.clone()]);
    assert!(a != b && b != c && a != c, "{a} {b} {c}");
    // The first (finished) slice removed: the next one is still new.
    let d = name_with(&[b.clone(), c.clone()]);
    assert!(![&a, &b, &c].contains(&&d), "{d}");
    assert_eq!(
        name_with(&[c.clone(), b.clone()]),
        d,
        "the same slices, in any order, give the same name (a retried create)"
    );
}
