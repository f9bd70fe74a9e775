//! Which weights a llama.cpp decoder prefills prompts on. llama.cpp's x86 kernels multiply a
//! prompt's rows by Q8_0 and Q4_0 matrices as matrix products (its GEMM kernels), but by Q4_1
//! ones a dot product at a time: the default model, SmolLM2 as shipped (Q4_1), prefills
//! 1.3–2.0× faster requantized to Q8_0 at +0.18% perplexity, and decodes 0.80–0.97× as fast
//! (`experiments/gguf_formats.py`, docs/serving.md). [`PrefillWeights::Q8_0`] keeps both: the
//! prompt's pieces of two tokens or more run on an 8-bit copy of the file's Q4_1 matrices, every
//! decode step on the file's own weights (the KV rows move between the two; [`super::llamacpp`]).
//! The copy is made the first time a file loads and kept for the next start ([`eight_bit_copy`]).

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use candle_core::Device;
use candle_core::quantized::gguf_file::{Content, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use morph_engine::EngineError;
use sha2::{Digest, Sha256};

/// The weights a decoder's prompt pieces of two tokens or more run on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PrefillWeights {
    /// An 8-bit (Q8_0) copy of the file's Q4_1 matrices, made the first time the file loads
    /// and kept in [`kept_copies`]; a file with no Q4_1 matrix prefills on its own weights.
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

/// Where [`eight_bit_copy`] keeps the copies the server makes: `MORPH_HOME/prefill-copies`.
pub fn kept_copies() -> PathBuf {
    morph_fetch::morph_home().join("prefill-copies")
}

/// The 8-bit copy of `gguf` kept in `copies`, made there if it is not yet: `gguf` with each of
/// its Q4_1 matrices requantized to Q8_0 (every other tensor and all of its metadata as they
/// are); `None` when it has no Q4_1 matrix. A copy is named by its source's path, length and
/// modification time, so a changed file gets a new one, and the copy of the file's earlier
/// state is removed then (one copy per source path), as are partial copies left by servers
/// killed while writing one.
pub fn eight_bit_copy(gguf: &Path, copies: &Path) -> Result<Option<PathBuf>, EngineError> {
    let fail = |e: &dyn std::fmt::Display| {
        EngineError::Load(format!("an 8-bit prefill copy of {} in {}: {e}", gguf.display(), copies.display()))
    };
    let mut file = File::open(gguf).map_err(|e| fail(&e))?;
    let content = Content::read(&mut file).map_err(|e| fail(&e))?;
    if !content.tensor_infos.values().any(|info| info.ggml_dtype == SLOW_PREFILL) {
        return Ok(None);
    }
    // Named by the state of the file as opened, which is the state the copy is made of.
    let name = CopyName::of(gguf, &file).map_err(|e| fail(&e))?;
    let kept = copies.join(name.file());
    if kept.is_file() {
        return Ok(Some(kept));
    }
    std::fs::create_dir_all(copies).map_err(|e| fail(&e))?;
    remove_abandoned(copies);
    // Written under a name no other writer takes (removed if it fails), then renamed: a server
    // starting beside this one never maps half a copy. Made before the requantization, so a
    // folder that cannot be written to costs nothing.
    let mut partial = tempfile::Builder::new()
        .prefix(&format!("{}{PARTIAL_MARK}", name.file()))
        .tempfile_in(copies)
        .map_err(|e| fail(&e))?;
    // Locked while it is written, so that it is not taken for abandoned. Where the file system
    // has no locks, no partial copy can be locked by the sweep either, and none is removed.
    let _ = partial.as_file().lock();
    write_copy(&content, &mut file, partial.as_file_mut()).map_err(|e| fail(&e))?;
    partial.persist(&kept).map_err(|e| fail(&e))?;
    name.remove_earlier(copies);
    Ok(Some(kept))
}

/// What follows a copy's name in the name of the partial copy it is written as.
const PARTIAL_MARK: &str = ".partial-";

/// Removes the partial copies in `copies` whose writers are gone. A writer holds its partial
/// copy locked until it is renamed into place or removed, and the lock goes with a process
/// that dies (a server killed while writing one), so a partial copy this can lock is abandoned.
fn remove_abandoned(copies: &Path) {
    let Ok(entries) = std::fs::read_dir(copies) else { return };
    for entry in entries.flatten() {
        if !entry.file_name().to_string_lossy().contains(PARTIAL_MARK) {
            continue;
        }
        let Ok(partial) = File::open(entry.path()) else { continue };
        if partial.try_lock().is_ok() {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// `content` (read from `file`) with its Q4_1 matrices requantized, written to `to`.
fn write_copy(content: &Content, file: &mut File, to: &mut File) -> Result<(), String> {
    let fail = |e: &dyn std::fmt::Display| e.to_string();
    // In the file's own order.
    let mut names: Vec<&String> = content.tensor_infos.keys().collect();
    names.sort_by_key(|name| content.tensor_infos[*name].offset);
    let mut tensors = Vec::with_capacity(names.len());
    for name in names {
        let tensor = content.tensor(file, name, &Device::Cpu).map_err(|e| fail(&e))?;
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
    let mut metadata: Vec<(&str, &Value)> = content
        .metadata
        .iter()
        .filter(|(key, _)| key.as_str() != "general.alignment")
        .map(|(key, value)| match key.as_str() {
            "general.file_type" => (key.as_str(), &file_type),
            _ => (key.as_str(), value),
        })
        .collect();
    // In one order (candle reads the keys into a hash map), so one file's copy is the same bytes
    // whoever makes it.
    metadata.sort_unstable_by_key(|(key, _)| *key);
    let mut out = BufWriter::new(to);
    let tensors: Vec<(&str, &QTensor)> = tensors.iter().map(|(name, t)| (*name, t)).collect();
    candle_core::quantized::gguf_file::write(&mut out, &metadata, &tensors).map_err(|e| fail(&e))?;
    out.into_inner().map_err(|e| fail(&e.error()))?.sync_all().map_err(|e| fail(&e))
}

/// A copy's file name: `<stem>.<source path key>.<length>-<modified ns>` and [`COPY_SUFFIX`].
struct CopyName {
    /// `<stem>.<source path key>.`: what every copy of this source's path starts with.
    source: String,
    /// `<length>-<modified ns>`: which state of the source.
    state: String,
}

/// What a copy's name ends with; a new requantization gets a new one, so that copies made by
/// an earlier one are not taken for its own.
const COPY_SUFFIX: &str = ".prefill-q8_0-v1.gguf";
/// Hex digits of the source path's SHA-256 in a copy's name.
const PATH_KEY_DIGITS: usize = 16;

impl CopyName {
    /// The name of a copy of `gguf` (its symbolic links resolved) in the state `opened` has.
    fn of(gguf: &Path, opened: &File) -> std::io::Result<Self> {
        let path = gguf.canonicalize()?;
        let meta = opened.metadata()?;
        let modified = meta.modified()?.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        let stem = path.file_stem().map_or_else(|| "decoder".into(), |s| s.to_string_lossy().into_owned());
        let key = format!("{:x}", Sha256::digest(path.as_os_str().as_encoded_bytes()));
        Ok(Self {
            source: format!("{stem}.{}.", &key[..PATH_KEY_DIGITS]),
            state: format!("{}-{}", meta.len(), modified.as_nanos()),
        })
    }

    fn file(&self) -> String {
        format!("{}{}{COPY_SUFFIX}", self.source, self.state)
    }

    /// Removes the copies in `copies` of this source's other states (a copy mapped by a
    /// running server stays readable to it until it closes it).
    fn remove_earlier(&self, copies: &Path) {
        let this = self.file();
        let Ok(entries) = std::fs::read_dir(copies) else { return };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name != this && name.starts_with(&self.source) && name.ends_with(COPY_SUFFIX) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Tensor;
    use std::os::unix::fs::MetadataExt;
    use std::time::{Duration, SystemTime};

    /// A GGUF of one Q4_1 matrix and one f32 vector at `path`.
    fn tiny_gguf(path: &Path) {
        let values = Tensor::arange(0f32, 64.0 * 32.0, &Device::Cpu).unwrap().reshape((64, 32)).unwrap();
        let matrix = QTensor::quantize(&values, GgmlDType::Q4_1).unwrap();
        let norm = QTensor::quantize(
            &Tensor::ones(32, candle_core::DType::F32, &Device::Cpu).unwrap(),
            GgmlDType::F32,
        )
        .unwrap();
        let (arch, name) = (Value::String("llama".into()), Value::String("tiny".into()));
        // Several keys, whose order a hash map would not keep.
        let (context, width, layers) = (Value::U32(64), Value::U32(32), Value::U32(1));
        let mut out = File::create(path).unwrap();
        candle_core::quantized::gguf_file::write(
            &mut out,
            &[
                ("general.architecture", &arch),
                ("general.name", &name),
                ("llama.context_length", &context),
                ("llama.embedding_length", &width),
                ("llama.block_count", &layers),
            ],
            &[("blk.0.attn_q.weight", &matrix), ("output_norm.weight", &norm)],
        )
        .unwrap();
    }

    fn dtypes(gguf: &Path) -> Vec<(String, GgmlDType)> {
        let content = Content::read(&mut File::open(gguf).unwrap()).unwrap();
        let mut dtypes: Vec<_> =
            content.tensor_infos.iter().map(|(n, i)| (n.clone(), i.ggml_dtype)).collect();
        dtypes.sort_by(|a, b| a.0.cmp(&b.0));
        dtypes
    }

    fn files_in(dir: &Path) -> Vec<String> {
        let mut names: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn the_copy_requantizes_q4_1_only_and_is_made_once() {
        let dir = tempfile::tempdir().unwrap();
        let (source, copies) = (dir.path().join("tiny.gguf"), dir.path().join("copies"));
        tiny_gguf(&source);
        let copy = eight_bit_copy(&source, &copies).unwrap().expect("a Q4_1 matrix");
        assert_eq!(
            dtypes(&copy),
            [
                ("blk.0.attn_q.weight".to_string(), GgmlDType::Q8_0),
                ("output_norm.weight".to_string(), GgmlDType::F32)
            ]
        );
        let made = std::fs::metadata(&copy).unwrap().ino();
        let again = eight_bit_copy(&source, &copies).unwrap().expect("kept");
        assert_eq!(again, copy, "the same file's copy is found again");
        assert_eq!(std::fs::metadata(&again).unwrap().ino(), made, "and not written again");
        assert_eq!(files_in(&copies).len(), 1, "nothing partial is left: {:?}", files_in(&copies));
        let elsewhere = eight_bit_copy(&source, &dir.path().join("elsewhere")).unwrap().unwrap();
        assert!(
            std::fs::read(&elsewhere).unwrap() == std::fs::read(&copy).unwrap(),
            "a copy made again is the same bytes"
        );
    }

    #[test]
    fn a_changed_file_gets_a_new_copy_and_its_earlier_one_goes() {
        let dir = tempfile::tempdir().unwrap();
        let copies = dir.path().join("copies");
        let (source, other) = (dir.path().join("tiny.gguf"), dir.path().join("other").join("tiny.gguf"));
        std::fs::create_dir(other.parent().unwrap()).unwrap();
        tiny_gguf(&source);
        tiny_gguf(&other);
        let first = eight_bit_copy(&source, &copies).unwrap().unwrap();
        let others = eight_bit_copy(&other, &copies).unwrap().unwrap();
        assert_ne!(first, others, "a file of the same name elsewhere has a copy of its own");

        let later = SystemTime::now() + Duration::from_secs(60);
        File::options().write(true).open(&source).unwrap().set_modified(later).unwrap();
        let second = eight_bit_copy(&source, &copies).unwrap().unwrap();
        assert_ne!(second, first, "a changed file is copied again");
        assert!(!first.exists(), "the copy of its earlier state is removed");
        assert!(second.exists() && others.exists(), "the other file's copy stays");
    }

    #[test]
    fn a_partial_copy_is_removed_once_its_writer_is_gone() {
        let dir = tempfile::tempdir().unwrap();
        let (source, copies) = (dir.path().join("tiny.gguf"), dir.path().join("copies"));
        tiny_gguf(&source);
        std::fs::create_dir(&copies).unwrap();
        let (abandoned, written) =
            (copies.join(format!("old{PARTIAL_MARK}a1")), copies.join(format!("new{PARTIAL_MARK}b2")));
        std::fs::write(&abandoned, b"half a copy").unwrap();
        let writer = File::create(&written).unwrap();
        writer.lock().unwrap();

        let copy = eight_bit_copy(&source, &copies).unwrap().unwrap();
        assert!(!abandoned.exists(), "a partial copy nobody holds is removed");
        assert!(written.exists(), "one still being written stays");
        drop(writer);
        std::fs::remove_file(&copy).unwrap();
        eight_bit_copy(&source, &copies).unwrap().unwrap();
        assert!(!written.exists(), "and goes at the next copy once its writer is gone");
    }

    #[test]
    fn a_file_without_q4_1_matrices_has_no_copy() {
        let dir = tempfile::tempdir().unwrap();
        let copies = dir.path().join("copies");
        let copy = eight_bit_copy(&dir.path().join("tiny.gguf"), &copies);
        assert!(copy.is_err(), "a missing file is an error");
        let source = dir.path().join("copy.gguf");
        tiny_gguf(&source);
        let eight_bit = eight_bit_copy(&source, &copies).unwrap().unwrap();
        assert_eq!(eight_bit_copy(&eight_bit, &copies).unwrap(), None, "a Q8_0 file prefills on itself");
    }
}
