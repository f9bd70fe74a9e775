//! Why a call failed, free of HTTP: the work behind the edge (`infer/`), the drain and the
//! edge itself return it; the edge alone maps it to a status code and a body
//! (`api/error_response.rs`).

use morph_core::DropReason;
use morph_engine::EngineError;

use crate::metrics::FailureKind;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CallError {
    #[error("malformed JSON body: {0}")]
    MalformedJson(String),
    #[error("the request body is larger than the limit of {limit} bytes")]
    BodyTooLarge { limit: usize },
    #[error("the request body did not arrive within {seconds} s")]
    BodyTimeout { seconds: f64 },
    /// A field is missing, of the wrong type or out of bounds; the message names the field.
    #[error("{field}: {message}")]
    Validation { field: String, message: String },
    #[error(
        "{field} has {len} tokens, more than this server takes ({max_len}: the longest runtime's \
         length or the model's max_seq_length, whichever is less); send \"truncate\": true to \
         cut it"
    )]
    TooLong { field: String, len: usize, max_len: u32 },
    /// `max_len` is the most prompt tokens: the runtime's length less the answer's first token.
    #[error(
        "the prompt has {len} tokens, more than the decoder takes ({max_len}: its runtime's \
         length less one token for the answer)"
    )]
    PromptTooLong { len: u32, max_len: u32 },
    #[error("model '{asked}' is not served here; this server serves {served}")]
    UnknownModel { asked: String, served: String },
    #[error("task '{asked}' is not served here; the tasks served: {served}")]
    UnknownTask { asked: String, served: String },
    #[error("overloaded: {0}")]
    Overloaded(DropReason),
    #[error("given up: {0}")]
    DeadlineUnreachable(DropReason),
    #[error("missing or wrong API key: send the header 'Authorization: Bearer <key>'")]
    Unauthorized,
    #[error("{0}")]
    Engine(EngineError),
    #[error("this server serves {served}")]
    WrongEndpoint { served: &'static str },
    #[error("the server is shutting down and its drain deadline passed before this call finished")]
    ShuttingDown,
    /// The server listens but cannot serve yet; the message says what its start is doing.
    #[error("the server is starting ({0}); /ready answers 200 once it serves")]
    Starting(String),
    /// A route this server does not have; the message says why or lists the routes it has.
    #[error("{0}")]
    NotFound(String),
    /// A route that does not take the method asked.
    #[error("{path} does not take {method}; {allowed}")]
    MethodNotAllowed { method: String, path: String, allowed: String },
}

impl CallError {
    pub fn validation(field: impl Into<String>, message: impl Into<String>) -> Self {
        CallError::Validation { field: field.into(), message: message.into() }
    }

    /// A model name the server does not answer to, with the names it does.
    pub fn unknown_model(asked: String, names: &[String]) -> Self {
        let served = names.iter().map(|n| format!("'{n}'")).collect::<Vec<_>>().join(" or ");
        CallError::UnknownModel { asked, served }
    }

    pub fn kind(&self) -> FailureKind {
        match self {
            CallError::MalformedJson(_) | CallError::Validation { .. } => FailureKind::Validation,
            CallError::BodyTooLarge { .. } => FailureKind::BodyTooLarge,
            CallError::BodyTimeout { .. } => FailureKind::BodyTimeout,
            CallError::TooLong { .. } | CallError::PromptTooLong { .. } => FailureKind::TooLong,
            CallError::UnknownModel { .. } => FailureKind::UnknownModel,
            CallError::UnknownTask { .. } => FailureKind::UnknownTask,
            CallError::Overloaded(_) => FailureKind::Overloaded,
            CallError::DeadlineUnreachable(_) => FailureKind::Deadline,
            CallError::Unauthorized => FailureKind::Unauthorized,
            CallError::Engine(_) => FailureKind::Engine,
            CallError::WrongEndpoint { .. } => FailureKind::WrongEndpoint,
            CallError::ShuttingDown => FailureKind::ShuttingDown,
            CallError::Starting(_) => FailureKind::Starting,
            CallError::NotFound(_) => FailureKind::NotFound,
            CallError::MethodNotAllowed { .. } => FailureKind::MethodNotAllowed,
        }
    }
}

impl CallError {
    /// A generation the policy gave up on: as any other, but a prompt no instance takes is
    /// named as a prompt (generation has no `truncate`).
    pub fn generation_dropped(reason: DropReason) -> Self {
        match reason {
            DropReason::NoRuntimeFits { len, max_len } => {
                CallError::PromptTooLong { len, max_len: max_len.saturating_sub(1) }
            }
            other => other.into(),
        }
    }
}

impl From<DropReason> for CallError {
    fn from(reason: DropReason) -> Self {
        match reason {
            DropReason::NoRuntimeFits { len, max_len } => {
                CallError::TooLong { field: "input".into(), len: len as usize, max_len }
            }
            DropReason::DeadlineUnreachable { .. } => CallError::DeadlineUnreachable(reason),
            DropReason::QueueFull { .. } => CallError::Overloaded(reason),
        }
    }
}
