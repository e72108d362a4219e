//! Serve config handling: `serveConfigV2` is a YAML string in the RayService; Ray wants the same
//! document as JSON (ServeDeploySchema), optionally with a top-level `target_capacity` injected.

use serde_json::{Map, Value};

use super::error::DashboardError;

/// Ray's name for an application declared without `name`.
pub const DEFAULT_APP_NAME: &str = "default";

/// A parsed Serve config: a JSON object ready to be PUT.
#[derive(Clone, Debug, PartialEq)]
pub struct ServeConfig {
    root: Map<String, Value>,
}

impl ServeConfig {
    /// Parses `serveConfigV2`. Only the shape needed to build a body is checked here; Ray's schema
    /// validation (a 400 from the PUT) stays the authority on the rest.
    pub fn from_yaml(yaml: &str) -> Result<Self, DashboardError> {
        let value: Value = serde_saphyr::from_str(yaml)
            .map_err(|e| DashboardError::InvalidConfig(format!("serveConfigV2 is not valid YAML: {e}")))?;
        Self::from_json(value)
    }

    pub fn from_json(value: Value) -> Result<Self, DashboardError> {
        match value {
            Value::Object(root) => Ok(Self { root }),
            Value::Null => Err(DashboardError::InvalidConfig("serveConfigV2 is empty".into())),
            other => Err(DashboardError::InvalidConfig(format!(
                "serveConfigV2 must be a mapping with `applications`, got {}",
                json_kind(&other)
            ))),
        }
    }

    /// The config a cluster already runs, rebuilt from the `deployed_app_config` of each application
    /// Ray reports, so its `target_capacity` can change without deploying another config (an
    /// incremental upgrade shrinking the active cluster, whose spec is no longer the desired one).
    pub fn from_deployed(details: &super::ServeDetails) -> Result<Self, DashboardError> {
        let apps: Vec<Value> = details
            .applications
            .values()
            .filter_map(|a| a.deployed_app_config.clone())
            .collect();
        if apps.is_empty() {
            return Err(DashboardError::InvalidConfig(
                "Ray reports no deployed application config to change the target_capacity of".into(),
            ));
        }
        let mut root = Map::new();
        root.insert("applications".into(), Value::Array(apps));
        Ok(Self { root })
    }

    pub fn as_json(&self) -> &Map<String, Value> {
        &self.root
    }

    /// Names of the applications in the config, with Ray's default for a missing name.
    pub fn app_names(&self) -> Vec<String> {
        let Some(Value::Array(apps)) = self.root.get("applications") else {
            return Vec::new();
        };
        apps.iter()
            .map(|app| {
                app.get("name")
                    .and_then(Value::as_str)
                    .filter(|n| !n.is_empty())
                    .unwrap_or(DEFAULT_APP_NAME)
                    .to_owned()
            })
            .collect()
    }

    /// The top-level `target_capacity`, if the config carries one.
    pub fn target_capacity(&self) -> Option<f64> {
        self.root.get("target_capacity").and_then(Value::as_f64)
    }

    /// Returns a copy with `target_capacity` set (0–100 %). `None` leaves the user's value alone, as
    /// KubeRay does outside incremental upgrades. Note Serve resets the capacity to null when a PUT
    /// omits it.
    pub fn with_target_capacity(&self, target_capacity: Option<f64>) -> Result<Self, DashboardError> {
        let mut out = self.clone();
        if let Some(tc) = target_capacity {
            let number = serde_json::Number::from_f64(tc)
                .filter(|_| (0.0..=100.0).contains(&tc))
                .ok_or_else(|| {
                    DashboardError::InvalidConfig(format!("target_capacity must be within 0..=100, got {tc}"))
                })?;
            // Whole percentages are sent as integers, which is what users write in YAML.
            let value = if tc.fract() == 0.0 {
                Value::from(tc as i64)
            } else {
                Value::Number(number)
            };
            out.root.insert("target_capacity".into(), value);
        }
        Ok(out)
    }

    /// The PUT body.
    pub fn to_body(&self) -> Vec<u8> {
        // Serializing a map of JSON values cannot fail (no non-string keys, no custom serializers).
        serde_json::to_vec(&self.root).unwrap_or_default()
    }
}

/// `num_replicas` scaled by `target_capacity` exactly as Serve does
/// (`ray/serve/_private/utils.py::get_capacity_adjusted_num_replicas`): round half up, never below 1
/// unless the capacity or the replica count is 0.
pub fn capacity_adjusted_replicas(num_replicas: u32, target_capacity: Option<f64>) -> u32 {
    let Some(tc) = target_capacity else {
        return num_replicas;
    };
    // Serve rejects capacities above 100; treat them as full capacity rather than over-scaling.
    if tc >= 100.0 {
        return num_replicas;
    }
    if tc <= 0.0 || num_replicas == 0 {
        return 0;
    }
    // floor((n*tc + 50) / 100) is half-up rounding of n*tc/100 without a float .5 comparison.
    let rounded = ((f64::from(num_replicas) * tc + 50.0) / 100.0).floor();
    (rounded as u32).max(1)
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const YAML: &str = r#"
applications:
  - name: fruit_app
    import_path: fruit.deployment_graph
    route_prefix: /fruit
    runtime_env:
      working_dir: "https://github.com/ray-project/test_dag/archive/78b4a5da38796123d9f9ffff59bab2792a043e95.zip"
    deployments:
      - name: MangoStand
        num_replicas: 2
        user_config:
          price: 3
        ray_actor_options:
          num_cpus: 0.1
  - import_path: math:app
"#;

    #[test]
    fn yaml_becomes_the_json_body() {
        let c = ServeConfig::from_yaml(YAML).unwrap();
        let body: Value = serde_json::from_slice(&c.to_body()).unwrap();
        assert_eq!(
            body["applications"][0]["deployments"][0]["num_replicas"],
            json!(2)
        );
        assert_eq!(
            body["applications"][0]["deployments"][0]["ray_actor_options"]["num_cpus"],
            json!(0.1)
        );
        assert_eq!(body["applications"][0]["route_prefix"], json!("/fruit"));
        assert_eq!(
            c.app_names(),
            vec!["fruit_app".to_string(), "default".to_string()]
        );
        assert_eq!(c.target_capacity(), None);
    }

    #[test]
    fn target_capacity_injection() {
        let c = ServeConfig::from_yaml(YAML).unwrap();
        let cases: &[(Option<f64>, Option<Value>)] = &[
            (None, None),
            (Some(0.0), Some(json!(0))),
            (Some(50.0), Some(json!(50))),
            (Some(12.5), Some(json!(12.5))),
            (Some(100.0), Some(json!(100))),
        ];
        for (tc, want) in cases {
            let out = c.with_target_capacity(*tc).unwrap();
            let body: Value = serde_json::from_slice(&out.to_body()).unwrap();
            assert_eq!(body.get("target_capacity"), want.as_ref(), "tc {tc:?}");
        }
        // The user's own value survives when nothing is injected, and is replaced when something is.
        let user = ServeConfig::from_yaml("target_capacity: 30\napplications: []\n").unwrap();
        assert_eq!(
            user.with_target_capacity(None).unwrap().target_capacity(),
            Some(30.0)
        );
        assert_eq!(
            user.with_target_capacity(Some(70.0)).unwrap().target_capacity(),
            Some(70.0)
        );
    }

    #[test]
    fn bad_inputs_name_the_problem() {
        let cases: &[(&str, &str)] = &[
            ("", "empty"),
            ("- a\n- b\n", "got a list"),
            ("just a string", "got a string"),
            ("applications: [\n", "not valid YAML"),
        ];
        for (yaml, want) in cases {
            let err = ServeConfig::from_yaml(yaml).unwrap_err().to_string();
            assert!(err.contains(want), "{yaml:?}: {err}");
        }
        let c = ServeConfig::from_yaml("applications: []").unwrap();
        for tc in [-1.0, 100.5, f64::NAN] {
            let err = c.with_target_capacity(Some(tc)).unwrap_err().to_string();
            assert!(err.contains("target_capacity"), "{err}");
        }
    }

    #[test]
    fn capacity_adjustment_matches_serve() {
        // (num_replicas, target_capacity, expected), expectations from Serve's own rule; (3, 34) -> 1
        // was observed on a real Ray 2.60 head.
        let cases: &[(u32, Option<f64>, u32)] = &[
            (3, None, 3),
            (3, Some(100.0), 3),
            (3, Some(0.0), 0),
            (0, Some(50.0), 0),
            (2, Some(50.0), 1),
            (3, Some(34.0), 1),
            (3, Some(50.0), 2),  // 1.5 rounds half up
            (1, Some(10.0), 1),  // never below 1 while capacity > 0
            (10, Some(25.0), 3), // 2.5 -> 3
            (5, Some(20.0), 1),
            (4, Some(60.0), 2), // 2.4 -> 2
        ];
        for (n, tc, want) in cases {
            assert_eq!(capacity_adjusted_replicas(*n, *tc), *want, "n={n} tc={tc:?}");
        }
    }
}
