//! `morph serve`: builds the deployment from a [`Deployment`] and runs the HTTP server until
//! shutdown, then drains: in-flight calls finish, engine threads are joined.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use morph_policy::registry::{Context, PolicyKind};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::api::{AppState, Served, ServedModel, router};
use crate::build;
use crate::connections::ConnectionLimits;
use crate::deployment::{BuildError, Deployment};
use crate::drain::Drain;
use crate::driver::Driver;
use crate::infer::{Embedder, Generator};
use crate::metrics::Metrics;
use crate::prompts::ServedPrompts;
use crate::starting::{Gate, StartupSteps};

/// How often worker processes of this host are checked for having exited.
const REAP_EVERY: Duration = Duration::from_millis(200);
/// How often the cluster's hosts are read for joins and leaves.
const MEMBERSHIP_EVERY: Duration = Duration::from_millis(100);

#[derive(Debug)]
pub struct Server {
    state: AppState,
    limits: ConnectionLimits,
}

impl Server {
    /// Checks the configuration against the policy's needs, loads the model, lays out and
    /// starts the instances, and makes the HTTP edge's state.
    pub fn build(config: Deployment) -> Result<Self, BuildError> {
        Self::build_draining(config, Arc::default())
    }

    /// As [`Self::build`], with the drain its connections were accepted under (see
    /// [`Self::serve_once_built`]).
    pub fn build_draining(config: Deployment, drain: Arc<Drain>) -> Result<Self, BuildError> {
        let kind = PolicyKind::find(&config.policy)?;
        config.check(kind)?;
        let loaded = build::load(&config)?;
        // OTAS's heads are found by the model's own name, whatever the API calls it.
        let task_heads = build::task_heads(&loaded.name, config.task_heads.clone())?;
        let launcher = Arc::new(match config.cores.clone() {
            Some(share) => loaded.launcher.with_cores(share),
            None => loaded.launcher,
        });
        // A decoder's step is bounded as its deployment says.
        let mut context = Context { step: launcher.step_budget(), ..config.policy_context.clone() };
        if kind.needs.stages && context.pipeline.is_none() {
            context = build::pipeline_context(&launcher, &config, context)?;
        }
        if kind.needs.generation_costs && context.generation.is_none() {
            context = build::generation_context(&launcher, &config, context)?;
        }
        let policy = kind.build(&config.policy_params, &context)?;
        let layout = build::layout(&config, kind, policy.as_ref(), &launcher)?;
        let instances = build::start_instances(&launcher, &layout)?;
        let metrics = Arc::new(Metrics::default());
        for start in instances.iter().filter_map(|w| w.start.as_ref()) {
            metrics.started(start.kind, start.total());
        }
        let predictions = config.predictor.start(metrics.clone())?.map(Arc::new);
        let driver = Driver::new(policy, instances, launcher.clone(), metrics);
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
            max_input_len: build::max_input_len(&layout, loaded.max_seq_length),
            prompts: ServedPrompts::new(
                loaded.prompts,
                config.default_prompt_name.clone(),
                loaded.prompt_pooled,
            )
            .map_err(BuildError::Config)?,
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
                task_heads,
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
            drain,
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
        let tasks = self.start_tasks();
        let app = router(self.state.clone());
        crate::connections::serve(listener, app, self.limits, shutdown, self.state.drain.clone()).await;
        self.stop(tasks).await
    }

    /// Serves on `listener` at once, and the server `build` makes (given the drain the
    /// connections share) once it has made it, calling `serving` when its routes answer;
    /// meanwhile the start's `steps` answer (see [`crate::starting`]). Returns when `shutdown`
    /// resolves and the calls are drained (a shutdown during the start does not wait for
    /// `build`), or with `build`'s error.
    pub async fn serve_once_built<S: Serving, E: From<std::io::Error> + Send + 'static>(
        listener: TcpListener,
        limits: ConnectionLimits,
        shutdown: impl Future<Output = ()> + Send + 'static,
        steps: StartupSteps,
        build: impl FnOnce(Arc<Drain>) -> Result<S, E> + Send + 'static,
        serving: impl FnOnce(&S),
    ) -> Result<(), E> {
        let drain = Arc::new(Drain::default());
        let gate = Gate::new(steps.clone());
        let connections =
            tokio::spawn(crate::connections::serve(listener, gate.router(), limits, shutdown, drain.clone()));
        tokio::pin!(connections);
        let built = tokio::task::spawn_blocking(move || build(drain));
        let built = tokio::select! {
            built = built => built.map_err(std::io::Error::other),
            _ = &mut connections => {
                tracing::info!("shut down while starting");
                return Ok(());
            }
        };
        let server = match built.map_err(E::from).and_then(|built| built) {
            Ok(server) => server,
            Err(e) => {
                // A start that failed closes the port at once.
                connections.abort();
                return Err(e);
            }
        };
        let tasks = server.start_tasks();
        gate.open(server.router());
        serving(&server);
        connections.await.map_err(std::io::Error::other)?;
        Ok(server.stop(tasks).await?)
    }

    /// Starts serving: the driver begins, and the tasks it needs run beside the connections
    /// (the policy's clock, the hosts' membership, the reaper of exited worker processes).
    pub(crate) fn start_tasks(&self) -> Vec<JoinHandle<()>> {
        self.state.driver.begin();
        self.state.driver.forward_iterations();
        let every = |period: Duration, work: fn(&Arc<Driver>)| {
            let driver = self.state.driver.clone();
            tokio::spawn(async move {
                let mut interval = tokio::time::interval(period);
                loop {
                    interval.tick().await;
                    work(&driver);
                }
            })
        };
        let ticker =
            self.state.driver.tick_interval().map(|nanos| every(Duration::from_nanos(nanos), Driver::tick));
        let membership =
            self.state.driver.launcher().hosts().map(|_| every(MEMBERSHIP_EVERY, Driver::sync_hosts));
        let reaper = self
            .state
            .driver
            .launcher()
            .local_processes()
            .then(|| every(REAP_EVERY, Driver::reap_exited_workers));
        [ticker, membership, reaper].into_iter().flatten().collect()
    }

    /// After the connections closed: the tasks stopped, the instances and workers with them.
    pub(crate) async fn stop(self, tasks: Vec<JoinHandle<()>>) -> std::io::Result<()> {
        for task in tasks {
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

/// What [`Server::serve_once_built`] serves once built: one model's [`Server`], or several
/// models' [`crate::app::App`].
pub trait Serving: Send + 'static {
    /// The routes.
    fn router(&self) -> axum::Router;
    /// Starts the tasks that run beside the connections.
    fn start_tasks(&self) -> Vec<JoinHandle<()>>;
    /// After the connections closed: stops the tasks, the instances and the workers.
    fn stop(self, tasks: Vec<JoinHandle<()>>) -> impl Future<Output = std::io::Result<()>> + Send;
}

impl Serving for Server {
    fn router(&self) -> axum::Router {
        router(self.state.clone())
    }

    fn start_tasks(&self) -> Vec<JoinHandle<()>> {
        Server::start_tasks(self)
    }

    fn stop(self, tasks: Vec<JoinHandle<()>>) -> impl Future<Output = std::io::Result<()>> + Send {
        Server::stop(self, tasks)
    }
}
