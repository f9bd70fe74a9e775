//! The generation path: the prompt rendered and tokenized, checked against what a sequence
//! holds, its output length predicted (SSJF), and handed to the driver; the caller then reads its
//! events. A decoder served in prefill stages answers its one next token instead ([`super::prefill`]).

use std::sync::Arc;

use morph_decoder::{GenEvent, GgufTokenizer, Llama, Message, chatml_prompt};
use morph_encoder::predictor::predictor_text;
use morph_engine::EngineError;
use tokio::sync::mpsc::UnboundedReceiver;

use super::valid::{Prompt, ValidGeneration};
use crate::driver::{Claim, Driver};
use crate::error::ApiError;
use crate::prediction::Predictions;

/// A server's decoder: what generates its completions.
#[derive(Debug)]
pub struct Generator {
    pub(super) driver: Arc<Driver>,
    /// The decoder's shape and tokenizer.
    pub(super) model: Arc<(Llama, GgufTokenizer)>,
    /// Predicted output lengths for the scheduler (with a predictor).
    predictions: Option<Arc<Predictions>>,
    /// A decoder cut into this many prefill stages answers one token (0: a whole decoder).
    prefill_stages: u16,
    /// The longest sequence any runtime holds.
    max_input_len: u32,
}

/// A generation under way: the caller's claim, its events and the first of them, and where its
/// true output length is remembered when it finishes.
#[derive(Debug)]
pub struct Generation {
    pub claim: Claim,
    pub events: UnboundedReceiver<GenEvent>,
    pub first: GenEvent,
    pub truth: Option<Truth>,
}

/// A generation's predictor input, to cache its true output length under (SSJF §6).
#[derive(Debug)]
pub struct Truth {
    predictions: Arc<Predictions>,
    text: String,
}

impl Truth {
    /// Remembers the length, once: the caller's slot is emptied.
    pub fn learn(truth: &mut Option<Truth>, completion_tokens: usize) {
        if let Some(t) = truth.take() {
            t.predictions.learn(t.text, completion_tokens as u32);
        }
    }
}

impl Generator {
    pub fn new(
        driver: Arc<Driver>,
        model: Arc<(Llama, GgufTokenizer)>,
        predictions: Option<Arc<Predictions>>,
        prefill_stages: u16,
        max_input_len: u32,
    ) -> Self {
        Self { driver, model, predictions, prefill_stages, max_input_len }
    }

    /// What `/info` says of the length predictor, if there is one.
    pub fn predictor(&self) -> Option<serde_json::Value> {
        self.predictions.as_ref().map(|p| p.describe())
    }

    /// Tokens the decoder's context holds: the most `max_tokens` may be.
    pub fn context(&self) -> usize {
        self.model.0.config.context
    }

    /// Starts the call's generation and waits for its first event: a refusal or failure then is
    /// the call's error status.
    pub async fn start(&self, call: ValidGeneration) -> Result<Generation, ApiError> {
        // The predictor's input is built only when there is a predictor to read it.
        let predictor_input = self.predictions.as_ref().map(|_| match &call.prompt {
            Prompt::Text(prompt) => prompt.clone(),
            Prompt::Chat(messages) => chat_predictor_input(messages),
        });
        let prompt = self.tokenize(&call).await?;
        if self.prefill_stages > 0 {
            return self.next_token(&call, prompt).await;
        }
        let (truth, predicted) = match (&self.predictions, predictor_input) {
            (Some(predictions), Some(text)) => {
                let predicted = predictions.predict(text.clone()).await;
                (Some(Truth { predictions: predictions.clone(), text }), predicted)
            }
            _ => (None, None),
        };
        let generation = morph_core::Generation { max_tokens: call.max_tokens, predicted };
        let (claim, mut events) = self.driver.generate(prompt, generation, call.sampling);
        match events.recv().await {
            Some(GenEvent::Dropped(r)) => Err(ApiError::generation_dropped(r)),
            Some(GenEvent::Failed(e)) => Err(ApiError::Engine(e)),
            None => Err(ApiError::Engine(EngineError::Stopped)),
            Some(first) => Ok(Generation { claim, events, first, truth }),
        }
    }

    /// The prompt's token ids; with `max_tokens` they must fit in what a sequence holds (a whole
    /// decoder's KV cache is its runtime's length, a prefill the context; a prompt alone too long
    /// is the policy's 413).
    async fn tokenize(&self, call: &ValidGeneration) -> Result<Vec<u32>, ApiError> {
        let context = self.context();
        let holds = match self.prefill_stages {
            0 => context.min(self.max_input_len as usize),
            _ => context,
        };
        let text = match &call.prompt {
            Prompt::Text(prompt) => prompt.clone(),
            Prompt::Chat(messages) => chatml_prompt(messages),
        };
        let field = call.prompt.field();
        let model = self.model.clone();
        let prompt = tokio::task::spawn_blocking(move || model.1.encode(&text))
            .await
            .map_err(|e| ApiError::Engine(EngineError::Tokenize(e.to_string())))?
            .map_err(|e| match e {
                EngineError::Unrepresentable(message) => ApiError::validation(field, message),
                e => ApiError::Engine(e),
            })?;
        if prompt.len() < holds && prompt.len() + call.max_tokens as usize > holds {
            let message = format!(
                "the prompt's {} tokens plus max_tokens exceed the {holds} tokens a sequence holds here (the model's context of {context}, or the runtime's length: --runtime dynamic:LENxN)",
                prompt.len()
            );
            return Err(ApiError::validation("max_tokens", message));
        }
        Ok(prompt)
    }
}

/// What the length predictor reads of a chat: its earlier turns and last prompt (§3.1), the
/// system message left out.
fn chat_predictor_input(messages: &[Message]) -> String {
    let turns: Vec<&Message> = messages.iter().filter(|m| m.role != "system").collect();
    match turns.split_last() {
        Some((last, history)) => predictor_text(history.iter().map(|m| m.content.as_str()), &last.content),
        None => String::new(),
    }
}
