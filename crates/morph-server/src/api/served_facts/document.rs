//! Setting [`ServedFacts`] on the OpenAPI document: the batch fields' most items, the values the
//! served models decide, the bodies the served kinds take, and the names `model` takes.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use utoipa::PartialSchema;
use utoipa::openapi::path::PathItem;
use utoipa::openapi::schema::{Array, ArrayItems, Object, OneOfBuilder, SchemaType, Type};
use utoipa::openapi::{Content, OpenApi, Ref, RefOr, Schema};

use super::{PredictBy, ServedFacts};
use crate::api::field_schemas::non_empty_text;
use crate::api::fields::Texts;

/// The batch fields, by the schema that holds them: a component (`None`) or one property of a
/// request's; `fewer` items less than the server's batch.
const BATCHES: [(&str, Option<&str>, usize); 8] = [
    ("Texts", None, 0),
    ("Inputs", None, 0),
    ("CompletionRequest", Some("prompt"), 0),
    ("PredictInputs", None, 0),
    ("DocumentRerankRequest", Some("documents"), 0),
    ("VertexRequest", Some("instances"), 0),
    ("DecodeRequest", Some("ids"), 0),
    ("SimilarityInputs", Some("sentences"), 1),
];

/// Whose tokenizer a field's token ids are of.
#[derive(Clone, Copy)]
enum Tokenizer {
    Encoder,
    Decoder,
}

/// The fields that take token ids, by the schema that holds them (as [`BATCHES`]).
const TOKEN_IDS: [(&str, Option<&str>, Tokenizer); 3] = [
    ("Inputs", None, Tokenizer::Encoder),
    ("DecodeRequest", Some("ids"), Tokenizer::Encoder),
    ("CompletionRequest", Some("prompt"), Tokenizer::Decoder),
];

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

/// States `facts` in `document`: the names `model` takes, each batch field's most items, and the
/// values the fields that the served model decides take (null still reads as absent).
pub(crate) fn state_served(document: &mut OpenApi, facts: &ServedFacts) {
    state_root_bodies(document, &facts.root_bodies);
    if let Some(components) = document.components.as_mut() {
        state_values(&mut components.schemas, facts);
    }
    state_names(document, facts);
}

/// The values the served model and the server's settings decide.
fn state_values(schemas: &mut BTreeMap<String, RefOr<Schema>>, facts: &ServedFacts) {
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
    for (name, property, tokenizer) in TOKEN_IDS {
        let vocabulary = match tokenizer {
            Tokenizer::Encoder => facts.encoder_vocabulary,
            Tokenizer::Decoder => facts.decoder_vocabulary,
        };
        if let (Some(schema), Some(vocabulary)) = (held(schemas, name, property), vocabulary) {
            limit_ids(schema, vocabulary);
        }
    }
    if !facts.dimensions.is_empty() {
        let dimensions = or_null(facts.dimensions.iter().map(|d| json!(d)));
        DIMENSIONS.into_iter().for_each(|(name, field)| take_only(schemas, name, field, &dimensions));
    }
    let prompts = or_null(facts.prompt_names.iter().map(|n| json!(n)));
    PROMPT_NAMES.into_iter().for_each(|(name, field)| take_only(schemas, name, field, &prompts));
}

/// The names `model` takes: every body's own `model` field takes them (or null), and on a
/// several-model server every model route's body takes one of them to choose the model.
fn state_names(document: &mut OpenApi, facts: &ServedFacts) {
    let names: Vec<Value> = facts.names.iter().map(|n| json!(n)).collect();
    if let Some(components) = document.components.as_mut()
        && !names.is_empty()
    {
        let schemas = &mut components.schemas;
        let has_model = |schema: &RefOr<Schema>| matches!(schema, RefOr::T(Schema::Object(o)) if o.properties.contains_key("model"));
        let with_model: Vec<String> =
            schemas.iter().filter(|(_, schema)| has_model(schema)).map(|(name, _)| name.clone()).collect();
        let named_or_null = or_null(names.iter().cloned());
        with_model.iter().for_each(|name| take_only(schemas, name, "model", &named_or_null));
    }
    if facts.model_on_every_route {
        model_on_every_route(document, &names);
        document.info.description.get_or_insert_default().push_str(SEVERAL_MODELS);
    }
}

/// What a several-model server's document adds to its description.
const SEVERAL_MODELS: &str = " This server holds several models: a value this document allows is one \
    that some model takes, and the model a call reaches may refuse another's (a vector size, a \
    batch over its own limit). `GET /openapi.json?model=NAME` is one model's own document.";

/// `values`, and null (read as absent).
fn or_null(values: impl Iterator<Item = Value>) -> Vec<Value> {
    values.chain([Value::Null]).collect()
}

/// Property `field` of component `name` takes only `values`.
fn take_only(schemas: &mut BTreeMap<String, RefOr<Schema>>, name: &str, field: &str, values: &[Value]) {
    if let Some(Schema::Object(object)) = field_of(schemas, name, field) {
        object.enum_values = Some(values.to_vec());
    }
}

/// Every model route's body takes `model`, one of `names` (any text where none are stated), to
/// choose the model: where a route's body (or a body it is one of) is a component that lacks the
/// field, the route gets a copy of the component with it.
fn model_on_every_route(document: &mut OpenApi, names: &[Value]) {
    let Some(components) = document.components.clone() else { return };
    let mut model = Object::with_type(Type::String);
    model.enum_values = (!names.is_empty()).then(|| names.to_vec());
    model.description = Some("The model that answers the call (by any of its names).".into());
    let with_model = |body: &mut RefOr<Schema>| {
        let RefOr::Ref(reference) = body else { return };
        let name = reference.ref_location.rsplit('/').next().unwrap_or_default();
        let Some(RefOr::T(Schema::Object(component))) = components.schemas.get(name) else { return };
        if !component.properties.contains_key("model") {
            let mut copy = component.clone();
            copy.properties.insert("model".into(), RefOr::T(Schema::Object(model.clone())));
            *body = RefOr::T(Schema::Object(copy));
        }
    };
    for item in document.paths.paths.values_mut() {
        match json_body(item).and_then(|content| content.schema.as_mut()) {
            Some(RefOr::T(Schema::OneOf(one_of))) => one_of.items.iter_mut().for_each(with_model),
            Some(body) => with_model(body),
            None => {}
        }
    }
}

/// A route's JSON request body, where it takes one.
fn json_body(item: &mut PathItem) -> Option<&mut Content> {
    item.post.as_mut()?.request_body.as_mut()?.content.get_mut("application/json")
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
        if let Some(content) = document.paths.paths.get_mut(path).and_then(json_body) {
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
    let limit = |item: &mut RefOr<Schema>| {
        if let RefOr::T(Schema::Object(id)) = item
            && id.schema_type == SchemaType::new(Type::Integer)
        {
            id.maximum = Some(most.clone());
        }
    };
    for item in &mut one_of.items {
        let RefOr::T(Schema::Array(array)) = item else { continue };
        let ArrayItems::RefOrSchema(inner) = &mut array.items else { continue };
        match inner.as_mut() {
            RefOr::T(Schema::Array(nested)) => {
                if let ArrayItems::RefOrSchema(id) = &mut nested.items {
                    limit(id);
                }
            }
            id => limit(id),
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
    fn a_model_field_takes_the_served_names_and_every_route_takes_it_on_a_server_of_several() {
        let one = serde_json::to_value(crate::api::document()).expect("the document is JSON");
        let chat = &one["components"]["schemas"]["ChatRequest"]["properties"]["model"];
        assert_eq!(chat["enum"], json!(["all-MiniLM-L6-v2", null]));
        let embed = &one["paths"]["/embed"]["post"]["requestBody"]["content"]["application/json"]["schema"];
        assert_eq!(embed["$ref"], "#/components/schemas/EmbedRequest");

        let (reranker, decoder) = (ServedFacts::example_reranker(768), ServedFacts::example_decoder());
        let facts = ServedFacts::joined(&[ServedFacts::example(), reranker, decoder]);
        let several = serde_json::to_value(crate::api::document_of(&facts)).expect("the document is JSON");
        let schemas = &several["components"]["schemas"];
        assert_eq!(
            schemas["ChatRequest"]["properties"]["model"]["enum"],
            json!(["all-MiniLM-L6-v2", "reranker", "smollm2", null])
        );
        assert_eq!(schemas["EmbedRequest"]["properties"]["dimensions"]["enum"], json!([384, 768, null]));
        // Token ids: an embedding's the encoders', a prompt's the decoder's.
        assert_eq!(schemas["Inputs"]["oneOf"][2]["items"]["maximum"], 30_521);
        let prompt = &schemas["CompletionRequest"]["properties"]["prompt"];
        assert_eq!(prompt["oneOf"][2]["items"]["maximum"], 49_151, "{prompt}");
        assert_eq!(prompt["oneOf"][1]["maxItems"], 8, "{prompt}");
        assert!(prompt["oneOf"][1]["items"]["maximum"].is_null(), "texts have no maximum: {prompt}");
        // TEI's bodies lack `model`: their routes take a copy with it, a name and never null.
        let body = |path: &str| {
            several["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"].clone()
        };
        assert_eq!(
            body("/embed")["properties"]["model"]["enum"],
            json!(["all-MiniLM-L6-v2", "reranker", "smollm2"])
        );
        assert!(
            body("/embed")["properties"]["inputs"].is_object()
                && schemas["EmbedRequest"]["properties"]["model"].is_null()
        );
        let root = body("/");
        assert_eq!(root["oneOf"].as_array().map(Vec::len), Some(3), "{root}");
        assert!(
            root["oneOf"]
                .as_array()
                .is_some_and(|bodies| bodies.iter().all(|b| b["properties"]["model"].is_object())),
            "{root}"
        );
        // OpenAI's bodies have their own.
        assert_eq!(body("/v1/embeddings")["$ref"], "#/components/schemas/EmbeddingsRequest");
        // `/predict` as either model reads it: `task` (task heads) and `raw_scores` (a classifier).
        let predict = &schemas["PredictRequest"];
        assert!(
            predict["properties"]["task"].is_object() && predict["properties"]["raw_scores"].is_object(),
            "{predict}"
        );
        assert!(!predict["required"].as_array().is_some_and(|r| r.contains(&json!("task"))), "{predict}");
    }

    #[test]
    fn a_server_with_a_key_names_no_model_in_its_open_document() {
        let keyed = ServedFacts { names: Vec::new(), model_on_every_route: true, ..ServedFacts::example() };
        let doc = serde_json::to_value(crate::api::document_of(&keyed)).expect("the document is JSON");
        let chat = &doc["components"]["schemas"]["ChatRequest"]["properties"]["model"];
        assert!(chat["enum"].is_null(), "{chat}");
        let embed = &doc["paths"]["/embed"]["post"]["requestBody"]["content"]["application/json"]["schema"];
        assert_eq!(embed["properties"]["model"]["type"], "string", "{embed}");
        assert!(embed["properties"]["model"]["enum"].is_null(), "{embed}");
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
