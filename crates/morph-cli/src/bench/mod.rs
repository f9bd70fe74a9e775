//! `morph bench`: an open-loop load generator. Requests are sent at their scheduled times
//! whether or not earlier ones have finished, so a slow server shows up as latency, not as a
//! lower offered load. Embedding endpoints get corpus texts; the chat endpoint gets rounds of
//! ShareGPT conversations whose answers `morph train lengths` recorded (see [`chat`]).

mod chat;
mod classify;
mod conversations;
mod stream;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use morph_core::LatencySummary;
use morph_sim::workload::{Arrivals, Trace, corpus};
use serde::Serialize;
use serde_json::json;

use crate::model_args::ModelArgs;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Endpoint {
    /// POST /embed (TEI format).
    Embed,
    /// POST /v1/embeddings (OpenAI format).
    Openai,
    /// POST /v1/chat/completions: recorded ShareGPT rounds (--lengths, --sharegpt), greedy.
    Chat,
    /// POST /v1/completions of one greedy token per corpus text: a decoder's prefill, as
    /// `morph serve --task generate --stages N` serves it.
    Prefill,
    /// POST /v1/classify: a --scenario's query types (`workload.service`: task, SLO, utility)
    /// with the texts of the profiled test examples (--data), scored for utility earned and
    /// OTAS's outcome types.
    Classify,
}

#[derive(Debug, Args)]
pub(crate) struct BenchArgs {
    /// Tokenizer for a --scenario whose lengths come from a corpus.
    #[command(flatten)]
    model: ModelArgs,
    /// Server base URL, e.g. http://127.0.0.1:8080.
    #[arg(long)]
    url: String,
    /// Text corpus: .tsv (SST-2), .csv (AG News), .jsonl (ShareGPT), or one text per line
    /// (required unless --scenario or --lengths gives the requests). Repeat to mix corpora in
    /// equal shares: request i takes a text from corpus i mod N.
    #[arg(long = "corpus", required_unless_present_any = ["scenario", "lengths", "conversations"])]
    corpora: Vec<PathBuf>,
    #[command(flatten)]
    chat: chat::ChatArgs,
    #[command(flatten)]
    conversations: conversations::ConversationArgs,
    /// Replay a `morph simulate` scenario's request stream (its workload, duration and first
    /// seed, or --seed) instead, with texts of exactly each request's token length, so that live
    /// and simulated runs see the same requests.
    #[arg(long, conflicts_with_all = ["corpora", "trace"])]
    scenario: Option<PathBuf>,
    /// Poisson arrival rates in requests/s, comma separated; one run per rate.
    #[arg(long, value_delimiter = ',', default_value = "10")]
    rate: Vec<f64>,
    /// Gamma arrivals with these coefficients of variation (comma separated; one run per CV
    /// at the first --rate) instead of Poisson: burstiness. With --conversations, of the
    /// conversations.
    #[arg(long, value_delimiter = ',', conflicts_with = "trace")]
    cv: Vec<f64>,
    /// Take arrival times from a trace instead (JSONL with `timestamp` ms, or CSV with TIMESTAMP).
    #[arg(long, conflicts_with = "rate")]
    trace: Option<PathBuf>,
    /// Divide the trace's inter-arrival times by this factor.
    #[arg(long, default_value_t = 1.0)]
    speedup: f64,
    /// Seconds of arrivals per run (default 20, or the scenario's duration).
    #[arg(long)]
    duration: Option<f64>,
    /// Which endpoint to load: embed (TEI format), openai (/v1/embeddings) or prefill (one
    /// greedy token from /v1/completions) with corpus texts, or chat (/v1/chat/completions) with
    /// the recorded ShareGPT rounds of --lengths/--sharegpt.
    #[arg(long, value_enum, default_value = "embed")]
    endpoint: Endpoint,
    /// --endpoint classify: the labelled text folder the profile was made from (the test
    /// examples' texts), e.g. ../shared/data/text.
    #[arg(long)]
    data: Option<PathBuf>,
    /// Seed for arrival times and text choice (default 0, or the scenario's first seed).
    #[arg(long)]
    seed: Option<u64>,
    /// Per-request timeout in seconds.
    #[arg(long, default_value_t = 60.0)]
    timeout: f64,
    /// Latency SLO in ms: also report the share of requests answered within it and the goodput
    /// (requests/s answered within it).
    #[arg(long)]
    slo_ms: Option<f64>,
    /// Bearer token, if the server was started with --api-key.
    #[arg(long, env = "MORPH_API_KEY", hide_env_values = true)]
    api_key: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// --endpoint chat: also write the first run's stream as a JSONL trace (`timestamp` ms,
    /// `input_length` = the decoder's prompt tokens, `output_length` = the recorded answer's
    /// tokens) that a `morph simulate` scenario replays, for sim-vs-live fidelity.
    #[arg(long)]
    trace_out: Option<PathBuf>,
    /// Write one JSONL line per request sent (every run, in order): `rate`, `index`, `send_s`,
    /// `latency_ms`, `status` and the answer's `usage` where it has one (a chat's prompt,
    /// cached and completion tokens; and its `ttft_ms` and `tpot_ms`): what a mean hides,
    /// request by request.
    #[arg(long)]
    requests_out: Option<PathBuf>,
}

/// One run's result.
#[derive(Debug, Serialize)]
struct RunReport {
    offered_rps: f64,
    sent: usize,
    ok: usize,
    errors: usize,
    /// Status code (or "transport") → count.
    error_kinds: std::collections::BTreeMap<String, usize>,
    wall_s: f64,
    throughput_rps: f64,
    latency: LatencySummary,
    p75_ms: f64,
    /// With --slo-ms: the share of sent requests answered (200) within the SLO, and those per s.
    within_slo: Option<f64>,
    goodput_rps: Option<f64>,
    /// CPU this load generator used over the run, in cores (1.0: one core busy throughout).
    client_cpu_cores: f64,
    /// --endpoint classify: utility earned and outcome types.
    #[serde(skip_serializing_if = "Option::is_none")]
    classify: Option<classify::ClassifyReport>,
    /// --endpoint chat: TTFT and TPOT, and goodput within their targets.
    #[serde(skip_serializing_if = "Option::is_none")]
    generation: Option<stream::GenerationReport>,
}

/// One request's answer.
#[derive(Clone)]
struct Outcome {
    index: usize,
    latency_ms: f64,
    status: Result<u16, &'static str>,
    /// The answer's JSON (when kept), or a streamed chat answer's `{"usage": ...}`.
    body: Option<serde_json::Value>,
    /// A streamed chat answer's token timing.
    timing: Option<stream::TokenTiming>,
}

/// A text that BERT-style tokenizers turn into exactly `tokens` ids: `[CLS]`, one id per
/// "word", `[SEP]`.
fn text_of_tokens(tokens: u32) -> String {
    vec!["word"; tokens.saturating_sub(2).max(1) as usize].join(" ")
}

/// `(offered rate, [(send offset s, request body)])` per run.
type Schedule = (f64, Vec<(f64, serde_json::Value)>);

fn embed_body(endpoint: Endpoint, text: &str) -> serde_json::Value {
    match endpoint {
        Endpoint::Openai => json!({"input": text, "truncate": true}),
        Endpoint::Prefill => json!({"prompt": text, "max_tokens": 1, "temperature": 0}),
        Endpoint::Embed | Endpoint::Chat | Endpoint::Classify => json!({"inputs": text, "truncate": true}),
    }
}

/// The runs to send, and for --endpoint classify what each request's answer is scored against.
type Plan = (Vec<Schedule>, Option<Vec<classify::Expected>>);

fn schedules(args: &BenchArgs) -> anyhow::Result<Plan> {
    if let Some(path) = &args.scenario {
        let scenario = args.model.load_scenario(path)?;
        let seed = args.seed.or(scenario.seeds.first().copied()).unwrap_or(0);
        let duration = args.duration.unwrap_or(scenario.duration_s);
        let requests = scenario.workload.generate(duration, seed)?;
        let offsets = requests.iter().map(|r| r.arrival.as_millis_f64() / 1e3);
        let rate = requests.len() as f64 / duration;
        if args.endpoint == Endpoint::Classify {
            let data =
                args.data.as_deref().context("--endpoint classify needs --data (the labelled texts)")?;
            let tasks =
                scenario.workload.service.as_ref().and_then(|m| m.table.as_ref()).map(|t| t.tasks.clone());
            let tasks = tasks.context("--endpoint classify needs a scenario with workload.service")?;
            let (bodies, expected) = classify::bodies(&requests, &tasks, data)?;
            return Ok((vec![(rate, offsets.zip(bodies).collect())], Some(expected)));
        }
        let bodies = requests.iter().map(|r| embed_body(args.endpoint, &text_of_tokens(r.input_len)));
        return Ok((vec![(rate, offsets.zip(bodies).collect())], None));
    }
    anyhow::ensure!(args.endpoint != Endpoint::Classify, "--endpoint classify needs --scenario");
    let (seed, duration) = (args.seed.unwrap_or(0), args.duration.unwrap_or(20.0));
    let chats = match args.endpoint {
        Endpoint::Chat => args.chat.requests()?,
        _ => Vec::new(),
    };
    // One list of bodies per corpus (the chat rounds are one).
    let bodies: Vec<Vec<serde_json::Value>> = match args.endpoint {
        Endpoint::Chat => vec![chats.iter().map(|c| c.body.clone()).collect()],
        endpoint => {
            anyhow::ensure!(!args.corpora.is_empty(), "--corpus or --scenario is needed");
            let load = |path: &PathBuf| -> anyhow::Result<Vec<serde_json::Value>> {
                Ok(corpus::load(path)?.iter().map(|t| embed_body(endpoint, t)).collect())
            };
            args.corpora.iter().map(load).collect::<anyhow::Result<_>>()?
        }
    };
    anyhow::ensure!(args.trace_out.is_none() || !chats.is_empty(), "--trace-out needs --endpoint chat");
    anyhow::ensure!(bodies.iter().all(|b| !b.is_empty()), "no requests to send");
    let mut out = Vec::new();
    for a in arrival_processes(args) {
        let times = a.generate(duration, seed)?;
        // Corpora in turn; a fixed stride through each, offset by the seed: deterministic and
        // well spread.
        let pick = |i: usize| {
            let (corpus, turn) = (i % bodies.len(), i / bodies.len());
            (corpus, (turn.wrapping_mul(7919) + seed as usize) % bodies[corpus].len())
        };
        let body = |i: usize| {
            let (c, k) = pick(i);
            bodies[c][k].clone()
        };
        let stream = times.iter().enumerate().map(|(i, t)| (*t, body(i))).collect();
        if let Some(path) = args.trace_out.as_ref().filter(|_| out.is_empty()) {
            let rows: Vec<String> = times
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    let c = &chats[pick(i).1];
                    json!({"timestamp": t * 1e3, "input_length": c.prompt_tokens, "output_length": c.output_len})
                        .to_string()
                })
                .collect();
            std::fs::write(path, rows.join("\n") + "\n")
                .with_context(|| format!("writing {}", path.display()))?;
        }
        out.push((a.mean_rate().unwrap_or(times.len() as f64 / duration), stream));
    }
    Ok((out, None))
}

pub(crate) fn run(args: BenchArgs) -> anyhow::Result<()> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs_f64(args.timeout))
        .build()
        .context("building the HTTP client")?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(reachable(&client, &args.url))?;
    if args.conversations.enabled() {
        return replay_conversations(&args, &client, &runtime);
    }
    let mut reports = Vec::new();
    let mut lines = Vec::new();
    let (runs, expected) = schedules(&args)?;
    let keep = expected.is_some() || args.requests_out.is_some();
    for (rate, stream) in runs {
        if stream.is_empty() {
            bail!("no arrivals at rate {rate} in the run's duration");
        }
        let (mut report, answers) = runtime.block_on(run_schedule(&args, &client, rate, &stream, keep));
        if let Some(answers) = &answers {
            lines.extend(request_lines(rate, &stream, answers));
        }
        if let (Some(expected), Some(answers)) = (&expected, answers) {
            report.classify = Some(classify::score(expected, &answers));
        }
        reports.push(report);
    }
    if let Some(path) = &args.requests_out {
        std::fs::write(path, lines.join("\n") + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&reports)?);
    } else {
        print_table(&reports);
    }
    Ok(())
}

/// `--endpoint chat --conversations`: multi-turn replay at each rate.
fn replay_conversations(
    args: &BenchArgs,
    client: &reqwest::Client,
    runtime: &tokio::runtime::Runtime,
) -> anyhow::Result<()> {
    anyhow::ensure!(args.endpoint == Endpoint::Chat, "--conversations is for --endpoint chat");
    anyhow::ensure!(
        args.trace.is_none() && args.scenario.is_none(),
        "--conversations arrive at --rate (Poisson, or Gamma with --cv): no --trace or --scenario"
    );
    let replay = conversations::Replay {
        client,
        url: format!("{}/v1/chat/completions", args.url.trim_end_matches('/')),
        api_key: args.api_key.as_deref(),
        max_tokens: args.chat.max_tokens_cap()?,
        targets: args.chat.targets(),
        duration: args.duration.unwrap_or(60.0),
        seed: args.seed.unwrap_or(0),
    };
    let reports = conversations::run(
        &args.conversations,
        args.chat.sharegpt(),
        args.chat.rounds(),
        &arrival_processes(args),
        &replay,
        runtime,
    )?;
    match args.json {
        true => println!("{}", serde_json::to_string_pretty(&reports)?),
        false => conversations::print_table(&reports),
    }
    Ok(())
}

/// The arrival process of each run: the trace's, else Poisson at each rate, else Gamma at the
/// first rate with each CV.
fn arrival_processes(args: &BenchArgs) -> Vec<Arrivals> {
    match (&args.trace, args.cv.is_empty()) {
        (Some(path), _) => {
            vec![Arrivals::Trace { trace: Trace::new(path), speedup: args.speedup, repeat: false }]
        }
        (None, true) => args.rate.iter().map(|&rate| Arrivals::Poisson { rate }).collect(),
        (None, false) => args.cv.iter().map(|&cv| Arrivals::Gamma { rate: args.rate[0], cv }).collect(),
    }
}

/// One `--requests-out` line per request of a run.
fn request_lines(rate: f64, stream: &[(f64, serde_json::Value)], answers: &Answers) -> Vec<String> {
    stream
        .iter()
        .zip(answers)
        .enumerate()
        .map(|(index, ((send_s, _), answer))| {
            let status = match answer.status {
                Ok(code) => json!(code),
                Err(why) => json!(why),
            };
            let usage = answer.body.as_ref().and_then(|b| b.get("usage")).cloned();
            let mut line = json!({"rate": rate, "index": index, "send_s": send_s, "latency_ms": answer.latency_ms, "status": status, "usage": usage});
            if let Some(timing) = answer.timing {
                line["ttft_ms"] = json!(timing.ttft_ms);
                line["tpot_ms"] = json!(timing.tpot_ms);
            }
            line.to_string()
        })
        .collect()
}

/// Fails with one clear line when nothing answers at `url` (before any load is sent).
async fn reachable(client: &reqwest::Client, url: &str) -> anyhow::Result<()> {
    match client.get(format!("{url}/health")).send().await {
        Ok(_) => Ok(()),
        Err(e) => bail!("cannot reach {url}: {} (is `morph serve` listening there?)", failure(&e)),
    }
}

/// What went wrong below HTTP, in words.
fn failure(e: &reqwest::Error) -> &'static str {
    if e.is_connect() {
        "connection refused or unreachable"
    } else if e.is_timeout() {
        "timed out"
    } else {
        "the connection failed"
    }
}

/// Each request's answer by stream index: latency, status and (when kept) its JSON.
type Answers = Vec<Outcome>;

/// Sends `stream` open-loop; with `keep` the answers' bodies come back too, by stream index.
async fn run_schedule(
    args: &BenchArgs,
    client: &reqwest::Client,
    rate: f64,
    stream: &[(f64, serde_json::Value)],
    keep: bool,
) -> (RunReport, Option<Answers>) {
    let path = match args.endpoint {
        Endpoint::Embed => "/embed",
        Endpoint::Openai => "/v1/embeddings",
        Endpoint::Chat => "/v1/chat/completions",
        Endpoint::Prefill => "/v1/completions",
        Endpoint::Classify => "/v1/classify",
    };
    let url = format!("{}{path}", args.url.trim_end_matches('/'));
    let start = tokio::time::Instant::now();
    let cpu = cpu_time::ProcessTime::now();
    let mut tasks = tokio::task::JoinSet::new();
    for (index, (t, body)) in stream.iter().enumerate() {
        // Latency counts from the scheduled send time: a generator that falls behind shows up
        // as latency, not as a lower offered load.
        let scheduled = start + Duration::from_secs_f64(*t);
        tokio::time::sleep_until(scheduled).await;
        let mut request = client.post(&url).json(body);
        if let Some(key) = &args.api_key {
            request = request.bearer_auth(key);
        }
        let streamed = args.endpoint == Endpoint::Chat;
        tasks.spawn(async move {
            let (status, body, timing) = match request.send().await {
                Ok(resp) if streamed && resp.status().is_success() => {
                    match stream::read(resp, scheduled).await {
                        Ok((timing, usage, _)) => (Ok(200), Some(json!({ "usage": usage })), Some(timing)),
                        Err(why) => (Err(why), None, None),
                    }
                }
                Ok(resp) => {
                    let code = resp.status().as_u16();
                    let bytes = resp.bytes().await.unwrap_or_default();
                    (Ok(code), keep.then(|| serde_json::from_slice(&bytes).ok()).flatten(), None)
                }
                Err(e) => (Err(failure(&e)), None, None),
            };
            Outcome { index, latency_ms: scheduled.elapsed().as_secs_f64() * 1e3, status, body, timing }
        });
    }
    let mut outcomes = Vec::with_capacity(stream.len());
    while let Some(done) = tasks.join_next().await {
        if let Ok(outcome) = done {
            outcomes.push(outcome);
        }
    }
    let wall_s = start.elapsed().as_secs_f64();
    let client_cpu_cores = cpu.elapsed().as_secs_f64() / wall_s;
    let mut error_kinds = std::collections::BTreeMap::new();
    let mut ok_latencies = Vec::new();
    for o in &outcomes {
        match &o.status {
            Ok(200) => ok_latencies.push(o.latency_ms),
            Ok(code) => *error_kinds.entry(code.to_string()).or_insert(0) += 1,
            Err(why) => *error_kinds.entry((*why).to_string()).or_insert(0) += 1,
        }
    }
    let ok = ok_latencies.len();
    let timings: Vec<stream::TokenTiming> = outcomes.iter().filter_map(|o| o.timing).collect();
    let generation = (args.endpoint == Endpoint::Chat)
        .then(|| stream::GenerationReport::of(&timings, wall_s, args.chat.targets()));
    let in_slo = args.slo_ms.map(|slo| ok_latencies.iter().filter(|&&l| l <= slo).count() as f64);
    let mut sorted = ok_latencies.clone();
    sorted.sort_by(f64::total_cmp);
    let answers = keep.then(|| {
        let unanswered =
            |index| Outcome { index, latency_ms: 0.0, status: Err("unanswered"), body: None, timing: None };
        let mut by_index: Answers = (0..stream.len()).map(unanswered).collect();
        for o in &outcomes {
            by_index[o.index] = o.clone();
        }
        by_index
    });
    let report = RunReport {
        offered_rps: rate,
        sent: stream.len(),
        ok,
        errors: stream.len() - ok,
        error_kinds,
        wall_s,
        throughput_rps: ok as f64 / wall_s,
        latency: LatencySummary::of(ok_latencies),
        p75_ms: morph_core::stats::percentile(&sorted, 0.75),
        within_slo: in_slo.map(|n| n / stream.len().max(1) as f64),
        goodput_rps: in_slo.map(|n| n / wall_s),
        client_cpu_cores,
        classify: None,
        generation,
    };
    (report, answers)
}

fn print_table(reports: &[RunReport]) {
    println!(
        "{:>9} {:>7} {:>7} {:>7} {:>11} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>9} {:>10}",
        "offered/s",
        "sent",
        "ok",
        "errors",
        "throughput",
        "mean ms",
        "p50 ms",
        "p75 ms",
        "p98 ms",
        "p99 ms",
        "in SLO",
        "goodput/s",
        "client CPU"
    );
    for r in reports {
        let l = &r.latency;
        let share = r.within_slo.map_or_else(|| "-".into(), |s| format!("{:.1}%", s * 100.0));
        let goodput = r.goodput_rps.map_or_else(|| "-".into(), |g| format!("{g:.2}"));
        println!(
            "{:>9.1} {:>7} {:>7} {:>7} {:>11.2} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {share:>8} {goodput:>9} {:>9.0}%",
            r.offered_rps,
            r.sent,
            r.ok,
            r.errors,
            r.throughput_rps,
            l.mean_ms,
            l.p50_ms,
            r.p75_ms,
            l.p98_ms,
            l.p99_ms,
            r.client_cpu_cores * 100.0
        );
        if !r.error_kinds.is_empty() {
            println!("          errors by status: {:?}", r.error_kinds);
        }
        if let Some(g) = &r.generation {
            println!(
                "          TTFT p50 {:.0} p99 {:.0} ms; TPOT p50 {:.1} p99 {:.1} ms; {:.1} output tokens/s; \
                 goodput {:.2} req/s; p99s within targets: {}",
                g.ttft_p50_ms,
                g.ttft_p99_ms,
                g.tpot_p50_ms,
                g.tpot_p99_ms,
                g.output_tokens_per_s,
                g.goodput_rps,
                if g.within_targets { "yes" } else { "no" }
            );
        }
        if let Some(c) = &r.classify {
            let [t1, t2, t3, t4] = c.types.map(|t| t * 100.0);
            println!(
                "          utility {:.2} of {:.2} ({:.1}%); types 1–4: {t1:.1}% {t2:.1}% {t3:.1}% {t4:.1}%; answers by plan {:?}",
                c.utility,
                c.attainable,
                c.utility * 100.0 / c.attainable.max(f64::MIN_POSITIVE),
                c.plans
            );
        }
    }
}
