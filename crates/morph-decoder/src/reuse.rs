//! Which of a kept sequence's tokens a new prompt may start from ([`Reuse`]): the rule a
//! stepper applies to the streams it holds and the prompt cache to the states it keeps.

use crate::pieces::reply_opening;

/// Prefix reuse counts in whole blocks of this many tokens (vLLM's default block size).
pub const BLOCK: usize = 16;

/// How much of a kept sequence a prompt that starts the same way reuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Reuse {
    /// Up to a turn start where the kept prompt's own pieces also broke, and none of the kept
    /// sequence's output (computed a row at a time): fed in [`super::pieces`], the rest runs in
    /// the calls the prompt fed whole gets, so the logits are bit for bit those computed afresh.
    /// A conversation's next round reuses its earlier round's prompt up to the reply turn.
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
    /// `turn`: under [`Reuse::Turns`] the turn start, so that a kept prefix ending at one gives
    /// the numbers of the prompt fed whole; under [`Reuse::Prefix`], which trades that
    /// exactness already, none: a prompt is fed in plain chunks, in fewer iterations, as
    /// llama-server feeds it.
    pub fn piece_break(self, turn: Option<u32>) -> Option<u32> {
        match self {
            Self::Turns => turn,
            Self::Prefix => None,
        }
    }

    /// How many of `prompt`'s first tokens (turn starts `starts`) a stream holding `kept`
    /// (whose prompt's turn starts are `kept_starts`) gives; never the whole prompt, whose last
    /// token is fed for its logits.
    pub fn reusable(self, kept: &[u32], kept_starts: &[usize], prompt: &[u32], starts: &[usize]) -> usize {
        let common = kept.iter().zip(prompt).take_while(|(a, b)| a == b).count();
        let last = prompt.len().saturating_sub(1);
        match self {
            Self::Turns => {
                let breaks = |s: usize| {
                    kept_starts.contains(&s) || (s == kept.len() && self.whole_reusable(s, kept_starts))
                };
                starts
                    .iter()
                    .copied()
                    .filter(|&s| s > 0 && s <= last && s <= common && breaks(s))
                    .max()
                    .unwrap_or(0)
            }
            Self::Prefix => common.min(last),
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

    const TURN: u32 = 1;

    fn starts(p: &[u32]) -> Vec<usize> {
        crate::pieces::turn_starts(p, Some(TURN))
    }

    #[test]
    fn turns_reuse_up_to_a_turn_start_both_prompts_break_at() {
        let kept = [TURN, 5, 6, TURN, 7, 8, 8, 8, 8, 8, 8, 8, 8];
        let k = starts(&kept);
        let turns = |prompt: &[u32]| Reuse::Turns.reusable(&kept, &k, prompt, &starts(prompt));
        // The next round: all of the kept prompt, whose end is a turn start of the next.
        let next: Vec<u32> = kept.iter().copied().chain([TURN, 9, TURN, 4]).collect();
        assert_eq!(turns(&next), kept.len());
        // The same prompt: all but its last turn, which is fed for the logits.
        assert_eq!(turns(&kept), 3);
        // Another last turn after a shared first one.
        assert_eq!(turns(&[TURN, 5, 6, TURN, 9, 9]), 3);
        assert!(!Reuse::Turns.whole_reusable(7, &[0, 5]) && Reuse::Prefix.whole_reusable(7, &[0, 5]));
        // Agreeing up to a turn start of the new prompt that the kept one has no break at: the
        // kept one's piece ran on past it, so its numbers are another call's.
        let kept_on = [TURN, 5, 6, 7, 7];
        let split = [TURN, 5, 6, TURN, 7];
        assert_eq!(Reuse::Turns.reusable(&kept_on, &starts(&kept_on), &split, &starts(&split)), 0);
        assert_eq!(Reuse::Turns.reusable(&kept, &k, &[2, 3, 4], &[]), 0, "nothing shared");
        assert_eq!(Reuse::Turns.kept(10, 6), 6, "only the prompt is kept");
        // A kept prompt ending in a reply's opening (which rode with the turn before it) gives
        // up to the opening only, even to a prompt with a turn start right after it.
        let opened = [TURN, 5, 6, 6, 6, TURN, 7];
        let next = [TURN, 5, 6, 6, 6, TURN, 7, TURN, 9];
        assert_eq!(Reuse::Turns.reusable(&opened, &starts(&opened), &next, &starts(&next)), 5);
    }

    #[test]
    fn prefix_reuses_the_longest_common_prefix_and_is_found_by_blocks() {
        let kept = [TURN, 5, 6, 7, 7];
        let split = [TURN, 5, 6, TURN, 7];
        assert_eq!(Reuse::Prefix.reusable(&kept, &starts(&kept), &split, &starts(&split)), 3);
        assert_eq!(
            Reuse::Prefix.reusable(&kept, &starts(&kept), &kept, &starts(&kept)),
            4,
            "all but the last"
        );
        assert_eq!(Reuse::Prefix.kept(10, 6), 10, "the output is kept too");
        assert_eq!(Reuse::Prefix.ends(40, &[0, 20]), vec![16, 20, 32, 40]);
        assert_eq!(Reuse::Turns.ends(40, &[0, 20]), vec![20, 40]);
        assert_eq!(Reuse::Prefix.probes(33, &[0, 20]), vec![16, 20, 32]);
        assert_eq!(Reuse::Turns.probes(33, &[0, 20, 32]), vec![20, 32]);
    }
}
