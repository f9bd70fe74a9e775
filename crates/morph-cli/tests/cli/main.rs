//! morph-cli's integration tests in one binary: each file is a module, so the binary's library
//! is linked once, not once per file.

mod common;

mod classifiers;
mod classify_live;
mod cli;
mod cluster;
mod deploy_manifests;
mod encoder_families;
mod first_start;
mod hub_mirror;
mod mpnet;
mod second_family;
mod several_models;
mod worker_processes;
