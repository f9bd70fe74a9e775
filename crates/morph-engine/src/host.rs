//! This host as latency profiles name it. A profile is only worth reusing on a host whose
//! kernels run at its speed: the same CPU model, the same cores, and the same widest vector
//! instructions, which decide the kernels ONNX Runtime and llama.cpp pick (a virtual machine can
//! show a CPU's name without its AVX-512, and then runs several times slower).

/// The widest vector instructions for dense kernels the CPU offers, by `/proc/cpuinfo` flag,
/// best first: int8 tile products, 512-bit int8 dot products, 512-bit, 256-bit int8 dot
/// products, 256-bit.
const VECTOR_LEVELS: [(&str, &str); 5] = [
    ("amx_int8", "AMX"),
    ("avx512_vnni", "AVX-512 VNNI"),
    ("avx512f", "AVX-512"),
    ("avx_vnni", "AVX-VNNI"),
    ("avx2", "AVX2"),
];

/// Flags of int8 dot-product instructions, which accumulate u8·s8 products in 32 bits.
const INT8_DOT_FLAGS: [&str; 3] = ["amx_int8", "avx512_vnni", "avx_vnni"];

/// This host: the CPU's model name, the cores this process may use, and its vector level
/// (`AMD EPYC, 2 cores, AVX-512 VNNI`).
pub fn host_device() -> String {
    let cpuinfo = cpuinfo();
    let model = field(&cpuinfo, "model name").unwrap_or(std::env::consts::ARCH);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let level = vector_level(field(&cpuinfo, "flags").unwrap_or_default());
    format!("{model}, {cores} cores, {level}")
}

/// Whether int8 products on this CPU add pairs of u8·s8 products in 16 bits, which saturate
/// (an x86 CPU without VNNI or AMX, where ONNX Runtime's kernels use `vpmaddubsw`).
pub fn int8_pairs_saturate() -> bool {
    static SATURATE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *SATURATE.get_or_init(|| {
        cfg!(target_arch = "x86_64") && !has_int8_dot(field(&cpuinfo(), "flags").unwrap_or_default())
    })
}

fn cpuinfo() -> String {
    std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default()
}

/// The value of `/proc/cpuinfo`'s first line named `name`.
fn field<'a>(cpuinfo: &'a str, name: &str) -> Option<&'a str> {
    cpuinfo.lines().find(|l| l.starts_with(name)).and_then(|l| l.split_once(':')).map(|(_, v)| v.trim())
}

fn has_flag(flags: &str, flag: &str) -> bool {
    flags.split_ascii_whitespace().any(|f| f == flag)
}

fn has_int8_dot(flags: &str) -> bool {
    INT8_DOT_FLAGS.iter().any(|flag| has_flag(flags, flag))
}

/// The best of [`VECTOR_LEVELS`] among the CPU's `flags` (space-separated, as `/proc/cpuinfo`
/// lists them); `baseline` for none (or no x86 at all).
fn vector_level(flags: &str) -> &'static str {
    VECTOR_LEVELS.iter().find(|(flag, _)| has_flag(flags, flag)).map_or("baseline", |(_, level)| level)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_widest_level_the_flags_name_wins() {
        let zen4 = "fpu sse4_2 avx avx2 avx512f avx512dq avx512_vnni avx512_bf16";
        assert_eq!(vector_level(zen4), "AVX-512 VNNI");
        assert_eq!(vector_level("avx2 avx512f amx_tile amx_int8 avx512_vnni"), "AMX");
        // A virtual machine's generic EPYC model: AVX2 only.
        assert_eq!(vector_level("fma sse4_2 avx f16c avx2 bmi2 sha_ni"), "AVX2");
        assert_eq!(vector_level("avx2 avx_vnni"), "AVX-VNNI");
        // A flag is a whole word: avx512f is not avx512fp16's prefix match.
        assert_eq!(vector_level("avx2 avx512fp16x"), "AVX2");
        assert_eq!(vector_level(""), "baseline");
    }

    #[test]
    fn int8_pairs_saturate_only_without_dot_product_instructions() {
        assert!(has_int8_dot("avx2 avx512f avx512_vnni"));
        assert!(has_int8_dot("avx2 avx_vnni"));
        assert!(has_int8_dot("avx512f amx_int8"));
        assert!(!has_int8_dot("fma avx2 bmi2"), "AVX2 alone");
        assert!(!has_int8_dot("avx2 avx512f avx512bw"), "AVX-512 without VNNI");
    }

    #[test]
    fn the_host_is_named_by_model_cores_and_level() {
        let host = host_device();
        let level = host.rsplit(", ").next().unwrap();
        assert!(
            VECTOR_LEVELS.iter().any(|(_, l)| *l == level) || level == "baseline",
            "{host}: ends in a vector level"
        );
        assert!(host.contains(" cores, "), "{host}");
    }
}
