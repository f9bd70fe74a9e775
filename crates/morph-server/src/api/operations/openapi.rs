//! `GET /openapi.json`: the OpenAPI 3.1 document of every route, generated (utoipa) from the
//! request and answer types and the handlers' `#[utoipa::path]` lines as the route list joins
//! them ([`crate::api::routes`]), so it lists exactly the routes served and the fields each
//! honours, with their defaults and bounds.

use std::sync::Arc;

use axum::{Extension, Json, Router};
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::openapi::{ContentBuilder, OpenApi as Document, RefOr, ResponseBuilder};
use utoipa::{Modify, OpenApi, PartialSchema, ToSchema};
use utoipa_scalar::{Scalar, Servable};

use crate::api::answers::ErrorResponse;
use crate::api::served_facts::{ServedFacts, state_served};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Morph",
        description = "Serving transformer models: OpenAI's and text-embeddings-inference's APIs. \
            Every field a route does not list is refused with a 422 naming it. docs/api.md says \
            what each field does."
    ),
    modifiers(&ApiKey),
    security((), ("bearer" = [])),
    tags(
        (name = "embeddings", description = "On a server started with --task embed."),
        (name = "classification", description = "On a sequence-classification model, or the encoder Morph's task heads read."),
        (name = "reranking", description = "On a cross-encoder (a sequence-classification model of one output)."),
        (name = "generation", description = "On a server started with --task generate."),
        (name = "operations", description = "Models, probes, metrics and this document.")
    )
)]
struct ApiDoc;

/// The document before the routes join it: its title, tags and security scheme.
pub(crate) fn base() -> Document {
    ApiDoc::openapi()
}

/// The document once every route has joined it: each route's error answer added, and what only
/// the running server knows stated ([`ServedFacts`]).
pub(crate) fn finish(mut document: Document, facts: &ServedFacts) -> Document {
    Errors.modify(&mut document);
    state_served(&mut document, facts);
    document
}

/// The OpenAPI document of every route.
#[utoipa::path(get, path = "/openapi.json", tag = "operations", security(()),
    responses((status = 200, description = "This document.", body = Object)))]
pub(super) async fn document(Extension(document): Extension<Arc<Document>>) -> Json<Document> {
    Json(Document::clone(&document))
}

/// `GET /docs`: `document` as a page to read and try the routes from (Scalar's viewer, whose
/// script the browser fetches from its CDN).
pub(crate) fn page<S: Clone + Send + Sync + 'static>(document: &Document) -> Router<S> {
    Scalar::with_url("/docs", document.clone()).into()
}

/// `--api-key`'s bearer scheme.
struct ApiKey;

impl Modify for ApiKey {
    fn modify(&self, doc: &mut Document) {
        let mut bearer = Http::new(HttpAuthScheme::Bearer);
        bearer.description =
            Some("With --api-key: every route but the probes, /metrics, this document and /docs.".into());
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme("bearer", SecurityScheme::Http(bearer));
    }
}

/// Every route's errors: one JSON shape, its message naming the field at fault.
struct Errors;

impl Modify for Errors {
    fn modify(&self, doc: &mut Document) {
        let content = ContentBuilder::new()
            .schema(Some(RefOr::Ref(utoipa::openapi::Ref::from_schema_name(ErrorResponse::name()))));
        let error = ResponseBuilder::new()
            .description("An error (OpenAI's shape); the message names the field at fault.")
            .content("application/json", content.build())
            .build();
        for item in doc.paths.paths.values_mut() {
            for operation in [&mut item.get, &mut item.post].into_iter().flatten() {
                operation.responses.responses.insert("default".into(), error.clone().into());
            }
        }
        let components = doc.components.get_or_insert_with(Default::default);
        let mut schemas = Vec::new();
        ErrorResponse::schemas(&mut schemas);
        components.schemas.insert(ErrorResponse::name().into(), ErrorResponse::schema());
        components.schemas.extend(schemas);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    fn document() -> Value {
        serde_json::to_value(crate::api::document()).expect("the document is JSON")
    }

    #[test]
    fn each_generation_route_lists_its_own_fields_with_their_defaults_and_bounds() {
        let doc = document();
        let schemas = &doc["components"]["schemas"];
        let chat = &schemas["ChatRequest"]["properties"];
        let completion = &schemas["CompletionRequest"]["properties"];
        assert!(chat["prompt"].is_null() && !chat["messages"].is_null() && !chat["top_logprobs"].is_null());
        assert!(completion["messages"].is_null() && completion["top_logprobs"].is_null());
        assert_eq!(schemas["ChatRequest"]["required"], json!(["messages"]));
        assert_eq!(schemas["CompletionRequest"]["required"], json!(["prompt"]));
        // An optional field may be null (read as absent); the required one may not.
        assert_eq!(chat["logprobs"]["type"], json!(["boolean", "null"]));
        assert_eq!(chat["messages"]["$ref"], "#/components/schemas/Messages");
        assert_eq!(completion["logprobs"]["maximum"], 5.0);
        let temperature = &chat["temperature"];
        assert_eq!(
            (temperature["default"].as_f64(), temperature["maximum"].as_f64()),
            (Some(1.0), Some(2.0))
        );
        assert_eq!(temperature["description"], "0 is greedy.");
        // No fixed default: the room the prompt leaves in the context.
        assert!(chat["max_tokens"].get("default").is_none(), "{}", chat["max_tokens"]);
        assert_eq!(schemas["EmbedRequest"]["properties"]["normalize"]["default"], true);
        // Every schema referred to is in the document.
        let text = doc.to_string();
        for name in text.split("#/components/schemas/").skip(1).map(|s| &s[..s.find('"').unwrap_or(0)]) {
            assert!(!schemas[name].is_null(), "{name} is referred to but not in the document");
        }
    }
}
