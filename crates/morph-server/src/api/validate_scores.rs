//! The calls of a sequence-classification or reranking model checked: `/predict` on a
//! checkpoint's own head, TEI's `/rerank`, Cohere's and Jina's `/v1/rerank`; and TEI's
//! `/similarity` on an embedding model.

use morph_encoder::Scoring;

use super::bounds::{Bounded, Switch};
use super::fields::{Text, Texts};
use super::pair_fields::{Document, PredictInputs};
use super::requests::{
    DocumentRerankRequest, Normalize, PredictParameters, PredictRequest, RawScores, RerankRequest,
    ReturnDocuments, ReturnText, SimilarityInputs, SimilarityRequest, TopN, Truncate,
};
use super::validate::{right_side, served_model, texts};
use crate::error::CallError;
use crate::infer::{EmbedInputs, Sequence, ValidEmbed, ValidScore};

/// `/predict` on a checkpoint's head: the call, and how its answers are given.
#[derive(Debug)]
pub struct ValidPredict {
    pub score: ValidScore,
    /// A single input was sent in TEI's shape: its answer is one list of labels, not a list of
    /// them (the Hugging Face inference API's shape, a call with `parameters`, always lists).
    pub single: bool,
    /// The best this many labels of each input (all when `None`).
    pub top_k: Option<usize>,
}

pub fn predict(r: PredictRequest, max_items: usize) -> Result<ValidPredict, CallError> {
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
pub struct ValidRerank {
    pub score: ValidScore,
    pub texts: Vec<String>,
    /// TEI's `return_text`, or Cohere's `return_documents`.
    pub return_texts: bool,
    /// The best this many results (all when `None`).
    pub top_n: Option<usize>,
}

/// TEI's `/rerank`.
pub fn rerank(r: RerankRequest, max_items: usize) -> Result<ValidRerank, CallError> {
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
pub fn document_rerank(
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

/// TEI's `/similarity`: the source sentence first, then the sentences, as one embedding call
/// of unit vectors (their products are the cosines).
pub fn similarity(r: SimilarityRequest, max_items: usize) -> Result<ValidEmbed, CallError> {
    let (mut truncate, mut direction) = (r.truncate, r.truncation_direction);
    if let Some(parameters) = r.parameters {
        if let Some(Text(name)) = parameters.prompt_name {
            let message = format!("{name:?}: this model has no prompts (leave it out or null)");
            return Err(CallError::validation("parameters.prompt_name", message));
        }
        truncate = parameters.truncate.or(truncate);
        direction = parameters.truncation_direction.or(direction);
    }
    right_side(direction)?;
    let Some(SimilarityInputs { source_sentence, sentences }) = r.inputs else {
        return Err(CallError::validation("inputs", "is required"));
    };
    let source = texts("inputs.source_sentence", source_sentence.map(|Text(t)| Texts::One(t)), 1)?;
    let sentences = texts("inputs.sentences", sentences, max_items.saturating_sub(1).max(1))?;
    Ok(ValidEmbed {
        inputs: EmbedInputs::Texts([source, sentences].concat()),
        field: "inputs.sentences",
        truncate: Truncate::read(truncate),
        normalize: Normalize::DEFAULT,
    })
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
