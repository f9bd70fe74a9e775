//! What a token plan (OTAS's γ, carried as a [`PlanId`]) means to the encoder. One numbering
//! for the whole system, so a profile, a policy's plan list and an instance's sessions agree:
//!
//! | id | plan |
//! |---|---|
//! | 0 | the plain model |
//! | −1 … −99 | ToMe: merge r = −id tokens in every layer (OTAS γ < 0) |
//! | −101 … −1xx | Morph's own: exit after k = −id − 100 layers, pooled there, with its own heads |
//! | 1 … | prompt tokens per layer (OTAS γ > 0); they need trained prompts |

use morph_core::PlanId;

use crate::EngineError;

/// The first id of the exit plans (exit after k layers is `-(EXIT_BASE + k)`).
const EXIT_BASE: i16 = 100;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenPlan {
    Plain,
    /// Tokens merged per layer.
    Merge(usize),
    /// Layers run before pooling.
    Exit(usize),
    /// Prompt tokens per layer.
    Prompt(usize),
}

impl TokenPlan {
    /// The plan `id` names on an encoder of `layers` layers.
    pub fn of(id: PlanId, layers: usize) -> Result<Self, EngineError> {
        let plan = match id.0 {
            0 => TokenPlan::Plain,
            p if p > 0 => TokenPlan::Prompt(p as usize),
            p if p > -EXIT_BASE => TokenPlan::Merge(p.unsigned_abs() as usize),
            p => TokenPlan::Exit((p.unsigned_abs() - EXIT_BASE as u16) as usize),
        };
        match plan {
            TokenPlan::Exit(k) if k == 0 || k >= layers => Err(EngineError::Unsupported(format!(
                "token plan {}: an exit after {k} layers on a {layers}-layer encoder (1 to {})",
                id.0,
                layers - 1
            ))),
            plan => Ok(plan),
        }
    }

    pub fn id(self) -> PlanId {
        let as_i16 = |n: usize| i16::try_from(n).unwrap_or(i16::MAX);
        PlanId(match self {
            TokenPlan::Plain => 0,
            TokenPlan::Merge(r) => -as_i16(r),
            TokenPlan::Exit(k) => -(EXIT_BASE + as_i16(k)),
            TokenPlan::Prompt(p) => as_i16(p),
        })
    }

    /// Whether a classifier needs heads of its own under this plan (it pools different
    /// features); merging reuses the plain model's heads (ToMe is training-free).
    pub fn own_heads(self) -> bool {
        matches!(self, TokenPlan::Exit(_) | TokenPlan::Prompt(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_exits_are_checked_against_the_depth() {
        for plan in [TokenPlan::Plain, TokenPlan::Merge(3), TokenPlan::Exit(4), TokenPlan::Prompt(2)] {
            assert_eq!(TokenPlan::of(plan.id(), 6).unwrap(), plan);
        }
        assert_eq!(TokenPlan::Exit(4).id(), PlanId(-104));
        assert_eq!(TokenPlan::of(PlanId(-99), 6).unwrap(), TokenPlan::Merge(99));
        assert!(TokenPlan::of(PlanId(-106), 6).is_err());
        assert!(TokenPlan::of(PlanId(-100), 6).is_err());
    }
}
