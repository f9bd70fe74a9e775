//! How an encoder's hidden states become one vector per text (the computation is the encoder's,
//! `morph_encoder::pooling`).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Pooling {
    /// Mean of the real (unmasked) tokens: sentence-transformers' default.
    #[default]
    Mean,
    /// The first token (`[CLS]`).
    Cls,
    /// The last real token (decoder-style embedding models).
    Last,
}

impl std::str::FromStr for Pooling {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "mean" => Ok(Pooling::Mean),
            "cls" => Ok(Pooling::Cls),
            "last" => Ok(Pooling::Last),
            other => Err(format!("pooling '{other}' is not one of: mean, cls, last")),
        }
    }
}

impl std::fmt::Display for Pooling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Pooling::Mean => "mean",
            Pooling::Cls => "cls",
            Pooling::Last => "last",
        })
    }
}
