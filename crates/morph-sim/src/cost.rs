//! Cost models: how long a batch, or one iteration of a continuous batch, takes on an instance.

use std::collections::BTreeMap;
use std::sync::Arc;

use morph_core::{
    GenerationCosts, LatencyProfile, Nanos, ShapeKind, StageTimes, TokenPlan, UnitSpec, time::ms_to_nanos,
};

use crate::price_table::{PriceTable, penalised};

/// One sequence of a batch: its input length, and the tokens it generates (0 for an encoder).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Job {
    pub input_len: u32,
    pub output_len: u32,
}

/// `Sync`: a partitioned run's servers share one ([`crate::partitions`]).
pub trait CostModel: Sync {
    /// The time an encoder batch takes on `unit` under token plan `plan`.
    fn batch_time(&self, unit: &UnitSpec, plan: TokenPlan, batch: &[Job]) -> Nanos;

    /// The time one iteration of generations takes: `running` sequences each produce a token
    /// or feed a chunk of their prompt; `fed` counts the prompt tokens it feeds, `decoding` the
    /// sequences that only decode in it.
    fn step_time(&self, unit: &UnitSpec, running: usize, fed: Fed, decoding: Decoding) -> Nanos;
}

/// Prompt tokens one iteration feeds, summed over its prompts: those fed in earlier iterations
/// (chunked prefill) and those fed in it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Fed {
    pub before: u32,
    pub now: u32,
}

/// The sequences of one iteration whose prompts were all fed before it: how many, and the
/// tokens their KV caches hold after it, summed (what their attention reads).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Decoding {
    pub sequences: usize,
    pub context: u32,
}

/// A latency profile, looked up at the padded shape the runtime runs, per pipeline stage and
/// token plan where one was measured (else the whole model's plain profile). Dynamic-shape
/// runtimes may pay a penalty factor (dynamic compilation is slower than a static graph; Arlo
/// measured 1.22–3.56× for TensorRT; 1.0 means none).
#[derive(Debug, Clone)]
pub struct ProfileCost {
    profile: LatencyProfile,
    /// The whole model's plain prices, shape by shape (`None`: a profile too large to table).
    table: Option<PriceTable>,
    /// By (stage index, plan).
    variants: BTreeMap<(u16, TokenPlan), LatencyProfile>,
    dynamic_penalty: f64,
}

impl ProfileCost {
    pub fn new(profile: LatencyProfile, dynamic_penalty: f64) -> Self {
        let table = PriceTable::new(&profile, dynamic_penalty);
        Self { profile, table, variants: BTreeMap::new(), dynamic_penalty }
    }

    /// Prices batches of pipeline stage `stage` (0 for a whole model) under `plan` by `profile`.
    pub fn with_variant(mut self, stage: u16, plan: TokenPlan, profile: LatencyProfile) -> Self {
        self.variants.insert((stage, plan), profile);
        self
    }
}

impl CostModel for ProfileCost {
    fn batch_time(&self, unit: &UnitSpec, plan: TokenPlan, batch: &[Job]) -> Nanos {
        let longest = batch.iter().map(|j| j.input_len).max().unwrap_or(1);
        let runtime = unit.runtime.running(longest);
        let shape = runtime.padded_shape(longest, batch.len() as u32);
        let variant = self.variants.get(&(unit.stage_index(), plan));
        if variant.is_none()
            && let Some(took) = self.table.as_ref().and_then(|table| table.get(shape, runtime.kind))
        {
            return took;
        }
        let base = variant.unwrap_or(&self.profile).latency(shape);
        match runtime.kind {
            ShapeKind::Fixed => base,
            ShapeKind::Dynamic => penalised(base, self.dynamic_penalty),
        }
    }

    /// An encoder profile prices an iteration as a batch of `running` one-token sequences.
    fn step_time(&self, unit: &UnitSpec, running: usize, _fed: Fed, _decoding: Decoding) -> Nanos {
        self.batch_time(unit, TokenPlan::Plain, &vec![Job { input_len: 1, output_len: 1 }; running.max(1)])
    }
}

/// SSJF's generation cost (§2, T = C + K·N): one iteration of `b` sequences takes `K(b)`, plus
/// the prefill `C` of the prompts that start in it; so a generation of `N` tokens alone takes
/// `C + K(1)·N`, and priced as one encoder-style batch, `b` sequences whose longest output is
/// `N` take `C + K(b)·N`. `K` is per token at each measured batch size, linear in between and
/// proportional to `b` past the largest. Beyond the paper, a decode step may also pay for the
/// tokens its sequences attend to ([`ContextCost`]), which `K(b)` measured at one context
/// length leaves out.
#[derive(Debug, Clone, PartialEq)]
pub struct LinearGeneration {
    prefill: Prefill,
    /// (batch size, ms per output token), sorted by batch size.
    k_ms: Vec<(u32, f64)>,
    context: ContextCost,
}

/// What a decode step's cached tokens add to `K(b)`: `ms_per_token` for each token beyond
/// `measured_at` per sequence (the context `K(b)` was measured at), summed over the step's
/// decoding sequences. The default adds nothing (the paper's model).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ContextCost {
    pub measured_at: u32,
    pub ms_per_token: f64,
}

impl ContextCost {
    /// Extra ms of a step for its `decoding` sequences.
    fn ms(&self, decoding: Decoding) -> f64 {
        let beyond = f64::from(decoding.context) - decoding.sequences as f64 * f64::from(self.measured_at);
        self.ms_per_token * beyond.max(0.0)
    }
}

/// The prefill `C` of the prompts that start together: one pass over all their tokens.
#[derive(Debug, Clone, PartialEq)]
pub enum Prefill {
    /// The same whatever the prompts (the paper's constant C).
    Constant(f64),
    /// By the prompts' total tokens: measured (tokens, ms) points, linear in between, the
    /// first below them and proportional past the last.
    ByTokens(Vec<(u32, f64)>),
}

impl Prefill {
    /// `C` in ms for prompts of `tokens` tokens in all.
    pub fn ms(&self, tokens: u32) -> f64 {
        match self {
            Prefill::Constant(c) => *c,
            Prefill::ByTokens(points) => morph_core::latency_profile::interpolate(points, tokens.max(1)),
        }
    }
}

impl LinearGeneration {
    pub fn new(prefill: Prefill, mut k_ms: Vec<(u32, f64)>) -> Result<Self, String> {
        k_ms.sort_by_key(|p| p.0);
        let prefill_ok = match &prefill {
            Prefill::Constant(c) => *c >= 0.0,
            Prefill::ByTokens(points) => {
                !points.is_empty() && points.iter().all(|p| p.0 >= 1 && p.1.is_finite() && p.1 >= 0.0)
            }
        };
        if !prefill_ok || k_ms.is_empty() || k_ms[0].0 == 0 || k_ms.iter().any(|p| p.1 <= 0.0) {
            return Err(
                "linear generation cost needs C >= 0 (at prompt lengths >= 1) and K > 0 at batch sizes >= 1"
                    .into(),
            );
        }
        let prefill = match prefill {
            Prefill::ByTokens(mut points) => {
                points.sort_by_key(|p| p.0);
                Prefill::ByTokens(points)
            }
            constant => constant,
        };
        Ok(Self { prefill, k_ms, context: ContextCost::default() })
    }

    /// Prices each decode step's cached tokens too.
    pub fn with_context(self, context: ContextCost) -> Result<Self, String> {
        if !(context.ms_per_token.is_finite() && context.ms_per_token >= 0.0) {
            return Err("a decode step's ms per cached token must be >= 0".into());
        }
        Ok(Self { context, ..self })
    }

    /// `K(b)` in ms per token.
    pub fn k_ms(&self, batch: usize) -> f64 {
        morph_core::latency_profile::interpolate(&self.k_ms, u32::try_from(batch.max(1)).unwrap_or(u32::MAX))
    }

    /// What SSJF weighs a job by: `K(1)`, and a prompt token's prefill at the longest measured
    /// prompt (none under a constant `C`).
    pub fn costs(&self) -> GenerationCosts {
        let prefill_token_ms = match &self.prefill {
            Prefill::Constant(_) => None,
            Prefill::ByTokens(points) => points.last().map(|&(tokens, ms)| ms / f64::from(tokens)),
        };
        GenerationCosts { step_ms: self.k_ms(1), prefill_token_ms }
    }
}

impl CostModel for LinearGeneration {
    fn batch_time(&self, _unit: &UnitSpec, _plan: TokenPlan, batch: &[Job]) -> Nanos {
        let longest = batch.iter().map(|j| j.output_len).max().unwrap_or(0);
        let prompts = batch.iter().map(|j| j.input_len).sum();
        // SSJF Eq. (T = C + K·N), K at this batch size
        ms_to_nanos(self.prefill.ms(prompts) + self.k_ms(batch.len()) * f64::from(longest))
    }

    /// K(running) plus the prefill's share fed in this iteration: C(before + now) − C(before),
    /// so the chunks of a prompt cost C(its tokens) in all, and a later chunk, which attends to
    /// the ones before it, costs more than the first; plus what the decoding sequences' cached
    /// tokens add.
    fn step_time(&self, _unit: &UnitSpec, running: usize, fed: Fed, decoding: Decoding) -> Nanos {
        let upto = |tokens: u32| if tokens == 0 { 0.0 } else { self.prefill.ms(tokens) };
        let prefill = if fed.now == 0 { 0.0 } else { upto(fed.before + fed.now) - upto(fed.before) };
        ms_to_nanos(prefill + self.k_ms(running) + self.context.ms(decoding))
    }
}

/// A pipeline's stage times (QUART's setting): a batch of `b` requests on a stage takes `b`
/// times one request's time with the hop in (stages serve one request at a time, spec §1.9);
/// a whole-model unit takes every stage's time.
#[derive(Debug, Clone)]
pub struct PipelineCost(pub Arc<StageTimes>);

impl CostModel for PipelineCost {
    fn batch_time(&self, unit: &UnitSpec, _plan: TokenPlan, batch: &[Job]) -> Nanos {
        ms_to_nanos(self.0.unit_ms(unit) * batch.len().max(1) as f64)
    }

    fn step_time(&self, unit: &UnitSpec, running: usize, _fed: Fed, _decoding: Decoding) -> Nanos {
        ms_to_nanos(self.0.unit_ms(unit) * running.max(1) as f64)
    }
}

/// How long a launched whole model takes to come up: `cold` from disk, `warm` when its
/// parameters are still cached in its host's memory (QUART's parameter cache; Arlo's
/// replacement "usually lasts approximately 1 second"). A pipeline stage takes its share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Startup {
    pub cold: Nanos,
    pub warm: Nanos,
}

impl Default for Startup {
    fn default() -> Self {
        Self { cold: 1_000_000_000, warm: 1_000_000_000 }
    }
}

#[cfg(test)]
mod tests {
    use morph_core::{Point, RuntimeSpec};

    use super::*;

    #[test]
    fn fixed_runtimes_pay_their_shape_dynamic_ones_the_batch_and_penalty() {
        let p = LatencyProfile::from_points(
            "m",
            [
                Point { batch: 1, len: 16, ms: 1.0 },
                Point { batch: 1, len: 64, ms: 2.0 },
                Point { batch: 4, len: 16, ms: 3.0 },
                Point { batch: 4, len: 64, ms: 8.0 },
            ],
        )
        .unwrap();
        let cost = ProfileCost::new(p, 1.5);
        let jobs = |len| [Job { input_len: len, output_len: 0 }];
        let unit = |r| UnitSpec::batch(r);
        let plain = TokenPlan::Plain;
        assert_eq!(cost.batch_time(&unit(RuntimeSpec::fixed(64, 4)), plain, &jobs(10)), 8_000_000);
        assert_eq!(cost.batch_time(&unit(RuntimeSpec::dynamic(64, 4)), plain, &jobs(16)), 1_500_000);
        // batch 1, len 40: halfway between 1 ms and 2 ms, times 1.5
        assert_eq!(cost.batch_time(&unit(RuntimeSpec::dynamic(64, 4)), plain, &jobs(40)), 2_250_000);
    }

    #[test]
    fn a_stage_or_plan_with_its_own_profile_is_priced_by_it() {
        let whole = LatencyProfile::from_points("m", [Point { batch: 1, len: 16, ms: 6.0 }]).unwrap();
        let merged = LatencyProfile::from_points("m", [Point { batch: 1, len: 16, ms: 4.0 }]).unwrap();
        let stage1 = LatencyProfile::from_points("m", [Point { batch: 1, len: 16, ms: 2.0 }]).unwrap();
        let cost = ProfileCost::new(whole, 1.0).with_variant(0, TokenPlan::Merge(2), merged).with_variant(
            1,
            TokenPlan::Plain,
            stage1,
        );
        let job = [Job { input_len: 16, output_len: 0 }];
        let unit = UnitSpec::batch(RuntimeSpec::fixed(16, 1));
        let stage = |index| morph_core::StageSpec::even(morph_core::ModelId(0), index, 3, 6);
        assert_eq!(cost.batch_time(&unit, TokenPlan::Plain, &job), 6_000_000);
        assert_eq!(cost.batch_time(&unit, TokenPlan::Merge(2), &job), 4_000_000);
        assert_eq!(cost.batch_time(&unit.with_stage(stage(1)), TokenPlan::Plain, &job), 2_000_000);
        assert_eq!(
            cost.batch_time(&unit.with_stage(stage(2)), TokenPlan::Plain, &job),
            6_000_000,
            "unmeasured: whole"
        );
    }

    #[test]
    fn linear_generation_is_c_plus_k_times_the_longest_output() {
        let cost = LinearGeneration::new(Prefill::Constant(100.0), vec![(1, 10.0), (4, 16.0)]).unwrap();
        let rt = &UnitSpec::generation(RuntimeSpec::dynamic(512, 4));
        let job = |out| Job { input_len: 20, output_len: out };
        let plain = TokenPlan::Plain;
        assert_eq!(cost.batch_time(rt, plain, &[job(50)]), ms_to_nanos(100.0 + 10.0 * 50.0));
        // b = 2: K halfway from 10 to 16 by a third: 12 ms per token; N = the longest, 30.
        assert_eq!(cost.batch_time(rt, plain, &[job(5), job(30)]), ms_to_nanos(100.0 + 12.0 * 30.0));
        assert_eq!(cost.k_ms(8), 32.0, "past the largest batch K grows in proportion");
        assert_eq!(cost.step_time(rt, 4, Fed::default(), Decoding::default()), ms_to_nanos(16.0));
        assert_eq!(
            cost.step_time(rt, 4, Fed { before: 0, now: 20 }, Decoding::default()),
            ms_to_nanos(116.0)
        );
        assert!(LinearGeneration::new(Prefill::Constant(1.0), vec![]).is_err());
        assert!(LinearGeneration::new(Prefill::ByTokens(vec![(0, 1.0)]), vec![(1, 1.0)]).is_err());
    }

    /// The prefill by prompt tokens, against hand-computed values: C is measured at 100 and 500
    /// tokens (50 and 250 ms); the prompts that start together are one pass over their tokens.
    #[test]
    fn prefill_grows_with_the_prompts_tokens() {
        let prefill = Prefill::ByTokens(vec![(500, 250.0), (100, 50.0)]);
        let cost = LinearGeneration::new(prefill, vec![(1, 10.0)]).unwrap();
        let rt = &UnitSpec::generation(RuntimeSpec::dynamic(2048, 4));
        // 100 + 200 tokens: halfway from 100 to 500, so 150 ms; plus K(2) = 20 ms (proportional
        // past batch 1).
        let fresh = |now| Fed { before: 0, now };
        let none = Decoding::default();
        assert_eq!(cost.step_time(rt, 2, fresh(300), none), ms_to_nanos(150.0 + 20.0));
        assert_eq!(
            cost.step_time(rt, 1, fresh(40), none),
            ms_to_nanos(50.0 + 10.0),
            "clamped below 100 tokens"
        );
        assert_eq!(
            cost.step_time(rt, 1, fresh(1000), none),
            ms_to_nanos(500.0 + 10.0),
            "proportional past 500"
        );
        // Chunked: 1,000 tokens as 256 + 256 + 256 + 232 cost C(1000) in all; the first chunk
        // C(256) = 128 ms, the second C(512) − C(256) = 256 − 128 ms.
        assert_eq!(cost.step_time(rt, 1, fresh(256), none), ms_to_nanos(128.0 + 10.0));
        assert_eq!(cost.step_time(rt, 1, Fed { before: 256, now: 256 }, none), ms_to_nanos(128.0 + 10.0));
        let chunks: u64 = [(0, 256), (256, 256), (512, 256), (768, 232)]
            .iter()
            .map(|&(before, now)| cost.step_time(rt, 1, Fed { before, now }, none) - ms_to_nanos(10.0))
            .sum();
        assert!(chunks.abs_diff(ms_to_nanos(500.0)) <= 4, "{chunks}");
        let job = |input_len, output_len| Job { input_len, output_len };
        let batch = [job(250, 3), job(250, 5)];
        assert_eq!(cost.batch_time(rt, TokenPlan::Plain, &batch), ms_to_nanos(250.0 + 20.0 * 5.0));
    }

    /// A decode step pays `ms_per_token` for each cached token beyond `measured_at` per
    /// decoding sequence, and nothing for contexts shorter than that.
    #[test]
    fn a_decode_step_pays_for_its_context_beyond_where_k_was_measured() {
        let context = ContextCost { measured_at: 128, ms_per_token: 0.01 };
        let cost = LinearGeneration::new(Prefill::Constant(100.0), vec![(1, 10.0), (4, 16.0)])
            .unwrap()
            .with_context(context)
            .unwrap();
        let rt = &UnitSpec::generation(RuntimeSpec::dynamic(2048, 4));
        let step = |running, fed, sequences, context| {
            cost.step_time(rt, running, fed, Decoding { sequences, context })
        };
        let none = Fed::default();
        assert_eq!(step(4, none, 4, 4 * 128), ms_to_nanos(16.0), "at the measured context: K(4)");
        assert_eq!(step(4, none, 4, 4 * 100), ms_to_nanos(16.0), "shorter contexts cost no less");
        // 4 × 628 tokens: 4 × 500 beyond the measured 128, at 0.01 ms each.
        assert_eq!(step(4, none, 4, 4 * 628), ms_to_nanos(16.0 + 20.0));
        // One of the 4 feeds its prompt (C = 100 ms); the other 3 decode at 1,128 tokens each.
        assert_eq!(step(4, Fed { before: 0, now: 50 }, 3, 3 * 1128), ms_to_nanos(100.0 + 16.0 + 30.0));
        let plain = LinearGeneration::new(Prefill::Constant(100.0), vec![(1, 10.0), (4, 16.0)]).unwrap();
        assert_eq!(
            plain.step_time(rt, 4, none, Decoding { sequences: 4, context: 4 * 628 }),
            ms_to_nanos(16.0)
        );
        assert!(plain.clone().with_context(ContextCost { measured_at: 0, ms_per_token: -1.0 }).is_err());
    }
}
