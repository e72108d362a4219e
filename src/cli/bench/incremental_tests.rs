use super::*;

fn status(active: (&str, i32, i32), pending: Option<(&str, i32, i32)>) -> RayServiceStatuses {
    let side = |(name, cap, traffic): (&str, i32, i32)| RayServiceStatus {
        ray_cluster_name: Some(name.into()),
        target_capacity: Some(cap),
        traffic_routed_percent: Some(traffic),
        ..RayServiceStatus::default()
    };
    RayServiceStatuses {
        active_service_status: Some(side(active)),
        pending_service_status: pending.map(side),
        ..RayServiceStatuses::default()
    }
}

#[test]
fn defaults_pass_the_check() {
    assert_eq!(
        Options::default().check().unwrap(),
        Upgrade {
            step: 25,
            interval: 2,
            surge: 50
        }
    );
}

#[test]
fn out_of_range_flags_are_refused_by_name() {
    let cases: Vec<(Options, &str)> = vec![
        (
            Options {
                step: 0,
                ..Options::default()
            },
            "--step 0",
        ),
        (
            Options {
                step: 101,
                ..Options::default()
            },
            "--step 101",
        ),
        (
            Options {
                step: i64::MAX,
                ..Options::default()
            },
            "--step",
        ),
        (
            Options {
                surge: -5,
                ..Options::default()
            },
            "--surge -5",
        ),
        (
            Options {
                interval: 0,
                ..Options::default()
            },
            "--interval 0",
        ),
        (
            Options {
                interval: 61,
                ..Options::default()
            },
            "--interval 61",
        ),
        (
            Options {
                interval: i64::MIN,
                ..Options::default()
            },
            "--interval",
        ),
        (
            Options {
                rps: 0.0,
                ..Options::default()
            },
            "--rps 0",
        ),
        (
            Options {
                rps: f64::NAN,
                ..Options::default()
            },
            "--rps NaN",
        ),
        (
            Options {
                rps: f64::INFINITY,
                ..Options::default()
            },
            "--rps inf",
        ),
        (
            Options {
                timeout: Duration::ZERO,
                ..Options::default()
            },
            "--timeout 0s",
        ),
        (
            Options {
                timeout: Duration::from_secs(3600),
                ..Options::default()
            },
            "--timeout 3600s",
        ),
    ];
    for (opts, want) in cases {
        let err = opts.check().expect_err(want).to_string();
        assert!(err.starts_with(want), "{err:?} should start with {want:?}");
    }
}

#[test]
fn bounds_are_accepted() {
    let opts = Options {
        step: 100,
        surge: 1,
        interval: MAX_INTERVAL_SECONDS,
        rps: MAX_RPS,
        timeout: MAX_TIMEOUT,
        ..Options::default()
    };
    assert!(opts.check().is_ok());
}

#[test]
fn the_sample_service_parses_with_the_upgrade_options() {
    let rs = rayservice(Upgrade {
        step: 10,
        interval: 30,
        surge: 20,
    })
    .unwrap();
    let v = serde_json::to_value(&rs).unwrap();
    let o = &v["spec"]["upgradeStrategy"]["clusterUpgradeOptions"];
    assert_eq!(
        (
            &o["stepSizePercent"],
            &o["intervalSeconds"],
            &o["maxSurgePercent"]
        ),
        (&json!(10), &json!(30), &json!(20))
    );
    assert_eq!(
        v["spec"]["rayClusterConfig"]["enableInTreeAutoscaling"],
        json!(true)
    );
}

fn row(secs: u64, weight: i32, failed: u64) -> Row {
    Row {
        at: Duration::from_secs(secs),
        old: ClusterView {
            weight: Some(weight),
            ..ClusterView::default()
        },
        new: ClusterView::default(),
        failed,
    }
}

#[test]
fn record_keeps_only_changes() {
    let mut rows = Vec::new();
    record(&mut rows, row(0, 100, 0));
    record(&mut rows, row(1, 100, 0));
    record(&mut rows, row(2, 75, 0));
    record(&mut rows, row(3, 75, 2));
    record(&mut rows, row(4, 75, 2));
    let at: Vec<u64> = rows.iter().map(|r| r.at.as_secs()).collect();
    assert_eq!(at, vec![0, 2, 3]);
}

#[test]
fn view_finds_the_cluster_on_either_side_and_in_the_route() {
    let s = status(("old", 100, 75), Some(("new", 50, 25)));
    let backends = vec![("old".to_string(), 75), ("new".to_string(), 25)];
    assert_eq!(
        view(Some(&s), &backends, "new", Some(2)),
        ClusterView {
            capacity: Some(50),
            traffic: Some(25),
            weight: Some(25),
            running: Some(2)
        }
    );
    assert_eq!(
        view(None, &[], "old", None),
        ClusterView::default(),
        "nothing known yet"
    );
}

#[test]
fn new_cluster_and_promotion() {
    let upgrading = status(("old", 100, 50), Some(("new", 100, 50)));
    assert_eq!(new_cluster(Some(&upgrading), "old").as_deref(), Some("new"));
    assert!(!promoted(Some(&upgrading), "new"));

    let before = status(("old", 100, 100), None);
    assert_eq!(new_cluster(Some(&before), "old"), None);
    assert!(!promoted(Some(&before), "new"));

    let after = status(("new", 100, 100), None);
    assert_eq!(new_cluster(Some(&after), "old").as_deref(), Some("new"));
    assert!(promoted(Some(&after), "new"));

    let not_all_traffic = status(("new", 100, 90), None);
    assert!(!promoted(Some(&not_all_traffic), "new"));
    assert!(!promoted(None, "new"));
}

#[test]
fn render_prints_rows_counts_and_reasons() {
    let mut counts = LoadCounts {
        sent: 10,
        ok: 7,
        failed: 3,
        ..LoadCounts::default()
    };
    counts
        .failed_by_reason
        .insert(loadgen::REASON_NO_REPLICA.into(), 3);
    let r = RunReport {
        policy: Policy::TimerOnly,
        upgrade: Upgrade {
            step: 25,
            interval: 2,
            surge: 50,
        },
        rps: 100.0,
        old: "a".into(),
        new: "b".into(),
        rows: vec![row(0, 100, 0), row(2, 75, 3)],
        duration: Duration::from_millis(2500),
        counts,
    };
    let text = render(&r);
    assert!(text.contains("== timer-only"), "{text}");
    assert!(
        text.contains("sent 10, ok 7, failed 3 (no running replica: 3)"),
        "{text}"
    );
    assert!(text.contains("2.50 s"), "{text}");
    assert_eq!(text.lines().filter(|l| l.contains(" | ")).count(), 4, "{text}");
    assert_eq!(
        compare(std::slice::from_ref(&r)),
        "comparison: timer-only dropped 3 of 10 requests (2.50 s upgrade)"
    );
    assert_eq!(to_json(&[r])["runs"][0]["requests"]["failed"], json!(3));
}
