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
    let config = ServerConfig { data_dir: Some(dir.to_path_buf()), ..ServerConfig::default() };
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
    widgets.patch_status("kept", &PatchParams::default(), &Patch::Merge(json!({"status": {"seen": "yes"}}))).await.unwrap();
    widgets.patch("kept", &PatchParams::default(), &Patch::Merge(json!({"spec": {"size": 2}}))).await.unwrap();
    // Deleted outright, deleted through its finalizer, deleted by the owner cascade.
    widgets.create(&pp, &widget("gone", 1)).await.unwrap();
    widgets.delete("gone", &DeleteParams::default()).await.unwrap();
    let mut held = widget("held", 1);
    held.metadata.finalizers = Some(vec!["example.quotagate.io/hold".into()]);
    widgets.create(&pp, &held).await.unwrap();
    widgets.delete("held", &DeleteParams::default()).await.unwrap();
    widgets.patch("held", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"finalizers": null}}))).await.unwrap();
    let owner = widgets.create(&pp, &widget("owner", 1)).await.unwrap();
    let owned: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "owned", "ownerReferences": [
        {"apiVersion": "example.quotagate.io/v1", "kind": "Widget", "name": "owner", "uid": owner.metadata.uid}]}, "data": {"a": "1"}}))
    .unwrap();
    cms.create(&pp, &owned).await.unwrap();
    widgets.delete("owner", &DeleteParams::default()).await.unwrap();
    let gadgets: Api<Gadget> = Api::all(client.clone());
    gadgets.create(&pp, &Gadget::new("g", GadgetSpec { color: "red".into() })).await.unwrap();

    let before = snapshot(&client).await;
    let rv = server.store.resource_version();
    drop((widgets, cms, gadgets, client, server));

    let server = reopen(&dir).await;
    assert_eq!(server.store.restored_rv(), rv, "the RV counter comes back (deletes advanced it too)");
    assert_eq!(server.store.resource_version(), rv);
    let client = server.client();
    assert_eq!(snapshot(&client).await, before, "objects, uids, timestamps, RVs, generations exactly");
    let widgets: Api<Widget> = Api::namespaced(client.clone(), "default");
    let names: Vec<String> = widgets.list(&ListParams::default()).await.unwrap().iter().map(|w| w.metadata.name.clone().unwrap()).collect();
    assert_eq!(names, ["kept"]);
    assert_eq!(widgets.get("kept").await.unwrap().metadata.uid, kept.metadata.uid);
    assert!(Api::<ConfigMap>::namespaced(client.clone(), "default").get_opt("owned").await.unwrap().is_none());
    let next = widgets.create(&PostParams::default(), &widget("after", 1)).await.unwrap();
    assert_eq!(next.metadata.resource_version, Some((rv + 1).to_string()), "the counter continues, never reuses");
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
    let first = widgets.create(&PostParams::default(), &widget("a", 1)).await.unwrap();
    widgets.create(&PostParams::default(), &widget("b", 1)).await.unwrap();
    let loaded = server.store.resource_version();
    drop((widgets, server));

    let server = reopen(&dir).await;
    let widgets: Api<Widget> = Api::namespaced(server.client(), "default");
    let old = first.metadata.resource_version.unwrap();
    let mut stream = widgets.watch(&WatchParams::default(), &old).await.unwrap().boxed();
    match stream.next().await {
        Some(Ok(WatchEvent::Error(e))) => assert_eq!(e.code, 410, "{e:?}"),
        other => panic!("expected a 410 ERROR event, got {other:?}"),
    }
    let mut stream = widgets.watch(&WatchParams::default(), &loaded.to_string()).await.unwrap().boxed();
    widgets.create(&PostParams::default(), &widget("c", 1)).await.unwrap();
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
    widgets.create(&PostParams::default(), &widget("a", 1)).await.unwrap();
    let err = open(&dir).err().expect("a second open is refused").to_string();
    assert!(err.contains("in use by another quotagate process") && err.contains(durable::FILE_NAME), "{err}");
    widgets.create(&PostParams::default(), &widget("b", 1)).await.unwrap();
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
            let mut meta = txn.open_table(redb::TableDefinition::<&str, u64>::new("meta")).unwrap();
            meta.insert("format", durable::FORMAT_VERSION + 1).unwrap();
            let mut info = txn.open_table(redb::TableDefinition::<&str, &str>::new("info")).unwrap();
            info.insert("written_by", "9.9.9").unwrap();
        }
        txn.commit().unwrap();
    }
    let err = open(&dir).err().expect("refused").to_string();
    let want = format!("written with data format {} (by quotagate 9.9.9)", durable::FORMAT_VERSION + 1);
    assert!(err.contains(&want) && err.contains(&format!("reads format {}", durable::FORMAT_VERSION)), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn corrupt_or_foreign_data_is_a_clear_error_naming_the_file() {
    let dir = data_dir("corrupt");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(durable::FILE_NAME);
    std::fs::write(&file, b"this is not a database, just some bytes that are long enough to look like a header").unwrap();
    let err = open(&dir).err().expect("refused").to_string();
    assert!(err.contains(&file.display().to_string()) && err.contains("cannot be read"), "{err}");

    // A well-formed database holding an object that is not JSON.
    std::fs::remove_file(&file).unwrap();
    drop(open(&dir).unwrap());
    {
        let db = redb::Database::create(&file).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let def = redb::TableDefinition::<(&str, &str, &str, &str), &[u8]>::new("objects");
            let mut objects = txn.open_table(def).unwrap();
            objects.insert(("example.quotagate.io", "widgets", "default", "w"), b"{broken".as_slice()).unwrap();
        }
        txn.commit().unwrap();
    }
    let err = open(&dir).err().expect("refused").to_string();
    assert!(err.contains(&file.display().to_string()) && err.contains("widgets.example.quotagate.io default/w"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
