//! The opening every model route shares, as extractors: the model the route needs ([`Encoder`],
//! [`Decoder`]), then the body read and checked ([`Checked`]). Extracted in that order, a call to
//! a server of the other kind is told so before its body is read. (The drain's deadline and the
//! API key wrap every keyed route in [`super::routes`].)

use std::sync::Arc;

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;

use super::{AppState, Body, parse};
use crate::error::CallError;
use crate::infer::{Embedder, Generator};

/// A request type as a route checks it, once [`parse`] has read it.
pub(crate) trait Check: DeserializeOwned {
    /// What the checked call asks for.
    type Valid;
    /// The request checked against what this server serves and allows.
    fn check(self, state: &AppState) -> Result<Self::Valid, CallError>;
}

/// A call's body read as `R` and checked: what is missing, empty, too many or out of bounds is
/// refused with a message that names the field.
pub(crate) struct Checked<R: Check>(pub R::Valid);

impl<R: Check> Checked<R> {
    /// `body` read and checked, for a route that answers through another's handler.
    pub(crate) fn of(body: &[u8], state: &AppState) -> Result<Self, CallError> {
        parse::<R>(body)?.check(state).map(Checked)
    }
}

impl<R: Check> FromRequest<AppState> for Checked<R> {
    type Rejection = Response;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        let Body(body) = Body::from_request(request, state).await?;
        Self::of(&body, state).map_err(IntoResponse::into_response)
    }
}

/// The served encoder, or a 404 saying what this server serves instead.
pub(crate) struct Encoder(pub Arc<Embedder>);

impl FromRequestParts<AppState> for Encoder {
    type Rejection = CallError;

    async fn from_request_parts(_: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        state.embedder().cloned().map(Encoder)
    }
}

/// The served decoder, or a 404 saying what this server serves instead.
pub(crate) struct Decoder(pub Arc<Generator>);

impl FromRequestParts<AppState> for Decoder {
    type Rejection = CallError;

    async fn from_request_parts(_: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        state.generator().cloned().map(Decoder)
    }
}
