//! Chat requests for `morph bench --endpoint chat`: the ShareGPT rounds that `morph train
//! lengths` answered, each sent with the turns the decoder saw then (greedy, the same
//! `max_tokens`), so that every answer's length is the recorded one and an oracle server
//! (`--predictor oracle`) knows it. By default only the rounds the predictor did not train on.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use morph_train::predictor::{dataset::load_length_records, dataset::load_sharegpt, dataset::recorded_turns};
use serde_json::{Value, json};

use crate::rounds_arg::Rounds;

#[derive(Debug, Args)]
pub(crate) struct ChatArgs {
    /// --endpoint chat: output lengths recorded by `morph train lengths`.
    #[arg(long)]
    lengths: Option<PathBuf>,
    /// --endpoint chat: the ShareGPT conversations they answer.
    #[arg(long)]
    sharegpt: Option<PathBuf>,
    /// --endpoint chat: which recorded rounds to send.
    #[arg(long, value_enum, default_value = "heldout")]
    rounds: Rounds,
    /// --endpoint chat: max_tokens of every request (the cap the lengths were recorded with).
    #[arg(long, default_value_t = 256)]
    max_tokens: u32,
}

/// One recorded round as a request: its body and, for a trace the simulator replays, the
/// decoder's prompt tokens and the recorded answer's length.
pub(crate) struct ChatRequest {
    pub(crate) body: Value,
    pub(crate) prompt_tokens: u32,
    pub(crate) output_len: u32,
}

impl ChatArgs {
    pub(crate) fn requests(&self) -> anyhow::Result<Vec<ChatRequest>> {
        let lengths = self.lengths.as_ref().context("--endpoint chat needs --lengths FILE")?;
        let sharegpt = self.sharegpt.as_ref().context("--endpoint chat needs --sharegpt FILE")?;
        let conversations = load_sharegpt(sharegpt)?;
        let records = load_length_records(lengths)?;
        let turns = recorded_turns(&conversations, &records)?;
        Ok(records
            .iter()
            .zip(turns)
            .filter(|(r, _)| self.rounds.includes(&r.conversation))
            .map(|(record, (history, prompt))| {
                let mut messages: Vec<Value> =
                    history.iter().map(|m| json!({"role": m.role, "content": m.content})).collect();
                messages.push(json!({"role": "user", "content": prompt}));
                ChatRequest {
                    body: json!({"messages": messages, "max_tokens": self.max_tokens, "temperature": 0}),
                    prompt_tokens: record.prompt_tokens,
                    output_len: record.output_len,
                }
            })
            .collect())
    }
}
