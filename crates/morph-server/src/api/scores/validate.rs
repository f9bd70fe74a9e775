//! The classification and reranking routes' bodies checked: `/v1/classify` and `/predict` on Morph's
//! task heads, `/predict` on a checkpoint's own head, TEI's `/rerank`, Cohere's and Jina's
//! `/v1/rerank`.

use morph_encoder::Scoring;

use super::pair_fields::{Document, PredictInputs};
use super::requests::{
    ClassifyRequest, DocumentRerankRequest, PredictParameters, PredictRequest, RerankRequest,
};
use crate::api::AppState;
use crate::api::bounds::{Bounded, Switch};
use crate::api::checks::{right_side, served_model, texts};
use crate::api::field_types::{RawScores, ReturnDocuments, ReturnText, SloMs, TopN, Truncate, Utility};
use crate::api::fields::{Flag, Number, Text, Texts};
use crate::api::opening::Check;
use crate::error::CallError;
use crate::infer::{ModelKind, Sequence, ValidClassify, ValidScore};

impl Check for ClassifyRequest {
    type Valid = ValidClassify;

    fn check(self, state: &AppState) -> Result<ValidClassify, CallError> {
        classify(self, state.max_client_batch)
    }
}

/// A `/predict` call, by what the served encoder is.
pub(crate) enum PredictCall {
    /// Morph's task heads on an embedding model; `single`: one input in TEI's shape.
    ByTask { call: ValidClassify, single: bool },
    /// A sequence-classification checkpoint's own head.
    ByHead(ValidPredict),
}

impl Check for PredictRequest {
    type Valid = PredictCall;

    fn check(self, state: &AppState) -> Result<PredictCall, CallError> {
        Ok(match state.embedder()?.kind() {
            ModelKind::Embedding => {
                let single = matches!(self.inputs, Some(PredictInputs::One(_)));
                PredictCall::ByTask { call: predict_by_task(self, state.max_client_batch)?, single }
            }
            ModelKind::Classifier | ModelKind::Reranker => {
                PredictCall::ByHead(predict(self, state.max_client_batch)?)
            }
        })
    }
}

impl Check for RerankRequest {
    type Valid = ValidRerank;

    fn check(self, state: &AppState) -> Result<ValidRerank, CallError> {
        rerank(self, state.max_client_batch)
    }
}

impl Check for DocumentRerankRequest {
    type Valid = ValidRerank;

    fn check(self, state: &AppState) -> Result<ValidRerank, CallError> {
        document_rerank(self, state.max_client_batch, &state.model.names)
    }
}

fn classify(r: ClassifyRequest, max_items: usize) -> Result<ValidClassify, CallError> {
    service("input", (r.task, r.input, r.slo_ms, r.utility, r.truncate), max_items)
}

/// `/predict` for one of Morph's task heads: a string or an array of strings (a batch).
fn predict_by_task(r: PredictRequest, max_items: usize) -> Result<ValidClassify, CallError> {
    let inputs = match r.inputs {
        None => None,
        Some(PredictInputs::One(text)) => Some(Texts::One(text)),
        Some(PredictInputs::Strings(texts)) => Some(Texts::Many(texts)),
        Some(PredictInputs::Nested(_)) => {
            let message = "pairs are for a sequence-classification model; a task head takes strings";
            return Err(CallError::validation("inputs", message));
        }
    };
    let parameters = r.parameters.map(|p| (p.top_k.is_some(), p.function_to_apply.is_some()));
    let refused = [
        ("raw_scores", r.raw_scores.is_some()),
        ("parameters.top_k", parameters.is_some_and(|(top_k, _)| top_k)),
        ("parameters.function_to_apply", parameters.is_some_and(|(_, function)| function)),
    ];
    if let Some((field, _)) = refused.into_iter().find(|(_, sent)| *sent) {
        let message =
            "is for a sequence-classification model; a task head answers every class's softmax score";
        return Err(CallError::validation(field, message));
    }
    right_side(r.truncation_direction)?;
    service("inputs", (r.task, inputs, r.slo_ms, r.utility, r.truncate), max_items)
}

/// A classification call's fields (task, inputs from `field`, SLO, utility, truncate).
type ServiceFields = (Option<Text>, Option<Texts>, Option<Number>, Option<Number>, Option<Flag>);

fn service(
    field: &'static str,
    (task, input, slo_ms, utility, truncate): ServiceFields,
    max_items: usize,
) -> Result<ValidClassify, CallError> {
    let Some(Text(task)) = task else { return Err(CallError::validation("task", "is required")) };
    Ok(ValidClassify {
        task,
        texts: texts(field, input, max_items)?,
        field,
        slo_ms: SloMs::RANGE.given("slo_ms", slo_ms)?,
        utility: Utility::RANGE.read("utility", utility)?,
        truncate: Truncate::read(truncate),
    })
}

/// `/predict` on a checkpoint's head: the call, and how its answers are given.
#[derive(Debug)]
pub(crate) struct ValidPredict {
    pub score: ValidScore,
    /// A single input was sent in TEI's shape: its answer is one list of labels, not a list of
    /// them (the Hugging Face inference API's shape, a call with `parameters`, always lists).
    pub single: bool,
    /// The best this many labels of each input (all when `None`).
    pub top_k: Option<usize>,
}

fn predict(r: PredictRequest, max_items: usize) -> Result<ValidPredict, CallError> {
    let refused = [
        (
            "task",
            r.task.is_some(),
            "names one of Morph's task heads; this model classifies with its own labels",
        ),
        ("slo_ms", r.slo_ms.is_some(), "is for a task head's service class (OTAS); not for this model"),
        ("utility", r.utility.is_some(), "is for a task head's service class (OTAS); not for this model"),
    ];
    if let Some((field, _, message)) = refused.into_iter().find(|(_, sent, _)| *sent) {
        return Err(CallError::validation(field, message));
    }
    right_side(r.truncation_direction)?;
    let (sequences, single) = match r.inputs {
        None => return Err(CallError::validation("inputs", "is required")),
        Some(PredictInputs::One(text)) => (vec![sequence("inputs", vec![text])?], true),
        Some(PredictInputs::Strings(texts)) => (vec![sequence("inputs", texts)?], true),
        Some(PredictInputs::Nested(batch)) => {
            if batch.len() > max_items {
                let message = format!("has {} items; at most {max_items} per call", batch.len());
                return Err(CallError::validation("inputs", message));
            }
            let each = batch.into_iter().enumerate().map(|(i, s)| sequence(&format!("inputs[{i}]"), s));
            (each.collect::<Result<Vec<_>, _>>()?, false)
        }
    };
    let single = single && r.parameters.is_none();
    let (top_k, function) = match r.parameters {
        None => (None, None),
        Some(PredictParameters { top_k, function_to_apply }) => {
            (TopN::RANGE.given("parameters.top_k", top_k)?.map(|k| k as usize), function_to_apply)
        }
    };
    let scoring = match (RawScores::read(r.raw_scores), function.as_ref().map(|Text(f)| f.as_str())) {
        (true, Some(_)) => {
            let message = "give raw_scores or parameters.function_to_apply, not both";
            return Err(CallError::validation("raw_scores", message));
        }
        (true, None) | (false, Some("none")) => Scoring::Logits,
        (false, None) => Scoring::Head,
        (false, Some("softmax")) => Scoring::Softmax,
        (false, Some("sigmoid")) => Scoring::Sigmoid,
        (false, Some(_)) => {
            let message = "must be \"softmax\", \"sigmoid\" or \"none\"";
            return Err(CallError::validation("parameters.function_to_apply", message));
        }
    };
    let score = ValidScore { sequences, field: "inputs", truncate: Truncate::read(r.truncate), scoring };
    Ok(ValidPredict { score, single, top_k })
}

/// A head's scoring: its own, or the logits when the call asks for raw scores.
fn raw_or_head(raw: bool) -> Scoring {
    if raw { Scoring::Logits } else { Scoring::Head }
}

/// A text `[a]` or a pair `[a, b]`, neither empty.
fn sequence(field: &str, mut texts: Vec<String>) -> Result<Sequence, CallError> {
    if let Some(i) = texts.iter().position(String::is_empty) {
        return Err(CallError::validation(format!("{field}[{i}]"), "must not be empty"));
    }
    match texts.len() {
        1 => Ok(Sequence { text: texts.remove(0), pair: None }),
        2 => {
            let pair = texts.pop();
            Ok(Sequence { text: texts.remove(0), pair })
        }
        n => Err(CallError::validation(
            field,
            format!(
                "has {n} strings: a text is [text] and a pair [text, text]; send a batch as an array of them"
            ),
        )),
    }
}

/// Each text paired after the query, as a cross-encoder reads (query, document).
fn pairs(query: Option<Text>, documents: Vec<String>) -> Result<Vec<Sequence>, CallError> {
    let query = match query {
        None => return Err(CallError::validation("query", "is required")),
        Some(Text(q)) if q.is_empty() => return Err(CallError::validation("query", "must not be empty")),
        Some(Text(q)) => q,
    };
    Ok(documents.into_iter().map(|d| Sequence { text: query.clone(), pair: Some(d) }).collect())
}

/// A rerank call: the pairs to score, and the documents' texts.
#[derive(Debug)]
pub(crate) struct ValidRerank {
    pub score: ValidScore,
    pub texts: Vec<String>,
    /// TEI's `return_text`, or Cohere's `return_documents`.
    pub return_texts: bool,
    /// The best this many results (all when `None`).
    pub top_n: Option<usize>,
}

/// TEI's `/rerank`.
fn rerank(r: RerankRequest, max_items: usize) -> Result<ValidRerank, CallError> {
    right_side(r.truncation_direction)?;
    let texts = texts("texts", r.texts, max_items)?;
    let score = ValidScore {
        sequences: pairs(r.query, texts.clone())?,
        field: "texts",
        truncate: Truncate::read(r.truncate),
        scoring: raw_or_head(RawScores::read(r.raw_scores)),
    };
    Ok(ValidRerank { score, texts, return_texts: ReturnText::read(r.return_text), top_n: None })
}

/// Cohere's and Jina's `/v1/rerank` on a server that answers to `served`.
fn document_rerank(
    r: DocumentRerankRequest,
    max_items: usize,
    served: &[String],
) -> Result<ValidRerank, CallError> {
    served_model(r.model, served)?;
    let documents: Vec<String> = match r.documents {
        None => return Err(CallError::validation("documents", "is required")),
        Some(d) => d.into_iter().map(|Document(text)| text).collect(),
    };
    let texts = texts("documents", Some(Texts::Many(documents)), max_items)?;
    let score = ValidScore {
        sequences: pairs(r.query, texts.clone())?,
        field: "documents",
        truncate: Truncate::read(r.truncate),
        scoring: Scoring::Head,
    };
    let top_n = TopN::RANGE.given("top_n", r.top_n)?.map(|n| n as usize);
    Ok(ValidRerank { score, texts, return_texts: ReturnDocuments::read(r.return_documents), top_n })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::parse;

    fn predict_call(body: &str) -> Result<ValidPredict, String> {
        predict(parse(body.as_bytes()).map_err(|e| e.to_string())?, 8).map_err(|e| e.to_string())
    }

    #[test]
    fn predict_reads_texts_pairs_and_batches_and_refuses_the_task_heads_fields() {
        let pair = predict_call(r#"{"inputs": ["q", "d"]}"#).unwrap();
        let want = Sequence { text: "q".into(), pair: Some("d".into()) };
        assert_eq!(
            (pair.score.sequences, pair.single, pair.score.scoring),
            (vec![want], true, Scoring::Head)
        );
        let batch = predict_call(r#"{"inputs": [["a"], ["q", "d"]], "raw_scores": true}"#).unwrap();
        assert_eq!(
            (batch.score.sequences.len(), batch.single, batch.score.scoring),
            (2, false, Scoring::Logits)
        );
        let listed =
            predict_call(r#"{"inputs": "a", "parameters": {"top_k": 1, "function_to_apply": "sigmoid"}}"#);
        let listed = listed.unwrap();
        assert_eq!((listed.single, listed.top_k, listed.score.scoring), (false, Some(1), Scoring::Sigmoid));
        for (body, error) in [
            (r#"{"inputs": "a", "task": "sst2"}"#, "task: names one of Morph's task heads"),
            (r#"{"inputs": ["a", "b", "c"]}"#, "inputs: has 3 strings"),
            (r#"{"inputs": [["a", ""]]}"#, "inputs[0][1]: must not be empty"),
            (
                r#"{"inputs": "a", "parameters": {"function_to_apply": "relu"}}"#,
                "parameters.function_to_apply",
            ),
            (r#"{"inputs": "a", "parameters": {"top_k": 0}}"#, "parameters.top_k"),
            (
                r#"{"inputs": "a", "parameters": {"temperature": 1}}"#,
                "parameters.temperature: is not supported",
            ),
            (r#"{"inputs": "a", "truncation_direction": "left"}"#, "truncation_direction: only \"right\""),
        ] {
            let got = predict_call(body).unwrap_err();
            assert!(got.starts_with(error), "{body}: {got}");
        }
    }

    #[test]
    fn reranks_pair_the_query_first_and_bound_top_n() {
        let call = document_rerank(
            parse(br#"{"query": "q", "documents": ["a", {"text": "b"}], "top_n": 1}"#).unwrap(),
            8,
            &["m".into()],
        )
        .unwrap();
        assert_eq!(call.score.sequences[1], Sequence { text: "q".into(), pair: Some("b".into()) });
        assert_eq!((call.top_n, call.return_texts), (Some(1), false));
        let unknown = parse(br#"{"query": "q", "documents": ["a"], "model": "x"}"#).unwrap();
        assert!(document_rerank(unknown, 8, &["m".into()]).is_err());
        let empty = rerank(parse(br#"{"query": "", "texts": ["a"]}"#).unwrap(), 8).unwrap_err();
        assert_eq!(empty.to_string(), "query: must not be empty");
        let many = rerank(parse(br#"{"query": "q", "texts": ["a","b","c"]}"#).unwrap(), 2).unwrap_err();
        assert!(many.to_string().starts_with("texts: has 3 items"), "{many}");
    }
}
