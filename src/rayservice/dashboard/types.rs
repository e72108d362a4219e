//! Typed view of `GET /api/serve/applications/` (Ray's ServeInstanceDetails).
//!
//! Only the fields the controller reads are modelled; Ray adds keys often (`target_groups`,
//! `controller_health_metrics`, ...), so unknown fields are ignored and every field has a default.
//! Real shapes: `tests/ray_dashboard_real.rs` reads them from a real Ray head.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

/// Declares a string enum with the values Ray documents plus `Other(String)` for anything newer,
/// so a Ray upgrade that adds a status never makes the whole response undecodable.
macro_rules! ray_status {
    ($(#[$meta:meta])* $name:ident { $($variant:ident => $wire:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(from = "String", into = "String")]
        pub enum $name {
            $($variant,)+
            Other(String),
        }

        impl $name {
            pub fn as_str(&self) -> &str {
                match self {
                    $(Self::$variant => $wire,)+
                    Self::Other(s) => s,
                }
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                match s.as_str() {
                    $($wire => Self::$variant,)+
                    _ => Self::Other(s),
                }
            }
        }

        impl From<$name> for String {
            fn from(s: $name) -> String {
                s.as_str().to_owned()
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

ray_status!(
    /// `applications.<name>.status`.
    AppStatus {
        NotStarted => "NOT_STARTED",
        Deploying => "DEPLOYING",
        DeployFailed => "DEPLOY_FAILED",
        Running => "RUNNING",
        Unhealthy => "UNHEALTHY",
        Deleting => "DELETING",
    }
);

/// An application Ray has not reported on yet.
impl Default for AppStatus {
    fn default() -> Self {
        AppStatus::NotStarted
    }
}

ray_status!(
    /// `deployments.<name>.status`.
    DeploymentStatus {
        Updating => "UPDATING",
        Healthy => "HEALTHY",
        Unhealthy => "UNHEALTHY",
        Upscaling => "UPSCALING",
        Downscaling => "DOWNSCALING",
        DeployFailed => "DEPLOY_FAILED",
    }
);

ray_status!(
    /// `replicas[].state`.
    ReplicaState {
        Starting => "STARTING",
        Updating => "UPDATING",
        Recovering => "RECOVERING",
        Running => "RUNNING",
        Stopping => "STOPPING",
        PendingMigration => "PENDING_MIGRATION",
    }
);

/// The whole GET response.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ServeDetails {
    #[serde(default)]
    pub applications: IndexMap<String, AppDetails>,
    /// Echo of the last PUT's top-level `target_capacity`; Ray sends a float or null.
    #[serde(default)]
    pub target_capacity: Option<f64>,
    #[serde(default)]
    pub proxies: IndexMap<String, ProxyDetails>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AppDetails {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub route_prefix: Option<String>,
    #[serde(default)]
    pub docs_path: Option<String>,
    pub status: AppStatus,
    /// For DEPLOY_FAILED this is a raw Python traceback; see `deploy_failure_summary`.
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub last_deployed_time_s: Option<f64>,
    /// The app config Serve is applying (the latest PUT, even when it failed).
    #[serde(default)]
    pub deployed_app_config: Option<serde_json::Value>,
    /// Empty for a DEPLOY_FAILED app even when old replicas still serve traffic.
    #[serde(default)]
    pub deployments: IndexMap<String, DeploymentDetails>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeploymentDetails {
    #[serde(default)]
    pub name: String,
    pub status: DeploymentStatus,
    #[serde(default)]
    pub status_trigger: Option<String>,
    #[serde(default)]
    pub message: String,
    /// Effective replica target: configured replicas scaled by `target_capacity`.
    #[serde(default)]
    pub target_num_replicas: Option<u32>,
    #[serde(default)]
    pub replicas: Vec<ReplicaDetails>,
}

impl DeploymentDetails {
    pub fn running_replicas(&self) -> usize {
        self.replicas
            .iter()
            .filter(|r| r.state == ReplicaState::Running)
            .count()
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReplicaDetails {
    #[serde(default)]
    pub replica_id: String,
    pub state: ReplicaState,
    #[serde(default)]
    pub pid: Option<u32>,
    #[serde(default)]
    pub start_time_s: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProxyDetails {
    #[serde(default)]
    pub node_id: String,
    #[serde(default)]
    pub status: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    // Trimmed from a real Ray 2.60 response, keeping keys this module ignores.
    const RUNNING: &str = r#"{
      "controller_info": {"node_id": "7a54", "actor_name": "SERVE_CONTROLLER_ACTOR"},
      "proxy_location": "EveryNode",
      "proxies": {"n1": {"node_id": "n1", "node_ip": "127.0.0.1", "status": "HEALTHY"}},
      "applications": {
        "hello": {
          "name": "hello", "route_prefix": "/", "docs_path": null,
          "status": "RUNNING", "message": "", "last_deployed_time_s": 1795317711.25,
          "deployed_app_config": {"name": "hello", "import_path": "app:app"},
          "source": "declarative",
          "deployments": {
            "Hello": {
              "name": "Hello", "status": "HEALTHY", "status_trigger": "CONFIG_UPDATE_COMPLETED",
              "message": "", "deployment_config": {"num_replicas": 2},
              "target_num_replicas": 1, "required_resources": {"CPU": 1},
              "replicas": [{"node_id": "n1", "replica_id": "4nykced2", "state": "RUNNING",
                            "pid": 8063, "start_time_s": 1795317713.15}],
              "recent_dead_replicas": []
            }
          },
          "external_scaler_enabled": false,
          "deployment_topology": {"app_name": "hello"}
        }
      },
      "target_capacity": 50.0,
      "target_groups": [],
      "restores_unset_config_options": true
    }"#;

    #[test]
    fn decodes_real_shape_ignoring_unknown_fields() {
        let d: ServeDetails = serde_json::from_str(RUNNING).unwrap();
        assert_eq!(d.target_capacity, Some(50.0));
        let app = &d.applications["hello"];
        assert_eq!(app.status, AppStatus::Running);
        assert_eq!(app.route_prefix.as_deref(), Some("/"));
        let dep = &app.deployments["Hello"];
        assert_eq!(dep.status, DeploymentStatus::Healthy);
        assert_eq!(dep.target_num_replicas, Some(1));
        assert_eq!(dep.running_replicas(), 1);
        assert_eq!(d.proxies["n1"].status, "HEALTHY");
    }

    #[test]
    fn decodes_empty_instance() {
        let d: ServeDetails = serde_json::from_str(
            r#"{"controller_info": {}, "proxies": {}, "applications": {}, "target_capacity": null}"#,
        )
        .unwrap();
        assert!(d.applications.is_empty());
        assert_eq!(d.target_capacity, None);
    }

    #[test]
    fn unknown_status_values_are_kept() {
        let s: AppStatus = serde_json::from_str(r#""SOMETHING_NEW""#).unwrap();
        assert_eq!(s, AppStatus::Other("SOMETHING_NEW".into()));
        assert_eq!(serde_json::to_string(&s).unwrap(), r#""SOMETHING_NEW""#);
        let r: ReplicaState = serde_json::from_str(r#""PENDING_MIGRATION""#).unwrap();
        assert_eq!(r, ReplicaState::PendingMigration);
    }
}
