//! Morph's engines apart from the HTTP server. [`wire`] is the framed protocol between the
//! server and a worker; [`remote`] the engine that speaks it on the server's side and the loop
//! that serves an engine on the worker's; [`process`] starts replicas as `morph worker`
//! processes on this host (with the parameter cache of [`host`]) or, through [`cluster`], on
//! hosts a `morph agent` runs on. The server's launcher uses it; `morph worker` and
//! `morph agent` need nothing else of the server.

pub mod cluster;
pub mod host;
mod locking;
pub mod process;
pub mod remote;
pub mod wire;

pub use process::{ProcessConfig, ProcessLauncher, StartReport};
