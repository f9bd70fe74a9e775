//! The process's ONNX Runtime: its one environment (the library loaded once) and how a session
//! is built from a graph's bytes (threads, optimisation, pinned dimensions, Morph's own
//! operators).

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock, PoisonError};

use morph_engine::EngineError;
use ort::environment::Environment;
use ort::session::Session;
use ort::session::builder::GraphOptimizationLevel;

use crate::ort_kernels;

/// The process's one ONNX Runtime environment, and the library it was loaded from.
static ENVIRONMENT: OnceLock<Result<(PathBuf, Environment), String>> = OnceLock::new();

/// Whether a session with Morph's operators has been built in this process. ONNX Runtime adds
/// a custom operators' domain to a process-wide map the first time a session uses it, checking
/// and adding without a lock: two sessions built at once the first time can both add it, and one
/// fails ("the domain is already exist"; onnxruntime issue 22663). So sessions are built one at
/// a time until one has been; after that the domain is found and none adds it.
static DOMAIN_ADDED: Mutex<bool> = Mutex::new(false);

/// Loads the ONNX Runtime library at `library` (once per process) and returns the environment.
pub fn environment(library: &Path) -> Result<&'static Environment, EngineError> {
    let loaded = ENVIRONMENT.get_or_init(|| {
        let env = ort::init_from(library)
            .map_err(|e| format!("cannot load the ONNX Runtime library {}: {e}", library.display()))?
            .with_name("morph")
            .build()
            .map_err(|e| format!("ONNX Runtime did not start: {e}"))?;
        Ok((library.to_path_buf(), env))
    });
    match loaded {
        Ok((path, env)) if path == library => Ok(env),
        Ok((path, _)) => Err(EngineError::Load(format!(
            "ONNX Runtime is already loaded from {} in this process; cannot load {} too",
            path.display(),
            library.display()
        ))),
        Err(e) => Err(EngineError::Load(e.clone())),
    }
}

/// Builds a session from a serialised ONNX model: all graph optimisations, `threads` intra-op
/// threads that sleep rather than spin between ops (instances share the cores), and the named
/// free dimensions pinned to the sizes given.
pub fn session(
    env: &Environment,
    model: &[u8],
    threads: usize,
    pinned: &[(String, i64)],
) -> Result<Session, EngineError> {
    build_session(env, model, threads, pinned, Optimise::All { save_to: None })
}

/// How much ONNX Runtime optimises a graph when it builds a session.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Optimise<'a> {
    /// Every optimisation; the optimised graph is also saved to `save_to` (a prepared artefact).
    All { save_to: Option<&'a Path> },
    /// None: the graph was optimised when it was prepared.
    Off,
}

pub(crate) fn build_session(
    env: &Environment,
    model: &[u8],
    threads: usize,
    pinned: &[(String, i64)],
    optimise: Optimise<'_>,
) -> Result<Session, EngineError> {
    let build = || -> ort::Result<Session> {
        let mut builder = Session::builder(env)?.with_operators(ort_kernels::operators()?)?;
        builder = match optimise {
            Optimise::All { save_to } => {
                let builder = builder.with_optimization_level(GraphOptimizationLevel::All)?;
                match save_to {
                    Some(path) => builder
                        .with_config_entry("session.save_model_format", "ORT")?
                        .with_optimized_model_path(path)?,
                    None => builder,
                }
            }
            // The session reads the graph and its weights in place from `model` (which is why
            // prepared bytes are `'static`): no copy of the initializers.
            Optimise::Off => builder
                .with_optimization_level(GraphOptimizationLevel::Disable)?
                .with_config_entry("session.use_ort_model_bytes_directly", "1")?
                .with_config_entry("session.use_ort_model_bytes_for_initializers", "1")?,
        };
        let mut builder =
            builder.with_intra_threads(threads)?.with_inter_threads(1)?.with_intra_op_spinning(false)?;
        for (name, size) in pinned {
            builder = builder.with_dimension_override(name, *size)?;
        }
        builder.commit_from_memory(model)
    };
    once_domain_added(build).map_err(|e| EngineError::Load(format!("ONNX Runtime session: {e}")))
}

/// `build`, alone while no session has added Morph's operator domain ([`DOMAIN_ADDED`]).
fn once_domain_added(build: impl FnOnce() -> ort::Result<Session>) -> ort::Result<Session> {
    let mut added = DOMAIN_ADDED.lock().unwrap_or_else(PoisonError::into_inner);
    if *added {
        drop(added);
        return build();
    }
    let built = build();
    *added = built.is_ok();
    built
}
