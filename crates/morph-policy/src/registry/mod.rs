//! Every policy by name, in one list ([`POLICIES`]): its family, what it needs from the
//! deployment, and how it is built from parameters (a scenario's `[[policies]]` table, or
//! `morph serve --policy NAME --policy-params JSON`). The live server's start-up checks and the
//! simulator read this list; nothing else compares policy names.

mod build;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::Arc;

use morph_core::{
    GenerationCosts, HostSlots, LatencyProfile, Nanos, Policy, StageTimes, StepBudget, TokenPlan,
};

use crate::batching::RefitSink;
use crate::give_up::GiveUpLate;

/// What a policy schedules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Batches for whole encoders or a pipeline's stages, by length: Morph's default.
    Batching,
    /// Fixed-shape runtimes laid out from a latency profile: Arlo and its baselines.
    Arlo,
    /// Pipeline stages with their own replicas: QUART and its baselines.
    Pipeline,
    /// A token plan per batch: OTAS and its baselines.
    TokenPlans,
    /// Generations on whole decoders: SSJF and FCFS.
    Generation,
}

/// What a policy needs from the deployment before it can be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Needs {
    /// A latency profile of the instances (`--profile`, a scenario's `cluster.profile`).
    pub profile: bool,
    /// A latency SLO (`--slo-ms`, `slo_ms`).
    pub slo: bool,
    /// A model cut into pipeline stages (`--stages N`, a scenario's `cluster.pipeline`).
    pub stages: bool,
    /// A latency profile and an accuracy per task for each token plan it plans with
    /// (`--plan-profiles DIR`, a scenario's `cluster.variants` and `workload.service`).
    pub plan_profiles: bool,
    /// Predicted output lengths (`--predictor`).
    pub predictions: bool,
    /// What a decode step and a prompt token cost (the live server measures them at start; a
    /// scenario's `cluster.generation`).
    pub generation_costs: bool,
}

/// One policy: its name, family, needs, and how it is built.
#[derive(Debug)]
pub struct PolicyKind {
    pub name: &'static str,
    pub family: Family,
    pub needs: Needs,
    /// One line for `--help` and the docs.
    pub summary: &'static str,
    build: build::Builder,
}

const NONE: Needs = Needs {
    profile: false,
    slo: false,
    stages: false,
    plan_profiles: false,
    predictions: false,
    generation_costs: false,
};
const ARLO: Needs = Needs { profile: true, slo: true, ..NONE };
const PIPELINE: Needs = Needs { stages: true, slo: true, ..NONE };
const PLANS: Needs = Needs { plan_profiles: true, ..NONE };

/// Every policy Morph has.
pub const POLICIES: &[PolicyKind] = &[
    PolicyKind {
        name: "dynamic-batching",
        family: Family::Batching,
        needs: NONE,
        summary: "Morph's default: dynamic batching in length buckets (TEI's single FIFO without buckets)",
        build: build::dynamic_batching,
    },
    PolicyKind {
        name: "arlo",
        family: Family::Arlo,
        needs: ARLO,
        summary: "Arlo, robust: runtimes from the first second's lengths, stable periodic allocation, late binding",
        build: build::arlo,
    },
    PolicyKind {
        name: "arlo-paper",
        family: Family::Arlo,
        needs: ARLO,
        summary: "Arlo in the paper's exact form: staircase runtimes, periodic allocation, Algorithm 1 on arrival",
        build: build::arlo,
    },
    PolicyKind {
        name: "arlo-ilb",
        family: Family::Arlo,
        needs: ARLO,
        summary: "arlo-paper with the ILB dispatcher (Table 4's ablation)",
        build: build::arlo,
    },
    PolicyKind {
        name: "arlo-ig",
        family: Family::Arlo,
        needs: ARLO,
        summary: "arlo-paper with the IG dispatcher (Table 4's ablation)",
        build: build::arlo,
    },
    PolicyKind {
        name: "st",
        family: Family::Arlo,
        needs: ARLO,
        summary: "Arlo's baseline: one static runtime at the longest length, load balanced",
        build: build::arlo,
    },
    PolicyKind {
        name: "dt",
        family: Family::Arlo,
        needs: ARLO,
        summary: "Arlo's baseline: one dynamic-shape runtime, load balanced",
        build: build::arlo,
    },
    PolicyKind {
        name: "infaas",
        family: Family::Arlo,
        needs: ARLO,
        summary: "Arlo's baseline: the staircase variants split evenly, first-fit dispatch",
        build: build::arlo,
    },
    PolicyKind {
        name: "ssjf",
        family: Family::Generation,
        needs: Needs { predictions: true, generation_costs: true, ..NONE },
        summary: "SSJF: shortest predicted output first, continuous batching of 4, aging",
        build: build::ssjf,
    },
    PolicyKind {
        name: "fcfs",
        family: Family::Generation,
        needs: NONE,
        summary: "SSJF's baseline: first come, first served, continuous batching of 4",
        build: build::ssjf,
    },
    PolicyKind {
        name: "quart",
        family: Family::Pipeline,
        needs: PIPELINE,
        summary: "QUART: queueing theory finds the key stages, a PID adds replicas there, the host cache starts them",
        build: build::pipeline,
    },
    PolicyKind {
        name: "infless-like",
        family: Family::Pipeline,
        needs: PIPELINE,
        summary: "QUART's baseline: whole-model replicas, cold starts, scaled by capacity",
        build: build::pipeline,
    },
    PolicyKind {
        name: "inferline-like",
        family: Family::Pipeline,
        needs: PIPELINE,
        summary: "QUART's baseline: every stage sized from the ingress traffic envelope",
        build: build::pipeline,
    },
    PolicyKind {
        name: "cocktail-like",
        family: Family::Pipeline,
        needs: PIPELINE,
        summary: "QUART's baseline: the ingress rate forecast one cold start ahead, every stage provisioned for it",
        build: build::pipeline,
    },
    PolicyKind {
        name: "uniform-pipeline",
        family: Family::Pipeline,
        needs: PIPELINE,
        summary: "QUART's baseline: every stage the same count, for the slowest stage's utilisation",
        build: build::pipeline,
    },
    PolicyKind {
        name: "otas",
        family: Family::TokenPlans,
        needs: PLANS,
        summary: "OTAS: per-batch token plans chosen for utility within deadlines",
        build: build::otas,
    },
    PolicyKind {
        name: "otas-plain",
        family: Family::TokenPlans,
        needs: PLANS,
        summary: "OTAS planning only the plain model (its scheduling gain without the token gain)",
        build: build::otas,
    },
    PolicyKind {
        name: "pets-like",
        family: Family::TokenPlans,
        needs: PLANS,
        summary: "OTAS's baseline: one fixed plan, every batch runs",
        build: build::otas,
    },
    PolicyKind {
        name: "infaas-like",
        family: Family::TokenPlans,
        needs: PLANS,
        summary: "OTAS's baseline: model variants switched by load",
        build: build::otas,
    },
];

impl PolicyKind {
    /// The policy named `name`, or an error listing every name.
    pub fn find(name: &str) -> Result<&'static PolicyKind, PolicyError> {
        POLICIES.iter().find(|p| p.name == name).ok_or_else(|| PolicyError::Unknown(name.to_string()))
    }

    /// The policy from `params` (a JSON object of its config fields; missing fields take the
    /// preset's values, unknown ones are an error), with what it takes from `ctx`.
    /// With a deadline in `ctx`, the policy gives up on requests that can no longer start in
    /// time ([`GiveUpLate`]).
    pub fn build(&self, params: &serde_json::Value, ctx: &Context) -> Result<Box<dyn Policy>, PolicyError> {
        let policy = (self.build)(self.name, params, ctx)?;
        Ok(match ctx.deadline {
            Some(within) => Box::new(GiveUpLate::new(policy, within)),
            None => policy,
        })
    }

    /// Whether its instances may be `morph worker` processes (batches of a whole model or of a
    /// stage; the other families hold per-instance state in the server's threads).
    pub fn runs_in_worker_processes(&self) -> bool {
        matches!(self.family, Family::Batching | Family::Pipeline)
    }
}

/// Builds the policy `name` (see [`PolicyKind::build`]).
pub fn build(name: &str, params: &serde_json::Value, ctx: &Context) -> Result<Box<dyn Policy>, PolicyError> {
    PolicyKind::find(name)?.build(params, ctx)
}

/// Every policy's name, comma separated.
fn names() -> String {
    POLICIES.iter().map(|p| p.name).collect::<Vec<_>>().join(", ")
}

#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("unknown policy '{0}' (known: {known})", known = names())]
    Unknown(String),
    #[error("policy '{0}' needs a pipeline (a scenario's cluster.pipeline; `morph serve --stages N`)")]
    NeedsPipeline(String),
    #[error("parameters of policy '{name}': {source}")]
    Params { name: String, source: serde_json::Error },
    #[error("policy '{0}' needs a latency profile (a scenario's cluster.profile, or --profile)")]
    NeedsProfile(String),
    #[error(
        "policy '{name}' plans with token plan {plan}, which has no latency profile (a profile naming \"plan\": \"{plan}\")"
    )]
    NeedsPlanProfile { name: String, plan: TokenPlan },
    #[error(
        "policy '{name}' plans with token plan {plan}, which has no accuracy (the policy's accuracy table, or a profile's accuracy.json)"
    )]
    NeedsAccuracy { name: String, plan: TokenPlan },
    #[error("policy '{0}' needs an SLO (slo_ms in the scenario or the policy, or --slo-ms)")]
    NeedsSlo(String),
    #[error(
        "policy '{0}' needs the decoder's generation costs (a scenario's cluster.generation; measured by `morph serve`)"
    )]
    NeedsGenerationCosts(String),
}

/// What a policy may take from the deployment it runs in.
#[derive(Debug, Clone, Default)]
pub struct Context {
    /// The instances' latency profile.
    pub profile: Option<Arc<LatencyProfile>>,
    /// The deployment's latency SLO.
    pub slo: Option<Nanos>,
    /// A pipelined model's stage times, for pipeline policies.
    pub pipeline: Option<Arc<StageTimes>>,
    /// A decoder's step and prefill costs, for SSJF's job lengths and aging.
    pub generation: Option<GenerationCosts>,
    /// What one step of a decoder instance may feed (its prefill chunk, its prompt tokens).
    pub step: StepBudget,
    /// The hosts and their slots; default: one host with every slot.
    pub hosts: Option<HostSlots>,
    /// Latency profiles of token plans other than the plain model's (OTAS's γ).
    pub plans: BTreeMap<TokenPlan, Arc<LatencyProfile>>,
    /// Accuracy per task (by task index) under each token plan, from the profiler.
    pub accuracy: BTreeMap<TokenPlan, Vec<f64>>,
    /// Where a profile refitted to the batches served is kept (dynamic batching's
    /// `refine_every`); `None`: the policy alone takes it.
    pub refits: Option<RefitSink>,
    /// How long after its arrival a request must be answered (`--deadline-ms`): one that can
    /// no longer start in time is given up; `None`: every request is served however late.
    pub deadline: Option<Nanos>,
}
