//! The candle encoder and its runtimes. An [`Encoder`] holds the weights once; any number of
//! [`CandleRuntime`]s (fixed or dynamic shape) share it.

use std::sync::Arc;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use morph_core::{RuntimeSpec, TokenPlan};

use crate::bert::{BertModel, Kernels};
use crate::checkpoint::Checkpoint;
use crate::pooling::{Pool, Pooling};
use morph_core::PromptMode;
use morph_engine::{BatchInput, Engine, EngineError, check_batch, plain_tokens};
use morph_fetch::ModelFiles;

/// Weights plus pooling: everything needed to turn padded id tensors into vectors.
#[derive(Debug)]
pub struct Encoder {
    model: BertModel,
    pooling: Pooling,
}

impl Encoder {
    pub fn load(files: &ModelFiles, pooling: Pooling) -> Result<Self, EngineError> {
        Self::load_with(files, pooling, Kernels::default())
    }

    pub fn load_with(files: &ModelFiles, pooling: Pooling, kernels: Kernels) -> Result<Self, EngineError> {
        let checkpoint = Checkpoint::load(files)?;
        let vb = VarBuilder::from_tensors(checkpoint.tensors, DType::F32, &Device::Cpu);
        let mut model = BertModel::load(vb, &checkpoint.config)
            .map_err(|e| EngineError::Load(format!("weights: {e}")))?;
        model.kernels = kernels;
        Ok(Self { model, pooling })
    }

    pub fn dim(&self) -> usize {
        self.model.config.hidden_size
    }

    pub fn max_positions(&self) -> u32 {
        self.model.config.max_position_embeddings as u32
    }

    /// Pooled vectors `[inputs.len(), dim]` of `inputs` run padded to exactly `len` tokens and
    /// `rows` rows (rows beyond the inputs are all padding). This is the hook for heads: a
    /// classifier or regressor (SSJF's length predictor, OTAS's task heads) applies to this.
    pub fn pooled(&self, inputs: &[Vec<u32>], len: usize, rows: usize) -> Result<Tensor, EngineError> {
        let (ids, mask) = self.padded(inputs, len, rows)?;
        let hidden = self.model.forward(&ids, &mask)?;
        Ok(self.pooling.apply(&hidden, &mask)?.narrow(0, 0, inputs.len())?)
    }

    /// [`Encoder::pooled`] with deep prompts `[1 or rows, layers, p, hidden]` inserted as
    /// `mode` says ([`BertModel::forward_prompted`]); differentiable in the prompts when the
    /// encoder runs candle's own kernels.
    pub fn pooled_prompted(
        &self,
        inputs: &[Vec<u32>],
        len: usize,
        prompts: &Tensor,
        mode: PromptMode,
    ) -> Result<Tensor, EngineError> {
        let (ids, mask) = self.padded(inputs, len, inputs.len())?;
        let (hidden, pooled) = self.model.forward_prompted(&ids, &mask, prompts, mode)?;
        Ok(self.pooling.apply(&hidden, &pooled)?)
    }

    pub fn model(&self) -> &BertModel {
        &self.model
    }

    /// `inputs` as `[rows, len]` ids (padded) and their 1/0 mask.
    fn padded(&self, inputs: &[Vec<u32>], len: usize, rows: usize) -> Result<(Tensor, Tensor), EngineError> {
        let pad = self.model.config.pad_token_id;
        let mut ids = vec![pad; rows * len];
        let mut mask = vec![0u32; rows * len];
        for (r, seq) in inputs.iter().enumerate() {
            ids[r * len..r * len + seq.len()].copy_from_slice(seq);
            mask[r * len..r * len + seq.len()].fill(1);
        }
        let device = self.model.device();
        Ok((Tensor::from_vec(ids, (rows, len), device)?, Tensor::from_vec(mask, (rows, len), device)?))
    }

    /// [`Encoder::pooled`] as one `Vec<f32>` per input.
    pub fn embed_padded(
        &self,
        inputs: &[Vec<u32>],
        len: usize,
        rows: usize,
    ) -> Result<Vec<Vec<f32>>, EngineError> {
        Ok(self.pooled(inputs, len, rows)?.to_vec2::<f32>()?)
    }
}

/// One instance of a runtime on the candle encoder.
#[derive(Debug, Clone)]
pub struct CandleRuntime {
    encoder: Arc<Encoder>,
    spec: RuntimeSpec,
}

impl CandleRuntime {
    pub fn new(encoder: Arc<Encoder>, spec: RuntimeSpec) -> Result<Self, EngineError> {
        if spec.longest_taken() > encoder.max_positions() {
            return Err(EngineError::Shape {
                runtime: spec,
                detail: format!("the model has {} positions", encoder.max_positions()),
            });
        }
        Ok(Self { encoder, spec })
    }
}

impl Engine for CandleRuntime {
    fn runtime(&self) -> RuntimeSpec {
        self.spec
    }

    fn dim(&self) -> usize {
        self.encoder.dim()
    }

    fn run(&mut self, input: BatchInput<'_>, plan: TokenPlan) -> Result<Vec<Vec<f32>>, EngineError> {
        let inputs = plain_tokens(input, plan)?;
        let longest = check_batch(self.spec, inputs)?;
        let shape = self.spec.padded_shape(longest, inputs.len() as u32);
        self.encoder.embed_padded(inputs, shape.len as usize, shape.batch as usize)
    }
}
