//! `morph serve`: builds the deployment from a [`ServerConfig`] and runs the HTTP server until
//! shutdown, then drains: in-flight calls finish, engine threads are joined.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use morph_core::RuntimeSpec;
use morph_engine::{EngineError, EngineWorker, ModelFiles, Pooling, TextTokenizer};
use morph_policy::{DynamicBatching, DynamicBatchingConfig};
use tokio::net::TcpListener;

use crate::api::{AppState, ServedModel, router};
use crate::driver::Driver;
use crate::launcher::{EngineKind, launch};
use crate::metrics::Metrics;

#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub model: ModelFiles,
    /// `None`: as the model directory says (sentence-transformers' pooling config), else mean.
    pub pooling: Option<Pooling>,
    pub engine: EngineKind,
    pub runtimes: Vec<RuntimeSpec>,
    /// Instances started for each runtime.
    pub instances: usize,
    pub batching: DynamicBatchingConfig,
    pub api_key: Option<String>,
    pub max_client_batch: usize,
}

#[derive(Debug)]
pub struct Server {
    state: AppState,
    workers: Vec<EngineWorker>,
}

impl Server {
    pub fn build(config: ServerConfig) -> Result<Self, EngineError> {
        if config.runtimes.is_empty() || config.instances == 0 {
            return Err(EngineError::Load("at least one runtime with one instance is needed".into()));
        }
        let pooling = config.pooling.unwrap_or_else(|| Pooling::from_model_dir(&config.model.dir));
        let tokenizer = TextTokenizer::load(&config.model.tokenizer)?;
        let (workers, dim) =
            launch(&config.model, pooling, &config.engine, &config.runtimes, config.instances)?;
        let policy = Box::new(DynamicBatching::new(config.batching));
        let metrics = Arc::new(Metrics::default());
        let driver = Driver::new(policy, workers.iter().map(EngineWorker::handle).collect(), metrics);
        let model = ServedModel {
            name: config.model.name.clone(),
            dim,
            pooling,
            engine: config.engine.label().to_string(),
            runtimes: config.runtimes.iter().map(|r| (*r, config.instances)).collect(),
        };
        let state = AppState {
            driver,
            tokenizer: Arc::new(tokenizer),
            model: Arc::new(model),
            api_key: config.api_key.map(Arc::from),
            max_client_batch: config.max_client_batch,
            started: Instant::now(),
        };
        Ok(Self { state, workers })
    }

    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Serves on `listener` until `shutdown` resolves, then waits for in-flight calls and
    /// stops the engine threads.
    pub async fn run(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
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
        let app = router(self.state.clone());
        let served = axum::serve(listener, app).with_graceful_shutdown(shutdown).await;
        if let Some(t) = ticker {
            t.abort();
        }
        let workers = self.workers;
        tokio::task::spawn_blocking(move || drop(workers)).await.map_err(std::io::Error::other)?;
        served
    }
}
