//! Field errors shared by every validator: the webhook, the embedded API server and `quotagate validate`
//! all report the same path, rule and message, shaped like Kubernetes' `field.Error`.

use std::fmt;

/// The kind of rule a value broke; maps onto the `reason` of a Kubernetes `StatusCause`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorType {
    Required,
    Invalid,
    /// A value of the wrong JSON type for its schema (apimachinery's `field.TypeInvalid`).
    TypeInvalid,
    Duplicate,
    NotFound,
    NotSupported,
    TooLong,
    TooMany,
    Forbidden,
}

impl ErrorType {
    /// The `StatusCause.reason` a real API server reports for this error type.
    pub fn reason(self) -> &'static str {
        match self {
            ErrorType::Required => "FieldValueRequired",
            ErrorType::Invalid => "FieldValueInvalid",
            ErrorType::TypeInvalid => "FieldValueTypeInvalid",
            ErrorType::Duplicate => "FieldValueDuplicate",
            ErrorType::NotFound => "FieldValueNotFound",
            ErrorType::NotSupported => "FieldValueNotSupported",
            ErrorType::TooLong => "FieldValueTooLong",
            ErrorType::TooMany => "FieldValueTooMany",
            ErrorType::Forbidden => "FieldValueForbidden",
        }
    }

    fn label(self) -> &'static str {
        match self {
            ErrorType::Required => "Required value",
            ErrorType::Invalid | ErrorType::TypeInvalid => "Invalid value",
            ErrorType::Duplicate => "Duplicate value",
            ErrorType::NotFound => "Not found",
            ErrorType::NotSupported => "Unsupported value",
            ErrorType::TooLong => "Too long",
            ErrorType::TooMany => "Too many",
            ErrorType::Forbidden => "Forbidden",
        }
    }
}

/// One broken rule: the field path (`spec.resourceGroups[0].flavors[1]`), its type and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    pub field: String,
    pub kind: ErrorType,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, kind: ErrorType, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            kind,
            message: message.into(),
        }
    }
    pub fn required(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(field, ErrorType::Required, message)
    }
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(field, ErrorType::Invalid, message)
    }
    pub fn forbidden(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(field, ErrorType::Forbidden, message)
    }
}

impl FieldError {
    /// The error without its field, as a real API server puts it in a `StatusCause.message`
    /// (kubectl prints `* <field>: <body>`).
    pub fn body(&self) -> String {
        if self.message.is_empty() {
            return self.kind.label().to_string();
        }
        format!("{}: {}", self.kind.label(), self.message)
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.body())
    }
}

/// Builds field paths the way Kubernetes prints them: `spec.workerGroupSpecs[2].groupName`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Path(String);

impl Path {
    pub fn root(name: &str) -> Self {
        Path(name.to_string())
    }
    pub fn child(&self, name: &str) -> Self {
        if self.0.is_empty() {
            Path(name.to_string())
        } else {
            Path(format!("{}.{}", self.0, name))
        }
    }
    pub fn index(&self, i: usize) -> Self {
        Path(format!("{}[{}]", self.0, i))
    }
    pub fn key(&self, k: &str) -> Self {
        Path(format!("{}[{}]", self.0, k))
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&Path> for String {
    fn from(p: &Path) -> String {
        p.0.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_print_like_kubernetes() {
        let p = Path::root("spec")
            .child("resourceGroups")
            .index(0)
            .child("flavors")
            .index(1);
        assert_eq!(p.as_str(), "spec.resourceGroups[0].flavors[1]");
        let e = FieldError::invalid(&p, "must list exactly the covered resources");
        assert_eq!(
            e.to_string(),
            "spec.resourceGroups[0].flavors[1]: Invalid value: must list exactly the covered resources"
        );
        assert_eq!(e.kind.reason(), "FieldValueInvalid");
    }
}
