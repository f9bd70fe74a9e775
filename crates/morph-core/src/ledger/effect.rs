//! What the ledger asks a driver to do. Every request admitted ends with exactly one
//! [`Effect::Answer`].

use crate::host::HostId;
use crate::instance::InstanceId;
use crate::policy::{BatchPlan, DropReason};
use crate::request::RequestId;
use crate::step::StepPlan;
use crate::unit::{Ticket, UnitSpec};

use super::rules::Violation;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Run this batch on the (idle) instance under `plan`: encoder inputs are the requests'
    /// tokens, or for a later stage the activations the previous stage handed on.
    Run { instance: InstanceId, requests: Vec<RequestId>, plan: BatchPlan },
    /// Add these generations to the instance's continuous batch, for its next iteration.
    Join { instance: InstanceId, requests: Vec<RequestId> },
    /// Run the instance's next iteration as `plan` says (a continuous batch's as the policy
    /// decided it; a static batch's over all its generations).
    Step { instance: InstanceId, plan: StepPlan },
    /// Cancel this running generation at the end of the current iteration (its client left);
    /// the driver reports it among that iteration's finished sequences.
    Cancel { instance: InstanceId, request: RequestId },
    /// Start `unit` on `host` (`None`: the driver picks one with a free slot).
    Launch { ticket: Ticket, unit: UnitSpec, host: Option<HostId> },
    /// Stop the instance and free its slot; it holds no work.
    Retire { instance: InstanceId },
    /// Load `unit`'s parameters into `host`'s memory ([`crate::Action::Preload`]).
    Preload { unit: UnitSpec, host: HostId },
    /// The request is over: deliver its output, its error, or nothing (cancelled).
    Answer { request: RequestId, outcome: Outcome },
    /// Keep the request's output as the input of pipeline stage `stage`; it waits for the policy.
    Forward { request: RequestId, stage: u16 },
    /// The policy broke a ledger rule; the action was not applied (log and count it).
    Refused(Violation),
}

/// How a request ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Its batch finished: deliver the output (a generation has streamed it already).
    Done,
    /// The engine failed its batch: deliver the engine's error.
    Failed,
    /// Its client went away; nothing to deliver.
    Cancelled,
    /// The policy gave up on it.
    Dropped(DropReason),
    /// The policy broke a rule with it (see [`Effect::Refused`]): an internal error.
    PolicyError,
}
