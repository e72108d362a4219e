//! Validation of a PUT body in the shape of Ray's pydantic errors: "N validation error(s) for
//! ServeDeploySchema\n<location>\n  <message> [type=<kind>]", as a real head answers with a 400.

use std::collections::HashSet;

use serde_json::{Map, Value};

pub(super) struct ParsedConfig {
    pub(super) target_capacity: Option<f64>,
    pub(super) apps: Vec<ParsedApp>,
}

pub(super) struct ParsedApp {
    pub(super) name: String,
    pub(super) import_path: String,
    pub(super) route_prefix: Option<String>,
    pub(super) config: Value,
    pub(super) code_key: String,
    pub(super) deployments: Vec<ParsedDeployment>,
}

/// One deployment of an app as the sim needs it: how many replicas and what each reserves.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub(super) struct ParsedDeployment {
    pub(super) name: String,
    pub(super) replicas: u32,
    /// `ray_actor_options.num_cpus`, in Ray's fixed-point resource units (`CPU_UNITS` per CPU).
    pub(super) cpu_units: u64,
}

/// Ray accounts resources in fixed point with four decimals; the sim does too, so sums are exact.
pub const CPU_UNITS: f64 = 10_000.0;

/// Serve reserves one CPU per replica unless `ray_actor_options.num_cpus` says otherwise.
const DEFAULT_REPLICA_CPU_UNITS: u64 = 10_000;

/// One pydantic error: where (dotted location), the message, pydantic's error type.
type FieldError = (String, String, &'static str);

pub(super) fn validate(root: &Value) -> Result<ParsedConfig, String> {
    let Some(obj) = root.as_object() else {
        return Err(render_errors(&[(
            "".into(),
            "Input should be a valid dictionary".into(),
            "dict_type",
        )]));
    };
    let mut errors: Vec<FieldError> = Vec::new();
    let target_capacity = target_capacity(obj, &mut errors);
    let apps: Vec<ParsedApp> = applications(obj, &mut errors)
        .iter()
        .enumerate()
        .filter_map(|(i, app)| parse_app(&format!("applications.{i}"), app, &mut errors))
        .collect();
    check_duplicates(&apps, &mut errors);
    if errors.is_empty() {
        Ok(ParsedConfig {
            target_capacity,
            apps,
        })
    } else {
        Err(render_errors(&errors))
    }
}

/// `target_capacity`: absent or null, or a number within 0 and 100.
fn target_capacity(obj: &Map<String, Value>, errors: &mut Vec<FieldError>) -> Option<f64> {
    match obj.get("target_capacity") {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_f64() {
            Some(tc) if (0.0..=100.0).contains(&tc) => Some(tc),
            Some(_) => {
                errors.push((
                    "target_capacity".into(),
                    "Input should be within 0 and 100".into(),
                    "range",
                ));
                None
            }
            None => {
                errors.push((
                    "target_capacity".into(),
                    "Input should be a valid number".into(),
                    "float_type",
                ));
                None
            }
        },
    }
}

/// `applications`: a required list; anything else is reported and read as empty.
fn applications<'a>(obj: &'a Map<String, Value>, errors: &mut Vec<FieldError>) -> &'a [Value] {
    match obj.get("applications") {
        Some(Value::Array(apps)) => apps.as_slice(),
        Some(_) => {
            errors.push((
                "applications".into(),
                "Input should be a valid list".into(),
                "list_type",
            ));
            &[]
        }
        None => {
            errors.push(("applications".into(), "Field required".into(), "missing"));
            &[]
        }
    }
}

/// One application at `loc`. None when it is not a dictionary or its `deployments` is not a list: Ray
/// reports those and the sim has nothing to run for it.
fn parse_app(loc: &str, app: &Value, errors: &mut Vec<FieldError>) -> Option<ParsedApp> {
    let Some(a) = app.as_object() else {
        errors.push((
            loc.to_owned(),
            "Input should be a valid dictionary".into(),
            "dict_type",
        ));
        return None;
    };
    let import_path = import_path(loc, a, errors);
    let route_prefix = route_prefix(loc, a, errors);
    check_working_dir(loc, a, errors);
    let mut deployments = parse_deployments(loc, a, errors)?;
    if deployments.is_empty() && !import_path.is_empty() {
        // Without overrides Ray takes the deployments from the code; the sim assumes one,
        // named after the attribute being imported, with one replica of one CPU.
        let attr = import_path.rsplit([':', '.']).next().unwrap_or("app");
        deployments.push(ParsedDeployment {
            name: attr.to_owned(),
            replicas: 1,
            cpu_units: DEFAULT_REPLICA_CPU_UNITS,
        });
    }
    let name = a
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .unwrap_or("default")
        .to_owned();
    Some(ParsedApp {
        code_key: code_key(a),
        name,
        import_path,
        route_prefix,
        config: app.clone(),
        deployments,
    })
}

/// `import_path`: a required string; empty when missing or of another type (and reported).
fn import_path(loc: &str, a: &Map<String, Value>, errors: &mut Vec<FieldError>) -> String {
    match a.get("import_path") {
        Some(Value::String(s)) => s.clone(),
        Some(_) => {
            errors.push((
                format!("{loc}.import_path"),
                "Input should be a valid string".into(),
                "string_type",
            ));
            String::new()
        }
        None => {
            errors.push((format!("{loc}.import_path"), "Field required".into(), "missing"));
            String::new()
        }
    }
}

/// `route_prefix`: "/" when absent, none when null, otherwise a path starting with "/".
fn route_prefix(loc: &str, a: &Map<String, Value>, errors: &mut Vec<FieldError>) -> Option<String> {
    match a.get("route_prefix") {
        None => Some("/".to_owned()),
        Some(Value::Null) => None,
        Some(Value::String(s)) if s.starts_with('/') => Some(s.clone()),
        Some(_) => {
            errors.push((
                format!("{loc}.route_prefix"),
                "Value error, route_prefix must start with \"/\"".into(),
                "value_error",
            ));
            None
        }
    }
}

/// Serve takes only remote URIs in `runtime_env.working_dir`; a local path is an error.
fn check_working_dir(loc: &str, a: &Map<String, Value>, errors: &mut Vec<FieldError>) {
    if let Some(wd) = a
        .get("runtime_env")
        .and_then(|r| r.get("working_dir"))
        .and_then(Value::as_str)
        && !wd.contains("://")
    {
        errors.push((
            format!("{loc}.runtime_env"),
            format!("Value error, runtime_envs in the Serve config support only remote URIs in working_dir and py_modules, or \"local://\" URIs. Got error when parsing URI: Expected URI but received path {wd}"),
            "value_error",
        ));
    }
}

/// The app's `deployments` overrides, the valid ones; None when `deployments` is not a list.
fn parse_deployments(
    loc: &str,
    a: &Map<String, Value>,
    errors: &mut Vec<FieldError>,
) -> Option<Vec<ParsedDeployment>> {
    let Some(deps) = a.get("deployments") else {
        return Some(Vec::new());
    };
    let Some(deps) = deps.as_array() else {
        errors.push((
            format!("{loc}.deployments"),
            "Input should be a valid list".into(),
            "list_type",
        ));
        return None;
    };
    Some(
        deps.iter()
            .enumerate()
            .filter_map(|(j, d)| parse_deployment(&format!("{loc}.deployments.{j}"), d, errors))
            .collect(),
    )
}

/// One deployment override at `dloc`: its name, replicas and CPU per replica, or the errors in them.
fn parse_deployment(dloc: &str, d: &Value, errors: &mut Vec<FieldError>) -> Option<ParsedDeployment> {
    let Some(name) = d.get("name").and_then(Value::as_str) else {
        errors.push((format!("{dloc}.name"), "Field required".into(), "missing"));
        return None;
    };
    match (configured_replicas(d), replica_cpu_units(d)) {
        (Ok(replicas), Ok(cpu_units)) => Some(ParsedDeployment {
            name: name.to_owned(),
            replicas,
            cpu_units,
        }),
        (replicas, cpu_units) => {
            if let Err(msg) = replicas {
                errors.push((format!("{dloc}.num_replicas"), msg, "greater_than"));
            }
            if let Err((field, msg, kind)) = cpu_units {
                errors.push((format!("{dloc}.{field}"), msg, kind));
            }
            None
        }
    }
}

/// Application names and route prefixes must each be unique across the config.
fn check_duplicates(apps: &[ParsedApp], errors: &mut Vec<FieldError>) {
    let mut seen_names = HashSet::new();
    let mut seen_routes = HashSet::new();
    for app in apps {
        if !seen_names.insert(app.name.as_str()) {
            errors.push((
                "applications".into(),
                format!("Value error, Found multiple configs for application \"{}\". Please remove all duplicates.", app.name),
                "value_error",
            ));
        }
        if let Some(r) = &app.route_prefix
            && !seen_routes.insert(r.as_str())
        {
            errors.push((
                "applications".into(),
                format!("Value error, Found duplicate route prefix \"{r}\". Please remove all duplicates."),
                "value_error",
            ));
        }
    }
}

/// `num_replicas` (int > 0, or "auto") or the autoscaling start size; Ray's default is 1.
pub fn configured_replicas(d: &Value) -> Result<u32, String> {
    let autoscaling_start = |cfg: Option<&Value>| {
        let get = |k: &str| cfg.and_then(|c| c.get(k)).and_then(Value::as_u64);
        get("initial_replicas")
            .or_else(|| get("min_replicas"))
            .unwrap_or(1)
    };
    let n = match d.get("num_replicas") {
        None | Some(Value::Null) => autoscaling_start(d.get("autoscaling_config")),
        Some(Value::String(s)) if s == "auto" => autoscaling_start(d.get("autoscaling_config")),
        Some(v) => match v.as_u64() {
            Some(n) if n > 0 => n,
            _ => return Err("Input should be greater than 0".into()),
        },
    };
    u32::try_from(n).map_err(|_| "Input should be less than 4294967296".into())
}

/// What one replica reserves: `ray_actor_options.num_cpus` (a number >= 0; pydantic also takes a
/// numeric string), Serve's 1 CPU when absent or null. 0 is allowed and reserves nothing.
/// The error names the field (under the deployment), the message and pydantic's error type.
pub fn replica_cpu_units(d: &Value) -> Result<u64, (&'static str, String, &'static str)> {
    const FIELD: &str = "ray_actor_options.num_cpus";
    let options = match d.get("ray_actor_options") {
        None | Some(Value::Null) => return Ok(DEFAULT_REPLICA_CPU_UNITS),
        Some(Value::Object(o)) => o,
        Some(_) => {
            return Err((
                "ray_actor_options",
                "Input should be a valid dictionary".into(),
                "dict_type",
            ));
        }
    };
    let cpus = match options.get("num_cpus") {
        None | Some(Value::Null) => return Ok(DEFAULT_REPLICA_CPU_UNITS),
        Some(Value::Number(n)) => n.as_f64(),
        Some(Value::String(s)) => Some(s.trim().parse::<f64>().map_err(|_| {
            (
                FIELD,
                "Input should be a valid number, unable to parse string as a number".into(),
                "float_parsing",
            )
        })?),
        Some(_) => None,
    };
    match cpus {
        Some(c) if c.is_finite() && c >= 0.0 => Ok(to_cpu_units(c)),
        Some(c) if c.is_finite() => Err((
            FIELD,
            "Input should be greater than or equal to 0".into(),
            "greater_than_equal",
        )),
        _ => Err((FIELD, "Input should be a valid number".into(), "float_type")),
    }
}

/// CPUs to fixed-point units, rounded to Ray's precision and saturating.
pub(super) fn to_cpu_units(cpus: f64) -> u64 {
    // `as` saturates: negative and NaN give 0, +inf gives u64::MAX.
    (cpus * CPU_UNITS).round() as u64
}

fn code_key(app: &Map<String, Value>) -> String {
    let mut a = app.clone();
    if let Some(Value::Array(deps)) = a.get_mut("deployments") {
        for d in deps.iter_mut() {
            if let Some(d) = d.as_object_mut() {
                d.remove("num_replicas");
                d.remove("autoscaling_config");
            }
        }
    }
    Value::Object(a).to_string()
}

fn render_errors(errors: &[FieldError]) -> String {
    let n = errors.len();
    let mut out = format!(
        "{n} validation error{} for ServeDeploySchema",
        if n == 1 { "" } else { "s" }
    );
    for (loc, msg, kind) in errors {
        out.push_str(&format!("\n{loc}\n  {msg} [type={kind}]"));
    }
    out
}
