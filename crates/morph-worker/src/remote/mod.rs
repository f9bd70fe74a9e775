//! Engines in other processes. A `morph worker` process hosts one replica (one engine) and
//! talks to the server over the framed transport of [`crate::wire`], on a Unix socket or TCP
//! ([`Endpoint`]), so a worker may live on another host. [`RemoteEngine`] is the server's side
//! (an [`morph_engine::Engine`] like any other, so it runs behind an [`morph_engine::EngineThread`]);
//! [`serve_engine`] is the worker's.

mod endpoint;
mod engine;
mod serve;

pub use endpoint::{Endpoint, Listener, Stream};
pub use engine::{RemoteEngine, Severer, WorkerProcess};
pub use serve::{Built, serve_engine};
