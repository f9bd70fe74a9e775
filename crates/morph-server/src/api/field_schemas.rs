//! What each composite field type of [`super::fields`] accepts, as its OpenAPI schema: the same
//! shapes its deserializer takes (the scalar ones, [`super::fields::Text`], `Number` and `Flag`,
//! are given as `String`, `f64` and `bool` on the request types).

use serde_json::{Value, json};
use utoipa::openapi::schema::{AdditionalProperties, ArrayBuilder, ObjectBuilder, OneOfBuilder};
use utoipa::openapi::{RefOr, Schema};
use utoipa::{PartialSchema, ToSchema};

use super::fields::{Inputs, Messages, ROLES, Texts};

/// A plain schema written as JSON Schema (reads more plainly so than through utoipa's builders).
fn schema(json: Value) -> Schema {
    serde_json::from_value(json).expect("a JSON Schema utoipa reads")
}

/// Any one of `items` (built: utoipa reads an untagged `oneOf` as a plain object).
fn one_of(description: &str, items: impl IntoIterator<Item = Value>) -> Schema {
    let one_of = items.into_iter().fold(OneOfBuilder::new(), |b, item| b.item(schema(item)));
    Schema::OneOf(one_of.description(Some(description)).build())
}

fn strings() -> Value {
    json!({"type": "array", "items": {"type": "string"}, "minItems": 1})
}

impl PartialSchema for Texts {
    fn schema() -> RefOr<Schema> {
        RefOr::T(one_of("A string, or a non-empty array of strings.", [json!({"type": "string"}), strings()]))
    }
}

impl ToSchema for Texts {}

impl PartialSchema for Inputs {
    fn schema() -> RefOr<Schema> {
        let ids = json!({"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 1});
        let nested = json!({"type": "array", "items": ids, "minItems": 1});
        let about = "Text, or token ids of the served model's tokenizer: a string, an array of strings, \
            an array of ids, or an array of arrays of ids.";
        RefOr::T(one_of(about, [json!({"type": "string"}), strings(), ids, nested]))
    }
}

impl ToSchema for Inputs {}

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
