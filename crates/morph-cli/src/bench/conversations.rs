//! `morph bench --endpoint chat --conversations`: multi-turn replay. ShareGPT conversations
//! arrive as a Poisson process at `--rate` conversations/s (or in bursts: Gamma gaps of
//! coefficient of variation `--cv`, as the other runs take it); each sends its rounds one after
//! another, round k once round k−1's answer has arrived and a think time (exponential, mean
//! `--think-s`) has passed, with every earlier user turn and the server's own earlier answers
//! as its history (as a chat client does), greedy, streamed. A conversation ends after
//! `--max-rounds` rounds, or at its first round that is not answered. The report gives TTFT and
//! TPOT by round, the prompt tokens the server says it had cached, and goodput: rounds answered
//! within both targets per second, and whether the run's p99s are within them.

use std::time::Duration;

use anyhow::Context;
use clap::Args;
use morph_sim::workload::Arrivals;
use morph_train::predictor::dataset::{Conversation, Rounds, load_sharegpt};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::stream::{self, GenerationReport, Targets, TokenTiming};

/// Rounds at which the by-round table stops counting separately (`4+`).
const ROUND_GROUPS: usize = 4;

#[derive(Debug, Args)]
pub(crate) struct ConversationArgs {
    /// --endpoint chat: replay whole ShareGPT conversations (--sharegpt) round by round, each
    /// round after the previous answer and a think time; --rate is conversations per second.
    #[arg(long)]
    conversations: bool,
    /// --conversations: mean think time between an answer and the next round, seconds
    /// (exponential).
    #[arg(long, default_value_t = 2.0)]
    think_s: f64,
    /// --conversations: the most rounds a conversation sends.
    #[arg(long, default_value_t = 4)]
    max_rounds: usize,
    /// --conversations: only conversations whose user turns are all at most this many
    /// characters (ShareGPT's p90 is about 950; a pasted document fills a small model's context).
    #[arg(long, default_value_t = 1000)]
    max_user_chars: usize,
}

impl ConversationArgs {
    pub(crate) fn enabled(&self) -> bool {
        self.conversations
    }
}

/// One conversation to replay: its user turns, in order.
struct Script {
    prompts: Vec<String>,
}

/// The conversations of `sharegpt` in `rounds`' split with at least two rounds, each cut to
/// `max_rounds`, in file order.
fn scripts(
    args: &ConversationArgs,
    sharegpt: &std::path::Path,
    rounds: &Rounds,
) -> anyhow::Result<Vec<Script>> {
    let conversations = load_sharegpt(sharegpt)?;
    let user_turns = |c: &Conversation| -> Vec<String> {
        c.turns.iter().filter(|t| t.role == "user").map(|t| t.content.clone()).collect()
    };
    let scripts: Vec<Script> = conversations
        .iter()
        .filter(|c| rounds.includes(&c.id))
        .map(|c| user_turns(c).into_iter().take(args.max_rounds).collect::<Vec<_>>())
        .filter(|p| {
            p.len() >= 2 && p.iter().all(|t| !t.trim().is_empty() && t.chars().count() <= args.max_user_chars)
        })
        .map(|prompts| Script { prompts })
        .collect();
    anyhow::ensure!(!scripts.is_empty(), "no conversation of two rounds or more in {}", sharegpt.display());
    Ok(scripts)
}

/// One round's outcome.
#[derive(Debug, Clone)]
struct RoundOutcome {
    /// 1-based.
    round: usize,
    result: Result<(TokenTiming, Value), String>,
}

/// By-round account.
#[derive(Debug, Serialize)]
struct RoundRow {
    /// "1", "2", … or "4+".
    round: String,
    answered: usize,
    failed: usize,
    ttft_p50_ms: f64,
    ttft_p99_ms: f64,
    tpot_p50_ms: f64,
    tpot_p99_ms: f64,
    /// Mean prompt tokens, and of them the mean the server reported cached.
    prompt_tokens: f64,
    cached_tokens: f64,
}

/// One run's report.
#[derive(Debug, Serialize)]
pub(crate) struct ConversationReport {
    conversations_per_s: f64,
    /// The conversation arrivals' coefficient of variation asked for (`None`: Poisson).
    arrival_cv: Option<f64>,
    conversations: usize,
    rounds_sent: usize,
    rounds_answered: usize,
    wall_s: f64,
    /// Every answered round together.
    generation: GenerationReport,
    by_round: Vec<RoundRow>,
}

/// The settings a replay run shares across its rates.
pub(crate) struct Replay<'a> {
    pub client: &'a reqwest::Client,
    pub url: String,
    pub api_key: Option<&'a str>,
    pub max_tokens: u32,
    pub targets: Targets,
    pub duration: f64,
    pub seed: u64,
}

/// Runs the replay with each of `arrivals` (of conversations), one after another.
pub(crate) fn run(
    args: &ConversationArgs,
    sharegpt: Option<&std::path::Path>,
    rounds: &Rounds,
    arrivals: &[Arrivals],
    replay: &Replay<'_>,
    runtime: &tokio::runtime::Runtime,
) -> anyhow::Result<Vec<ConversationReport>> {
    let sharegpt = sharegpt.context("--conversations needs --sharegpt FILE")?;
    anyhow::ensure!(args.think_s >= 0.0, "--think-s must be 0 or more");
    anyhow::ensure!(args.max_rounds >= 2, "--max-rounds must be at least 2 (a conversation)");
    let scripts = scripts(args, sharegpt, rounds)?;
    let mut reports = Vec::new();
    for process in arrivals {
        let run = Run::of(process, replay.duration, replay.seed)?;
        reports.push(runtime.block_on(run_rate(args, &scripts, run, replay)));
    }
    Ok(reports)
}

/// One run's conversation arrivals: their mean rate, the CV asked for, and their offsets (s).
struct Run {
    rate: f64,
    cv: Option<f64>,
    offsets: Vec<f64>,
}

impl Run {
    fn of(process: &Arrivals, duration: f64, seed: u64) -> anyhow::Result<Run> {
        let (rate, cv) = match process {
            Arrivals::Gamma { rate, cv } => (*rate, Some(*cv)),
            other => (other.mean_rate().context("conversations arrive at a rate")?, None),
        };
        anyhow::ensure!(rate > 0.0, "--rate must be positive");
        Ok(Run { rate, cv, offsets: process.generate(duration, seed)? })
    }
}

/// A draw of an exponential distribution of mean `mean`.
fn exponential(mean: f64, rng: &mut StdRng) -> f64 {
    -mean * (1.0 - rng.random::<f64>()).ln()
}

async fn run_rate(
    args: &ConversationArgs,
    scripts: &[Script],
    run: Run,
    replay: &Replay<'_>,
) -> ConversationReport {
    let mut rng = StdRng::seed_from_u64(replay.seed);
    let Run { rate, cv, offsets } = run;
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for (i, offset) in offsets.iter().enumerate() {
        // A fixed stride through the scripts, offset by the seed.
        let script = &scripts[(i.wrapping_mul(7919) + replay.seed as usize) % scripts.len()];
        let prompts = script.prompts.clone();
        let think = (0..prompts.len()).map(|_| exponential(args.think_s, &mut rng)).collect::<Vec<_>>();
        let request = RoundRequest {
            client: replay.client.clone(),
            url: replay.url.clone(),
            api_key: replay.api_key.map(str::to_string),
            max_tokens: replay.max_tokens,
        };
        let at = start + Duration::from_secs_f64(*offset);
        tasks.spawn(async move {
            tokio::time::sleep_until(at).await;
            converse(&request, &prompts, &think).await
        });
    }
    let mut outcomes = Vec::new();
    while let Some(done) = tasks.join_next().await {
        outcomes.extend(done.unwrap_or_default());
    }
    let wall_s = start.elapsed().as_secs_f64();
    report(rate, cv, offsets.len(), outcomes, wall_s, replay.targets)
}

/// What a round is sent with.
struct RoundRequest {
    client: reqwest::Client,
    url: String,
    api_key: Option<String>,
    max_tokens: u32,
}

/// One conversation's rounds, each after the last answer and its think time.
async fn converse(request: &RoundRequest, prompts: &[String], think: &[f64]) -> Vec<RoundOutcome> {
    let mut messages: Vec<Value> = Vec::new();
    let mut out = Vec::new();
    for (i, prompt) in prompts.iter().enumerate() {
        if i > 0 {
            tokio::time::sleep(Duration::from_secs_f64(think[i])).await;
        }
        messages.push(json!({"role": "user", "content": prompt}));
        let result = send(request, &messages).await;
        let answered = result.as_ref().ok().map(|(_, _, text)| text.clone());
        out.push(RoundOutcome { round: i + 1, result: result.map(|(timing, usage, _)| (timing, usage)) });
        match answered {
            Some(text) => messages.push(json!({"role": "assistant", "content": text})),
            None => break,
        }
    }
    out
}

/// Sends one round, streamed: its token timing from the send, its usage and its text.
async fn send(request: &RoundRequest, messages: &[Value]) -> Result<(TokenTiming, Value, String), String> {
    let body = json!({
        "messages": messages, "max_tokens": request.max_tokens, "temperature": 0,
        "stream": true, "stream_options": {"include_usage": true},
    });
    let mut post = request.client.post(&request.url).json(&body);
    if let Some(key) = &request.api_key {
        post = post.bearer_auth(key);
    }
    let sent = Instant::now();
    let resp = post.send().await.map_err(|e| super::failure(&e).to_string())?;
    if !resp.status().is_success() {
        return Err(resp.status().as_u16().to_string());
    }
    stream::read(resp, sent).await.map_err(str::to_string)
}

fn report(
    rate: f64,
    arrival_cv: Option<f64>,
    conversations: usize,
    outcomes: Vec<RoundOutcome>,
    wall_s: f64,
    targets: Targets,
) -> ConversationReport {
    let answered: Vec<&RoundOutcome> = outcomes.iter().filter(|o| o.result.is_ok()).collect();
    let timings: Vec<TokenTiming> =
        answered.iter().filter_map(|o| o.result.as_ref().ok().map(|r| r.0)).collect();
    let group = |round: usize| round.min(ROUND_GROUPS);
    let by_round = (1..=ROUND_GROUPS)
        .map(|g| {
            let all: Vec<&RoundOutcome> = outcomes.iter().filter(|o| group(o.round) == g).collect();
            let ok: Vec<&(TokenTiming, Value)> = all.iter().filter_map(|o| o.result.as_ref().ok()).collect();
            let t: Vec<TokenTiming> = ok.iter().map(|r| r.0).collect();
            let account = GenerationReport::of(&t, wall_s, targets);
            let usage = |key: &str| {
                let sum: f64 = ok.iter().filter_map(|r| r.1.pointer(key).and_then(Value::as_f64)).sum();
                sum / ok.len().max(1) as f64
            };
            RoundRow {
                round: if g == ROUND_GROUPS { format!("{g}+") } else { g.to_string() },
                answered: ok.len(),
                failed: all.len() - ok.len(),
                ttft_p50_ms: account.ttft_p50_ms,
                ttft_p99_ms: account.ttft_p99_ms,
                tpot_p50_ms: account.tpot_p50_ms,
                tpot_p99_ms: account.tpot_p99_ms,
                prompt_tokens: usage("/prompt_tokens"),
                cached_tokens: usage("/prompt_tokens_details/cached_tokens"),
            }
        })
        .collect();
    ConversationReport {
        conversations_per_s: rate,
        arrival_cv,
        conversations,
        rounds_sent: outcomes.len(),
        rounds_answered: answered.len(),
        wall_s,
        generation: GenerationReport::of(&timings, wall_s, targets),
        by_round,
    }
}

pub(crate) fn print_table(reports: &[ConversationReport]) {
    for r in reports {
        let g = &r.generation;
        println!(
            "{:.3} conversations/s: {} conversations, {} of {} rounds answered in {:.0} s; TTFT p50 {:.0} p99 {:.0} ms, \
             TPOT p50 {:.1} p99 {:.1} ms; goodput {:.3} rounds/s; p99s within targets: {}",
            r.conversations_per_s,
            r.conversations,
            r.rounds_answered,
            r.rounds_sent,
            r.wall_s,
            g.ttft_p50_ms,
            g.ttft_p99_ms,
            g.tpot_p50_ms,
            g.tpot_p99_ms,
            g.goodput_rps,
            if g.within_targets { "yes" } else { "no" }
        );
        println!(
            "  {:>5} {:>8} {:>6} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8}",
            "round", "answered", "failed", "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99", "prompt", "cached"
        );
        for row in &r.by_round {
            println!(
                "  {:>5} {:>8} {:>6} {:>9.0} {:>9.0} {:>9.1} {:>9.1} {:>8.0} {:>8.0}",
                row.round,
                row.answered,
                row.failed,
                row.ttft_p50_ms,
                row.ttft_p99_ms,
                row.tpot_p50_ms,
                row.tpot_p99_ms,
                row.prompt_tokens,
                row.cached_tokens
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answered(round: usize, ttft_ms: f64, prompt: u32, cached: u32) -> RoundOutcome {
        let timing = TokenTiming { ttft_ms, tpot_ms: Some(20.0), tokens: 10 };
        let usage = json!({"prompt_tokens": prompt, "prompt_tokens_details": {"cached_tokens": cached}});
        RoundOutcome { round, result: Ok((timing, usage)) }
    }

    /// Rounds are grouped 1, 2, 3, 4+; a failed round counts against its group; goodput counts
    /// the rounds within both targets.
    #[test]
    fn the_report_groups_rounds_and_counts_goodput_within_the_targets() {
        let outcomes = vec![
            answered(1, 100.0, 40, 20),
            answered(2, 300.0, 200, 150),
            answered(2, 1500.0, 220, 0),
            answered(4, 200.0, 500, 400),
            answered(6, 400.0, 700, 600),
            RoundOutcome { round: 3, result: Err("429".into()) },
        ];
        let targets = Targets { ttft_ms: 1000.0, tpot_ms: 100.0 };
        let r = report(0.1, None, 2, outcomes, 10.0, targets);
        assert_eq!((r.rounds_sent, r.rounds_answered), (6, 5));
        let rows: Vec<(&str, usize, usize)> =
            r.by_round.iter().map(|row| (row.round.as_str(), row.answered, row.failed)).collect();
        assert_eq!(rows, vec![("1", 1, 0), ("2", 2, 0), ("3", 0, 1), ("4+", 2, 0)]);
        assert_eq!((r.by_round[1].prompt_tokens, r.by_round[1].cached_tokens), (210.0, 75.0));
        assert_eq!(r.by_round[3].cached_tokens, 500.0);
        assert!(
            (r.generation.goodput_rps - 0.4).abs() < 1e-9,
            "4 of 5 answered rounds within both targets in 10 s"
        );
        assert!(!r.generation.within_targets, "a 1.5 s first token is past the p99 target");
    }

    #[test]
    fn conversations_arrive_within_the_run_in_order_and_bursts_are_burstier() {
        let poisson = Run::of(&Arrivals::Poisson { rate: 2.0 }, 100.0, 7).unwrap();
        let bursty = Run::of(&Arrivals::Gamma { rate: 2.0, cv: 10.0 }, 100.0, 7).unwrap();
        assert_eq!((poisson.rate, poisson.cv, bursty.rate, bursty.cv), (2.0, None, 2.0, Some(10.0)));
        for t in [&poisson.offsets, &bursty.offsets] {
            assert!(t.windows(2).all(|w| w[0] <= w[1]) && t.iter().all(|&x| (0.0..100.0).contains(&x)));
        }
        assert!((150..250).contains(&poisson.offsets.len()), "about 200 at 2/s over 100 s");
        // The busiest second holds a far larger share of a bursty stream.
        let busiest = |t: &[f64]| {
            let mut per_s = [0usize; 100];
            t.iter().for_each(|x| per_s[*x as usize] += 1);
            per_s.into_iter().max().unwrap_or(0) as f64 / t.len().max(1) as f64
        };
        assert!(busiest(&bursty.offsets) > 3.0 * busiest(&poisson.offsets));
        assert!(Run::of(&Arrivals::Poisson { rate: 0.0 }, 100.0, 7).is_err());
    }
}
