//! How problems show values: one line, named by their JSON kind, long text cut.

use serde_json::Value;

pub(crate) fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// "expected a number, found string `12.50`": scalars are shown, containers only named.
pub(crate) fn type_error(expected: &str, value: &Value) -> String {
    match value {
        Value::Bool(b) => format!("expected {expected}, found boolean `{b}`"),
        Value::Number(n) => format!("expected {expected}, found number `{n}`"),
        Value::String(s) => format!("expected {expected}, found string `{}`", shown_str(s)),
        other => format!("expected {expected}, found {}", kind(other)),
    }
}

pub(crate) use crate::text::shown as shown_str;

pub(crate) fn listed(values: &[&str]) -> String {
    values
        .iter()
        .map(|v| format!("`{v}`"))
        .collect::<Vec<_>>()
        .join(", ")
}
