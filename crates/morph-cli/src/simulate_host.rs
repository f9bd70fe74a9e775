//! `morph simulate --host-scenario`: several models on one host's cores, shared by load and at
//! each static split, on identical request streams; a table per run and the comparison.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context;
use morph_sim::scenario::{HostRow, HostScenario};

pub(crate) fn run(host: &HostScenario, json: bool, out: Option<&Path>) -> anyhow::Result<()> {
    let rows = crate::progress::with_progress(|progress| host.run(progress))?;
    if json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        print!("{}", table(host, &rows));
        print!("{}", comparison(&rows));
    }
    if let Some(dir) = out {
        write_cores(dir, host, &rows).with_context(|| format!("writing cores.csv into {}", dir.display()))?;
    }
    Ok(())
}

/// Each run: every model's requests, drops, SLO attainment and p99, and the least attainment.
fn table(host: &HostScenario, rows: &[HostRow]) -> String {
    let mut out = format!("host scenario {} ({} cores, {} s)\n", host.name, host.cores, host.duration_s);
    let _ = write!(out, "{:>5} {:<16}", "seed", "sharing");
    for model in &host.models {
        let _ = write!(
            out,
            " | {:<12} {:>6} {:>5} {:>6} {:>9} {:>6}",
            model.name, "reqs", "lost", "SLO", "p99 ms", "core·s"
        );
    }
    let _ = writeln!(out, " | least SLO  moves");
    for row in rows {
        let _ = write!(out, "{:>5} {:<16}", row.seed, row.sharing);
        for m in &row.models {
            let r = &m.measured;
            let _ = write!(
                out,
                " | {:<12} {:>6} {:>5} {:>5.1}% {:>9.1} {:>6.1}",
                "",
                r.requests,
                r.dropped + r.cancelled,
                r.slo_attainment * 100.0,
                r.p99_latency_ms,
                m.core_seconds
            );
        }
        let _ = writeln!(out, " | {:>8.1}%  {}", row.least_attainment * 100.0, row.moves.len());
    }
    out
}

/// Mean least attainment per way of sharing over the seeds, and shared against the best split.
fn comparison(rows: &[HostRow]) -> String {
    let mut by: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for row in rows {
        by.entry(&row.sharing).or_default().push(row.least_attainment);
    }
    let mean = |v: &Vec<f64>| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let mut out = String::from("\nmean least SLO attainment over seeds\n");
    for (sharing, values) in &by {
        let _ = writeln!(out, "  {sharing:<16} {:>6.1}%", mean(values) * 100.0);
    }
    let shared = by.get("cores by load").map(mean);
    let best = by
        .iter()
        .filter(|(s, _)| **s != "cores by load")
        .map(|(s, v)| (mean(v), *s))
        .max_by(|a, b| a.0.total_cmp(&b.0));
    if let (Some(shared), Some((best, split))) = (shared, best) {
        let ratio = if best > 0.0 { format!("{:.2}×", shared / best) } else { "—".into() };
        let _ = writeln!(out, "  cores by load / best static ({split}): {ratio}");
    }
    out
}

/// cores.csv: per run and controller period, the cores each model held and the critical one.
fn write_cores(dir: &Path, host: &HostScenario, rows: &[HostRow]) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut csv = String::from("seed,sharing,start_s");
    for model in &host.models {
        let _ = write!(csv, ",{}_cores", model.name);
    }
    csv.push_str(",critical\n");
    for row in rows {
        for p in &row.periods {
            let _ = write!(csv, "{},{},{:.3}", row.seed, row.sharing, p.start_s);
            for threads in &p.threads {
                let _ = write!(csv, ",{threads:.4}");
            }
            let critical = p.critical.map_or("", |m| host.models[m].name.as_str());
            let _ = writeln!(csv, ",{critical}");
        }
    }
    std::fs::write(dir.join("cores.csv"), csv)?;
    Ok(())
}
