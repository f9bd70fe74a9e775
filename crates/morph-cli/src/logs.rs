//! Where `morph` writes what it logs: stderr at `RUST_LOG`'s levels (default info, ONNX
//! Runtime's warnings only), as JSON lines or as text coloured only on a terminal; and, with an
//! OTLP endpoint, every span (a call's, with its request id and route) exported as OpenTelemetry
//! traces over HTTP.

use std::io::IsTerminal;

use anyhow::Context;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// What keeps exporting spans until it is dropped: then it sends those still buffered.
pub(crate) struct Telemetry(Option<SdkTracerProvider>);

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(provider) = self.0.take()
            && let Err(e) = provider.shutdown()
        {
            eprintln!("the last spans were not exported: {e}");
        }
    }
}

/// Logs to stderr (JSON lines with `json`), and spans to the OTLP/HTTP traces endpoint `otlp`
/// (such as `http://collector:4318/v1/traces`) when one is given.
pub(crate) fn init(json: bool, otlp: Option<&str>) -> anyhow::Result<Telemetry> {
    let filter = || EnvFilter::try_from_default_env().unwrap_or_else(|_| "info,ort=warn".into());
    let stderr = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let stderr = match json {
        true => stderr.json().with_current_span(true).with_span_list(false).with_filter(filter()).boxed(),
        false => stderr.with_ansi(std::io::stderr().is_terminal()).with_filter(filter()).boxed(),
    };
    let provider = match otlp {
        Some(endpoint) => {
            let exporter = opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_endpoint(endpoint)
                .build()
                .with_context(|| format!("--otlp-endpoint {endpoint}"))?;
            let resource = Resource::builder().with_service_name("morph").build();
            Some(SdkTracerProvider::builder().with_batch_exporter(exporter).with_resource(resource).build())
        }
        None => None,
    };
    let traces = provider
        .as_ref()
        .map(|p| tracing_opentelemetry::layer().with_tracer(p.tracer("morph")).with_filter(filter()));
    tracing_subscriber::registry().with(stderr).with(traces).init();
    Ok(Telemetry(provider))
}
