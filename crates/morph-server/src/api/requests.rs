//! The request body of each route, as sent: every field optional and leniently typed (see
//! [`super::fields`]), so that [`super::validate`] can name what is missing or wrong. A field a
//! route does not honour is refused by name (`deny_unknown_fields`); docs/api.md lists every
//! OpenAI field and what Morph does with it. Each number field's default and bounds are a
//! [`Bounded`] type here, which validation applies and the OpenAPI document shows; the document
//! lists exactly these fields (generated from these types, see [`super::openapi`]).

use serde::Deserialize;
use utoipa::openapi::schema::{Object, ObjectBuilder, Type};
use utoipa::openapi::{RefOr, Schema};
use utoipa::{PartialSchema, ToSchema};

use super::bounds::{Bounded, Range, Switch, bounded, switch};
use super::field_schemas::response_input;
use super::fields::{Flag, Inputs, Messages, Number, Text, Texts};
use super::pair_fields::{Document, PredictInputs};

/// Field types: each a unit type implementing `$trait` with `$value` as its `$item`; its doc line
/// is the field's description in the OpenAPI document.
macro_rules! field_types {
    ($trait:ident, $item:ident: $ty:ty; $($(#[doc = $doc:literal])* $name:ident = $value:expr;)*) => {$(
        $(#[doc = $doc])*
        #[derive(Debug)]
        pub struct $name;

        impl $trait for $name {
            const $item: $ty = $value;
            const ABOUT: &str = concat!($($doc),*);
        }
    )*};
}

// Each number field's default and bounds ([`Bounded`]).
field_types! {
    Bounded, RANGE: Range;
    /// Most tokens generated per choice, up to the model's context; by default all the room
    /// the prompt leaves in it.
    MaxTokens = Range::whole(None, 1.0, f64::INFINITY);
    /// 0 is greedy.
    Temperature = Range::number(Some(1.0), 0.0, 2.0);
    /// Nucleus sampling: the smallest set of tokens this likely; above 0.
    TopP = Range::number(Some(1.0), 1e-6, 1.0);
    /// The k likeliest tokens; 0 is off (llama-server's and vLLM's field, not OpenAI's).
    TopK = Range::whole(Some(0.0), 0.0, 1e6);
    /// Tokens at least this likely relative to the likeliest; 0 is off (not OpenAI's field).
    MinP = Range::number(Some(0.0), 0.0, 1.0);
    /// OpenAI's penalty of tokens already generated (once, or per time).
    Penalty = Range::number(Some(0.0), -2.0, 2.0);
    /// The sampler's seed (choice i takes seed + i); without one, every call samples afresh.
    Seed = Range::whole(None, 0.0, 9.0e15);
    /// Choices per prompt.
    Choices = Range::whole(Some(1.0), 1.0, 16.0);
    /// Alternatives per token in chat (OpenAI's limit).
    TopLogprobs = Range::whole(Some(0.0), 0.0, 20.0);
    /// Alternatives per token in completions, where `logprobs` is their number (OpenAI's limit).
    CompletionLogprobs = Range::whole(None, 0.0, 5.0);
    /// The answer's deadline, in ms from arrival (at most a day).
    SloMs = Range::number(None, 0.0, 86_400_000.0);
    /// What an answer in time is worth to the caller.
    Utility = Range::number(Some(1.0), 0.0, 1e6);
    /// The best this many results; all when absent.
    TopN = Range::whole(None, 1.0, 1e6);
}

// Each true-or-false field's value when absent ([`Switch`]).
field_types! {
    Switch, DEFAULT: bool;
    /// Morph's extension (TEI's on /embed): cut inputs longer than the longest runtime instead
    /// of refusing them.
    Truncate = false;
    /// Unit-length vectors.
    Normalize = true;
    /// The tokenizer's special tokens around each input, as the model sees it.
    AddSpecialTokens = true;
    /// Leave the special tokens out of the text.
    SkipSpecialTokens = true;
    /// Server-sent events, ending with `data: [DONE]`.
    Stream = false;
    /// The classifier's logits instead of its scores (softmax, or sigmoid for one output).
    RawScores = false;
    /// Each answer carries its text.
    ReturnText = false;
    /// Each result carries its document.
    ReturnDocuments = false;
    /// A last chunk with the call's token counts.
    IncludeUsage = false;
}

/// `POST /v1/embeddings` (OpenAI).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EmbeddingsRequest {
    #[schema(required = true)]
    pub input: Option<Inputs>,
    #[schema(value_type = Option<String>)]
    pub model: Option<Text>,
    /// `float` (default) or `base64` (little-endian f32s, what the OpenAI SDK asks for).
    #[schema(value_type = Option<String>)]
    pub encoding_format: Option<Text>,
    /// The vector's size: only the model's own (its vectors were not trained to be cut).
    #[schema(value_type = Option<u32>)]
    pub dimensions: Option<Number>,
    /// The caller's end user, written to the call's log line.
    #[schema(value_type = Option<String>)]
    pub user: Option<Text>,
    #[schema(schema_with = switch::<Truncate>)]
    pub truncate: Option<Flag>,
}

/// `POST /embed` (text-embeddings-inference).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EmbedRequest {
    #[schema(required = true)]
    pub inputs: Option<Inputs>,
    #[schema(schema_with = switch::<Normalize>)]
    pub normalize: Option<Flag>,
    #[schema(schema_with = switch::<Truncate>)]
    pub truncate: Option<Flag>,
}

/// `POST /v1/classify`: inputs for one of the served tasks, with the service class a policy may
/// weigh.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ClassifyRequest {
    #[schema(value_type = Option<String>, required = true)]
    pub task: Option<Text>,
    #[schema(required = true)]
    pub input: Option<Texts>,
    #[schema(schema_with = bounded::<SloMs>)]
    pub slo_ms: Option<Number>,
    #[schema(schema_with = bounded::<Utility>)]
    pub utility: Option<Number>,
    #[schema(schema_with = switch::<Truncate>)]
    pub truncate: Option<Flag>,
}

/// `POST /predict` (text-embeddings-inference's shape): on a sequence-classification model, its
/// own labels for texts or pairs; on the encoder OTAS's heads read, as [`ClassifyRequest`] with
/// `inputs`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PredictRequest {
    /// One of Morph's task heads (only where the server carries them).
    #[schema(value_type = Option<String>)]
    pub task: Option<Text>,
    /// A string, a pair `[text, text]`, or a batch of `[text]` and `[text, text]` (an array of
    /// other lengths is a batch of texts for a task head).
    #[schema(required = true, value_type = Object)]
    pub inputs: Option<PredictInputs>,
    #[schema(schema_with = bounded::<SloMs>)]
    pub slo_ms: Option<Number>,
    #[schema(schema_with = bounded::<Utility>)]
    pub utility: Option<Number>,
    #[schema(schema_with = switch::<Truncate>)]
    pub truncate: Option<Flag>,
    #[schema(schema_with = switch::<RawScores>)]
    pub raw_scores: Option<Flag>,
    /// TEI's side to cut from: only `"right"` (the end).
    #[schema(value_type = Option<String>)]
    pub truncation_direction: Option<Text>,
    /// The Hugging Face inference API's parameters (what `InferenceClient.text_classification` sends).
    pub parameters: Option<PredictParameters>,
}

/// `/predict`'s `parameters`, as Hugging Face's text-classification task names them.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PredictParameters {
    /// The best this many labels; all when absent.
    #[schema(schema_with = bounded::<TopN>)]
    pub top_k: Option<Number>,
    /// `softmax`, `sigmoid` or `none` (the logits); the head's own when absent.
    #[schema(value_type = Option<String>)]
    pub function_to_apply: Option<Text>,
}

/// `POST /rerank` (text-embeddings-inference): the texts ranked by their relevance to the query.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RerankRequest {
    #[schema(value_type = Option<String>, required = true)]
    pub query: Option<Text>,
    #[schema(required = true)]
    pub texts: Option<Texts>,
    #[schema(schema_with = switch::<Truncate>)]
    pub truncate: Option<Flag>,
    #[schema(schema_with = switch::<RawScores>)]
    pub raw_scores: Option<Flag>,
    #[schema(schema_with = switch::<ReturnText>)]
    pub return_text: Option<Flag>,
    /// TEI's side to cut from: only `"right"` (the end).
    #[schema(value_type = Option<String>)]
    pub truncation_direction: Option<Text>,
}

/// `POST /v1/rerank` (Cohere's and Jina's shape, which LiteLLM and llama-index send).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DocumentRerankRequest {
    #[schema(value_type = Option<String>)]
    pub model: Option<Text>,
    #[schema(value_type = Option<String>, required = true)]
    pub query: Option<Text>,
    /// Strings, or `{"text": string}` objects.
    #[schema(value_type = Vec<Object>, required = true)]
    pub documents: Option<Vec<Document>>,
    #[schema(schema_with = bounded::<TopN>)]
    pub top_n: Option<Number>,
    #[schema(schema_with = switch::<ReturnDocuments>)]
    pub return_documents: Option<Flag>,
    #[schema(schema_with = switch::<Truncate>)]
    pub truncate: Option<Flag>,
}

/// `POST /similarity` (text-embeddings-inference): the cosine of each sentence's vector with the
/// source sentence's.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SimilarityRequest {
    #[schema(required = true)]
    pub inputs: Option<SimilarityInputs>,
    #[schema(schema_with = switch::<Truncate>)]
    pub truncate: Option<Flag>,
    /// TEI's side to cut from: only `"right"` (the end).
    #[schema(value_type = Option<String>)]
    pub truncation_direction: Option<Text>,
    /// The same settings as the Hugging Face inference API sends them (what
    /// `InferenceClient.sentence_similarity` sends).
    pub parameters: Option<SimilarityParameters>,
}

/// `/similarity`'s `parameters`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SimilarityParameters {
    #[schema(schema_with = switch::<Truncate>)]
    pub truncate: Option<Flag>,
    #[schema(value_type = Option<String>)]
    pub truncation_direction: Option<Text>,
    /// A sentence-transformers prompt's name: only null (the models served have none).
    #[schema(value_type = Option<String>)]
    pub prompt_name: Option<Text>,
}

/// `/similarity`'s `inputs`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SimilarityInputs {
    #[schema(value_type = Option<String>, required = true)]
    pub source_sentence: Option<Text>,
    #[schema(required = true)]
    pub sentences: Option<Texts>,
}

/// `POST /vertex` (Vertex AI's prediction shape, as TEI serves it): each instance is a body for
/// `POST /`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VertexRequest {
    #[schema(value_type = Vec<Object>, required = true)]
    pub instances: Option<Vec<serde_json::Value>>,
}

/// `POST /v1/completions` (`prompt`) and `POST /v1/chat/completions` (`messages`), OpenAI.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GenerationRequest {
    /// A prompt, or several (a choice for each, `n` per prompt).
    pub prompt: Option<Texts>,
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
    #[schema(schema_with = bounded::<Seed>)]
    pub seed: Option<Number>,
    #[schema(schema_with = bounded::<Choices>)]
    pub n: Option<Number>,
    /// Up to 4 strings; the text ends before the first to appear.
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

/// Fields only `/v1/completions` takes; a chat call that sends one is refused by name.
pub const COMPLETION_ONLY: [&str; 1] = ["prompt"];
/// Fields only `/v1/chat/completions` takes; a completions call that sends one is refused by name.
pub const CHAT_ONLY: [&str; 5] = ["messages", "top_logprobs", "tools", "tool_choice", "parallel_tool_calls"];

/// `/v1/chat/completions`' body as the OpenAPI document shows it: [`GenerationRequest`] without
/// [`COMPLETION_ONLY`], `logprobs` true or false (alternatives in `top_logprobs`).
#[derive(Debug)]
pub struct ChatRequest;

impl PartialSchema for ChatRequest {
    fn schema() -> RefOr<Schema> {
        let logprobs = ObjectBuilder::new().schema_type(Type::Boolean).default(Some(false.into()));
        generation_route(&COMPLETION_ONLY, "messages", logprobs.build(), "OpenAI's chat completions.")
    }
}

impl ToSchema for ChatRequest {
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        GenerationRequest::schemas(schemas);
    }
}

/// `/v1/completions`' body as the OpenAPI document shows it: [`GenerationRequest`] without
/// [`CHAT_ONLY`], `logprobs` the number of alternatives per token.
#[derive(Debug)]
pub struct CompletionRequest;

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
    body.required = vec![prompt.to_string()];
    body.description = Some(about.to_string());
    RefOr::T(Schema::Object(body))
}

/// `POST /v1/responses` (OpenAI's Responses API), for text: what it honours; every other field
/// (tools, reasoning, `previous_response_id`, …) is refused by name.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResponsesRequest {
    /// A string (the user's message), or messages `{role, content}` (`type: "message"` optional),
    /// content a string or parts of type `input_text`/`output_text`.
    #[schema(schema_with = response_input, required = true)]
    pub input: Option<serde_json::Value>,
    #[schema(value_type = Option<String>)]
    pub model: Option<Text>,
    /// A system message put before the input.
    #[schema(value_type = Option<String>)]
    pub instructions: Option<Text>,
    #[schema(schema_with = bounded::<MaxTokens>)]
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
pub struct StreamOptions {
    #[schema(schema_with = switch::<IncludeUsage>)]
    pub include_usage: Option<Flag>,
}

/// `POST /tokenize` (text-embeddings-inference).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenizeRequest {
    #[schema(required = true)]
    pub inputs: Option<Texts>,
    #[schema(schema_with = switch::<AddSpecialTokens>)]
    pub add_special_tokens: Option<Flag>,
}

/// `POST /decode` (text-embeddings-inference).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DecodeRequest {
    /// An array of token ids, or an array of them.
    #[schema(required = true)]
    pub ids: Option<Inputs>,
    #[schema(schema_with = switch::<SkipSpecialTokens>)]
    pub skip_special_tokens: Option<Flag>,
}
