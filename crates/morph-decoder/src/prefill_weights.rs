//! Which weights a llama.cpp decoder prefills prompts on. llama.cpp's x86 kernels multiply a
//! prompt's rows by Q8_0 and Q4_0 matrices as matrix products (its GEMM kernels), but by Q4_1
//! ones a dot product at a time: the default model, SmolLM2 as shipped (Q4_1), prefills
//! 1.3–2.0× faster requantized to Q8_0 at +0.18% perplexity, and decodes 0.80–0.97× as fast
//! (`experiments/gguf_formats.py`, docs/serving.md). [`PrefillWeights::Q8_0`] keeps both: the
//! prompt's pieces of two tokens or more run on an 8-bit copy of the file's Q4_1 matrices, every
//! decode step on the file's own weights (the KV rows move between the two; [`super::llamacpp`]).

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use candle_core::Device;
use candle_core::quantized::gguf_file::{Content, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use morph_engine::EngineError;

/// The weights a decoder's prompt pieces of two tokens or more run on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PrefillWeights {
    /// An 8-bit (Q8_0) copy of the file's Q4_1 matrices, made when the decoder loads; a file
    /// with no Q4_1 matrix prefills on its own weights.
    #[default]
    Q8_0,
    /// The file's own weights, as llama-server prefills.
    File,
}

impl std::str::FromStr for PrefillWeights {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "q8_0" => Ok(Self::Q8_0),
            "file" => Ok(Self::File),
            other => Err(format!("'{other}' is not q8_0 or file")),
        }
    }
}

/// The matrix format whose prefill runs a dot product at a time, requantized for it.
const SLOW_PREFILL: GgmlDType = GgmlDType::Q4_1;
/// What it is requantized to.
const FAST_PREFILL: GgmlDType = GgmlDType::Q8_0;
/// `general.file_type` of a GGUF whose matrices are mostly Q8_0 (llama.cpp's `LLAMA_FTYPE_MOSTLY_Q8_0`).
const MOSTLY_Q8_0: u32 = 7;

/// A GGUF written for one load and removed when dropped (llama.cpp maps it while loading; the
/// mapping outlives the name).
#[derive(Debug)]
pub struct ScratchGguf(PathBuf);

impl ScratchGguf {
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for ScratchGguf {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// `gguf` with each of its Q4_1 matrices requantized to Q8_0 (every other tensor and all of its
/// metadata as they are), written to the system's temporary directory; `None` when it has no
/// Q4_1 matrix.
pub fn eight_bit_copy(gguf: &Path) -> Result<Option<ScratchGguf>, EngineError> {
    let fail = |e: &dyn std::fmt::Display| {
        EngineError::Load(format!("an 8-bit prefill copy of {}: {e}", gguf.display()))
    };
    let mut file = File::open(gguf).map_err(|e| fail(&e))?;
    let content = Content::read(&mut file).map_err(|e| fail(&e))?;
    if !content.tensor_infos.values().any(|info| info.ggml_dtype == SLOW_PREFILL) {
        return Ok(None);
    }
    // In the file's own order.
    let mut names: Vec<&String> = content.tensor_infos.keys().collect();
    names.sort_by_key(|name| content.tensor_infos[*name].offset);
    let mut tensors = Vec::with_capacity(names.len());
    for name in names {
        let tensor = content.tensor(&mut file, name, &Device::Cpu).map_err(|e| fail(&e))?;
        let tensor = match tensor.dtype() {
            SLOW_PREFILL => {
                let values = tensor.dequantize(&Device::Cpu).map_err(|e| fail(&e))?;
                QTensor::quantize(&values, FAST_PREFILL).map_err(|e| fail(&e))?
            }
            _ => tensor,
        };
        tensors.push((name.as_str(), tensor));
    }
    let file_type = Value::U32(MOSTLY_Q8_0);
    // The copy is written at the default alignment (32 bytes), so the file's own is dropped.
    let metadata: Vec<(&str, &Value)> = content
        .metadata
        .iter()
        .filter(|(key, _)| key.as_str() != "general.alignment")
        .map(|(key, value)| match key.as_str() {
            "general.file_type" => (key.as_str(), &file_type),
            _ => (key.as_str(), value),
        })
        .collect();
    let scratch = ScratchGguf(scratch_path(gguf));
    let mut out = BufWriter::new(File::create(scratch.path()).map_err(|e| fail(&e))?);
    let tensors: Vec<(&str, &QTensor)> = tensors.iter().map(|(name, t)| (*name, t)).collect();
    candle_core::quantized::gguf_file::write(&mut out, &metadata, &tensors).map_err(|e| fail(&e))?;
    out.into_inner().map_err(|e| fail(&e.error()))?.sync_all().map_err(|e| fail(&e))?;
    Ok(Some(scratch))
}

/// A name no other load of this process or another takes.
fn scratch_path(gguf: &Path) -> PathBuf {
    static LOADS: AtomicU32 = AtomicU32::new(0);
    let stem = gguf.file_stem().map_or_else(|| "decoder".into(), |s| s.to_string_lossy().into_owned());
    let load = LOADS.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("morph-{}-{load}-{stem}.prefill-Q8_0.gguf", std::process::id()))
}
