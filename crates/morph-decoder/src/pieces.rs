//! How a prompt is fed to a stepper: in pieces, one per iteration, each starting at a turn of
//! the chat (the chat template's turn-start token, `<|im_start|>` in ChatML) or where the last
//! piece stopped, and holding at most `chunk` tokens. The pieces are a function of the prompt's
//! tokens alone, so a prompt that starts like an earlier one is computed in the same calls up
//! to any turn start they share: a stepper that kept the earlier one's cache can skip to there
//! and still give the numbers of the prompt fed whole ([`super::Stepper::open`]). A stepper
//! that reuses any common prefix has its pieces cut with no turn token: plain chunks
//! ([`super::Reuse::piece_break`]).

use std::ops::Range;

/// Where feeding may start after a kept prefix: the offsets of `prompt`'s turn starts.
pub fn turn_starts(prompt: &[u32], turn_start: Option<u32>) -> Vec<usize> {
    let Some(turn) = turn_start else { return Vec::new() };
    prompt.iter().enumerate().filter(|&(_, &t)| t == turn).map(|(i, _)| i).collect()
}

/// The piece of `prompt` fed from `from`: at most `chunk` tokens, ending before the next turn.
pub fn next_piece(prompt: &[u32], from: usize, turn_start: Option<u32>, chunk: usize) -> Range<usize> {
    let limit = prompt.len().min(from.saturating_add(chunk.max(1)));
    let end = (from + 1..limit).find(|&i| Some(prompt[i]) == turn_start).unwrap_or(limit);
    from..end
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
        let prompt = [1, 9, 9, 9, 1, 8, 8, 8, 8, 8, 8, 1, 7];
        assert_eq!(turn_starts(&prompt, TURN), vec![0, 4, 11]);
        assert_eq!(pieces(&prompt, 0, TURN, usize::MAX), vec![0..4, 4..11, 11..13]);
        assert_eq!(pieces(&prompt, 0, TURN, 3), vec![0..3, 3..4, 4..7, 7..10, 10..11, 11..13]);
        // Fed from a kept turn start, the rest are the same pieces as fed whole.
        let whole = pieces(&prompt, 0, TURN, 3);
        assert_eq!(pieces(&prompt, 4, TURN, 3), whole[2..]);
        // Without a turn-start token (a raw completion prompt), only chunks.
        assert!(turn_starts(&prompt, None).is_empty());
        assert_eq!(pieces(&prompt, 0, None, 5), vec![0..5, 5..10, 10..13]);
        assert_eq!(pieces(&prompt, 0, None, 0), pieces(&prompt, 0, None, 1), "a chunk is at least a token");
    }
}
