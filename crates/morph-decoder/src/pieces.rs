//! How a prompt is fed to a stepper: in pieces, one per iteration, each starting at a turn of
//! the chat (the chat template's turn-start token, `<|im_start|>` in ChatML) or where the last
//! piece stopped, and holding at most `chunk` tokens ([`Cut`]). The pieces are a function of the
//! prompt's tokens alone, so a prompt that starts like an earlier one is computed in the same
//! calls up to any turn start they share. A stepper that reuses any common prefix has its
//! pieces cut with no turn token: plain chunks ([`super::Reuse::piece_break`]).
//!
//! A row's numbers depend on the rows before it in its sequence's cache and on the llama.cpp
//! kernel its call runs it in ([`Kernel`]: a lone row, a row at a time, or tiles of 64 rows),
//! never on the other rows of its call: each row's attention runs over the same tiles of the
//! cache whatever shares its call (a tile masked for a row is skipped for that row alone), and
//! every other operation is a row's own. So a kept prefix may end anywhere, mid-piece too, where
//! every kept row ran in the kernel the prompt fed whole runs it in, and the rest, fed from
//! there ([`WholeFeed::resumes_at`]), runs each row in its whole-feed kernel as well: the logits
//! are then those of the prompt fed whole, bit for bit.
//!
//! One turn start does not begin a piece: the reply turn's opening (`<|im_start|>assistant\n`,
//! the few tokens after a chat prompt's last turn start) rides with the piece before it where
//! every row of that piece runs in the same kernel with it as without it, which spares each
//! prompt a call of its own for it. A kept prompt that ends in its opening is reused by the
//! prompt cache up to the opening, never whole ([`super::Reuse::whole_reusable`]).

use std::ops::Range;

/// Where feeding may start after a kept prefix: the offsets of `prompt`'s turn starts.
pub fn turn_starts(prompt: &[u32], turn_start: Option<u32>) -> Vec<usize> {
    let Some(turn) = turn_start else { return Vec::new() };
    prompt.iter().enumerate().filter(|&(_, &t)| t == turn).map(|(i, _)| i).collect()
}

/// Most tokens from a prompt's last turn start to its end that make a reply turn's opening
/// (ChatML's `<|im_start|>assistant\n` is 3).
const REPLY_OPENING: usize = 8;

/// From how many rows of one sequence llama.cpp's flash attention runs a call in its tiled
/// kernel (`GGML_FA_TILE_Q`); fewer go through its kernel of one row at a time.
const TILED_ROWS: usize = 64;

/// Where the reply turn's opening of a prompt of `len` tokens (turn starts `starts`) begins:
/// its last turn start, if at most [`REPLY_OPENING`] tokens follow it.
pub fn reply_opening(len: usize, starts: &[usize]) -> Option<usize> {
    starts.last().copied().filter(|&s| s > 0 && len - s <= REPLY_OPENING)
}

/// Which of llama.cpp's flash-attention kernels runs a prompt row, by how many rows of its
/// sequence its call feeds (`ggml_compute_forward_flash_attn_ext_f16`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    /// A row alone in its call: its attention split across the call's threads once the cache
    /// view spans 512 cells (from about 257 tokens), so its numbers depend on the threads.
    Lone,
    /// 2 to 63 rows: a row at a time.
    Rows,
    /// [`TILED_ROWS`] rows or more: in tiles of query rows.
    Tiled,
    /// What a single token fed once its stream's cache view may span 512 cells ran in: the
    /// step's call of decode tokens, split across the threads of that moment or not, by what
    /// shares the call. Never matched, so such a row is never reused.
    Shared,
}

impl Kernel {
    /// The kernel of a call that feeds `rows` rows of one sequence alone.
    pub fn of(rows: usize) -> Self {
        match rows {
            0 | 1 => Self::Lone,
            r if r < TILED_ROWS => Self::Rows,
            _ => Self::Tiled,
        }
    }
}

/// Most tokens one `llama_decode` call takes: a longer piece runs in several calls.
pub(crate) const CALL_TOKENS: usize = 512;

/// The kernel each row of a piece of `rows` rows runs in, in its calls of at most
/// [`CALL_TOKENS`].
pub(crate) fn piece_kernels(rows: usize) -> impl Iterator<Item = Kernel> {
    (0..rows).step_by(CALL_TOKENS).flat_map(move |at| {
        let call = (rows - at).min(CALL_TOKENS);
        std::iter::repeat_n(Kernel::of(call), call)
    })
}

/// Whether the rows of a piece of `alone` rows run in the same kernels when more rows follow
/// them, `with` in all (a lone row never does: beside others it is not alone).
fn same_kernels(alone: usize, with: usize) -> bool {
    piece_kernels(alone).eq(piece_kernels(with).take(alone))
}

/// The piece of `prompt` fed from `from`: at most `chunk` tokens, ending before the next turn,
/// or with the reply turn's opening where that rides with it (see the module).
pub fn next_piece(prompt: &[u32], from: usize, turn_start: Option<u32>, chunk: usize) -> Range<usize> {
    let chunk = chunk.max(1);
    let limit = prompt.len().min(from.saturating_add(chunk));
    let end = (from + 1..limit).find(|&i| Some(prompt[i]) == turn_start).unwrap_or(limit);
    // Only a piece ending near the prompt's end looks for the opening (and its later starts).
    let rest = &prompt[from..];
    let opening = prompt.len() - end <= REPLY_OPENING
        && reply_opening(rest.len(), &turn_starts(rest, turn_start)) == Some(end - from);
    let rides = opening && prompt.len() - from <= chunk && same_kernels(end - from, prompt.len() - from);
    from..if rides { prompt.len() } else { end }
}

/// How a prompt is cut into pieces: at most `chunk` tokens each, each ending before the next
/// `breaks` token (a chat turn's start; `None`: plain chunks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cut {
    pub breaks: Option<u32>,
    pub chunk: usize,
}

impl Cut {
    /// The piece of `prompt` fed from `from` ([`next_piece`]).
    pub fn piece(self, prompt: &[u32], from: usize) -> Range<usize> {
        next_piece(prompt, from, self.breaks, self.chunk)
    }

    /// `prompt` fed whole in its pieces.
    pub fn whole(self, prompt: &[u32]) -> WholeFeed {
        let mut kernels = Vec::with_capacity(prompt.len());
        let mut begins = vec![false; prompt.len() + 1];
        for piece in pieces(prompt, 0, self.breaks, self.chunk) {
            begins[piece.start] = true;
            kernels.extend(piece_kernels(piece.len()));
        }
        begins[prompt.len()] = true;
        WholeFeed { cut: self, kernels, begins }
    }
}

/// A prompt fed whole by its [`Cut`]: the kernel each row runs in, and where pieces begin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WholeFeed {
    cut: Cut,
    kernels: Vec<Kernel>,
    /// By offset (the prompt's end included): whether a piece begins there.
    begins: Vec<bool>,
}

impl WholeFeed {
    /// The kernel each row runs in.
    pub fn kernels(&self) -> &[Kernel] {
        &self.kernels
    }

    /// How many of the prompt's first rows, which ran in `ran`, a kept state may hold for the
    /// prompt cache, which reuses it at turn starts: up to a piece's start (or the prompt's
    /// end), every row before it run in its whole-feed kernel.
    pub fn kept_as_fed(&self, ran: &[Kernel]) -> usize {
        let agree = ran.iter().zip(&self.kernels).take_while(|(r, k)| r == k).count();
        self.piece_start(agree)
    }

    /// The start of the whole-feed piece holding offset `at` (`at` itself where one begins).
    fn piece_start(&self, at: usize) -> usize {
        (0..=at).rev().find(|&i| self.begins[i]).unwrap_or(0)
    }

    /// The furthest offset at or before `bound` from which `prompt` (the one fed whole) runs
    /// every row in its whole-feed kernel ([`Self::resumes_at`]): at worst the start of the
    /// whole-feed piece holding `bound`, which resumes as fed whole.
    pub fn resume_at_or_before(&self, prompt: &[u32], bound: usize) -> usize {
        let start = self.piece_start(bound);
        (start + 1..=bound).rev().find(|&at| self.resumes_at(prompt, at)).unwrap_or(start)
    }

    /// Whether `prompt` (the one fed whole) fed from `from` on runs every row in its whole-feed
    /// kernel: the piece from there ends where a whole-feed piece ends (the rest are then the
    /// same pieces), and each of its rows runs in its whole-feed kernel.
    pub fn resumes_at(&self, prompt: &[u32], from: usize) -> bool {
        let piece = self.cut.piece(prompt, from);
        self.begins[piece.end] && self.kernels[piece.clone()].iter().copied().eq(piece_kernels(piece.len()))
    }
}

/// Every piece of `prompt` from `from` on, in order.
pub fn pieces(prompt: &[u32], from: usize, turn_start: Option<u32>, chunk: usize) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut at = from;
    while at < prompt.len() {
        let piece = next_piece(prompt, at, turn_start, chunk);
        at = piece.end;
        out.push(piece);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const TURN: Option<u32> = Some(1);

    #[test]
    fn pieces_start_at_each_turn_and_hold_at_most_a_chunk() {
        // Turns start at 0, 4 and 11.
        let prompt = [1, 9, 9, 9, 1, 8, 8, 8, 8, 8, 8, 1, 7, 7, 7, 7, 7, 7, 7, 7, 7];
        assert_eq!(turn_starts(&prompt, TURN), vec![0, 4, 11]);
        assert_eq!(pieces(&prompt, 0, TURN, usize::MAX), vec![0..4, 4..11, 11..21]);
        assert_eq!(
            pieces(&prompt, 0, TURN, 3),
            vec![0..3, 3..4, 4..7, 7..10, 10..11, 11..14, 14..17, 17..20, 20..21]
        );
        // Fed from a kept turn start, the rest are the same pieces as fed whole.
        let whole = pieces(&prompt, 0, TURN, 3);
        assert_eq!(pieces(&prompt, 4, TURN, 3), whole[2..]);
        // A reply's opening (a last turn of a few tokens) rides with the piece before it where
        // that piece's rows run in the same kernels either way.
        let reply = [1, 9, 9, 9, 1, 8, 8, 8, 8, 8, 8, 1, 7];
        assert_eq!(reply_opening(reply.len(), &turn_starts(&reply, TURN)), Some(11));
        assert_eq!(pieces(&reply, 0, TURN, usize::MAX), vec![0..4, 4..13]);
        assert_eq!(pieces(&reply, 0, TURN, 9), vec![0..4, 4..13], "it fits the chunk");
        assert_eq!(pieces(&reply, 0, TURN, 8), vec![0..4, 4..11, 11..13], "it does not");
        assert_eq!(pieces(&reply, 0, TURN, 3), vec![0..3, 3..4, 4..7, 7..10, 10..11, 11..13], "a lone row");
        let long: Vec<u32> = [1].into_iter().chain([8; 62]).chain([1, 7]).collect();
        assert_eq!(pieces(&long, 0, TURN, usize::MAX), vec![0..63, 63..65], "63 rows tiled only with it");
        let tiled: Vec<u32> = [1].into_iter().chain([8; 63]).chain([1, 7]).collect();
        assert_eq!(pieces(&tiled, 0, TURN, usize::MAX), vec![0..66], "tiled either way");
        // A turn of 513 rows runs its last row alone, and beside the opening it would not.
        let over: Vec<u32> = [1].into_iter().chain([8; CALL_TOKENS]).chain([1, 7]).collect();
        assert_eq!(pieces(&over, 0, TURN, usize::MAX), vec![0..513, 513..515], "the opening rides not");
        // A piece longer than a call runs in several: 512 rows tiled, then one alone.
        let split: Vec<Kernel> = piece_kernels(CALL_TOKENS + 1).collect();
        assert_eq!(
            (split[..CALL_TOKENS].iter().all(|&k| k == Kernel::Tiled), split[CALL_TOKENS]),
            (true, Kernel::Lone)
        );
        // Fed whole: each row's kernel, and where a feed may resume with every row's kernel.
        let cut = Cut { breaks: TURN, chunk: usize::MAX };
        let whole = cut.whole(&long);
        assert_eq!(whole.kernels()[..63], [Kernel::Rows; 63], "63 rows a row at a time");
        assert!(
            whole.resumes_at(&long, 63) && whole.resumes_at(&long, 1),
            "from a turn, or within the first"
        );
        assert!(!whole.resumes_at(&long, 64), "the opening's last row alone runs in the lone row's kernel");
        assert!(!cut.whole(&tiled).resumes_at(&tiled, 2), "64 rows from 2 are not tiled");
        let longer: Vec<u32> = [1].into_iter().chain([8; 70]).chain([1, 7]).collect();
        assert!(cut.whole(&longer).resumes_at(&longer, 7), "66 rows, tiled as the whole 73");
        assert!(!cut.whole(&longer).resumes_at(&longer, 10), "63 rows are not");
        assert_eq!(whole.resume_at_or_before(&long, 64), 63, "back to the opening's start");
        assert_eq!(cut.whole(&longer).resume_at_or_before(&longer, 72), 7, "back to 66 rows tiled");
        // Kept for the prompt cache: rows that ran as fed whole, up to a piece's start.
        let mut ran = whole.kernels().to_vec();
        assert_eq!(whole.kept_as_fed(&ran), long.len());
        ran[40] = Kernel::Shared;
        assert_eq!(whole.kept_as_fed(&ran), 0, "a row of the first piece ran otherwise");
        assert_eq!(whole.kept_as_fed(&ran[..30]), 0, "fed to mid-piece");
        let chunked = Cut { breaks: TURN, chunk: 3 };
        assert!(!chunked.whole(&prompt).resumes_at(&prompt, 5), "from 5 a chunk ends at 8, within 7..10");
        // Without a turn-start token (a raw completion prompt), only chunks.
        assert!(turn_starts(&prompt, None).is_empty());
        assert_eq!(pieces(&prompt, 0, None, 5), vec![0..5, 5..10, 10..15, 15..20, 20..21]);
        assert_eq!(pieces(&prompt, 0, None, 0), pieces(&prompt, 0, None, 1), "a chunk is at least a token");
    }
}
