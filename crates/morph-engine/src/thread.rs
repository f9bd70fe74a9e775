//! An engine on its own OS thread (an [`Actor`]), reached through a cloneable async
//! [`EngineHandle`]. Each batch travels with a oneshot for its reply; dropping the
//! [`EngineThread`] finishes the batches sent before and joins the thread.

use morph_core::{Computed, RuntimeSpec, TokenPlan};
use tokio::sync::oneshot;

use crate::actor::{Actor, Postbox};
use crate::cores::{CoreShare, Cores};
use crate::on_core::OnCore;
use crate::{Engine, EngineError, Rows};

type Reply = oneshot::Sender<Result<Ran, EngineError>>;

/// A batch's outputs, and how long the engine computed it ([`OnCore`]: not the time it waited
/// for its cores, or for a core the host's other threads held) at which priced shape.
#[derive(Debug)]
pub struct Ran {
    pub vectors: Vec<Vec<f32>>,
    pub computed: Computed,
}

/// A batch to run and where its outputs go.
struct Batch {
    rows: Rows,
    plan: TokenPlan,
    reply: Reply,
}

/// Owns the engine thread.
#[derive(Debug)]
pub struct EngineThread {
    actor: Actor<Batch>,
    runtime: RuntimeSpec,
}

/// Sends batches to a worker; cheap to clone.
#[derive(Debug, Clone)]
pub struct EngineHandle {
    postbox: Postbox<Batch>,
    runtime: RuntimeSpec,
}

impl EngineThread {
    /// Moves `engine` onto a new thread named `name`.
    pub fn spawn(name: String, engine: Box<dyn Engine>) -> std::io::Result<Self> {
        Self::spawn_sharing(name, engine, None)
    }

    /// As [`Self::spawn`]; with `cores`, each batch runs only while it holds that many of the
    /// host's cores (see [`crate::cores`]).
    pub fn spawn_sharing(
        name: String,
        mut engine: Box<dyn Engine>,
        cores: Option<(CoreShare, Cores)>,
    ) -> std::io::Result<Self> {
        let runtime = engine.runtime();
        let actor = Actor::spawn(name, move |mailbox| {
            while let Some(Batch { rows, plan, reply }) = mailbox.recv() {
                let held = cores.as_ref().map(|(share, threads)| share.hold(*threads));
                let clock = OnCore::start();
                let out = engine.run(rows.as_input(), plan).and_then(finite);
                let took = clock.took();
                drop(held);
                let lens = rows.as_input().lens(engine.dim());
                let computed = Computed { took, shape: runtime.priced_shape(&lens, engine.packs(plan)) };
                // The requester may have gone away; its result is simply dropped.
                let _ = reply.send(out.map(|vectors| Ran { vectors, computed }));
            }
        })?;
        Ok(Self { actor, runtime })
    }

    pub fn handle(&self) -> EngineHandle {
        EngineHandle { postbox: self.actor.postbox(), runtime: self.runtime }
    }
}

/// A batch's outputs, unless any value is NaN or infinite (never answered as a vector).
fn finite(vectors: Vec<Vec<f32>>) -> Result<Vec<Vec<f32>>, EngineError> {
    match vectors.iter().flatten().all(|v| v.is_finite()) {
        true => Ok(vectors),
        false => Err(EngineError::Inference("the model produced NaN or infinite values".into())),
    }
}

impl EngineHandle {
    pub fn runtime(&self) -> RuntimeSpec {
        self.runtime
    }

    /// Runs one batch on the engine's thread under token plan `plan`.
    pub async fn run(&self, rows: Rows, plan: TokenPlan) -> Result<Ran, EngineError> {
        let (reply, rx) = oneshot::channel();
        self.postbox.send(Batch { rows, plan, reply }).map_err(|_| EngineError::Stopped)?;
        rx.await.map_err(|_| EngineError::Stopped)?
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use morph_core::{LatencyProfile, Point};

    use super::*;
    use crate::EmulatedRuntime;

    #[tokio::test]
    async fn runs_batches_on_its_thread_and_stops_on_drop() {
        let profile =
            Arc::new(LatencyProfile::from_points("m", [Point { batch: 1, len: 8, ms: 1.0 }]).unwrap());
        let engine =
            EmulatedRuntime::new(profile, morph_core::UnitSpec::batch(RuntimeSpec::dynamic(8, 2)), 4);
        let worker = EngineThread::spawn("test".into(), Box::new(engine)).unwrap();
        let handle = worker.handle();
        let tokens = |rows| Rows::Tokens(rows);
        let ran = handle.run(tokens(vec![vec![1, 2], vec![1; 6]]), TokenPlan::Plain).await.unwrap();
        assert_eq!(ran.vectors.len(), 2);
        // The emulated engine sleeps its profile's 1 ms: time it held no core, yet computed.
        assert!(ran.computed.took > 0, "{ran:?}");
        // It pads every row to the longest: priced at its padded shape.
        assert_eq!(ran.computed.shape, morph_core::PaddedShape { len: 6, batch: 2 });
        let too_long = handle.run(tokens(vec![vec![1; 9]]), TokenPlan::Plain).await;
        assert!(matches!(too_long, Err(EngineError::Shape { .. })));
        drop(worker);
        assert!(matches!(
            handle.run(tokens(vec![vec![1]]), TokenPlan::Plain).await,
            Err(EngineError::Stopped)
        ));
    }

    /// The emulated engine, as if it removed the padding (as Morph's own graph does).
    struct Packing(EmulatedRuntime);

    impl Engine for Packing {
        fn runtime(&self) -> RuntimeSpec {
            self.0.runtime()
        }

        fn dim(&self) -> usize {
            self.0.dim()
        }

        fn run(
            &mut self,
            input: crate::BatchInput<'_>,
            plan: TokenPlan,
        ) -> Result<Vec<Vec<f32>>, EngineError> {
            self.0.run(input, plan)
        }

        fn packs(&self, _plan: TokenPlan) -> bool {
            true
        }
    }

    #[tokio::test]
    async fn a_batch_an_engine_packs_is_priced_at_its_rows_mean_length() {
        let profile =
            Arc::new(LatencyProfile::from_points("m", [Point { batch: 1, len: 8, ms: 1.0 }]).unwrap());
        let unit = morph_core::UnitSpec::batch(RuntimeSpec::dynamic(8, 2));
        let engine = Packing(EmulatedRuntime::new(profile, unit, 4));
        let worker = EngineThread::spawn("test".into(), Box::new(engine)).unwrap();
        let ran =
            worker.handle().run(Rows::Tokens(vec![vec![1, 2], vec![1; 5]]), TokenPlan::Plain).await.unwrap();
        assert_eq!(ran.computed.shape, morph_core::PaddedShape { len: 4, batch: 2 }, "7 tokens in 2 rows");
    }

    #[test]
    fn non_finite_outputs_are_an_error_not_a_vector() {
        assert_eq!(finite(vec![vec![1.0, -2.0]]), Ok(vec![vec![1.0, -2.0]]));
        for bad in [f32::NAN, f32::INFINITY] {
            assert!(
                matches!(finite(vec![vec![1.0], vec![bad]]), Err(EngineError::Inference(m)) if m.contains("NaN"))
            );
        }
    }
}
