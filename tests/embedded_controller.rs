//! The real kube-runtime watcher and Controller against the embedded server: reconcile objects created
//! before and after start, resume after closed streams, relist after a 410 ERROR event.

mod embedded_support;

use embedded_support::*;
use futures::StreamExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::wait::await_condition;
use kube::runtime::watcher;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::timeout;

async fn reconcile(w: Arc<Widget>, api: Arc<Api<Widget>>) -> Result<Action, kube::Error> {
    let name = w.metadata.name.clone().unwrap_or_default();
    let seen = format!("gen-{}", w.metadata.generation.unwrap_or(0));
    if w.status.as_ref().and_then(|s| s.seen.as_deref()) != Some(seen.as_str()) {
        api.patch_status(
            &name,
            &PatchParams::apply("test-ctrl"),
            &Patch::Apply(json!({
                "apiVersion": "example.quotagate.io/v1", "kind": "Widget", "status": {"seen": seen}
            })),
        )
        .await?;
    }
    Ok(Action::await_change())
}

fn error_policy(_: Arc<Widget>, _: &kube::Error, _: Arc<Api<Widget>>) -> Action {
    Action::requeue(Duration::from_millis(100))
}

async fn wait_seen(api: &Api<Widget>, name: &str, seen: &str) {
    let want = seen.to_string();
    let cond = move |w: Option<&Widget>| {
        w.and_then(|w| w.status.as_ref()).and_then(|s| s.seen.as_deref()) == Some(want.as_str())
    };
    timeout(WAIT, await_condition(api.clone(), name, cond))
        .await
        .unwrap_or_else(|_| panic!("{name} not reconciled to {seen}"))
        .unwrap();
}

#[tokio::test]
async fn controller_reconciles_before_and_after_start_and_survives_stream_faults() {
    let srv = server();
    let api: Api<Widget> = Api::namespaced(srv.client(), "default");
    api.create(&PostParams::default(), &widget("before", 1))
        .await
        .unwrap();
    let ctx = Arc::new(api.clone());
    let ctrl = Controller::new(api.clone(), watcher::Config::default())
        .run(reconcile, error_policy, ctx)
        .for_each(|_| async {});
    let handle = tokio::spawn(ctrl);
    wait_seen(&api, "before", "gen-1").await;
    api.create(&PostParams::default(), &widget("after", 1))
        .await
        .unwrap();
    wait_seen(&api, "after", "gen-1").await;

    // Closed streams: the watcher resumes from its last RV and sees the next change.
    srv.store.close_watches();
    api.patch(
        "after",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"size": 2}})),
    )
    .await
    .unwrap();
    wait_seen(&api, "after", "gen-2").await;

    // Compacted history + closed streams: the resume gets a 410 ERROR event, the watcher relists.
    srv.store.expire_all();
    srv.store.close_watches();
    api.create(&PostParams::default(), &widget("after-compaction", 1))
        .await
        .unwrap();
    wait_seen(&api, "after-compaction", "gen-1").await;
    handle.abort();
}

#[tokio::test]
async fn watcher_relists_after_410() {
    let srv = server();
    let api: Api<Widget> = Api::namespaced(srv.client(), "default");
    api.create(&PostParams::default(), &widget("a", 1)).await.unwrap();
    let mut stream = watcher(api.clone(), watcher::Config::default()).boxed();
    let mut next = async || {
        timeout(WAIT, stream.next())
            .await
            .expect("watcher event in time")
            .expect("stream open")
    };
    assert!(matches!(next().await, Ok(watcher::Event::Init)));
    assert!(matches!(next().await, Ok(watcher::Event::InitApply(_))));
    assert!(matches!(next().await, Ok(watcher::Event::InitDone)));
    // Make the watcher resume from an RV that history no longer holds.
    api.create(&PostParams::default(), &widget("b", 1)).await.unwrap();
    assert!(matches!(next().await, Ok(watcher::Event::Apply(_))));
    srv.store.expire_all();
    srv.store.close_watches();
    let mut saw_error = false;
    loop {
        match next().await {
            Err(_) => saw_error = true,
            Ok(watcher::Event::Init) => break,
            Ok(other) => panic!("unexpected before relist: {other:?}"),
        }
    }
    assert!(saw_error, "the 410 surfaced as a watch error before the relist");
    let mut relisted = Vec::new();
    loop {
        match next().await {
            Ok(watcher::Event::InitApply(w)) => relisted.push(w.metadata.name.unwrap()),
            Ok(watcher::Event::InitDone) => break,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(relisted, ["a", "b"]);
}

#[tokio::test]
async fn streaming_list_watcher_gets_initial_events_end() {
    let srv = server();
    let api: Api<Widget> = Api::namespaced(srv.client(), "default");
    api.create(&PostParams::default(), &widget("a", 1)).await.unwrap();
    let mut stream = watcher(api.clone(), watcher::Config::default().streaming_lists()).boxed();
    let mut kinds = Vec::new();
    while kinds.last() != Some(&"InitDone") {
        let ev = timeout(WAIT, stream.next())
            .await
            .expect("in time")
            .expect("open")
            .expect("ok");
        kinds.push(match ev {
            watcher::Event::Init => "Init",
            watcher::Event::InitApply(_) => "InitApply",
            watcher::Event::InitDone => "InitDone",
            watcher::Event::Apply(_) => "Apply",
            watcher::Event::Delete(_) => "Delete",
        });
    }
    assert_eq!(kinds, ["Init", "InitApply", "InitDone"]);
}
