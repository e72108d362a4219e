//! Compiles the vendored Kubernetes .proto files (vendor/k8s-proto/k8s) into one descriptor set, so the embedded API
//! server can decode kubectl's protobuf request bodies for every built-in kind it serves from the
//! schema instead of a hand-written decoder per kind. `proto/` holds messages written here (apps/v1's
//! Deployment) beside the vendored files, in their packages.

use std::path::PathBuf;

const FILES: &[&str] = &[
    "api/admissionregistration/v1/generated.proto",
    "api/authorization/v1/generated.proto",
    "api/batch/v1/generated.proto",
    "api/core/v1/generated.proto",
    "api/coordination/v1/generated.proto",
    "api/discovery/v1/generated.proto",
    "api/events/v1/generated.proto",
    "api/rbac/v1/generated.proto",
    "api/scheduling/v1/generated.proto",
    "apimachinery/pkg/runtime/generated.proto",
    // Written for quotagate (proto/): the apps/v1 Deployment messages only.
    "api/apps/v1/deployment.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=vendor/k8s-proto/k8s");
    println!("cargo:rerun-if-changed=proto");
    let set = protox::Compiler::new(["vendor/k8s-proto/k8s", "proto"])?
        .include_imports(true)
        .open_files(FILES)?
        .encode_file_descriptor_set();
    let out = PathBuf::from(std::env::var("OUT_DIR")?).join("k8s.fds");
    std::fs::write(out, set)?;
    Ok(())
}
