//! `--prompt-cache-mib` and `--prompt-cache-reuse`: how much host memory a decoder keeps of
//! closed sequences' prompt states (llama.cpp's kernels only), by default an eighth of the host's
//! memory, at most 8 GiB (llama-server's `--cache-ram` default), and how much of them a prompt
//! reuses.

use morph_decoder::{DecoderKernels, PromptCacheConfig, Reuse};

/// A mebibyte.
const MIB: u64 = 1 << 20;
/// The default's share of the host's memory (1/8) and its ceiling.
const HOST_SHARE: u64 = 8;
const DEFAULT_CEILING_MIB: u64 = 8 * 1024;
/// The default where the host's memory cannot be read.
const UNKNOWN_HOST_MIB: u64 = 1024;

/// The cache of a decoder on `kernels`: `asked` MiB, or the default (none on candle's kernels,
/// which keep no states), reused by `reuse`. An explicit size on candle, or a reuse rule for no
/// cache, is refused by name.
pub(crate) fn prompt_cache(
    asked: Option<u64>,
    reuse: Option<Reuse>,
    kernels: DecoderKernels,
) -> anyhow::Result<PromptCacheConfig> {
    let bytes = prompt_cache_bytes(asked, kernels)?;
    anyhow::ensure!(
        reuse.is_none() || bytes > 0,
        "--prompt-cache-reuse sets the prompt cache's rule: it needs one (llama.cpp kernels, --prompt-cache-mib above 0)"
    );
    Ok(PromptCacheConfig { bytes, reuse: reuse.unwrap_or_default() })
}

fn prompt_cache_bytes(asked: Option<u64>, kernels: DecoderKernels) -> anyhow::Result<usize> {
    let mib = match (asked, kernels) {
        (Some(0), _) | (None, DecoderKernels::Candle) => 0,
        (Some(_), DecoderKernels::Candle) => {
            anyhow::bail!(
                "--prompt-cache-mib keeps llama.cpp's sequence states: it needs --decoder-kernels llama-cpp (or 0)"
            )
        }
        (Some(mib), DecoderKernels::LlamaCpp) => mib,
        (None, DecoderKernels::LlamaCpp) => default_mib(),
    };
    usize::try_from(mib.saturating_mul(MIB))
        .map_err(|_| anyhow::anyhow!("--prompt-cache-mib {mib} is beyond this host's address space"))
}

/// An eighth of the host's memory, at most 8 GiB.
fn default_mib() -> u64 {
    host_memory_mib().map_or(UNKNOWN_HOST_MIB, |host| (host / HOST_SHARE).min(DEFAULT_CEILING_MIB))
}

/// `MemTotal` of `/proc/meminfo` in MiB (Linux).
fn host_memory_mib() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_is_sized_for_llama_cpp_and_refused_by_name_on_candle() {
        assert_eq!(prompt_cache_bytes(Some(64), DecoderKernels::LlamaCpp).unwrap(), 64 << 20);
        assert_eq!(prompt_cache_bytes(Some(0), DecoderKernels::Candle).unwrap(), 0);
        assert_eq!(prompt_cache_bytes(None, DecoderKernels::Candle).unwrap(), 0);
        let default = prompt_cache_bytes(None, DecoderKernels::LlamaCpp).unwrap();
        assert!(default > 0 && default as u64 <= DEFAULT_CEILING_MIB * MIB, "{default}");
        let refusal = prompt_cache_bytes(Some(64), DecoderKernels::Candle).unwrap_err().to_string();
        assert!(refusal.contains("--prompt-cache-mib") && refusal.contains("llama-cpp"), "{refusal}");
        let prefix = Some(Reuse::Prefix);
        assert_eq!(prompt_cache(Some(64), prefix, DecoderKernels::LlamaCpp).unwrap().reuse, Reuse::Prefix);
        let refusal = prompt_cache(Some(0), prefix, DecoderKernels::LlamaCpp).unwrap_err().to_string();
        assert!(refusal.contains("--prompt-cache-reuse"), "{refusal}");
        assert!(prompt_cache(None, prefix, DecoderKernels::Candle).is_err(), "candle keeps no states");
    }
}
