//! `morph serve` with no `--runtime`: the fast configuration for this host, read off the
//! engine's measured profile. Every split of the cores into equal instances is compared (one
//! instance on all of them, one single-threaded instance per core, and those between: 4 x 4
//! and 8 x 2 on 16 cores), each measured with its instances running side by side, so that
//! their contention for memory bandwidth and caches is in the measurement; the fastest serves, with length buckets and rows per bucket from its
//! profile (`morph_policy::batching::plan`). Profiles are found by the model's content (its
//! config's and weights' hash, whatever its folder is called) in `MORPH_HOME/profiles/` (a cached
//! one also by a fingerprint of the graph code it timed, so that an upgrade that changes the graph
//! measures again), or ship with Morph for the host they were measured on (`assets/profiles/` in
//! the repository).
//! Where there is none, a first start measures a few shapes per layout (seconds, each logged as
//! a line and shown by `/ready`) and fits its latency over batch × length
//! ([`morph_core::LatencyFit`]); the grid the buckets are planned from is the fit's. The
//! model loaded to measure it is the one the server then serves. The policy's refits of that
//! profile to the batches served are kept beside it in the cache, and the next start plans the
//! same layout's buckets from them; layouts and dtypes are still compared on profiles measured
//! alike (the engine alone at each shape), never a served layout's refit against another's
//! measurement.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use morph_backend::{Backend, EngineKind};
use morph_core::{LatencyFit, LatencyProfile, RuntimeSpec, ShapeKind, TokenPlan, UnitSpec};
use morph_encoder::model_pooling;
use morph_engine::EngineError;
use morph_engine::host::host_device;
use morph_fetch::ModelFiles;
use morph_policy::Bucket;
use morph_policy::batching::RefitSink;
use morph_policy::batching::plan::{layout_rate, length_plan};
use morph_server::{Preloaded, StartupSteps};
use morph_train::profile::{MeasurePlan, measure_points};

/// Profiles measured on the hosts Morph is developed on: (file name, JSON).
const SHIPPED: [(&str, &str); 4] = morph_assets::SERVE_PROFILES;

/// The grid a profile covers: lengths up to the model's 512, batches up to 16.
const LENS: [u32; 7] = [8, 16, 32, 64, 128, 256, 512];
const BATCHES: [u32; 5] = [1, 2, 4, 8, 16];
/// The shapes (length, batch) a first start measures to fit the grid: the corners and the
/// middle of both axes, the quadratic term from the long ones; a fifth of the grid's work.
const MEASURED: [(u32, u32); 8] =
    [(8, 1), (64, 1), (512, 1), (512, 2), (32, 4), (256, 4), (16, 16), (128, 16)];

/// What `morph serve` runs when the user set no runtime.
#[derive(Debug, Clone)]
pub(crate) struct ServeDefaults {
    pub runtime: RuntimeSpec,
    pub instances: usize,
    pub threads: u16,
    /// Sequences per second this layout serves, by its profile.
    pub rate: f64,
    pub buckets: Vec<Bucket>,
    /// The chosen layout's profile, and where it came from, for the log.
    pub profile: LatencyProfile,
    pub source: String,
    /// Where this layout's refits to the batches served are kept, when its profile was fitted
    /// to a few shapes on a first start (not shipped): the policy refines its buckets to the
    /// batches it serves and keeps its refits there ([`refits_kept_in`]), beside the measured
    /// profile ([`served_beside`]).
    pub refits_file: Option<PathBuf>,
    /// The model as loaded to measure a layout, if one was.
    pub preloaded: Option<Preloaded>,
}

impl ServeDefaults {
    pub(crate) fn fitted(&self) -> bool {
        self.refits_file.is_some()
    }

    /// These defaults with the buckets planned from `refit`, a refit of the chosen layout's
    /// profile to the batches an earlier start served. The rate the layout was chosen by stays
    /// its measured one.
    fn planned_from_refit(self, refit: LatencyProfile, path: &Path, max_len: u32) -> Self {
        let (runtime, buckets) = planned(&refit, max_len);
        let source =
            format!("{} (refitted to {} batches served)", path.display(), refit.served_batches.unwrap_or(0));
        Self { runtime, buckets, profile: refit, source, ..self }
    }
}

/// The runtime and the length buckets `profile` plans up to `max_len`.
fn planned(profile: &LatencyProfile, max_len: u32) -> (RuntimeSpec, Vec<Bucket>) {
    let plan = length_plan(profile, max_len);
    (RuntimeSpec::dynamic(max_len, plan.max_rows), plan.buckets)
}

/// Where the refits of the profile measured into `measured` (`NAME.measured.json`) are kept:
/// `NAME.served.json` beside it.
fn served_beside(measured: &Path) -> PathBuf {
    measured.with_extension("").with_extension("served.json")
}

/// One layout of the host's cores: `instances` instances of `threads` intra-op threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Layout {
    instances: u16,
    threads: u16,
}

impl Layout {
    /// Every split of `cores` into equal instances, from one instance on every core to one
    /// single-threaded instance per core.
    fn candidates(cores: u16) -> Vec<Layout> {
        (1..=cores.max(1))
            .filter(|&instances| cores.max(1).is_multiple_of(instances))
            .map(|instances| Layout { instances, threads: cores.max(1) / instances })
            .collect()
    }

    /// The candidates on `cores` with the instances and threads the user named: both named,
    /// that layout; one named, the other is what fills the cores (at least 1).
    fn wanted(cores: u16, wanted: Wanted) -> Vec<Layout> {
        let fill = |of: u16| (cores / of.max(1)).max(1);
        match (wanted.instances, wanted.threads) {
            (Some(instances), Some(threads)) => vec![Layout { instances, threads }],
            (Some(instances), None) => vec![Layout { instances, threads: fill(instances) }],
            (None, Some(threads)) => vec![Layout { instances: fill(threads), threads }],
            (None, None) => Layout::candidates(cores),
        }
    }

    fn matches(self, p: &LatencyProfile) -> bool {
        p.instances == Some(self.instances) && p.threads == Some(self.threads)
    }
}

/// The instances and threads per instance the user named (`--instances`, `--threads`).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Wanted {
    pub instances: Option<u16>,
    pub threads: Option<u16>,
}

/// The layout that serves more, with its buckets, from one profile per candidate layout.
fn choose(profiles: Vec<(LatencyProfile, Source)>, max_len: u32) -> anyhow::Result<ServeDefaults> {
    let rated = profiles.into_iter().map(|(p, source)| {
        let instances = p.instances.unwrap_or(1);
        let rate = layout_rate(&p, u32::from(instances));
        tracing::info!(
            instances,
            threads = p.threads.unwrap_or(1),
            sequences_per_s = format!("{rate:.0}"),
            engine = p.engine.as_deref().unwrap_or("unnamed"),
            "candidate layout, by its profile"
        );
        (rate, p, source)
    });
    let (rate, profile, source) =
        rated.max_by(|a, b| a.0.total_cmp(&b.0)).context("no profile to choose a layout from")?;
    let (runtime, buckets) = planned(&profile, max_len);
    Ok(ServeDefaults {
        runtime,
        instances: usize::from(profile.instances.unwrap_or(1)),
        threads: profile.threads.unwrap_or(1),
        rate,
        buckets,
        profile,
        refits_file: source.cache_file().map(served_beside),
        source: source.to_string(),
        preloaded: None,
    })
}

/// The engine's label in profile file names and `engine` fields.
fn engine_label(engine: &EngineKind) -> String {
    format!("{}-cpu", engine.label())
}

/// Where a layout's profile came from.
enum Source {
    /// Shipped with Morph (a file of `assets/profiles/`): measured over the whole grid.
    Shipped(&'static str),
    /// Fitted on an earlier start, cached in this file.
    Cached(PathBuf),
    /// Fitted now, and cached in this file.
    Measured(PathBuf),
}

impl Source {
    fn cache_file(&self) -> Option<&Path> {
        match self {
            Source::Shipped(_) => None,
            Source::Cached(path) | Source::Measured(path) => Some(path),
        }
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Shipped(name) => write!(f, "shipped assets/profiles/{name}"),
            Source::Cached(path) => write!(f, "{}", path.display()),
            Source::Measured(path) => {
                write!(f, "fitted to {} shapes measured now, cached in {}", MEASURED.len(), path.display())
            }
        }
    }
}

/// What a profile is found by: the model's content, the engine and the host; a cached one also
/// by the engine's graph code.
struct ProfileKey {
    model_sha256: String,
    engine: String,
    device: String,
    /// [`morph_backend::EngineConfig::graph_fingerprint`] of this build.
    graph: Option<&'static str>,
}

impl ProfileKey {
    /// Whether `p` measured this model on this engine and host, in `layout`.
    fn fits(&self, p: &LatencyProfile, layout: Layout) -> bool {
        p.model_sha256.as_deref() == Some(self.model_sha256.as_str())
            && p.engine.as_deref() == Some(self.engine.as_str())
            && p.device.as_deref() == Some(self.device.as_str())
            && layout.matches(p)
    }

    /// Whether a cached `p` fits and timed this build's graph: one cached before an upgrade
    /// that changed the graph timed another graph (the layout it chose may no longer serve most).
    fn fits_cached(&self, p: &LatencyProfile, layout: Layout) -> bool {
        self.fits(p, layout) && p.graph.as_deref() == self.graph
    }

    /// Whether a cached `p` fits and was measured, not refitted to batches served: layouts are
    /// compared on measurements alone.
    fn fits_measured(&self, p: &LatencyProfile, layout: Layout) -> bool {
        self.fits_cached(p, layout) && p.served_batches.is_none()
    }

    /// Whether a cached `p` fits and is a refit to the batches served in `layout`.
    fn fits_served(&self, p: &LatencyProfile, layout: Layout) -> bool {
        self.fits_cached(p, layout) && p.served_batches.is_some()
    }

    /// Where a profile of `layout` measured here is cached (`.measured.json`: files of builds
    /// that wrote refits over the measurement were named `.json`, and are left unread).
    fn cache_file(&self, layout: Layout) -> PathBuf {
        let slug: String =
            self.device.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
        let model = &self.model_sha256[..self.model_sha256.len().min(16)];
        cache_dir().join(format!(
            "{model}-{}-{slug}-{}x{}.measured.json",
            self.engine, layout.instances, layout.threads
        ))
    }
}

/// A profile of `layout` for this model, engine and host: cached, shipped, or measured now (on
/// `loaded`, loaded the first time a layout needs measuring).
fn layout_profile(
    files: &ModelFiles,
    key: &ProfileKey,
    engine: &EngineKind,
    layout: Layout,
    loaded: &mut Option<Preloaded>,
    steps: &StartupSteps,
) -> anyhow::Result<(LatencyProfile, Source)> {
    let cached = key.cache_file(layout);
    if let Ok(p) = LatencyProfile::load(&cached)
        && key.fits_measured(&p, layout)
    {
        return Ok((p, Source::Cached(cached)));
    }
    for (name, json) in SHIPPED {
        if let Ok(p) = LatencyProfile::from_json(json)
            && key.fits(&p, layout)
        {
            return Ok((p, Source::Shipped(name)));
        }
    }
    let loaded = match loaded {
        Some(l) => l,
        None => {
            steps.step("loading the model to profile it on this host");
            let pooling = model_pooling(&files.dir)?;
            let backend = Arc::new(engine.load(Some((files, pooling)))?);
            loaded.insert(Preloaded { pooling, backend })
        }
    };
    let mut p = measure(&files.name, &loaded.backend, &key.engine, layout, steps)?;
    p.engine = Some(key.engine.clone());
    p.device = Some(key.device.clone());
    p.model_sha256 = Some(key.model_sha256.clone());
    p.graph = key.graph.map(str::to_string);
    std::fs::create_dir_all(cache_dir()).context("creating the profile cache")?;
    write_profile(&p, &cached)?;
    Ok((p, Source::Measured(cached)))
}

/// Writes `profile` to `path` whole (a reader sees the old file or the new one; servers that
/// share the cache each write a file of their own first).
fn write_profile(profile: &LatencyProfile, path: &Path) -> anyhow::Result<()> {
    let partial = path.with_extension(format!("json.{}.partial", std::process::id()));
    std::fs::write(&partial, profile.to_json()).with_context(|| format!("writing {}", partial.display()))?;
    std::fs::rename(&partial, path).with_context(|| format!("writing {}", path.display()))
}

/// Keeps each refit of a first start's profile in its cache file. The policy only hands the
/// refit over (a channel send: policies stay pure); a writer thread of its own writes it, and
/// ends with the sink (the handle joins it).
pub(crate) fn refits_kept_in(path: PathBuf) -> anyhow::Result<(RefitSink, std::thread::JoinHandle<()>)> {
    let (send, refits) = std::sync::mpsc::channel::<LatencyProfile>();
    let writer = std::thread::Builder::new().name("morph-profile-cache".into()).spawn(move || {
        for profile in refits {
            match write_profile(&profile, &path) {
                Ok(()) => {
                    tracing::info!(path = %path.display(), "profile refitted to the batches served, cached")
                }
                Err(e) => tracing::warn!("the refitted profile is not cached: {e:#}"),
            }
        }
    })?;
    let sink = RefitSink::new(move |profile| {
        // The writer ends only once every sink is dropped: a send cannot fail before.
        let _ = send.send(profile.clone());
    });
    Ok((sink, writer))
}

fn cache_dir() -> PathBuf {
    morph_fetch::morph_home().join("profiles")
}

/// Measures `layout` on the real engine at the [`MEASURED`] shapes (dynamic runtimes fed full
/// batches, its instances side by side), each shape a step, and fits the grid to them.
fn measure(
    model: &str,
    backend: &Backend,
    engine: &str,
    layout: Layout,
    steps: &StartupSteps,
) -> anyhow::Result<LatencyProfile> {
    let plan = MeasurePlan {
        lens: LENS.to_vec(),
        batches: BATCHES.to_vec(),
        warmup: 1,
        runs: 3,
        tokens: TokenPlan::Plain,
        hidden: None,
        kind: ShapeKind::Dynamic,
        side_by_side: usize::from(layout.instances),
    };
    let what = format!("profiling {engine} in {} x {} thread(s)", layout.instances, layout.threads);
    steps.step(format!("{what}: 0/{}", MEASURED.len()));
    let mut done = 0;
    let points = measure_points(
        &plan,
        &MEASURED,
        &|spec| backend.engine(UnitSpec::batch(spec).with_threads(layout.threads)),
        &mut |len, batch, ms| {
            done += 1;
            steps.step(format!(
                "{what}: {done}/{} (batch {batch} x {len} tokens: {ms:.1} ms)",
                MEASURED.len()
            ));
        },
    )
    .map_err(|e: EngineError| anyhow::anyhow!("profiling the engine: {e}"))?;
    let fit = LatencyFit::fit(&points).context("no latency fit to the measured shapes")?;
    tracing::info!(
        worst_error = format!("{:.0}%", fit.worst_error(&points) * 100.0),
        "{what}: latency fitted over batch x length"
    );
    let mut profile = fit.profile(model, &BATCHES, &LENS)?;
    profile.runs = Some(plan.runs);
    profile.threads = Some(layout.threads);
    profile.instances = Some(layout.instances);
    Ok(profile)
}

/// The defaults for serving `files` on `engine` on this host, in the layout `wanted` where it
/// names one: its buckets planned from that layout's own profile.
pub(crate) fn serve_defaults(
    files: &ModelFiles,
    engine: &EngineKind,
    max_len: u32,
    wanted: Wanted,
    steps: &StartupSteps,
) -> anyhow::Result<ServeDefaults> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()).min(64) as u16;
    steps.step("hashing the model to find its profile");
    let key = ProfileKey {
        model_sha256: files.content_sha256()?,
        engine: engine_label(engine),
        device: host_device(),
        graph: engine.graph_fingerprint(),
    };
    let mut loaded = None;
    let profiles = Layout::wanted(cores, wanted)
        .into_iter()
        .map(|layout| layout_profile(files, &key, engine, layout, &mut loaded, steps))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let chosen = with_served_refit(choose(profiles, max_len)?, &key, max_len);
    Ok(ServeDefaults { preloaded: loaded, ..chosen })
}

/// The chosen defaults with their buckets planned from the layout's refit to the batches an
/// earlier start served, where one is kept for this model, engine, host and graph.
fn with_served_refit(chosen: ServeDefaults, key: &ProfileKey, max_len: u32) -> ServeDefaults {
    let layout = Layout { instances: chosen.instances as u16, threads: chosen.threads };
    let Some(path) = chosen.refits_file.clone() else { return chosen };
    match LatencyProfile::load(&path) {
        Ok(refit) if key.fits_served(&refit, layout) => chosen.planned_from_refit(refit, &path, max_len),
        _ => chosen,
    }
}

/// Of the defaults for serving the model on each of `candidates` (the same engine in other
/// dtypes), the engine and defaults whose chosen layout serves most by its profile.
pub(crate) fn fastest(
    candidates: Vec<(EngineKind, ServeDefaults)>,
) -> anyhow::Result<(EngineKind, ServeDefaults)> {
    for (engine, d) in &candidates {
        tracing::info!(
            engine = engine.label(),
            instances = d.instances,
            threads = d.threads,
            sequences_per_s = format!("{:.0}", d.rate),
            "candidate engine, by its fastest layout's profile"
        );
    }
    candidates.into_iter().max_by(|a, b| a.1.rate.total_cmp(&b.1.rate)).context("no engine to choose from")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shipped profiles of one engine label, two layouts each.
    fn shipped(engine: &str) -> Vec<(LatencyProfile, Source)> {
        let all =
            SHIPPED.map(|(name, json)| (LatencyProfile::from_json(json).unwrap(), Source::Shipped(name)));
        let of_engine: Vec<_> =
            all.into_iter().filter(|(p, _)| p.engine.as_deref() == Some(engine)).collect();
        assert_eq!(of_engine.len(), 2, "{engine}: one profile per layout");
        of_engine
    }

    #[test]
    fn the_shipped_profiles_choose_a_layout_with_short_buckets_first() {
        let fp32 = choose(shipped("onnxruntime-cpu"), 512).unwrap();
        assert_eq!((fp32.instances, fp32.threads), (2, 1), "{fp32:?}");
        for d in [fp32, choose(shipped("onnxruntime-int8-cpu"), 512).unwrap()] {
            assert_eq!(d.runtime.max_len, 512);
            assert_eq!(d.buckets.last().map(|b| b.max_len), Some(512));
            assert!(d.buckets.len() >= 3, "short inputs never share a batch with long ones: {d:?}");
            assert_eq!(d.runtime.max_batch, d.buckets.iter().map(|b| b.max_rows).max().unwrap());
        }
    }

    #[test]
    fn of_the_engines_measured_the_one_whose_layout_serves_most_serves_in_either_order() {
        let fp32 = choose(shipped("onnxruntime-cpu"), 512).unwrap();
        let int8 = choose(shipped("onnxruntime-int8-cpu"), 512).unwrap();
        let most = fp32.rate.max(int8.rate);
        assert!(fp32.rate != int8.rate, "the shipped profiles rate the dtypes apart");
        let engine = || crate::engine::tests::spec("candle").real().unwrap();
        for candidates in [[fp32.clone(), int8.clone()], [int8, fp32]] {
            let (_, chosen) = fastest(candidates.into_iter().map(|d| (engine(), d)).collect()).unwrap();
            assert_eq!(chosen.rate, most);
        }
        assert!(fastest(Vec::new()).is_err());
    }

    #[test]
    fn the_shipped_profiles_are_found_by_the_default_models_content_under_any_folder_name() {
        let files =
            morph_fetch::fetch_default(&morph_fetch::morph_home(), &morph_fetch::Pip::from_env()).unwrap();
        let renamed = ModelFiles { name: "my-copy".into(), ..files.clone() };
        let key_on = |engine: &str, device: &str| ProfileKey {
            model_sha256: renamed.content_sha256().unwrap(),
            engine: engine.into(),
            device: device.into(),
            graph: Some(morph_encoder::onnx::GRAPH_FINGERPRINT),
        };
        let key = |engine: &str| key_on(engine, "AMD EPYC, 2 cores, AVX-512 VNNI");
        for engine in ["onnxruntime-cpu", "onnxruntime-int8-cpu"] {
            for (p, name) in shipped(engine) {
                let layout = Layout { instances: p.instances.unwrap(), threads: p.threads.unwrap() };
                assert!(key(engine).fits(&p, layout), "{name}");
                assert!(!key("candle-cpu").fits(&p, layout), "{name}: found for another engine");
                // A virtual machine that names the same CPU but offers AVX2 only runs the
                // kernels several times slower: it measures its own.
                let avx2 = key_on(engine, "AMD EPYC, 2 cores, AVX2");
                assert!(!avx2.fits(&p, layout), "{name}: found for a host of narrower vectors");
            }
        }
    }

    fn test_key() -> ProfileKey {
        ProfileKey {
            model_sha256: "ab".repeat(32),
            engine: "onnxruntime-int8-cpu".into(),
            device: "a test host".into(),
            graph: Some("0123456789abcdef"),
        }
    }

    /// A profile measured for `key` in `layout`.
    fn measured_for(key: &ProfileKey, layout: Layout) -> LatencyProfile {
        let mut measured = morph_core::fixtures::linear_profile(2.0, 0.1);
        measured.model_sha256 = Some(key.model_sha256.clone());
        (measured.engine, measured.device) = (Some(key.engine.clone()), Some(key.device.clone()));
        (measured.instances, measured.threads) = (Some(layout.instances), Some(layout.threads));
        measured.graph = key.graph.map(str::to_string);
        measured
    }

    #[test]
    fn a_cached_profile_is_reused_only_by_a_build_with_the_graph_it_timed() {
        let (key, layout) = (test_key(), Layout { instances: 2, threads: 1 });
        let mut measured = measured_for(&key, layout);
        let dir = tempfile::tempdir().unwrap();
        let cached = dir.path().join("cached.json");
        write_profile(&measured, &cached).unwrap();
        assert!(
            key.fits_cached(&LatencyProfile::load(&cached).unwrap(), layout),
            "the graph kept in the file"
        );
        for other in [None, Some("fedcba9876543210".to_string())] {
            measured.graph = other;
            assert!(key.fits(&measured, layout), "same model, engine, host and layout");
            assert!(
                !key.fits_cached(&measured, layout),
                "{:?}: another graph, measured again",
                measured.graph
            );
        }
    }

    #[test]
    fn a_refit_kept_plans_the_next_starts_buckets_but_layouts_are_compared_as_measured() {
        let key = test_key();
        let (two, one) = (Layout { instances: 2, threads: 1 }, Layout { instances: 1, threads: 2 });
        let dir = tempfile::tempdir().unwrap();
        let (two_file, one_file) =
            (dir.path().join("two.measured.json"), dir.path().join("one.measured.json"));
        // Measured alike, two one-thread instances serve twice what one two-thread one does.
        let (measured_two, measured_one) = (measured_for(&key, two), measured_for(&key, one));
        write_profile(&measured_two, &two_file).unwrap();
        write_profile(&measured_one, &one_file).unwrap();
        // Served, the two instances' batches took three times their measurement: as a refit
        // the layout would lose to the other's measurement.
        let mut refit = measured_two.with_latencies_of(morph_core::fixtures::linear_profile(6.0, 0.3));
        refit.served_batches = Some(512);
        assert!(layout_rate(&refit, 2) < layout_rate(&measured_one, 1));
        let (sink, writer) = refits_kept_in(served_beside(&two_file)).unwrap();
        sink.keep(&refit);
        drop(sink);
        writer.join().unwrap();
        let mut files: Vec<_> =
            std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        files.sort();
        assert_eq!(
            files,
            ["one.measured.json", "two.measured.json", "two.served.json"],
            "beside it, written whole"
        );

        // The next start: the layout by the measurements, its buckets from the refit.
        let found = |path: &Path| LatencyProfile::load(path).unwrap();
        assert_eq!(found(&two_file), measured_two, "the measurement is kept");
        assert!(key.fits_measured(&found(&two_file), two) && key.fits_measured(&found(&one_file), one));
        let kept = found(&served_beside(&two_file));
        assert_eq!(kept, refit);
        assert!(key.fits_served(&kept, two) && !key.fits_measured(&kept, two), "a refit is no measurement");
        let next = || {
            let profiles = vec![
                (found(&one_file), Source::Cached(one_file.clone())),
                (found(&two_file), Source::Cached(two_file.clone())),
            ];
            with_served_refit(choose(profiles, 512).unwrap(), &key, 512)
        };
        let chosen = next();
        assert_eq!((chosen.instances, chosen.threads), (2, 1));
        assert_eq!(chosen.rate, layout_rate(&measured_two, 2), "chosen by its measured rate");
        assert_eq!(chosen.profile, refit);
        assert_eq!(chosen.buckets, length_plan(&refit, 512).buckets);
        assert_ne!(chosen.buckets, length_plan(&measured_two, 512).buckets);
        assert_eq!(chosen.refits_file, Some(served_beside(&two_file)), "refitted on");

        // A refit of another build's graph is not planned from.
        refit.graph = Some("fedcba9876543210".into());
        write_profile(&refit, &served_beside(&two_file)).unwrap();
        assert_eq!(next().buckets, length_plan(&measured_two, 512).buckets);
    }

    #[test]
    fn every_split_of_the_cores_into_equal_instances_is_a_candidate() {
        let splits =
            |cores| Layout::candidates(cores).iter().map(|l| (l.instances, l.threads)).collect::<Vec<_>>();
        assert_eq!(splits(1), vec![(1, 1)]);
        assert_eq!(splits(2), vec![(1, 2), (2, 1)]);
        assert_eq!(splits(6), vec![(1, 6), (2, 3), (3, 2), (6, 1)]);
        assert_eq!(splits(16), vec![(1, 16), (2, 8), (4, 4), (8, 2), (16, 1)]);
    }

    #[test]
    fn a_named_layout_is_the_only_candidate_and_one_named_half_fills_the_cores() {
        let wanted = |instances, threads| {
            let layouts = Layout::wanted(16, Wanted { instances, threads });
            layouts.iter().map(|l| (l.instances, l.threads)).collect::<Vec<_>>()
        };
        assert_eq!(wanted(None, None).len(), 5);
        assert_eq!(wanted(Some(4), None), vec![(4, 4)]);
        assert_eq!(wanted(None, Some(2)), vec![(8, 2)]);
        assert_eq!(wanted(Some(3), Some(3)), vec![(3, 3)], "as named, even where it is no split");
        assert_eq!(wanted(None, Some(32)), vec![(1, 32)]);
    }
}
