//! `quotagate bench e2e` as a user runs it: the small ci config end to end through the API against its
//! own rangespec (a regression in admission latency, usage or wall time fails here), and bad input
//! refused by field before anything runs. The figures are printed for the log; the thresholds live in
//! config/bench/ci/rangespec.yaml, not in this test.

use std::process::Command;

fn bench(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_quotagate"))
        .args(["bench", "e2e"])
        .args(args)
        .output()
        .expect("run quotagate");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn ci_config_meets_its_rangespec_end_to_end() {
    let (code, stdout, stderr) = bench(&["--config", "ci", "--json"]);
    println!("{stdout}");
    let v: serde_json::Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"));
    assert_eq!(v["workloads"], 300);
    let admitted: u64 = v["timeToAdmission"]
        .as_object()
        .unwrap()
        .values()
        .map(|c| c["admitted"].as_u64().unwrap())
        .sum();
    assert_eq!(admitted, 300, "every workload admitted");
    assert!(v["lowerBoundMs"].as_u64().unwrap() > 0);
    assert_eq!(
        v["rangespecMisses"],
        serde_json::json!([]),
        "rangespec missed:\n{stdout}\n{stderr}"
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(!stderr.contains("WARN"), "{stderr}");
}

#[test]
fn impossible_configs_are_refused_by_field() {
    let dir = std::env::temp_dir().join(format!("qg-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("generator.yaml");
    std::fs::write(
        &file,
        "cohorts:\n- className: c\n  count: 1\n  queuesSets:\n  - className: cq\n    count: 1\n    nominalQuota: 2\n    workloadsSets:\n    - count: 1\n      creationIntervalMs: 10\n      workloads:\n      - {className: huge, runtimeMs: 10, request: 64}\n",
    )
    .unwrap();
    let (code, _, stderr) = bench(&["--config", file.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("workloadsSets[0].workloads[0]") && stderr.contains("could never be admitted"),
        "{stderr}"
    );
    let (code, _, stderr) = bench(&["--config", "no-such-config"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("--config no-such-config"), "{stderr}");
    let (code, _, stderr) = bench(&["--config", "ci", "--scale", "0"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("--scale"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}
