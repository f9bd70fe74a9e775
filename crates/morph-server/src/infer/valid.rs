//! A call's checked values: what the HTTP edge hands the work behind it, once every field is
//! known to be present and in bounds.

use morph_core::TaskId;
use morph_core::time::ms_to_nanos;
use morph_decoder::{Message, SamplingParams};

use crate::driver::CallClass;

/// An embedding call: its texts (from `field`), whether to cut long ones, whether to normalise.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidEmbed {
    pub texts: Vec<String>,
    pub field: &'static str,
    pub truncate: bool,
    pub normalize: bool,
}

/// A classification call: the task asked for, its texts and the service class they run in.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidClassify {
    pub task: String,
    pub texts: Vec<String>,
    pub field: &'static str,
    /// The answer's deadline, in ms from arrival.
    pub slo_ms: Option<f64>,
    pub utility: f64,
    pub truncate: bool,
}

impl ValidClassify {
    /// The service class of task `task` (by index) for every input of the call.
    pub fn class(&self, task: usize) -> CallClass {
        CallClass { task: TaskId(task as u16), slo: self.slo_ms.map(ms_to_nanos), utility: self.utility }
    }
}

/// What a generation call asks to be continued: a prompt, or a chat's messages.
#[derive(Debug, Clone, PartialEq)]
pub enum Prompt {
    Text(String),
    Chat(Vec<Message>),
}

impl Prompt {
    /// The field a problem with the prompt is reported on.
    pub fn field(&self) -> &'static str {
        match self {
            Prompt::Text(_) => "prompt",
            Prompt::Chat(_) => "messages",
        }
    }
}

/// A generation call: its prompt, how many tokens it may produce, how they are sampled.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidGeneration {
    pub prompt: Prompt,
    pub max_tokens: u32,
    /// Whether the call named `max_tokens` (a prefill-stage server answers one token only).
    pub max_tokens_given: bool,
    pub sampling: SamplingParams,
    pub stream: bool,
}

/// The ways a generation call is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GenerationFormat {
    Completion,
    Chat,
}
