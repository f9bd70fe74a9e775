//! Where a [`Llama`]'s weights come from: a GGUF file, whole or one pipeline stage's range of
//! layers, every tensor expanded to f32 as it is read; or a stage's prepared artefact (its f32
//! tensors as safetensors and its shape as JSON, kept in the host cache), which is mapped and
//! copied with nothing to parse or expand.

use std::collections::HashMap;
use std::ops::Range;
use std::path::Path;

use candle_core::quantized::QTensor;
use candle_core::quantized::gguf_file::Content;
use candle_core::{Device, Tensor};
use candle_nn::{Embedding, Linear};

use crate::gguf_tokenizer::GgufTokenizer;
use crate::llama::{Layer, Llama, LlamaConfig, rope_tables};
use crate::load::DecoderKernels as Kernels;
use crate::model::DecoderModel;
use morph_engine::EngineError;

/// The architecture candle's decoder implements (`general.architecture`).
const LLAMA: &str = "llama";
const EMBED: &str = "token_embd.weight";
const NORM: &str = "output_norm.weight";
const HEAD: &str = "output.weight";
/// A prepared artefact's tensors and its shape.
const PREPARED_TENSORS: &str = "stage.safetensors";
const PREPARED_SHAPE: &str = "stage.json";

fn load_err(detail: impl std::fmt::Display) -> EngineError {
    EngineError::Load(format!("GGUF decoder: {detail}"))
}

/// What a prepared artefact holds besides its tensors.
#[derive(serde::Serialize, serde::Deserialize)]
struct PreparedShape {
    config: LlamaConfig,
    layers: Range<usize>,
}

impl Llama {
    /// Reads the model and its tokenizer from a GGUF file.
    pub fn load(path: &Path) -> Result<DecoderModel, EngineError> {
        let (mut file, content) = open(path)?;
        let config = config(&content, Kernels::Candle)?;
        let tokenizer = GgufTokenizer::load(path)?;
        let llama =
            Self::assemble(config, 0..config.layers, tied(&content), gguf_reader(&mut file, &content))?;
        Ok(DecoderModel { llama, tokenizer })
    }

    /// Reads the model's shape and its tokenizer from a GGUF file, and no weights: for a
    /// decoder on kernels that hold their own ([`super::LlamaCppKernels`], any architecture
    /// llama.cpp runs). It runs no step.
    pub fn load_shape(path: &Path) -> Result<DecoderModel, EngineError> {
        let (_, content) = open(path)?;
        let config = config(&content, Kernels::LlamaCpp)?;
        let tokenizer = GgufTokenizer::load(path)?;
        let (cos, sin) = rope_tables(&config).map_err(load_err)?;
        let llama = Self { config, embed: None, layers: Vec::new(), first_layer: 0, head: None, cos, sin };
        Ok(DecoderModel { llama, tokenizer })
    }

    /// Reads one pipeline stage's `layers` from a GGUF file, and nothing it does not run.
    pub fn load_stage(path: &Path, layers: Range<usize>) -> Result<Self, EngineError> {
        let (mut file, content) = open(path)?;
        let config = config(&content, Kernels::Candle)?;
        Self::assemble(config, layers, tied(&content), gguf_reader(&mut file, &content))
    }

    /// Writes this model's weights, as they run, into `dir` (a prepared artefact).
    pub fn save_prepared(&self, dir: &Path) -> Result<(), EngineError> {
        let io = |e: std::io::Error| EngineError::Load(format!("prepared decoder in {}: {e}", dir.display()));
        let mut tensors: HashMap<String, Tensor> = HashMap::new();
        if let Some(embed) = &self.embed {
            tensors.insert(EMBED.into(), embed.embeddings().clone());
        }
        if let Some((norm, head)) = &self.head {
            tensors.insert(NORM.into(), norm.clone());
            tensors.insert(HEAD.into(), head.weight().clone());
        }
        for (at, layer) in self.layers.iter().enumerate() {
            for (part, tensor) in layer.parts() {
                tensors.insert(layer_tensor(self.first_layer + at, part), tensor.clone());
            }
        }
        candle_core::safetensors::save(&tensors, dir.join(PREPARED_TENSORS))?;
        let layers = self.first_layer..self.first_layer + self.layers.len();
        let shape = serde_json::to_vec(&PreparedShape { config: self.config, layers })
            .map_err(|e| EngineError::Load(e.to_string()))?;
        std::fs::write(dir.join(PREPARED_SHAPE), shape).map_err(io)
    }

    /// A stage from the prepared artefact in `dir`, as [`Llama::save_prepared`] wrote it.
    pub fn load_prepared(dir: &Path) -> Result<Self, EngineError> {
        let io = |e: std::io::Error| EngineError::Load(format!("prepared decoder in {}: {e}", dir.display()));
        let shape = std::fs::read(dir.join(PREPARED_SHAPE)).map_err(io)?;
        let shape: PreparedShape = serde_json::from_slice(&shape)
            .map_err(|e| EngineError::Load(format!("prepared decoder shape: {e}")))?;
        let bytes = morph_engine::map_prepared(&dir.join(PREPARED_TENSORS)).map_err(io)?;
        let mut tensors = candle_core::safetensors::load_buffer(&bytes, &Device::Cpu)?;
        let read = |name: &str| tensors.remove(name).ok_or_else(|| load_err(format!("prepared: no {name}")));
        Self::assemble(shape.config, shape.layers, false, read)
    }

    /// The model of `config` holding `layers`, its tensors from `tensor`. With `tied`, the
    /// output head is the embedding matrix.
    fn assemble(
        config: LlamaConfig,
        layers: Range<usize>,
        tied: bool,
        mut tensor: impl FnMut(&str) -> Result<Tensor, EngineError>,
    ) -> Result<Self, EngineError> {
        if layers.is_empty() || layers.end > config.layers {
            return Err(load_err(format!("layers {layers:?} of a {}-layer model", config.layers)));
        }
        let embeddings = match layers.start == 0 {
            true => Some(tensor(EMBED)?),
            false => None,
        };
        let head = match layers.end == config.layers {
            true => {
                let weight = match (tied, &embeddings) {
                    (true, Some(embeddings)) => embeddings.clone(),
                    (true, None) => tensor(EMBED)?,
                    (false, _) => tensor(HEAD)?,
                };
                Some((tensor(NORM)?, Linear::new(weight, None)))
            }
            false => None,
        };
        let embed = embeddings.map(|e| Embedding::new(e, config.hidden));
        let first_layer = layers.start;
        let layers =
            layers.map(|i| Layer::read(|part| tensor(&layer_tensor(i, part)))).collect::<Result<_, _>>()?;
        let (cos, sin) = rope_tables(&config).map_err(load_err)?;
        Ok(Self { config, embed, layers, first_layer, head, cos, sin })
    }
}

impl Layer {
    /// The names of a layer's tensors after `blk.N.`, in [`Layer::parts`]'s order.
    const PARTS: [&str; 9] = [
        "attn_norm",
        "attn_q",
        "attn_k",
        "attn_v",
        "attn_output",
        "ffn_norm",
        "ffn_gate",
        "ffn_up",
        "ffn_down",
    ];

    fn read(mut tensor: impl FnMut(&str) -> Result<Tensor, EngineError>) -> Result<Self, EngineError> {
        let [attn_norm, q, k, v, o, ffn_norm, gate, up, down] = Self::PARTS.map(&mut tensor);
        let linear = |w: Result<Tensor, EngineError>| w.map(|w| Linear::new(w, None));
        Ok(Self {
            attn_norm: attn_norm?,
            q: linear(q)?,
            k: linear(k)?,
            v: linear(v)?,
            o: linear(o)?,
            ffn_norm: ffn_norm?,
            gate: linear(gate)?,
            up: linear(up)?,
            down: linear(down)?,
        })
    }

    fn parts(&self) -> impl Iterator<Item = (&'static str, &Tensor)> {
        let held = [
            &self.attn_norm,
            self.q.weight(),
            self.k.weight(),
            self.v.weight(),
            self.o.weight(),
            &self.ffn_norm,
            self.gate.weight(),
            self.up.weight(),
            self.down.weight(),
        ];
        Self::PARTS.into_iter().zip(held)
    }
}

fn layer_tensor(layer: usize, part: &str) -> String {
    format!("blk.{layer}.{part}.weight")
}

fn open(path: &Path) -> Result<(std::fs::File, Content), EngineError> {
    let mut file = std::fs::File::open(path).map_err(|e| load_err(format!("{}: {e}", path.display())))?;
    let content = Content::read(&mut file).map_err(load_err)?;
    Ok((file, content))
}

/// Without an output matrix the head is tied to the embeddings.
fn tied(content: &Content) -> bool {
    !content.tensor_infos.contains_key(HEAD)
}

/// Reads a tensor of the GGUF file and expands it to f32 (`[out, in]` for matrices).
fn gguf_reader<'a>(
    file: &'a mut std::fs::File,
    content: &'a Content,
) -> impl FnMut(&str) -> Result<Tensor, EngineError> + 'a {
    move |name| {
        let q: QTensor =
            content.tensor(file, name, &Device::Cpu).map_err(|e| load_err(format!("{name}: {e}")))?;
        q.dequantize(&Device::Cpu).map_err(load_err)
    }
}

/// The model's shape from the GGUF metadata (`ARCH.block_count`, …). candle's kernels run the
/// Llama architecture only; llama.cpp's, any it loads.
fn config(content: &Content, kernels: Kernels) -> Result<LlamaConfig, EngineError> {
    let arch = content.metadata.get("general.architecture").and_then(|v| v.to_string().ok());
    let arch = arch.ok_or_else(|| load_err("no general.architecture"))?;
    if kernels == Kernels::Candle && arch != LLAMA {
        return Err(load_err(format!(
            "candle's decoder (--kernels candle, and pipeline stages) runs the llama architecture only, and this GGUF is {arch}: serve it on llama.cpp's kernels (--kernels llama-cpp)"
        )));
    }
    let meta = |key: &str| {
        content.metadata.get(&format!("{arch}.{key}")).ok_or_else(|| load_err(format!("no {arch}.{key}")))
    };
    let int = |key: &str| meta(key).and_then(|v| v.to_u32().map_err(load_err)).map(|v| v as usize);
    let float = |key: &str| meta(key).and_then(|v| v.to_f32().map_err(load_err));
    let (hidden, heads) = (int("embedding_length")?, int("attention.head_count")?);
    Ok(LlamaConfig {
        layers: int("block_count")?,
        hidden,
        heads,
        // Absent means as many as the query heads (llama.cpp's reading too).
        kv_heads: int("attention.head_count_kv").unwrap_or(heads),
        head_dim: hidden / heads,
        context: int("context_length")?,
        // candle's RMS norm needs it; llama.cpp reads its own, whatever the architecture's norm.
        eps: match kernels {
            Kernels::Candle => f64::from(float("attention.layer_norm_rms_epsilon")?),
            Kernels::LlamaCpp => 0.0,
        },
        rope_base: float("rope.freq_base").unwrap_or(10_000.0),
    })
}
