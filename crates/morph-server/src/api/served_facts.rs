//! What the OpenAPI document states that only the running server knows ([`ServedFacts`]): how
//! many items a batch takes, the values its model decides (token ids, vector size, prompt names),
//! and the bodies its kind of model takes at `POST /` and `/predict`. Set on the document when
//! the server starts, so that what the document allows is what the server's checks let through.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use utoipa::PartialSchema;
use utoipa::openapi::schema::{Array, ArrayItems, OneOfBuilder, SchemaType, Type};
use utoipa::openapi::{OpenApi, Ref, RefOr, Schema};

use super::field_schemas::non_empty_text;
use super::fields::Texts;

/// What the document states that only the running server knows: the values it takes where the
/// checks compare with the served model or the server's settings.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ServedFacts {
    /// `--max-client-batch`: the most items a batch field takes.
    pub batch: usize,
    /// The size of the model's vectors: the one `dimensions` takes.
    pub dimension: usize,
    /// The model's prompts' names: those `prompt_name` takes.
    pub prompt_names: Vec<String>,
    /// The tokenizer's size: token ids sent are below it.
    pub vocabulary: usize,
    /// The bodies `POST /` (and `/invocations`, and each of Vertex AI's instances) takes on this
    /// server: the served kind's routes'.
    pub root_bodies: Vec<&'static str>,
    /// How `/predict` reads a call on this server.
    pub predict: PredictBy,
}

/// What `/predict` answers with on a server, which decides the fields it takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PredictBy {
    /// Morph's task heads on an embedding model: `task` required, texts only.
    TaskHeads,
    /// A sequence-classification model's own head: no `task` or service class.
    OwnHead,
    /// Nothing: the server generates.
    Nothing,
}

#[cfg(test)]
impl ServedFacts {
    /// MiniLM's, on an embedding server with task heads and batches of 8.
    pub(crate) fn example() -> Self {
        Self {
            batch: 8,
            dimension: 384,
            prompt_names: Vec::new(),
            vocabulary: 30_522,
            root_bodies: vec!["EmbedRequest", "SimilarityRequest"],
            predict: PredictBy::TaskHeads,
        }
    }
}

impl PredictBy {
    /// The fields of `/predict`'s body this way of answering refuses.
    fn refused(self) -> &'static [&'static str] {
        match self {
            PredictBy::TaskHeads => &["raw_scores", "parameters"],
            PredictBy::OwnHead => &["task", "slo_ms", "utility"],
            PredictBy::Nothing => &[],
        }
    }
}

/// The batch fields, by the schema that holds them: a component (`None`) or one property of a
/// request's; `fewer` items less than the server's batch.
const BATCHES: [(&str, Option<&str>, usize); 7] = [
    ("Texts", None, 0),
    ("Inputs", None, 0),
    ("PredictInputs", None, 0),
    ("DocumentRerankRequest", Some("documents"), 0),
    ("VertexRequest", Some("instances"), 0),
    ("DecodeRequest", Some("ids"), 0),
    ("SimilarityInputs", Some("sentences"), 1),
];

/// The fields that take token ids, by the schema that holds them (as [`BATCHES`]).
const TOKEN_IDS: [(&str, Option<&str>); 2] = [("Inputs", None), ("DecodeRequest", Some("ids"))];

/// The fields that take only the model's own vector size.
const DIMENSIONS: [(&str, &str); 3] = [
    ("EmbeddingsRequest", "dimensions"),
    ("EmbedRequest", "dimensions"),
    ("CohereEmbedRequest", "output_dimension"),
];

/// The fields that name one of the model's prompts.
const PROMPT_NAMES: [(&str, &str); 3] = [
    ("EmbedRequest", "prompt_name"),
    ("SimilarityParameters", "prompt_name"),
    ("TokenizeRequest", "prompt_name"),
];

/// States `facts` in `document`: each batch field's most items, and the values the fields that
/// the served model decides take (null still reads as absent).
pub(crate) fn state_served(document: &mut OpenApi, facts: &ServedFacts) {
    state_root_bodies(document, &facts.root_bodies);
    let Some(components) = document.components.as_mut() else { return };
    let schemas = &mut components.schemas;
    state_predict(schemas, facts.predict);
    if let Some(Schema::Array(instances)) = field_of(schemas, "VertexRequest", "instances")
        && !facts.root_bodies.is_empty()
    {
        instances.items = ArrayItems::RefOrSchema(Box::new(one_of_refs(&facts.root_bodies)));
    }
    for (name, property, fewer) in BATCHES {
        let most = facts.batch.saturating_sub(fewer).max(1);
        held(schemas, name, property).into_iter().for_each(|schema| limit_arrays(schema, most));
    }
    for (name, property) in TOKEN_IDS {
        held(schemas, name, property).into_iter().for_each(|schema| limit_ids(schema, facts.vocabulary));
    }
    let takes = |values: Vec<Value>| values.into_iter().chain([Value::Null]).collect::<Vec<_>>();
    for (name, field) in DIMENSIONS {
        if let Some(Schema::Object(object)) = field_of(schemas, name, field) {
            object.enum_values = Some(takes(vec![json!(facts.dimension)]));
        }
    }
    for (name, field) in PROMPT_NAMES {
        if let Some(Schema::Object(object)) = field_of(schemas, name, field) {
            object.enum_values = Some(takes(facts.prompt_names.iter().map(|n| json!(n)).collect()));
        }
    }
}

/// The routes that answer as the served kind's route does.
const BY_KIND: [&str; 2] = ["/", "/invocations"];

/// `POST /`'s and `/invocations`' body: one of `bodies` (components), where the server names any.
fn state_root_bodies(document: &mut OpenApi, bodies: &[&str]) {
    if bodies.is_empty() {
        return;
    }
    let body = one_of_refs(bodies);
    for path in BY_KIND {
        let post = document.paths.paths.get_mut(path).and_then(|item| item.post.as_mut());
        if let Some(content) =
            post.and_then(|post| post.request_body.as_mut()?.content.get_mut("application/json"))
        {
            content.schema = Some(body.clone());
        }
    }
}

/// Any one of the components named `names`.
fn one_of_refs(names: &[&str]) -> RefOr<Schema> {
    let refs = names.iter().fold(OneOfBuilder::new(), |b, name| b.item(Ref::from_schema_name(*name)));
    RefOr::T(Schema::OneOf(refs.build()))
}

/// `/predict`'s body as this server reads it: the fields it refuses left out, and with task
/// heads, `task` required and the inputs texts.
fn state_predict(schemas: &mut BTreeMap<String, RefOr<Schema>>, predict: PredictBy) {
    let Some(RefOr::T(Schema::Object(body))) = schemas.get_mut("PredictRequest") else { return };
    body.properties.retain(|field, _| !predict.refused().contains(&field.as_str()));
    if predict == PredictBy::TaskHeads {
        body.required.push("task".into());
        body.properties.insert("task".into(), non_empty_text());
        body.properties.insert("inputs".into(), Texts::schema());
    }
}

/// Component `name`, or its property `property`, where written out (not a `$ref`).
fn held<'a>(
    schemas: &'a mut BTreeMap<String, RefOr<Schema>>,
    name: &str,
    property: Option<&str>,
) -> Option<&'a mut Schema> {
    match property {
        None => match schemas.get_mut(name)? {
            RefOr::T(schema) => Some(schema),
            RefOr::Ref(_) => None,
        },
        Some(field) => field_of(schemas, name, field),
    }
}

/// The schema of property `field` of component `name`, where it is written out (not a `$ref`).
fn field_of<'a>(
    schemas: &'a mut BTreeMap<String, RefOr<Schema>>,
    name: &str,
    field: &str,
) -> Option<&'a mut Schema> {
    match schemas.get_mut(name)? {
        RefOr::T(Schema::Object(object)) => match object.properties.get_mut(field)? {
            RefOr::T(schema) => Some(schema),
            RefOr::Ref(_) => None,
        },
        _ => None,
    }
}

/// The token ids in `schema` (arrays of them, or of arrays of them, among what it is one of) run
/// up to `vocabulary` less one.
fn limit_ids(schema: &mut Schema, vocabulary: usize) {
    let Schema::OneOf(one_of) = schema else { return };
    let most = utoipa::Number::UInt(vocabulary.saturating_sub(1));
    for item in &mut one_of.items {
        let RefOr::T(Schema::Array(array)) = item else { continue };
        let ArrayItems::RefOrSchema(inner) = &mut array.items else { continue };
        match inner.as_mut() {
            RefOr::T(Schema::Object(id)) => id.maximum = Some(most.clone()),
            RefOr::T(Schema::Array(nested)) => {
                if let ArrayItems::RefOrSchema(id) = &mut nested.items
                    && let RefOr::T(Schema::Object(id)) = id.as_mut()
                {
                    id.maximum = Some(most.clone());
                }
            }
            _ => {}
        }
    }
}

/// `schema`'s batches (itself, or those it is one of) take at most `most` items: arrays of
/// anything but token ids (an array of ids is one input).
fn limit_arrays(schema: &mut Schema, most: usize) {
    let is_ids = |array: &Array| {
        matches!(&array.items, ArrayItems::RefOrSchema(item)
        if matches!(item.as_ref(), RefOr::T(Schema::Object(o)) if o.schema_type == SchemaType::new(Type::Integer)))
    };
    match schema {
        Schema::Array(array) => array.max_items = Some(most),
        Schema::OneOf(one_of) => one_of.items.iter_mut().for_each(|item| match item {
            RefOr::T(Schema::Array(array)) if !is_ids(array) => array.max_items = Some(most),
            _ => {}
        }),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_server_states_its_batch_its_models_values_and_the_bodies_its_kind_takes() {
        let facts = ServedFacts { prompt_names: vec!["query".into()], ..ServedFacts::example() };
        let doc = serde_json::to_value(crate::api::document_of(&facts)).expect("the document is JSON");
        let schemas = &doc["components"]["schemas"];
        // A batch of texts takes at most 8; one array of token ids is one input, not a batch.
        let inputs = &schemas["Inputs"]["oneOf"];
        assert_eq!((inputs[1]["maxItems"].clone(), inputs[2]["maxItems"].clone()), (json!(8), json!(null)));
        assert_eq!(inputs[2]["items"]["maximum"], 30_521);
        assert_eq!(schemas["SimilarityInputs"]["properties"]["sentences"]["oneOf"][1]["maxItems"], 7);
        assert_eq!(schemas["EmbedRequest"]["properties"]["dimensions"]["enum"], json!([384, null]));
        assert_eq!(schemas["TokenizeRequest"]["properties"]["prompt_name"]["enum"], json!(["query", null]));
        let root = &doc["paths"]["/"]["post"]["requestBody"]["content"]["application/json"]["schema"];
        assert_eq!(root["oneOf"][1]["$ref"], "#/components/schemas/SimilarityRequest");
        // Task heads: `task` required, a classifier's fields gone.
        let predict = &schemas["PredictRequest"];
        assert!(predict["required"].as_array().is_some_and(|r| r.contains(&json!("task"))), "{predict}");
        assert!(
            predict["properties"]["raw_scores"].is_null() && predict["properties"]["parameters"].is_null()
        );
    }

    #[test]
    fn a_classifiers_server_takes_its_own_bodies_and_no_task() {
        let facts = ServedFacts {
            root_bodies: vec!["PredictRequest"],
            predict: PredictBy::OwnHead,
            ..ServedFacts::example()
        };
        let doc = serde_json::to_value(crate::api::document_of(&facts)).expect("the document is JSON");
        let schemas = &doc["components"]["schemas"];
        let predict = &schemas["PredictRequest"];
        assert!(
            predict["properties"]["task"].is_null() && predict["properties"]["slo_ms"].is_null(),
            "{predict}"
        );
        assert!(!predict["properties"]["raw_scores"].is_null(), "{predict}");
        let instances = &schemas["VertexRequest"]["properties"]["instances"];
        assert_eq!(instances["items"]["oneOf"][0]["$ref"], "#/components/schemas/PredictRequest");
        assert_eq!(instances["maxItems"], 8);
    }
}
