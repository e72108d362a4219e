//! What operators read through the real kubectl: events under both API versions and their TTL,
//! `kubectl auth can-i` against what RBAC then enforces, and `kubectl logs` of a simulated pod.
//! kubectl comes from env QUOTAGATE_KUBECTL or .venv-kubectl/bin/kubectl (scripts/install-kubectl.sh).

mod embedded_support;

use embedded_support::kubectl::Kube;
use embedded_support::*;
use std::time::Duration;

const WIDGET: &str =
    "apiVersion: example.quotagate.io/v1\nkind: Widget\nmetadata:\n  name: w1\nspec:\n  size: 3\n";

fn core_event(name: &str, about: &str, uid: &str, reason: &str, message: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Event\nmetadata:\n  name: {name}\n  namespace: default\ninvolvedObject:\n  apiVersion: example.quotagate.io/v1\n  kind: Widget\n  name: {about}\n  namespace: default\n  uid: \"{uid}\"\nreason: {reason}\nmessage: {message}\ntype: Normal\nsource:\n  component: tester\ncount: 1\nfirstTimestamp: \"2026-01-01T00:00:00Z\"\nlastTimestamp: \"2026-01-01T00:00:00Z\"\n"
    )
}

#[tokio::test]
async fn events_are_one_store_under_two_versions_and_never_merged() {
    let Some(k) = Kube::start("ops-events").await else {
        return;
    };
    k.apply(WIDGET).await;
    k.apply(&WIDGET.replace("name: w1", "name: w2")).await;
    let uid = k
        .ok(&["get", "widget", "w1", "-o", "jsonpath={.metadata.uid}"])
        .await;
    // Same object, reason and source, different messages: two events, as the real store keeps them.
    let docs = [
        core_event("w1.a", "w1", &uid, "Resized", "grew to 3"),
        core_event("w1.b", "w1", &uid, "Resized", "shrank to 2"),
        core_event("w2.a", "w2", "other", "Resized", "about w2 only"),
    ];
    assert!(
        k.run_with(&["create", "-f", "-"], Some(&docs.join("---\n")))
            .await
            .ok
    );
    // One written through events.k8s.io/v1, in that version's names.
    let v1 = format!(
        "apiVersion: events.k8s.io/v1\nkind: Event\nmetadata:\n  name: w1.c\n  namespace: default\neventTime: \"2026-01-01T00:00:01.000000Z\"\nreportingController: widget-ctrl\nreportingInstance: widget-ctrl-0\naction: Resize\nreason: Settled\ntype: Warning\nnote: settled at 3\nregarding:\n  apiVersion: example.quotagate.io/v1\n  kind: Widget\n  name: w1\n  namespace: default\n  uid: \"{uid}\"\n"
    );
    assert!(k.run_with(&["create", "-f", "-"], Some(&v1)).await.ok);

    let names = |out: String| {
        let mut v: Vec<String> = out.split_whitespace().map(String::from).collect();
        v.sort();
        v
    };
    let core = names(
        k.ok(&["get", "events", "-o", "jsonpath={.items[*].metadata.name}"])
            .await,
    );
    assert_eq!(core, ["w1.a", "w1.b", "w1.c", "w2.a"]);
    assert_eq!(
        names(
            k.ok(&[
                "get",
                "events.events.k8s.io",
                "-o",
                "jsonpath={.items[*].metadata.name}"
            ])
            .await
        ),
        core
    );
    // Each version's field names, converted as the real server converts them.
    assert_eq!(
        k.ok(&[
            "get",
            "event",
            "w1.c",
            "-o",
            "jsonpath={.message}|{.reportingComponent}|{.involvedObject.name}"
        ])
        .await,
        "settled at 3|widget-ctrl|w1"
    );
    assert_eq!(
        k.ok(&[
            "get",
            "events.events.k8s.io",
            "w1.a",
            "-o",
            "jsonpath={.note}|{.deprecatedSource.component}|{.regarding.name}|{.deprecatedCount}"
        ])
        .await,
        "grew to 3|tester|w1|1"
    );
    // Field selectors of both versions.
    let sel = |args: &'static [&'static str]| {
        let k = &k;
        async move { names(k.ok(args).await) }
    };
    assert_eq!(
        sel(&[
            "get",
            "events",
            "--field-selector",
            "involvedObject.name=w1,reason=Resized",
            "-o",
            "jsonpath={.items[*].metadata.name}"
        ])
        .await,
        ["w1.a", "w1.b"]
    );
    assert_eq!(
        sel(&[
            "get",
            "events",
            "--field-selector",
            "source=widget-ctrl",
            "-o",
            "jsonpath={.items[*].metadata.name}"
        ])
        .await,
        ["w1.c"]
    );
    assert_eq!(
        sel(&[
            "get",
            "events",
            "--field-selector",
            "type=Warning",
            "-o",
            "jsonpath={.items[*].metadata.name}"
        ])
        .await,
        ["w1.c"]
    );
    assert_eq!(
        sel(&[
            "get",
            "events",
            "--field-selector",
            "reportingComponent=widget-ctrl",
            "-o",
            "jsonpath={.items[*].metadata.name}"
        ])
        .await,
        ["w1.c"]
    );
    assert_eq!(
        sel(&[
            "get",
            "events.events.k8s.io",
            "--field-selector",
            "regarding.name=w2",
            "-o",
            "jsonpath={.items[*].metadata.name}"
        ])
        .await,
        ["w2.a"]
    );
    assert_eq!(
        sel(&[
            "get",
            "events.events.k8s.io",
            "--field-selector",
            "reportingController=widget-ctrl",
            "-o",
            "jsonpath={.items[*].metadata.name}"
        ])
        .await,
        ["w1.c"]
    );
    k.refused(
        &["get", "events", "--field-selector", "message=x"],
        None,
        "field label not supported: message",
    )
    .await;
    // describe lists both same-reason events of w1 and the events.k8s.io one, none of w2's.
    let d = k.ok(&["describe", "widget", "w1"]).await;
    for want in ["grew to 3", "shrank to 2", "settled at 3", "widget-ctrl"] {
        assert!(d.contains(want), "describe w1 lacks {want:?}:\n{d}");
    }
    assert!(!d.contains("about w2 only"), "{d}");
    // A patch through events.k8s.io lands in the stored event, seen through core v1.
    k.ok(&[
        "patch",
        "events.events.k8s.io",
        "w1.c",
        "--type=merge",
        "-p",
        r#"{"note":"settled at 4","series":{"count":2,"lastObservedTime":"2026-01-01T00:00:02.000000Z"}}"#,
    ])
    .await;
    assert_eq!(
        k.ok(&[
            "get",
            "event",
            "w1.c",
            "-o",
            "jsonpath={.message} {.series.count}"
        ])
        .await,
        "settled at 4 2"
    );
    let table = k.ok(&["get", "events"]).await;
    assert!(
        table.contains("LAST SEEN") && table.contains("widget/w1") && table.contains("settled at 4"),
        "{table}"
    );
}

#[tokio::test]
async fn events_expire_after_the_event_ttl() {
    let srv = server_with(quotagate::embedded::ServerConfig {
        event_ttl: Duration::from_millis(300),
        ..Default::default()
    });
    let Some(k) = Kube::start_on("ops-ttl", srv).await else {
        return;
    };
    assert!(
        k.run_with(
            &["create", "-f", "-"],
            Some(&core_event("short.1", "w1", "u", "Brief", "gone soon"))
        )
        .await
        .ok
    );
    // Waits on a watch for the DELETED the expiry sends.
    let out = k
        .ok(&["wait", "--for=delete", "event/short.1", "--timeout=20s"])
        .await;
    assert!(out.contains("deleted") || out.contains("condition met"), "{out}");
    k.refused(&["get", "event", "short.1"], None, "NotFound").await;
}

#[tokio::test]
async fn auth_can_i_answers_what_rbac_then_enforces() {
    let Some(k) = Kube::start("ops-auth").await else {
        return;
    };
    // The kubeconfig's token may do everything, as cluster-admin.
    assert_eq!(k.ok(&["auth", "can-i", "create", "widgets"]).await.trim(), "yes");
    assert_eq!(
        k.ok(&["auth", "can-i", "delete", "pods", "-A"]).await.trim(),
        "yes"
    );
    // A ServiceAccount that may read pods in default, and nothing else.
    k.ok(&["create", "serviceaccount", "bot"]).await;
    k.ok(&[
        "create",
        "role",
        "pod-reader",
        "--verb=get,list,watch",
        "--resource=pods",
    ])
    .await;
    k.ok(&[
        "create",
        "rolebinding",
        "bot-reads",
        "--role=pod-reader",
        "--serviceaccount=default:bot",
    ])
    .await;
    k.ok(&["create", "namespace", "other"]).await;
    k.ok(&["run", "p1", "--image=busybox"]).await;
    let bot = "--as=system:serviceaccount:default:bot";
    let can = |args: &'static [&'static str]| {
        let k = &k;
        async move {
            let mut a = vec!["auth", "can-i"];
            a.extend_from_slice(args);
            a.push(bot);
            let o = k.run_with(&a, None).await;
            (o.ok, o.stdout.trim().to_string())
        }
    };
    // Each answer, then the request itself as that user: allowed exactly when can-i said yes.
    assert_eq!(can(&["list", "pods"]).await, (true, "yes".to_string()));
    assert!(k.ok(&["get", "pods", bot]).await.contains("p1"));
    assert_eq!(can(&["get", "pods/p1"]).await, (true, "yes".to_string()));
    assert_eq!(can(&["delete", "pods"]).await, (false, "no".to_string()));
    k.refused(&["delete", "pod", "p1", bot], None, "User \"system:serviceaccount:default:bot\" cannot delete resource \"pods\" in API group \"\" in the namespace \"default\"").await;
    assert_eq!(
        can(&["list", "pods", "-n", "other"]).await,
        (false, "no".to_string())
    );
    k.refused(&["get", "pods", "-n", "other", bot], None, "Forbidden")
        .await;
    assert_eq!(can(&["create", "configmaps"]).await, (false, "no".to_string()));
    k.refused(
        &["create", "configmap", "c", "--from-literal=a=1", bot],
        None,
        "cannot create resource \"configmaps\"",
    )
    .await;
    assert_eq!(
        can(&["create", "widgets.example.quotagate.io"]).await,
        (false, "no".to_string())
    );
    k.refused(&["apply", "-f", "-", bot], Some(WIDGET), "Forbidden")
        .await;
    // Granting it changes both answers alike.
    k.ok(&[
        "create",
        "clusterrole",
        "widget-maker",
        "--verb=create,get",
        "--resource=widgets.example.quotagate.io",
    ])
    .await;
    k.ok(&[
        "create",
        "clusterrolebinding",
        "bot-makes",
        "--clusterrole=widget-maker",
        "--serviceaccount=default:bot",
    ])
    .await;
    assert_eq!(
        can(&["create", "widgets.example.quotagate.io"]).await,
        (true, "yes".to_string())
    );
    let o = k.run_with(&["create", "-f", "-", bot], Some(WIDGET)).await;
    assert!(o.ok, "{}{}", o.stdout, o.stderr);
    // --list: the bot's rules in default, and the ones every authenticated user has.
    let list = k.ok(&["auth", "can-i", "--list", bot]).await;
    let row = |res: &str| {
        list.lines()
            .find(|l| l.split_whitespace().next() == Some(res))
            .map(|l| l.to_string())
    };
    assert!(
        row("pods").is_some_and(|r| r.contains("[get list watch]")),
        "{list}"
    );
    assert!(
        row("widgets.example.quotagate.io").is_some_and(|r| r.contains("[create get]")),
        "{list}"
    );
    assert!(
        row("selfsubjectaccessreviews.authorization.k8s.io").is_some(),
        "{list}"
    );
    assert!(row("configmaps").is_none(), "{list}");
    let other = k.ok(&["auth", "can-i", "--list", "-n", "other", bot]).await;
    assert!(!other.lines().any(|l| l.starts_with("pods ")), "{other}");
    // The admin's list is everything.
    assert!(
        k.ok(&["auth", "can-i", "--list"])
            .await
            .lines()
            .any(|l| l.starts_with("*.*"))
    );
    // Discovery lists the reviews as the real server does: create only.
    let res = k
        .ok(&["api-resources", "--api-group=authorization.k8s.io", "-o", "wide"])
        .await;
    for r in [
        "selfsubjectaccessreviews",
        "selfsubjectrulesreviews",
        "subjectaccessreviews",
        "localsubjectaccessreviews",
    ] {
        let row = res.lines().find(|l| l.split_whitespace().next() == Some(r));
        assert!(
            row.is_some_and(
                |l| l.split_whitespace().filter(|w| *w == "create").count() == 1 && !l.contains("list")
            ),
            "{res}"
        );
    }
}

#[tokio::test]
async fn kubectl_logs_of_a_simulated_pod_says_so() {
    let Some(k) = Kube::start("ops-logs").await else {
        return;
    };
    k.ok(&["run", "web", "--image=nginx"]).await;
    let err = k.refused(&["logs", "web"], None, "BadRequest").await;
    assert!(err.contains("simulated") && err.contains("\"web\""), "{err}");
    let err = k.refused(&["logs", "nope"], None, "NotFound").await;
    assert!(err.contains("pods \"nope\" not found"), "{err}");
    k.refused(
        &["logs", "web", "-c", "sidecar"],
        None,
        "container sidecar is not valid for pod web",
    )
    .await;
}
