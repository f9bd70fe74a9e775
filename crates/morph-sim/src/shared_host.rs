//! Several models on one host's cores, as `morph serve --config` serves them: each model's run
//! (its own policy, instances and arrivals, as [`crate::simulate`] runs one) interleaved in one
//! virtual time, every computation (an encoder batch, a decoder iteration) waiting for its
//! threads' cores in the host's [`CoreLine`], and the core controller
//! ([`morph_policy::cores::CoreController`]) setting each model's slack every
//! [`PERIOD`] from what it reads there, as the live server's controller does. A static split
//! instead gives each model a line of its own share of the cores: the baseline of single-model
//! servers pinned to disjoint cores, at equal cost.

use std::collections::HashMap;
use std::time::Duration;

use morph_core::core_line::{Cores, Place};
use morph_core::{CoreLine, InstanceId, ModelCores, Nanos, Policy, Time, UnitSpec};
use morph_policy::cores::{CoreController, ModelReading, PERIOD};
use serde::Serialize;

use crate::cost::CostModel;
use crate::driver::{Computation, CoreAsks, ModelRun, SimOptions};
use crate::metrics::Report;
use crate::workload::SimRequest;

/// One model of the host: what [`crate::simulate`] takes, its SLO (a request's latency, which
/// the report's attainment counts) and the SLO the core controller reads (as the live
/// deployment's `slo_ms`: a call's for an encoder, an output token's for a decoder).
pub struct HostedModel<'a> {
    pub name: String,
    pub policy: Box<dyn Policy>,
    pub cluster: Vec<UnitSpec>,
    pub cost: &'a dyn CostModel,
    pub requests: Vec<SimRequest>,
    pub options: SimOptions,
    pub slo: Nanos,
    pub core_slo: Nanos,
}

impl std::fmt::Debug for HostedModel<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostedModel")
            .field("name", &self.name)
            .field("policy", &self.policy.name())
            .field("cluster", &self.cluster)
            .field("requests", &self.requests.len())
            .field("slo", &self.slo)
            .field("core_slo", &self.core_slo)
            .finish()
    }
}

/// How the models share the host's cores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sharing {
    /// One line for every model, slack set by the core controller each period.
    ByLoad,
    /// Each model pinned to a set of the host's cores (by index), in the models' order: models
    /// pinned to the same set share its line, at their relaxed slack; sets are disjoint or equal.
    Split(Vec<Vec<Cores>>),
}

impl Sharing {
    pub fn label(&self) -> String {
        match self {
            Sharing::ByLoad => "cores by load".into(),
            Sharing::Split(sets) => {
                let sets: Vec<String> = sets
                    .iter()
                    .map(|set| set.iter().map(Cores::to_string).collect::<Vec<_>>().join(","))
                    .collect();
                format!("split {}", sets.join("|"))
            }
        }
    }

    /// Every split of `cores` into consecutive cores, at least one for each of `models` models.
    pub fn splits(cores: Cores, models: usize) -> Vec<Sharing> {
        fn fill(
            from: Cores,
            left: Cores,
            parts: usize,
            prefix: &mut Vec<Vec<Cores>>,
            out: &mut Vec<Sharing>,
        ) {
            if parts == 1 {
                prefix.push((from..from + left).collect());
                out.push(Sharing::Split(prefix.clone()));
                prefix.pop();
                return;
            }
            for first in 1..=left.saturating_sub(parts as Cores - 1) {
                prefix.push((from..from + first).collect());
                fill(from + first, left - first, parts - 1, prefix, out);
                prefix.pop();
            }
        }
        let mut out = Vec::new();
        if models > 0 && usize::from(cores) >= models {
            fill(0, cores, models, &mut Vec::new(), &mut out);
        }
        out
    }

    /// Why this sharing cannot run `models` models on `cores` cores, if it cannot.
    pub fn check(&self, cores: Cores, models: usize) -> Result<(), String> {
        let Sharing::Split(sets) = self else { return Ok(()) };
        if sets.len() != models {
            return Err(format!(
                "{}: names cores for {} models, the host has {models}",
                self.label(),
                sets.len()
            ));
        }
        for (a, set) in sets.iter().enumerate() {
            if set.is_empty() || set.iter().any(|&c| c >= cores) {
                return Err(format!("{}: model {a} needs one or more of cores 0..{cores}", self.label()));
            }
            let overlaps = sets.iter().any(|other| other != set && other.iter().any(|c| set.contains(c)));
            if overlaps {
                return Err(format!("{}: models' core sets must be equal or disjoint", self.label()));
            }
        }
        Ok(())
    }
}

/// Each model's cores over one controller period.
#[derive(Debug, Clone, Serialize)]
pub struct PeriodCores {
    pub start_s: f64,
    /// Cores each model's computations held on average.
    pub threads: Vec<f64>,
    /// The model whose computations went first (`None` under a split, or when none was).
    pub critical: Option<usize>,
}

/// A change of the critical model, with its reason.
#[derive(Debug, Clone, Serialize)]
pub struct CoreMoveAt {
    pub at_s: f64,
    pub critical: Option<String>,
    pub was: Option<String>,
    pub reason: &'static str,
}

/// One host run: each model's report, its cores over time and the controller's moves.
#[derive(Debug, Clone, Serialize)]
pub struct HostReport {
    pub sharing: String,
    pub models: Vec<(String, Report)>,
    /// Core-seconds each model's computations held in all.
    pub core_seconds: Vec<f64>,
    /// From t = 0, one per controller period, the last cut at the run's last event.
    pub periods: Vec<PeriodCores>,
    pub moves: Vec<CoreMoveAt>,
}

/// A model's place on the host: its line and its account there.
#[derive(Debug, Clone, Copy)]
struct Seat {
    line: usize,
    account: usize,
}

type Run<'a> = ModelRun<'a, std::vec::IntoIter<SimRequest>>;

/// The host's lines and who holds and waits for their cores.
struct Host {
    lines: Vec<CoreLine>,
    seats: Vec<Seat>,
    /// Computations waiting in each line, by place: their model and what they are.
    waiting: Vec<HashMap<Place, (usize, Computation)>>,
    /// Cores each running computation holds, by model and instance.
    holding: HashMap<(usize, InstanceId), Cores>,
}

impl Host {
    fn new(cores: Cores, sharing: &Sharing, slos: &[Nanos]) -> Self {
        if let Err(why) = sharing.check(cores, slos.len()) {
            panic!("{why}");
        }
        // Each model's line: the one line, or the one of its core set.
        let (mut lines, of): (Vec<CoreLine>, Vec<usize>) = match sharing {
            Sharing::ByLoad => (vec![CoreLine::new(cores)], vec![0; slos.len()]),
            Sharing::Split(sets) => {
                let mut distinct: Vec<&Vec<Cores>> = Vec::new();
                let of = sets
                    .iter()
                    .map(|set| match distinct.iter().position(|d| *d == set) {
                        Some(at) => at,
                        None => {
                            distinct.push(set);
                            distinct.len() - 1
                        }
                    })
                    .collect();
                (distinct.iter().map(|set| CoreLine::new(set.len() as Cores)).collect(), of)
            }
        };
        let seats = slos
            .iter()
            .zip(of)
            .map(|(&slo, line)| {
                let slack = CoreController::relaxed_slack(Duration::from_nanos(slo)).as_nanos() as u64;
                Seat { line, account: lines[line].open(slack, Time::ZERO) }
            })
            .collect();
        let waiting = lines.iter().map(|_| HashMap::new()).collect();
        Self { lines, seats, waiting, holding: HashMap::new() }
    }

    /// Carries out model `m`'s asks and ends at `now`, and starts what the lines then grant.
    fn settle(&mut self, runs: &mut [Run<'_>], m: usize, now: Time) {
        let Seat { line, account } = self.seats[m];
        let asks = runs[m].world.shared.as_mut().expect("a hosted model shares the host");
        for id in asks.ended.drain(..) {
            if let Some(threads) = self.holding.remove(&(m, id)) {
                self.lines[line].give_back(account, threads, now);
            }
        }
        for c in asks.asked.drain(..) {
            let place = self.lines[line].wait(account, c.threads as Cores, now);
            self.waiting[line].insert(place, (m, c));
            asks.waiting += 1;
        }
        for (place, waiter) in self.lines[line].take_ready(now) {
            let (owner, c) = self.waiting[line].remove(&place).expect("every waiter was asked for");
            let world = &mut runs[owner].world;
            world.shared.as_mut().expect("a hosted model shares the host").waiting -= 1;
            self.holding.insert((owner, c.instance), waiter.threads);
            world.started(now, c);
        }
    }

    /// Model `m`'s account now.
    fn account(&mut self, m: usize, now: Time) -> ModelCores {
        let seat = self.seats[m];
        self.lines[seat.line].accounts(now)[seat.account].clone()
    }
}

/// Runs `models` on one host of `cores` cores shared as `sharing` says; every model's requests
/// from t = 0. Panics on a split [`Sharing::check`] refuses.
pub fn simulate_host(models: Vec<HostedModel<'_>>, cores: Cores, sharing: &Sharing) -> HostReport {
    let names: Vec<String> = models.iter().map(|m| m.name.clone()).collect();
    let slos: Vec<Nanos> = models.iter().map(|m| m.core_slo).collect();
    let mut host = Host::new(cores, sharing, &slos);
    let options: Vec<SimOptions> =
        models.iter().map(|m| SimOptions { slo: Some(m.slo), ..m.options.clone() }).collect();
    let mut runs: Vec<Run<'_>> = models
        .into_iter()
        .zip(&options)
        .map(|(m, options)| {
            ModelRun::new(m.policy, &m.cluster, m.cost, m.requests, options, Some(CoreAsks::default()))
        })
        .collect();
    for m in 0..runs.len() {
        host.settle(&mut runs, m, Time::ZERO);
    }
    let mut controller = CoreController::new(runs.len(), cores);
    let period = PERIOD.as_nanos() as u64;
    let mut next_period = Time(period);
    let mut held = vec![0.0; runs.len()];
    let (mut periods, mut moves) = (Vec::new(), Vec::new());
    let mut last = Time::ZERO;
    loop {
        // The next event of any model, in (time, kind, model) order.
        let next = runs.iter_mut().enumerate().filter_map(|(m, r)| r.next().map(|(t, k)| (t, k, m))).min();
        let Some((at, _, m)) = next else { break };
        while next_period <= at {
            let now = next_period;
            let accounts: Vec<_> = (0..runs.len()).map(|m| host.account(m, now)).collect();
            let threads = held_over(&accounts, &mut held, period);
            let critical = match sharing {
                Sharing::Split(_) => None,
                Sharing::ByLoad => {
                    let readings: Vec<ModelReading> = accounts
                        .iter()
                        .zip(&runs)
                        .zip(&slos)
                        .map(|((a, run), &slo)| {
                            ModelReading::of(a, run.ledger.policy().queue_len(), Duration::from_nanos(slo))
                        })
                        .collect();
                    let decision = controller.decide(PERIOD, &readings);
                    for (m, slack) in decision.slack.iter().enumerate() {
                        host.lines[0].set_slack(host.seats[m].account, slack.as_nanos() as u64);
                    }
                    if let Some(moved) = decision.moved {
                        let name = |m: Option<usize>| m.map(|m| names[m].clone());
                        moves.push(CoreMoveAt {
                            at_s: now.0 as f64 / 1e9,
                            critical: name(moved.critical),
                            was: name(moved.was),
                            reason: moved.reason.label(),
                        });
                    }
                    controller.critical()
                }
            };
            periods.push(PeriodCores { start_s: (now.0 - period) as f64 / 1e9, threads, critical });
            next_period = now + period;
        }
        last = runs[m].advance().expect("the model had an event");
        host.settle(&mut runs, m, last);
    }
    let accounts: Vec<_> = (0..runs.len()).map(|m| host.account(m, last)).collect();
    let start = next_period.0 - period;
    if last.0 > start {
        let threads = held_over(&accounts, &mut held, last.0 - start);
        periods.push(PeriodCores { start_s: start as f64 / 1e9, threads, critical: controller.critical() });
    }
    let core_seconds = accounts.iter().map(|a| a.core_seconds).collect();
    let models = names.into_iter().zip(runs.into_iter().map(Run::finish)).collect();
    HostReport { sharing: sharing.label(), models, core_seconds, periods, moves }
}

/// Cores each model held on average over the `span` since `held` was read (which is updated).
fn held_over(accounts: &[ModelCores], held: &mut [f64], span: Nanos) -> Vec<f64> {
    accounts
        .iter()
        .zip(held)
        .map(|(a, before)| (a.core_seconds - std::mem::replace(before, a.core_seconds)) / (span as f64 / 1e9))
        .collect()
}
