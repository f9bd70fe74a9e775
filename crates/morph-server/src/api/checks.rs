//! Checks every route family shares: the `model` field, texts and token-id inputs, the end user,
//! and TEI's truncation side.

use super::bounds::Switch;
use super::field_types::Truncate;
use super::fields::{Flag, Inputs, Text, Texts};
use crate::error::CallError;
use crate::infer::{EmbedInputs, Truncation};

/// TEI's `truncate` and `truncation_direction` (`"right"`, the default, or `"left"`, in any
/// case) for a text on its own: what the call does with one longer than the longest served.
pub(super) fn truncation(truncate: Option<Flag>, direction: Option<Text>) -> Result<Truncation, CallError> {
    let cut_start = match direction {
        None => false,
        Some(Text(d)) if d.eq_ignore_ascii_case("right") => false,
        Some(Text(d)) if d.eq_ignore_ascii_case("left") => true,
        Some(_) => {
            return Err(CallError::validation("truncation_direction", "must be \"right\" or \"left\""));
        }
    };
    Ok(match (Truncate::read(truncate), cut_start) {
        (false, _) => Truncation::Refuse,
        (true, false) => Truncation::End,
        (true, true) => Truncation::Start,
    })
}

/// TEI's `truncation_direction` on the score routes (`/predict`, `/rerank`), whose inputs may be
/// pairs: Morph cuts the end (`"right"`), never the start (a pair's start is its query).
pub(super) fn right_side(direction: Option<Text>) -> Result<(), CallError> {
    match direction {
        None => Ok(()),
        Some(Text(d)) if d.eq_ignore_ascii_case("right") => Ok(()),
        Some(_) => Err(CallError::validation(
            "truncation_direction",
            "only \"right\" is supported: Morph cuts an input's end, keeping its closing token",
        )),
    }
}

/// `user`: the caller's end user, logged with the call (it changes nothing else).
pub(super) fn log_user(route: &str, user: Option<Text>) {
    if let Some(Text(user)) = user {
        tracing::debug!(route, user, "call");
    }
}

/// `model`, when given, must be the one served.
pub(super) fn served_model(model: Option<Text>, served: &[String]) -> Result<(), CallError> {
    match model {
        Some(Text(asked)) if !served.contains(&asked) => Err(CallError::unknown_model(asked, served)),
        _ => Ok(()),
    }
}

/// A string or a non-empty array of strings, none empty, at most `max_items` of them.
pub(super) fn texts(field: &str, value: Option<Texts>, max_items: usize) -> Result<Vec<String>, CallError> {
    match value {
        None => Err(CallError::validation(field, "is required")),
        Some(Texts::One(text)) if text.is_empty() => Err(CallError::validation(field, "must not be empty")),
        Some(Texts::One(text)) => Ok(vec![text]),
        Some(Texts::Many(items)) if items.is_empty() => {
            Err(CallError::validation(field, "must not be an empty array"))
        }
        Some(Texts::Many(items)) if items.len() > max_items => Err(CallError::validation(
            field,
            format!("has {} items; at most {max_items} per call", items.len()),
        )),
        Some(Texts::Many(items)) => match items.iter().position(String::is_empty) {
            Some(i) => Err(CallError::validation(format!("{field}[{i}]"), "must not be empty")),
            None => Ok(items),
        },
    }
}

/// `input`/`inputs` of an embedding call: texts as [`texts`], or token ids, each array non-empty.
pub(super) fn inputs(field: &str, value: Option<Inputs>, max_items: usize) -> Result<EmbedInputs, CallError> {
    let (ids, one) = match value {
        None => return Err(CallError::validation(field, "is required")),
        Some(Inputs::Texts(t)) => return texts(field, Some(t), max_items).map(EmbedInputs::Texts),
        Some(Inputs::Tokens { ids, one }) => (ids, one),
    };
    if ids.len() > max_items {
        return Err(CallError::validation(
            field,
            format!("has {} items; at most {max_items} per call", ids.len()),
        ));
    }
    match ids.iter().position(Vec::is_empty) {
        Some(i) if !one => Err(CallError::validation(format!("{field}[{i}]"), "must not be an empty array")),
        _ => Ok(EmbedInputs::Tokens(ids)),
    }
}
