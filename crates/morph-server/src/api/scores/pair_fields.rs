//! The field types of the classification and reranking routes, read as [`crate::api::fields`] reads
//! every field: a value of the wrong type is refused with what it must be.

use std::fmt;

use serde::Deserialize;
use serde::de::value::MapAccessDeserializer;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::api::fields::{Must, Text, Texts, collect, refuse};

/// `/predict`'s `inputs` as text-embeddings-inference reads them: a string, a pair
/// `[text, text]`, or a batch of `[text]` and `[text, text]`. An array of strings of another
/// length is a batch of texts (Morph's task heads take it); which reading holds is the route's
/// to say, by the served model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PredictInputs {
    One(String),
    Strings(Vec<String>),
    Nested(Vec<Vec<String>>),
}

struct PredictInputsVisitor;

impl Must for PredictInputsVisitor {
    const MUST: &'static str =
        "a string, a pair [string, string], or a batch of [string] and [string, string]";
}

impl<'de> Visitor<'de> for PredictInputsVisitor {
    type Value = PredictInputs;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(Self::MUST)
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<PredictInputs, E> {
        Ok(PredictInputs::One(text.to_string()))
    }

    /// The first element says what the array holds, as for `input`.
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<PredictInputs, A::Error> {
        let texts = |t: Vec<Text>| t.into_iter().map(|Text(t)| t).collect::<Vec<_>>();
        Ok(match seq.next_element::<Texts>()? {
            None => PredictInputs::Strings(Vec::new()),
            Some(Texts::One(first)) => {
                PredictInputs::Strings([vec![first], texts(collect::<Text, A>(seq)?)].concat())
            }
            Some(Texts::Many(first)) => {
                let rest = collect::<Vec<Text>, A>(seq)?.into_iter().map(texts);
                PredictInputs::Nested(std::iter::once(first).chain(rest).collect())
            }
        })
    }

    refuse!(bool, number, null, object);
}

impl<'de> Deserialize<'de> for PredictInputs {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(PredictInputsVisitor)
    }
}

/// A document to rerank (`documents[i]`): a string, or `{"text": string}` (Cohere's and Jina's
/// two shapes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Document(pub String);

/// `{"text": …}`, and nothing else.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DocumentObject {
    text: Text,
}

struct DocumentVisitor;

impl Must for DocumentVisitor {
    const MUST: &'static str = "a string or {\"text\": string}";
}

impl<'de> Visitor<'de> for DocumentVisitor {
    type Value = Document;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(Self::MUST)
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Document, E> {
        Ok(Document(text.to_string()))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Document, A::Error> {
        let DocumentObject { text: Text(text) } =
            DocumentObject::deserialize(MapAccessDeserializer::new(map))?;
        Ok(Document(text))
    }

    refuse!(bool, number, null, array);
}

impl<'de> Deserialize<'de> for Document {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(DocumentVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn predict_inputs_keep_their_shape_and_documents_take_both_forms() {
        let read = |json: &str| serde_json::from_str::<PredictInputs>(json);
        assert_eq!(read(r#""a""#).unwrap(), PredictInputs::One("a".into()));
        assert_eq!(read(r#"["a","b"]"#).unwrap(), PredictInputs::Strings(vec!["a".into(), "b".into()]));
        let nested = PredictInputs::Nested(vec![vec!["a".into()], vec!["b".into(), "c".into()]]);
        assert_eq!(read(r#"[["a"],["b","c"]]"#).unwrap(), nested);
        assert!(read(r#"["a",["b"]]"#).is_err());
        assert!(read("3").unwrap_err().to_string().contains("a pair [string, string]"));
        let docs: Vec<Document> = serde_json::from_str(r#"["x", {"text": "y"}]"#).unwrap();
        assert_eq!(docs, vec![Document("x".into()), Document("y".into())]);
        assert!(serde_json::from_str::<Document>(r#"{"text": "y", "title": "t"}"#).is_err());
    }
}
