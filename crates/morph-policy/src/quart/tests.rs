//! QuartSizer on hand-made pipelines: where a burst's replicas go, and what the smoother and the
//! CPU compensator each change.

use morph_core::{StageTime, Time};

use super::{BurstRule, QuartConfig, QuartSizer};
use crate::pipeline::{PoolView, Sizer, StageStats, StageTarget, StageView};

const S: u64 = 1_000_000_000;
const NOW: Time = Time(20 * S);

/// A stage that saw `rate` evenly spaced arrivals a second for the last 10 s (CV 0).
fn steady(rate: f64) -> StageStats {
    let mut stats = StageStats::new(10 * S, 60 * S, 200);
    let gap = (S as f64 / rate) as u64;
    let mut t = NOW.0 - 10 * S + gap;
    while t <= NOW.0 {
        stats.arrive(Time(t));
        t += gap;
    }
    stats
}

/// Stages of 10 ms (half of it serial), each with `replicas` up and `queued` waiting.
fn view<'a>(stats: &'a [StageStats], replicas: &[u32], queued: &[usize], slots: usize) -> PoolView<'a> {
    let stages = stats
        .iter()
        .zip(replicas)
        .zip(queued)
        .map(|((stats, &up), &queued)| StageView {
            stats,
            up,
            starting: 0,
            threads: 1,
            queued,
            time: StageTime::amdahl(10.0, 0.5),
            hop_s: 0.0,
        })
        .collect();
    PoolView { now: NOW, stages, slots, cores: None, slo_s: 0.5 }
}

/// QUART's own sizing, without Morph's robust floor (these tests are of its own mechanisms).
fn own() -> QuartConfig {
    QuartConfig { robust_floor: false, ..QuartConfig::default() }
}

fn size(config: QuartConfig, view: &PoolView<'_>) -> (Vec<StageTarget>, QuartSizer) {
    let mut sizer = QuartSizer::new(config);
    (sizer.size(view), sizer)
}

fn replicas(targets: &[StageTarget]) -> Vec<u32> {
    targets.iter().map(|t| t.replicas).collect()
}

/// Arrivals that came only in the last 10 s of 20 (a burst after a lull) are too bursty for
/// QUART's mean-rate window: with `bursts = "fallback"` it sizes every stage by the envelope
/// rule alone, for the busiest window (250 req/s on 10 ms stages: 3 replicas), and says so.
#[test]
fn too_bursty_arrivals_fall_back_to_the_envelope_rule() {
    let stats: Vec<StageStats> = (0..4).map(|_| steady(250.0)).collect();
    let v = view(&stats, &[1; 4], &[0; 4], 64);
    let (targets, sizer) = size(QuartConfig { bursts: BurstRule::Fallback, ..QuartConfig::default() }, &v);
    assert_eq!(replicas(&targets), vec![3; 4]);
    let fallbacks = sizer.gauges().iter().find(|g| g.name == "quart_fallbacks_total").map(|g| g.value);
    assert_eq!(fallbacks, Some(1.0));
}

#[test]
fn a_burst_held_at_one_stage_makes_it_critical_and_every_stage_carries_its_flow() {
    // 250 req/s on 10 ms stages needs 3 replicas each; 300 requests wait at stage 1.
    let stats: Vec<StageStats> = (0..4).map(|_| steady(250.0)).collect();
    let v = view(&stats, &[3; 4], &[0, 300, 0, 0], 64);
    let (targets, sizer) = size(QuartConfig { corrector: false, ..own() }, &v);
    let got = replicas(&targets);
    assert!(got[1] > 3, "the stage holding the burst gains replicas: {got:?}");
    assert!(got.iter().all(|&r| r == got[1]), "every stage carries the critical flow: {got:?}");
    let critical = sizer.gauges().into_iter().filter(|g| g.name == "stage_critical" && g.value == 1.0);
    assert_eq!(critical.map(|g| g.labels[0].1.clone()).collect::<Vec<_>>(), vec!["1".to_string()]);
    // Without the critical flow the queue is counted at its own stage only (not at every
    // later one, as it was).
    let own = QuartConfig { corrector: false, critical_flow: false, ..own() };
    let got = replicas(&size(own, &v).0);
    assert!(got[1] > 3 && got[0] == 3 && got[2] == 3 && got[3] == 3, "{got:?}");
}

#[test]
fn the_smoother_takes_back_part_of_a_grant_its_neighbours_did_not_get() {
    // Stage 1 runs 1 replica of the 3 it needs: over target, the PID grants it up to r_max.
    let stats: Vec<StageStats> = (0..3).map(|_| steady(250.0)).collect();
    let v = view(&stats, &[3, 1, 3], &[0; 3], 64);
    let on = replicas(&size(own(), &v).0);
    let off = replicas(&size(QuartConfig { smoother: false, ..own() }, &v).0);
    assert_eq!(off, vec![3, 8, 3], "the corrector's counts");
    // Eq. 7 with β(0) = 0.634: ⌈0.634·8 + 0.366·3⌉ = 7.
    assert_eq!(on, vec![3, 7, 3]);
}

#[test]
fn the_compensator_gives_threads_to_stages_the_slot_budget_cut() {
    // Four stages need 3 replicas each, but the cluster has 8 slots: 2 each. On 2 replicas a
    // stage needs 2 threads (7.5 ms a request) to keep up with 250 req/s.
    let stats: Vec<StageStats> = (0..4).map(|_| steady(250.0)).collect();
    let v = view(&stats, &[3; 4], &[0; 4], 8);
    let on = size(own(), &v).0;
    let off = size(QuartConfig { compensator: false, ..own() }, &v).0;
    assert_eq!(replicas(&on), vec![2; 4]);
    assert_eq!(replicas(&off), vec![2; 4]);
    assert!(on.iter().all(|t| t.threads == 2), "{on:?}");
    assert!(off.iter().all(|t| t.threads == 1), "{off:?}");
}

#[test]
fn the_burst_forecast_keeps_the_pools_threads_where_the_slots_bind() {
    // The burst and the 8 slots the compensator meets with 2 threads a stage (above): under
    // the burst forecast every stage stays at the pool's one thread and the executor shares
    // the slots out.
    let stats: Vec<StageStats> = (0..4).map(|_| steady(250.0)).collect();
    let v = view(&stats, &[3; 4], &[0; 4], 8);
    let forecast = QuartConfig { bursts: BurstRule::Forecast, ..QuartConfig::default() };
    let (targets, sizer) = size(forecast, &v);
    let periods = sizer.gauges().iter().find(|g| g.name == "quart_burst_periods_total").map(|g| g.value);
    assert_eq!(periods, Some(1.0), "the forecast decided");
    assert!(targets.iter().all(|t| t.threads == 1), "{targets:?}");
    assert!(size(own(), &v).0.iter().all(|t| t.threads == 2));
}

/// Under `bursts = "by-persistence"` the forecast sizes a burst that lasts (the last 10 s of
/// 20, each second like the one before) and the envelope rule one that comes and goes within
/// a second (every other second busy: the counts anti-correlated), as bursty by dispersion.
#[test]
fn bursts_that_last_go_to_the_forecast_and_bursts_within_a_second_to_the_fallback() {
    let lasting: Vec<StageStats> = (0..2).map(|_| steady(250.0)).collect();
    let mut flicker = StageStats::new(10 * S, 60 * S, 200);
    (0..NOW.0 / S)
        .filter(|s| s % 2 == 0)
        .for_each(|s| (0..250).for_each(|k| flicker.arrive(Time(s * S + k * S / 250))));
    let flickering = [flicker.clone(), flicker];
    let rule = QuartConfig::default();
    assert_eq!(rule.bursts, BurstRule::ByPersistence, "the default");
    let gauge =
        |sizer: &QuartSizer, name: &str| sizer.gauges().iter().find(|g| g.name == name).map(|g| g.value);
    let (_, on_lasting) = size(rule.clone(), &view(&lasting, &[1; 2], &[0; 2], 64));
    assert_eq!(gauge(&on_lasting, "quart_burst_periods_total"), Some(1.0));
    assert_eq!(gauge(&on_lasting, "quart_fallbacks_total"), Some(0.0));
    assert!(gauge(&on_lasting, "quart_burst_persistence").unwrap() > 0.5);
    let (_, on_flicker) = size(rule, &view(&flickering, &[1; 2], &[0; 2], 64));
    assert_eq!(gauge(&on_flicker, "quart_burst_periods_total"), Some(0.0));
    assert_eq!(gauge(&on_flicker, "quart_fallbacks_total"), Some(1.0));
    assert!(gauge(&on_flicker, "quart_burst_persistence").unwrap() < 0.0);
}
