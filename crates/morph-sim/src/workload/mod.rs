//! Workloads: a seeded request stream of arrival times, input lengths and, for generation,
//! output lengths.

mod arrivals;
pub mod corpus;
mod lengths;
mod predictor;
mod service;
mod trace;

pub use arrivals::Arrivals;
pub use lengths::Lengths;
use morph_core::{Nanos, ServiceClass, Time, time::ms_to_nanos};
pub use predictor::Predictor;
use rand::SeedableRng;
use rand::rngs::StdRng;
use serde::Deserialize;
pub use service::{Correctness, QueryType, ServiceMix};
pub use trace::{TimeUnit, Trace, datetime_seconds};

#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    #[error("workload: {0}")]
    Invalid(String),
}

/// One request of a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimRequest {
    pub arrival: Time,
    pub input_len: u32,
    /// Tokens the request generates; 0 for an encoder request.
    pub output_len: u32,
    /// A generation's cap and predicted length, as its policy is told ([`Predictor::tell`]).
    pub max_tokens: u32,
    pub predicted: Option<u32>,
    /// Its client gives up this long after arrival, if not answered by then.
    pub cancel_after: Option<Nanos>,
    /// Task, deadline and utility (OTAS query types), and the profiled example of its task it
    /// stands for.
    pub service: Option<ServiceClass>,
    pub example: u32,
}

impl SimRequest {
    /// A request arriving at `arrival` with `input_len` tokens, generating `output_len` (0: an
    /// encoder request) and capped at that, with no prediction and a patient client.
    pub fn new(arrival: Time, input_len: u32, output_len: u32) -> Self {
        Self {
            arrival,
            input_len,
            output_len,
            max_tokens: output_len,
            predicted: None,
            cancel_after: None,
            service: None,
            example: 0,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    pub arrivals: Arrivals,
    pub lengths: Lengths,
    /// Output lengths of generation requests (e.g. a trace's `GeneratedTokens` column); none
    /// for encoder workloads.
    #[serde(default)]
    pub outputs: Option<Lengths>,
    /// Each client gives up this many seconds after its request arrived, if not answered by
    /// then (the request is cancelled: it leaves the queue, or stops or is discarded if
    /// running); none: clients wait for their answer.
    #[serde(default)]
    pub patience_s: Option<f64>,
    /// Query types with deadlines and utilities (OTAS); each request's length then comes from
    /// the profiled example it draws, not from `lengths`.
    #[serde(default)]
    pub service: Option<ServiceMix>,
}

impl Workload {
    /// The request stream over `duration_s`, a pure function of the workload and `seed`.
    /// Arrival times and lengths come from separate RNG streams, so changing the length
    /// distribution leaves the arrival times as they were.
    pub fn generate(&self, duration_s: f64, seed: u64) -> Result<Vec<SimRequest>, WorkloadError> {
        let mut arrival_rng = StdRng::seed_from_u64(seed);
        let mut length_rng = StdRng::seed_from_u64(seed ^ 0x9E37_79B9_7F4A_7C15);
        let times = self.arrivals.generate(duration_s, &mut arrival_rng)?;
        let lengths = self.lengths.generate(times.len(), &mut length_rng)?;
        let outputs = match &self.outputs {
            Some(outputs) => outputs.generate(times.len(), &mut length_rng)?,
            None => vec![0; times.len()],
        };
        let mut requests: Vec<SimRequest> = times
            .into_iter()
            .zip(lengths.into_iter().zip(outputs))
            .map(|(t, (input_len, output_len))| SimRequest {
                cancel_after: self.patience_s.map(|s| ms_to_nanos(s * 1e3)),
                ..SimRequest::new(Time::from_millis_f64(t * 1e3), input_len, output_len)
            })
            .collect();
        if let Some(mix) = &self.service {
            mix.assign(&mut requests, &mut StdRng::seed_from_u64(seed ^ 0x005E_ED0F_5E41_1CE5))?;
        }
        Ok(requests)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream_other_seed_other_stream() {
        let w = Workload {
            arrivals: Arrivals::Poisson { rate: 100.0 },
            lengths: Lengths::Twitter { max: 512 },
            outputs: None,
            patience_s: None,
            service: None,
        };
        let a = w.generate(10.0, 1).unwrap();
        assert_eq!(a, w.generate(10.0, 1).unwrap());
        assert_ne!(a, w.generate(10.0, 2).unwrap());
        assert!(a.windows(2).all(|p| p[0].arrival <= p[1].arrival));
    }
}
