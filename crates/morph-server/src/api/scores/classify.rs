//! OTAS's tasks on the served encoder, in two shapes.
//!
//! `POST /v1/classify` names a `task` (one of the heads the server carries), an `input` (string
//! or array), optionally `slo_ms` (the answer's deadline, from arrival) and `utility` (what an
//! answer in time is worth to the caller; default 1). Each input is scheduled with that service
//! class, so a policy that weighs them (`otas`) chooses the batch's token plan; the answer names
//! the label, every class's score and the plan.
//!
//! `POST /predict` is text-embeddings-inference's shape. On a sequence-classification checkpoint
//! it classifies `inputs` (a text, a pair, or a batch of them) with the model's own labels; on
//! the encoder OTAS's heads read, `inputs` (string or array) by the named `task`. It answers
//! `[{"label", "score"}]` per input, best first (a list of them for a batch).
//!
//! A task the server lacks is a 404 naming the tasks served; a deadline that cannot be met is a
//! 504 naming it.

use axum::Json;
use axum::extract::State;

use super::answers::{Classification, ClassifyResponse, LabelScore, PredictResponse};
use super::requests::{ClassifyRequest, PredictRequest};
use super::validate::PredictCall;
use crate::api::AppState;
use crate::api::answers::Usage;
use crate::api::opening::{Checked, Encoder};
use crate::error::CallError;

/// Classification by a served task, under the call's deadline and utility (OTAS).
#[utoipa::path(post, path = "/v1/classify", tag = "classification", request_body = ClassifyRequest,
    responses((status = 200, description = "Per input, its label, every class's score and the token \
        plan its batch ran.", body = ClassifyResponse)))]
pub(crate) async fn classify(
    State(state): State<AppState>,
    Encoder(embedder): Encoder,
    Checked(call): Checked<ClassifyRequest>,
) -> Result<Json<ClassifyResponse>, CallError> {
    let task = call.task.clone();
    let out = embedder.classify(call).await?;
    let data = out
        .answers
        .into_iter()
        .enumerate()
        .map(|(index, (answer, plan))| Classification {
            index,
            label: answer.label,
            scores: answer.scores.into_iter().collect(),
            plan,
        })
        .collect();
    Ok(Json(ClassifyResponse {
        object: "list",
        task,
        model: state.model.name().to_string(),
        data,
        usage: Usage::of(out.tokens),
    }))
}

/// text-embeddings-inference's classification: every class's score, best first. On a
/// sequence-classification checkpoint its own labels for texts or pairs; on the encoder OTAS's
/// heads read, the named `task`'s.
#[utoipa::path(post, path = "/predict", tag = "classification", request_body = PredictRequest,
    responses((status = 200, description = "Per input, the classes best first (one list for a \
        single input).", body = PredictResponse)))]
pub(crate) async fn predict(
    Encoder(embedder): Encoder,
    Checked(call): Checked<PredictRequest>,
) -> Result<Json<PredictResponse>, CallError> {
    let (ranked, single, top_k) = match call {
        PredictCall::ByTask { call, single } => {
            let out = embedder.classify(call).await?;
            (out.answers.into_iter().map(|(answer, _)| answer.scores).collect(), single, None)
        }
        PredictCall::ByHead(call) => {
            let out = embedder.score(call.score).await?;
            let labelled = out.scores.into_iter().map(|s| out.labels.iter().cloned().zip(s).collect());
            (labelled.collect::<Vec<Vec<(String, f32)>>>(), call.single, call.top_k)
        }
    };
    let mut ranked: Vec<Vec<LabelScore>> = ranked
        .into_iter()
        .map(|mut scores| {
            scores.sort_by(|a, b| b.1.total_cmp(&a.1));
            scores.truncate(top_k.unwrap_or(scores.len()));
            scores.into_iter().map(|(label, score)| LabelScore { label, score }).collect()
        })
        .collect();
    Ok(Json(match single {
        true => PredictResponse::One(ranked.remove(0)),
        false => PredictResponse::Many(ranked),
    }))
}
