//! Bad input against the embedded API server, as a careless or hostile user sends it: through the real
//! kubectl where a user would hit it, and as raw requests where kubectl cannot send it. Each case gets
//! the real server's answer (a 4xx naming the field or cause), nothing is stored or lost, and the
//! server keeps answering `kubectl get ns` afterwards.

mod embedded_support;

use embedded_support::kubectl::Kube;
use embedded_support::*;
use quotagate::embedded::{ServerConfig, StoreConfig};
use serde_json::{Value, json};

/// One raw request through the in-process client: (status code, body as JSON).
async fn raw(
    client: &kube::Client,
    method: &str,
    path: &str,
    content_type: &str,
    body: Vec<u8>,
) -> (u16, Value) {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::CONTENT_TYPE, content_type)
        .body(body)
        .unwrap();
    match client.request_text(req).await {
        Ok(text) => (200, serde_json::from_str(&text).unwrap_or(Value::String(text))),
        Err(kube::Error::Api(s)) => (s.code, json!({"reason": s.reason, "message": s.message})),
        Err(e) => panic!("{method} {path}: {e}"),
    }
}

async fn still_up(k: &Kube) {
    assert!(
        k.ok(&["get", "ns"]).await.contains("default"),
        "the server stopped answering"
    );
}

fn configmap(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name:?}\n  labels:\n    app: keep\ndata:\n  a: \"1\"\n"
    )
}

// Issue 13 item 1: names the real server refuses are refused, nothing is stranded, and a
// percent-encoded path names the object it encodes.
#[tokio::test]
async fn object_names_are_validated_and_paths_decoded() {
    let Some(k) = Kube::start("names").await else {
        return;
    };
    for bad in ["stuck wl", "a/b", "..", "ünï", "Upper", "-lead"] {
        let o = k.run_with(&["apply", "-f", "-"], Some(&configmap(bad))).await;
        assert!(!o.ok, "{bad:?} was stored: {}", o.stdout);
        // kubectl itself refuses a name that cannot be a path segment before it asks the server;
        // every other one must be the server's 422 naming the field.
        let expected = if matches!(bad, "a/b" | "..") {
            format!("invalid resource name {bad:?}")
        } else {
            format!("metadata.name: Invalid value: {bad:?}")
        };
        assert!(o.stderr.contains(&expected), "{bad:?}: {}", o.stderr);
        still_up(&k).await;
    }
    assert_eq!(
        k.ok(&["get", "cm", "-o", "jsonpath={.items[*].metadata.name}"])
            .await,
        "",
        "nothing stranded"
    );
    // A namespace name is a DNS label (kube-apiserver v1.36 says a dot is not allowed); so is a
    // Service name since v1.36 (`RelaxedServiceNameValidation`: a leading digit passes, upper case
    // does not).
    k.refused(&["create", "namespace", "team.a"], None, "must not contain dots")
        .await;
    let svc = "apiVersion: v1\nkind: Service\nmetadata:\n  name: Svc\nspec:\n  ports:\n  - port: 80\n";
    let apply = ["apply", "-f", "-"];
    k.refused(&apply, Some(svc), "RFC 1123 label").await;
    let labels = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: lab\n  labels:\n    \"!bad\": x\n";
    k.refused(&apply, Some(labels), "metadata.labels").await;
    let long = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: lab\n  labels:\n    k: {}\n",
        "v".repeat(64)
    );
    k.refused(&apply, Some(&long), "must be no more than 63 characters")
        .await;

    k.apply(&configmap("w1")).await;
    let client = k.srv.client();
    let (code, obj) = raw(
        &client,
        "GET",
        "/api/v1/namespaces/default/configmaps/w%31",
        "application/json",
        vec![],
    )
    .await;
    assert_eq!((code, obj["metadata"]["name"].as_str()), (200, Some("w1")));
    let (code, _) = raw(
        &client,
        "GET",
        "/api/v1/namespaces/default/configmaps/w1/status/extra",
        "application/json",
        vec![],
    )
    .await;
    assert_eq!(code, 404, "extra path segments name nothing");
    still_up(&k).await;
}

// Issue 13 item 4: a malformed selector is 400, never "match everything"; before, `-l '!!'`
// deleted every ConfigMap without a label named "!".
#[tokio::test]
async fn malformed_selectors_are_refused_and_delete_nothing() {
    let Some(k) = Kube::start("selectors").await else {
        return;
    };
    for n in ["c1", "c2", "c3"] {
        k.apply(&configmap(n)).await;
    }
    let long = format!("{}=x", "k".repeat(10_000));
    for sel in ["!!", "=", "a,,b", "a=b=c", long.as_str()] {
        let o = k.run_with(&["delete", "cm", "-l", sel], None).await;
        assert!(!o.ok, "delete -l {sel:?} succeeded: {}", o.stdout);
        assert!(
            o.stderr.contains("BadRequest") || o.stderr.contains("unable to parse"),
            "{sel:?}: {}",
            o.stderr
        );
    }
    let o = k
        .run_with(&["get", "cm", "--field-selector", "data.a=1"], None)
        .await;
    assert!(
        !o.ok && o.stderr.contains("\"data.a\" is not a known field selector"),
        "{}",
        o.stderr
    );
    assert_eq!(
        k.ok(&["get", "cm", "-o", "jsonpath={.items[*].metadata.name}"])
            .await,
        "c1 c2 c3",
        "nothing deleted"
    );
    assert_eq!(
        k.ok(&[
            "get",
            "cm",
            "-l",
            "app in (keep),!gone",
            "-o",
            "jsonpath={.items[*].metadata.name}"
        ])
        .await,
        "c1 c2 c3"
    );
    still_up(&k).await;
}

// Issue 13 item 5: bodies over 3 MiB are 413, objects over 1.5 MiB are 413, and the watch history
// is bounded in bytes, so writing and deleting large objects does not hold their memory.
#[tokio::test]
async fn oversized_requests_and_objects_are_refused() {
    let Some(k) = Kube::start("sizes").await else {
        return;
    };
    let client = k.srv.client();
    let big = |n: usize| {
        serde_json::to_vec(&json!({"metadata": {"name": "big"}, "data": {"a": "x".repeat(n)}})).unwrap()
    };
    let (code, st) = raw(
        &client,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        "application/json",
        big(4 << 20),
    )
    .await;
    assert_eq!(code, 413, "{st}");
    assert!(
        st["message"].as_str().unwrap().contains("limit is 3145728"),
        "{st}"
    );
    let (code, st) = raw(
        &client,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        "application/json",
        big(2 << 20),
    )
    .await;
    assert_eq!(code, 413, "{st}");
    assert!(
        st["message"].as_str().unwrap().contains("limit for one object"),
        "{st}"
    );
    let file = k.dir.join("big.yaml");
    std::fs::write(
        &file,
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\ndata:\n  a: {}\n",
            "x".repeat(2 << 20)
        ),
    )
    .unwrap();
    let o = k.run_with(&["create", "-f", file.to_str().unwrap()], None).await;
    assert!(
        !o.ok && o.stderr.contains("Request entity too large") || o.stderr.contains("limit for one object"),
        "{}",
        o.stderr
    );
    still_up(&k).await;

    let srv = server_with(ServerConfig {
        store: StoreConfig {
            history_bytes: 4 << 20,
            ..Default::default()
        },
        ..Default::default()
    });
    let cms: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(srv.client(), "default");
    for i in 0..20 {
        let cm = serde_json::from_value(
            json!({"metadata": {"name": format!("l{i}")}, "data": {"a": "x".repeat(1 << 20)}}),
        )
        .unwrap();
        cms.create(&Default::default(), &cm).await.unwrap();
        cms.delete(&format!("l{i}"), &Default::default()).await.unwrap();
    }
    let (events, bytes) = srv.store.history_size();
    assert!(
        bytes <= (4 << 20) + (1 << 20) + 4096,
        "history holds {bytes} bytes in {events} events"
    );
}

// Issue 13 item 7: what the real server refuses is refused, with the real status code.
#[tokio::test]
async fn api_semantics_match_the_real_server() {
    let Some(k) = Kube::start("semantics").await else {
        return;
    };
    for ns in ["kube-system", "default"] {
        let o = k.run_with(&["delete", "namespace", ns], None).await;
        assert!(
            !o.ok && o.stderr.contains("may not be deleted"),
            "{ns}: {}",
            o.stderr
        );
    }
    k.apply(&configmap("c1")).await;
    let cases: [(&str, &str, &str); 4] = [
        (
            "merge",
            r#"{"metadata":{"namespace":"other"}}"#,
            "does not match the namespace",
        ),
        ("merge", r#"{"metadata":{"uid":"forged"}}"#, "field is immutable"),
        (
            "json",
            r#"[{"op":"replace","path":"/kind","value":"Secret"}]"#,
            "kind",
        ),
        (
            "json",
            r#"[{"op":"replace","path":"/apiVersion","value":"v2"}]"#,
            "API version",
        ),
    ];
    for (kind, patch, want) in cases {
        let o = k
            .run_with(
                &["patch", "cm", "c1", &format!("--type={kind}"), "-p", patch],
                None,
            )
            .await;
        assert!(!o.ok && o.stderr.contains(want), "{patch}: {}", o.stderr);
    }
    let got: Value = serde_json::from_str(&k.ok(&["get", "cm", "c1", "-o", "json"]).await).unwrap();
    assert_eq!(
        (got["kind"].as_str(), got["metadata"]["namespace"].as_str()),
        (Some("ConfigMap"), Some("default"))
    );

    let client = k.srv.client();
    let path = "/api/v1/namespaces/default/configmaps/c1";
    for body in ["null", "[{\"op\":\"remove\",\"path\":\"/data\"}]", "3"] {
        let (code, st) = raw(
            &client,
            "PATCH",
            path,
            "application/merge-patch+json",
            body.into(),
        )
        .await;
        assert_eq!(code, 400, "merge patch {body}: {st}");
    }
    let apply = |name: &str, kind: &str| {
        serde_json::to_vec(&json!({"apiVersion": "v1", "kind": kind, "metadata": {"name": name}})).unwrap()
    };
    let (code, st) = raw(
        &client,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/x?fieldManager=t",
        "application/apply-patch+yaml",
        apply("y", "ConfigMap"),
    )
    .await;
    assert_eq!(code, 400, "apply with a mismatched name: {st}");
    let (code, st) = raw(
        &client,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/x?fieldManager=t",
        "application/apply-patch+yaml",
        apply("x", "Secret"),
    )
    .await;
    assert_eq!(code, 400, "apply with a mismatched kind: {st}");
    for method in ["POST", "DELETE", "PUT"] {
        let (code, _) = raw(&client, method, "/version", "application/json", b"{}".to_vec()).await;
        assert_eq!(code, 405, "{method} /version");
    }
    assert_eq!(
        k.ok(&["get", "cm", "-o", "jsonpath={.items[*].metadata.name}"])
            .await,
        "c1",
        "nothing created"
    );
    still_up(&k).await;
}

// Issue 13 item 8: the loopback listener serves TLS under its own CA and only to the kubeconfig's
// token. kubectl without the token, with a wrong one, or over plain HTTP gets nothing; the
// kubeconfig is the owner's alone.
#[tokio::test]
async fn only_the_kubeconfig_credentials_reach_the_listener() {
    let Some(k) = Kube::start("auth").await else {
        return;
    };
    let text = std::fs::read_to_string(&k.kubeconfig).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&k.kubeconfig).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let token = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("token: "))
        .expect("the kubeconfig carries a token")
        .to_string();
    assert!(text.contains(&format!("server: https://{}", k.addr)), "{text}");
    let variants = [
        (
            "no-token",
            text.replace(&format!("token: {token}"), "{}")
                .replace("user:\n    {}", "user: {}"),
        ),
        ("wrong-token", text.replace(&token, "not-the-token")),
    ];
    for (name, config) in &variants {
        let path = k.dir.join(name);
        std::fs::write(&path, config).unwrap();
        let o = k
            .run_with(&["--kubeconfig", path.to_str().unwrap(), "get", "ns"], None)
            .await;
        // Without any credentials kubectl asks for a username (stdin is closed); with a wrong
        // token it reports the 401.
        let said = format!("{}{}", o.stdout, o.stderr);
        assert!(!o.ok && !said.contains("kube-system"), "{name}: {said}");
        assert!(
            said.contains("must be logged in") || said.contains("Please enter Username"),
            "{name}: {said}"
        );
    }
    let server = format!("http://{}", k.addr);
    let o = k.run_with(&["--server", &server, "get", "ns"], None).await;
    assert!(!o.ok && !o.stdout.contains("default"), "plain HTTP: {}", o.stdout);
    still_up(&k).await;
}
