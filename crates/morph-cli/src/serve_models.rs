//! `morph serve --config FILE`: the deployment file's models in one server on one core budget
//! (`morph_server::App`), each resolved as `morph serve` resolves one, in the file's order.

use std::net::SocketAddr;
use std::path::Path;

use morph_server::{App, HostedSpec};

use crate::deployment_file;
use crate::listen::serve_built;
use crate::serve_args::ServeArgs;

pub(crate) fn run(addr: SocketAddr, args: ServeArgs, path: &Path) -> anyhow::Result<()> {
    let host_cores =
        std::thread::available_parallelism().map_or(1, |n| u16::try_from(n.get()).unwrap_or(u16::MAX));
    let file = deployment_file::read(path, host_cores)?;
    let (limits, api_key) = (args.limits(), args.api_key());
    let mut specs = Vec::with_capacity(file.models.len());
    for mut model in file.models {
        model.spec.limits = limits;
        model.spec.api_key = api_key.clone();
        specs.push(model);
    }
    // As for one model (serve.rs): candle's process settings, when any model computes on candle.
    if specs.iter().any(|m| m.spec.runs_candle()) {
        morph_backend::tuning::reexec_tuned();
    }
    let cores = file.cores;
    let build = move |steps: &morph_server::StartupSteps, drain| -> anyhow::Result<App> {
        let mut hosted = Vec::with_capacity(specs.len());
        for model in specs {
            steps.step(format!("model '{}'", model.spec.served_model_names[0]));
            let deployment = model.spec.resolve(steps)?;
            hosted.push(HostedSpec { deployment, slo: model.slo });
        }
        steps.step("starting the instances");
        Ok(App::build(hosted, cores, drain)?)
    };
    let announce = |app: &App| {
        for names in app.model_names() {
            tracing::info!(model = %names[0], aliases = ?&names[1..], cores, "serving");
        }
    };
    serve_built(addr, limits, build, announce)
}
