//! `morph serve --config FILE`: several models in one server, from a TOML deployment file.
//! At its top, `cores` (the host's cores the models share; default every core); then one
//! `[[models]]` table per model whose keys are `morph serve`'s model flags, `_` for `-`
//! (`model`, `task`, `served_model_name` as a list, `policy`, `policy_params` as a table,
//! `slo_ms`, `threads`, …). The whole file is checked before anything loads, each refusal
//! naming the model and its key; the server's own settings (address, key, timeouts) stay flags.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::parser::ValueSource;
use clap::{ArgMatches, Args, Command, FromArgMatches};
use morph_deploy::ServeSpec;

use crate::serve_args::ServeArgs;

/// The flags that are the server's, not a model's: given on the command line beside `--config`,
/// refused in a model's table.
pub(crate) const SERVER_FLAGS: [&str; 8] = [
    "config",
    "host",
    "port",
    "api_key",
    "header_timeout_s",
    "body_timeout_s",
    "max_connections",
    "drain_timeout_s",
];

/// An encoder's most padded tokens in one batch when the models share the cores (alone:
/// 16,384): about 50 ms of MiniLM on one core.
pub(crate) const SHARED_BATCH_TOKENS: u64 = 1024;
/// A decoder's most prompt tokens fed per step when the models share the cores (alone: 256):
/// about 120 ms of SmolLM2 on two cores (a decoder alone on the host computes on every core),
/// what an embedding call arriving meanwhile waits at most.
pub(crate) const SHARED_PREFILL_CHUNK: usize = 48;

/// `morph`'s own flags (logs, traces), which every subcommand's matches carry.
const GLOBAL_FLAGS: [&str; 2] = ["json_logs", "otlp_endpoint"];

/// One model of the file: what its flags ask, and its SLO for the core controller.
#[derive(Debug)]
pub(crate) struct FileModel {
    pub spec: ServeSpec,
    pub slo: Option<Duration>,
}

/// A deployment file, checked.
#[derive(Debug)]
pub(crate) struct DeploymentFile {
    pub cores: u16,
    pub models: Vec<FileModel>,
}

/// Refuses model flags given on the command line (or their variables) beside `--config`: a
/// model's settings go in its table.
pub(crate) fn refuse_model_flags(serve: &ArgMatches) -> anyhow::Result<()> {
    for id in serve.ids().map(|id| id.as_str()) {
        let source = serve.value_source(id);
        if SERVER_FLAGS.contains(&id)
            || GLOBAL_FLAGS.contains(&id)
            || !matches!(source, Some(ValueSource::CommandLine | ValueSource::EnvVariable))
        {
            continue;
        }
        let flag = id.replace('_', "-");
        let given = match source {
            Some(ValueSource::EnvVariable) => format!("{} is set", crate::flag_env::env_name(&flag)),
            _ => format!("--{flag} was given"),
        };
        bail!("{given} beside --config: a model's settings go in its [[models]] table (key {id})");
    }
    Ok(())
}

/// Reads and checks `path` for a host of `host_cores` cores.
pub(crate) fn read(path: &Path, host_cores: u16) -> anyhow::Result<DeploymentFile> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    parse(&text, host_cores).with_context(|| format!("deployment file {}", path.display()))
}

/// Checks a deployment file's text as a whole.
pub(crate) fn parse(text: &str, host_cores: u16) -> anyhow::Result<DeploymentFile> {
    let table: toml::Table = text.parse().context("not TOML")?;
    if let Some(key) = table.keys().find(|k| !matches!(k.as_str(), "cores" | "models")) {
        bail!(
            "unknown top-level key '{key}': the top level takes `cores` and [[models]] tables; a model's \
             keys go in its table, the server's (address, key, timeouts) are flags"
        );
    }
    let cores = match table.get("cores") {
        None => host_cores,
        Some(toml::Value::Integer(n)) if (1..=i64::from(host_cores)).contains(n) => *n as u16,
        Some(other) => bail!("cores = {other}: must be a whole number from 1 to this host's {host_cores}"),
    };
    let Some(toml::Value::Array(tables)) = table.get("models") else {
        bail!("no [[models]] table: give one per model");
    };
    if tables.is_empty() {
        bail!("no [[models]] table: give one per model");
    }
    let mut models = Vec::new();
    let mut names: Vec<(String, usize)> = Vec::new();
    for (at, entry) in tables.iter().enumerate() {
        let toml::Value::Table(entry) = entry else { bail!("models[{at}] is not a table") };
        let model = one_model(entry, cores).with_context(|| format!("models[{at}] ({})", title(entry)))?;
        for name in &model.spec.served_model_names {
            if let Some((_, other)) = names.iter().find(|(n, _)| n == name) {
                bail!(
                    "models[{other}] and models[{at}] both answer to the name '{name}' (served_model_name)"
                );
            }
            names.push((name.clone(), at));
        }
        models.push(model);
    }
    Ok(DeploymentFile { cores, models })
}

/// How a refusal names a model: its first served name, else its `model`.
fn title(entry: &toml::Table) -> String {
    let name = match entry.get("served_model_name") {
        Some(toml::Value::Array(names)) => names.first().cloned(),
        other => other.cloned(),
    };
    match name.or_else(|| entry.get("model").cloned()) {
        Some(toml::Value::String(s)) => s,
        Some(other) => other.to_string(),
        None => "unnamed".into(),
    }
}

/// One `[[models]]` table as the flags it stands for, checked.
fn one_model(entry: &toml::Table, cores: u16) -> anyhow::Result<FileModel> {
    let mut argv = Vec::new();
    for (key, value) in entry {
        if SERVER_FLAGS.contains(&key.as_str()) {
            bail!(
                "{key} is the server's setting, not a model's: give it as --{} on the command line",
                key.replace('_', "-")
            );
        }
        let flag = format!("--{}", key.replace('_', "-"));
        match value {
            toml::Value::Boolean(true) => argv.push(flag),
            toml::Value::Boolean(false) => {}
            // `--flag=VALUE`, so that a value starting with `-` (a negative number) is read
            // as the flag's value, not as another flag.
            toml::Value::Array(items) => {
                for item in items {
                    argv.push(format!("{flag}={}", scalar(key, item)?));
                }
            }
            toml::Value::Table(_) => argv.push(format!("{flag}={}", serde_json::to_string(value)?)),
            other => argv.push(format!("{flag}={}", scalar(key, other)?)),
        }
    }
    // A table reads its own keys only: no variable stands in for a key it leaves out.
    let command =
        ServeArgs::augment_args(Command::new("[[models]]").no_binary_name(true)).mut_args(|a| a.env(None));
    let matches = command.try_get_matches_from(&argv).map_err(|e| anyhow::anyhow!(first_line(&e)))?;
    let args = ServeArgs::from_arg_matches(&matches).map_err(|e| anyhow::anyhow!(first_line(&e)))?;
    let slo = args.slo().map(Duration::from_secs_f64);
    let defaulted = |id: &str| matches.value_source(id) == Some(ValueSource::DefaultValue);
    let (batch_tokens, chunk) = (defaulted("max_batch_tokens"), defaulted("prefill_chunk"));
    let mut spec = args.spec()?;
    // Shorter computations when cores are shared: a batch or a decoder step holds its cores
    // until it ends, and whatever another model has waits that long.
    if batch_tokens {
        spec.max_batch_tokens = SHARED_BATCH_TOKENS;
    }
    if chunk {
        spec.prefill_chunk = SHARED_PREFILL_CHUNK;
    }
    if spec.served_model_names.is_empty() {
        bail!(
            "served_model_name is missing: each model of a deployment file is named, the name calls give in `model`"
        );
    }
    if spec.workers.is_some() {
        bail!(
            "workers: every model of a deployment file runs its instances as threads of the server, \
             sharing its cores (worker processes are for a single-model server)"
        );
    }
    if let Some(threads) = spec.threads.filter(|t| *t > cores) {
        bail!("threads = {threads} is more than the {cores} cores the models share (cores)");
    }
    if let Some(threads) = spec.batch_threads.filter(|t| *t > cores) {
        bail!("batch_threads = {threads} is more than the {cores} cores the models share (cores)");
    }
    spec.check()?;
    Ok(FileModel { spec: defaults_when_shared(spec, cores), slo })
}

/// A model sharing the host's cores defaults to one instance of one thread per core, a decoder
/// as an encoder: an idle instance holds no core, so a model computes on every core while the
/// others idle, and no computation waits for a second core to free (a two-thread decoder step
/// would idle a core while a one-thread batch runs: docs/serving.md, several models).
fn defaults_when_shared(mut spec: ServeSpec, cores: u16) -> ServeSpec {
    if spec.threads.is_none() {
        spec.threads = Some(1);
        spec.instances = spec.instances.or(Some(usize::from(cores)));
    }
    spec
}

/// A key's value as a flag's text.
fn scalar(key: &str, value: &toml::Value) -> anyhow::Result<String> {
    Ok(match value {
        toml::Value::String(s) => s.clone(),
        toml::Value::Integer(n) => n.to_string(),
        toml::Value::Float(x) => x.to_string(),
        other => bail!("{key} = {other}: must be a string or a number"),
    })
}

/// clap's refusal as one line (its text up to the usage or advice), an unknown flag named as
/// the file's key.
fn first_line(error: &clap::Error) -> String {
    let text = error.render().to_string();
    let lines: Vec<&str> = text.lines().take_while(|l| !l.trim().is_empty()).map(str::trim).collect();
    let joined = lines.join(" ");
    let line = joined.trim_start_matches("error: ");
    match error.kind() {
        clap::error::ErrorKind::UnknownArgument => {
            let flag = line.split('\'').nth(1).unwrap_or(line);
            let key = flag.split('=').next().unwrap_or(flag).trim_start_matches("--").replace('-', "_");
            format!(
                "unknown key '{key}': a model's keys are morph serve's flags, with _ for - (morph serve --help)"
            )
        }
        _ => line.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use morph_deploy::Task;

    use super::*;

    const THREE: &str = r#"
        cores = 2
        [[models]]
        served_model_name = ["minilm", "text-embedding-3-small"]
        slo_ms = 50
        [[models]]
        model = "/models/cross-encoder"
        served_model_name = ["reranker"]
        max_batch_tokens = 2048
        deadline_ms = 1500
        [[models]]
        task = "generate"
        served_model_name = ["smollm2"]
        policy = "ssjf"
        policy_params = { batching = { mode = "continuous" } }
    "#;

    fn refusal(text: &str) -> String {
        format!("{:#}", parse(text, 2).unwrap_err())
    }

    #[test]
    fn a_three_model_file_reads_as_three_specs_with_the_shared_defaults() {
        let file = parse(THREE, 2).unwrap();
        assert_eq!(file.cores, 2);
        let [embed, rerank, generate] = &file.models[..] else { panic!("{file:?}") };
        assert_eq!(embed.spec.served_model_names, ["minilm", "text-embedding-3-small"]);
        assert_eq!(embed.slo, Some(Duration::from_millis(50)));
        assert_eq!((embed.spec.threads, embed.spec.instances), (Some(1), Some(2)));
        assert_eq!(rerank.spec.model.model.as_deref(), Some("/models/cross-encoder"));
        assert_eq!(rerank.spec.max_batch_tokens, 2048);
        assert_eq!((rerank.spec.deadline_ms, embed.spec.deadline_ms), (Some(1500.0), None));
        assert_eq!(embed.spec.max_batch_tokens, SHARED_BATCH_TOKENS);
        assert_eq!(generate.spec.prefill_chunk, SHARED_PREFILL_CHUNK);
        assert_eq!(generate.spec.task, Task::Generate);
        assert_eq!((generate.spec.threads, generate.spec.instances), (Some(1), Some(2)));
        assert_eq!(generate.spec.policy.as_deref(), Some("ssjf"));
        assert_eq!(generate.spec.policy_params["batching"]["mode"], "continuous");
    }

    #[test]
    fn a_model_flag_beside_config_is_refused_and_the_servers_and_morphs_own_are_not() {
        use clap::CommandFactory;
        let refusal = |args: &[&str]| {
            let command = crate::flag_env::serve_flags_from_env(crate::Cli::command());
            let matches = command.try_get_matches_from(args).expect("the flags parse");
            refuse_model_flags(matches.subcommand_matches("serve").expect("serve"))
                .err()
                .map(|e| e.to_string())
        };
        let server =
            ["morph", "--json-logs", "serve", "--config", "app.toml", "--port", "0", "--api-key", "k"];
        assert_eq!(refusal(&server), None);
        let model =
            refusal(&["morph", "serve", "--config", "app.toml", "--max-queue", "3"]).expect("a refusal");
        assert!(
            model.contains("--max-queue was given beside --config") && model.contains("key max_queue"),
            "{model}"
        );
    }

    #[test]
    fn each_refusal_names_the_model_and_its_key() {
        let unknown_task = refusal("[[models]]\nserved_model_name = [\"t\"]\ntask = \"translate\"");
        assert!(
            unknown_task.contains("models[0] (t)") && unknown_task.contains("'translate'"),
            "{unknown_task}"
        );
        assert!(unknown_task.contains("embed, generate"), "{unknown_task}");
        let twice = refusal(
            "[[models]]\nserved_model_name = [\"a\", \"b\"]\n[[models]]\ntask = \"generate\"\nserved_model_name = [\"b\"]",
        );
        assert!(twice.contains("models[0] and models[1] both answer to the name 'b'"), "{twice}");
        let threads = refusal("cores = 2\n[[models]]\nserved_model_name = [\"a\"]\nthreads = 3");
        assert!(
            threads.contains("models[0] (a)") && threads.contains("threads = 3 is more than the 2 cores"),
            "{threads}"
        );
        let batch = refusal(
            "cores = 2\n[[models]]\ntask = \"generate\"\nserved_model_name = [\"g\"]\nbatch_threads = 4",
        );
        assert!(
            batch.contains("models[0] (g)") && batch.contains("batch_threads = 4 is more than"),
            "{batch}"
        );
        let encoder = refusal("[[models]]\nserved_model_name = [\"e\"]\nbatch_threads = 2");
        assert!(encoder.contains("--batch-threads is for --task generate"), "{encoder}");
        let prefill = refusal("[[models]]\nserved_model_name = [\"e\"]\nprefill_weights = \"file\"");
        assert!(prefill.contains("--prefill-weights is for --task generate"), "{prefill}");
        let candle = refusal(
            "[[models]]\ntask = \"generate\"\nserved_model_name = [\"g\"]\ndecoder_kernels = \"candle\"\nprefill_weights = \"q8_0\"",
        );
        assert!(candle.contains("--prefill-weights is for --task generate on llama.cpp"), "{candle}");
        let cores = refusal("cores = 3\n[[models]]\nserved_model_name = [\"a\"]");
        assert!(cores.contains("cores = 3: must be a whole number from 1 to this host's 2"), "{cores}");
        let key = refusal("[[models]]\nserved_model_name = [\"a\"]\nmax_qeue = 3");
        assert!(key.contains("models[0] (a)") && key.contains("unknown key 'max_qeue'"), "{key}");
        let deadline = refusal("[[models]]\nserved_model_name = [\"a\"]\ndeadline_ms = -5");
        assert!(
            deadline.contains("models[0] (a)")
                && deadline.contains("must be a positive number of milliseconds, got -5"),
            "{deadline}"
        );
        let server = refusal("[[models]]\nserved_model_name = [\"a\"]\nport = 9000");
        assert!(server.contains("port is the server's setting") && server.contains("--port"), "{server}");
        let unnamed = refusal("[[models]]\ntask = \"embed\"");
        assert!(
            unnamed.contains("models[0] (unnamed)") && unnamed.contains("served_model_name is missing"),
            "{unnamed}"
        );
        let workers = refusal("[[models]]\nserved_model_name = [\"a\"]\nworkers = \"process\"");
        assert!(workers.contains("workers: every model"), "{workers}");
        assert!(
            refusal("port = 1\n[[models]]\nserved_model_name = [\"a\"]")
                .contains("unknown top-level key 'port'")
        );
        assert!(refusal("cores = 1").contains("no [[models]] table"));
    }
}
