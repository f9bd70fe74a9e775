//! Which model of a several-model server a call reaches: the one its `model` field names (by
//! any of its served names), else the one model of the kind its route serves; several of that
//! kind, and the call must name one.

use crate::error::CallError;
use crate::infer::ModelKind;

/// What a hosted model serves: an encoder of one of TEI's kinds, or a decoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServedKind {
    Encoder(ModelKind),
    /// A decoder (`/v1/completions`, `/v1/chat/completions`, `/v1/responses`).
    Generation,
}

impl ServedKind {
    pub fn label(self) -> &'static str {
        match self {
            ServedKind::Encoder(kind) => kind.label(),
            ServedKind::Generation => "generation",
        }
    }
}

use ServedKind::{Encoder, Generation};
const EMBEDDING: ServedKind = Encoder(ModelKind::Embedding);
const CLASSIFIER: ServedKind = Encoder(ModelKind::Classifier);
const RERANKER: ServedKind = Encoder(ModelKind::Reranker);

/// Whether some model's kind serves `route` (a `POST` route of the models).
pub fn serves(route: &str) -> bool {
    tiers(route).is_some()
}

/// The kinds a route reaches when the call names no model, tier by tier: the first tier with
/// exactly one model answers; a tier with several asks the call to name one.
fn tiers(route: &str) -> Option<&'static [&'static [ServedKind]]> {
    Some(match route {
        "/v1/embeddings" | "/embeddings" | "/embed" | "/similarity" | "/tokenize" | "/decode"
        | "/embed_all" | "/embed_sparse" | "/v2/embed" | "/v1/embed" => {
            &[&[EMBEDDING], &[CLASSIFIER, RERANKER]]
        }
        "/v1/classify" => &[&[EMBEDDING], &[CLASSIFIER, RERANKER]],
        "/predict" => &[&[CLASSIFIER], &[RERANKER]],
        "/rerank" | "/v1/rerank" | "/v2/rerank" => &[&[RERANKER], &[CLASSIFIER]],
        "/" | "/invocations" | "/vertex" => &[&[EMBEDDING, CLASSIFIER, RERANKER]],
        "/v1/completions" | "/v1/chat/completions" | "/v1/responses" => &[&[Generation]],
        _ => return None,
    })
}

/// Whether a route's body takes a `model` field of its own (the OpenAI and Cohere shapes); on
/// TEI's routes a several-model server reads `model` to choose and takes it out of the body.
pub fn route_takes_model(route: &str) -> bool {
    matches!(
        route,
        "/v1/embeddings"
            | "/embeddings"
            | "/v1/rerank"
            | "/v2/rerank"
            | "/v2/embed"
            | "/v1/embed"
            | "/v1/completions"
            | "/v1/chat/completions"
            | "/v1/responses"
    )
}

/// One hosted model as a call's choice sees it.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    pub names: &'a [String],
    pub kind: ServedKind,
}

/// The index of the model answering to `name`, or the unknown-model refusal listing every name.
pub fn by_name(name: &str, models: &[Candidate<'_>]) -> Result<usize, CallError> {
    let found = models.iter().position(|m| m.names.iter().any(|n| n == name));
    found.ok_or_else(|| {
        let all: Vec<String> = models.iter().flat_map(|m| m.names.iter().cloned()).collect();
        CallError::unknown_model(name.to_string(), &all)
    })
}

/// The index of the model a call to `route` naming `named` reaches; `None` for a route no model
/// serves (the caller answers it as a path no route has).
pub fn pick(route: &str, named: Option<&str>, models: &[Candidate<'_>]) -> Option<Result<usize, CallError>> {
    if let Some(name) = named {
        return Some(by_name(name, models));
    }
    let tiers = tiers(route)?;
    for kinds in tiers {
        let of_kind: Vec<usize> = (0..models.len()).filter(|&i| kinds.contains(&models[i].kind)).collect();
        match of_kind.as_slice() {
            [] => continue,
            [one] => return Some(Ok(*one)),
            several => {
                let names: Vec<&str> = several.iter().map(|&i| models[i].names[0].as_str()).collect();
                return Some(Err(CallError::validation(
                    "model",
                    format!(
                        "several models here serve {route} ({}): name one in the body's `model` field",
                        names.join(", ")
                    ),
                )));
            }
        }
    }
    let served: Vec<String> =
        models.iter().map(|m| format!("'{}' ({})", m.names[0], m.kind.label())).collect();
    Some(Err(CallError::NotFound(format!(
        "no model of this server serves {route}; it serves {}",
        served.join(", ")
    ))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn every_model_route_of_the_api_reaches_a_kind_of_model() {
        let document = crate::api::document();
        let posts = document.paths.paths.iter().filter(|(_, item)| item.post.is_some());
        let paths: Vec<&String> = posts.map(|(path, _)| path).collect();
        assert!(paths.iter().any(|p| *p == "/v1/embeddings") && paths.iter().any(|p| *p == "/v1/responses"));
        for path in paths {
            assert!(tiers(path).is_some(), "a several-model server sends {path} to no model");
        }
    }

    #[test]
    fn a_named_model_is_reached_by_any_of_its_names_and_an_unknown_name_lists_them_all() {
        let (embed, chat) = (names(&["minilm", "text-embedding-3-small"]), names(&["smollm"]));
        let models =
            [Candidate { names: &embed, kind: EMBEDDING }, Candidate { names: &chat, kind: Generation }];
        assert_eq!(pick("/v1/embeddings", Some("text-embedding-3-small"), &models).unwrap(), Ok(0));
        assert_eq!(pick("/embed", Some("smollm"), &models).unwrap(), Ok(1));
        let unknown = pick("/v1/embeddings", Some("gpt-4"), &models).unwrap().unwrap_err();
        assert!(
            unknown.to_string().contains("'minilm' or 'text-embedding-3-small' or 'smollm'"),
            "{unknown}"
        );
    }

    #[test]
    fn an_unnamed_call_reaches_the_one_model_of_its_kind_and_is_refused_by_name_among_several() {
        let (a, b, r, g) = (names(&["a"]), names(&["b"]), names(&["r"]), names(&["g"]));
        let models = [
            Candidate { names: &a, kind: EMBEDDING },
            Candidate { names: &r, kind: RERANKER },
            Candidate { names: &g, kind: Generation },
        ];
        assert_eq!(pick("/embed", None, &models).unwrap(), Ok(0));
        assert_eq!(pick("/rerank", None, &models).unwrap(), Ok(1));
        assert_eq!(pick("/predict", None, &models).unwrap(), Ok(1));
        assert_eq!(pick("/v1/chat/completions", None, &models).unwrap(), Ok(2));
        assert!(pick("/nowhere", None, &models).is_none());
        let two = [
            Candidate { names: &a, kind: EMBEDDING },
            Candidate { names: &b, kind: EMBEDDING },
            Candidate { names: &r, kind: RERANKER },
        ];
        let several = pick("/embed", None, &two).unwrap().unwrap_err();
        assert!(
            several.to_string().starts_with("model: several models here serve /embed (a, b)"),
            "{several}"
        );
        // The root answers by kind; with three encoders it cannot choose.
        assert!(pick("/", None, &two).unwrap().is_err());
        let none = pick("/v1/completions", None, &two).unwrap().unwrap_err();
        assert!(matches!(none, CallError::NotFound(m) if m.contains("'r' (reranker)")));
    }
}
