//! Latency profiles: median batch latency per (batch size, sequence length).
//!
//! Schema (JSON), shared with the GPU table in `shared/data/profiles/`:
//! ```json
//! { "model": "all-MiniLM-L6-v2",
//!   "engine": "candle-cpu",          // optional: what produced it
//!   "device": "2 cores ...",         // optional
//!   "runs": 20,                      // optional: timed runs per point
//!   "stage": 1,                      // optional: the pipeline stage measured (index)
//!   "plan": "merge:1",               // optional: the token plan measured
//!   "threads": 1,                    // optional: intra-op threads of the instance measured
//!   "instances": 2,                  // optional: instances running side by side meanwhile
//!   "latency": { "<batch>": { "<seq_len>": <median ms>, ... }, ... } }
//! ```
//! Keys are decimal strings (JSON objects need string keys). Unknown fields are ignored, so
//! `"batchsize": "1-64"` and `"seq_len": "1-512"` in the GPU table are accepted; points whose
//! key is not a number (the GPU table has one `""` entry) are skipped and counted in
//! [`LatencyProfile::skipped`].
//!
//! A profile without `stage` and `plan` is the whole, plain model's; the simulator prices a
//! stage's or a plan's batches by the profile that names them, where one is given.
//!
//! Lookups interpolate linearly in sequence length within a batch row, then linearly between
//! the two measured batch sizes around the query. Outside the measured range the latency is
//! clamped at the low end and scaled proportionally at the high end (work grows with tokens).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::runtime::PaddedShape;
use crate::time::{Nanos, ms_to_nanos};
use crate::token_plan::TokenPlan;

#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("cannot read profile {path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("profile {path} is not valid JSON for the profile schema: {source}")]
    Json { path: String, source: serde_json::Error },
    #[error("profile has no latency points")]
    Empty,
    #[error("profile point at batch {batch}, length {len}: {why}")]
    BadPoint { batch: u32, len: u32, why: &'static str },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct ProfileFile {
    model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    engine: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    device: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    runs: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    stage: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    plan: Option<TokenPlan>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    threads: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    instances: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    model_sha256: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    graph: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    served_batches: Option<u32>,
    latency: BTreeMap<String, BTreeMap<String, f64>>,
}

/// One measured batch size: sequence lengths ascending, with median latency in ms.
#[derive(Debug, Clone, PartialEq)]
struct Row {
    batch: u32,
    points: Vec<(u32, f64)>,
}

impl Row {
    fn at_len(&self, len: u32) -> f64 {
        interpolate(&self.points, len)
    }
}

/// One measured point: a batch of `batch` rows padded to `len` tokens took `ms` (median).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub batch: u32,
    pub len: u32,
    pub ms: f64,
}

/// A latency table, queried with [`LatencyProfile::latency_ms`].
#[derive(Debug, Clone, PartialEq)]
pub struct LatencyProfile {
    pub model: String,
    pub engine: Option<String>,
    pub device: Option<String>,
    pub runs: Option<u32>,
    /// The pipeline stage (index) and token plan measured; `None`: the whole model, plain.
    pub stage: Option<u16>,
    pub plan: Option<TokenPlan>,
    /// Intra-op threads of the instance measured, and how many instances ran side by side
    /// (each on the same shape) while it was; `None`: not recorded.
    pub threads: Option<u16>,
    pub instances: Option<u16>,
    /// The content of the model measured (config and weights, see `morph_fetch`), which a
    /// cached profile is found by; `None`: not recorded (found by the model's name).
    pub model_sha256: Option<String>,
    /// The fingerprint of the engine's graph code measured (`morph_encoder`'s
    /// `GRAPH_FINGERPRINT`); `None`: not recorded, or an engine with no such graph.
    pub graph: Option<String>,
    /// A refit to the batches a server ran: how many it weighed beside the profile it refined;
    /// `None`: measured (or shipped), every shape timed alike on the engine alone.
    pub served_batches: Option<u32>,
    /// Points in the file skipped because their batch or length key is not a number.
    pub skipped: usize,
    rows: Vec<Row>,
}

/// Linear interpolation over ascending `(x, y)` points (at least one, `x` ≥ 1); clamped below,
/// proportional above.
pub fn interpolate(points: &[(u32, f64)], x: u32) -> f64 {
    let (first, last) = (points[0], points[points.len() - 1]);
    if x <= first.0 {
        return first.1;
    }
    if x >= last.0 {
        return last.1 * f64::from(x) / f64::from(last.0);
    }
    let hi = points.partition_point(|p| p.0 < x);
    let (x0, y0) = points[hi - 1];
    let (x1, y1) = points[hi];
    y0 + (y1 - y0) * f64::from(x - x0) / f64::from(x1 - x0)
}

impl LatencyProfile {
    /// Builds a profile from measured points.
    pub fn from_points(
        model: impl Into<String>,
        points: impl IntoIterator<Item = Point>,
    ) -> Result<Self, ProfileError> {
        let mut by_batch: BTreeMap<u32, BTreeMap<u32, f64>> = BTreeMap::new();
        for Point { batch, len, ms } in points {
            let why = match () {
                _ if batch == 0 || len == 0 => Some("a batch and a length are at least 1"),
                _ if !ms.is_finite() || ms < 0.0 => Some("the latency is not a finite number of ms ≥ 0"),
                _ => None,
            };
            if let Some(why) = why {
                return Err(ProfileError::BadPoint { batch, len, why });
            }
            by_batch.entry(batch).or_default().insert(len, ms);
        }
        let rows: Vec<Row> = by_batch
            .into_iter()
            .filter(|(_, pts)| !pts.is_empty())
            .map(|(batch, pts)| Row { batch, points: pts.into_iter().collect() })
            .collect();
        if rows.is_empty() {
            return Err(ProfileError::Empty);
        }
        Ok(Self {
            model: model.into(),
            engine: None,
            device: None,
            runs: None,
            stage: None,
            plan: None,
            threads: None,
            instances: None,
            model_sha256: None,
            graph: None,
            served_batches: None,
            skipped: 0,
            rows,
        })
    }

    /// This profile (its model, engine, host and layout) with the latencies of `fitted`.
    pub fn with_latencies_of(&self, fitted: LatencyProfile) -> Self {
        Self { rows: fitted.rows, skipped: 0, ..self.clone() }
    }

    pub fn load(path: &Path) -> Result<Self, ProfileError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|source| ProfileError::Io { path: shown.clone(), source })?;
        Self::from_json(&text).map_err(|e| match e {
            ProfileError::Json { source, .. } => ProfileError::Json { path: shown, source },
            other => other,
        })
    }

    pub fn from_json(text: &str) -> Result<Self, ProfileError> {
        let file: ProfileFile = serde_json::from_str(text)
            .map_err(|source| ProfileError::Json { path: "<text>".into(), source })?;
        let mut points = Vec::new();
        let mut skipped = 0;
        for (batch, row) in &file.latency {
            for (len, ms) in row {
                match (batch.trim().parse::<u32>(), len.trim().parse::<u32>()) {
                    (Ok(batch), Ok(len)) => points.push(Point { batch, len, ms: *ms }),
                    _ => skipped += 1,
                }
            }
        }
        let mut profile = Self::from_points(file.model, points)?;
        profile.skipped = skipped;
        profile.engine = file.engine;
        profile.device = file.device;
        profile.runs = file.runs;
        profile.stage = file.stage;
        profile.plan = file.plan;
        profile.threads = file.threads;
        profile.instances = file.instances;
        profile.model_sha256 = file.model_sha256;
        profile.graph = file.graph;
        profile.served_batches = file.served_batches;
        Ok(profile)
    }

    pub fn to_json(&self) -> String {
        let latency = self
            .rows
            .iter()
            .map(|r| {
                let row = r.points.iter().map(|(l, ms)| (l.to_string(), *ms)).collect();
                (r.batch.to_string(), row)
            })
            .collect();
        let file = ProfileFile {
            model: self.model.clone(),
            engine: self.engine.clone(),
            device: self.device.clone(),
            runs: self.runs,
            stage: self.stage,
            plan: self.plan,
            threads: self.threads,
            instances: self.instances,
            model_sha256: self.model_sha256.clone(),
            graph: self.graph.clone(),
            served_batches: self.served_batches,
            latency,
        };
        serde_json::to_string_pretty(&file).unwrap_or_default()
    }

    /// Measured batch sizes, ascending.
    pub fn batches(&self) -> impl Iterator<Item = u32> + '_ {
        self.rows.iter().map(|r| r.batch)
    }

    /// Measured sequence lengths of the smallest batch size, ascending.
    pub fn lengths(&self) -> Vec<u32> {
        self.rows.first().map(|r| r.points.iter().map(|p| p.0).collect()).unwrap_or_default()
    }

    /// Largest measured sequence length over all batch sizes.
    pub fn max_len(&self) -> u32 {
        self.rows.iter().filter_map(|r| r.points.last().map(|p| p.0)).max().unwrap_or(0)
    }

    /// Median latency in ms of one batch of `shape.batch` rows padded to `shape.len` tokens.
    pub fn latency_ms(&self, shape: PaddedShape) -> f64 {
        let PaddedShape { len, batch } = shape;
        let hi = self.rows.partition_point(|r| r.batch < batch);
        if hi == self.rows.len() {
            let last = &self.rows[hi - 1];
            return last.at_len(len) * f64::from(batch) / f64::from(last.batch);
        }
        let upper = &self.rows[hi];
        if upper.batch == batch || hi == 0 {
            return upper.at_len(len);
        }
        let lower = &self.rows[hi - 1];
        let (y0, y1) = (lower.at_len(len), upper.at_len(len));
        y0 + (y1 - y0) * f64::from(batch - lower.batch) / f64::from(upper.batch - lower.batch)
    }

    pub fn latency(&self, shape: PaddedShape) -> Nanos {
        ms_to_nanos(self.latency_ms(shape))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid() -> LatencyProfile {
        let points = [(1, 8, 1.0), (1, 16, 2.0), (1, 32, 6.0), (4, 8, 3.0), (4, 16, 5.0), (4, 32, 9.0)];
        LatencyProfile::from_points("m", points.map(|(batch, len, ms)| Point { batch, len, ms })).unwrap()
    }

    #[test]
    fn exact_points_are_returned() {
        let p = grid();
        assert_eq!(p.latency_ms(PaddedShape { len: 16, batch: 1 }), 2.0);
        assert_eq!(p.latency_ms(PaddedShape { len: 32, batch: 4 }), 9.0);
    }

    #[test]
    fn interpolates_in_length_then_batch() {
        let p = grid();
        assert_eq!(p.latency_ms(PaddedShape { len: 24, batch: 1 }), 4.0);
        assert_eq!(p.latency_ms(PaddedShape { len: 12, batch: 4 }), 4.0);
        // batch 2 is a third of the way from 1 to 4: at len 16, 2 + (5-2)/3 = 3
        assert!((p.latency_ms(PaddedShape { len: 16, batch: 2 }) - 3.0).abs() < 1e-12);
    }

    #[test]
    fn clamps_below_and_scales_above() {
        let p = grid();
        assert_eq!(p.latency_ms(PaddedShape { len: 1, batch: 1 }), 1.0);
        assert_eq!(p.latency_ms(PaddedShape { len: 64, batch: 1 }), 12.0);
        assert_eq!(p.latency_ms(PaddedShape { len: 8, batch: 8 }), 6.0);
    }

    #[test]
    fn json_round_trip_and_foreign_fields() {
        let text = r#"{"model":"x","batchsize":"1-2","seq_len":"1-5",
            "latency":{"1":{"1":1.5,"5":2.5},"2":{"1":2.0,"5":4.0}}}"#;
        let p = LatencyProfile::from_json(text).unwrap();
        assert_eq!(p.latency_ms(PaddedShape { len: 3, batch: 1 }), 2.0);
        assert_eq!(p.batches().collect::<Vec<_>>(), vec![1, 2]);
        assert_eq!(LatencyProfile::from_json(&p.to_json()).unwrap(), p);
        assert_eq!((p.stage, p.plan), (None, None));
        let keyed =
            LatencyProfile::from_json(r#"{"model":"x","stage":1,"plan":-2,"latency":{"1":{"1":1.0}}}"#)
                .unwrap();
        assert_eq!(
            (keyed.stage, keyed.plan),
            (Some(1), Some(TokenPlan::Merge(2))),
            "an old file's numeric plan"
        );
        assert!(keyed.to_json().contains(r#""plan": "merge:2""#), "{}", keyed.to_json());
        assert_eq!(LatencyProfile::from_json(&keyed.to_json()).unwrap(), keyed);
        assert_eq!(keyed.served_batches, None, "measured");
        let refit = LatencyProfile { served_batches: Some(2048), ..keyed };
        assert_eq!(LatencyProfile::from_json(&refit.to_json()).unwrap(), refit);
    }

    #[test]
    fn skips_bad_keys_and_rejects_empty_tables() {
        let p = LatencyProfile::from_json(r#"{"model":"x","latency":{"a":{"1":1.0},"1":{"":9.0,"4":2.0}}}"#);
        let p = p.unwrap();
        assert_eq!((p.skipped, p.latency_ms(PaddedShape { len: 4, batch: 1 })), (2, 2.0));
        assert!(matches!(
            LatencyProfile::from_json(r#"{"model":"x","latency":{"a":{"1":1.0}}}"#),
            Err(ProfileError::Empty)
        ));
        assert!(matches!(
            LatencyProfile::from_json(r#"{"model":"x","latency":{}}"#),
            Err(ProfileError::Empty)
        ));
    }

    /// Found by the `profile` fuzz target: a batch of 0 made every latency above the table
    /// infinite (extrapolated in proportion to the batch); such points are refused by name.
    #[test]
    fn refuses_points_that_cannot_be_latencies() {
        for (latency, batch, len) in
            [(r#"{"0":{"8":12.7}}"#, 0, 8), (r#"{"1":{"0":1.0}}"#, 1, 0), (r#"{"2":{"8":-1.0}}"#, 2, 8)]
        {
            let text = format!(r#"{{"model":"x","latency":{latency}}}"#);
            let err = LatencyProfile::from_json(&text).expect_err(&text);
            assert!(
                matches!(err, ProfileError::BadPoint { batch: b, len: l, .. } if (b, l) == (batch, len)),
                "{err}"
            );
        }
    }
}
