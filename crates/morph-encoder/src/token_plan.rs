//! What a token plan (OTAS's γ, carried as a [`PlanId`]) means to the encoder. One numbering
//! for the whole system, so a profile, a policy's plan list and an instance's sessions agree:
//!
//! | id | plan |
//! |---|---|
//! | 0 | the plain model |
//! | −1 … −99 | ToMe: merge r = −id tokens in every layer (OTAS γ < 0) |
//! | −101 … −1xx | Morph's own: exit after k = −id − 100 layers, pooled there, with its own heads |
//! | −1101 … −1599 | Morph's own: prune once, after k layers, pct% of the tokens (id = −(1000 + 100·k + pct)) |
//! | 1 … 99 | p = id trained prompt tokens added before every layer (OTAS γ > 0, the paper's additive reading: layer l sees p·(l+1) prompts) |
//! | 101 … 199 | p = id − 100 prompt tokens before every layer, each layer's replacing the last's (VPT-deep) |

use morph_core::PlanId;

use morph_engine::EngineError;

/// The first id of the exit plans (exit after k layers is `-(EXIT_BASE + k)`).
const EXIT_BASE: i16 = 100;
/// The first id of the pruning plans (`-(PRUNE_BASE + 100·k + pct)`).
const PRUNE_BASE: i16 = 1000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenPlan {
    Plain,
    /// Tokens merged per layer.
    Merge(usize),
    /// Layers run before pooling.
    Exit(usize),
    /// After `after` layers, drop `percent`% of the tokens (those attended least), once.
    Prune {
        after: usize,
        percent: u8,
    },
    /// Trained prompt tokens per layer.
    Prompt(usize, PromptMode),
}

/// How a layer's prompt tokens meet the previous layer's (spec A1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PromptMode {
    /// Added on top: the sequence grows by p tokens before every layer (OTAS's γ read literally).
    Additive,
    /// Replacing: the first layer inserts p tokens, every later layer overwrites them (VPT-deep).
    Replace,
}

impl TokenPlan {
    /// The plan `id` names on an encoder of `layers` layers.
    pub fn of(id: PlanId, layers: usize) -> Result<Self, EngineError> {
        let plan = match id.0 {
            0 => TokenPlan::Plain,
            p if p > EXIT_BASE => TokenPlan::Prompt((p - EXIT_BASE) as usize, PromptMode::Replace),
            p if p > 0 => TokenPlan::Prompt(p as usize, PromptMode::Additive),
            p if p > -EXIT_BASE => TokenPlan::Merge(p.unsigned_abs() as usize),
            p if p <= -PRUNE_BASE => {
                let code = p.unsigned_abs() - PRUNE_BASE as u16;
                TokenPlan::Prune { after: usize::from(code / 100), percent: (code % 100) as u8 }
            }
            p => TokenPlan::Exit((p.unsigned_abs() - EXIT_BASE as u16) as usize),
        };
        match plan {
            TokenPlan::Exit(k) if k == 0 || k >= layers => Err(EngineError::Unsupported(format!(
                "token plan {}: an exit after {k} layers on a {layers}-layer encoder (1 to {})",
                id.0,
                layers - 1
            ))),
            TokenPlan::Prune { after, percent } if after == 0 || after >= layers || percent == 0 => {
                Err(EngineError::Unsupported(format!(
                    "token plan {}: pruning {percent}% after {after} layers on a {layers}-layer encoder",
                    id.0
                )))
            }
            TokenPlan::Prompt(_, _) if id.0 == EXIT_BASE => {
                Err(EngineError::Unsupported("token plan 100 names no plan".into()))
            }
            plan => Ok(plan),
        }
    }

    pub fn id(self) -> PlanId {
        let as_i16 = |n: usize| i16::try_from(n).unwrap_or(i16::MAX);
        PlanId(match self {
            TokenPlan::Plain => 0,
            TokenPlan::Merge(r) => -as_i16(r),
            TokenPlan::Exit(k) => -(EXIT_BASE + as_i16(k)),
            TokenPlan::Prune { after, percent } => -(PRUNE_BASE + 100 * as_i16(after) + i16::from(percent)),
            TokenPlan::Prompt(p, PromptMode::Additive) => as_i16(p),
            TokenPlan::Prompt(p, PromptMode::Replace) => EXIT_BASE + as_i16(p),
        })
    }

    /// Whether a classifier needs heads of its own under this plan (it pools different
    /// features); merging and pruning reuse the plain model's heads (they are training-free).
    pub fn own_heads(self) -> bool {
        matches!(self, TokenPlan::Exit(_) | TokenPlan::Prompt(..))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_exits_are_checked_against_the_depth() {
        let prompts = [TokenPlan::Prompt(2, PromptMode::Additive), TokenPlan::Prompt(2, PromptMode::Replace)];
        let prune = TokenPlan::Prune { after: 2, percent: 30 };
        for plan in
            [TokenPlan::Plain, TokenPlan::Merge(3), TokenPlan::Exit(4), prune].into_iter().chain(prompts)
        {
            assert_eq!(TokenPlan::of(plan.id(), 6).unwrap(), plan);
        }
        assert_eq!(TokenPlan::Exit(4).id(), PlanId(-104));
        assert_eq!(TokenPlan::of(PlanId(-99), 6).unwrap(), TokenPlan::Merge(99));
        assert!(TokenPlan::of(PlanId(-106), 6).is_err());
        assert!(TokenPlan::of(PlanId(-100), 6).is_err());
        assert_eq!(TokenPlan::of(PlanId(102), 6).unwrap(), TokenPlan::Prompt(2, PromptMode::Replace));
        assert!(TokenPlan::of(PlanId(100), 6).is_err());
        assert_eq!(prune.id(), PlanId(-1230));
        assert!(TokenPlan::of(PlanId(-1630), 6).is_err(), "pruning after the last layer");
        assert!(TokenPlan::of(PlanId(-1200), 6).is_err(), "pruning nothing");
    }
}
