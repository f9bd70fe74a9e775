//! `morph serve`: one model from the command line, or a deployment file's models.

use clap::ArgMatches;
use morph_server::{Server, StartupSteps};

use crate::deployment_file;
use crate::listen::serve_built;
use crate::serve_args::ServeArgs;

/// Listens at once; the model is fetched, profiled and loaded meanwhile, `/ready` answering 503
/// with the step it is at. Stdout's `morph listening on` line is printed once it serves. With
/// `--config`, the deployment file's models instead (`serve`: the command line's own matches,
/// which say which flags were given).
pub(crate) fn run(args: ServeArgs, serve: Option<&ArgMatches>) -> anyhow::Result<()> {
    let addr = args.address()?;
    if let Some(path) = args.config() {
        if let Some(serve) = serve {
            deployment_file::refuse_model_flags(serve)?;
        }
        return crate::serve_models::run(addr, args, &path);
    }
    let spec = args.spec()?;
    spec.check()?;
    // candle's process settings (tuning.rs) keep freed memory for speed; ONNX Runtime and
    // emulated instances gain nothing from them, so only a candle server re-executes with them.
    if spec.runs_candle() {
        morph_backend::tuning::reexec_tuned();
    }
    let limits = spec.limits;
    let build = move |steps: &StartupSteps, drain| -> anyhow::Result<Server> {
        let config = spec.resolve(steps)?;
        steps.step("starting the instances");
        Ok(Server::build_draining(config, drain)?)
    };
    let announce = |server: &Server| {
        let model = &server.state().model;
        tracing::info!(model = %model.name(), engine = %model.engine, "serving");
    };
    serve_built(addr, limits, build, announce)
}
