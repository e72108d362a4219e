//! `--data-dir`: what a restarted embedded server loads back, how watches resume across the restart,
//! and what it refuses (a second process, another format, corrupt data).

mod embedded_support;

use embedded_support::{Gadget, GadgetSpec, TestHook, Widget, widget};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::CustomResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use quotagate::embedded::durable::{self, DurableError};
use quotagate::embedded::{EmbeddedServer, ServerConfig};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn data_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("quotagate-durable-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn open(dir: &Path) -> Result<Arc<EmbeddedServer>, DurableError> {
    let config = ServerConfig {
        data_dir: Some(dir.to_path_buf()),
        ..ServerConfig::default()
    };
    EmbeddedServer::open(&[Widget::crd(), Gadget::crd()], Arc::new(TestHook), config)
}

/// Opens `dir` once the previous server is gone: a dropped in-process client's buffer task lets go
/// of the server (and the directory's lock) when the runtime next polls it.
async fn reopen(dir: &Path) -> Arc<EmbeddedServer> {
    let deadline = tokio::time::Instant::now() + embedded_support::WAIT;
    loop {
        match open(dir) {
            Ok(s) => return s,
            Err(DurableError::Locked { .. }) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            Err(e) => panic!("reopening {}: {e}", dir.display()),
        }
    }
}

/// Every object of the kinds the test writes, as the API returns them.
async fn snapshot(client: &kube::Client) -> Vec<Value> {
    let mut all = Vec::new();
    let widgets: Api<Widget> = Api::all(client.clone());
    let gadgets: Api<Gadget> = Api::all(client.clone());
    let cms: Api<ConfigMap> = Api::all(client.clone());
    let nss: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    for w in widgets.list(&ListParams::default()).await.unwrap() {
        all.push(serde_json::to_value(w).unwrap());
    }
    for g in gadgets.list(&ListParams::default()).await.unwrap() {
        all.push(serde_json::to_value(g).unwrap());
    }
    for c in cms.list(&ListParams::default()).await.unwrap() {
        all.push(serde_json::to_value(c).unwrap());
    }
    for n in nss.list(&ListParams::default()).await.unwrap() {
        all.push(serde_json::to_value(n).unwrap());
    }
    all
}

// Expectation from k3s/kine and etcd: a restart loses no committed write, and the revision,
// uids and timestamps a client saw stay what they were.
#[tokio::test]
async fn a_restart_loads_back_every_committed_write_exactly() {
    let dir = data_dir("restart");
    let server = open(&dir).unwrap();
    let client = server.client();
    let widgets: Api<Widget> = Api::namespaced(client.clone(), "default");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let pp = PostParams::default();
    let kept = widgets.create(&pp, &widget("kept", 1)).await.unwrap();
    widgets
        .patch_status(
            "kept",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"seen": "yes"}})),
        )
        .await
        .unwrap();
    widgets
        .patch(
            "kept",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 2}})),
        )
        .await
        .unwrap();
    // Deleted outright, deleted through its finalizer, deleted by the owner cascade.
    widgets.create(&pp, &widget("gone", 1)).await.unwrap();
    widgets.delete("gone", &DeleteParams::default()).await.unwrap();
    let mut held = widget("held", 1);
    held.metadata.finalizers = Some(vec!["example.quotagate.io/hold".into()]);
    widgets.create(&pp, &held).await.unwrap();
    widgets.delete("held", &DeleteParams::default()).await.unwrap();
    widgets
        .patch(
            "held",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    let owner = widgets.create(&pp, &widget("owner", 1)).await.unwrap();
    let owned: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "owned", "ownerReferences": [
        {"apiVersion": "example.quotagate.io/v1", "kind": "Widget", "name": "owner", "uid": owner.metadata.uid}]}, "data": {"a": "1"}}))
    .unwrap();
    cms.create(&pp, &owned).await.unwrap();
    widgets.delete("owner", &DeleteParams::default()).await.unwrap();
    let gadgets: Api<Gadget> = Api::all(client.clone());
    gadgets
        .create(&pp, &Gadget::new("g", GadgetSpec { color: "red".into() }))
        .await
        .unwrap();

    let before = snapshot(&client).await;
    let rv = server.store.resource_version();
    drop((widgets, cms, gadgets, client, server));

    let server = reopen(&dir).await;
    assert_eq!(
        server.store.restored_rv(),
        rv,
        "the RV counter comes back (deletes advanced it too)"
    );
    assert_eq!(server.store.resource_version(), rv);
    let client = server.client();
    assert_eq!(
        snapshot(&client).await,
        before,
        "objects, uids, timestamps, RVs, generations exactly"
    );
    let widgets: Api<Widget> = Api::namespaced(client.clone(), "default");
    let names: Vec<String> = widgets
        .list(&ListParams::default())
        .await
        .unwrap()
        .iter()
        .map(|w| w.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["kept"]);
    assert_eq!(widgets.get("kept").await.unwrap().metadata.uid, kept.metadata.uid);
    assert!(
        Api::<ConfigMap>::namespaced(client.clone(), "default")
            .get_opt("owned")
            .await
            .unwrap()
            .is_none()
    );
    let next = widgets
        .create(&PostParams::default(), &widget("after", 1))
        .await
        .unwrap();
    assert_eq!(
        next.metadata.resource_version,
        Some((rv + 1).to_string()),
        "the counter continues, never reuses"
    );
    drop((widgets, client, server));
    std::fs::remove_dir_all(&dir).unwrap();
}

// Expectation from kube-runtime's watcher (`watcher.rs`: a 410 on resume means relist) and the API
// server's watch cache, which starts at the current revision after a restart.
#[tokio::test]
async fn a_watch_resumed_from_before_the_restart_gets_410_and_from_the_loaded_rv_continues() {
    let dir = data_dir("watch");
    let server = open(&dir).unwrap();
    let widgets: Api<Widget> = Api::namespaced(server.client(), "default");
    let first = widgets
        .create(&PostParams::default(), &widget("a", 1))
        .await
        .unwrap();
    widgets
        .create(&PostParams::default(), &widget("b", 1))
        .await
        .unwrap();
    let loaded = server.store.resource_version();
    drop((widgets, server));

    let server = reopen(&dir).await;
    let widgets: Api<Widget> = Api::namespaced(server.client(), "default");
    let old = first.metadata.resource_version.unwrap();
    let mut stream = widgets
        .watch(&WatchParams::default(), &old)
        .await
        .unwrap()
        .boxed();
    match stream.next().await {
        Some(Ok(WatchEvent::Error(e))) => assert_eq!(e.code, 410, "{e:?}"),
        other => panic!("expected a 410 ERROR event, got {other:?}"),
    }
    let mut stream = widgets
        .watch(&WatchParams::default(), &loaded.to_string())
        .await
        .unwrap()
        .boxed();
    widgets
        .create(&PostParams::default(), &widget("c", 1))
        .await
        .unwrap();
    match tokio::time::timeout(embedded_support::WAIT, stream.next()).await {
        Ok(Some(Ok(WatchEvent::Added(w)))) => assert_eq!(w.metadata.name.as_deref(), Some("c")),
        other => panic!("expected ADDED c, got {other:?}"),
    }
    drop((stream, widgets, server));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn a_second_server_on_the_same_directory_is_refused_and_changes_nothing() {
    let dir = data_dir("lock");
    let server = open(&dir).unwrap();
    let widgets: Api<Widget> = Api::namespaced(server.client(), "default");
    widgets
        .create(&PostParams::default(), &widget("a", 1))
        .await
        .unwrap();
    let err = open(&dir).err().expect("a second open is refused").to_string();
    assert!(
        err.contains("in use by another quotagate process") && err.contains(durable::FILE_NAME),
        "{err}"
    );
    widgets
        .create(&PostParams::default(), &widget("b", 1))
        .await
        .unwrap();
    drop((widgets, server));
    let server = reopen(&dir).await;
    let widgets: Api<Widget> = Api::namespaced(server.client(), "default");
    assert_eq!(widgets.list(&ListParams::default()).await.unwrap().items.len(), 2);
    drop((widgets, server));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_directory_of_another_format_is_refused_naming_both_versions() {
    let dir = data_dir("format");
    std::fs::create_dir_all(&dir).unwrap();
    {
        let db = redb::Database::create(dir.join(durable::FILE_NAME)).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut meta = txn
                .open_table(redb::TableDefinition::<&str, u64>::new("meta"))
                .unwrap();
            meta.insert("format", durable::FORMAT_VERSION + 1).unwrap();
            let mut info = txn
                .open_table(redb::TableDefinition::<&str, &str>::new("info"))
                .unwrap();
            info.insert("written_by", "9.9.9").unwrap();
        }
        txn.commit().unwrap();
    }
    let err = open(&dir).err().expect("refused").to_string();
    let want = format!(
        "written with data format {} (by quotagate 9.9.9)",
        durable::FORMAT_VERSION + 1
    );
    assert!(
        err.contains(&want) && err.contains(&format!("reads format {}", durable::FORMAT_VERSION)),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn corrupt_or_foreign_data_is_a_clear_error_naming_the_file() {
    let dir = data_dir("corrupt");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(durable::FILE_NAME);
    std::fs::write(
        &file,
        b"this is not a database, just some bytes that are long enough to look like a header",
    )
    .unwrap();
    let err = open(&dir).err().expect("refused").to_string();
    assert!(
        err.contains(&file.display().to_string()) && err.contains("cannot be read"),
        "{err}"
    );

    // A well-formed database holding an object that is not JSON.
    std::fs::remove_file(&file).unwrap();
    drop(open(&dir).unwrap());
    {
        let db = redb::Database::create(&file).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let def = redb::TableDefinition::<(&str, &str, &str, &str), &[u8]>::new("objects");
            let mut objects = txn.open_table(def).unwrap();
            objects
                .insert(
                    ("example.quotagate.io", "widgets", "default", "w"),
                    b"{broken".as_slice(),
                )
                .unwrap();
        }
        txn.commit().unwrap();
    }
    let err = open(&dir).err().expect("refused").to_string();
    assert!(
        err.contains(&file.display().to_string()) && err.contains("widgets.example.quotagate.io default/w"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

fn config_map(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}, "data": {"k": name}})).unwrap()
}

/// Issue 41 item 5, etcd's NOSPACE alarm as the model: when the disk refuses a commit (full,
/// read-only), writes are refused with the reason, reads and watches go on, the process neither
/// panics nor spins, nothing acknowledged is lost, and writes resume by themselves once the disk
/// takes them again.
#[tokio::test]
async fn a_disk_that_refuses_writes_refuses_them_keeps_reads_and_recovers() {
    let dir = data_dir("nospace");
    let server = open(&dir).unwrap();
    let client = server.client();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.create(&PostParams::default(), &config_map("before"))
        .await
        .unwrap();
    let mut watch = cms.watch(&WatchParams::default(), "0").await.unwrap().boxed();

    let faults = server.store.disk_faults().expect("a data directory");
    faults.set_refusing(true);
    // The write the disk refuses first is answered with the error (it may yet reach the disk).
    let first = cms
        .create(&PostParams::default(), &config_map("refused"))
        .await
        .unwrap_err();
    assert!(first.to_string().contains("no space left on device"), "{first}");
    // Then every write is refused before it is applied, naming why.
    let e = cms
        .create(&PostParams::default(), &config_map("never"))
        .await
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("writing failed, so the API refuses writes until the disk takes them again"),
        "{e}"
    );
    // Reads go on.
    assert_eq!(cms.get("before").await.unwrap().data.unwrap()["k"], "before");
    assert!(
        cms.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .iter()
            .any(|c| c.metadata.name.as_deref() == Some("before"))
    );

    faults.set_refusing(false);
    let deadline = tokio::time::Instant::now() + embedded_support::WAIT;
    loop {
        match cms.create(&PostParams::default(), &config_map("after")).await {
            Ok(_) => break,
            Err(e) => assert!(
                tokio::time::Instant::now() < deadline,
                "writes did not resume: {e}"
            ),
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    // The watch saw every change in order, with no error in between.
    let mut seen = Vec::new();
    while !seen.iter().any(|n: &String| n == "after") {
        match tokio::time::timeout(embedded_support::WAIT, watch.next())
            .await
            .expect("watch events")
            .unwrap()
            .unwrap()
        {
            WatchEvent::Added(c) => seen.push(c.metadata.name.unwrap()),
            WatchEvent::Error(e) => panic!("the watch failed during the alarm: {e:?}"),
            _ => {}
        }
    }
    assert_eq!(seen, ["before", "refused", "after"]);
    drop((watch, cms, client, server));
    let server = reopen(&dir).await;
    let names: Vec<String> = Api::<ConfigMap>::namespaced(server.client(), "default")
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    for acknowledged in ["before", "after"] {
        assert!(
            names.iter().any(|n| n == acknowledged),
            "{acknowledged} lost: {names:?}"
        );
    }
    assert!(
        !names.iter().any(|n| n == "never"),
        "a refused write was stored: {names:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Item 5 on a real full disk: `--data-dir` on a 4 MiB tmpfs that a filler file has almost filled.
/// Writes of large objects fill it; the write the disk refuses is answered with its error, reads go
/// on, and once the filler is deleted (space returns) writes resume with nothing acknowledged lost.
/// Needs root to mount the tmpfs; prints a skip line otherwise.
#[tokio::test]
async fn a_full_data_directory_refuses_writes_until_space_returns() {
    let mount = data_dir("full-disk");
    std::fs::create_dir_all(&mount).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=4m", "tmpfs"])
        .arg(&mount)
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        println!("skipped: mounting a tmpfs needs root");
        return;
    }
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let _unmount = Unmount(mount.clone());
    let dir = mount.join("data");
    let filler = mount.join("filler");
    std::fs::write(&filler, vec![0u8; 2 * 1024 * 1024]).unwrap();
    let server = open(&dir).unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let big = |name: &str| {
        let mut c = config_map(name);
        c.data = Some([("blob".to_string(), "x".repeat(200 * 1024))].into());
        c
    };
    let mut acknowledged = Vec::new();
    let mut refusal = None;
    for i in 0..64 {
        let name = format!("cm-{i}");
        match cms.create(&PostParams::default(), &big(&name)).await {
            Ok(_) => acknowledged.push(name),
            Err(e) => {
                refusal = Some(e.to_string());
                break;
            }
        }
    }
    let refusal = refusal.expect("a 4 MiB disk refuses some write");
    assert!(
        refusal.contains("state.redb") && refusal.contains("writing failed"),
        "{refusal}"
    );
    assert!(!acknowledged.is_empty(), "nothing fit before the disk filled");
    // Reads go on while the disk is full.
    assert!(cms.list(&ListParams::default()).await.unwrap().items.len() >= acknowledged.len());
    cms.get(&acknowledged[0]).await.unwrap();

    std::fs::remove_file(&filler).unwrap();
    let deadline = tokio::time::Instant::now() + embedded_support::WAIT;
    loop {
        match cms.create(&PostParams::default(), &config_map("after")).await {
            Ok(_) => break,
            Err(e) => assert!(
                tokio::time::Instant::now() < deadline,
                "writes did not resume once space returned: {e}"
            ),
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    acknowledged.push("after".into());
    drop((cms, server));
    let server = reopen(&dir).await;
    let names: Vec<String> = Api::<ConfigMap>::namespaced(server.client(), "default")
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    let lost: Vec<&String> = acknowledged.iter().filter(|n| !names.contains(n)).collect();
    assert!(lost.is_empty(), "acknowledged writes lost: {lost:?}");
    drop(server);
}
