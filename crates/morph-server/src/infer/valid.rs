//! A call's checked values: what the HTTP edge hands the work behind it, once every field is
//! known to be present and in bounds.

use morph_core::TaskId;
use morph_core::time::ms_to_nanos;
use morph_decoder::{Decoding, LogitBias, Message, SamplingParams, Tool};

use crate::driver::CallClass;

/// An embedding call: its inputs (from `field`), what to do with long ones, whether to normalise.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidEmbed {
    pub inputs: EmbedInputs,
    pub field: &'static str,
    pub truncate: Truncation,
    pub normalize: bool,
}

/// What a call does with an input longer than the longest input served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Truncation {
    /// Refuses it (413).
    Refuse,
    /// Cuts its end, its closing token kept (TEI's `truncation_direction: "right"`).
    End,
    /// Cuts its start, its opening token kept (`"left"`).
    Start,
}

impl Truncation {
    /// Cuts the end where `truncate`, else refuses.
    pub fn end_if(truncate: bool) -> Self {
        if truncate { Self::End } else { Self::Refuse }
    }
}

/// What an embedding call embeds: texts, or token ids (used as given, with the special tokens
/// the caller put in: `/tokenize`'s answer embeds as its text does).
#[derive(Debug, Clone, PartialEq)]
pub enum EmbedInputs {
    Texts(Vec<String>),
    Tokens(Vec<Vec<u32>>),
    /// Texts or pairs of them, for a sequence-classification model.
    Sequences(Vec<Sequence>),
}

/// A classifier's input: a text, or a pair (a query and a document for a reranker).
#[derive(Debug, Clone, PartialEq)]
pub struct Sequence {
    pub text: String,
    pub pair: Option<String>,
}

impl EmbedInputs {
    pub fn len(&self) -> usize {
        match self {
            EmbedInputs::Texts(texts) => texts.len(),
            EmbedInputs::Tokens(ids) => ids.len(),
            EmbedInputs::Sequences(sequences) => sequences.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
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

/// What a generation call asks to be continued: a prompt (text, or token ids as given), or a
/// chat's messages.
#[derive(Debug, Clone, PartialEq)]
pub enum Prompt {
    Text(String),
    Tokens(Vec<u32>),
    Chat(Vec<Message>),
}

impl Prompt {
    /// The field a problem with the prompt is reported on.
    pub fn field(&self) -> &'static str {
        match self {
            Prompt::Text(_) | Prompt::Tokens(_) => "prompt",
            Prompt::Chat(_) => "messages",
        }
    }
}

/// A generation call: its prompts, how many tokens each may produce, how they are sampled and
/// where they stop; `n` choices per prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidGeneration {
    pub prompts: Vec<Prompt>,
    pub n: u32,
    pub max_tokens: u32,
    /// Whether the call named `max_tokens` (a prefill-stage server answers one token only).
    pub max_tokens_given: bool,
    /// The first choice's; choice `i` of a prompt draws with `seed + i`.
    pub sampling: SamplingParams,
    pub stop: Vec<String>,
    /// Added to tokens' logits before each draw.
    pub logit_bias: LogitBias,
    /// Each token's log-probability, with this many of the most likely.
    pub logprobs: Option<u8>,
    /// Each choice's text starts with its prompt's (completions' `echo`); with `logprobs`, the
    /// prompt's tokens are scored too.
    pub echo: bool,
    pub stream: bool,
    /// A stream's last chunk carries the call's token counts.
    pub include_usage: bool,
    /// What the answer must be: any text, JSON of a schema, or calls of the tools offered.
    pub output: Output,
}

/// The shape a generation's answer must take.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Output {
    #[default]
    Text,
    /// One JSON value valid against this schema (`response_format`, the Responses API's
    /// `text.format`), given at `field`.
    Json { schema: serde_json::Value, field: &'static str },
    /// Tools offered to the model (`tools`, `tool_choice`, `parallel_tool_calls`).
    Tools(ToolUse),
}

impl Output {
    pub fn offers_tools(&self) -> bool {
        matches!(self, Output::Tools(_))
    }
}

/// The tools a chat offers and whether the model must call one.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolUse {
    pub tools: Vec<Tool>,
    pub choice: ToolChoice,
    /// Several calls may be made in one answer.
    pub parallel: bool,
}

/// `tool_choice`: whether the answer is calls (and of which tool) or the model's choice.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolChoice {
    /// Text or calls, as the model writes; calls are read out of its text.
    Auto,
    /// Calls only, of any tool offered: sampling is constrained to them.
    Required,
    /// Calls of this tool only.
    Named(String),
}

impl ToolUse {
    /// The tools a call may name: all, or the one `tool_choice` names.
    pub fn callable(&self) -> Vec<Tool> {
        match &self.choice {
            ToolChoice::Named(name) => self.tools.iter().filter(|t| &t.name == name).cloned().collect(),
            ToolChoice::Auto | ToolChoice::Required => self.tools.clone(),
        }
    }
}

impl ValidGeneration {
    /// The tools offered in the prompt (none unless the call offers some).
    pub fn tools(&self) -> &[Tool] {
        match &self.output {
            Output::Tools(used) => &used.tools,
            Output::Text | Output::Json { .. } => &[],
        }
    }

    /// The choices to generate, in the answer's order (OpenAI's: prompt by prompt, `n` each):
    /// each one's prompt (by index) and decoding (its grammar, compiled for the model's
    /// vocabulary, is the generator's to set).
    pub fn choices(&self) -> impl Iterator<Item = (usize, Decoding)> + '_ {
        (0..self.prompts.len()).flat_map(move |prompt| {
            (0..self.n as u64).map(move |i| {
                let sampling = SamplingParams { seed: self.sampling.seed.wrapping_add(i), ..self.sampling };
                let decoding = Decoding {
                    sampling,
                    stop: self.stop.clone(),
                    logprobs: self.logprobs,
                    score_prompt: self.echo && self.logprobs.is_some(),
                    grammar: None,
                    logit_bias: self.logit_bias.clone(),
                };
                (prompt, decoding)
            })
        })
    }
}

/// The ways a generation call is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GenerationFormat {
    Completion,
    Chat,
}

impl GenerationFormat {
    pub fn route(self) -> &'static str {
        match self {
            GenerationFormat::Completion => "/v1/completions",
            GenerationFormat::Chat => "/v1/chat/completions",
        }
    }
}
