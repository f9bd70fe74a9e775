//! Request traces in CSV (a header row; quoted fields as RFC 4180 writes them) or JSONL, with a
//! column mapping. Defaults fit the traces in `shared/data/traces/`: CSV `TIMESTAMP` as a
//! date-time and `ContextTokens` (Azure LLM 2023); JSONL `timestamp` in ms and `input_length`
//! (Mooncake), or `ContextTokens` (LMSYS / creation, which have no timestamps). Nothing is read
//! silently wrong: a value that does not parse is an error naming the file, line and column.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::WorkloadError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TimeUnit {
    S,
    Ms,
    /// An ISO 8601 date-time without a zone, `YYYY-MM-DD HH:MM:SS[.fraction]` or with a `T`;
    /// read as UTC.
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

/// One value of a column and the line it is on.
struct Cell {
    line: u64,
    text: String,
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

    fn invalid(&self, what: impl std::fmt::Display) -> WorkloadError {
        WorkloadError::Invalid(format!("trace {}: {what}", self.path.display()))
    }

    /// Every row's value of column `name`, with its line. A row without it is an error (JSONL
    /// rows that lack the field, or hold null, are skipped only when no row has it).
    fn column(&self, name: &str) -> Result<Vec<Cell>, WorkloadError> {
        if self.is_csv() {
            let mut reader = csv::Reader::from_path(&self.path).map_err(|e| self.invalid(e))?;
            let headers = reader.headers().map_err(|e| self.invalid(e))?.clone();
            let col = headers.iter().position(|h| h.trim() == name);
            let col =
                col.ok_or_else(|| self.invalid(format!("no column '{name}' (columns: {headers:?})")))?;
            let mut cells = Vec::new();
            for record in reader.records() {
                let record = record.map_err(|e| self.invalid(e))?;
                let line = record.position().map_or(0, |p| p.line());
                let text = record
                    .get(col)
                    .ok_or_else(|| self.invalid(format!("line {line} has no column '{name}'")))?;
                cells.push(Cell { line, text: text.trim().to_string() });
            }
            return Ok(cells);
        }
        let text = std::fs::read_to_string(&self.path).map_err(|e| self.invalid(e))?;
        let mut cells = Vec::new();
        let mut lacking = None;
        for (i, row) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            let line = i as u64 + 1;
            let value: serde_json::Value = serde_json::from_str(row)
                .map_err(|e| self.invalid(format!("line {line} is not JSON: {e}")))?;
            match &value[name] {
                serde_json::Value::Null => lacking = lacking.or(Some(line)),
                serde_json::Value::String(s) => cells.push(Cell { line, text: s.clone() }),
                other => cells.push(Cell { line, text: other.to_string() }),
            }
        }
        match (cells.is_empty(), lacking) {
            (true, _) => Err(self.invalid(format!("no field '{name}' in any row"))),
            (false, Some(line)) => Err(self.invalid(format!("line {line} has no '{name}' (other rows do)"))),
            (false, None) => Ok(cells),
        }
    }

    /// Parses every cell with `parse`; the first that fails is an error naming its line.
    fn parsed<T>(
        &self,
        name: &str,
        what: &str,
        parse: impl Fn(&str) -> Option<T>,
    ) -> Result<Vec<T>, WorkloadError> {
        self.column(name)?
            .into_iter()
            .map(|c| {
                parse(&c.text).ok_or_else(|| {
                    self.invalid(format!("line {} column '{name}': '{}' is not {what}", c.line, c.text))
                })
            })
            .collect()
    }

    /// Arrival times in seconds, ascending.
    pub fn times(&self) -> Result<Vec<f64>, WorkloadError> {
        let (default_col, default_unit) =
            if self.is_csv() { ("TIMESTAMP", TimeUnit::Datetime) } else { ("timestamp", TimeUnit::Ms) };
        let col = self.time_column.as_deref().unwrap_or(default_col);
        let mut times = match self.time_unit.unwrap_or(default_unit) {
            TimeUnit::S => self.parsed(col, "a number of seconds", finite)?,
            TimeUnit::Ms => self.parsed(col, "a number of ms", |v| finite(v).map(|ms| ms / 1e3))?,
            TimeUnit::Datetime => self.parsed(col, "a date-time", datetime_seconds)?,
        };
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
        self.parsed(&col, "a token count", |v| {
            v.parse::<f64>().ok().filter(|n| *n >= 0.0 && n.fract() == 0.0).map(|n| n as u32)
        })
    }
}

/// A finite number (Rust also reads "inf" and "NaN" as numbers, which no time is).
fn finite(v: &str) -> Option<f64> {
    v.parse::<f64>().ok().filter(|x| x.is_finite())
}

/// Seconds since 1970-01-01 of an ISO 8601 date-time without a zone (`T` or a space between
/// date and time, any fraction of a second), read as UTC: absolute, so a trace that crosses a
/// month or a year keeps its order.
pub fn datetime_seconds(s: &str) -> Option<f64> {
    let civil: jiff::civil::DateTime = s.trim().parse().ok()?;
    let instant = civil.to_zoned(jiff::tz::TimeZone::UTC).ok()?.timestamp();
    Some(instant.as_nanosecond() as f64 / 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared(name: &str) -> Trace {
        Trace::new(morph_assets::shared_data().join("traces").join(name))
    }

    #[test]
    fn parses_azure_datetimes_iso_ones_and_month_boundaries() {
        let a = datetime_seconds("2023-11-16 18:15:46.6805900").unwrap();
        let b = datetime_seconds("2023-11-16 18:15:47.1805900").unwrap();
        assert!((b - a - 0.5).abs() < 1e-6);
        assert_eq!(datetime_seconds("2023-11-16T18:15:47.1805900"), Some(b), "ISO with a T");
        let end = datetime_seconds("2023-11-30 23:59:59").unwrap();
        let next = datetime_seconds("2023-12-01 00:00:01").unwrap();
        assert_eq!(next - end, 2.0, "a month boundary keeps the order");
        assert_eq!(datetime_seconds("yesterday"), None);
    }

    fn written(name: &str, text: &str) -> (tempfile::TempDir, Trace) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        (dir, Trace::new(path))
    }

    #[test]
    fn quoted_fields_and_headers_are_read_as_csv_writes_them() {
        let text = "\"TIMESTAMP\",\"note\",\"ContextTokens\"\n\"2023-11-16 18:00:00\",\"a, b\",12\n2023-11-16T18:00:01,c,30\n";
        let (_dir, trace) = written("t.csv", text);
        assert_eq!(trace.input_lengths().unwrap(), vec![12, 30]);
        let times = trace.times().unwrap();
        assert_eq!(times[1] - times[0], 1.0);
    }

    #[test]
    fn a_bad_value_is_an_error_naming_file_line_and_column() {
        let (_dir, trace) =
            written("t.csv", "TIMESTAMP,ContextTokens\n2023-11-16 18:00:00,12\n2023-11-16 18:00:01,twelve\n");
        let err = trace.input_lengths().unwrap_err().to_string();
        assert!(
            err.contains("t.csv")
                && err.contains("line 3 column 'ContextTokens': 'twelve' is not a token count"),
            "{err}"
        );
        let (_dir, trace) = written("t.jsonl", "{\"timestamp\": 5}\n{\"timestamp\": \"soon\"}\n");
        let err = trace.times().unwrap_err().to_string();
        assert!(err.contains("line 2 column 'timestamp': 'soon' is not a number of ms"), "{err}");
        let (_dir, trace) = written("t.jsonl", "{\"timestamp\": 5}\n{\"ts\": 6}\n");
        let err = trace.times().unwrap_err().to_string();
        assert!(err.contains("line 2 has no 'timestamp' (other rows do)"), "{err}");
        let (_dir, trace) = written("t.csv", "TIMESTAMP\n2023-11-16 18:00:00\n");
        assert!(trace.input_lengths().unwrap_err().to_string().contains("no column 'ContextTokens'"));
        // Found by the trace_csv fuzz target's neighbour: Rust reads "inf" and "NaN" as numbers.
        for bad in ["NaN", "inf", "-infinity"] {
            let (_dir, trace) = written("t.jsonl", &format!("{{\"timestamp\": \"{bad}\"}}\n"));
            let err = trace.times().unwrap_err().to_string();
            assert!(err.contains(&format!("'{bad}' is not a number of ms")), "{err}");
        }
    }

    proptest::proptest! {
        /// Any rows written as CSV (a quoted free-text column holding commas, quotes and line
        /// breaks) or as JSONL read back as the same times (sorted) and lengths (in order).
        #[test]
        fn rows_read_back_as_written(
            rows in proptest::collection::vec((0u32..4_000_000, 0u32..100_000, "[a-z ,\"\n]{0,12}"), 1..40)
        ) {
            let mut csv = String::from("\"TIMESTAMP\",note,ContextTokens\n");
            let mut jsonl = String::new();
            for (ms, len, note) in &rows {
                let (secs, frac) = (ms / 1000, ms % 1000);
                let stamp = format!("2023-11-{:02} {:02}:{:02}:{:02}.{frac:03}", 1 + secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
                csv.push_str(&format!("{stamp},\"{}\",{len}\n", note.replace('"', "\"\"")));
                jsonl.push_str(&format!("{{\"timestamp\": {ms}, \"input_length\": {len}}}\n"));
            }
            let mut want: Vec<f64> = rows.iter().map(|r| f64::from(r.0) / 1e3).collect();
            want.sort_by(f64::total_cmp);
            let lens: Vec<u32> = rows.iter().map(|r| r.1).collect();
            for (name, text) in [("t.csv", &csv), ("t.jsonl", &jsonl)] {
                let (_dir, trace) = written(name, text);
                let times = trace.times().unwrap();
                let start = times[0] - want[0];
                for (got, want) in times.iter().zip(&want) {
                    proptest::prop_assert!((got - start - want).abs() < 1e-6, "{name}: {got} vs {want}");
                }
                proptest::prop_assert_eq!(trace.input_lengths().unwrap(), lens.clone());
            }
        }
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
