//! What the driver tells a decoder instance's thread: sent at once, or, while a call's
//! generations are admitted together, held until the call is admitted or refused and then sent
//! with the steps last, so that no step runs a generation of a refused call ([`Held`]).

use morph_core::{InstanceId, StepPlan};
use morph_decoder::{DecoderThread, GenRequest};
use morph_engine::EngineError;

/// One command to a decoder thread.
#[derive(Debug)]
pub(crate) enum ToDecoder {
    Join(Vec<GenRequest>),
    Step(StepPlan),
    Cancel(u64),
}

impl ToDecoder {
    pub(crate) fn send(self, thread: &DecoderThread) -> Result<(), EngineError> {
        match self {
            ToDecoder::Join(requests) => thread.join(requests),
            ToDecoder::Step(plan) => thread.step(plan),
            ToDecoder::Cancel(key) => thread.cancel(key),
        }
    }
}

/// Commands held while a call's generations are admitted.
#[derive(Debug, Default)]
pub(crate) struct Held(Vec<(InstanceId, ToDecoder)>);

impl Held {
    pub(crate) fn push(&mut self, instance: InstanceId, command: ToDecoder) {
        self.0.push((instance, command));
    }

    /// The commands in the order to send them: every join and cancel first, each thread's steps
    /// after, so that a thread woken by a step finds the cancellations of a refused call's
    /// generations beside their joins and drops them before it computes.
    pub(crate) fn in_sending_order(self) -> impl Iterator<Item = (InstanceId, ToDecoder)> {
        let (steps, others): (Vec<_>, Vec<_>) =
            self.0.into_iter().partition(|(_, command)| matches!(command, ToDecoder::Step(_)));
        others.into_iter().chain(steps)
    }
}
