//! A sequence the live driver holds for its caller while the ledger places it: its input and
//! where its answer goes.

use std::time::Instant;

use morph_core::{DropReason, TokenPlan};
use morph_decoder::{GenEvent, GenRequest};
use morph_engine::EngineError;
use tokio::sync::oneshot;

/// What an encoder sequence's caller gets back.
pub type SeqResult = Result<Pooled, SeqError>;

/// An encoder sequence's output and the token plan its batch ran under.
#[derive(Debug, Clone, PartialEq)]
pub struct Pooled {
    pub vector: Vec<f32>,
    pub plan: TokenPlan,
}

#[derive(Debug, Clone, PartialEq)]
pub enum SeqError {
    Dropped(DropReason),
    Engine(EngineError),
}

/// The next input of an encoder sequence: its tokens, or the hidden states its last stage
/// handed on (kept while its batch runs, in case it must run again).
#[derive(Debug)]
pub(crate) enum Input {
    Tokens(Vec<u32>),
    Hidden(Vec<f32>),
}

#[derive(Debug)]
pub(crate) enum Job {
    Embed {
        input: Input,
        reply: oneshot::Sender<SeqResult>,
        enqueued: Instant,
        /// The plan of the batch it last started in.
        plan: TokenPlan,
        /// The call's span (its request id): the batch it runs in follows from it.
        span: tracing::Span,
    },
    /// `None` once handed to a decoder thread (which answers its caller itself).
    Generate { request: Option<GenRequest>, enqueued: Instant },
}

impl Job {
    /// Answers a job that will not run (given up on, or refused by the ledger).
    pub(crate) fn fail(self, error: SeqError) {
        match self {
            Job::Embed { reply, .. } => {
                let _ = reply.send(Err(error));
            }
            Job::Generate { request: Some(g), .. } => {
                let event = match error {
                    SeqError::Dropped(reason) => GenEvent::Dropped(reason),
                    SeqError::Engine(e) => GenEvent::Failed(e),
                };
                let _ = g.events.send(event);
            }
            Job::Generate { request: None, .. } => {}
        }
    }
}
