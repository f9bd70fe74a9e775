//! Int8 products on AMX tiles (Intel's Advanced Matrix Extensions), Morph's own kernel for
//! `TileProduct`: uint8 activation rows (zero point [`ROW_ZERO_POINT`]) times int8 weights
//! packed once into the tiles' layout ([`pack`]), accumulated exactly in int32 by `tdpbusd`,
//! then scaled to fp32 (and by each row's peak, with the bias added, where given) while the
//! block is still in cache, where ONNX Runtime's `MatMulIntegerToFloat` and `RowRescale` take
//! two passes over the output. Both kernels run far below the tiles' peak on an encoder's
//! shapes (k = 384, n up to 1,536): see `docs/serving.md`, "Int8 products on AMX tiles".
//! Where the CPU has no tiles but AVX-512 VNNI, the same layout feeds `vpdpbusd` ([`vnni`]).
//!
//! Layout: the weights `[k, n]` become tiles of 16 rows × 64 bytes, column block by column
//! block (16 columns), each block's k in steps of 64: a tile's row r holds, for each of its 16
//! columns c, the 4 weights k = 4r..4r+4 (`tdpbusd`'s pairing of 4 uint8 with 4 int8). k and
//! n are padded with zero weights to whole tiles and to whole 2 × 2 blocks.

#![allow(unsafe_code)]

use multiversion::multiversion;

use super::rows::ROW_ZERO_POINT;
use super::vnni;

/// Bytes in one tile row: 64 uint8 of an activation row, or 4 consecutive k of 16 columns.
const ROW_BYTES: usize = 64;
/// Rows of a tile.
const TILE_ROWS: usize = 16;
/// Input channels one activation tile spans.
const TILE_K: usize = ROW_BYTES;
/// Output columns of one weight tile (16 int32 accumulators, 4 k each).
const TILE_COLUMNS: usize = ROW_BYTES / 4;
/// Bytes of one weight tile.
const TILE_BYTES: usize = TILE_ROWS * ROW_BYTES;
/// Output rows and columns of one block: 2 × 2 accumulator tiles.
pub const BLOCK: usize = 2 * TILE_ROWS;

/// The padded size of the packed weights `[n, k]` for a `[k, n]` weight matrix.
pub fn packed_dims(k: usize, n: usize) -> [usize; 2] {
    [n.div_ceil(BLOCK) * BLOCK, k.div_ceil(TILE_K) * TILE_K]
}

/// Weights `w` (`[k, n]`, row-major) in the tiles' layout (`packed_dims` values), and each
/// column's zero-point sum `ROW_ZERO_POINT · Σ_k w[k, c]`, which the product subtracts.
pub fn pack(w: &[i8], k: usize, n: usize) -> (Vec<i8>, Vec<i32>) {
    let [n_padded, k_padded] = packed_dims(k, n);
    let k_tiles = k_padded / TILE_K;
    let mut packed = vec![0i8; n_padded * k_padded];
    for (i, &v) in w.iter().enumerate().take(k * n) {
        let (row, column) = (i / n, i % n);
        let tile = column / TILE_COLUMNS * k_tiles + row / TILE_K;
        let within = (row % TILE_K) / 4 * ROW_BYTES + column % TILE_COLUMNS * 4 + row % 4;
        packed[tile * TILE_BYTES + within] = v;
    }
    let zero = i32::from(ROW_ZERO_POINT);
    let sums = (0..n).map(|c| zero * (0..k).map(|r| i32::from(w[r * n + c])).sum::<i32>()).collect();
    (packed, sums)
}

/// Packed weights and what scales their products back, as `TileProduct`'s inputs hold them.
#[derive(Debug, Clone, Copy)]
pub struct TileWeights<'a> {
    /// [`pack`]'s tiles, `packed_dims(k, n)` of them.
    pub packed: &'a [i8],
    /// [`pack`]'s zero-point sum per column.
    pub zero_sums: &'a [i32],
    /// Per column: the activation step times the column's weight scale.
    pub scale: &'a [f32],
}

/// Each row's peak and, optionally, the bias: `y · peak + bias`, as `RowRescale`.
#[derive(Debug, Clone, Copy)]
pub struct Rescale<'a> {
    pub peaks: &'a [f32],
    pub bias: Option<&'a [f32]>,
}

/// The instructions that run `TileProduct` in this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TileEngine {
    /// AMX's int8 tiles (`tdpbusd`), granted to this process by the kernel.
    Amx,
    /// AVX-512 VNNI (`vpdpbusd`), where there are no tiles.
    Vnni,
}

/// What runs tile products here: the tiles where the CPU has AMX's int8 tiles and the kernel
/// grants this process their state (asked once; ONNX Runtime asks the same), else AVX-512
/// VNNI where the CPU has it, else nothing.
pub fn engine() -> Option<TileEngine> {
    static ENGINE: std::sync::OnceLock<Option<TileEngine>> = std::sync::OnceLock::new();
    *ENGINE.get_or_init(|| match amx::request() {
        true => Some(TileEngine::Amx),
        false => vnni::available().then_some(TileEngine::Vnni),
    })
}

/// Whether this process can run tile products ([`engine`]).
pub fn available() -> bool {
    engine().is_some()
}

/// One `TileProduct`'s operands: uint8 rows `q` of `k`, the packed weights, and what scales
/// the rows back, where anything does.
#[derive(Debug, Clone, Copy)]
pub struct Operands<'a> {
    pub q: &'a [u8],
    pub k: usize,
    pub weights: TileWeights<'a>,
    pub rescale: Option<Rescale<'a>>,
}

/// The rows of one block: the first, and how many (1 to [`BLOCK`]).
#[derive(Debug, Clone, Copy)]
pub(super) struct BlockRows {
    pub first: usize,
    pub count: usize,
}

/// `out[m, c] = (Σ_k q[m, k] · w[k, c] − zero_sums[c]) · scale[c]`, then `· peaks[m] + bias[c]`
/// where `rescale` is given, for the rows of block `block` (rows 32·block onwards): `q` has rows
/// of `k`, `out` is those rows of the output, `n` (the scales' length) wide. Blocks are
/// independent, for threads to share. Call only where [`available`].
pub fn multiply_block(operands: Operands<'_>, block: usize, out: &mut [f32]) {
    let engine = engine().expect("tile products on a CPU with neither AMX tiles nor AVX-512 VNNI");
    multiply_block_on(engine, operands, block, out);
}

/// [`multiply_block`] on `engine`, its operands checked.
fn multiply_block_on(engine: TileEngine, operands: Operands<'_>, block: usize, out: &mut [f32]) {
    let Operands { q, k, weights: w, rescale } = operands;
    let n = w.scale.len();
    let [n_padded, k_padded] = packed_dims(k, n);
    assert_eq!(w.packed.len(), n_padded * k_padded, "packed weights of another shape");
    assert!(w.zero_sums.len() == n && k > 0 && q.len().is_multiple_of(k), "rows of {k} into {n} columns");
    let (m, first) = (q.len() / k, block * BLOCK);
    let peaks_fit = |r: &Rescale<'_>| r.peaks.len() == m && r.bias.is_none_or(|b| b.len() == n);
    assert!(rescale.as_ref().is_none_or(peaks_fit), "a peak per row and a bias per column");
    let rows = BlockRows { first, count: m.saturating_sub(first).min(BLOCK) };
    assert_eq!(out.len(), rows.count * n, "an output block of {} rows", rows.count);
    if rows.count == 0 || n == 0 {
        return;
    }
    match engine {
        TileEngine::Amx => multiply_on_tiles(operands, rows, out),
        TileEngine::Vnni => vnni::multiply_rows(operands, rows, out),
    }
}

/// [`multiply_block`] on AMX tiles, for checked operands. Compiled for AVX-512 and AVX2 (every
/// CPU with tiles has AVX-512), so that the conversion of the accumulators to fp32 is
/// vectorised and chosen once a block, not once a row.
#[multiversion(targets("x86_64+avx512f+avx512bw+avx2+fma", "x86_64+avx2+fma"))]
fn multiply_on_tiles(operands: Operands<'_>, rows: BlockRows, out: &mut [f32]) {
    assert_eq!(engine(), Some(TileEngine::Amx), "tile products on a CPU without AMX");
    let Operands { q, k, weights: w, rescale } = operands;
    let n = w.scale.len();
    let [_, k_padded] = packed_dims(k, n);
    let (m, first_row) = (q.len() / k, rows.first);
    // The kernel reads whole tiles: 64 bytes a row from each row's start. A block with a row
    // after it reads on into that row (times zero weights) in place; the last block, or any
    // where k is under a tile, is copied into zero-padded rows first.
    let padded;
    let (inputs, stride) = if first_row + BLOCK < m && k >= TILE_K {
        (&q[first_row * k..], k)
    } else {
        let mut rows_padded = vec![0u8; BLOCK * k_padded];
        for (to, from) in rows_padded.chunks_exact_mut(k_padded).zip(q[first_row * k..].chunks_exact(k)) {
            to[..k].copy_from_slice(from);
        }
        padded = rows_padded;
        (&padded[..], k_padded)
    };
    let k_tiles = k_padded / TILE_K;
    let mut accumulators = [0i32; BLOCK * BLOCK];
    amx::Config::new().load();
    for pair in 0..n.div_ceil(BLOCK) {
        let weights = &w.packed[pair * 2 * k_tiles * TILE_BYTES..][..2 * k_tiles * TILE_BYTES];
        // SAFETY: `inputs` holds 32 rows of `stride` bytes and the k padding after the last
        // (the rows of a block read in place are followed by another row, with k ≥ 64; copied
        // ones are padded), `weights` two columns of `k_tiles` tiles, and the tiles are configured.
        unsafe { amx::block(inputs.as_ptr(), stride, weights.as_ptr(), k_tiles, &mut accumulators) };
        let first_column = pair * BLOCK;
        let columns = first_column..(first_column + BLOCK).min(n);
        let scale = (&w.scale[columns.clone()], &w.zero_sums[columns.clone()]);
        for (r, (acc, out)) in accumulators.chunks_exact(BLOCK).zip(out.chunks_exact_mut(n)).enumerate() {
            let rescale = rescale.map(|s| (s.peaks[first_row + r], s.bias.map(|b| &b[columns.clone()])));
            write_row(&acc[..columns.len()], scale, rescale, &mut out[columns.clone()]);
        }
    }
    amx::release();
}

/// One block row of accumulators to fp32, as [`multiply_block`] describes; the bias added in
/// one rounding (a fused multiply-add), as `RowRescale` adds it.
#[inline(always)]
fn write_row(
    acc: &[i32],
    (scale, zero_sums): (&[f32], &[i32]),
    rescale: Option<(f32, Option<&[f32]>)>,
    out: &mut [f32],
) {
    let exact = acc.iter().zip(zero_sums).zip(scale).map(|((a, z), s)| (a - z) as f32 * s);
    match rescale {
        None => out.iter_mut().zip(exact).for_each(|(o, y)| *o = y),
        Some((peak, None)) => out.iter_mut().zip(exact).for_each(|(o, y)| *o = y * peak),
        Some((peak, Some(bias))) => {
            out.iter_mut().zip(exact).zip(bias).for_each(|((o, y), b)| *o = y.mul_add(peak, *b))
        }
    }
}

/// The tile instructions, x86-64 only (elsewhere the tiles are never granted).
#[cfg(target_arch = "x86_64")]
mod amx {
    use std::arch::asm;

    use super::{BLOCK, ROW_BYTES, TILE_BYTES, TILE_ROWS};

    /// `arch_prctl` request for permission to use an extended state component.
    const ARCH_REQ_XCOMP_PERM: libc::c_long = 0x1023;
    /// The extended state component of the tiles' data.
    const XFEATURE_XTILEDATA: libc::c_long = 18;

    pub(super) fn request() -> bool {
        let flags = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let has = |flag: &str| flags.split_ascii_whitespace().any(|f| f == flag);
        // SAFETY: a system call with integer arguments only.
        has("amx_tile")
            && has("amx_int8")
            && unsafe { libc::syscall(libc::SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) } == 0
    }

    /// The tile configuration (palette 1): every tile 16 rows of 64 bytes.
    #[repr(C, align(64))]
    pub(super) struct Config([u8; 64]);

    impl Config {
        pub(super) fn new() -> Self {
            let mut c = [0u8; 64];
            c[0] = 1;
            for t in 0..8 {
                c[16 + 2 * t] = ROW_BYTES as u8;
                c[48 + t] = TILE_ROWS as u8;
            }
            Self(c)
        }

        /// Configures this thread's tiles.
        pub(super) fn load(&self) {
            // SAFETY: a valid palette-1 configuration; the caller checked the CPU has tiles.
            unsafe { asm!("ldtilecfg [{}]", in(reg) self.0.as_ptr(), options(nostack, readonly)) };
        }
    }

    /// Returns this thread's tiles to their initial state.
    pub(super) fn release() {
        // SAFETY: no operands; valid once the tiles were configured.
        unsafe { asm!("tilerelease", options(nostack, nomem)) };
    }

    /// One 32 × 32 block of int32 products into `out`: rows from `a` (32 rows `stride` bytes
    /// apart) times two weight column tiles' worth of `k_tiles` tiles from `b` (the second
    /// column's right after the first's); four accumulator tiles, two of each input.
    ///
    /// # Safety
    /// Tiles configured by [`Config::load`]; `a` readable for 32 rows of `64 · k_tiles` bytes
    /// at `stride`, `b` for `2 · k_tiles` tiles.
    pub(super) unsafe fn block(
        a: *const u8,
        stride: usize,
        b: *const i8,
        k_tiles: usize,
        out: &mut [i32; BLOCK * BLOCK],
    ) {
        let c = out.as_mut_ptr();
        // SAFETY: the caller's contract; every store lands inside `out` (32 rows of 128 bytes).
        unsafe {
            asm!(
                "tilezero tmm0", "tilezero tmm1", "tilezero tmm2", "tilezero tmm3",
                "2:",
                "tileloadd tmm4, [{a} + {stride}*1]",
                "tileloadd tmm5, [{a_low} + {stride}*1]",
                "tileloadd tmm6, [{b} + {tile_row}*1]",
                "tileloadd tmm7, [{b_right} + {tile_row}*1]",
                "tdpbusd tmm0, tmm4, tmm6",
                "tdpbusd tmm1, tmm4, tmm7",
                "tdpbusd tmm2, tmm5, tmm6",
                "tdpbusd tmm3, tmm5, tmm7",
                "add {a}, {tile_row}",
                "add {a_low}, {tile_row}",
                "add {b}, {tile}",
                "add {b_right}, {tile}",
                "dec {k}",
                "jnz 2b",
                "tilestored [{c} + {out_row}*1], tmm0",
                "tilestored [{c_right} + {out_row}*1], tmm1",
                "tilestored [{c_low} + {out_row}*1], tmm2",
                "tilestored [{c_low_right} + {out_row}*1], tmm3",
                a = inout(reg) a => _,
                a_low = inout(reg) a.add(TILE_ROWS * stride) => _,
                stride = in(reg) stride,
                b = inout(reg) b => _,
                b_right = inout(reg) b.add(k_tiles * TILE_BYTES) => _,
                k = inout(reg) k_tiles => _,
                tile_row = in(reg) ROW_BYTES,
                tile = in(reg) TILE_BYTES,
                c = in(reg) c,
                c_right = in(reg) c.add(TILE_ROWS),
                c_low = in(reg) c.add(TILE_ROWS * BLOCK),
                c_low_right = in(reg) c.add(TILE_ROWS * BLOCK + TILE_ROWS),
                out_row = in(reg) BLOCK * 4,
                options(nostack),
            );
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod amx {
    pub(super) fn request() -> bool {
        false
    }
    pub(super) struct Config;
    impl Config {
        pub(super) fn new() -> Self {
            Self
        }
        pub(super) fn load(&self) {}
    }
    pub(super) fn release() {}
    pub(super) unsafe fn block(_: *const u8, _: usize, _: *const i8, _: usize, _: &mut [i32; 1024]) {
        unreachable!("tiles are never available here")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pattern of every int8 value's sign and size, and uint8 rows around the zero point.
    fn inputs(m: usize, k: usize, n: usize) -> (Vec<u8>, Vec<i8>) {
        let q = (0..m * k).map(|i| (i * 89 % 256) as u8).collect();
        let w = (0..k * n).map(|i| ((i * 37 % 255) as i32 - 127) as i8).collect();
        (q, w)
    }

    /// `Σ_k (q − 128) · w` for each row and column, exactly.
    fn exact(q: &[u8], w: &[i8], k: usize, n: usize) -> Vec<i32> {
        let zero = i32::from(ROW_ZERO_POINT);
        q.chunks_exact(k)
            .flat_map(|row| {
                (0..n).map(move |c| {
                    row.iter()
                        .enumerate()
                        .map(|(i, &v)| (i32::from(v) - zero) * i32::from(w[i * n + c]))
                        .sum()
                })
            })
            .collect()
    }

    /// Every block of rows in turn, on `engine`.
    fn multiply(engine: TileEngine, operands: Operands<'_>, out: &mut [f32]) {
        for (block, out) in out.chunks_mut(BLOCK * operands.weights.scale.len()).enumerate() {
            multiply_block_on(engine, operands, block, out);
        }
    }

    /// The engines this host can run (an AMX host has VNNI too).
    fn engines() -> Vec<TileEngine> {
        let amx = (engine() == Some(TileEngine::Amx)).then_some(TileEngine::Amx);
        amx.into_iter().chain(vnni::available().then_some(TileEngine::Vnni)).collect()
    }

    #[test]
    fn packing_puts_each_weight_where_tdpbusd_pairs_it_with_its_input() {
        // Emulates `tdpbusd` over the packed tiles: output column c of a block reads, from
        // tile row r, the 4 bytes at 4c, which pair with inputs k = 64·t + 4r .. + 4.
        let (k, n) = (70, 35);
        let (q, w) = inputs(3, k, n);
        let (packed, zero_sums) = pack(&w, k, n);
        let [n_padded, k_padded] = packed_dims(k, n);
        assert_eq!((n_padded, k_padded, packed.len()), (64, 128, 64 * 128));
        let k_tiles = k_padded / TILE_K;
        let mut got = Vec::new();
        for row in q.chunks_exact(k) {
            for c in 0..n {
                let mut sum = 0i32;
                for t in 0..k_tiles {
                    let tile = &packed[(c / TILE_COLUMNS * k_tiles + t) * TILE_BYTES..][..TILE_BYTES];
                    for r in 0..TILE_ROWS {
                        for b in 0..4 {
                            let input = row.get(t * TILE_K + 4 * r + b).map_or(0, |&v| i32::from(v));
                            sum += input * i32::from(tile[r * ROW_BYTES + c % TILE_COLUMNS * 4 + b]);
                        }
                    }
                }
                got.push(sum - zero_sums[c]);
            }
        }
        assert_eq!(got, exact(&q, &w, k, n));
    }

    #[test]
    fn each_engine_is_exact_and_rescales_as_row_rescale_where_the_cpu_has_it() {
        let engines = engines();
        if engines.is_empty() {
            // The operator refuses this host by name (`row_operators` tests that error).
            let flags = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
            for flag in ["amx_int8", "avx512_vnni"] {
                assert!(!flags.split_ascii_whitespace().any(|f| f == flag), "{flag} listed but refused");
            }
            return;
        }
        // Shapes for each path: k under a step of 4 and past a tile, rows short of a
        // micro-block and of a block, columns short of a panel and of a pair of blocks.
        let shapes = [
            (1, 1, 1),
            (3, 6, 33),
            (31, 63, 17),
            (32, 64, 32),
            (33, 65, 33),
            (97, 384, 96),
            (40, 1540, 48),
            (37, 128, 100),
        ];
        for engine in engines {
            for (m, k, n) in shapes {
                let (q, w) = inputs(m, k, n);
                let (packed, zero_sums) = pack(&w, k, n);
                let scale: Vec<f32> = (0..n).map(|c| 0.5 + c as f32 / 64.0).collect();
                let weights = TileWeights { packed: &packed, zero_sums: &zero_sums, scale: &scale };
                let mut out = vec![f32::NAN; m * n];
                multiply(engine, Operands { q: &q, k, weights, rescale: None }, &mut out);
                let expected: Vec<f32> =
                    exact(&q, &w, k, n).iter().enumerate().map(|(i, &v)| v as f32 * scale[i % n]).collect();
                assert_eq!(out, expected, "{engine:?}: {m} x {k} x {n}");

                let peaks: Vec<f32> = (0..m).map(|r| 1.0 + r as f32).collect();
                let bias: Vec<f32> = (0..n).map(|c| c as f32 - 3.0).collect();
                let rescale = Some(Rescale { peaks: &peaks, bias: Some(&bias) });
                multiply(engine, Operands { q: &q, k, weights, rescale }, &mut out);
                let rescaled: Vec<f32> =
                    expected.iter().enumerate().map(|(i, y)| y.mul_add(peaks[i / n], bias[i % n])).collect();
                assert_eq!(out, rescaled, "{engine:?}: {m} x {k} x {n} rescaled");
            }
        }
    }
}
