//! Streamed chat answers for `morph bench --endpoint chat`: when each answer's tokens
//! arrived, read off the server-sent events as they come, and a run's generation account:
//! time to first token (TTFT) and time per output token (TPOT) percentiles, and goodput
//! within a TTFT and a TPOT target (the targets of the generation benchmark, and of
//! DistServe's goodput: requests answered within both).

use serde::Serialize;
use serde_json::Value;
use tokio::time::Instant;

/// When one streamed answer's tokens arrived.
#[derive(Debug, Clone, Copy)]
pub(super) struct TokenTiming {
    /// From the request's scheduled send time to its first content token.
    pub ttft_ms: f64,
    /// From the first content token to the last, over the tokens after the first; `None`
    /// for a one-token answer.
    pub tpot_ms: Option<f64>,
    /// Completion tokens, as the answer's usage counts them.
    pub tokens: u32,
}

/// Reads a `stream: true` chat answer to its end: the token timing, the final `usage` object
/// (`stream_options.include_usage`) and the answer's text. An answer that ends without content
/// or usage, or whose stream breaks, is an error in words.
pub(super) async fn read(
    mut resp: reqwest::Response,
    scheduled: Instant,
) -> Result<(TokenTiming, Value, String), &'static str> {
    let (mut first, mut last, mut usage) = (None, None, None);
    let mut text = String::new();
    let mut pending = Vec::new();
    loop {
        let chunk = match resp.chunk().await {
            Ok(Some(chunk)) => chunk,
            Ok(None) => break,
            Err(_) => return Err("stream broken"),
        };
        pending.extend_from_slice(&chunk);
        while let Some(end) = pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            let Some(data) = line.strip_prefix(b"data:") else { continue };
            let Ok(event) = serde_json::from_slice::<Value>(data) else { continue };
            if let Some(u) = event.get("usage").filter(|u| !u.is_null()) {
                usage = Some(u.clone());
            }
            if let Some(piece) = content(&event) {
                text.push_str(&piece);
                let now = Instant::now();
                first.get_or_insert(now);
                last = Some(now);
            }
        }
    }
    let (Some(first), Some(last), Some(usage)) = (first, last, usage) else {
        return Err("stream without tokens or usage");
    };
    let tokens = usage.get("completion_tokens").and_then(Value::as_u64).unwrap_or(0) as u32;
    let ttft_ms = (first - scheduled).as_secs_f64() * 1e3;
    let tpot_ms = (tokens > 1).then(|| (last - first).as_secs_f64() * 1e3 / f64::from(tokens - 1));
    Ok((TokenTiming { ttft_ms, tpot_ms, tokens }, usage, text))
}

/// The answer text a chunk carries, if any.
fn content(event: &Value) -> Option<String> {
    let choices = event.get("choices").and_then(Value::as_array)?;
    let text: String = choices
        .iter()
        .filter_map(|choice| choice.pointer("/delta/content").and_then(Value::as_str))
        .collect();
    (!text.is_empty()).then_some(text)
}

/// The TTFT and TPOT targets a run is held to.
#[derive(Debug, Clone, Copy)]
pub(super) struct Targets {
    pub ttft_ms: f64,
    pub tpot_ms: f64,
}

/// A run's generation account.
#[derive(Debug, Serialize)]
pub(super) struct GenerationReport {
    pub ttft_p50_ms: f64,
    pub ttft_p99_ms: f64,
    pub tpot_p50_ms: f64,
    pub tpot_p99_ms: f64,
    /// Completion tokens of the answered requests per second of the run.
    pub output_tokens_per_s: f64,
    /// Whether the run's TTFT p99 and TPOT p99 are both within the targets: the rate counts
    /// towards goodput.
    pub within_targets: bool,
    /// Requests answered within both targets (each its own TTFT and TPOT), per second.
    pub goodput_rps: f64,
}

impl GenerationReport {
    /// The account of a run of `wall_s` seconds whose answered requests took `timings`.
    pub(super) fn of(timings: &[TokenTiming], wall_s: f64, targets: Targets) -> Self {
        let sorted = |mut v: Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v
        };
        let ttft = sorted(timings.iter().map(|t| t.ttft_ms).collect());
        let tpot = sorted(timings.iter().filter_map(|t| t.tpot_ms).collect());
        let p = morph_core::stats::percentile;
        let (ttft_p99_ms, tpot_p99_ms) = (p(&ttft, 0.99), p(&tpot, 0.99));
        let good = timings
            .iter()
            .filter(|t| t.ttft_ms <= targets.ttft_ms && t.tpot_ms.is_none_or(|x| x <= targets.tpot_ms))
            .count();
        GenerationReport {
            ttft_p50_ms: p(&ttft, 0.5),
            ttft_p99_ms,
            tpot_p50_ms: p(&tpot, 0.5),
            tpot_p99_ms,
            output_tokens_per_s: timings.iter().map(|t| f64::from(t.tokens)).sum::<f64>() / wall_s,
            // An empty TPOT list (one-token answers only) holds no TPOT against the target.
            within_targets: ttft_p99_ms <= targets.ttft_ms
                && (tpot.is_empty() || tpot_p99_ms <= targets.tpot_ms),
            goodput_rps: good as f64 / wall_s,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timing(ttft_ms: f64, tpot_ms: f64) -> TokenTiming {
        TokenTiming { ttft_ms, tpot_ms: Some(tpot_ms), tokens: 10 }
    }

    #[test]
    fn a_run_is_within_targets_only_when_both_p99s_are() {
        let targets = Targets { ttft_ms: 1000.0, tpot_ms: 100.0 };
        let fast: Vec<_> = (0..100).map(|i| timing(100.0 + f64::from(i), 50.0)).collect();
        let report = GenerationReport::of(&fast, 10.0, targets);
        assert!(report.within_targets);
        assert_eq!(report.goodput_rps, 10.0);
        assert_eq!(report.output_tokens_per_s, 100.0);
        // Two slow first tokens in a hundred push TTFT's p99 past the target; the other 98
        // requests still count as goodput.
        let mut late = fast.clone();
        late[0].ttft_ms = 1500.0;
        late[1].ttft_ms = 1200.0;
        let report = GenerationReport::of(&late, 10.0, targets);
        assert!(!report.within_targets);
        assert_eq!(report.ttft_p99_ms, 1200.0);
        assert_eq!(report.goodput_rps, 9.8);
        // Slow tokens alone fail the run too.
        let slow: Vec<_> = fast.iter().map(|t| TokenTiming { tpot_ms: Some(120.0), ..*t }).collect();
        assert!(!GenerationReport::of(&slow, 10.0, targets).within_targets);
    }
}
