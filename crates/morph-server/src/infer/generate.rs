//! The generation path: the prompt rendered and tokenized, checked against what a sequence
//! holds, its output length predicted (SSJF), and handed to the driver; the caller then reads its
//! events. A decoder served in prefill stages answers its one next token instead ([`super::prefill`]).

use std::sync::Arc;

use morph_decoder::pieces::turn_starts;
use morph_decoder::{
    CacheStats, DecoderModel, FinishReason, GenEvent, Grammar, GrammarSource, LlamaPromptCache, Message,
};
use morph_encoder::predictor::predictor_text;
use morph_engine::EngineError;
use tokio::sync::mpsc::UnboundedReceiver;

use super::valid::{Output, Prompt, ToolChoice, ValidGeneration};
use crate::driver::{CallRefused, Claim, Driver};
use crate::error::CallError;
use crate::prediction::Predictions;

/// A server's decoder: what generates its completions.
#[derive(Debug)]
pub struct Generator {
    pub(super) driver: Arc<Driver>,
    /// The decoder's shape and tokenizer.
    pub(super) model: Arc<DecoderModel>,
    /// Predicted output lengths for the scheduler (with a predictor).
    predictions: Option<Arc<Predictions>>,
    /// The decoder's prompt cache, which the scheduler weighs a prompt's prefill by.
    prompt_cache: Option<Arc<LlamaPromptCache>>,
    /// A decoder cut into this many prefill stages answers one token (0: a whole decoder).
    prefill_stages: u16,
    /// The longest sequence any runtime holds.
    max_input_len: u32,
}

/// A generation under way: the caller's claim, its events and the first of them, where its
/// true output length is remembered when it finishes, and its prompt where the call echoes it.
#[derive(Debug)]
pub struct StartedGeneration {
    pub claim: Claim,
    pub events: UnboundedReceiver<GenEvent>,
    pub first: GenEvent,
    pub truth: Option<Truth>,
    pub echo: Option<Echo>,
}

/// A prompt given back before its answer (completions' `echo`): its text and its tokens.
#[derive(Debug, Clone)]
pub struct Echo {
    pub text: String,
    pub tokens: Vec<u32>,
}

/// A generation's predictor input, to cache its true output length under (SSJF §6).
#[derive(Debug, Clone)]
pub struct Truth {
    predictions: Arc<Predictions>,
    text: String,
}

impl Truth {
    /// Remembers the length of a generation that ended by itself, once: the caller's slot is
    /// emptied. One cut by its token limit (`Length`) is not learnt: its answer is only known to
    /// be at least that long, and a later call of the same prompt with room for more would be
    /// ordered by the cut.
    pub fn learn(truth: &mut Option<Truth>, completion_tokens: usize, reason: FinishReason) {
        if let Some(t) = truth.take()
            && reason == FinishReason::Stop
        {
            t.predictions.learn(t.text, completion_tokens as u32);
        }
    }
}

impl Generator {
    /// How many tokens the decoder's vocabulary has (token ids sent run from 0 to one less).
    pub fn vocab_size(&self) -> usize {
        self.model.tokenizer.vocab_size()
    }

    pub fn new(
        driver: Arc<Driver>,
        model: Arc<DecoderModel>,
        predictions: Option<Arc<Predictions>>,
        prompt_cache: Option<Arc<LlamaPromptCache>>,
        prefill_stages: u16,
        max_input_len: u32,
    ) -> Self {
        Self { driver, model, predictions, prompt_cache, prefill_stages, max_input_len }
    }

    /// What the prompt cache did and holds, if the decoder has one.
    pub fn prompt_cache_stats(&self) -> Option<CacheStats> {
        self.prompt_cache.as_ref().map(|cache| cache.stats())
    }

    /// How many of `prompt`'s first tokens the prompt cache holds now.
    fn cached(&self, prompt: &[u32]) -> u32 {
        let Some(cache) = &self.prompt_cache else { return 0 };
        let starts = turn_starts(prompt, self.model.tokenizer.turn_start);
        u32::try_from(cache.peek(prompt, &starts)).unwrap_or(u32::MAX)
    }

    /// What `/info` says of the length predictor, if there is one.
    pub fn predictor(&self) -> Option<serde_json::Value> {
        self.predictions.as_ref().map(|p| p.describe())
    }

    /// Token `id` as text (a piece of a character reads as U+FFFD).
    pub fn token_text(&self, id: u32) -> String {
        self.model.tokenizer.decode(&[id]).unwrap_or_default()
    }

    /// A prompt's text: as sent, or its tokens `ids` read back.
    fn prompt_text(&self, prompt: &Prompt, ids: &[u32]) -> String {
        match prompt {
            Prompt::Text(text) => text.clone(),
            Prompt::Tokens(_) | Prompt::Chat(_) => self.model.tokenizer.decode(ids).unwrap_or_default(),
        }
    }

    /// Tokens the decoder's context holds: the most `max_tokens` may be.
    pub fn context(&self) -> usize {
        self.model.llama.config.context
    }

    /// Starts the call's generations (one per choice, admitted together: all or none, so a
    /// refused call computes nothing) and waits for each one's first event: a failure then is
    /// the call's error status (the others started are cancelled as their claims drop).
    pub async fn start(&self, call: &ValidGeneration) -> Result<Vec<StartedGeneration>, CallError> {
        if self.prefill_stages > 0 {
            Self::one_token(call)?;
        }
        self.biased_tokens_exist(call)?;
        let grammar = self.grammar(&call.output).await?;
        let mut prompts = Vec::with_capacity(call.prompts.len());
        let mut echoes = Vec::with_capacity(call.prompts.len());
        for prompt in &call.prompts {
            let (ids, max_tokens) = self.tokenize(prompt, call).await?;
            if call.echo {
                echoes.push(Echo { text: self.prompt_text(prompt, &ids), tokens: ids.clone() });
            }
            // A prompt's output length is predicted once, for all of its choices; not an echoed
            // one's (an evaluation's: its length, often 0 or 1, says nothing of the prompt's answers,
            // and SSJF orders it by its max_tokens).
            let predicted = match (self.prefill_stages, call.echo) {
                (0, false) => self.predict(prompt, &ids).await,
                _ => None,
            };
            prompts.push((ids, predicted, max_tokens));
        }
        let choices = call.choices().map(|(index, mut decoding)| {
            decoding.grammar = grammar.clone();
            (&prompts[index], decoding)
        });
        if self.prefill_stages > 0 {
            let mut answered = Vec::new();
            for ((ids, _, _), decoding) in choices {
                answered.push(self.next_token(decoding, ids.clone()).await?);
            }
            return Ok(answered);
        }
        let (mut handed, mut truths) = (Vec::new(), Vec::new());
        for ((ids, predicted, max_tokens), decoding) in choices {
            truths.push(predicted.as_ref().map(|(truth, _)| truth.clone()));
            let generation = morph_core::Generation {
                max_tokens: *max_tokens,
                predicted: predicted.as_ref().and_then(|(_, length)| *length),
                // A scored prompt is computed whole.
                cached: if decoding.score_prompt { 0 } else { self.cached(ids) },
            };
            handed.push((ids.clone(), generation, decoding));
        }
        let admitted = self.driver.generate_call(handed).map_err(|refused| match refused {
            CallRefused::Choice(event) => first_failure(Some(event)),
            CallRefused::NeverFits { choices, holds } => never_fits(call, choices, holds),
        })?;
        let mut generations = Vec::with_capacity(admitted.len());
        let choices = admitted.into_iter().zip(truths).enumerate();
        for (choice, ((claim, mut events), truth)) in choices {
            let echo = echoes.get(choice / call.n as usize).cloned();
            match events.recv().await {
                Some(
                    first @ (GenEvent::Token { .. } | GenEvent::PromptLogprobs(_) | GenEvent::Done { .. }),
                ) => {
                    generations.push(StartedGeneration { claim, events, first, truth, echo });
                }
                failure => return Err(first_failure(failure)),
            }
        }
        Ok(generations)
    }

    /// With a predictor, `prompt`'s (tokens `ids`) predicted output length, and where its true
    /// one is learnt.
    async fn predict(&self, prompt: &Prompt, ids: &[u32]) -> Option<(Truth, Option<u32>)> {
        let predictions = self.predictions.as_ref()?;
        let text = match prompt {
            Prompt::Chat(messages) => chat_predictor_input(messages),
            Prompt::Text(_) | Prompt::Tokens(_) => self.prompt_text(prompt, ids),
        };
        let predicted = predictions.predict(text.clone()).await;
        Some((Truth { predictions: predictions.clone(), text }, predicted))
    }

    /// A prompt's token ids and the tokens its answer may have: the call's `max_tokens`, which
    /// with the prompt must fit in what a sequence holds (a whole decoder's KV cache is its
    /// runtime's length, a prefill the context), or else all the room the prompt leaves, as
    /// OpenAI's default is; a prompt that leaves no room for one token is a 413 (unless the call
    /// asks for none: a prompt echoed and scored may fill the sequence).
    async fn tokenize(&self, prompt: &Prompt, call: &ValidGeneration) -> Result<(Vec<u32>, u32), CallError> {
        let field = prompt.field();
        let text = match prompt {
            Prompt::Text(prompt) => prompt.clone(),
            Prompt::Tokens(ids) => return self.known_tokens(ids).and_then(|()| self.room(ids.clone(), call)),
            Prompt::Chat(messages) => self
                .model
                .tokenizer
                .chat_prompt(messages, call.tools())
                .map_err(|e| CallError::validation(field, e.to_string()))?,
        };
        let model = self.model.clone();
        let ids = tokio::task::spawn_blocking(move || model.tokenizer.encode(&text))
            .await
            .map_err(|e| CallError::Engine(EngineError::Tokenize(e.to_string())))?
            .map_err(|e| match e {
                EngineError::Unrepresentable(message) => CallError::validation(field, message),
                e => CallError::Engine(e),
            })?;
        self.room(ids, call)
    }

    /// A prompt's token ids given as they are: none empty, each a token of the model's.
    fn known_tokens(&self, ids: &[u32]) -> Result<(), CallError> {
        if ids.is_empty() {
            return Err(CallError::validation("prompt", "must not be an empty array of token ids"));
        }
        match self.unknown_token(ids.iter().copied()) {
            Some((id, why)) => Err(CallError::validation("prompt", format!("token {id} {why}"))),
            None => Ok(()),
        }
    }

    /// Prompt `ids` with the tokens its answer may have (see [`Self::tokenize`]).
    fn room(&self, ids: Vec<u32>, call: &ValidGeneration) -> Result<(Vec<u32>, u32), CallError> {
        let context = self.context();
        let holds = match self.prefill_stages {
            0 => context.min(self.max_input_len as usize),
            _ => context,
        };
        // A prompt only scored (`echo` with `max_tokens: 0`) needs no room for an answer.
        let answer = usize::from(!(call.max_tokens_given && call.max_tokens == 0));
        if ids.len() + answer > holds {
            // No room for the answer's first token: refused before it is queued.
            let as_u32 = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
            return Err(CallError::PromptTooLong { len: as_u32(ids.len()), max_len: as_u32(holds - answer) });
        }
        if !call.max_tokens_given {
            let room = holds - ids.len();
            return Ok((ids, u32::try_from(room).unwrap_or(u32::MAX)));
        }
        let max_tokens = call.max_tokens;
        if ids.len() + max_tokens as usize > holds {
            let message = format!(
                "the prompt's {} tokens plus max_tokens exceed the {holds} tokens a sequence holds here (the model's context of {context}, or the runtime's length: --runtime dynamic:LENxN)",
                ids.len()
            );
            return Err(CallError::validation("max_tokens", message));
        }
        Ok((ids, max_tokens))
    }

    /// The grammar the call's answers are held to: its JSON schema, calls of its tools when it
    /// must call one, or text and calls whose arguments follow their schemas when it may call a
    /// strict tool. Every schema is compiled (an `auto` call's tools too), so a keyword the
    /// grammar engine does not implement is refused by name, not ignored.
    async fn grammar(&self, output: &Output) -> Result<Option<Grammar>, CallError> {
        let (source, field, held) = match output {
            Output::Text => return Ok(None),
            Output::Json { schema, field } => (GrammarSource::JsonSchema(schema.clone()), *field, true),
            Output::Tools(used) => {
                let format = self.model.tokenizer.tool_format();
                let strict = used.tools.iter().any(|t| t.strict);
                match used.choice {
                    ToolChoice::Auto if strict => {
                        (format.auto_grammar(&used.tools, used.parallel), "tools", true)
                    }
                    // Compiled to check the schemas; the model writes freely.
                    ToolChoice::Auto => (format.grammar(&used.tools, used.parallel), "tools", false),
                    _ => (format.grammar(&used.callable(), used.parallel), "tools", true),
                }
            }
        };
        let model = self.model.clone();
        // The first grammar walks the vocabulary (hundreds of milliseconds): off the runtime.
        let grammar = tokio::task::spawn_blocking(move || model.tokenizer.grammar(source))
            .await
            .map_err(|e| CallError::Engine(EngineError::Tokenize(e.to_string())))?
            .map_err(|e| CallError::validation(field, format!("cannot be followed: {e}")))?;
        Ok(held.then_some(grammar))
    }

    /// Every token `logit_bias` names is in the model's vocabulary.
    fn biased_tokens_exist(&self, call: &ValidGeneration) -> Result<(), CallError> {
        match self.unknown_token(call.logit_bias.iter().map(|&(token, _)| token)) {
            Some((token, why)) => Err(CallError::validation(format!("logit_bias.{token}"), why)),
            None => Ok(()),
        }
    }

    /// The first of `ids` that is not a token of the model's, and why.
    fn unknown_token(&self, mut ids: impl Iterator<Item = u32>) -> Option<(u32, String)> {
        let vocab = self.vocab_size();
        let id = ids.find(|&id| id as usize >= vocab)?;
        Some((id, format!("is not a token of this model (its ids are 0 to {})", vocab.saturating_sub(1))))
    }

    /// How this model writes tool calls.
    pub fn tool_format(&self) -> morph_decoder::ToolFormat {
        self.model.tokenizer.tool_format()
    }
}

/// The call's error for the first event of a generation that did not start (none: its decoder
/// stopped).
fn first_failure(event: Option<GenEvent>) -> CallError {
    match event {
        Some(GenEvent::Dropped(r)) => CallError::generation_dropped(r),
        Some(GenEvent::Failed(e)) => CallError::Engine(e),
        _ => CallError::Engine(EngineError::Stopped),
    }
}

/// A call of more `choices` than the server `holds` at once, even idle: named by `n` where it
/// asks for several choices a prompt, else by its prompts (`prompt` or `messages`).
fn never_fits(call: &ValidGeneration, choices: usize, holds: usize) -> CallError {
    let field = match (call.n, call.prompts.first()) {
        (1, Some(prompt)) => prompt.field(),
        _ => "n",
    };
    CallError::validation(
        field,
        format!(
            "the call's choices, prompts × n = {choices}, are more than this server holds at once \
             ({holds}: its queue, --max-queue, beside the running batch); send fewer"
        ),
    )
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
