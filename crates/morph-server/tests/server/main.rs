//! morph-server's integration tests in one binary: each file is a module, so the server is linked
//! once, not once per file.

mod common;

mod arlo_live;
mod cancellation;
mod client_sdks;
mod conformance;
mod generation_api;
mod http_api;
mod metrics_exposition;
mod openai_fields;
mod openapi_conformance;
mod overload_and_shutdown;
mod pipeline_live;
mod shared_cores_conformance;
mod slow_clients;
mod ssjf_live;
mod starting;
mod step_conformance;
mod structured_outputs;
