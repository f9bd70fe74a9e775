//! `morph simulate`: run a scenario's policies on identical request streams in virtual time.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use morph_sim::scenario::Row;

use crate::model_args::ModelArgs;
use crate::progress::with_progress;

#[derive(Debug, Args)]
pub(crate) struct SimulateArgs {
    /// Tokenizer for corpus-length workloads (`--model`, default all-MiniLM-L6-v2).
    #[command(flatten)]
    model: ModelArgs,
    /// Scenario file (TOML): workload, cluster, profile, SLO, policies, seeds, sweep.
    #[arg(long, required_unless_present = "host_scenario", conflicts_with = "host_scenario")]
    scenario: Option<PathBuf>,
    /// Host scenario file (TOML): several models on one host's cores (`cores`, one `[[models]]`
    /// per model naming its single-model scenario), run with the cores shared by load (as one
    /// `morph serve --config` shares them) and at every static split (pinned servers); prints
    /// each model's SLO attainment and p99, and shared against the best split.
    #[arg(long)]
    host_scenario: Option<PathBuf>,
    /// Replace the scenario's seeds, comma separated.
    #[arg(long, value_delimiter = ',')]
    seeds: Option<Vec<u64>>,
    /// Replace the scenario's duration (seconds of arrivals).
    #[arg(long)]
    duration: Option<f64>,
    /// Print one JSON object per policy run instead of a table.
    #[arg(long)]
    json: bool,
    /// Write summary.csv, latency_cdf.csv, timeline.csv (per interval from t = 0: arrivals,
    /// completions, late, lost and cancelled requests, latency, longest queue), instances.csv
    /// (count over time),
    /// utilisation.csv (per instance), stages.csv (a pipeline's per-stage queue, replicas, busy
    /// replicas, CV and delay over time), latency_cdf.svg, queue.svg, instances.svg, per run
    /// of a pipeline policy stage_replicas_N.svg and stage_queue_N.svg, and for a workload with
    /// query types utility.csv and utility.svg (utility earned over time) and accuracy.csv and
    /// accuracy.svg (the accuracy of the batches served, OTAS Fig. 11) into this directory.
    #[arg(long)]
    out: Option<PathBuf>,
}

pub(crate) fn run(args: SimulateArgs) -> anyhow::Result<()> {
    let Some(path) = &args.scenario else {
        let path = args.host_scenario.as_deref().expect("clap requires one of the two");
        let mut host = args.model.load_host_scenario(path)?;
        if let Some(seeds) = args.seeds {
            host.seeds = seeds;
        }
        if let Some(d) = args.duration {
            host.duration_s = d;
        }
        return crate::simulate_host::run(&host, args.json, args.out.as_deref());
    };
    let mut scenario = args.model.load_scenario(path)?;
    if let Some(seeds) = args.seeds {
        scenario.seeds = seeds;
    }
    if let Some(d) = args.duration {
        scenario.duration_s = d;
    }
    for warning in scenario.warnings()? {
        eprintln!("warning: {warning}");
    }
    let rows = with_progress(|progress| scenario.run(progress))?;
    for warning in rows.iter().filter_map(Row::drop_warning) {
        eprintln!("warning: {warning}");
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        print!("{}", table(&scenario.name, &rows));
        print!("{}", utility_table(&rows));
    }
    if let Some(dir) = args.out {
        write_csvs(&dir, &rows).with_context(|| format!("writing CSVs into {}", dir.display()))?;
        let label = |row: &Row| format!("{} {} seed {}", row.report.policy, row.sweep_label(), row.seed);
        crate::plots::write(&dir, &scenario.name, &rows, label)
            .with_context(|| format!("writing plots into {}", dir.display()))?;
    }
    Ok(())
}

fn table(name: &str, rows: &[Row]) -> String {
    let mut out = format!("scenario {name}\n");
    // The policy column fits the longest name (a predictor's label can be long).
    let w = rows.iter().map(|r| r.report.policy.chars().count()).max().unwrap_or(0).max(6);
    let _ = writeln!(
        out,
        "{:<w$} {:<16} {:>5} {:>8} {:>8} {:>7} {:>7} {:>9} {:>9} {:>9} {:>9} {:>7} {:>10} {:>10} {:>6} {:>9}  dropped for",
        "policy",
        "sweep",
        "seed",
        "requests",
        "done",
        "dropped",
        "cancel",
        "mean ms",
        "p50 ms",
        "p98 ms",
        "p99 ms",
        "SLO",
        "thr/s",
        "good/s",
        "util",
        "inst·s"
    );
    for row in rows {
        let r = &row.report;
        let _ = writeln!(
            out,
            "{:<w$} {:<16} {:>5} {:>8} {:>8} {:>7} {:>7} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>7} {:>10.1} {:>10.1} {:>5.0}% {:>9.0}  {}",
            r.policy,
            row.sweep_label(),
            row.seed,
            r.measured.requests,
            r.measured.completed,
            r.measured.dropped,
            r.measured.cancelled,
            r.measured.mean_latency_ms,
            r.measured.p50_latency_ms,
            r.measured.p98_latency_ms,
            r.measured.p99_latency_ms,
            percent(r.measured.slo_attainment),
            r.measured.throughput_rps,
            r.measured.goodput_rps,
            r.mean_utilisation * 100.0,
            r.instance_seconds,
            dropped_for(r)
        );
        if let Some(warm) = &r.warmup {
            // The warm-up is served like the rest: its figures are shown, not hidden.
            let _ = writeln!(
                out,
                "{:<w$} {:<16} {:>5} {:>8} {:>8} {:>7} {:>7} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>7}",
                "  (warm-up)",
                "",
                "",
                warm.requests,
                warm.completed,
                warm.dropped,
                warm.cancelled,
                warm.mean_latency_ms,
                warm.p50_latency_ms,
                warm.p98_latency_ms,
                warm.p99_latency_ms,
                percent(warm.slo_attainment),
            );
        }
    }
    out
}

/// OTAS's account of each run with query types: utility earned, against the first policy of the
/// same sweep point and seed, outcome types, accuracy of served batches, plans' shares of batches.
fn utility_table(rows: &[Row]) -> String {
    let mut out = String::new();
    let w = rows.iter().map(|r| r.report.policy.chars().count()).max().unwrap_or(0).max(6);
    let mut first: Vec<(String, u64, f64)> = Vec::new();
    for row in rows {
        let Some(u) = &row.report.utility else { continue };
        if out.is_empty() {
            let _ = writeln!(
                out,
                "\n{:<w$} {:<16} {:>5} {:>10} {:>9} {:>8} {:>7} {:>7} {:>7} {:>7} {:>9}  plans (share of batches)",
                "policy",
                "sweep",
                "seed",
                "utility",
                "of max",
                "vs first",
                "type 1",
                "type 2",
                "type 3",
                "type 4",
                "batch acc"
            );
        }
        let key = (row.sweep_label(), row.seed);
        let base = match first.iter().find(|(s, seed, _)| (s, *seed) == (&key.0, key.1)) {
            Some((_, _, u)) => *u,
            None => {
                first.push((key.0.clone(), key.1, u.utility));
                u.utility
            }
        };
        let batches = u.batches_by_plan.values().sum::<usize>().max(1) as f64;
        let plans: Vec<String> = u
            .batches_by_plan
            .iter()
            .map(|(p, n)| format!("{p}:{:.0}%", *n as f64 * 100.0 / batches))
            .collect();
        let _ = writeln!(
            out,
            "{:<w$} {:<16} {:>5} {:>10.1} {:>9} {:>7.3}× {:>7} {:>7} {:>7} {:>7} {:>9}  {}",
            row.report.policy,
            key.0,
            row.seed,
            u.utility,
            percent(u.utility / u.attainable),
            u.utility / base.max(f64::MIN_POSITIVE),
            percent(u.types[0]),
            percent(u.types[1]),
            percent(u.types[2]),
            percent(u.types[3]),
            percent(u.mean_batch_accuracy),
            plans.join(" ")
        );
    }
    out
}

/// Why the run's dropped requests were dropped, `kind n; kind n` (empty when none were).
fn dropped_for(r: &morph_sim::Report) -> String {
    r.measured.dropped_by.iter().map(|(kind, n)| format!("{kind} {n}")).collect::<Vec<_>>().join("; ")
}

/// A share as `12.3%`; `-` when there was nothing to measure it over.
fn percent(share: f64) -> String {
    if share.is_nan() { "-".into() } else { format!("{:.1}%", share * 100.0) }
}

/// Report fields in `summary.csv`, after policy, sweep and seed.
const SUMMARY_KEYS: [&str; 14] = [
    "requests",
    "completed",
    "dropped",
    "cancelled",
    "mean_latency_ms",
    "p50_latency_ms",
    "p98_latency_ms",
    "p99_latency_ms",
    "slo_attainment",
    "throughput_rps",
    "goodput_rps",
    "instance_seconds",
    "mean_instances",
    "mean_utilisation",
];

fn write_csvs(dir: &std::path::Path, rows: &[Row]) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut summary = format!("policy,sweep,seed,{},dropped_for\n", SUMMARY_KEYS.join(","));
    let mut cdf = String::from("policy,sweep,seed,quantile,latency_ms\n");
    let mut timeline = String::from(
        "policy,sweep,seed,start_s,arrived,completed,late,lost,cancelled,mean_latency_ms,max_latency_ms,max_queue\n",
    );
    let mut utilisation = String::from("policy,sweep,seed,instance,utilisation\n");
    let mut instances = String::from("policy,sweep,seed,time_s,instances\n");
    let mut stages = String::from("policy,sweep,seed,time_s,gauge,stage,value\n");
    let mut utility = String::from("policy,sweep,seed,time_s,utility_earned\n");
    let mut accuracy = String::from("policy,sweep,seed,time_s,served_batch_accuracy\n");
    for row in rows {
        let r = &row.report;
        let key = format!("{},{},{}", r.policy, row.sweep_label(), row.seed);
        let fields = serde_json::to_value(r)?;
        let values: Vec<String> = SUMMARY_KEYS.iter().map(|k| fields[*k].to_string()).collect();
        let _ = writeln!(summary, "{key},{},\"{}\"", values.join(","), dropped_for(r));
        for (q, ms) in &r.latency_cdf {
            let _ = writeln!(cdf, "{key},{q},{ms}");
        }
        for i in &r.timeline {
            let _ = writeln!(
                timeline,
                "{key},{},{},{},{},{},{},{},{},{}",
                i.start_s,
                i.arrived,
                i.completed,
                i.late,
                i.lost,
                i.cancelled,
                i.mean_latency_ms,
                i.max_latency_ms,
                i.max_queue
            );
        }
        for (instance, u) in r.utilisation.iter().enumerate() {
            let _ = writeln!(utilisation, "{key},{instance},{u}");
        }
        for (t, n) in &r.instances_over_time {
            let _ = writeln!(instances, "{key},{t},{n}");
        }
        for (t, gauge, value) in &r.stage_series {
            let (name, stage) = crate::plots::split_stage_gauge(gauge);
            let _ = writeln!(stages, "{key},{t},{name},{stage},{value}");
        }
        for (t, earned) in r.utility.iter().flat_map(|u| &u.over_time) {
            let _ = writeln!(utility, "{key},{t},{earned}");
        }
        for (t, a) in r.utility.iter().flat_map(|u| &u.accuracy_over_time) {
            let _ = writeln!(accuracy, "{key},{t},{a}");
        }
    }
    if rows.iter().any(|r| r.report.utility.is_some()) {
        std::fs::write(dir.join("utility.csv"), utility)?;
        std::fs::write(dir.join("accuracy.csv"), accuracy)?;
    }
    std::fs::write(dir.join("stages.csv"), stages)?;
    std::fs::write(dir.join("instances.csv"), instances)?;
    std::fs::write(dir.join("summary.csv"), summary)?;
    std::fs::write(dir.join("latency_cdf.csv"), cdf)?;
    std::fs::write(dir.join("timeline.csv"), timeline)?;
    std::fs::write(dir.join("utilisation.csv"), utilisation)?;
    Ok(())
}
