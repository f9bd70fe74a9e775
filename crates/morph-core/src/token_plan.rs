//! Token plans (OTAS's γ): the number of tokens a batch runs with. One readable form at every
//! edge — flags, scenario and profile files, file names, tensor keys, HTTP answers:
//!
//! | form | plan |
//! |---|---|
//! | `plain` | the plain model |
//! | `merge:r` | ToMe: merge r tokens in every layer (OTAS γ < 0) |
//! | `exit:k` | Morph's own: exit after k layers, pooled there, with its own heads |
//! | `prune:k@pct` | Morph's own: after k layers, drop pct% of the tokens (those attended least), once |
//! | `prompt:p` | p trained prompt tokens added before every layer (OTAS γ > 0, the paper's additive reading: layer l sees p·(l+1) prompts) |
//! | `prompt-replace:p` | p prompt tokens before every layer, each layer's replacing the last's (VPT-deep) |
//!
//! Files written before plans had names carried them as 16-bit integers; those still read
//! ([`TokenPlan::from_legacy_id`]): 0 plain, −1…−99 merge, −101… exit, −(1000 + 100·k + pct)
//! prune, 1…99 prompt, 101…199 prompt-replace.

use std::fmt;
use std::str::FromStr;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// How a layer's prompt tokens meet the previous layer's (spec A1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PromptMode {
    /// Added on top: the sequence grows by p tokens before every layer (OTAS's γ read literally).
    Additive,
    /// Replacing: the first layer inserts p tokens, every later layer overwrites them (VPT-deep).
    Replace,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum TokenPlan {
    #[default]
    Plain,
    /// Tokens merged per layer (r ≥ 1).
    Merge(usize),
    /// Layers run before pooling (k ≥ 1).
    Exit(usize),
    /// After `after` layers, drop `percent`% of the tokens (those attended least), once.
    Prune { after: usize, percent: u8 },
    /// Trained prompt tokens per layer (p ≥ 1).
    Prompt(usize, PromptMode),
}

/// Why a token plan was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error(
        "token plan {0:?}: expected plain, merge:R, exit:K, prune:K@PCT, prompt:P or prompt-replace:P (R, K, P ≥ 1, PCT 1 to 99)"
    )]
    Unreadable(String),
    #[error("token plan {plan}: {why}")]
    Depth { plan: TokenPlan, why: String },
}

impl TokenPlan {
    /// The plan an old file's integer named (see the module's table).
    pub fn from_legacy_id(id: i16) -> Result<Self, PlanError> {
        const EXIT_BASE: i16 = 100;
        const PRUNE_BASE: i16 = 1000;
        let plan = match id {
            0 => TokenPlan::Plain,
            p if p > EXIT_BASE => TokenPlan::Prompt((p - EXIT_BASE) as usize, PromptMode::Replace),
            p if p > 0 && p < EXIT_BASE => TokenPlan::Prompt(p as usize, PromptMode::Additive),
            p if p < 0 && p > -EXIT_BASE => TokenPlan::Merge(p.unsigned_abs() as usize),
            p if p <= -PRUNE_BASE => {
                let code = p.unsigned_abs() - PRUNE_BASE as u16;
                TokenPlan::Prune { after: usize::from(code / 100), percent: (code % 100) as u8 }
            }
            p if p < -EXIT_BASE => TokenPlan::Exit((p.unsigned_abs() - EXIT_BASE as u16) as usize),
            _ => return Err(PlanError::Unreadable(id.to_string())),
        };
        plan.checked().map_err(|_| PlanError::Unreadable(id.to_string()))
    }

    /// The plan, unless one of its counts is out of range.
    fn checked(self) -> Result<Self, ()> {
        match self {
            TokenPlan::Merge(0) | TokenPlan::Exit(0) | TokenPlan::Prompt(0, _) => Err(()),
            TokenPlan::Prune { after, percent } if after == 0 || !(1..=99).contains(&percent) => Err(()),
            plan => Ok(plan),
        }
    }

    /// Whether the plan fits an encoder of `layers` layers: an exit or a pruning point before
    /// its last layer.
    pub fn check_depth(self, layers: usize) -> Result<Self, PlanError> {
        let why = match self {
            TokenPlan::Exit(k) if k >= layers => {
                format!(
                    "an exit after {k} layers on a {layers}-layer encoder (1 to {})",
                    layers.saturating_sub(1)
                )
            }
            TokenPlan::Prune { after, percent } if after >= layers => {
                format!("pruning {percent}% after {after} layers on a {layers}-layer encoder")
            }
            plan => return Ok(plan),
        };
        Err(PlanError::Depth { plan: self, why })
    }

    /// Whether every token stays in its place through the layers (merging and pruning drop
    /// tokens, prompts add them), so that a graph may remove the padding between them.
    pub fn keeps_tokens_in_place(self) -> bool {
        matches!(self, TokenPlan::Plain | TokenPlan::Exit(_))
    }

    /// Whether a classifier needs heads of its own under this plan (it pools different
    /// features); merging and pruning reuse the plain model's heads (they are training-free).
    pub fn own_heads(self) -> bool {
        matches!(self, TokenPlan::Exit(_) | TokenPlan::Prompt(..))
    }
}

impl fmt::Display for TokenPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenPlan::Plain => write!(f, "plain"),
            TokenPlan::Merge(r) => write!(f, "merge:{r}"),
            TokenPlan::Exit(k) => write!(f, "exit:{k}"),
            TokenPlan::Prune { after, percent } => write!(f, "prune:{after}@{percent}"),
            TokenPlan::Prompt(p, PromptMode::Additive) => write!(f, "prompt:{p}"),
            TokenPlan::Prompt(p, PromptMode::Replace) => write!(f, "prompt-replace:{p}"),
        }
    }
}

impl FromStr for TokenPlan {
    type Err = PlanError;

    /// The readable form, or an old file's integer.
    fn from_str(text: &str) -> Result<Self, PlanError> {
        let unreadable = || PlanError::Unreadable(text.to_string());
        let text = text.trim();
        if let Ok(id) = text.parse::<i16>() {
            return Self::from_legacy_id(id);
        }
        let count = |n: &str| n.parse::<usize>().map_err(|_| unreadable());
        let plan = match text.split_once(':') {
            None if text == "plain" => TokenPlan::Plain,
            Some(("merge", r)) => TokenPlan::Merge(count(r)?),
            Some(("exit", k)) => TokenPlan::Exit(count(k)?),
            Some(("prompt", p)) => TokenPlan::Prompt(count(p)?, PromptMode::Additive),
            Some(("prompt-replace", p)) => TokenPlan::Prompt(count(p)?, PromptMode::Replace),
            Some(("prune", rest)) => {
                let (after, percent) = rest.split_once('@').ok_or_else(unreadable)?;
                TokenPlan::Prune { after: count(after)?, percent: percent.parse().map_err(|_| unreadable())? }
            }
            _ => return Err(unreadable()),
        };
        plan.checked().map_err(|_| unreadable())
    }
}

impl Serialize for TokenPlan {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for TokenPlan {
    /// The readable form; in a human-readable format (JSON, TOML), an old file's integer too.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct PlanVisitor;

        impl Visitor<'_> for PlanVisitor {
            type Value = TokenPlan;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a token plan such as \"plain\", \"merge:2\" or \"exit:1\"")
            }

            fn visit_str<E: de::Error>(self, text: &str) -> Result<TokenPlan, E> {
                text.parse().map_err(E::custom)
            }

            fn visit_i64<E: de::Error>(self, id: i64) -> Result<TokenPlan, E> {
                let id = i16::try_from(id).map_err(|_| E::custom(PlanError::Unreadable(id.to_string())))?;
                TokenPlan::from_legacy_id(id).map_err(E::custom)
            }

            fn visit_u64<E: de::Error>(self, id: u64) -> Result<TokenPlan, E> {
                let id = i64::try_from(id).map_err(|_| E::custom(PlanError::Unreadable(id.to_string())))?;
                self.visit_i64(id)
            }
        }

        // A binary format (the worker transport's postcard) cannot be asked what comes next.
        if deserializer.is_human_readable() {
            deserializer.deserialize_any(PlanVisitor)
        } else {
            deserializer.deserialize_str(PlanVisitor)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EVERY_KIND: [TokenPlan; 6] = [
        TokenPlan::Plain,
        TokenPlan::Merge(3),
        TokenPlan::Exit(4),
        TokenPlan::Prune { after: 2, percent: 30 },
        TokenPlan::Prompt(2, PromptMode::Additive),
        TokenPlan::Prompt(2, PromptMode::Replace),
    ];

    #[test]
    fn the_readable_form_round_trips_through_text_and_json() {
        let texts = ["plain", "merge:3", "exit:4", "prune:2@30", "prompt:2", "prompt-replace:2"];
        for (plan, text) in EVERY_KIND.into_iter().zip(texts) {
            assert_eq!(plan.to_string(), text);
            assert_eq!(text.parse::<TokenPlan>().unwrap(), plan);
            let json = serde_json::to_string(&plan).unwrap();
            assert_eq!(json, format!("\"{text}\""));
            assert_eq!(serde_json::from_str::<TokenPlan>(&json).unwrap(), plan);
        }
        for bad in
            ["", "merge", "merge:0", "exit:x", "prune:2", "prune:2@0", "prune:2@100", "tome:3", "prompt:-1"]
        {
            assert!(bad.parse::<TokenPlan>().is_err(), "{bad:?} was read");
        }
    }

    #[test]
    fn old_files_numeric_ids_still_read_as_the_same_plans() {
        let ids: [i16; 6] = [0, -3, -104, -1230, 2, 102];
        for (id, plan) in ids.into_iter().zip(EVERY_KIND) {
            assert_eq!(TokenPlan::from_legacy_id(id).unwrap(), plan, "{id}");
            assert_eq!(id.to_string().parse::<TokenPlan>().unwrap(), plan, "{id} as text");
            assert_eq!(serde_json::from_str::<TokenPlan>(&id.to_string()).unwrap(), plan, "{id} in JSON");
        }
        assert_eq!(TokenPlan::from_legacy_id(-99).unwrap(), TokenPlan::Merge(99));
        for bad in [-100, 100, -1200, -1000] {
            assert!(TokenPlan::from_legacy_id(bad).is_err(), "{bad} names no plan");
        }
        let keyed: std::collections::BTreeMap<TokenPlan, u8> =
            serde_json::from_str(r#"{"-101": 1, "exit:2": 2}"#).unwrap();
        assert_eq!(keyed[&TokenPlan::Exit(1)], 1, "an old file's integer key");
    }

    #[test]
    fn exits_and_pruning_are_checked_against_the_depth() {
        assert_eq!(TokenPlan::Exit(5).check_depth(6), Ok(TokenPlan::Exit(5)));
        assert!(TokenPlan::Exit(6).check_depth(6).is_err());
        assert!(TokenPlan::Prune { after: 6, percent: 30 }.check_depth(6).is_err(), "after the last layer");
        assert_eq!(TokenPlan::Merge(40).check_depth(6), Ok(TokenPlan::Merge(40)));
    }
}
