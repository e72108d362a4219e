//! Test kinds and helpers shared by the embedded-server test files.
#![allow(dead_code)]

pub mod kubectl;

use kube::CustomResource;
use kube::CustomResourceExt;
use quotagate::api::validation::FieldError;
use quotagate::embedded::{AdmissionHook, EmbeddedServer, Operation, ResourceInfo, ServerConfig};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "example.quotagate.io",
    version = "v1",
    kind = "Widget",
    namespaced,
    status = "WidgetStatus",
    shortname = "wd",
    category = "all",
    printcolumn = r#"{"name":"Size","type":"integer","jsonPath":".spec.size"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#
)]
pub struct WidgetSpec {
    pub size: i32,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct WidgetStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seen: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>,
}

/// Cluster-scoped, no status subresource.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(group = "example.quotagate.io", version = "v1", kind = "Gadget")]
pub struct GadgetSpec {
    pub color: String,
}

/// Defaults `spec.size` 0 -> 1 is NOT done (so tests can see exact values); rejects negative sizes and
/// stamps a label on create, like a mutating + validating webhook chain.
pub struct TestHook;

impl AdmissionHook for TestHook {
    fn admit(
        &self,
        op: Operation,
        res: &ResourceInfo,
        new: &mut Value,
        _old: Option<&Value>,
    ) -> Result<(), Vec<FieldError>> {
        if res.kind != "Widget" {
            return Ok(());
        }
        if op == Operation::Create {
            new["metadata"]["labels"]["defaulted"] = Value::String("yes".into());
        }
        match new.pointer("/spec/size").and_then(Value::as_i64) {
            Some(s) if s < 0 => Err(vec![FieldError::invalid("spec.size", "must be >= 0")]),
            None => Err(vec![FieldError::required("spec.size", "size is required")]),
            _ => Ok(()),
        }
    }
}

pub fn server() -> Arc<EmbeddedServer> {
    server_with(ServerConfig::default())
}

pub fn server_with(config: ServerConfig) -> Arc<EmbeddedServer> {
    EmbeddedServer::with_config(&[Widget::crd(), Gadget::crd()], Arc::new(TestHook), config)
}

pub fn widget(name: &str, size: i32) -> Widget {
    Widget::new(name, WidgetSpec { size })
}

pub const WAIT: Duration = Duration::from_secs(10);

/// A child process's peak resident set (VmHWM), in KiB.
pub fn peak_rss_kib(child: &tokio::process::Child) -> u64 {
    let pid = child.id().expect("running");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM")
}

/// Reads each watch body in turn until what it has sent contains `needle` (each frame within 30 s).
pub async fn read_each_until<B>(watches: &mut [B], needle: &str)
where
    B: hyper::body::Body<Data = hyper::body::Bytes> + Unpin,
    B::Error: std::fmt::Debug,
{
    for body in watches {
        let mut got = Vec::new();
        while !String::from_utf8_lossy(&got).contains(needle) {
            let frame = tokio::time::timeout(Duration::from_secs(30), http_body_util::BodyExt::frame(body))
                .await
                .expect("a watch event within 30 s")
                .expect("the watch is still open")
                .unwrap();
            if let Ok(data) = frame.into_data() {
                got.extend_from_slice(&data);
            }
        }
    }
}
