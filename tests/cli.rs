//! The binary's offline commands: `quotagate crds` matches the committed CRDs, and `quotagate validate`
//! accepts the samples and rejects broken manifests with messages that name the field and the rule.

use std::path::Path;
use std::process::Command;

fn quotagate(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_quotagate"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("the quotagate binary runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn committed_crds_are_exactly_what_the_binary_prints() {
    let (code, printed) = quotagate(&["crds"]);
    assert_eq!(code, 0, "{printed}");
    let committed = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("config/crd/bases/quotagate.yaml"),
    )
    .expect("config/crd/bases/quotagate.yaml exists");
    assert!(
        printed == committed,
        "config/crd/bases/quotagate.yaml is stale: run `cargo run -- crds > config/crd/bases/quotagate.yaml`"
    );
    for kind in [
        "ClusterQueue",
        "LocalQueue",
        "ResourceFlavor",
        "Cohort",
        "Workload",
        "WorkloadPriorityClass",
        "RayCluster",
        "RayService",
        "HTTPRoute",
        "Gateway",
    ] {
        assert!(
            printed.contains(&format!("kind: {kind}\n")),
            "CRD for {kind} missing"
        );
    }
}

#[test]
fn samples_are_valid() {
    let (code, out) = quotagate(&["validate", "-f", "config/samples/"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("19 document(s) valid"), "{out}");
}

#[test]
fn kueue_rules_name_the_field() {
    let (code, out) = quotagate(&["validate", "-f", "tests/fixtures/validate/cq-bad-flavor.yaml"]);
    assert_eq!(code, 1, "{out}");
    let want = [
        "document 0: ClusterQueue/team-a: spec.resourceGroups[0].flavors[0].resources[0].name: Invalid value: \"memory\": must match the name in coveredResources",
        "spec.resourceGroups[0].flavors[0].resources[1].borrowingLimit: Invalid value: \"5\": must be nil when cohort is empty",
        "spec.resourceGroups[0].flavors[0].resources[1].lendingLimit: Invalid value: \"20\": must be nil when cohort is empty",
        "spec.resourceGroups[0].flavors[0].resources[1].lendingLimit: Invalid value: \"20\": must be less than or equal to the nominalQuota",
        "5 problem(s) in 1 document(s)",
    ];
    for w in want {
        assert!(out.contains(w), "missing {w:?} in\n{out}");
    }
}

#[test]
fn kuberay_rules_name_the_field() {
    let (code, out) = quotagate(&["validate", "-f", "tests/fixtures/validate/rayservice-bad.yaml"]);
    assert_eq!(code, 1, "{out}");
    let want = [
        "metadata.name: Too long: RayService name should be no more than 47 characters",
        "spec.rayClusterConfig.workerGroupSpecs[0].groupName: Invalid value: worker group name \"head\" is reserved for the head group",
        "spec.rayClusterConfig.workerGroupSpecs[0].minReplicas: Invalid value: worker group head has minReplicas 3 greater than maxReplicas 2",
    ];
    for w in want {
        assert!(out.contains(w), "missing {w:?} in\n{out}");
    }
}

#[test]
fn unknown_kinds_fail_foreign_kinds_are_listed_and_built_ins_are_parsed() {
    let (code, out) = quotagate(&["validate", "-f", "tests/fixtures/validate/mixed.yaml"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("document 0: Topology/not-ours: apiVersion: Unsupported value: \"kueue.x-k8s.io/v1alpha1\": quotagate serves kind \"Topology\" as kueue.x-k8s.io/v1beta2 only"),
        "{out}"
    );
    assert!(out.contains("document 1: RayTrainer/no-such-kind: kind: Unsupported value: ray.io/v1 does not define kind \"RayTrainer\""), "{out}");
    assert!(out.contains("document 2: Pod/broken-pod: spec.containers: Invalid value: invalid type: string \"not a list\", expected a sequence"), "{out}");
}

#[test]
fn unparsable_yaml_reports_its_line() {
    let (code, out) = quotagate(&["validate", "-f", "tests/fixtures/validate/unparsable.yaml"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("unparsable.yaml: line 5: unparsable YAML"), "{out}");
}

#[test]
fn a_directory_is_searched_and_every_problem_counted() {
    let (code, out) = quotagate(&["validate", "-f", "tests/fixtures/validate"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("12 problem(s)"), "{out}");
}

#[test]
fn a_missing_file_is_a_problem_not_a_panic() {
    let (code, out) = quotagate(&["validate", "-f", "tests/fixtures/validate/does-not-exist.yaml"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("does-not-exist.yaml: cannot read"), "{out}");
}

/// One HTTP/1.1 GET over TLS, trusting only `ca_pem`; the raw response.
fn tls_get(server: &str, ca_pem: &[u8], path: &str, token: Option<&str>) -> String {
    use rustls_pki_types::pem::PemObject;
    use std::io::{Read, Write};
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pki_types::CertificateDer::pem_slice_iter(ca_pem) {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let host = server.rsplit_once(':').unwrap().0.to_string();
    let name = rustls_pki_types::ServerName::try_from(host).unwrap();
    let conn = rustls::ClientConnection::new(std::sync::Arc::new(config), name).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, std::net::TcpStream::connect(server).unwrap());
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    write!(
        tls,
        "GET {path} HTTP/1.1\r\nHost: {server}\r\n{auth}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut resp = Vec::new();
    // A server that closes without close_notify still gave its whole response.
    let _ = tls.read_to_end(&mut resp);
    String::from_utf8_lossy(&resp).into_owned()
}

#[test]
fn apiserver_serves_tls_on_loopback_and_only_to_the_kubeconfig_token() {
    use base64::Engine;
    let dir = std::env::temp_dir().join(format!("quotagate-cli-apiserver-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    let mut child = Command::new(env!("CARGO_BIN_EXE_quotagate"))
        .args(["apiserver", "--listen", "127.0.0.1:0", "--kubeconfig-out"])
        .arg(&kubeconfig)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let text = loop {
        if let Ok(t) = std::fs::read_to_string(&kubeconfig)
            && t.contains("server: https://127.0.0.1:")
            && t.contains("token: ")
        {
            break t;
        }
        assert!(std::time::Instant::now() < deadline, "no kubeconfig written");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&kubeconfig).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "the kubeconfig holds a token: owner only");
    }
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(key))
            .unwrap()
            .to_string()
    };
    let server = field("server: https://");
    let token = field("token: ");
    let ca = base64::engine::general_purpose::STANDARD
        .decode(field("certificate-authority-data: "))
        .unwrap();
    let path = "/apis/kueue.x-k8s.io/v1beta2/clusterqueues";
    let anonymous = tls_get(&server, &ca, path, None);
    let wrong = tls_get(&server, &ca, path, Some("not-the-token"));
    let ok = tls_get(&server, &ca, path, Some(&token));
    // Plain HTTP to the TLS port gets no answer that serves it.
    let plain = {
        use std::io::{Read, Write};
        let mut tcp = std::net::TcpStream::connect(&server).unwrap();
        let _ = write!(
            tcp,
            "GET {path} HTTP/1.1\r\nHost: {server}\r\nConnection: close\r\n\r\n"
        );
        let mut resp = Vec::new();
        let _ = tcp.read_to_end(&mut resp);
        String::from_utf8_lossy(&resp).into_owned()
    };
    let _ = child.kill();
    let _ = child.wait();
    for resp in [&anonymous, &wrong] {
        assert!(resp.starts_with("HTTP/1.1 401"), "{resp}");
        assert!(resp.contains("\"reason\":\"Unauthorized\""), "{resp}");
    }
    assert!(!plain.contains("ClusterQueueList"), "{plain}");
    assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
    assert!(ok.contains("\"kind\":\"ClusterQueueList\""), "{ok}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_listener_without_a_kubeconfig_to_hold_its_credentials_is_refused() {
    let (code, out) = quotagate(&["apiserver", "--listen", "127.0.0.1:0"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("--kubeconfig-out is required"), "{out}");
    let (code, out) = quotagate(&["run", "--embedded", "--listen", "127.0.0.1:0"]);
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("--kubeconfig-out"), "{out}");
}

#[test]
fn apiserver_refuses_a_non_loopback_address() {
    let (code, out) = quotagate(&["apiserver", "--listen", "0.0.0.0:0"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("only listens on loopback"), "{out}");
}

#[test]
fn demo_walks_through_admission_and_a_blue_green_upgrade() {
    let (code, out) = quotagate(&[
        "demo",
        "--pod-start-delay",
        "100ms",
        "--serve-build-delay",
        "200ms",
        "--replica-start-delay",
        "200ms",
    ]);
    assert_eq!(code, 0, "{out}");
    for step in [
        "admitted into ClusterQueue demo",
        "RayCluster alpha unsuspended: 3 pods Running",
        "beta pending: QuotaReserved=False WaitingForQuota: couldn't assign flavors to pod set workers: insufficient unused quota for cpu in flavor default-flavor, 1 more needed",
        "beta has 0 pods while it waits",
        "beta admitted: 4 pods Running",
        "fruit-stand Ready, serving from RayCluster fruit-stand-",
        "traffic switched: fruit-stand-serve-svc now selects fruit-stand-",
        "deleted after rayClusterDeletionDelaySeconds",
        "demo complete",
    ] {
        assert!(out.contains(step), "missing {step:?} in\n{out}");
    }
}

#[path = "cli/cluster.rs"]
mod cluster;

/// `run --config`: a bad field or a switch quotagate does not implement stops the start with the file
/// and the field path, before anything runs.
#[test]
fn run_refuses_a_bad_kueue_config_naming_the_field() {
    let dir = std::env::temp_dir().join(format!("quotagate-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let head = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n";
    let cases = [
        (
            "timeout.yaml",
            format!("{head}waitForPodsReady:\n  timeout: soon\n"),
            "waitForPodsReady.timeout: \"soon\" is not a duration",
        ),
        (
            "count.yaml",
            format!("{head}waitForPodsReady:\n  requeuingStrategy:\n    backoffLimitCount: -1\n"),
            "waitForPodsReady.requeuingStrategy.backoffLimitCount: must be greater than or equal to 0",
        ),
        (
            "fs.yaml",
            format!(
                "{head}fairSharing:\n  preemptionStrategies: [LessThanInitialShare, LessThanOrEqualToFinalShare]\n"
            ),
            "fairSharing.preemptionStrategies: Unsupported value",
        ),
    ];
    for (name, text, want) in cases {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        let (code, out) = quotagate(&["run", "--embedded", "--config", path.to_str().unwrap()]);
        assert_eq!(code, 1, "{out}");
        assert!(out.contains(want) && out.contains(name), "{name}: {out}");
    }
    let (code, out) = quotagate(&["run", "--embedded", "--config", "no-such-file.yaml"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("--config no-such-file.yaml"), "{out}");
    std::fs::remove_dir_all(&dir).ok();
}
