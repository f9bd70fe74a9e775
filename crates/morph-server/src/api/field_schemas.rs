//! What each composite field type of [`super::fields`] accepts, as its OpenAPI schema: the same
//! shapes its deserializer takes, and no more than the checks after it let through (no text is
//! empty, no array is empty). The scalar ones, [`super::fields::Text`], `Number` and `Flag`, are
//! given as `String`, `f64` and `bool` on the request types. What only the running server knows
//! (how many items a batch takes, …) is set on the document when it starts
//! ([`super::served_facts`]).

use serde_json::{Value, json};
use utoipa::openapi::schema::{AdditionalProperties, ArrayBuilder, ObjectBuilder, OneOfBuilder};
use utoipa::openapi::{RefOr, Schema};
use utoipa::{PartialSchema, ToSchema};

use super::fields::{Inputs, Messages, ROLES, Texts};
use super::scores::pair_fields::{Document, PredictInputs};

/// A plain schema written as JSON Schema (reads more plainly so than through utoipa's builders).
fn schema(json: Value) -> Schema {
    serde_json::from_value(json).expect("a JSON Schema utoipa reads")
}

/// Any one of `items` (built: utoipa reads an untagged `oneOf` as a plain object).
fn one_of(description: &str, items: impl IntoIterator<Item = Value>) -> Schema {
    let one_of = items.into_iter().fold(OneOfBuilder::new(), |b, item| b.item(schema(item)));
    Schema::OneOf(one_of.description(Some(description)).build())
}

/// A text: every field that reads one refuses `""`.
fn text() -> Value {
    json!({"type": "string", "minLength": 1})
}

/// A text, as a field's schema.
pub(super) fn non_empty_text() -> RefOr<Schema> {
    RefOr::T(schema(text()))
}

/// A non-empty array of `items`.
fn array(items: Value) -> Value {
    json!({"type": "array", "items": items, "minItems": 1})
}

impl PartialSchema for Texts {
    fn schema() -> RefOr<Schema> {
        RefOr::T(one_of("A string, or a non-empty array of strings; none empty.", [text(), array(text())]))
    }
}

impl ToSchema for Texts {}

/// The token ids of one text: a non-empty array of them.
fn ids() -> Value {
    array(json!({"type": "integer", "minimum": 0}))
}

impl PartialSchema for Inputs {
    fn schema() -> RefOr<Schema> {
        let ids = ids();
        let about = "Text, or token ids of the served model's tokenizer: a string, an array of strings, \
            an array of ids, or an array of arrays of ids; none empty.";
        RefOr::T(one_of(about, [text(), array(text()), ids.clone(), array(ids)]))
    }
}

impl ToSchema for Inputs {}

impl PartialSchema for PredictInputs {
    fn schema() -> RefOr<Schema> {
        let pair = json!({"type": "array", "items": text(), "minItems": 1, "maxItems": 2});
        let about = "A string, a pair [text, text], or a batch of [text] and [text, text] (an array of \
            strings of another length is a batch of texts for a task head).";
        RefOr::T(one_of(about, [text(), array(text()), array(pair)]))
    }
}

impl ToSchema for PredictInputs {}

impl PartialSchema for Document {
    fn schema() -> RefOr<Schema> {
        let object = json!({"type": "object", "properties": {"text": text()}, "required": ["text"],
            "additionalProperties": false});
        RefOr::T(one_of("A string, or {\"text\": string}.", [text(), object]))
    }
}

impl ToSchema for Document {}

/// `/v1/rerank`'s `documents` (for `#[schema(schema_with = documents)]`).
pub(super) fn documents() -> RefOr<Schema> {
    let list = ArrayBuilder::new().items(Document::schema()).min_items(Some(1));
    RefOr::T(Schema::Array(list.description(Some("Strings, or `{\"text\": string}` objects.")).build()))
}

/// Vertex AI's `instances` (for `#[schema(schema_with = instances)]`): each a body for `POST /`,
/// whose `inputs` every served kind requires.
pub(super) fn instances() -> RefOr<Schema> {
    let about = "Each a body for `POST /` (`/embed`'s, or `/predict`'s on a classifier).";
    let body = json!({"type": "object", "required": ["inputs"], "properties": {"inputs": {"type": ["string", "array", "object"]}}});
    let list = ArrayBuilder::new().items(RefOr::T(schema(body))).min_items(Some(1)).description(Some(about));
    RefOr::T(Schema::Array(list.build()))
}

/// Cohere's `embeddings` as answered: `{"float": [[…]], "int8": [[…]], …}`, or a list of float
/// vectors (`/v1/embed` without `embedding_types`).
pub(super) fn vectors_by_type_or_floats() -> RefOr<Schema> {
    let floats = json!({"type": "array", "items": {"type": "array", "items": {"type": "number"}}});
    let by_type = json!({"type": "object", "additionalProperties": {"type": "array"}});
    RefOr::T(one_of(
        "The vectors by type, or a list of float vectors (version 1, no `embedding_types`).",
        [by_type, floats],
    ))
}

/// `/decode`'s `ids` (for `#[schema(schema_with = token_ids)]`): the ids of one text, or of each
/// of several.
pub(super) fn token_ids() -> RefOr<Schema> {
    RefOr::T(one_of("An array of token ids, or an array of them; none empty.", [ids(), array(ids())]))
}

/// `/similarity`'s `sentences` (for `#[schema(schema_with = sentences)]`): [`Texts`] apart, as
/// it takes one item fewer than a batch (the source sentence is the call's first).
pub(super) fn sentences() -> RefOr<Schema> {
    Texts::schema()
}

/// An optional field that takes one of `values` (null reads as absent), described by `about`.
pub(super) fn one_of_names(values: &[&str], about: &str) -> RefOr<Schema> {
    let values: Vec<Value> = values.iter().map(|v| json!(v)).chain([Value::Null]).collect();
    RefOr::T(schema(json!({"type": ["string", "null"], "enum": values, "description": about})))
}

/// An optional text matching `pattern` (null reads as absent), described by `about`.
pub(super) fn matching(pattern: &str, about: &str) -> RefOr<Schema> {
    RefOr::T(schema(json!({"type": ["string", "null"], "pattern": pattern, "description": about})))
}

/// TEI's `truncation_direction` on the embedding routes: `"right"` or `"left"`, in any case.
pub(super) fn right_or_left() -> RefOr<Schema> {
    let about =
        "TEI's side to cut from: `\"right\"` (the end, the default) or `\"left\"` (the start), in any case.";
    matching("^([Rr][Ii][Gg][Hh][Tt]|[Ll][Ee][Ff][Tt])$", about)
}

/// TEI's `truncation_direction` on the score routes, whose inputs may be pairs: `"right"` only.
pub(super) fn right_only() -> RefOr<Schema> {
    matching("^[Rr][Ii][Gg][Hh][Tt]$", "TEI's side to cut from: only `\"right\"` (the end), in any case.")
}

/// An optional field of one of `values`, or a list of at most `most` of them (Cohere's
/// `embedding_types`; null reads as absent).
pub(super) fn names_or_list(values: &[&str], most: usize, about: &str) -> RefOr<Schema> {
    let name = json!({"type": "string", "enum": values});
    let list = json!({"type": "array", "items": name, "minItems": 1, "maxItems": most});
    RefOr::T(one_of(about, [json!({"type": "null"}), name, list]))
}

/// A text or at most `most` texts (null reads as absent): `stop`.
pub(super) fn few_texts(most: usize, about: &str) -> RefOr<Schema> {
    let list = json!({"type": "array", "items": text(), "minItems": 1, "maxItems": most});
    RefOr::T(one_of(about, [json!({"type": "null"}), text(), list]))
}

impl PartialSchema for Messages {
    fn schema() -> RefOr<Schema> {
        let part = json!({
            "type": "object",
            "properties": {"type": {"type": "string", "enum": ["text"]}, "text": {"type": "string"}},
            "required": ["type", "text"],
            "additionalProperties": false,
        });
        let content = one_of(
            "A string, or text parts.",
            [json!({"type": "string"}), json!({"type": "array", "items": part})],
        );
        let message = ObjectBuilder::new()
            .property("role", schema(json!({"type": "string", "enum": ROLES})))
            .property("content", content)
            .required("role")
            .required("content")
            .additional_properties(Some(AdditionalProperties::FreeForm(false)));
        let list = ArrayBuilder::new().items(message).min_items(Some(1));
        RefOr::T(Schema::Array(list.description(Some("The conversation, oldest first.")).build()))
    }
}

impl ToSchema for Messages {}

/// `/v1/responses`' `input` (for `#[schema(schema_with = response_input)]`): a string, or messages.
pub(super) fn response_input() -> RefOr<Schema> {
    let part = json!({
        "type": "object",
        "properties": {"type": {"type": "string", "enum": ["input_text", "output_text"]}, "text": {"type": "string"}},
        "required": ["type", "text"],
    });
    let content = one_of(
        "A string, or text parts.",
        [json!({"type": "string"}), json!({"type": "array", "items": part})],
    );
    let message = ObjectBuilder::new()
        .property("type", schema(json!({"type": "string", "enum": ["message"]})))
        .property("role", schema(json!({"type": "string", "enum": ROLES})))
        .property("content", content)
        .required("role")
        .required("content")
        .additional_properties(Some(AdditionalProperties::FreeForm(false)));
    let messages = Schema::Array(ArrayBuilder::new().items(message).min_items(Some(1)).build());
    let string = schema(json!({"type": "string", "minLength": 1}));
    let about = "The user's message, or messages (type \"message\" optional).";
    RefOr::T(Schema::OneOf(OneOfBuilder::new().item(string).item(messages).description(Some(about)).build()))
}
