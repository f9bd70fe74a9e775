//! The steps of [`crate::Server::build`]: the configuration checked against what the policy
//! needs (read from the policy registry), the model loaded and its launcher made, the initial
//! layout, and the task heads an encoder serves.

use std::sync::Arc;

use morph_backend::ModelInput;
use morph_core::{HostId, HostSlots, Policy, UnitSpec};
use morph_encoder::pooling::pools_prompt;
use morph_encoder::sentence_config::{Prompts, max_seq_length, prompts};
use morph_encoder::tasks::served::TaskHeads;
use morph_encoder::{Pooling, SequenceClassifier, TextTokenizer, given_or_model_pooling};
use morph_engine::{EngineError, at_once};
use morph_policy::registry::{Context, PolicyKind};

use crate::deployment::{BuildError, Deployment, processes_refusal};
use crate::launcher::{Instance, Launcher};
use crate::stage_timing;

/// A configuration error, one line.
fn config_error(message: impl Into<String>) -> BuildError {
    BuildError::Config(message.into())
}

/// The model as loaded: its launcher, and for an encoder its tokenizer, pooling, longest input
/// (where its sentence-transformers config names one), prompts and, for a sequence-classification
/// checkpoint, its head.
#[derive(Debug)]
pub(crate) struct Loaded {
    pub launcher: Launcher,
    pub tokenizer: Option<Arc<TextTokenizer>>,
    pub name: String,
    pub pooling: Option<Pooling>,
    pub max_seq_length: Option<u32>,
    /// An embedding model's prompts (none for a decoder or a classifier), and whether its
    /// pooling reads their tokens.
    pub prompts: Prompts,
    pub prompt_pooled: bool,
    pub classifier: Option<Arc<SequenceClassifier>>,
}

/// Loads the model and makes its launcher (with worker processes when configured).
pub(crate) fn load(config: &Deployment) -> Result<Loaded, BuildError> {
    if config.engine.generates() {
        let launcher = with_processes(Launcher::new(config.engine.load(None)?), config, None)?;
        let name = config.engine.model_name().unwrap_or_else(|| "decoder".into());
        return Ok(Loaded {
            launcher,
            tokenizer: None,
            name,
            pooling: None,
            max_seq_length: None,
            prompts: Prompts::default(),
            prompt_pooled: true,
            classifier: None,
        });
    }
    let Some(files) = &config.model else {
        return Err(config_error("an encoder engine needs the model's files"));
    };
    let classifier = SequenceClassifier::load(files)?.map(Arc::new);
    let pooling = match (&classifier, config.pooling) {
        (None, given) => given_or_model_pooling(given, &files.dir)?,
        (Some(_), None | Some(Pooling::Cls)) => Pooling::Cls,
        (Some(_), Some(other)) => {
            return Err(config_error(format!(
                "--pooling {other}: a sequence-classification model's head reads its first \
                 token (cls); leave --pooling out"
            )));
        }
    };
    let tokenizer = Arc::new(TextTokenizer::load(&files.tokenizer)?);
    let backend = match &config.preloaded {
        Some(preloaded) if preloaded.pooling == pooling => preloaded.backend.clone(),
        _ => Arc::new(config.engine.load(Some((files, pooling)))?),
    };
    Ok(Loaded {
        launcher: with_processes(Launcher::new(backend), config, Some((files, pooling)))?,
        tokenizer: Some(tokenizer),
        name: files.name.clone(),
        pooling: Some(pooling),
        max_seq_length: match config.engine.computes_the_model() {
            true => max_seq_length(files)?,
            false => None,
        },
        prompts: match classifier {
            None => prompts(files)?,
            Some(_) => Prompts::default(),
        },
        prompt_pooled: pools_prompt(&files.dir)?,
        classifier,
    })
}

/// The launcher running its instances as worker processes where the deployment asks for them
/// (Deployment::check let only engines that run in them, and a worker builds Morph's graphs in
/// the server's dtype).
fn with_processes(
    launcher: Launcher,
    config: &Deployment,
    model: ModelInput,
) -> Result<Launcher, BuildError> {
    let Some(workers) = &config.workers else { return Ok(launcher) };
    match config.engine.processes_model(model) {
        Some(model) => Ok(launcher.with_processes(workers.clone(), model)?),
        None => Err(processes_refusal(&config.engine)),
    }
}

/// The longest input served: the longest runtime's, or the model's `max_seq_length` where that
/// is shorter (a longer runtime still runs, for inputs up to it).
pub(crate) fn max_input_len(layout: &[UnitSpec], max_seq_length: Option<u32>) -> u32 {
    let longest_runtime = layout.iter().map(|u| u.runtime.longest_taken()).max().unwrap_or(0);
    if let Some(model) = max_seq_length.filter(|&model| model < longest_runtime) {
        tracing::info!(
            "inputs are served up to {model} tokens, the model's max_seq_length (its \
             sentence-transformers config), though the longest runtime takes {longest_runtime}"
        );
        return model;
    }
    longest_runtime
}

/// The units of the initial instances: the policy's own layout, else every runtime (or its
/// stages) `--instances` times.
pub(crate) fn layout(
    config: &Deployment,
    kind: &PolicyKind,
    policy: &dyn Policy,
    launcher: &Launcher,
) -> Result<Vec<UnitSpec>, BuildError> {
    if let Some(layout) = policy.layout(config.instances) {
        if config.stages > 1 && !kind.needs.stages {
            return Err(config_error(format!(
                "policy '{}' lays out whole models; it cannot run --stages",
                kind.name
            )));
        }
        return Ok(layout);
    }
    if config.runtimes.is_empty() {
        return Err(config_error("at least one runtime with one instance is needed"));
    }
    let mut units = Vec::new();
    for runtime in &config.runtimes {
        match config.stages {
            0 | 1 => units.push(launcher.backend().unit(*runtime)),
            n => units.extend(launcher.backend().stage_units(*runtime, n)?),
        }
    }
    let units = units.into_iter().map(|u| u.with_threads_if(config.threads));
    Ok(units.flat_map(|u| std::iter::repeat_n(u, config.instances)).collect())
}

/// The task heads /v1/classify serves on `model`: the deployment's (`given`), which must read
/// `model`; else the built-in ones, served with the encoder they read (all-MiniLM-L6-v2) only.
pub(crate) fn task_heads(
    model: &str,
    given: Option<Arc<TaskHeads>>,
) -> Result<Option<Arc<TaskHeads>>, BuildError> {
    if let Some(heads) = given {
        return match heads.encoder() == model {
            true => Ok(Some(heads)),
            false => Err(config_error(format!(
                "the task heads read {}'s vectors, not those of the served model {model} (serve the \
                 model as it was named when the heads were trained: a directory of the same name, \
                 or the same hub id)",
                heads.encoder()
            ))),
        };
    }
    Ok(match TaskHeads::builtin() {
        Ok(heads) if heads.encoder() == model => Some(Arc::new(heads)),
        Ok(_) => None,
        Err(e) => {
            tracing::warn!(error = %e, "the task heads could not be loaded; /v1/classify serves no task");
            None
        }
    })
}

/// A pipeline policy's context on this one host: the stages' times measured now (unless the
/// caller gave them), and `--instances` slots to place replicas in.
pub(crate) fn pipeline_context(
    launcher: &Launcher,
    config: &Deployment,
    context: Context,
) -> Result<Context, BuildError> {
    let [runtime] = config.runtimes.as_slice() else { unreachable!("Deployment::check: one runtime") };
    let profile = stage_timing::measure(launcher, *runtime, config.stages, config.stage_timing_len)?;
    let slots = config.instances.max(usize::from(config.stages)).min(usize::from(u16::MAX)) as u16;
    let hosts = launcher.hosts().unwrap_or_else(|| HostSlots::new(1, slots));
    Ok(Context { pipeline: Some(Arc::new(profile)), hosts: Some(hosts), ..context })
}

/// A policy's context with the decoder's generation costs measured now on an instance of the
/// first runtime (SSJF weighs jobs by them), unless the caller gave them.
pub(crate) fn generation_context(
    launcher: &Launcher,
    config: &Deployment,
    context: Context,
) -> Result<Context, BuildError> {
    let runtime = config
        .runtimes
        .first()
        .ok_or_else(|| config_error("at least one runtime with one instance is needed"))?;
    let unit = launcher.backend().unit(*runtime).with_threads_if(config.threads);
    Ok(Context { generation: Some(launcher.generation_costs(unit)?), ..context })
}

/// Starts every unit of the initial layout at once, each on a thread of its own, in the
/// layout's order. An instance's start is mostly writing its graph and building its ONNX Runtime
/// session on its own threads: one after the other, 16 single-threaded instances took 12.8 s of
/// a 16-core host's first start.
pub(crate) fn start_instances(
    launcher: &Launcher,
    layout: &[UnitSpec],
) -> Result<Vec<Instance>, EngineError> {
    let hosts = initial_hosts(layout.len(), launcher.hosts().as_ref());
    at_once(layout.iter().zip(hosts).map(|(unit, host)| move || launcher.start(*unit, host)))
        .into_iter()
        .collect()
}

/// Where the initial layout's `count` instances go: without a cluster, this host; with one,
/// the hosts in turn, each up to its slots (and in turn again once every host is full).
pub(crate) fn initial_hosts(count: usize, hosts: Option<&HostSlots>) -> Vec<Option<HostId>> {
    let Some(hosts) = hosts.filter(|s| !s.slots.is_empty()) else { return vec![None; count] };
    let mut used = vec![0u16; hosts.slots.len()];
    let mut next = 0;
    (0..count)
        .map(|_| {
            let n = used.len();
            let free = (0..n).map(|k| (next + k) % n).find(|&s| used[s] < hosts.slots[s]);
            let s = free.unwrap_or(next % n);
            used[s] += 1;
            next = s + 1;
            Some(HostId(s as u16))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use morph_backend::Backend;

    #[test]
    fn the_initial_layout_goes_round_the_hosts_within_their_slots() {
        let ids = |v: Vec<Option<HostId>>| v.into_iter().map(|s| s.map(|s| s.0)).collect::<Vec<_>>();
        assert_eq!(ids(initial_hosts(3, None)), [None, None, None], "one host: the driver's own");
        let two = HostSlots { slots: vec![2, 2], cores: Vec::new() };
        assert_eq!(ids(initial_hosts(4, Some(&two))), [Some(0), Some(1), Some(0), Some(1)]);
        let uneven = HostSlots { slots: vec![1, 0, 3], cores: Vec::new() };
        assert_eq!(
            ids(initial_hosts(4, Some(&uneven))),
            [Some(0), Some(2), Some(2), Some(2)],
            "a host with no slot gets none"
        );
        let small = HostSlots { slots: vec![1, 1], cores: Vec::new() };
        assert_eq!(
            ids(initial_hosts(3, Some(&small))),
            [Some(0), Some(1), Some(0)],
            "past every slot: in turn again"
        );
    }

    #[test]
    fn instances_started_at_once_come_back_in_the_layouts_order() {
        let profile = morph_core::fixtures::linear_profile(1.0, 0.1);
        let launcher = Launcher::new(Backend::emulated(Arc::new(profile), 4));
        let layout: Vec<UnitSpec> = (1..=8)
            .map(|rows| {
                UnitSpec::batch(morph_core::RuntimeSpec::dynamic(16 * u32::from(rows), 1)).with_threads(rows)
            })
            .collect();
        let started = start_instances(&launcher, &layout).expect("every instance starts");
        assert_eq!(started.iter().map(|i| i.unit).collect::<Vec<_>>(), layout);
        assert!(started.iter().all(|i| i.host == HostId(0)), "one host: this one");
    }
}
