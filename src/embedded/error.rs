//! API errors, rendered as the `Status` bodies a real API server sends (kubectl and kube parse them).

use crate::api::validation::FieldError;
use serde_json::{Value, json};

/// One `details.causes[]` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cause {
    pub reason: String,
    pub field: String,
    pub message: String,
}

/// An error the server answers with; `code` and `reason` follow the real server's table.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    pub code: u16,
    pub reason: String,
    pub message: String,
    pub details: Box<Details>,
}

/// `details.name`, `details.group`, `details.kind` (the plural, as the real server puts it), causes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Details {
    pub name: String,
    pub group: String,
    pub kind: String,
    pub causes: Vec<Cause>,
    /// Sent as `details: {}` when empty: kube-apiserver's generic server responses (a JSON patch that
    /// fails, an unknown patch content type) carry an empty details object rather than none.
    pub always: bool,
}

impl ApiError {
    pub fn new(code: u16, reason: &str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason: reason.into(),
            message: message.into(),
            details: Box::default(),
        }
    }
    pub fn details(mut self, name: &str, group: &str, kind: &str) -> Self {
        self.details.name = name.into();
        self.details.group = group.into();
        self.details.kind = kind.into();
        self
    }
    pub fn not_found(qualified: &str, name: &str) -> Self {
        ApiError::new(404, "NotFound", format!("{qualified} \"{name}\" not found"))
    }
    pub fn already_exists(qualified: &str, name: &str) -> Self {
        ApiError::new(
            409,
            "AlreadyExists",
            format!("{qualified} \"{name}\" already exists"),
        )
    }
    pub fn conflict(qualified: &str, name: &str) -> Self {
        ApiError::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {qualified} \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
            ),
        )
    }
    /// Marks the answer as one of kube-apiserver's generic server responses, whose `details` is
    /// present even when empty.
    pub fn generic(mut self) -> Self {
        self.details.always = true;
        self
    }
    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError::new(400, "BadRequest", message)
    }
    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        ApiError::new(405, "MethodNotAllowed", message)
    }
    pub fn unsupported_media(message: impl Into<String>) -> Self {
        ApiError::new(415, "UnsupportedMediaType", message)
    }
    pub fn internal(message: impl Into<String>) -> Self {
        ApiError::new(500, "InternalError", message)
    }
    pub fn expired(message: impl Into<String>) -> Self {
        ApiError::new(410, "Expired", message)
    }
    /// 422 Invalid, formatted as the real server does: `<Kind>[.<group>] "<name>" is invalid: [<e1>, <e2>]`
    /// (`kind` is passed already qualified, see `ResourceInfo::qualified_kind`).
    pub fn invalid(kind: &str, name: &str, errors: &[FieldError]) -> Self {
        let joined = if errors.len() == 1 {
            errors[0].to_string()
        } else {
            format!(
                "[{}]",
                errors
                    .iter()
                    .map(|e| e.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        let mut e = ApiError::new(422, "Invalid", format!("{kind} \"{name}\" is invalid: {joined}"));
        e.details.causes = errors
            .iter()
            .map(|fe| Cause {
                reason: fe.kind.reason().into(),
                field: fe.field.clone(),
                message: fe.body(),
            })
            .collect();
        e
    }

    pub fn to_status(&self) -> Value {
        let d = &self.details;
        let mut details = serde_json::Map::new();
        if !d.name.is_empty() {
            details.insert("name".into(), json!(d.name));
        }
        if !d.group.is_empty() {
            details.insert("group".into(), json!(d.group));
        }
        if !d.kind.is_empty() {
            details.insert("kind".into(), json!(d.kind));
        }
        if !d.causes.is_empty() {
            details.insert(
                "causes".into(),
                Value::Array(
                    d.causes
                        .iter()
                        .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                        .collect(),
                ),
            );
        }
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if !details.is_empty() || d.always {
            s["details"] = Value::Object(details);
        }
        // Some refusals carry no reason (a strategic merge patch's unknown directive: 500, no reason).
        if self.reason.is_empty()
            && let Some(o) = s.as_object_mut()
        {
            o.remove("reason");
        }
        s
    }
}
