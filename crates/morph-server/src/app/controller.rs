//! The core controller's task: each period it reads every model's core account and queue,
//! lets [`CoreController`] decide, sets each model's slack in the budget, and records the cores
//! each model held (`morph_model_threads{model}`) and every change of the critical model with its
//! reason (`morph_core_moves_total`, and a log line).

use std::sync::Arc;

use morph_policy::cores::{CoreController, ModelReading, PERIOD};
use tokio::task::JoinHandle;

use super::Shared;

pub(super) fn spawn(shared: Arc<Shared>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut controller = CoreController::new(shared.models.len(), shared.budget.cores());
        let mut interval = tokio::time::interval(PERIOD);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        interval.tick().await;
        loop {
            interval.tick().await;
            step(&shared, &mut controller);
        }
    })
}

/// One period: read, decide, apply, record.
fn step(shared: &Shared, controller: &mut CoreController) {
    let accounts = shared.budget.accounts();
    let readings: Vec<ModelReading> = shared
        .models
        .iter()
        .zip(&accounts)
        .map(|(model, account)| ModelReading::of(account, model.state.driver.queue_len(), model.slo))
        .collect();
    let decision = controller.decide(PERIOD, &readings);
    let name = |m: Option<usize>| m.map_or("none", |m| shared.models[m].names[0].as_str());
    for (m, model) in shared.models.iter().enumerate() {
        shared.budget.set_slack(m, decision.slack[m]);
        shared.metrics.model_cores(
            &model.names[0],
            decision.threads[m],
            decision.slack[m],
            decision.pressure[m],
        );
    }
    if let Some(moved) = decision.moved {
        let (critical, was) = (name(moved.critical), name(moved.was));
        shared.metrics.core_move(critical, moved.reason.label());
        let pressure: Vec<String> = shared
            .models
            .iter()
            .zip(&decision.pressure)
            .map(|(m, p)| format!("{}={p:.2}", m.names[0]))
            .collect();
        tracing::info!(
            critical,
            was,
            reason = moved.reason.label(),
            pressure = %pressure.join(" "),
            "cores: the critical model changed"
        );
    }
}
