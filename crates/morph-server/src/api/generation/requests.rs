//! The generation routes' bodies as sent: chat and completions (one type, each route's own fields
//! in its document) and the Responses API.

use serde::Deserialize;
use utoipa::openapi::schema::{Object, ObjectBuilder, OneOfBuilder, SchemaType, Type};
use utoipa::openapi::{RefOr, Schema};
use utoipa::{PartialSchema, ToSchema};

use crate::api::bounds::{bounded, switch};
use crate::api::field_schemas::{few_texts, response_input};
use crate::api::field_types::*;
use crate::api::fields::{Flag, Inputs, Messages, Number, Text, Texts};

/// `POST /v1/completions` (`prompt`) and `POST /v1/chat/completions` (`messages`), OpenAI.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GenerationRequest {
    /// A prompt, or several (a choice for each, `n` per prompt): text, or the model's token ids
    /// (an array of ids, or an array of such arrays).
    #[schema(schema_with = prompt)]
    pub prompt: Option<Inputs>,
    /// Each choice's text starts with its prompt's (completions); with `logprobs`, the prompt's
    /// tokens come first in them, each scored under the ones before it (the first has `null`).
    /// With it `max_tokens` may be 0: the prompt only scored.
    #[schema(value_type = Option<bool>)]
    pub echo: Option<Flag>,
    pub messages: Option<Messages>,
    #[schema(value_type = Option<String>)]
    pub model: Option<Text>,
    /// `max_completion_tokens` is OpenAI's newer name for it; not both.
    #[schema(schema_with = bounded::<MaxTokens>)]
    pub max_tokens: Option<Number>,
    #[schema(schema_with = bounded::<MaxTokens>)]
    pub max_completion_tokens: Option<Number>,
    #[schema(schema_with = bounded::<Temperature>)]
    pub temperature: Option<Number>,
    #[schema(schema_with = bounded::<TopP>)]
    pub top_p: Option<Number>,
    #[schema(schema_with = bounded::<TopK>)]
    pub top_k: Option<Number>,
    #[schema(schema_with = bounded::<MinP>)]
    pub min_p: Option<Number>,
    #[schema(schema_with = bounded::<Penalty>)]
    pub presence_penalty: Option<Number>,
    #[schema(schema_with = bounded::<Penalty>)]
    pub frequency_penalty: Option<Number>,
    /// Token ids (as strings) each with a bias from -100 (banned) to 100 (all but forced),
    /// added to the token's logit before each draw.
    #[schema(value_type = Option<std::collections::HashMap<String, f64>>)]
    pub logit_bias: Option<serde_json::Value>,
    #[schema(schema_with = bounded::<Seed>)]
    pub seed: Option<Number>,
    #[schema(schema_with = bounded::<Choices>)]
    pub n: Option<Number>,
    #[schema(schema_with = stop)]
    pub stop: Option<Texts>,
    #[schema(schema_with = switch::<Stream>)]
    pub stream: Option<Flag>,
    pub stream_options: Option<StreamOptions>,
    /// `{"type": "text"}`, `{"type": "json_object"}`, or `{"type": "json_schema", "json_schema":
    /// {"name", "schema", "strict"}}`: a JSON answer, its tokens constrained to the schema.
    #[schema(value_type = Option<Object>)]
    pub response_format: Option<serde_json::Value>,
    /// Functions the model may call (chat only): `[{"type": "function", "function": {"name",
    /// "description", "parameters"}}]`.
    #[schema(value_type = Option<Vec<Object>>)]
    pub tools: Option<serde_json::Value>,
    /// `"auto"` (the default with tools), `"none"`, `"required"`, or `{"type": "function",
    /// "function": {"name"}}`; with `required` or a name the calls are constrained to the
    /// tools' schemas.
    #[schema(value_type = Option<Object>)]
    pub tool_choice: Option<serde_json::Value>,
    /// Several calls in one answer (default true).
    #[schema(value_type = Option<bool>)]
    pub parallel_tool_calls: Option<Flag>,
    /// Each token's log-probability: in chat `true` (alternatives in `top_logprobs`), in
    /// completions the number of alternatives (see [`ChatRequest`], [`CompletionRequest`]).
    #[schema(value_type = Option<Object>)]
    pub logprobs: Option<serde_json::Value>,
    #[schema(schema_with = bounded::<TopLogprobs>)]
    pub top_logprobs: Option<Number>,
    /// The caller's end user, written to the call's log line.
    #[schema(value_type = Option<String>)]
    pub user: Option<Text>,
}

/// Most stop strings in one call (OpenAI's limit).
pub(super) const MAX_STOPS: usize = 4;

/// Fields only `/v1/completions` takes; a chat call that sends one is refused by name.
pub(crate) const COMPLETION_ONLY: [&str; 2] = ["prompt", "echo"];

/// Fields only `/v1/chat/completions` takes; a completions call that sends one is refused by name.
pub(crate) const CHAT_ONLY: [&str; 5] =
    ["messages", "top_logprobs", "tools", "tool_choice", "parallel_tool_calls"];

/// `/v1/chat/completions`' body as the OpenAPI document shows it: [`GenerationRequest`] without
/// [`COMPLETION_ONLY`], `logprobs` true or false (alternatives in `top_logprobs`).
#[derive(Debug)]
pub(crate) struct ChatRequest;

impl PartialSchema for ChatRequest {
    fn schema() -> RefOr<Schema> {
        let logprobs = ObjectBuilder::new()
            .schema_type(SchemaType::from_iter([Type::Boolean, Type::Null]))
            .default(Some(false.into()));
        generation_route(&COMPLETION_ONLY, "messages", logprobs.build(), "OpenAI's chat completions.")
    }
}

impl ToSchema for ChatRequest {
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        GenerationRequest::schemas(schemas);
    }
}

/// `prompt`'s schema: [`Inputs`]', written out in the body rather than shared, so the document
/// bounds a prompt's token ids by the decoder's tokenizer and an embedding's by the encoder's.
fn prompt() -> RefOr<Schema> {
    let RefOr::T(Schema::OneOf(mut inputs)) = Inputs::schema() else {
        unreachable!("inputs are one of four")
    };
    inputs.description = Some(
        "A prompt, or several (a choice for each, `n` per prompt): text, or the model's token ids (an \
         array of ids, or an array of such arrays); none empty."
            .into(),
    );
    RefOr::T(Schema::OneOf(inputs))
}

/// `/v1/completions`' body as the OpenAPI document shows it: [`GenerationRequest`] without
/// [`CHAT_ONLY`], `logprobs` the number of alternatives per token.
#[derive(Debug)]
pub(crate) struct CompletionRequest;

impl PartialSchema for CompletionRequest {
    fn schema() -> RefOr<Schema> {
        let RefOr::T(Schema::Object(logprobs)) = bounded::<CompletionLogprobs>() else {
            unreachable!("a range's schema is an object")
        };
        generation_route(&CHAT_ONLY, "prompt", logprobs, "OpenAI's completions.")
    }
}

impl ToSchema for CompletionRequest {
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        GenerationRequest::schemas(schemas);
    }
}

/// [`GenerationRequest`]'s schema less the other route's fields, with its prompt field required
/// and its own `logprobs`.
fn generation_route(other_route: &[&str], prompt: &str, logprobs: Object, about: &str) -> RefOr<Schema> {
    let RefOr::T(Schema::Object(mut body)) = GenerationRequest::schema() else {
        unreachable!("a derived struct's schema is an object")
    };
    body.properties.retain(|field, _| !other_route.contains(&field.as_str()));
    body.properties.insert("logprobs".into(), Schema::Object(logprobs).into());
    if let Some(field) = body.properties.get_mut(prompt) {
        *field = without_null(field.clone());
    }
    body.required = vec![prompt.to_string()];
    body.description = Some(about.to_string());
    RefOr::T(Schema::Object(body))
}

/// An optional field's schema made required: the `null` it may be (`Option`'s) left out.
fn without_null(schema: RefOr<Schema>) -> RefOr<Schema> {
    let is_null = |item: &RefOr<Schema>| matches!(item, RefOr::T(Schema::Object(o)) if o.schema_type == SchemaType::new(Type::Null));
    match schema {
        RefOr::T(Schema::OneOf(one_of)) => {
            let mut rest: Vec<_> = one_of.items.into_iter().filter(|item| !is_null(item)).collect();
            match rest.len() {
                1 => rest.remove(0),
                _ => RefOr::T(Schema::OneOf(
                    rest.into_iter().fold(OneOfBuilder::new(), OneOfBuilder::item).build(),
                )),
            }
        }
        other => other,
    }
}

/// `stop`: a string or up to [`MAX_STOPS`] strings, none empty; the text ends before the first to
/// appear.
fn stop() -> RefOr<Schema> {
    few_texts(MAX_STOPS, &format!("Up to {MAX_STOPS} strings; the text ends before the first to appear."))
}

/// `POST /v1/responses` (OpenAI's Responses API), for text: what it honours; every other field
/// (tools, reasoning, `previous_response_id`, …) is refused by name.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ResponsesRequest {
    /// A string (the user's message), or messages `{role, content}` (`type: "message"` optional),
    /// content a string or parts of type `input_text`/`output_text`.
    #[schema(schema_with = response_input, required = true)]
    pub input: Option<serde_json::Value>,
    #[schema(value_type = Option<String>)]
    pub model: Option<Text>,
    /// A system message put before the input.
    #[schema(value_type = Option<String>)]
    pub instructions: Option<Text>,
    #[schema(schema_with = bounded::<MaxOutputTokens>)]
    pub max_output_tokens: Option<Number>,
    #[schema(schema_with = bounded::<Temperature>)]
    pub temperature: Option<Number>,
    #[schema(schema_with = bounded::<TopP>)]
    pub top_p: Option<Number>,
    /// Server-sent events of the Responses API (`response.created` … `response.completed`).
    #[schema(schema_with = switch::<Stream>)]
    pub stream: Option<Flag>,
    /// Only false: nothing is stored.
    #[schema(value_type = Option<bool>)]
    pub store: Option<Flag>,
    /// `{"format": …}`: `{"type": "text"}`, `{"type": "json_object"}`, or `{"type":
    /// "json_schema", "name", "schema", "strict"}`: a JSON answer, its tokens constrained to the
    /// schema.
    #[schema(value_type = Option<Object>)]
    pub text: Option<serde_json::Value>,
    /// Functions the model may call: `[{"type": "function", "name", "description",
    /// "parameters"}]`; calls come back as `function_call` output items.
    #[schema(value_type = Option<Vec<Object>>)]
    pub tools: Option<serde_json::Value>,
    /// `"auto"`, `"none"`, `"required"`, or `{"type": "function", "name"}`.
    #[schema(value_type = Option<Object>)]
    pub tool_choice: Option<serde_json::Value>,
    /// Several calls in one answer (default true).
    #[schema(value_type = Option<bool>)]
    pub parallel_tool_calls: Option<Flag>,
    /// The caller's end user, written to the call's log line.
    #[schema(value_type = Option<String>)]
    pub user: Option<Text>,
}

/// `stream_options`: `include_usage` adds a last chunk with the call's token counts.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct StreamOptions {
    #[schema(schema_with = switch::<IncludeUsage>)]
    pub include_usage: Option<Flag>,
}
