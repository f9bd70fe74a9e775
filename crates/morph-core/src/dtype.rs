//! The arithmetic of an encoder graph's weight products (`--dtype`); what each means for the
//! graph is `morph_encoder::onnx::precision`'s.

/// The arithmetic of the weight matrix products.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    #[default]
    Fp32,
    Int8,
}

impl std::str::FromStr for Dtype {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "fp32" | "float32" => Ok(Self::Fp32),
            "int8" => Ok(Self::Int8),
            "bf16" | "bfloat16" => Err(
                "bf16: ONNX Runtime 1.31's CPU execution provider has no bfloat16 MatMul kernel (morph-benches' int8_graphs asks it for one), so Morph writes no bf16 graph; use int8 or fp32".into(),
            ),
            other => Err(format!("'{other}' is not a dtype: fp32 or int8")),
        }
    }
}

impl std::fmt::Display for Dtype {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Fp32 => "fp32",
            Self::Int8 => "int8",
        })
    }
}
