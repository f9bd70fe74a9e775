//! The prompts an embedding model was trained with (sentence-transformers' `prompts`), put
//! before each text as TEI puts them: the one a call names (`prompt_name`), else the server's
//! default (`--default-prompt-name`), else none. The prompt's tokens count toward the input's
//! length, and a text cut to fit is cut at its end, the prompt kept.

use std::collections::BTreeMap;

use morph_encoder::sentence_config::Prompts;

use crate::api::fields::Text;
use crate::error::CallError;
use crate::infer::EmbedInputs;

/// The prompts a server puts before texts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServedPrompts {
    /// Each prompt's name and text.
    by_name: BTreeMap<String, String>,
    /// The name of the one put before a text whose call names none.
    default: Option<String>,
}

impl ServedPrompts {
    /// The model's `prompts`, with `default` (a name among them) put before every text whose
    /// call names none; the error says which names there are.
    pub fn new(prompts: Prompts, default: Option<String>) -> Result<Self, String> {
        if let Some(name) = &default
            && !prompts.prompts.contains_key(name)
        {
            return Err(format!("--default-prompt-name {name}: {}", unknown(name, &prompts.prompts)));
        }
        if let (None, Some(name)) = (&default, &prompts.default_prompt_name) {
            tracing::info!(
                "the model's sentence-transformers config names {name:?} its default prompt: it is put \
                 before a text only when a call names it (prompt_name) or with --default-prompt-name \
                 {name}, as TEI does"
            );
        }
        Ok(Self { by_name: prompts.prompts, default })
    }

    /// The prompts' names, in order.
    pub fn names(&self) -> Vec<&str> {
        self.by_name.keys().map(String::as_str).collect()
    }

    /// The name of the prompt put before a text whose call names none.
    pub fn default_name(&self) -> Option<&str> {
        self.default.as_deref()
    }

    /// `texts` with the default prompt before each (a call that can name none).
    pub(crate) fn by_default(&self, texts: Vec<String>) -> Vec<String> {
        match &self.default {
            Some(name) => prefixed(&self.by_name[name], texts),
            None => texts,
        }
    }

    /// `inputs` with the prompt `named` (at `field`), or the default, before each text. Token
    /// ids are embedded as given: a prompt named for them is refused, the default left out.
    pub(crate) fn apply(
        &self,
        field: &str,
        named: Option<Text>,
        inputs: EmbedInputs,
    ) -> Result<EmbedInputs, CallError> {
        let (prompt, named) = match (named, &self.default) {
            (Some(Text(name)), _) => match self.by_name.get(&name) {
                Some(prompt) => (prompt, true),
                None => return Err(CallError::validation(field, unknown(&name, &self.by_name))),
            },
            (None, Some(default)) => (&self.by_name[default], false),
            (None, None) => return Ok(inputs),
        };
        match inputs {
            EmbedInputs::Texts(texts) => Ok(EmbedInputs::Texts(prefixed(prompt, texts))),
            EmbedInputs::Tokens(_) if named => Err(CallError::validation(
                field,
                "token ids are embedded as given: send text to have a prompt put before it",
            )),
            other => Ok(other),
        }
    }
}

fn prefixed(prompt: &str, texts: Vec<String>) -> Vec<String> {
    texts.into_iter().map(|text| format!("{prompt}{text}")).collect()
}

/// Why `name` is not a prompt of `prompts`.
fn unknown(name: &str, prompts: &BTreeMap<String, String>) -> String {
    match prompts.is_empty() {
        true => {
            format!("{name:?}: this model has no prompts (its config_sentence_transformers.json names none)")
        }
        false => {
            let names: Vec<&str> = prompts.keys().map(String::as_str).collect();
            format!("{name:?} is not one of the model's prompts: {}", names.join(", "))
        }
    }
}
