//! Issue 61: the differential suite. One list of request sequences (tests/differential/, areas listed
//! in sequences.rs)
//! runs against two grounds, the embedded API server and a real kube-apiserver (the control plane of
//! `scripts/control-plane.sh`), each sequence in a fresh namespace of the same name on both. Every
//! response is normalised (uids, timestamps, resourceVersions mapped to the order they were first seen,
//! generateName suffixes, allocated cluster IPs, continue tokens) and compared: the status code, the
//! Status `reason`, `message` and `details`, the `Warning` headers, the object returned (the stored
//! object, for a read back), and for a watch the events in order (type, object name, an ERROR's
//! Status).
//!
//! The grounds. The embedded server serves quotagate's CRDs with the admission a real cluster's API
//! server gives them: the CRDs' own schemas and rules (`CrdSchemaAdmission`, what `quotagate apiserver
//! --real-cluster` uses), not quotagate's webhooks, which the real server here does not call either.
//! The real control plane runs `up` in a directory of its own (QUOTAGATE_CONTROL_PLANE_DIR) and `down`
//! at the end, or uses the running one QUOTAGATE_REAL_KUBECONFIG names; quotagate's CRDs are created on
//! it first and waited for until Established and served. Both are reached through a `kube::Client` made
//! from each ground's kubeconfig, so TLS and authentication take the same path.
//!
//! Without the control plane's binaries and without Go, the test prints one line and skips; under
//! `QUOTAGATE_REQUIRE_TOOLS=1` it fails instead.
//!
//! The verdict. The report prints, per area, how many sequences match, differ, or are unsupported on
//! one side (a 404 "could not find the requested resource", 405 or 415 where the other ground serves
//! the request), and each difference with its first differing field. `EXPECTED_DIFFERENCES` lists the
//! known ones with a reason; the test fails when a sequence not listed there differs, and when a listed
//! one now matches, so the list stays true.
//!
//! `two_embedded_servers_answer_alike` runs the same sequences against two embedded servers and wants
//! them all to match: what the normalising leaves must be server behaviour, not the run's accidents.
//! docs/embedded-fidelity.md keeps the last run's table.

mod differential {
    pub mod compare;
    pub mod crds;
    pub mod engine;
    pub mod expected;
    pub mod kinds;
    pub mod options;
    pub mod reads;
    pub mod sequences;
    pub mod values;
}

use differential::compare::{self, Outcome};
use differential::engine::Ground;
use differential::expected::EXPECTED_DIFFERENCES;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

mod control_plane_support;
use control_plane_support::{ControlPlane, skip};

/// The embedded server with the CRDs' own admission, on loopback TCP with a kubeconfig of its own;
/// it stops when the guard drops.
async fn embedded_ground(name: &'static str) -> (Ground, tokio_util::sync::DropGuard) {
    let dir = std::env::temp_dir().join(format!("quotagate-differential-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    // Real-cluster mode, as `quotagate apiserver --real-cluster`: the server models a cluster's API
    // server, so it also serves what a real one has and quotagate's install needs (Deployments, CRDs).
    let srv = quotagate::embedded::EmbeddedServer::with_config(
        &quotagate::embedded::QuotagateCrds,
        Arc::new(quotagate::embedded::crd_schema::CrdSchemaAdmission),
        quotagate::embedded::ServerConfig {
            real_cluster: true,
            ..Default::default()
        },
    );
    let cancel = tokio_util::sync::CancellationToken::new();
    srv.spawn_tcp("127.0.0.1:0".parse().unwrap(), Some(&kubeconfig), cancel.clone())
        .await
        .expect("the embedded server listens");
    let ground = Ground::from_kubeconfig(name, &kubeconfig).await;
    let _ = std::fs::remove_dir_all(&dir);
    (ground, cancel.drop_guard())
}

/// Every sequence with its area, names checked unique.
fn all_sequences(
    areas: &[differential::engine::Area],
) -> Vec<(&'static str, differential::engine::Sequence)> {
    let mut all = Vec::new();
    for area in areas {
        for seq in (area.sequences)() {
            all.push((area.name, seq));
        }
    }
    let mut names: Vec<&str> = all.iter().map(|(_, s)| s.name).collect();
    names.sort();
    let n = names.len();
    names.dedup();
    assert_eq!(names.len(), n, "sequence names are unique");
    all
}

/// Each sequence on both grounds at once, in namespace `diff-<index>`.
async fn run_all(
    all: &[(&'static str, differential::engine::Sequence)],
    a: &Ground,
    b: &Ground,
) -> Vec<(&'static str, &'static str, Outcome)> {
    let mut results = Vec::new();
    for (i, (area, seq)) in all.iter().enumerate() {
        let ns = format!("diff-{i}");
        let (x, y) = tokio::join!(a.run(seq, &ns), b.run(seq, &ns));
        results.push((*area, seq.name, compare::compare(&x, &y)));
    }
    results
}

/// The suite's own check: two embedded servers answer every sequence alike, so what the normalising
/// leaves is the servers' behaviour, not the run's accidents (names, times, versions, order).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_embedded_servers_answer_alike() {
    let (a, _stop_a) = embedded_ground("embedded-a").await;
    let (b, _stop_b) = embedded_ground("embedded-b").await;
    let areas = differential::sequences::areas();
    let all = all_sequences(&areas);
    let results = run_all(&all, &a, &b).await;
    let differ: Vec<String> = results
        .iter()
        .filter_map(|(area, name, o)| match o {
            Outcome::Match => None,
            Outcome::Differ(d) | Outcome::Unsupported(d) => Some(format!("{area}/{name}: {d}")),
        })
        .collect();
    assert!(
        differ.is_empty(),
        "two embedded servers differ on {} sequences:\n{}",
        differ.len(),
        differ.join("\n")
    );
    println!("two embedded servers: {} sequences alike", results.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_and_real_api_servers_answer_alike() {
    let started = Instant::now();
    let cp = match tokio::task::spawn_blocking(|| ControlPlane::start("differential"))
        .await
        .unwrap()
    {
        Ok(cp) => cp,
        Err(why) => return skip(&why),
    };
    println!("control plane up after {:?}", started.elapsed());
    let real = Ground::from_kubeconfig("kube-apiserver", &cp.kubeconfig).await;
    let version = real.version().await;
    assert!(version.starts_with("v1.36."), "server version {version}");

    let (embedded, _stop) = embedded_ground("embedded").await;

    // quotagate's CRDs on the real server, Established and served before any sequence runs.
    real.install_crds(&quotagate::api::all_crds(), Duration::from_secs(60))
        .await;
    println!("CRDs served after {:?}", started.elapsed());

    let areas = differential::sequences::areas();
    let all = all_sequences(&areas);
    let names: Vec<&str> = all.iter().map(|(_, s)| s.name).collect();
    for (name, _) in EXPECTED_DIFFERENCES {
        assert!(
            names.contains(name),
            "EXPECTED_DIFFERENCES names {name:?}, which is no sequence"
        );
    }
    let sequences_started = Instant::now();
    let results = run_all(&all, &embedded, &real).await;
    let (took, elapsed) = (sequences_started.elapsed(), started.elapsed());

    // The report: per area, then each difference.
    let mut per_area: BTreeMap<&str, [usize; 3]> = BTreeMap::new();
    for (area, _, outcome) in &results {
        let slot = per_area.entry(area).or_default();
        match outcome {
            Outcome::Match => slot[0] += 1,
            Outcome::Differ(_) => slot[1] += 1,
            Outcome::Unsupported(_) => slot[2] += 1,
        }
    }
    println!(
        "\nembedded vs kube-apiserver {version}: {} sequences in {took:.0?} ({elapsed:.0?} since the test started)",
        results.len()
    );
    println!("| area | source | sequences | match | differ | unsupported on one side |");
    println!("|---|---|---|---|---|---|");
    let mut total = [0usize; 3];
    for area in &areas {
        let c = per_area.get(area.name).copied().unwrap_or_default();
        for k in 0..3 {
            total[k] += c[k];
        }
        println!(
            "| {} | {} | {} | {} | {} | {} |",
            area.name,
            area.source,
            c.iter().sum::<usize>(),
            c[0],
            c[1],
            c[2]
        );
    }
    println!(
        "| total | | {} | {} | {} | {} |",
        total.iter().sum::<usize>(),
        total[0],
        total[1],
        total[2]
    );
    println!("\ndifferences (first differing field; embedded | kube-apiserver):");
    let expected: BTreeMap<&str, &str> = EXPECTED_DIFFERENCES.iter().copied().collect();
    let mut unexpected = Vec::new();
    let mut now_matching = Vec::new();
    for (area, name, outcome) in &results {
        match outcome {
            Outcome::Match => {
                if expected.contains_key(name) {
                    now_matching.push(*name);
                }
            }
            Outcome::Differ(d) | Outcome::Unsupported(d) => {
                let kind = if matches!(outcome, Outcome::Differ(_)) {
                    "differs"
                } else {
                    "unsupported"
                };
                let mark = if expected.contains_key(name) {
                    "expected"
                } else {
                    "NEW"
                };
                println!("  [{mark}] {area}/{name} {kind}: {d}");
                if !expected.contains_key(name) {
                    unexpected.push(format!("    (\"{name}\", \"{}\"),", d.replace('"', "'")));
                }
            }
        }
    }
    assert!(
        unexpected.is_empty(),
        "{} sequences differ that EXPECTED_DIFFERENCES does not list:\n{}",
        unexpected.len(),
        unexpected.join("\n")
    );
    assert!(
        now_matching.is_empty(),
        "EXPECTED_DIFFERENCES lists sequences that now match (remove them): {now_matching:?}"
    );
}
