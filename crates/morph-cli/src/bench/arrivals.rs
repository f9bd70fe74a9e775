//! Arrival schedules for the open-loop load generator: Poisson at a rate, or a trace's times.

use std::path::Path;

use anyhow::{Context, bail};
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand_distr::{Distribution, Exp};

/// Offsets (seconds from the start) of a Poisson process at `rate` per second, up to `duration`.
pub(crate) fn poisson(rate: f64, duration: f64, seed: u64) -> anyhow::Result<Vec<f64>> {
    let gap = Exp::new(rate).with_context(|| format!("rate {rate} must be positive"))?;
    let mut rng = StdRng::seed_from_u64(seed);
    let mut t = 0.0;
    let mut out = Vec::new();
    loop {
        t += gap.sample(&mut rng);
        if t >= duration {
            return Ok(out);
        }
        out.push(t);
    }
}

/// Offsets of a trace's requests, sped up by `speedup`, up to `duration`. JSONL traces give
/// `timestamp` in ms (Mooncake); CSV traces give a `TIMESTAMP` column as
/// `YYYY-MM-DD HH:MM:SS[.fraction]` (Azure LLM).
pub(crate) fn from_trace(path: &Path, speedup: f64, duration: f64) -> anyhow::Result<Vec<f64>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading trace {}", path.display()))?;
    let mut times: Vec<f64> = if path.extension().is_some_and(|e| e == "jsonl") {
        text.lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter_map(|v| v["timestamp"].as_f64().map(|ms| ms / 1e3))
            .collect()
    } else {
        let mut lines = text.lines();
        let header = lines.next().unwrap_or("");
        let Some(col) = header.split(',').position(|h| h.trim() == "TIMESTAMP") else {
            bail!("trace {} has no TIMESTAMP column", path.display());
        };
        lines.filter_map(|l| l.split(',').nth(col).and_then(datetime_seconds)).collect()
    };
    if times.is_empty() {
        bail!("trace {} has no timestamps", path.display());
    }
    times.sort_by(f64::total_cmp);
    let first = times[0];
    Ok(times.into_iter().map(|t| (t - first) / speedup).filter(|t| *t < duration).collect())
}

/// Seconds since the start of the month of `YYYY-MM-DD HH:MM:SS[.fraction]` (enough to order
/// and space arrivals within a trace).
fn datetime_seconds(s: &str) -> Option<f64> {
    let (date, time) = s.trim().split_once(' ')?;
    let day: f64 = date.split('-').nth(2)?.parse().ok()?;
    let mut hms = time.split(':');
    let h: f64 = hms.next()?.parse().ok()?;
    let m: f64 = hms.next()?.parse().ok()?;
    let sec: f64 = hms.next()?.parse().ok()?;
    Some(((day * 24.0 + h) * 60.0 + m) * 60.0 + sec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poisson_has_the_rate_and_is_seeded() {
        let a = poisson(100.0, 100.0, 7).unwrap();
        assert!((a.len() as f64 - 10_000.0).abs() < 300.0, "{}", a.len());
        assert_eq!(a, poisson(100.0, 100.0, 7).unwrap());
        assert_ne!(a, poisson(100.0, 100.0, 8).unwrap());
    }

    #[test]
    fn parses_azure_datetimes() {
        let a = datetime_seconds("2023-11-16 18:15:46.6805900").unwrap();
        let b = datetime_seconds("2023-11-16 18:15:47.1805900").unwrap();
        assert!((b - a - 0.5).abs() < 1e-6);
    }
}
