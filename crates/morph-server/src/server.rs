//! `morph serve`: builds the deployment from a [`Deployment`] and runs the HTTP server until
//! shutdown, then drains: in-flight calls finish, engine threads are joined.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use morph_policy::registry::PolicyKind;
use tokio::net::TcpListener;

use crate::api::{AppState, Served, ServedModel, router};
use crate::build;
use crate::connections::ConnectionLimits;
use crate::deployment::{BuildError, Deployment};
use crate::drain::Drain;
use crate::driver::Driver;
use crate::infer::{Embedder, Generator};
use crate::metrics::Metrics;

/// How often worker processes of this host are checked for having exited.
const REAP_EVERY: Duration = Duration::from_millis(200);

#[derive(Debug)]
pub struct Server {
    state: AppState,
    limits: ConnectionLimits,
}

impl Server {
    /// Checks the configuration against the policy's needs, loads the model, lays out and
    /// starts the instances, and makes the HTTP edge's state.
    pub fn build(config: Deployment) -> Result<Self, BuildError> {
        let kind = PolicyKind::find(&config.policy)?;
        config.check(kind)?;
        let loaded = build::load(&config)?;
        let launcher = Arc::new(loaded.launcher);
        let mut context = config.policy_context.clone();
        if kind.needs.stages && context.pipeline.is_none() {
            context = build::pipeline_context(&launcher, &config, context)?;
        }
        let policy = kind.build(&config.policy_params, &context)?;
        let layout = build::layout(&config, kind, policy.as_ref(), &launcher)?;
        let hosts = build::initial_hosts(layout.len(), launcher.hosts().as_ref());
        let instances = layout
            .iter()
            .zip(hosts)
            .map(|(u, host)| launcher.start(*u, host))
            .collect::<Result<Vec<_>, _>>()?;
        let metrics = Arc::new(Metrics::default());
        for start in instances.iter().filter_map(|w| w.start.as_ref()) {
            metrics.started(start.kind, start.total());
        }
        let predictions = config.predictor.start(metrics.clone())?.map(Arc::new);
        let driver = Driver::new(policy, instances, launcher.clone(), metrics);
        // OTAS's heads are found by the model's own name, whatever the API calls it.
        let own_name = loaded.name.clone();
        let model = ServedModel {
            names: match config.served_model_names.is_empty() {
                true => vec![loaded.name],
                false => config.served_model_names,
            },
            created: SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()),
            dim: launcher.backend().dim(),
            pooling: loaded.pooling,
            engine: config.engine.label().to_string(),
            dtype: config.engine.model_dtype(),
            max_input_len: layout.iter().map(|u| u.runtime.max_len).max().unwrap_or(0),
        };
        let served = match (launcher.backend().decoder(), loaded.tokenizer) {
            (Some(decoder), _) => {
                // A decoder served in stages answers prefills, also on a policy's whole-model replicas.
                let prefill_stages = if config.stages > 1 { config.stages } else { 0 };
                let generator = Generator::new(
                    driver.clone(),
                    decoder.model.clone(),
                    predictions,
                    decoder.prompt_cache.clone(),
                    prefill_stages,
                    model.max_input_len,
                );
                Served::Generation(Arc::new(generator))
            }
            (None, Some(tokenizer)) => Served::Embeddings(Arc::new(Embedder::new(
                driver.clone(),
                tokenizer,
                build::task_heads(&own_name),
                loaded.classifier,
                model.max_input_len,
                config.call_wave,
            ))),
            (None, None) => {
                return Err(BuildError::Config("an encoder engine needs the model's files".into()));
            }
        };
        let state = AppState {
            driver,
            served,
            model: Arc::new(model),
            api_key: config.api_key.map(Arc::from),
            max_client_batch: config.max_client_batch,
            body_timeout: config.limits.body_timeout,
            started: Instant::now(),
            drain: Arc::new(Drain::default()),
        };
        let limits = config.limits;
        Ok(Self { state, limits })
    }

    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Serves on `listener` until `shutdown` resolves, then waits for in-flight calls (at most
    /// the drain deadline) and stops the engine threads.
    pub async fn run(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        self.state.driver.begin();
        self.state.driver.forward_iterations();
        let ticker = self.state.driver.tick_interval().map(|every| {
            let driver = self.state.driver.clone();
            tokio::spawn(async move {
                let mut interval = tokio::time::interval(Duration::from_nanos(every));
                loop {
                    interval.tick().await;
                    driver.tick();
                }
            })
        });
        let membership = self.state.driver.launcher().hosts().map(|_| {
            let driver = self.state.driver.clone();
            tokio::spawn(async move {
                let mut interval = tokio::time::interval(Duration::from_millis(100));
                loop {
                    interval.tick().await;
                    driver.sync_hosts();
                }
            })
        });
        let reaper = self.state.driver.launcher().local_processes().then(|| {
            let driver = self.state.driver.clone();
            tokio::spawn(async move {
                let mut interval = tokio::time::interval(REAP_EVERY);
                loop {
                    interval.tick().await;
                    driver.reap_exited_workers();
                }
            })
        });
        let app = router(self.state.clone());
        crate::connections::serve(listener, app, self.limits, shutdown, &self.state.drain).await;
        for task in [ticker, membership, reaper].into_iter().flatten() {
            task.abort();
        }
        let workers = self.state.driver.take_instances();
        let launcher = self.state.driver.launcher();
        let stopped = move || {
            drop(workers);
            launcher.shutdown();
        };
        tokio::task::spawn_blocking(stopped).await.map_err(std::io::Error::other)
    }
}
