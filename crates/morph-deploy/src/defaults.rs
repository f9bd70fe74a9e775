//! `morph serve` with no `--runtime`: the fast configuration for this host, read off the
//! engine's measured profile. Two layouts of the cores are compared, one instance on all of
//! them and one single-threaded instance per core, each measured with its instances running
//! side by side; the faster one serves, with length buckets and rows per bucket from its
//! profile (`morph_policy::batching::plan`). Profiles come from `MORPH_HOME/profiles/` (measured
//! on a first start, with a progress bar), or ship with Morph for the host they were measured
//! on (`assets/profiles/` in the repository).

use std::path::PathBuf;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use morph_backend::{Backend, EngineKind};
use morph_core::{LatencyProfile, RuntimeSpec, ShapeKind, TokenPlan, UnitSpec};
use morph_encoder::Pooling;
use morph_engine::EngineError;
use morph_engine::timing::host_device;
use morph_fetch::ModelFiles;
use morph_policy::Bucket;
use morph_policy::batching::plan::{layout_rate, length_plan};
use morph_train::profile::{MeasurePlan, measure_profile};

/// Profiles measured on the hosts Morph is developed on: (file name, JSON).
const SHIPPED: [(&str, &str); 4] = morph_assets::SERVE_PROFILES;

/// The grid a first start measures: lengths up to the model's 512, batches up to 16.
const LENS: [u32; 7] = [8, 16, 32, 64, 128, 256, 512];
const BATCHES: [u32; 5] = [1, 2, 4, 8, 16];

/// What `morph serve` runs when the user set no runtime.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ServeDefaults {
    pub runtime: RuntimeSpec,
    pub instances: usize,
    pub threads: u16,
    pub buckets: Vec<Bucket>,
    /// Where the chosen layout's profile came from, for the log.
    pub source: String,
}

/// One layout of the host's cores: `instances` instances of `threads` intra-op threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Layout {
    instances: u16,
    threads: u16,
}

impl Layout {
    /// One instance on every core, and (with several cores) one single-threaded per core.
    fn candidates(cores: u16) -> Vec<Layout> {
        let mut out = vec![Layout { instances: 1, threads: cores }];
        if cores > 1 {
            out.push(Layout { instances: cores, threads: 1 });
        }
        out
    }

    fn matches(self, p: &LatencyProfile) -> bool {
        p.instances == Some(self.instances) && p.threads == Some(self.threads)
    }
}

/// The layout that serves more, with its buckets, from one profile per candidate layout.
fn choose(profiles: Vec<(LatencyProfile, String)>, max_len: u32) -> anyhow::Result<ServeDefaults> {
    let rated = profiles.into_iter().map(|(p, source)| {
        let instances = p.instances.unwrap_or(1);
        (layout_rate(&p, u32::from(instances)), p, source)
    });
    let (_, profile, source) =
        rated.max_by(|a, b| a.0.total_cmp(&b.0)).context("no profile to choose a layout from")?;
    let plan = length_plan(&profile, max_len);
    Ok(ServeDefaults {
        runtime: RuntimeSpec::dynamic(max_len, plan.max_rows),
        instances: usize::from(profile.instances.unwrap_or(1)),
        threads: profile.threads.unwrap_or(1),
        buckets: plan.buckets,
        source,
    })
}

/// The engine's label in profile file names and `engine` fields.
fn engine_label(engine: &EngineKind) -> String {
    format!("{}-cpu", engine.label())
}

/// A profile of `layout` for this model, engine and host: cached, shipped, or measured now (on
/// `backend`, loaded the first time a layout needs measuring).
fn layout_profile(
    files: &ModelFiles,
    engine: &EngineKind,
    layout: Layout,
    backend: &mut Option<Backend>,
) -> anyhow::Result<(LatencyProfile, String)> {
    let device = host_device();
    let label = engine_label(engine);
    let fits = |p: &LatencyProfile| {
        p.model == files.name
            && p.engine.as_deref() == Some(label.as_str())
            && p.device.as_deref() == Some(device.as_str())
            && layout.matches(p)
    };
    let slug: String = device.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
    let cached = cache_dir()
        .join(format!("{}-{label}-{slug}-{}x{}.json", files.name, layout.instances, layout.threads));
    if let Ok(p) = LatencyProfile::load(&cached)
        && fits(&p)
    {
        return Ok((p, cached.display().to_string()));
    }
    for (name, json) in SHIPPED {
        if let Ok(p) = LatencyProfile::from_json(json)
            && fits(&p)
        {
            return Ok((p, format!("shipped assets/profiles/{name}")));
        }
    }
    let backend = match backend {
        Some(l) => l,
        None => backend.insert(Backend::load(files, Pooling::from_model_dir(&files.dir)?, engine)?),
    };
    let mut p = measure(&files.name, backend, layout)?;
    p.engine = Some(label);
    p.device = Some(device);
    std::fs::create_dir_all(cache_dir()).context("creating the profile cache")?;
    std::fs::write(&cached, p.to_json()).with_context(|| format!("writing {}", cached.display()))?;
    Ok((p, format!("measured now, cached in {}", cached.display())))
}

fn cache_dir() -> PathBuf {
    morph_fetch::morph_home().join("profiles")
}

/// Measures `layout` on the real engine: dynamic runtimes fed full batches, its instances side
/// by side, with a progress bar on stderr.
fn measure(model: &str, backend: &Backend, layout: Layout) -> anyhow::Result<LatencyProfile> {
    let plan = MeasurePlan {
        lens: LENS.to_vec(),
        batches: BATCHES.to_vec(),
        warmup: 1,
        runs: 5,
        tokens: TokenPlan::Plain,
        hidden: None,
        kind: ShapeKind::Dynamic,
        side_by_side: usize::from(layout.instances),
    };
    let bar = ProgressBar::new(plan.points() as u64);
    let what = format!("profiling {} x {} thread(s), once for this host", layout.instances, layout.threads);
    bar.set_style(ProgressStyle::with_template(&format!("{what} {{bar:30}} {{pos}}/{{len}} {{msg}}"))?);
    let mut profile = measure_profile(
        model,
        &plan,
        &mut |spec| backend.engine(UnitSpec::encoder(spec).with_threads(layout.threads)),
        &mut |len, batch, ms| {
            bar.set_message(format!("b{batch} l{len}: {ms:.1} ms"));
            bar.inc(1);
        },
    )
    .map_err(|e: EngineError| anyhow::anyhow!("profiling the engine: {e}"))?;
    bar.finish_and_clear();
    profile.runs = Some(plan.runs);
    profile.threads = Some(layout.threads);
    profile.instances = Some(layout.instances);
    Ok(profile)
}

/// The defaults for serving `files` on `engine` on this host.
pub(crate) fn serve_defaults(
    files: &ModelFiles,
    engine: &EngineKind,
    max_len: u32,
) -> anyhow::Result<ServeDefaults> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()).min(64) as u16;
    let mut backend = None;
    let profiles = Layout::candidates(cores)
        .into_iter()
        .map(|layout| layout_profile(files, engine, layout, &mut backend))
        .collect::<anyhow::Result<Vec<_>>>()?;
    choose(profiles, max_len)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shipped profiles of one engine label, two layouts each.
    fn shipped(engine: &str) -> Vec<(LatencyProfile, String)> {
        let all = SHIPPED.map(|(name, json)| (LatencyProfile::from_json(json).unwrap(), name.to_string()));
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
    fn a_host_with_one_core_has_one_layout() {
        assert_eq!(Layout::candidates(1), vec![Layout { instances: 1, threads: 1 }]);
        assert_eq!(Layout::candidates(4).len(), 2);
    }
}
