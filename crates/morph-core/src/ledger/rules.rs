//! The ledger's rules: which actions are legal in the current state. An action that breaks
//! one is a policy bug.

use crate::instance::InstanceId;
use crate::policy::{BatchPlan, Then};
use crate::request::RequestId;
use crate::step::StepPlan;
use crate::unit::{Ticket, UnitKind, UnitSpec};

use super::book::{Book, Place};

/// A broken rule, naming what broke it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Violation {
    #[error("{action} on instance {instance}, which is not up")]
    UnknownInstance { action: &'static str, instance: InstanceId },
    #[error("Run on instance {instance}, which is busy")]
    InstanceBusy { instance: InstanceId },
    #[error("{action} on instance {instance} with no requests")]
    EmptyBatch { action: &'static str, instance: InstanceId },
    #[error("{rows} rows on instance {instance}, whose runtime takes {max}")]
    TooManyRows { instance: InstanceId, rows: usize, max: u32 },
    #[error("request {} of {len} tokens on instance {instance}, whose runtime takes {max_len}", .request.0)]
    TooLong { request: RequestId, instance: InstanceId, len: u32, max_len: u32 },
    #[error("request {} is not waiting with the policy (unknown, running or answered)", .request.0)]
    NotWaiting { request: RequestId },
    #[error("request {} appears twice in one batch", .request.0)]
    Duplicate { request: RequestId },
    #[error("request {} is {} but instance {instance} is {}", .request.0, what(*.generation), kind(*.unit))]
    WrongKind { request: RequestId, generation: bool, instance: InstanceId, unit: UnitKind },
    #[error("request {} waits for stage {waiting_for}, instance {instance} runs stage {stage}", .request.0)]
    WrongStage { request: RequestId, waiting_for: u16, instance: InstanceId, stage: u16 },
    #[error("NextStage on instance {instance}, which runs no stage but the last")]
    NoNextStage { instance: InstanceId },
    #[error("Join on instance {instance}, which {why}")]
    NotContinuous { instance: InstanceId, why: &'static str },
    #[error(
        "Step on instance {instance}, which awaits no step (none reported since its last, or no continuous batch)"
    )]
    NoStepAwaited { instance: InstanceId },
    #[error("Step on instance {instance} feeds request {}, which is not in its batch", .request.0)]
    NotInBatch { request: RequestId, instance: InstanceId },
    #[error("Step on instance {instance} feeds request {} no token", .request.0)]
    NothingFed { request: RequestId, instance: InstanceId },
    #[error("Retire of instance {instance}, which is running work")]
    RetireBusy { instance: InstanceId },
    #[error("Launch with ticket {}, which names a launch still pending", .ticket.0)]
    TicketInUse { ticket: Ticket },
}

fn what(generation: bool) -> &'static str {
    if generation { "a generation" } else { "an encoder request" }
}

fn kind(unit: UnitKind) -> &'static str {
    match unit {
        UnitKind::Batch => "a batch unit (an encoder, or a decoder's prefill)",
        UnitKind::Generation => "a generating decoder",
    }
}

/// Checks `requests` for a batch on `instance` running `unit`: each waiting for the unit's
/// stage, of its kind, within its length, none twice, within its rows (`already` running).
pub(super) fn check_batch(
    book: &Book,
    instance: InstanceId,
    unit: &UnitSpec,
    requests: &[RequestId],
    already: usize,
    action: &'static str,
) -> Result<(), Violation> {
    if requests.is_empty() {
        return Err(Violation::EmptyBatch { action, instance });
    }
    let rows = already + requests.len();
    if rows > unit.runtime.max_batch as usize {
        return Err(Violation::TooManyRows { instance, rows, max: unit.runtime.max_batch });
    }
    for (i, &request) in requests.iter().enumerate() {
        if requests[..i].contains(&request) {
            return Err(Violation::Duplicate { request });
        }
        let Some(entry) = book.get(request) else { return Err(Violation::NotWaiting { request }) };
        let Place::Waiting { stage } = entry.place else { return Err(Violation::NotWaiting { request }) };
        let generation = entry.info.generation.is_some();
        if generation != (unit.kind == UnitKind::Generation) {
            return Err(Violation::WrongKind { request, generation, instance, unit: unit.kind });
        }
        if stage != unit.stage_index() {
            return Err(Violation::WrongStage {
                request,
                waiting_for: stage,
                instance,
                stage: unit.stage_index(),
            });
        }
        if !unit.runtime.fits(entry.info.input_len) {
            let (len, max_len) = (entry.info.input_len, unit.runtime.longest_taken());
            return Err(Violation::TooLong { request, instance, len, max_len });
        }
    }
    Ok(())
}

/// A plan that hands on to a next stage needs a stage that has one.
pub(super) fn check_plan(instance: InstanceId, unit: &UnitSpec, plan: BatchPlan) -> Result<(), Violation> {
    match (plan.then, unit.stage) {
        (Then::NextStage, Some(stage)) if !stage.is_last() => Ok(()),
        (Then::NextStage, _) => Err(Violation::NoNextStage { instance }),
        (Then::Finish, _) => Ok(()),
    }
}

/// A step on `instance`, whose batch holds `running`: some generation feeds, each of the batch,
/// once and at least one token.
pub(super) fn check_step(
    instance: InstanceId,
    running: &[RequestId],
    plan: &StepPlan,
) -> Result<(), Violation> {
    if plan.feeds.is_empty() {
        return Err(Violation::EmptyBatch { action: "Step", instance });
    }
    for (i, feed) in plan.feeds.iter().enumerate() {
        let request = feed.request;
        if plan.feeds[..i].iter().any(|f| f.request == request) {
            return Err(Violation::Duplicate { request });
        }
        if !running.contains(&request) {
            return Err(Violation::NotInBatch { request, instance });
        }
        if feed.tokens == 0 {
            return Err(Violation::NothingFed { request, instance });
        }
    }
    Ok(())
}
