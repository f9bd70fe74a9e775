//! Request traces in CSV (header row; no quoted commas) or JSONL, with a column mapping.
//! Defaults fit the traces in `shared/data/traces/`: CSV `TIMESTAMP` as a datetime and
//! `ContextTokens` (Azure LLM 2023); JSONL `timestamp` in ms and `input_length` (Mooncake), or
//! `ContextTokens` (LMSYS / creation, which have no timestamps).

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::WorkloadError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TimeUnit {
    S,
    Ms,
    /// `YYYY-MM-DD HH:MM:SS[.fraction]`.
    Datetime,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Trace {
    pub path: PathBuf,
    #[serde(default)]
    pub time_column: Option<String>,
    #[serde(default)]
    pub time_unit: Option<TimeUnit>,
    #[serde(default)]
    pub input_column: Option<String>,
}

impl Trace {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into(), time_column: None, time_unit: None, input_column: None }
    }

    fn is_csv(&self) -> bool {
        self.path.extension().is_some_and(|e| e == "csv")
    }

    /// Rebases a relative path on `dir` (the scenario file's directory).
    pub fn resolve(&mut self, dir: &Path) {
        if self.path.is_relative() {
            self.path = dir.join(&self.path);
        }
    }

    /// Rows as (column name → raw text) lookups.
    fn column(&self, name: &str) -> Result<Vec<String>, WorkloadError> {
        let text = std::fs::read_to_string(&self.path)
            .map_err(|e| WorkloadError::Invalid(format!("reading trace {}: {e}", self.path.display())))?;
        let missing =
            || WorkloadError::Invalid(format!("trace {} has no column '{name}'", self.path.display()));
        if self.is_csv() {
            let mut lines = text.lines();
            let header = lines.next().unwrap_or("");
            let col = header.split(',').position(|h| h.trim() == name).ok_or_else(missing)?;
            Ok(lines.filter_map(|l| l.split(',').nth(col).map(|v| v.trim().to_string())).collect())
        } else {
            let values: Vec<String> = text
                .lines()
                .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                .filter_map(|v| match &v[name] {
                    serde_json::Value::Null => None,
                    serde_json::Value::String(s) => Some(s.clone()),
                    other => Some(other.to_string()),
                })
                .collect();
            if values.is_empty() { Err(missing()) } else { Ok(values) }
        }
    }

    /// Arrival times in seconds, ascending.
    pub fn times(&self) -> Result<Vec<f64>, WorkloadError> {
        let (default_col, default_unit) =
            if self.is_csv() { ("TIMESTAMP", TimeUnit::Datetime) } else { ("timestamp", TimeUnit::Ms) };
        let col = self.time_column.as_deref().unwrap_or(default_col);
        let unit = self.time_unit.unwrap_or(default_unit);
        let mut times: Vec<f64> = self
            .column(col)?
            .iter()
            .filter_map(|v| match unit {
                TimeUnit::S => v.parse().ok(),
                TimeUnit::Ms => v.parse::<f64>().ok().map(|ms| ms / 1e3),
                TimeUnit::Datetime => datetime_seconds(v),
            })
            .collect();
        times.sort_by(f64::total_cmp);
        Ok(times)
    }

    /// Input lengths in tokens, in trace order.
    pub fn input_lengths(&self) -> Result<Vec<u32>, WorkloadError> {
        let col = match (&self.input_column, self.is_csv()) {
            (Some(c), _) => c.clone(),
            (None, true) => "ContextTokens".into(),
            (None, false) => {
                if self.column("input_length").is_ok() {
                    "input_length".into()
                } else {
                    "ContextTokens".into()
                }
            }
        };
        Ok(self.column(&col)?.iter().filter_map(|v| v.parse::<f64>().ok()).map(|v| v as u32).collect())
    }
}

/// Seconds since the start of the month of `YYYY-MM-DD HH:MM:SS[.fraction]`: enough to order and
/// space the arrivals of a trace that spans less than a month.
pub fn datetime_seconds(s: &str) -> Option<f64> {
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

    fn shared(name: &str) -> Trace {
        Trace::new(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/traces").join(name))
    }

    #[test]
    fn parses_azure_datetimes() {
        let a = datetime_seconds("2023-11-16 18:15:46.6805900").unwrap();
        let b = datetime_seconds("2023-11-16 18:15:47.1805900").unwrap();
        assert!((b - a - 0.5).abs() < 1e-6);
    }

    #[test]
    fn reads_the_shared_traces_with_default_columns() {
        let azure = shared("azure_llm_2023_conv.csv");
        let (times, lens) = (azure.times().unwrap(), azure.input_lengths().unwrap());
        assert_eq!((times.len(), lens.len()), (19_366, 19_366));
        let span = times[times.len() - 1] - times[0];
        assert!((3000.0..3700.0).contains(&span), "one hour, got {span} s");
        let mooncake = shared("mooncake_synthetic.jsonl");
        assert_eq!(mooncake.times().unwrap().len(), 3_993);
        assert_eq!(mooncake.input_lengths().unwrap().len(), 3_993);
        let lmsys = shared("lmsys_llama_05.jsonl");
        assert_eq!(lmsys.input_lengths().unwrap().len(), 1_024);
        assert!(lmsys.times().is_err(), "LMSYS has no timestamps");
    }
}
