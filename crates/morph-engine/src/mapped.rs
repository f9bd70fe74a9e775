//! Prepared artefacts mapped into memory: one of the workspace's two `unsafe` exceptions, audited here.

use std::path::Path;

/// The file at `path`, mapped read-only.
#[allow(unsafe_code)]
pub fn map_prepared(path: &Path) -> std::io::Result<memmap2::Mmap> {
    let file = std::fs::File::open(path)?;
    // SAFETY: a mapping is undefined behaviour if the file changes under it. Prepared artefacts
    // are written once into a staging folder and renamed into the host cache; nothing writes
    // them afterwards, and eviction unlinks them, which leaves an existing mapping intact.
    unsafe { memmap2::Mmap::map(&file) }
}
