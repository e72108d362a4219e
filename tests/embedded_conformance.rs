//! API-server semantics, each checked through `kube::Api` against the embedded server.

mod embedded_support;

use embedded_support::*;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::wait::await_condition;
use serde_json::json;
use tokio::time::timeout;

fn err_code(e: kube::Error) -> (u16, String) {
    match e {
        kube::Error::Api(s) => (s.code, s.reason),
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"a": "1"}})).unwrap()
}

#[tokio::test]
async fn create_stamps_uid_timestamp_rv_and_generate_name() {
    let srv = server();
    let api: Api<Widget> = Api::namespaced(srv.client(), "default");
    let w = api.create(&PostParams::default(), &widget("a", 1)).await.unwrap();
    assert!(w.metadata.uid.as_deref().is_some_and(|u| u.len() == 36));
    assert!(w.metadata.creation_timestamp.is_some());
    assert_eq!(w.metadata.generation, Some(1));
    assert_eq!(
        w.metadata.labels.unwrap()["defaulted"],
        "yes",
        "admission hook mutated the object"
    );
    let mut gen_named = widget("", 2);
    gen_named.metadata.name = None;
    gen_named.metadata.generate_name = Some("w-".into());
    let g = api.create(&PostParams::default(), &gen_named).await.unwrap();
    let name = g.metadata.name.unwrap();
    assert!(name.starts_with("w-") && name.len() == 7, "{name}");
    let rv1: u64 = w.metadata.resource_version.unwrap().parse().unwrap();
    let rv2: u64 = g.metadata.resource_version.unwrap().parse().unwrap();
    assert!(rv2 > rv1);
}

#[tokio::test]
async fn conflicts_already_exists_and_missing_namespace() {
    let srv = server();
    let api: Api<Widget> = Api::namespaced(srv.client(), "default");
    let w = api.create(&PostParams::default(), &widget("a", 1)).await.unwrap();
    assert_eq!(
        err_code(
            api.create(&PostParams::default(), &widget("a", 1))
                .await
                .unwrap_err()
        ),
        (409, "AlreadyExists".into())
    );
    let mut fresh = w.clone();
    fresh.spec.size = 2;
    api.replace("a", &PostParams::default(), &fresh).await.unwrap();
    let mut stale = w.clone();
    stale.spec.size = 3;
    assert_eq!(
        err_code(
            api.replace("a", &PostParams::default(), &stale)
                .await
                .unwrap_err()
        ),
        (409, "Conflict".into())
    );
    let nowhere: Api<Widget> = Api::namespaced(srv.client(), "nowhere");
    assert_eq!(
        err_code(
            nowhere
                .create(&PostParams::default(), &widget("a", 1))
                .await
                .unwrap_err()
        ),
        (404, "NotFound".into())
    );
    let ns: Api<Namespace> = Api::all(srv.client());
    ns.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "nowhere"}})).unwrap(),
    )
    .await
    .unwrap();
    nowhere
        .create(&PostParams::default(), &widget("a", 1))
        .await
        .unwrap();
    assert_eq!(
        err_code(api.get("missing").await.unwrap_err()),
        (404, "NotFound".into())
    );
}

/// `DeleteOptions.preconditions`, as the real server checks them: a delete decided on a read that is
/// no longer current is refused with 409 Conflict naming both versions, and nothing is deleted.
#[tokio::test]
async fn delete_preconditions_refuse_a_stale_delete() {
    let srv = server();
    let api: Api<Widget> = Api::namespaced(srv.client(), "default");
    let read = api.create(&PostParams::default(), &widget("a", 1)).await.unwrap();
    let mut fresh = read.clone();
    fresh.spec.size = 2;
    api.replace("a", &PostParams::default(), &fresh).await.unwrap();
    let stale_rv = read.metadata.resource_version.clone().unwrap();
    let dp = |rv: Option<String>, uid: Option<String>| DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            resource_version: rv,
            uid,
        }),
        ..DeleteParams::default()
    };
    let e = api
        .delete("a", &dp(Some(stale_rv.clone()), None))
        .await
        .unwrap_err();
    let kube::Error::Api(s) = e else { panic!("{e:?}") };
    assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
    assert!(
        s.message.starts_with(&format!(
            "Operation cannot be fulfilled on Widget.example.quotagate.io \"a\": the ResourceVersion in the precondition ({stale_rv}) does not match the ResourceVersion in record ("
        )),
        "{}",
        s.message
    );
    let e = api
        .delete("a", &dp(None, Some("not-the-uid".into())))
        .await
        .unwrap_err();
    assert_eq!(err_code(e), (409, "Conflict".into()));
    let now = api.get("a").await.unwrap();
    assert_eq!(now.spec.size, 2, "a refused delete deletes nothing");
    api.delete(
        "a",
        &dp(now.metadata.resource_version.clone(), now.metadata.uid.clone()),
    )
    .await
    .unwrap();
    assert_eq!(err_code(api.get("a").await.unwrap_err()).0, 404);
}

#[tokio::test]
async fn generation_tracks_spec_only() {
    let srv = server();
    let api: Api<Widget> = Api::namespaced(srv.client(), "default");
    api.create(&PostParams::default(), &widget("a", 1)).await.unwrap();
    let pp = PatchParams::default();
    let w = api
        .patch(
            "a",
            &pp,
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .unwrap();
    assert_eq!(w.metadata.generation, Some(1), "metadata-only change");
    let w = api
        .patch_status("a", &pp, &Patch::Merge(json!({"status": {"seen": "yes"}})))
        .await
        .unwrap();
    assert_eq!(w.metadata.generation, Some(1), "status change");
    let w = api
        .patch("a", &pp, &Patch::Merge(json!({"spec": {"size": 5}})))
        .await
        .unwrap();
    assert_eq!(w.metadata.generation, Some(2), "spec change");
    let rv = w.metadata.resource_version.clone();
    let same = api
        .patch("a", &pp, &Patch::Merge(json!({"spec": {"size": 5}})))
        .await
        .unwrap();
    assert_eq!(
        same.metadata.resource_version, rv,
        "a no-op write keeps the resourceVersion"
    );
}

#[tokio::test]
async fn status_subresource_isolation() {
    let srv = server();
    let api: Api<Widget> = Api::namespaced(srv.client(), "default");
    api.create(&PostParams::default(), &widget("a", 1)).await.unwrap();
    let pp = PatchParams::default();
    api.patch_status(
        "a",
        &pp,
        &Patch::Merge(json!({"spec": {"size": 9}, "status": {"seen": "s1"}})),
    )
    .await
    .unwrap();
    let w = api
        .patch(
            "a",
            &pp,
            &Patch::Merge(json!({"spec": {"size": 2}, "status": {"seen": "main"}})),
        )
        .await
        .unwrap();
    assert_eq!(w.spec.size, 2, "status write did not change spec; main write did");
    assert_eq!(
        w.status.unwrap().seen.as_deref(),
        Some("s1"),
        "main write kept the stored status"
    );
    let mut full = api.get("a").await.unwrap();
    full.status = Some(WidgetStatus {
        seen: Some("put".into()),
        ..Default::default()
    });
    full.spec.size = 7;
    let w = api
        .replace_status("a", &PostParams::default(), &full)
        .await
        .unwrap();
    assert_eq!((w.spec.size, w.status.unwrap().seen.as_deref()), (2, Some("put")));
}

#[tokio::test]
async fn finalizers_hold_deletion_until_removed() {
    let srv = server();
    let api: Api<Widget> = Api::namespaced(srv.client(), "default");
    let mut w = widget("a", 1);
    w.metadata.finalizers = Some(vec!["example.io/hold".into()]);
    let created = api.create(&PostParams::default(), &w).await.unwrap();
    let rv = created.metadata.resource_version.clone().unwrap();
    api.delete("a", &DeleteParams::default()).await.unwrap();
    let held = api.get("a").await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    let pp = PatchParams::default();
    api.patch(
        "a",
        &pp,
        &Patch::Json::<()>(
            serde_json::from_value(json!([{"op": "remove", "path": "/metadata/finalizers"}])).unwrap(),
        ),
    )
    .await
    .unwrap();
    assert_eq!(err_code(api.get("a").await.unwrap_err()).0, 404);
    let events: Vec<_> = api
        .watch(&WatchParams::default().timeout(1), &rv)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| match e {
            WatchEvent::Added(_) => "ADDED",
            WatchEvent::Modified(_) => "MODIFIED",
            WatchEvent::Deleted(_) => "DELETED",
            WatchEvent::Bookmark(_) => "BOOKMARK",
            WatchEvent::Error(_) => "ERROR",
        })
        .collect();
    // As on the real server, removing the last finalizer of a deleting object deletes it in the same
    // write: no MODIFIED for the emptied finalizer list.
    assert_eq!(kinds, ["MODIFIED", "DELETED"], "deletionTimestamp set, then gone");
}

#[tokio::test]
async fn owner_references_cascade_in_background() {
    let srv = server();
    let widgets: Api<Widget> = Api::namespaced(srv.client(), "default");
    let cms: Api<ConfigMap> = Api::namespaced(srv.client(), "default");
    let owner = widgets
        .create(&PostParams::default(), &widget("owner", 1))
        .await
        .unwrap();
    let oref = json!([{"apiVersion": "example.quotagate.io/v1", "kind": "Widget", "name": "owner", "uid": owner.metadata.uid.clone().unwrap()}]);
    for n in ["dep1", "dep2"] {
        let c: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": n, "ownerReferences": oref}})).unwrap();
        cms.create(&PostParams::default(), &c).await.unwrap();
    }
    cms.create(&PostParams::default(), &cm("unrelated"))
        .await
        .unwrap();
    widgets.delete("owner", &DeleteParams::default()).await.unwrap();
    let left: Vec<String> = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|c| c.metadata.name.unwrap())
        .collect();
    assert_eq!(left, ["unrelated"]);
    // A dependent made after its owner went (a controller on a stale cache) is accepted, then collected,
    // as the garbage collector does with a dependent none of whose owners exists.
    let late: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "late", "ownerReferences": oref}})).unwrap();
    cms.create(&PostParams::default(), &late).await.unwrap();
    assert!(
        cms.get_opt("late").await.unwrap().is_none(),
        "a dependent of a deleted owner is collected"
    );
}

/// kube-apiserver adds the garbage collector's finalizer for an Orphan or Foreground delete and answers
/// with the pending owner (`registry/generic/registry/store.go`); the collector then orphans the
/// dependents, or deletes them and lets the owner go (`garbagecollector_test.go`'s orphan and
/// foreground cases). A batch/v1 Job deleted with no policy orphans (its strategy's default).
#[tokio::test]
async fn orphan_and_foreground_deletes_hold_the_owner_on_the_collectors_finalizer() {
    let srv = server();
    let owners: Api<ConfigMap> = Api::namespaced(srv.client(), "default");
    for (policy, finalizer) in [
        (kube::api::PropagationPolicy::Orphan, "orphan"),
        (kube::api::PropagationPolicy::Foreground, "foregroundDeletion"),
    ] {
        let owner = owners.create(&PostParams::default(), &cm("owner")).await.unwrap();
        let oref = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
            "uid": owner.metadata.uid.clone().unwrap(), "blockOwnerDeletion": true}]);
        let dep: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": "dep", "ownerReferences": oref}})).unwrap();
        owners.create(&PostParams::default(), &dep).await.unwrap();
        let dp = DeleteParams {
            propagation_policy: Some(policy.clone()),
            ..DeleteParams::default()
        };
        let answer = owners.delete("owner", &dp).await.unwrap();
        let pending = answer.left().expect("the pending owner, not a Status");
        assert_eq!(
            pending.metadata.finalizers.as_deref(),
            Some(&[finalizer.to_string()][..]),
            "{policy:?}"
        );
        assert!(pending.metadata.deletion_timestamp.is_some(), "{policy:?}");
        assert!(
            owners.get_opt("owner").await.unwrap().is_none(),
            "{policy:?}: the owner goes"
        );
        let dep = owners.get_opt("dep").await.unwrap();
        match policy {
            kube::api::PropagationPolicy::Orphan => {
                let dep = dep.expect("an orphaned dependent stays");
                assert_eq!(dep.metadata.owner_references, None, "its owner reference is gone");
                owners.delete("dep", &DeleteParams::default()).await.unwrap();
            }
            _ => assert!(dep.is_none(), "a foreground delete takes the dependent first"),
        }
    }
    // A finalizer of someone else's keeps the owner after the collector's is done.
    let mut held = cm("held");
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    owners.create(&PostParams::default(), &held).await.unwrap();
    let dp = DeleteParams {
        propagation_policy: Some(kube::api::PropagationPolicy::Orphan),
        ..DeleteParams::default()
    };
    let answer = owners.delete("held", &dp).await.unwrap().left().unwrap();
    assert_eq!(
        answer.metadata.finalizers.unwrap(),
        ["example.com/hold", "orphan"],
        "the answer carries both"
    );
    let now = owners.get("held").await.unwrap();
    assert_eq!(now.metadata.finalizers.unwrap(), ["example.com/hold"]);
    owners
        .patch(
            "held",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    assert!(owners.get_opt("held").await.unwrap().is_none());
}

#[tokio::test]
async fn label_and_field_selectors() {
    let srv = server();
    let cms: Api<ConfigMap> = Api::namespaced(srv.client(), "default");
    for (n, labels) in [
        ("a", json!({"app": "web", "tier": "front"})),
        ("b", json!({"app": "db"})),
        ("c", json!({})),
    ] {
        let c: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": n, "labels": labels}})).unwrap();
        cms.create(&PostParams::default(), &c).await.unwrap();
    }
    let names = |l: kube::core::ObjectList<ConfigMap>| {
        l.items
            .into_iter()
            .map(|c| c.metadata.name.unwrap())
            .collect::<Vec<_>>()
    };
    let cases: [(&str, &str, &[&str]); 8] = [
        ("app=web", "", &["a"]),
        ("app==db", "", &["b"]),
        ("app!=web", "", &["b", "c"]),
        ("app in (web,db)", "", &["a", "b"]),
        ("app notin (web)", "", &["b", "c"]),
        ("tier", "", &["a"]),
        ("!app", "", &["c"]),
        ("", "metadata.name=b", &["b"]),
    ];
    for (l, f, want) in cases {
        let got = names(
            cms.list(&ListParams::default().labels(l).fields(f))
                .await
                .unwrap(),
        );
        assert_eq!(got, want, "labels {l:?} fields {f:?}");
    }
    let all: Api<ConfigMap> = Api::all(srv.client());
    assert_eq!(
        names(
            all.list(&ListParams::default().fields("metadata.namespace=default,metadata.name!=a"))
                .await
                .unwrap()
        ),
        ["b", "c"]
    );
}

#[tokio::test]
async fn list_pagination_with_continue() {
    let srv = server();
    let cms: Api<ConfigMap> = Api::namespaced(srv.client(), "default");
    for i in 0..7 {
        cms.create(&PostParams::default(), &cm(&format!("cm{i}")))
            .await
            .unwrap();
    }
    let mut seen = Vec::new();
    let mut lp = ListParams::default().limit(3);
    let mut pages = 0;
    loop {
        let page = cms.list(&lp).await.unwrap();
        pages += 1;
        assert!(page.items.len() <= 3);
        seen.extend(page.items.into_iter().map(|c| c.metadata.name.unwrap()));
        match page.metadata.continue_ {
            Some(c) if !c.is_empty() => lp = ListParams::default().limit(3).continue_token(&c),
            _ => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(seen, (0..7).map(|i| format!("cm{i}")).collect::<Vec<_>>());
}

#[tokio::test]
async fn patch_flavours() {
    let srv = server();
    let cms: Api<ConfigMap> = Api::namespaced(srv.client(), "default");
    cms.create(&PostParams::default(), &cm("x")).await.unwrap();
    let pp = PatchParams::default();
    let c = cms
        .patch(
            "x",
            &pp,
            &Patch::Strategic(json!({"data": {"a": null, "b": "2"}})),
        )
        .await
        .unwrap();
    assert_eq!(
        c.data.unwrap().into_iter().collect::<Vec<_>>(),
        [("b".to_string(), "2".to_string())]
    );
    let failing: json_patch::Patch =
        serde_json::from_value(json!([{"op": "test", "path": "/data/b", "value": "nope"}])).unwrap();
    assert_eq!(
        err_code(
            cms.patch("x", &pp, &Patch::Json::<()>(failing))
                .await
                .unwrap_err()
        )
        .0,
        422
    );
    let rv_precondition = json!({"metadata": {"resourceVersion": "1"}, "data": {"c": "3"}});
    assert_eq!(
        err_code(
            cms.patch("x", &pp, &Patch::Merge(rv_precondition))
                .await
                .unwrap_err()
        )
        .0,
        409
    );

    let widgets: Api<Widget> = Api::namespaced(srv.client(), "default");
    let ap = PatchParams::apply("tester");
    let applied = json!({"apiVersion": "example.quotagate.io/v1", "kind": "Widget", "metadata": {"name": "w", "annotations": {"a": "1", "b": "2"}}, "spec": {"size": 1}});
    let w = widgets.patch("w", &ap, &Patch::Apply(applied)).await.unwrap();
    assert_eq!(w.spec.size, 1, "apply created the object");
    let again = json!({"apiVersion": "example.quotagate.io/v1", "kind": "Widget", "metadata": {"name": "w", "annotations": {"a": "1"}}, "spec": {"size": 2}});
    let w = widgets.patch("w", &ap, &Patch::Apply(again)).await.unwrap();
    assert_eq!(w.spec.size, 2);
    assert!(
        !w.metadata.annotations.unwrap().contains_key("b"),
        "a field the manager stopped applying is removed"
    );
    assert_eq!(
        err_code(
            widgets
                .patch("w", &pp, &Patch::Strategic(json!({"spec": {"size": 3}})))
                .await
                .unwrap_err()
        ),
        (415, "UnsupportedMediaType".into())
    );
}

#[tokio::test]
async fn admission_errors_are_422_with_causes() {
    let srv = server();
    let api: Api<Widget> = Api::namespaced(srv.client(), "default");
    match api
        .create(&PostParams::default(), &widget("bad", -1))
        .await
        .unwrap_err()
    {
        kube::Error::Api(s) => {
            assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
            assert_eq!(
                s.message,
                "Widget.example.quotagate.io \"bad\" is invalid: spec.size: Invalid value: must be >= 0"
            );
        }
        e => panic!("{e:?}"),
    }
    // The raw body carries details.causes (kube's Status type drops details).
    let resp = raw(&srv, "POST", "/apis/example.quotagate.io/v1/namespaces/default/widgets", json!({"apiVersion": "example.quotagate.io/v1", "kind": "Widget", "metadata": {"name": "b"}, "spec": {"size": -2}})).await;
    // As a real server: the cause's message leaves the field out (kubectl prints `* <field>: <message>`),
    // and details.kind is the Kind, not the plural.
    assert_eq!(
        (
            resp["details"]["kind"].as_str(),
            resp["details"]["group"].as_str()
        ),
        (Some("Widget"), Some("example.quotagate.io"))
    );
    assert_eq!(
        resp["details"]["causes"][0],
        json!({"reason": "FieldValueInvalid", "field": "spec.size", "message": "Invalid value: must be >= 0"})
    );
    api.create(&PostParams::default(), &widget("good", 0))
        .await
        .unwrap();
    let err = api
        .patch(
            "good",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": -5}})),
        )
        .await
        .unwrap_err();
    assert_eq!(err_code(err).0, 422, "updates are admitted too");
}

async fn raw(
    srv: &std::sync::Arc<quotagate::embedded::EmbeddedServer>,
    method: &str,
    uri: &str,
    body: serde_json::Value,
) -> serde_json::Value {
    use tower::ServiceExt;
    let req = http::Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json")
        .body(axum::body::Body::from(serde_json::to_vec(&body).unwrap()))
        .unwrap();
    let resp = srv.router().oneshot(req).await.unwrap();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX).await.unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

#[tokio::test]
async fn cluster_scoped_kinds() {
    let srv = server();
    let api: Api<Gadget> = Api::all(srv.client());
    let g = api
        .create(
            &PostParams::default(),
            &Gadget::new("g", GadgetSpec { color: "red".into() }),
        )
        .await
        .unwrap();
    assert_eq!(g.metadata.namespace, None);
    assert_eq!(api.list(&ListParams::default()).await.unwrap().items.len(), 1);
    // No status subresource: status travels with main writes and bumps generation.
    let g = api
        .patch(
            "g",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"color": "blue"}})),
        )
        .await
        .unwrap();
    assert_eq!(g.metadata.generation, Some(2));
}

#[tokio::test]
async fn watch_replays_from_rv_then_streams_live() {
    let srv = server();
    let api: Api<ConfigMap> = Api::namespaced(srv.client(), "default");
    let first = api.create(&PostParams::default(), &cm("a")).await.unwrap();
    api.create(&PostParams::default(), &cm("b")).await.unwrap();
    let rv = first.metadata.resource_version.unwrap();
    let mut stream = api.watch(&WatchParams::default(), &rv).await.unwrap().boxed();
    match next_event(&mut stream).await {
        WatchEvent::Added(c) => assert_eq!(
            c.metadata.name.as_deref(),
            Some("b"),
            "replay starts after the given RV"
        ),
        e => panic!("{e:?}"),
    }
    api.delete("a", &DeleteParams::default()).await.unwrap();
    match next_event(&mut stream).await {
        WatchEvent::Deleted(c) => assert_eq!(c.metadata.name.as_deref(), Some("a")),
        e => panic!("{e:?}"),
    }
    // RV "0": synthetic ADDED for what exists now.
    let mut from_zero = api.watch(&WatchParams::default(), "0").await.unwrap().boxed();
    match next_event(&mut from_zero).await {
        WatchEvent::Added(c) => assert_eq!(c.metadata.name.as_deref(), Some("b")),
        e => panic!("{e:?}"),
    }
}

#[tokio::test]
async fn watch_timeout_bookmarks_and_initial_events() {
    let cfg = quotagate::embedded::ServerConfig {
        bookmark_interval: std::time::Duration::from_millis(200),
        ..Default::default()
    };
    let srv = server_with(cfg);
    let api: Api<ConfigMap> = Api::namespaced(srv.client(), "default");
    api.create(&PostParams::default(), &cm("a")).await.unwrap();
    // timeoutSeconds ends the stream; with bookmarks allowed, idle periods carry BOOKMARKs.
    let events: Vec<_> = timeout(
        WAIT,
        api.watch(&WatchParams::default().timeout(1), "0")
            .await
            .unwrap()
            .try_collect::<Vec<_>>(),
    )
    .await
    .expect("the stream ended by itself")
    .unwrap();
    assert!(matches!(events[0], WatchEvent::Added(_)));
    assert!(
        events.iter().any(|e| matches!(e, WatchEvent::Bookmark(_))),
        "{events:?}"
    );
    // WatchList: ADDED for current objects, then the initial-events-end bookmark.
    let wl: Vec<_> = api
        .watch(&WatchParams::default().initial_events().timeout(1), "0")
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert!(matches!(wl[0], WatchEvent::Added(_)));
    match &wl[1] {
        WatchEvent::Bookmark(b) => {
            assert_eq!(
                b.metadata
                    .annotations
                    .get("k8s.io/initial-events-end")
                    .map(String::as_str),
                Some("true")
            );
            assert_eq!(b.types.kind, "ConfigMap");
        }
        e => panic!("{e:?}"),
    }
}

#[tokio::test]
async fn watch_from_compacted_rv_is_200_with_error_410() {
    let srv = server();
    let api: Api<ConfigMap> = Api::namespaced(srv.client(), "default");
    let c = api.create(&PostParams::default(), &cm("a")).await.unwrap();
    api.create(&PostParams::default(), &cm("b")).await.unwrap();
    srv.store.compact();
    let events: Vec<_> = api
        .watch(&WatchParams::default(), &c.metadata.resource_version.unwrap())
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    match &events[..] {
        [WatchEvent::Error(e)] => assert_eq!((e.code, e.reason.as_str()), (410, "Expired")),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn bounded_history_expires_old_rvs() {
    let cfg = quotagate::embedded::ServerConfig {
        store: quotagate::embedded::StoreConfig {
            history_limit: 5,
            ..Default::default()
        },
        ..Default::default()
    };
    let srv = server_with(cfg);
    let api: Api<ConfigMap> = Api::namespaced(srv.client(), "default");
    let first = api.create(&PostParams::default(), &cm("a")).await.unwrap();
    for i in 0..10 {
        api.create(&PostParams::default(), &cm(&format!("x{i}")))
            .await
            .unwrap();
    }
    let events: Vec<_> = api
        .watch(&WatchParams::default(), &first.metadata.resource_version.unwrap())
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert!(
        matches!(&events[..], [WatchEvent::Error(e)] if e.code == 410),
        "{events:?}"
    );
}

#[tokio::test]
async fn injected_write_faults() {
    let srv = server();
    let api: Api<ConfigMap> = Api::namespaced(srv.client(), "default");
    let m = quotagate::embedded::WriteMatch {
        verb: Some("create".into()),
        plural: Some("configmaps".into()),
        ..Default::default()
    };
    srv.store.faults.fail_nth_write_500(m.clone(), 2);
    api.create(&PostParams::default(), &cm("one")).await.unwrap();
    assert_eq!(
        err_code(api.create(&PostParams::default(), &cm("two")).await.unwrap_err()).0,
        500
    );
    api.create(&PostParams::default(), &cm("two")).await.unwrap();
    srv.store.faults.fail_nth_write_409(m, 1);
    assert_eq!(
        err_code(
            api.create(&PostParams::default(), &cm("three"))
                .await
                .unwrap_err()
        )
        .0,
        409
    );
}

#[tokio::test]
async fn pods_terminate_gracefully_when_bound() {
    let srv = server();
    let pods: Api<Pod> = Api::namespaced(srv.client(), "default");
    let p: Pod = serde_json::from_value(
        json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}),
    )
    .unwrap();
    let created = pods.create(&PostParams::default(), &p).await.unwrap();
    assert_eq!(created.status.unwrap().phase.as_deref(), Some("Pending"));
    pods.delete("p", &DeleteParams::default()).await.unwrap();
    assert_eq!(
        err_code(pods.get("p").await.unwrap_err()).0,
        404,
        "an unbound pod goes at once"
    );
    let bound: Pod = serde_json::from_value(json!({"metadata": {"name": "q"}, "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]}})).unwrap();
    pods.create(&PostParams::default(), &bound).await.unwrap();
    pods.delete("q", &DeleteParams::default()).await.unwrap();
    assert!(
        pods.get("q").await.unwrap().metadata.deletion_timestamp.is_some(),
        "a bound pod waits for its node"
    );
    pods.delete(
        "q",
        &DeleteParams {
            grace_period_seconds: Some(0),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let gone = await_condition(pods.clone(), "q", |p: Option<&Pod>| p.is_none());
    timeout(WAIT, gone).await.unwrap().unwrap();
}

async fn next_event(
    s: &mut futures::stream::BoxStream<'static, kube::Result<WatchEvent<ConfigMap>>>,
) -> WatchEvent<ConfigMap> {
    timeout(WAIT, s.next())
        .await
        .expect("an event in time")
        .expect("stream open")
        .expect("a decodable event")
}

#[tokio::test]
async fn filtered_watch_sees_objects_enter_and_leave_the_selection() {
    let srv = server();
    let api: Api<ConfigMap> = Api::namespaced(srv.client(), "default");
    let c = api.create(&PostParams::default(), &cm("a")).await.unwrap();
    let pp = PatchParams::default();
    api.patch(
        "a",
        &pp,
        &Patch::Merge(json!({"metadata": {"labels": {"sel": "yes"}}})),
    )
    .await
    .unwrap();
    api.patch("a", &pp, &Patch::Merge(json!({"data": {"b": "2"}})))
        .await
        .unwrap();
    api.patch(
        "a",
        &pp,
        &Patch::Merge(json!({"metadata": {"labels": {"sel": "no"}}})),
    )
    .await
    .unwrap();
    let wp = WatchParams::default().labels("sel=yes").timeout(1);
    let events: Vec<_> = api
        .watch(&wp, &c.metadata.resource_version.unwrap())
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| match e {
            WatchEvent::Added(_) => "ADDED",
            WatchEvent::Modified(_) => "MODIFIED",
            WatchEvent::Deleted(_) => "DELETED",
            _ => "other",
        })
        .collect();
    assert_eq!(kinds, ["ADDED", "MODIFIED", "DELETED"]);
}

#[tokio::test]
async fn deleting_a_namespace_deletes_its_objects() {
    let srv = server();
    let nss: Api<Namespace> = Api::all(srv.client());
    nss.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "team"}})).unwrap(),
    )
    .await
    .unwrap();
    let team: Api<ConfigMap> = Api::namespaced(srv.client(), "team");
    team.create(&PostParams::default(), &cm("x")).await.unwrap();
    let default: Api<ConfigMap> = Api::namespaced(srv.client(), "default");
    default.create(&PostParams::default(), &cm("x")).await.unwrap();
    nss.delete("team", &DeleteParams::default()).await.unwrap();
    assert_eq!(err_code(team.get("x").await.unwrap_err()).0, 404);
    default.get("x").await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writers_one_total_order() {
    let srv = server();
    let api: Api<ConfigMap> = Api::namespaced(srv.client(), "default");
    let start_rv = srv.store.resource_version().to_string();
    let mut tasks = Vec::new();
    for t in 0..8 {
        let api = api.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..25 {
                let name = format!("t{t}-{i}");
                api.create(&PostParams::default(), &cm(&name)).await.unwrap();
                api.patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"data": {"n": i.to_string()}})),
                )
                .await
                .unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let events: Vec<_> = api
        .watch(&WatchParams::default().timeout(1), &start_rv)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let rvs: Vec<u64> = events
        .iter()
        .filter_map(|e| match e {
            WatchEvent::Added(c) | WatchEvent::Modified(c) => c
                .metadata
                .resource_version
                .as_deref()
                .and_then(|r| r.parse().ok()),
            _ => None,
        })
        .collect();
    assert_eq!(rvs.len(), 400, "every create and patch is one event");
    assert!(
        rvs.windows(2).all(|w| w[0] < w[1]),
        "strictly increasing resourceVersions"
    );
}
