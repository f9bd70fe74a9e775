//! How a prompt is fed to a stepper: in pieces, one per iteration, each starting at a turn of
//! the chat (the chat template's turn-start token, `<|im_start|>` in ChatML) or where the last
//! piece stopped, and holding at most `chunk` tokens. The pieces are a function of the prompt's
//! tokens alone, so a prompt that starts like an earlier one is computed in the same calls up
//! to any turn start they share: a stepper that kept the earlier one's cache can skip to there
//! and still give the numbers of the prompt fed whole ([`super::Stepper::open`]). A stepper
//! that reuses any common prefix has its pieces cut with no turn token: plain chunks
//! ([`super::Reuse::piece_break`]).
//!
//! One turn start does not begin a piece: the reply turn's opening (`<|im_start|>assistant\n`,
//! the few tokens after a chat prompt's last turn start) rides with the piece before it where
//! every row of that piece runs in the same llama.cpp kernels with it as without it
//! ([`same_kernels`]), which spares each prompt a call of its own for it. Each row's numbers then
//! do not depend on the rows after it, so a later prompt that reuses the cache up to the opening
//! still gets the numbers of the prompt fed whole. A kept prompt that ends in its opening is
//! reused up to the opening, never whole ([`super::Reuse::whole_reusable`]).

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

/// Whether the rows of a piece of `alone` rows run in the same kernels when more rows follow
/// them in the call, `with` in all: attention tiled in both or in neither, and never a lone row
/// (whose attention llama.cpp splits across threads once its cache spans 512 cells).
fn same_kernels(alone: usize, with: usize) -> bool {
    alone >= 2 && (alone >= TILED_ROWS) == (with >= TILED_ROWS)
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
        // Without a turn-start token (a raw completion prompt), only chunks.
        assert!(turn_starts(&prompt, None).is_empty());
        assert_eq!(pieces(&prompt, 0, None, 5), vec![0..5, 5..10, 10..15, 15..20, 20..21]);
        assert_eq!(pieces(&prompt, 0, None, 0), pieces(&prompt, 0, None, 1), "a chunk is at least a token");
    }
}
