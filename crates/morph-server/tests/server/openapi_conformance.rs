//! The OpenAPI document is true to the server that serves it. Schemathesis reads `/openapi.json`
//! and sends what it allows and what it does not, each route in turn (`clients/openapi_conformance.py`):
//! a request the document does not allow must be refused, every answer must match the document's
//! status codes, content types and schemas, and no answer may be a 5xx. On an embedding server, a
//! request the document allows must also be answered (or 404 where the server serves another kind
//! of model, or 429). On a generation server that last check is left out: chat's rules between
//! fields (a tool message's `tool_call_id`, a `tool_choice` among the `tools`, one of `max_tokens`
//! and `max_completion_tokens`) and the characters a model's vocabulary lacks are not in the
//! document, only in its descriptions and the 422's message. With a fixed seed, so a run is the
//! same requests every time. (A several-model server's document: morph-cli's `several_models.rs`.)

use crate::common;

use common::{candle, decoder, run_client, start};
use morph_core::RuntimeSpec;

/// Requests per route and kind (valid, invalid).
const EXAMPLES_PER_ROUTE: u32 = 25;

/// On a generation server, where a call may decode the whole context: fewer.
const GENERATION_EXAMPLES_PER_ROUTE: u32 = 10;

/// What schemathesis checks of every answer (its `--checks`).
const CHECKS: &str = "not_a_server_error,status_code_conformance,content_type_conformance,\
    response_schema_conformance,negative_data_rejection";

/// And that a request the document allows is not refused as invalid.
const ALLOWED_IS_ANSWERED: &str = "positive_data_acceptance";

/// Runs schemathesis against the server at `url` with `checks`; its report is the failure message.
async fn schemathesis(url: &str, checks: String, examples: u32) {
    let args = vec![url.to_string(), checks, examples.to_string()];
    run_client("openapi_conformance.py", args, "pip install schemathesis").await;
}

#[tokio::test]
async fn an_embedding_servers_document_is_what_it_answers() {
    let server = start(candle()).await;
    schemathesis(&server.url, format!("{CHECKS},{ALLOWED_IS_ANSWERED}"), EXAMPLES_PER_ROUTE).await;
    server.stop().await;
}

#[tokio::test]
async fn a_generation_servers_document_is_what_it_answers() {
    // A context of 128 tokens keeps each generated call short.
    let deployment = morph_server::Deployment {
        runtimes: vec![RuntimeSpec::dynamic(128, 2)],
        ..decoder("fcfs", serde_json::json!({}))
    };
    let server = start(deployment).await;
    schemathesis(&server.url, CHECKS.into(), GENERATION_EXAMPLES_PER_ROUTE).await;
    server.stop().await;
}
