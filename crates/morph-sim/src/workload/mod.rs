//! Workloads: a seeded request stream of arrival times, input lengths and, for generation,
//! output lengths.

mod ahead;
mod arrivals;
pub mod corpus;
mod lengths;
mod predictor;
mod service;
mod trace;

pub use ahead::{Dealt, dealt_ahead, drawn_ahead};
pub use arrivals::{ArrivalTimes, Arrivals};
pub use lengths::{LengthSampler, Lengths};
use morph_core::{Nanos, ServiceClass, Time, time::ms_to_nanos};
pub use predictor::Predictor;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
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
    /// The request stream over `duration_s`, a pure function of the workload and `seed`
    /// ([`Workload::stream`], collected).
    pub fn generate(&self, duration_s: f64, seed: u64) -> Result<Vec<SimRequest>, WorkloadError> {
        Ok(self.stream(duration_s, seed, 1.0)?.collect())
    }

    /// The request stream over `duration_s`, drawn lazily, each request kept with probability
    /// `keep` (1: all). Arrival times, input lengths, output lengths, query types and thinning
    /// each come from their own RNG stream, so changing one leaves the others as they were; and
    /// a request's length is drawn whether or not it is kept, so the stream kept at a lower
    /// `keep` is a subset of the one kept at a higher, with the same lengths (a nested sweep).
    pub fn stream(&self, duration_s: f64, seed: u64, keep: f64) -> Result<RequestStream, WorkloadError> {
        if !(keep > 0.0 && keep <= 1.0) {
            return Err(WorkloadError::Invalid(format!("a kept share must be in (0, 1], got {keep}")));
        }
        let service = match &self.service {
            Some(mix) => {
                mix.ready()?;
                Some(mix.clone())
            }
            None => None,
        };
        Ok(RequestStream {
            times: self.arrivals.times(duration_s, seed)?,
            lengths: self.lengths.sampler()?,
            outputs: self.outputs.as_ref().map(Lengths::sampler).transpose()?,
            service,
            patience: self.patience_s.map(|s| ms_to_nanos(s * 1e3)),
            keep,
            rngs: [
                StdRng::seed_from_u64(seed ^ LENGTH_STREAM),
                StdRng::seed_from_u64(seed ^ OUTPUT_STREAM),
                StdRng::seed_from_u64(seed ^ SERVICE_STREAM),
                StdRng::seed_from_u64(seed ^ THIN_STREAM),
            ],
            drawn: 0,
        })
    }
}

/// Seeds of the streams a request's parts are drawn from, apart from the arrivals'.
const LENGTH_STREAM: u64 = 0x9E37_79B9_7F4A_7C15;
const OUTPUT_STREAM: u64 = 0x0DD5_EED0_0DD5_EED0;
const SERVICE_STREAM: u64 = 0x005E_ED0F_5E41_1CE5;
const THIN_STREAM: u64 = 0x7417_4417_7417_4417;

/// A workload's requests in arrival order, drawn as they are taken ([`Workload::stream`]).
#[derive(Debug)]
pub struct RequestStream {
    times: ArrivalTimes,
    lengths: LengthSampler,
    outputs: Option<LengthSampler>,
    service: Option<ServiceMix>,
    patience: Option<Nanos>,
    keep: f64,
    /// Lengths, outputs, query types, thinning.
    rngs: [StdRng; 4],
    /// Requests drawn so far, kept or not.
    drawn: usize,
}

impl Iterator for RequestStream {
    type Item = SimRequest;

    fn next(&mut self) -> Option<SimRequest> {
        let [lengths, outputs, types, thin] = &mut self.rngs;
        loop {
            let t = self.times.next()?;
            let index = self.drawn;
            self.drawn += 1;
            let input = self.lengths.sample(index, lengths);
            let output = self.outputs.as_ref().map_or(0, |o| o.sample(index, outputs));
            let mut r = SimRequest {
                cancel_after: self.patience,
                ..SimRequest::new(Time::from_millis_f64(t * 1e3), input, output)
            };
            if let Some(mix) = &self.service {
                let table = mix.table.as_ref().expect("checked by Workload::stream");
                mix.assign(table, &mut r, types);
            }
            if self.keep < 1.0 && thin.random::<f64>() >= self.keep {
                continue;
            }
            return Some(r);
        }
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

    /// A lower share of a bursty stream is a subset of a higher one's, each request with the
    /// same arrival and length: the sweep's load points are nested.
    #[test]
    fn thinned_streams_are_nested_with_their_lengths() {
        let w = Workload {
            arrivals: Arrivals::Mmpp { rates: vec![50.0, 900.0], dwell_s: 2.0 },
            lengths: Lengths::Twitter { max: 512 },
            outputs: Some(Lengths::Uniform { min: 1, max: 400 }),
            patience_s: None,
            service: None,
        };
        let streams: Vec<Vec<SimRequest>> =
            [1.0, 0.8, 0.5].iter().map(|&keep| w.stream(60.0, 4, keep).unwrap().collect()).collect();
        assert!(streams[0].len() > streams[1].len() && streams[1].len() > streams[2].len());
        for pair in streams.windows(2) {
            let (more, fewer) = (&pair[0], &pair[1]);
            let mut k = 0;
            for r in fewer {
                while more[k].arrival < r.arrival {
                    k += 1;
                }
                assert_eq!(more[k], *r, "a kept request is the same request");
            }
        }
        let share = streams[2].len() as f64 / streams[0].len() as f64;
        assert!((share - 0.5).abs() < 0.03, "{share}");
    }
}
