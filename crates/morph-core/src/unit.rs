//! Units: what an instance runs. A unit is a runtime shape, what it computes (an encoder or a
//! decoder), optionally one stage of a pipelined model (a layer range), and its thread count.
//! Launches are tickets; an instance that comes up says how it started and how long it took.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::host::HostId;
use crate::runtime::RuntimeSpec;
use crate::time::Nanos;

/// What a unit computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UnitKind {
    /// Batches: a batch of sequences in, one output each (pooled vectors, hidden states, scores)
    /// out, in one pass: an encoder or a stage of one, or a decoder's prefill stage.
    Batch,
    /// Generations: a decoder LM producing tokens, run as a static or a continuous batch.
    Generation,
}

/// A model of the deployment, by index (0: the served model). The driver maps it to files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
pub struct ModelId(pub u16);

/// One stage of a pipelined model: layers `first_layer..end_layer` of `model`, stage `index`
/// of `count` (QUART's "function"). Stage 0 takes token ids; later stages take the hidden
/// states the previous stage handed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct StageSpec {
    pub model: ModelId,
    pub index: u16,
    pub count: u16,
    pub first_layer: u16,
    pub end_layer: u16,
}

impl StageSpec {
    /// Stage `index` of a `layers`-layer model cut into `count` stages of consecutive layers,
    /// as even as they divide.
    pub fn even(model: ModelId, index: u16, count: u16, layers: u16) -> Self {
        let bound = |k: u16| (u32::from(k) * u32::from(layers) / u32::from(count.max(1))) as u16;
        Self { model, index, count, first_layer: bound(index), end_layer: bound(index + 1) }
    }

    /// Whether the pipeline ends with this stage.
    pub fn is_last(&self) -> bool {
        self.index + 1 >= self.count
    }
}

/// What one instance runs: its runtime shape, kind, optional stage and thread count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct UnitSpec {
    pub runtime: RuntimeSpec,
    pub kind: UnitKind,
    /// `None`: the whole model.
    pub stage: Option<StageSpec>,
    /// Intra-op threads; `None`: the engine's default.
    pub threads: Option<u16>,
}

impl UnitSpec {
    /// A whole model running batches of `runtime` (an encoder, or a decoder's prefill) with the
    /// engine's default threads.
    pub fn batch(runtime: RuntimeSpec) -> Self {
        Self { runtime, kind: UnitKind::Batch, stage: None, threads: None }
    }

    /// A whole decoder generating on `runtime` (its `max_batch` bounds the continuous batch).
    pub fn generation(runtime: RuntimeSpec) -> Self {
        Self { runtime, kind: UnitKind::Generation, stage: None, threads: None }
    }

    pub fn with_stage(self, stage: StageSpec) -> Self {
        Self { stage: Some(stage), ..self }
    }

    pub fn with_threads(self, threads: u16) -> Self {
        Self { threads: Some(threads), ..self }
    }

    /// With `threads` when given, else as it is.
    pub fn with_threads_if(self, threads: Option<u16>) -> Self {
        Self { threads: threads.or(self.threads), ..self }
    }

    /// The stage a request must have reached to run here (0 for a whole model).
    pub fn stage_index(&self) -> u16 {
        self.stage.map_or(0, |s| s.index)
    }
}

impl fmt::Display for UnitSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.runtime)?;
        if let Some(s) = self.stage {
            write!(f, "/stage{}of{}:L{}-{}", s.index, s.count, s.first_layer, s.end_layer)?;
        }
        if let Some(t) = self.threads {
            write!(f, "/t{t}")?;
        }
        Ok(())
    }
}

/// Names one [`crate::Action::Launch`]; the driver echoes it in the instance's
/// [`crate::Event::InstanceUp`] or [`crate::Event::LaunchFailed`], so two launches of the
/// same unit are never confused. A policy draws its tickets from a [`Tickets`] counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Ticket(pub u64);

/// A policy's source of fresh tickets.
#[derive(Debug, Clone, Default)]
pub struct Tickets(u64);

impl Tickets {
    pub fn issue(&mut self) -> Ticket {
        self.0 += 1;
        Ticket(self.0)
    }
}

/// How a launched unit started (QUART's three levels).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StartKind {
    /// From disk: read, parse, build and optimise.
    Cold,
    /// From parameters kept in host memory.
    Warm,
    /// A parked, loaded replica put back in service.
    Hot,
}

impl StartKind {
    pub fn label(self) -> &'static str {
        match self {
            StartKind::Cold => "cold",
            StartKind::Warm => "warm",
            StartKind::Hot => "hot",
        }
    }
}

/// How a launch came up: its ticket, where, its start kind and the time from `Launch` to up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Launched {
    pub ticket: Ticket,
    pub host: HostId,
    pub start: StartKind,
    pub took: Nanos,
}
