//! The simulated Ray across a process restart (`persist`), on tokio's paused clock
//! (build 1 s, replica start 2 s).

use std::collections::BTreeMap;

use super::tests::{S, URL, config, details, ep, hello, sim};
use super::*;
use crate::rayservice::dashboard::AppStatus;

fn dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("quotagate-raysim-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A running app, its capacity and the number of PUTs are there at once after a restart: no
/// rebuild, no replica restarting, nothing that traffic could notice.
#[tokio::test(start_paused = true)]
async fn a_restarted_process_finds_its_heads_as_they_were() {
    let d = dir("running");
    let before = sim();
    assert_eq!(before.persist_in(&d).unwrap(), 0);
    before.set_capacity(URL, Some(4.0));
    before.deploy(&ep(), &config(vec![hello(2)]), None).await.unwrap();
    tokio::time::advance(4 * S).await;
    assert_eq!(
        before.running_replicas(URL),
        BTreeMap::from([("hello".to_owned(), 2)])
    );
    // The paused clock moved, the wall clock did not: write the state as it stands now, as the
    // saves of a real run (wall and monotonic time moving together) would have it.
    before.checkpoint();
    drop(before);

    let after = sim();
    assert_eq!(after.persist_in(&d).unwrap(), 1);
    assert_eq!(
        after.running_replicas(URL),
        BTreeMap::from([("hello".to_owned(), 2)])
    );
    assert_eq!(after.put_count(URL), 1);
    assert_eq!(after.observed_demand_cpus(URL), Some(2.0));
    let app = &details(&after).await.applications["hello"];
    assert_eq!(app.status, AppStatus::Running);
    let _ = std::fs::remove_dir_all(&d);
}

/// A build under way when the process stopped finishes when it would have.
#[tokio::test(start_paused = true)]
async fn a_build_under_way_finishes_on_time_after_a_restart() {
    let d = dir("building");
    let before = sim();
    before.persist_in(&d).unwrap();
    before.deploy(&ep(), &config(vec![hello(1)]), None).await.unwrap();
    drop(before);
    let after = sim();
    after.persist_in(&d).unwrap();
    assert_eq!(
        details(&after).await.applications["hello"].status,
        AppStatus::Deploying
    );
    tokio::time::advance(3 * S).await;
    assert_eq!(
        after.running_replicas(URL),
        BTreeMap::from([("hello".to_owned(), 1)])
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// Without a data directory nothing survives; a head restarted without GCS fault tolerance loses
/// its apps, and its demand is unknown (not zero) until it is configured again.
#[tokio::test(start_paused = true)]
async fn a_head_restart_loses_the_apps_and_the_demand_becomes_unknown() {
    let d = dir("headrestart");
    let s = sim();
    s.persist_in(&d).unwrap();
    assert_eq!(s.observed_demand_cpus(URL), None, "never seen");
    s.deploy(&ep(), &config(vec![hello(2)]), None).await.unwrap();
    tokio::time::advance(4 * S).await;
    assert_eq!(s.observed_demand_cpus(URL), Some(2.0));
    s.start_cluster(URL);
    assert!(details(&s).await.applications.is_empty());
    assert_eq!(s.observed_demand_cpus(URL), None);
    assert_eq!(s.demand_cpus(URL), 0.0);
    // The loss itself is kept: a process restart does not bring the apps back.
    let again = sim();
    again.persist_in(&d).unwrap();
    assert!(details(&again).await.applications.is_empty());
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_damaged_state_file_is_an_error_naming_the_file() {
    let d = dir("damaged");
    std::fs::write(d.join(persist::FILE), b"{not json").unwrap();
    let err = sim().persist_in(&d).unwrap_err().to_string();
    assert!(err.contains(persist::FILE) && err.contains("not valid"), "{err}");
    let _ = std::fs::remove_dir_all(&d);
}

/// A head given its config back after a restart has no replica while the app builds: its demand
/// stays unknown until the build ends, so the autoscaler does not scale the serving cluster down on
/// the empty build (it did, once in about eight loaded runs, 4 workers -> 3).
#[tokio::test(start_paused = true)]
async fn the_demand_of_an_app_building_its_first_version_is_unknown() {
    let s = sim();
    s.deploy(&ep(), &config(vec![hello(2)]), None).await.unwrap();
    tokio::time::advance(4 * S).await;
    s.start_cluster(URL);
    s.deploy(&ep(), &config(vec![hello(2)]), None).await.unwrap();
    assert_eq!(
        s.observed_demand_cpus(URL),
        None,
        "still building, no replica yet"
    );
    tokio::time::advance(S + S / 2).await;
    assert_eq!(
        s.observed_demand_cpus(URL),
        Some(2.0),
        "built: the replicas say the demand"
    );
}

/// The saved state is readable by its owner only, like every file of the data directory (issue 43).
#[cfg(unix)]
#[tokio::test(start_paused = true)]
async fn the_saved_state_is_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let d = dir("mode");
    let s = sim();
    s.persist_in(&d).unwrap();
    s.deploy(&ep(), &config(vec![hello(1)]), None).await.unwrap();
    s.checkpoint();
    let files: Vec<_> = std::fs::read_dir(&d)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(!files.is_empty(), "the state was written");
    for f in files {
        let mode = std::fs::metadata(&f).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", f.display());
    }
    let _ = std::fs::remove_dir_all(&d);
}
