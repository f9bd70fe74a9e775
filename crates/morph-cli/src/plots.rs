//! SVG plots for `morph simulate --out`: latency CDF per run, queue length and instance count
//! over time, a pipeline's replicas and queue per stage over time, and OTAS's utility earned
//! over time (the paper's Fig. 9 and 10).

use std::path::Path;

use morph_sim::scenario::Row;
use plotters::prelude::*;

const PALETTE: [RGBColor; 6] = [BLUE, RED, GREEN, MAGENTA, CYAN, BLACK];

/// One line per run, labelled `policy sweep seed`.
fn lines(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[(String, Vec<(f64, f64)>)],
) -> anyhow::Result<()> {
    let x_max = series.iter().flat_map(|(_, pts)| pts.iter().map(|p| p.0)).fold(0.0, f64::max).max(1e-9);
    let y_max = series.iter().flat_map(|(_, pts)| pts.iter().map(|p| p.1)).fold(0.0, f64::max).max(1e-9);
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..x_max * 1.02, 0.0..y_max * 1.05)?;
    chart.configure_mesh().x_desc(x_label).y_desc(y_label).draw()?;
    for (i, (label, pts)) in series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))?
            .label(label.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
    }
    chart.configure_series_labels().border_style(BLACK).background_style(WHITE.mix(0.8)).draw()?;
    root.present()?;
    Ok(())
}

pub(crate) fn write(
    dir: &Path,
    scenario: &str,
    rows: &[Row],
    label: impl Fn(&Row) -> String,
) -> anyhow::Result<()> {
    let cdf: Vec<(String, Vec<(f64, f64)>)> = rows
        .iter()
        .map(|row| (label(row), row.report.latency_cdf.iter().map(|(q, ms)| (*ms, *q)).collect()))
        .collect();
    lines(
        &dir.join("latency_cdf.svg"),
        &format!("{scenario}: latency CDF"),
        "latency (ms)",
        "fraction of requests",
        &cdf,
    )?;
    let queue: Vec<(String, Vec<(f64, f64)>)> = rows
        .iter()
        .map(|row| {
            (label(row), row.report.timeline.iter().map(|i| (i.start_s, i.max_queue as f64)).collect())
        })
        .collect();
    lines(
        &dir.join("queue.svg"),
        &format!("{scenario}: longest queue per interval"),
        "time (s)",
        "sequences waiting",
        &queue,
    )?;
    let instances: Vec<(String, Vec<(f64, f64)>)> = rows
        .iter()
        .map(|row| {
            // A step line: each count holds until the next change.
            let changes = &row.report.instances_over_time;
            let mut pts = Vec::with_capacity(changes.len() * 2 + 1);
            for (k, (t, n)) in changes.iter().enumerate() {
                if k > 0 {
                    pts.push((*t, changes[k - 1].1 as f64));
                }
                pts.push((*t, *n as f64));
            }
            pts.push((row.report.duration_s, changes.last().map_or(0.0, |c| c.1 as f64)));
            (label(row), pts)
        })
        .collect();
    lines(
        &dir.join("instances.svg"),
        &format!("{scenario}: instances"),
        "time (s)",
        "instances holding a slot",
        &instances,
    )?;
    let utility: Vec<(String, Vec<(f64, f64)>)> = rows
        .iter()
        .filter_map(|row| Some((label(row), row.report.utility.as_ref()?.over_time.clone())))
        .collect();
    if !utility.is_empty() {
        let title = format!("{scenario}: utility earned (correct answers within their SLO)");
        lines(&dir.join("utility.svg"), &title, "time (s)", "utility", &utility)?;
        let accuracy: Vec<(String, Vec<(f64, f64)>)> = rows
            .iter()
            .filter_map(|row| Some((label(row), row.report.utility.as_ref()?.accuracy_over_time.clone())))
            .collect();
        let title = format!("{scenario}: accuracy of the batches served");
        lines(&dir.join("accuracy.svg"), &title, "time (s)", "accuracy", &accuracy)?;
    }
    for (n, row) in rows.iter().enumerate().filter(|(_, r)| !r.report.stage_series.is_empty()) {
        for (gauge, what) in [("stage_replicas", "replicas"), ("stage_queue", "requests waiting")] {
            let series = by_stage(&row.report.stage_series, gauge);
            let title = format!("{scenario}: {what} per stage, {}", label(row));
            lines(&dir.join(format!("{gauge}_{n}.svg")), &title, "time (s)", what, &series)?;
        }
    }
    Ok(())
}

/// `name{stage=k}` → (`name`, `k`).
pub(crate) fn split_stage_gauge(key: &str) -> (&str, &str) {
    let (name, rest) = key.split_once('{').unwrap_or((key, ""));
    (name, rest.trim_start_matches("stage=").trim_end_matches('}'))
}

/// One line per stage of `gauge` over time.
fn by_stage(series: &[(f64, String, f64)], gauge: &str) -> Vec<(String, Vec<(f64, f64)>)> {
    let mut stages: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for (t, key, value) in series {
        let (name, stage) = split_stage_gauge(key);
        if name != gauge {
            continue;
        }
        let label = format!("stage {stage}");
        match stages.iter_mut().find(|(l, _)| *l == label) {
            Some((_, pts)) => pts.push((*t, *value)),
            None => stages.push((label, vec![(*t, *value)])),
        }
    }
    stages
}
