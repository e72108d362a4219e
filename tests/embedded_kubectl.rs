//! The real kubectl against the embedded server over loopback TCP.
//! kubectl comes from env QUOTAGATE_KUBECTL or .venv-kubectl/bin/kubectl (scripts/install-kubectl.sh).
//! Missing kubectl: the tests print a skip line, or fail when QUOTAGATE_REQUIRE_TOOLS=1.

mod embedded_support;

use embedded_support::kubectl::Kube;
use embedded_support::*;
use std::process::Stdio;

const WIDGET: &str = "apiVersion: example.quotagate.io/v1\nkind: Widget\nmetadata:\n  name: w1\n  labels:\n    app: demo\nspec:\n  size: 3\n";

#[tokio::test]
async fn kubectl_apply_get_patch_label_delete() {
    let Some(k) = Kube::start("crud").await else {
        return;
    };
    assert!(k.ok(&["version"]).await.contains("Server Version"));
    assert!(
        k.apply(WIDGET)
            .await
            .contains("widget.example.quotagate.io/w1 created")
    );
    assert!(k.apply(WIDGET).await.contains("unchanged"));
    assert!(
        k.apply(&WIDGET.replace("size: 3", "size: 4"))
            .await
            .contains("configured")
    );
    // Table with the CRD's printer columns, via a short name.
    let table = k.ok(&["get", "wd"]).await;
    assert!(
        table.contains("NAME") && table.contains("SIZE") && table.contains("w1") && table.contains('4'),
        "{table}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&k.ok(&["get", "widget", "w1", "-o", "json"]).await).unwrap();
    assert_eq!(json["spec"]["size"], 4);
    assert!(k.ok(&["get", "widgets", "-o", "yaml"]).await.contains("size: 4"));
    assert_eq!(
        k.ok(&["get", "widget", "w1", "-o", "jsonpath={.metadata.labels.app}"])
            .await,
        "demo"
    );
    assert!(
        k.ok(&[
            "patch",
            "widget",
            "w1",
            "--type=merge",
            "-p",
            r#"{"spec":{"size":5}}"#
        ])
        .await
        .contains("patched")
    );
    assert!(
        k.ok(&[
            "patch",
            "widget",
            "w1",
            "--type=json",
            "-p",
            r#"[{"op":"replace","path":"/spec/size","value":6}]"#
        ])
        .await
        .contains("patched")
    );
    assert!(
        k.ok(&["label", "widget", "w1", "tier=gold"])
            .await
            .contains("labeled")
    );
    assert_eq!(
        k.ok(&[
            "get",
            "widgets",
            "-l",
            "tier=gold",
            "-o",
            "jsonpath={.items[*].spec.size}"
        ])
        .await,
        "6"
    );
    let bad = k
        .run_with(
            &[
                "patch",
                "widget",
                "w1",
                "--type=merge",
                "-p",
                r#"{"spec":{"size":-1}}"#,
            ],
            None,
        )
        .await;
    assert!(
        !bad.ok && bad.stderr.contains("spec.size: Invalid value: must be >= 0"),
        "{}",
        bad.stderr
    );
    // Cluster-scoped kind, and a built-in kind through strategic merge on re-apply.
    assert!(
        k.apply(
            "apiVersion: example.quotagate.io/v1\nkind: Gadget\nmetadata:\n  name: g1\nspec:\n  color: red\n"
        )
        .await
        .contains("created")
    );
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c1\ndata:\n  a: \"1\"\n  b: \"2\"\n";
    k.apply(cm).await;
    k.apply(&cm.replace("  b: \"2\"\n", "")).await;
    assert_eq!(
        k.ok(&["get", "cm", "c1", "-o", "jsonpath={.data}"]).await,
        r#"{"a":"1"}"#
    );
    assert!(k.ok(&["delete", "widget", "w1"]).await.contains("deleted"));
    assert!(k.ok(&["delete", "gadget", "g1"]).await.contains("deleted"));
    let gone = k.run_with(&["get", "widget", "w1"], None).await;
    assert!(!gone.ok && gone.stderr.contains("NotFound"), "{}", gone.stderr);
}

#[tokio::test]
async fn kubectl_create_generators_send_protobuf() {
    let Some(k) = Kube::start("proto").await else {
        return;
    };
    assert!(
        k.ok(&["create", "configmap", "p1", "--from-literal=a=1"])
            .await
            .contains("created")
    );
    assert_eq!(k.ok(&["get", "cm", "p1", "-o", "jsonpath={.data.a}"]).await, "1");
    assert!(
        k.ok(&["create", "secret", "generic", "s1", "--from-literal=k=v"])
            .await
            .contains("created")
    );
    assert_eq!(
        k.ok(&["get", "secret", "s1", "-o", "jsonpath={.data.k}"]).await,
        "dg=="
    );
    assert!(k.ok(&["create", "namespace", "team-a"]).await.contains("created"));
    assert!(k.ok(&["get", "ns"]).await.contains("team-a"));
    // Every built-in kind is decoded from the Kubernetes schema, not only the three above.
    assert!(
        k.ok(&["create", "role", "reader", "--verb=get,list", "--resource=pods"])
            .await
            .contains("created")
    );
    assert_eq!(
        k.ok(&["get", "role", "reader", "-o", "jsonpath={.rules[0].verbs}"])
            .await,
        r#"["get","list"]"#
    );
    assert!(
        k.ok(&["create", "serviceaccount", "bot"])
            .await
            .contains("created")
    );
    assert!(
        k.ok(&[
            "create",
            "rolebinding",
            "bot-reads",
            "--role=reader",
            "--serviceaccount=default:bot"
        ])
        .await
        .contains("created")
    );
    assert_eq!(
        k.ok(&[
            "get",
            "rolebinding",
            "bot-reads",
            "-o",
            "jsonpath={.subjects[0].kind}/{.subjects[0].name}/{.roleRef.name}"
        ])
        .await,
        "ServiceAccount/bot/reader"
    );
    assert!(
        k.ok(&["create", "service", "clusterip", "web", "--tcp=80:8080"])
            .await
            .contains("created")
    );
    assert_eq!(
        k.ok(&[
            "get",
            "svc",
            "web",
            "-o",
            "jsonpath={.spec.ports[0].port}->{.spec.ports[0].targetPort} {.spec.type}"
        ])
        .await,
        "80->8080 ClusterIP"
    );
    assert_eq!(
        k.ok(&["get", "svc", "web", "-o", "jsonpath={.metadata.labels.app}"])
            .await,
        "web"
    );
    assert!(
        k.ok(&[
            "create",
            "priorityclass",
            "high",
            "--value=1000",
            "--description=urgent"
        ])
        .await
        .contains("created")
    );
    let pc = k.ok(&["get", "pc", "high"]).await;
    assert!(pc.contains("1000") && pc.contains("PreemptLowerPriority"), "{pc}");
    // A kind the server does not serve is still NotFound, as on a real server without that API.
    let deploy = k
        .run_with(&["create", "deployment", "d", "--image=nginx"], None)
        .await;
    assert!(
        !deploy.ok && !deploy.stderr.contains("protobuf"),
        "{}",
        deploy.stderr
    );
}

#[tokio::test]
async fn kubectl_wait_describe_and_watch() {
    let Some(k) = Kube::start("wait").await else {
        return;
    };
    k.apply(WIDGET).await;
    // wait --for=condition: a WatchList watch that must see the initial-events-end bookmark.
    let waiter = {
        let bin = k.bin.clone();
        let (kc, cache, home) = (k.kubeconfig.clone(), k.dir.join("cache"), k.dir.clone());
        tokio::spawn(async move {
            tokio::process::Command::new(bin)
                .args(["wait", "--for=condition=Ready", "widget/w1", "--timeout=30s"])
                .env("KUBECONFIG", kc)
                .env("KUBECACHEDIR", cache)
                .env("HOME", home)
                .output()
                .await
                .unwrap()
        })
    };
    let api: kube::Api<Widget> = kube::Api::namespaced(k.srv.client(), "default");
    // The condition is written once; kubectl sees it either live or in
    // its initial events (WatchList), both through its watch.
    let status = serde_json::json!({"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Test", "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1}]}});
    api.patch_status(
        "w1",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(status),
    )
    .await
    .unwrap();
    let out = tokio::time::timeout(std::time::Duration::from_secs(40), waiter)
        .await
        .unwrap()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("condition met"));
    let table = k.ok(&["get", "widget", "w1"]).await;
    assert!(table.contains("True"), "Ready printer column: {table}");

    let d = k.ok(&["describe", "widget", "w1"]).await;
    assert!(
        d.contains("Name:") && d.contains("w1") && d.contains("Size:"),
        "{d}"
    );
    k.apply("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c1\ndata:\n  a: \"1\"\n")
        .await;
    assert!(k.ok(&["describe", "cm", "c1"]).await.contains("c1"));

    // get -w: prints the current row, then a change; kubectl keeps the stream open, so kill it.
    let mut child = tokio::process::Command::new(&k.bin)
        .args(["get", "widgets", "-w", "--output-watch-events"])
        .env("KUBECONFIG", &k.kubeconfig)
        .env("KUBECACHEDIR", k.dir.join("cache"))
        .env("HOME", &k.dir)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stdout));
    let mut saw = Vec::new();
    let mut patched = false;
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    while let Ok(Ok(Some(line))) = tokio::time::timeout_at(deadline, lines.next_line()).await {
        saw.push(line.clone());
        if !patched && line.contains("w1") {
            api.patch(
                "w1",
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(serde_json::json!({"spec": {"size": 9}})),
            )
            .await
            .unwrap();
            patched = true;
        }
        if line.contains("MODIFIED") {
            break;
        }
    }
    let _ = child.kill().await;
    assert!(
        saw.iter().any(|l| l.contains("MODIFIED") && l.contains('9')),
        "{saw:?}"
    );
    assert!(
        k.ok(&["delete", "widget", "w1", "--wait=true"])
            .await
            .contains("deleted")
    );
}

#[tokio::test]
async fn kubectl_more_verbs() {
    let Some(k) = Kube::start("more").await else {
        return;
    };
    let w = WIDGET.replace("w1", "w2");
    assert!(k.run_with(&["create", "-f", "-"], Some(&w)).await.ok);
    let dup = k.run_with(&["create", "-f", "-"], Some(&w)).await;
    assert!(!dup.ok && dup.stderr.contains("AlreadyExists"), "{}", dup.stderr);
    assert!(
        k.run_with(&["replace", "-f", "-"], Some(&w.replace("size: 3", "size: 8")))
            .await
            .ok
    );
    assert_eq!(
        k.ok(&["get", "widget", "w2", "-o", "jsonpath={.spec.size}"])
            .await,
        "8"
    );
    // `replace` made kubectl-replace the owner of spec.size: a server-side apply of another value
    // conflicts, as on kube-apiserver, until the applier forces it.
    let conflict = k
        .run_with(
            &["apply", "--server-side", "-f", "-"],
            Some(&w.replace("size: 3", "size: 10")),
        )
        .await;
    assert!(
        !conflict.ok && conflict.stderr.contains("conflict with \"kubectl-replace\""),
        "{}{}",
        conflict.stdout,
        conflict.stderr
    );
    let ssa = k
        .run_with(
            &["apply", "--server-side", "--force-conflicts", "-f", "-"],
            Some(&w.replace("size: 3", "size: 10")),
        )
        .await;
    assert!(
        ssa.ok && ssa.stdout.contains("serverside-applied"),
        "{}{}",
        ssa.stdout,
        ssa.stderr
    );
    assert!(
        k.ok(&["annotate", "widget", "w2", "note=hi"])
            .await
            .contains("annotated")
    );
    let st = k
        .ok(&[
            "patch",
            "widget",
            "w2",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"seen":"kubectl"}}"#,
        ])
        .await;
    assert!(st.contains("patched"), "{st}");
    assert_eq!(
        k.ok(&["get", "widget", "w2", "-o", "jsonpath={.status.seen}"])
            .await,
        "kubectl"
    );
    let editor = k.dir.join("editor.sh");
    std::fs::write(&editor, "#!/bin/sh\nsed -i 's/size: 10/size: 11/' \"$1\"\n").unwrap();
    std::fs::set_permissions(&editor, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut cmd = tokio::process::Command::new(&k.bin);
    let edit = cmd
        .args(["edit", "widget", "w2"])
        .env("KUBECONFIG", &k.kubeconfig)
        .env("KUBECACHEDIR", k.dir.join("cache"))
        .env("HOME", &k.dir)
        .env("KUBE_EDITOR", &editor)
        .output()
        .await
        .unwrap();
    assert!(edit.status.success(), "{}", String::from_utf8_lossy(&edit.stderr));
    assert_eq!(
        k.ok(&["get", "widget", "w2", "-o", "jsonpath={.spec.size}"])
            .await,
        "11"
    );
    let all = k.ok(&["get", "all"]).await;
    assert!(all.contains("widget.example.quotagate.io/w2"), "{all}");
    assert!(k.ok(&["api-resources"]).await.contains("widgets"));
    assert!(k.ok(&["get", "widgets", "-A"]).await.contains("default"));
    assert!(
        k.ok(&["delete", "widgets", "-l", "app=demo"])
            .await
            .contains("deleted")
    );
    let gone = k
        .run_with(&["wait", "--for=delete", "widget/w2", "--timeout=10s"], None)
        .await;
    assert!(gone.ok, "{}", gone.stderr);
}

/// Server-side field validation through the real kubectl (issue 41): kubectl sends
/// `fieldValidation=Strict` by default, so a field the CRD's schema does not declare, or a key given
/// twice, refuses the request in the real server's words; `--validate=warn` creates it with a
/// warning per field; `--validate=false` says nothing.
#[tokio::test]
async fn unknown_and_duplicate_fields_are_refused_warned_or_ignored_as_asked() {
    let Some(k) = Kube::start("fieldvalidation").await else {
        return;
    };
    let unknown = WIDGET.replace("  size: 3\n", "  size: 3\n  colour: blue\n");
    let strict = k.run_with(&["apply", "-f", "-"], Some(&unknown)).await;
    assert!(!strict.ok, "{}", strict.stdout);
    assert!(
        strict.stderr.contains(r#"Widget in version "v1" cannot be handled as a Widget: strict decoding error: unknown field "spec.colour""#),
        "{}",
        strict.stderr
    );
    let missing = k.run_with(&["get", "widget", "w1"], None).await;
    assert!(!missing.ok, "nothing was stored");

    let warned = k
        .run_with(&["apply", "--validate=warn", "-f", "-"], Some(&unknown))
        .await;
    assert!(
        warned.ok && warned.stdout.contains("created"),
        "{} {}",
        warned.stdout,
        warned.stderr
    );
    assert!(
        warned.stderr.contains(r#"Warning: unknown field "spec.colour""#),
        "{}",
        warned.stderr
    );
    let ignored = k
        .run_with(
            &["apply", "--validate=false", "-f", "-"],
            Some(&unknown.replace("size: 3", "size: 4")),
        )
        .await;
    assert!(
        ignored.ok && !ignored.stderr.contains("Warning"),
        "{}",
        ignored.stderr
    );

    // Two `size:` keys: kubectl's own YAML decoding keeps the last, so through `apply -f` the server
    // never sees the duplicate; a body sent as it is (`create --raw`) gets the real server's refusal.
    let twice = r#"{"apiVersion":"example.quotagate.io/v1","kind":"Widget","metadata":{"name":"w2"},"spec":{"size":3,"size":5}}"#;
    let path = k.dir.join("twice.json");
    std::fs::write(&path, twice).unwrap();
    let raw = "/apis/example.quotagate.io/v1/namespaces/default/widgets?fieldValidation=Strict";
    let dup = k
        .run_with(&["create", "--raw", raw, "-f", path.to_str().unwrap()], None)
        .await;
    assert!(!dup.ok, "{}", dup.stdout);
    assert!(
        dup.stderr.contains(r#"duplicate field \"spec.size\""#)
            || dup.stderr.contains(r#"duplicate field "spec.size""#),
        "{}",
        dup.stderr
    );
    let warn = "/apis/example.quotagate.io/v1/namespaces/default/widgets?fieldValidation=Warn";
    let kept = k
        .run_with(&["create", "--raw", warn, "-f", path.to_str().unwrap()], None)
        .await;
    assert!(kept.ok, "{}", kept.stderr);
    assert_eq!(
        k.ok(&["get", "widget", "w2", "-o", "jsonpath={.spec.size}"])
            .await,
        "5",
        "the last one wins, as in Go's decoder"
    );
}

/// The same for built-in kinds, `metadata` and JSON patches (issue 41): a ConfigMap with a field its
/// kind does not have, or a misspelt metadata field, is refused by kubectl's default Strict in the real
/// server's words. `kubectl patch` sends no `fieldValidation`, so a JSON patch that adds an undeclared
/// field gets the server's default, a warning; the same patch asking for Strict is refused.
#[tokio::test]
async fn built_in_kinds_metadata_and_json_patches_are_validated_too() {
    let Some(k) = Kube::start("fieldvalidation-builtin").await else {
        return;
    };
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c1\ndata:\n  a: \"1\"\n";
    let bad_field = format!("{cm}dta:\n  b: \"2\"\n");
    let refused = k.run_with(&["apply", "-f", "-"], Some(&bad_field)).await;
    assert!(!refused.ok, "{}", refused.stdout);
    assert!(
        refused.stderr.contains(r#"ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: unknown field "dta""#),
        "{}",
        refused.stderr
    );
    let bad_meta = cm.replace("  name: c1\n", "  name: c1\n  lables:\n    x: y\n");
    let refused = k.run_with(&["apply", "-f", "-"], Some(&bad_meta)).await;
    assert!(
        !refused.ok && refused.stderr.contains(r#"unknown field "metadata.lables""#),
        "{}",
        refused.stderr
    );
    let created = k.run_with(&["apply", "-f", "-"], Some(cm)).await;
    assert!(created.ok, "{}", created.stderr);
    let add_unknown = r#"[{"op":"add","path":"/dta","value":{"b":"2"}}]"#;
    let client = {
        let kc = kube::config::Kubeconfig::read_from(&k.kubeconfig).unwrap();
        kube::Client::try_from(
            kube::Config::from_custom_kubeconfig(kc, &Default::default())
                .await
                .unwrap(),
        )
        .unwrap()
    };
    let cms: kube::Api<k8s_openapi::api::core::v1::ConfigMap> = kube::Api::namespaced(client, "default");
    let ops: json_patch::Patch = serde_json::from_str(add_unknown).unwrap();
    let strict = kube::api::PatchParams {
        field_validation: Some(kube::api::ValidationDirective::Strict),
        ..Default::default()
    };
    let refused = cms.patch("c1", &strict, &kube::api::Patch::<()>::Json(ops)).await;
    assert!(
        matches!(&refused, Err(kube::Error::Api(e)) if e.code == 400 && e.message.contains(r#"strict decoding error: unknown field "dta""#)),
        "{refused:?}"
    );
    let warned = k
        .run_with(
            &["patch", "configmap", "c1", "--type=json", "-p", add_unknown],
            None,
        )
        .await;
    assert!(
        warned.ok && warned.stderr.contains(r#"Warning: unknown field "dta""#),
        "{} {}",
        warned.stdout,
        warned.stderr
    );
    let fine = r#"[{"op":"add","path":"/data/b","value":"2"}]"#;
    let patched = k
        .run_with(&["patch", "configmap", "c1", "--type=json", "-p", fine], None)
        .await;
    assert!(patched.ok, "{}", patched.stderr);
    assert_eq!(
        k.ok(&["get", "configmap", "c1", "-o", "jsonpath={.data.b}"])
            .await,
        "2"
    );
}
