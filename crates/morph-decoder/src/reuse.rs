//! Which of a kept sequence's tokens a new prompt may start from ([`Reuse`]): the rule a
//! stepper applies to the streams it holds and the prompt cache to the states it keeps.

use crate::pieces::{Kernel, WholeFeed, reply_opening};

/// Prefix reuse counts in whole blocks of this many tokens (vLLM's default block size).
pub const BLOCK: usize = 16;

/// How much of a kept sequence a prompt that starts the same way reuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Reuse {
    /// Up to where every kept row ran in the kernel the prompt fed whole runs it in, and none
    /// of the kept sequence's output (computed a row at a time): fed in [`super::pieces`] from
    /// there, every other row runs in its whole-feed kernel too, so the logits are bit for bit
    /// those computed afresh. A conversation's next round reuses its earlier round's prompt up
    /// to the reply turn; another question after the same system message reuses the user
    /// turn's opening too.
    #[default]
    Turns,
    /// The longest common prefix (in whole [`BLOCK`]s from the prompt cache), the kept
    /// sequence's output included, as llama-server's prompt cache does: a next round reuses the
    /// earlier answer too, but its logits move within llama.cpp's rounding (its calls are cut
    /// elsewhere), so a greedy answer can differ where two tokens nearly tie.
    Prefix,
}

impl Reuse {
    /// The token before which a prompt's pieces break, given the chat's turn-start token
    /// `turn`: under [`Reuse::Turns`] the turn start, so that prompts sharing their first turns
    /// run them in the same kernels and the prompt cache finds them by turn; under
    /// [`Reuse::Prefix`], which trades that exactness already, none: a prompt is fed in plain
    /// chunks, in fewer iterations, as llama-server feeds it.
    pub fn piece_break(self, turn: Option<u32>) -> Option<u32> {
        match self {
            Self::Turns => turn,
            Self::Prefix => None,
        }
    }

    /// How many of `prompt`'s first tokens (fed whole: `whole`) a stream holding `kept`, whose
    /// rows ran in the kernels `ran`, gives; never the whole prompt, whose last token is fed
    /// for its logits.
    pub fn reusable(self, kept: &[u32], ran: &[Kernel], prompt: &[u32], whole: &WholeFeed) -> usize {
        let last = prompt.len().saturating_sub(1);
        match self {
            Self::Turns => {
                let rows = kept.iter().zip(ran);
                let agree = rows
                    .zip(prompt.iter().zip(whole.kernels()))
                    .take_while(|((k, r), (p, w))| k == p && r == w)
                    .count();
                whole.resume_at_or_before(prompt, agree.min(last))
            }
            Self::Prefix => kept.iter().zip(prompt).take_while(|(a, b)| a == b).count().min(last),
        }
    }

    /// Whether a later prompt may reuse all of a kept one of `len` tokens (turn starts
    /// `starts`): under [`Reuse::Turns`], not where it ends in a reply turn's opening, which may
    /// have ridden with the piece before it ([`super::pieces`]) where the later prompt would
    /// feed it alone.
    pub fn whole_reusable(self, len: usize, starts: &[usize]) -> bool {
        self == Self::Prefix || reply_opening(len, starts).is_none()
    }

    /// Of a closing sequence's `held` tokens (its prompt's first `prompt`), how many are worth
    /// keeping.
    pub fn kept(self, held: usize, prompt: usize) -> usize {
        match self {
            Self::Turns => held.min(prompt),
            Self::Prefix => held,
        }
    }

    /// The lengths (ascending) at which a kept sequence of `len` tokens (turn starts `starts`)
    /// can be found: its turn starts and its end, and under [`Reuse::Prefix`] every block.
    pub fn ends(self, len: usize, starts: &[usize]) -> Vec<usize> {
        let mut ends: Vec<usize> =
            starts.iter().copied().filter(|&s| s > 0 && s < len).chain([len]).collect();
        if self == Self::Prefix {
            ends.extend((BLOCK..len).step_by(BLOCK));
        }
        ends.sort_unstable();
        ends.dedup();
        ends
    }

    /// The lengths (ascending) at which a prompt of `len` tokens (turn starts `starts`) looks
    /// for a kept prefix: its turn starts before its last token, and under [`Reuse::Prefix`]
    /// every block before it.
    pub fn probes(self, len: usize, starts: &[usize]) -> Vec<usize> {
        let last = len.saturating_sub(1);
        let mut probes: Vec<usize> = starts.iter().copied().filter(|&s| s > 0 && s <= last).collect();
        if self == Self::Prefix {
            probes.extend((BLOCK..=last).step_by(BLOCK));
        }
        probes.sort_unstable();
        probes.dedup();
        probes
    }
}

impl std::str::FromStr for Reuse {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "turns" => Ok(Self::Turns),
            "prefix" => Ok(Self::Prefix),
            other => Err(format!("'{other}' is not turns or prefix")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pieces::Cut;

    const TURN: u32 = 1;

    const CUT: Cut = Cut { breaks: Some(TURN), chunk: usize::MAX };

    /// What `rule` reuses of `kept` (fed whole) for `prompt`.
    fn reused(rule: Reuse, kept: &[u32], prompt: &[u32]) -> usize {
        rule.reusable(kept, CUT.whole(kept).kernels(), prompt, &CUT.whole(prompt))
    }

    #[test]
    fn turns_reuse_up_to_where_every_row_ran_in_its_whole_feed_kernel() {
        let kept = [TURN, 5, 6, TURN, 7, 8, 8, 8, 8, 8, 8, 8, 8];
        let turns = |prompt: &[u32]| reused(Reuse::Turns, &kept, prompt);
        // The next round: all of the kept prompt, whose end is a turn start of the next.
        let next: Vec<u32> = kept.iter().copied().chain([TURN, 9, TURN, 4]).collect();
        assert_eq!(turns(&next), kept.len());
        // The same prompt: all but its last two rows (a lone last row would run in another
        // kernel than beside the row before it).
        assert_eq!(turns(&kept), 11);
        // Another last turn after a shared first one: its turn-start token too, whose row ran a
        // row at a time in both prompts.
        assert_eq!(turns(&[TURN, 5, 6, TURN, 9, 9]), 4);
        // Agreeing up to a turn start the kept prompt has no break at: its piece ran on past
        // it, in the same kernel, so the rows before it hold the same numbers.
        assert_eq!(reused(Reuse::Turns, &[TURN, 5, 6, 7, 7], &[TURN, 5, 6, TURN, 7]), 3);
        // Rows the kept prompt ran tiled that the new one runs a row at a time: nothing.
        let tiled: Vec<u32> = [TURN].into_iter().chain([5; 70]).collect();
        let rows: Vec<u32> = [TURN].into_iter().chain([5; 10]).chain([TURN, 7]).collect();
        assert_eq!(reused(Reuse::Turns, &tiled, &rows), 0);
        assert_eq!(turns(&[2, 3, 4]), 0, "nothing shared");
        assert_eq!(Reuse::Turns.kept(10, 6), 6, "only the prompt is kept");
        // A kept prompt ending in a reply's opening, which rode with the turn before it a row
        // at a time, as the next round runs it beside that round's own reply opening: all of it.
        let opened = [TURN, 5, 6, 6, 6, TURN, 7];
        assert_eq!(reused(Reuse::Turns, &opened, &[TURN, 5, 6, 6, 6, TURN, 7, TURN, 9]), 7);
        // The prompt cache keeps no kernels: it reuses such a prompt up to its opening only.
        assert!(!Reuse::Turns.whole_reusable(7, &[0, 5]) && Reuse::Prefix.whole_reusable(7, &[0, 5]));
    }

    #[test]
    fn prefix_reuses_the_longest_common_prefix_and_is_found_by_blocks() {
        let kept = [TURN, 5, 6, 7, 7];
        assert_eq!(reused(Reuse::Prefix, &kept, &[TURN, 5, 6, TURN, 7]), 3);
        assert_eq!(reused(Reuse::Prefix, &kept, &kept), 4, "all but the last");
        assert_eq!(Reuse::Prefix.kept(10, 6), 10, "the output is kept too");
        assert_eq!(Reuse::Prefix.ends(40, &[0, 20]), vec![16, 20, 32, 40]);
        assert_eq!(Reuse::Turns.ends(40, &[0, 20]), vec![20, 40]);
        assert_eq!(Reuse::Prefix.probes(33, &[0, 20]), vec![16, 20, 32]);
        assert_eq!(Reuse::Turns.probes(33, &[0, 20, 32]), vec![20, 32]);
    }
}
