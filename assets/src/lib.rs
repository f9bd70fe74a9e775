//! Morph's shipped assets, under this one folder:
//!
//! | folder | what |
//! |---|---|
//! | `weights/` | what Morph serves by default besides the model: OTAS's task heads and prompts (`weights/tasks/`), SSJF's length head (`weights/predictor/`); embedded in the binary. Also task heads for all-mpnet-base-v2 (`weights/tasks_mpnet/`, served with `morph serve --task-heads`; not embedded) |
//! | `profiles/` | latency profiles measured on the hosts Morph is developed on; two are embedded as `morph serve`'s defaults. OTAS's plans' latency and accuracy on all-MiniLM-L6-v2 (`profiles/otas/`) and all-mpnet-base-v2 (`profiles/otas_mpnet/`) |
//! | `datasets/` | recorded output lengths and predictions (SSJF's training and test data) |
//! | `scenarios/` | `morph simulate` scenarios |
//!
//! Crates read them through this crate, never by a path out of their own folder. Tests and
//! benchmarks may also read the project's shared data beside the checkout ([`shared_data`]).

use std::path::{Path, PathBuf};

/// The assets' root folder.
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The asset at `relative` (e.g. `"scenarios/otas_synthetic_cpu.toml"`).
pub fn path(relative: &str) -> PathBuf {
    root().join(relative)
}

/// The project's shared data beside the checkout (`../shared/data`: traces, text corpora,
/// GPU latency tables): read by tests and benchmarks, never needed to serve.
pub fn shared_data() -> PathBuf {
    root().join("../../shared/data")
}

/// The weights Morph serves by default, embedded.
pub mod weights {
    /// OTAS's task heads over all-MiniLM-L6-v2 (`morph train adapt` wrote them).
    pub const TASK_HEADS: &[u8] = include_bytes!("../weights/tasks/heads.safetensors");
    /// The tasks the heads classify, and their classes.
    pub const TASKS: &str = include_str!("../weights/tasks/tasks.json");
    /// OTAS's trained prompt tokens per task and plan.
    pub const TASK_PROMPTS: &[u8] = include_bytes!("../weights/tasks/prompts.safetensors");
    /// SSJF's length head over all-MiniLM-L6-v2, trained on SmolLM2-135M-Instruct's own output
    /// lengths on the served llama.cpp path.
    pub const LENGTH_HEAD: &[u8] = include_bytes!("../weights/predictor/head.safetensors");
    /// The length head's metadata (objective, buckets, scores).
    pub const LENGTH_HEAD_META: &str = include_str!("../weights/predictor/predictor.json");
}

/// Latency profiles shipped as `morph serve`'s defaults for the host they were measured on:
/// (file name, JSON).
/// fp32 and int8 graphs (`--dtype`), each in two layouts of the cores.
pub const SERVE_PROFILES: [(&str, &str); 4] = [
    ("minilm_ort_cpu_2core_1x2.json", include_str!("../profiles/minilm_ort_cpu_2core_1x2.json")),
    ("minilm_ort_cpu_2core_2x1.json", include_str!("../profiles/minilm_ort_cpu_2core_2x1.json")),
    ("minilm_ort_int8_cpu_2core_1x2.json", include_str!("../profiles/minilm_ort_int8_cpu_2core_1x2.json")),
    ("minilm_ort_int8_cpu_2core_2x1.json", include_str!("../profiles/minilm_ort_int8_cpu_2core_2x1.json")),
];
