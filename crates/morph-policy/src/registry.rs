//! Policies by name, with parameters from a scenario file or the command line.

use morph_core::Policy;

use crate::{DynamicBatching, DynamicBatchingConfig};

#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("unknown policy '{0}' (known: {KNOWN:?})")]
    Unknown(String),
    #[error("parameters of policy '{name}': {source}")]
    Params { name: String, source: serde_json::Error },
}

/// Names [`build`] accepts.
pub const KNOWN: [&str; 1] = ["dynamic-batching"];

/// Builds the policy `name` from `params` (a JSON object of its config fields; missing fields
/// take their defaults, unknown ones are an error).
pub fn build(name: &str, params: &serde_json::Value) -> Result<Box<dyn Policy>, PolicyError> {
    let params_err = |source| PolicyError::Params { name: name.to_string(), source };
    match name {
        "dynamic-batching" => {
            let config: DynamicBatchingConfig = serde_json::from_value(params.clone()).map_err(params_err)?;
            Ok(Box::new(DynamicBatching::new(config)))
        }
        other => Err(PolicyError::Unknown(other.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn builds_known_policies_and_rejects_the_rest() {
        let p = build("dynamic-batching", &json!({"max_queue": 7})).unwrap();
        assert_eq!(p.describe()["max_queue"], 7);
        assert_eq!(p.describe()["max_batch_tokens"], 16_384);
        assert!(matches!(build("fifo", &json!({})), Err(PolicyError::Unknown(_))));
        assert!(matches!(
            build("dynamic-batching", &json!({"max_queu": 1})),
            Err(PolicyError::Params { .. })
        ));
    }
}
