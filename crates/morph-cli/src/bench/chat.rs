//! Chat requests for `morph bench --endpoint chat`: the ShareGPT rounds that `morph train
//! lengths` answered, each sent with the turns the decoder saw then (greedy, the same
//! `max_tokens`), so that every answer's length is the recorded one and an oracle server
//! (`--predictor oracle`) knows it. By default only the rounds the predictor did not train on.
//! Answers are streamed, so that each request's time to first token and time per output
//! token are measured (see [`super::stream`]).

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use morph_train::predictor::{dataset::load_length_records, dataset::load_sharegpt, dataset::recorded_turns};
use serde_json::{Value, json};

use super::stream::Targets;
use crate::rounds_arg;
use morph_train::predictor::dataset::Rounds;

#[derive(Debug, Args)]
pub(crate) struct ChatArgs {
    /// --endpoint chat: output lengths recorded by `morph train lengths`.
    #[arg(long)]
    lengths: Option<PathBuf>,
    /// --endpoint chat: the ShareGPT conversations they answer.
    #[arg(long)]
    sharegpt: Option<PathBuf>,
    /// --endpoint chat: which recorded rounds to send.
    #[arg(long, default_value = "heldout", value_parser = rounds_arg::rounds())]
    rounds: Rounds,
    /// --endpoint chat: max_tokens of every request: a number (the cap the lengths were
    /// recorded with), or `recorded`: each request's recorded answer length, so that a server
    /// whose greedy answer would run on stops where the recorded one did.
    #[arg(long, default_value = "256")]
    max_tokens: MaxTokens,
    /// --endpoint chat: time-to-first-token target in ms: a run whose p99 is within it and
    /// within --tpot-target-ms counts towards goodput.
    #[arg(long, default_value_t = 1000.0)]
    ttft_target_ms: f64,
    /// --endpoint chat: time-per-output-token target in ms (each answer's first to last
    /// token, over its tokens after the first).
    #[arg(long, default_value_t = 100.0)]
    tpot_target_ms: f64,
}

/// `--max-tokens`: one cap for every request, or each request's recorded answer length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MaxTokens {
    Cap(u32),
    Recorded,
}

impl std::str::FromStr for MaxTokens {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "recorded" => Ok(MaxTokens::Recorded),
            n => n
                .parse()
                .map(MaxTokens::Cap)
                .map_err(|_| format!("'{n}' is neither a token count nor `recorded`")),
        }
    }
}

/// One recorded round as a request: its body and, for a trace the simulator replays, the
/// decoder's prompt tokens and the recorded answer's length.
pub(crate) struct ChatRequest {
    pub(crate) body: Value,
    pub(crate) prompt_tokens: u32,
    pub(crate) output_len: u32,
}

impl ChatArgs {
    pub(crate) fn targets(&self) -> Targets {
        Targets { ttft_ms: self.ttft_target_ms, tpot_ms: self.tpot_target_ms }
    }

    pub(crate) fn sharegpt(&self) -> Option<&std::path::Path> {
        self.sharegpt.as_deref()
    }

    pub(crate) fn rounds(&self) -> &Rounds {
        &self.rounds
    }

    /// `--max-tokens` as one cap (a replayed conversation has no recorded lengths).
    pub(crate) fn max_tokens_cap(&self) -> anyhow::Result<u32> {
        match self.max_tokens {
            MaxTokens::Cap(n) => Ok(n),
            MaxTokens::Recorded => {
                anyhow::bail!("--max-tokens recorded needs --lengths, not --conversations")
            }
        }
    }

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
                let max_tokens = match self.max_tokens {
                    MaxTokens::Cap(n) => n,
                    MaxTokens::Recorded => record.output_len.max(1),
                };
                let stream = json!({"include_usage": true});
                ChatRequest {
                    body: json!({"messages": messages, "max_tokens": max_tokens, "temperature": 0, "stream": true, "stream_options": stream}),
                    prompt_tokens: record.prompt_tokens,
                    output_len: record.output_len,
                }
            })
            .collect())
    }
}
