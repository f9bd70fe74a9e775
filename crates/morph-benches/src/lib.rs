//! What Morph's engine benchmarks share: their few command-line options and the side-by-side
//! table rows they print. The benchmarks themselves are `benches/*.rs`
//! (`cargo bench -p morph-benches --bench NAME`).

/// The value after `--NAME` on the command line, parsed; `default` when absent or unparsable
/// (benchmarks take their few options this way).
pub fn cli_arg<T: std::str::FromStr>(name: &str, default: T) -> T {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Header of a side-by-side latency table: batch 1 and batch 8, `baseline` against `ours`.
pub fn side_by_side_header(baseline: &str, ours: &str) -> String {
    format!(
        "{:>5} {:>10} {:>10} {:>7} {:>10} {:>10} {:>7}",
        "len",
        format!("b1 {baseline}"),
        format!("b1 {ours}"),
        "ratio",
        format!("b8 {baseline}"),
        format!("b8 {ours}"),
        "ratio"
    )
}

/// One row of that table: (baseline ms, our ms) at batch 1 and 8, with baseline / ours.
pub fn side_by_side_row(len: u32, [(b1, o1), (b8, o8)]: [(f64, f64); 2]) -> String {
    format!("{len:>5} {b1:>10.2} {o1:>10.2} {:>6.2}x {b8:>10.2} {o8:>10.2} {:>6.2}x", b1 / o1, b8 / o8)
}
