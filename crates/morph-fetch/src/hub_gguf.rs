//! A decoder from the Hugging Face hub, named as llama-server's `-hf` names one:
//! `ORG/NAME[:QUANT]` at a revision. The repository's file list picks the GGUF: the one whose
//! name holds `QUANT` (`Q4_K_M`, `q8_0`, any case), or without one `Q4_K_M` (llama-server's
//! default), or the repository's only GGUF. Multimodal projectors (`mmproj*`) are never picked;
//! a GGUF split over several files is refused. Downloaded through `hf-hub` into
//! `MORPH_HOME/hub`, with the token and endpoint as [`super::hub`] reads them.

use std::path::{Path, PathBuf};

use crate::files::FetchError;
use crate::hub::{HubModel, api};

/// The quantisation llama-server picks when none is named.
const DEFAULT_QUANT: &str = "Q4_K_M";

/// A GGUF named on the hub.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubGguf {
    pub model: HubModel,
    /// The quantisation asked for (`:QUANT`).
    pub quant: Option<String>,
}

impl HubGguf {
    /// `ORG/NAME[:QUANT]`; `None` for anything else (a path, a bare name).
    pub fn parse(arg: &str, revision: Option<&str>) -> Option<Self> {
        let (id, quant) = match arg.split_once(':') {
            Some((id, quant)) => (id, Some(quant.to_string())),
            None => (arg, None),
        };
        let (org, name) = id.split_once('/')?;
        let valid =
            |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
        if !valid(org)
            || !valid(name)
            || name.ends_with(".gguf")
            || quant.as_deref().is_some_and(|q| !valid(q))
        {
            return None;
        }
        let mut model = HubModel::new(id);
        if let Some(revision) = revision {
            model.revision = revision.into();
        }
        Some(Self { model, quant })
    }

    /// Of the repository's `files`, the GGUF to serve, or why none.
    pub fn choose<'a>(&self, files: &'a [String]) -> Result<&'a str, String> {
        let ggufs: Vec<&str> = files
            .iter()
            .map(String::as_str)
            .filter(|f| f.ends_with(".gguf") && !file_name(f).starts_with("mmproj"))
            .collect();
        let holding = |quant: &str| -> Vec<&'a str> {
            let quant = quant.to_ascii_uppercase();
            ggufs.iter().copied().filter(|f| file_name(f).to_ascii_uppercase().contains(&quant)).collect()
        };
        let listed =
            || format!("its GGUF files: {}", if ggufs.is_empty() { "none".into() } else { ggufs.join(", ") });
        if ggufs.is_empty() {
            return Err(format!("the repository holds no GGUF file ({})", listed()));
        }
        let (matching, asked) = match (&self.quant, ggufs.as_slice()) {
            (Some(quant), _) => (holding(quant), quant.as_str()),
            (None, [only]) => (vec![*only], ""),
            (None, _) => (holding(DEFAULT_QUANT), DEFAULT_QUANT),
        };
        match matching.as_slice() {
            [] if self.quant.is_some() => Err(format!("no GGUF file for :{asked} ({})", listed())),
            [] => Err(format!("name the quantisation as ORG/NAME:QUANT ({})", listed())),
            parts if parts.iter().any(|f| file_name(f).contains("-of-0")) => Err(format!(
                "{} is split over several files, which Morph does not load; merge them with llama-gguf-split",
                parts[0]
            )),
            [one] => Ok(one),
            several => Err(format!("several GGUF files match :{asked}: {}", several.join(", "))),
        }
    }
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Downloads (or finds cached) the GGUF `gguf` names; returns its path.
pub fn fetch_hub_gguf(gguf: &HubGguf, home: &Path) -> Result<PathBuf, FetchError> {
    let model = &gguf.model;
    let hub_err = |detail: String| FetchError::Hub { id: model.name(), detail };
    let repo = api(model, home)?;
    let info = repo.info().map_err(|e| hub_err(e.to_string()))?;
    let files: Vec<String> = info.siblings.into_iter().map(|s| s.rfilename).collect();
    let file = gguf.choose(&files).map_err(hub_err)?;
    repo.get(file).map_err(|e| hub_err(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn parses_llama_servers_form_and_nothing_else() {
        let g = HubGguf::parse("bartowski/Qwen2.5-0.5B-Instruct-GGUF:Q8_0", Some("v2")).expect("a hub GGUF");
        assert_eq!(
            (g.model.id.as_str(), g.model.revision.as_str()),
            ("bartowski/Qwen2.5-0.5B-Instruct-GGUF", "v2")
        );
        assert_eq!(g.quant.as_deref(), Some("Q8_0"));
        assert_eq!(HubGguf::parse("org/name", None).expect("no quant").quant, None);
        for not in ["weights.bin", "model.gguf", "/abs/path.gguf", "org/name.gguf", "a/b/c", "org/:Q4"] {
            assert_eq!(HubGguf::parse(not, None), None, "{not}");
        }
    }

    #[test]
    fn picks_the_named_quant_else_q4_k_m_else_the_only_one() {
        let repo = files(&["README.md", "m-Q4_K_M.gguf", "m-Q8_0.gguf", "mmproj-m-f16.gguf"]);
        let named = |q: Option<&str>| HubGguf { model: HubModel::new("o/m"), quant: q.map(String::from) };
        assert_eq!(named(Some("q8_0")).choose(&repo), Ok("m-Q8_0.gguf"));
        assert_eq!(named(None).choose(&repo), Ok("m-Q4_K_M.gguf"));
        assert_eq!(named(None).choose(&files(&["only.f16.gguf", "mmproj.gguf"])), Ok("only.f16.gguf"));
        let err = named(Some("Q2_K")).choose(&repo).unwrap_err();
        assert!(err.contains("no GGUF file for :Q2_K") && err.contains("m-Q8_0.gguf"), "{err}");
        let err = named(None).choose(&files(&["a-Q8_0.gguf", "a-Q6_K.gguf"])).unwrap_err();
        assert!(err.contains("ORG/NAME:QUANT"), "{err}");
        let split = files(&["big-Q4_K_M-00001-of-00002.gguf", "big-Q4_K_M-00002-of-00002.gguf"]);
        assert!(named(None).choose(&split).unwrap_err().contains("split over several files"));
        let twice = files(&["a-Q4_K_M.gguf", "b-Q4_K_M.gguf", "c-Q8_0.gguf"]);
        assert!(named(None).choose(&twice).unwrap_err().contains("several GGUF files match :Q4_K_M"));
        assert!(named(None).choose(&files(&["README.md"])).unwrap_err().contains("no GGUF file"));
    }
}
