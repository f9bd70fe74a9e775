//! This host's `morph worker` processes: starting them ([`spawn`]), warm from a prepared
//! artefact in this host's cache ([`cache`]) or cold. The server's launcher starts local
//! replicas with it, a host agent its host's.

pub mod cache;
pub mod spawn;

pub use spawn::{Spawner, WorkerModel};
