//! Parsing request bodies into valid values at the edge, with messages that name the field.

use serde_json::{Map, Value};

use crate::error::ApiError;

/// The body as a JSON object.
pub fn object(body: &[u8]) -> Result<Map<String, Value>, ApiError> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(ApiError::validation("body", "must be a JSON object")),
        Err(e) => Err(ApiError::MalformedJson(e.to_string())),
    }
}

/// A string or a non-empty array of strings, none empty, at most `max_items` of them.
pub fn texts(body: &Map<String, Value>, field: &str, max_items: usize) -> Result<Vec<String>, ApiError> {
    let non_empty = |name: String, v: &Value| match v {
        Value::String(s) if s.is_empty() => Err(ApiError::validation(name, "must not be empty")),
        Value::String(s) => Ok(s.clone()),
        _ => Err(ApiError::validation(name, "must be a string")),
    };
    match body.get(field) {
        None | Some(Value::Null) => Err(ApiError::validation(field, "is required")),
        Some(Value::Array(items)) if items.is_empty() => {
            Err(ApiError::validation(field, "must not be an empty array"))
        }
        Some(Value::Array(items)) if items.len() > max_items => Err(ApiError::validation(
            field,
            format!("has {} items; at most {max_items} per call", items.len()),
        )),
        Some(Value::Array(items)) => {
            items.iter().enumerate().map(|(i, v)| non_empty(format!("{field}[{i}]"), v)).collect()
        }
        Some(v @ Value::String(_)) => Ok(vec![non_empty(field.to_string(), v)?]),
        Some(_) => Err(ApiError::validation(field, "must be a string or an array of strings")),
    }
}

pub fn bool_or(body: &Map<String, Value>, field: &str, default: bool) -> Result<bool, ApiError> {
    match body.get(field) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(ApiError::validation(field, "must be true or false")),
    }
}

pub fn optional_string<'a>(body: &'a Map<String, Value>, field: &str) -> Result<Option<&'a str>, ApiError> {
    match body.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(ApiError::validation(field, "must be a string")),
    }
}

/// A number in `min..=max`, `default` when absent.
pub fn number_in(
    body: &Map<String, Value>,
    field: &str,
    default: f64,
    min: f64,
    max: f64,
) -> Result<f64, ApiError> {
    Ok(optional_number_in(body, field, min, max)?.unwrap_or(default))
}

/// A number in `min..=max`, or `None` when absent.
pub fn optional_number_in(
    body: &Map<String, Value>,
    field: &str,
    min: f64,
    max: f64,
) -> Result<Option<f64>, ApiError> {
    match body.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match n.as_f64() {
            Some(v) if (min..=max).contains(&v) => Ok(Some(v)),
            _ => Err(ApiError::validation(field, format!("must be between {min} and {max}"))),
        },
        Some(_) => Err(ApiError::validation(field, "must be a number")),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn texts_accepts_a_string_or_strings_and_names_the_bad_field() {
        assert_eq!(texts(&map(json!({"input": "a"})), "input", 4).unwrap(), vec!["a"]);
        assert_eq!(texts(&map(json!({"input": ["a", "b"]})), "input", 4).unwrap(), vec!["a", "b"]);
        let err = |v| texts(&map(v), "input", 2).unwrap_err().to_string();
        assert_eq!(err(json!({})), "input: is required");
        assert_eq!(err(json!({"input": ""})), "input: must not be empty");
        assert_eq!(err(json!({"input": []})), "input: must not be an empty array");
        assert_eq!(err(json!({"input": ["a", 3]})), "input[1]: must be a string");
        assert_eq!(err(json!({"input": ["a", ""]})), "input[1]: must not be empty");
        assert_eq!(err(json!({"input": 7})), "input: must be a string or an array of strings");
        assert_eq!(err(json!({"input": ["a", "b", "c"]})), "input: has 3 items; at most 2 per call");
    }

    #[test]
    fn body_must_be_a_json_object() {
        assert!(matches!(object(b"{"), Err(ApiError::MalformedJson(_))));
        assert_eq!(object(b"[1]").unwrap_err().to_string(), "body: must be a JSON object");
        assert_eq!(
            bool_or(&map(json!({"t": 1})), "t", false).unwrap_err().to_string(),
            "t: must be true or false"
        );
    }
}
