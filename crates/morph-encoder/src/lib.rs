//! BERT-family encoders as Morph serves them. [`OrtRuntime`] runs the ONNX graph Morph writes
//! itself ([`onnx`]) for each instance's runtime shape, pipeline stage and token plans on ONNX
//! Runtime (the default); [`CandleRuntime`] computes with candle on the CPU ([`bert`]).
//! Around them: the checkpoint they load, pooling, tokenizing, and what is served on top of an
//! encoder: a classification checkpoint's own head ([`classifier`]), OTAS's task heads and prompts ([`tasks`]) and SSJF's length predictor
//! ([`predictor`]).

pub mod architecture;
pub mod bert;
pub mod calibration;
pub mod candle_runtime;
pub mod checkpoint;
pub mod classifier;
pub mod kernels;
pub mod onnx;
pub mod ort_kernels;
pub mod ort_runtime;
pub mod ort_session;
pub mod pooling;
pub mod predictor;
pub mod sentence_config;
pub mod tasks;
pub mod tokenize;

pub use candle_runtime::{CandleRuntime, Encoder};
pub use classifier::{Scoring, SequenceClassifier};
pub use ort_runtime::{OrtEncoder, OrtRuntime};
pub use pooling::{Pool, Pooling, given_or_model_pooling, model_pooling};
pub use tokenize::{TextTokenizer, TokenSpan};
