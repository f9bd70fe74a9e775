//! The prompts an embedding model was trained with (sentence-transformers' `prompts`), put
//! before each text as TEI puts them: the one a call names (`prompt_name`), else the server's
//! default (`--default-prompt-name`), else none. The prompt is part of the text from there on:
//! its tokens count toward the input's length, `/tokenize` shows them, and a text cut from its
//! start (`truncation_direction: "left"`) loses them first, as in TEI. Cohere's routes choose
//! the prompt by `input_type` ([`ServedPrompts::for_input_type`]).

use std::collections::BTreeMap;

use morph_encoder::sentence_config::Prompts;

use crate::api::fields::Text;
use crate::error::CallError;
use crate::infer::EmbedInputs;

/// The prompts a server puts before texts.
#[derive(Debug, Clone, PartialEq)]
pub struct ServedPrompts {
    /// Each prompt's name and text.
    by_name: BTreeMap<String, String>,
    /// The name of the one put before a text whose call names none.
    default: Option<String>,
    /// Whether the model's pooling reads a prompt's tokens (else no prompt is served).
    pooled: bool,
}

/// None, as for a model without prompts.
impl Default for ServedPrompts {
    fn default() -> Self {
        Self { by_name: BTreeMap::new(), default: None, pooled: true }
    }
}

/// Why a model's prompts are not served where its pooling leaves their tokens out.
const PROMPT_NOT_POOLED: &str = "this model's pooling leaves a prompt's tokens out (1_Pooling/config.json: \
     include_prompt false), which Morph does not compute";

impl ServedPrompts {
    /// The model's `prompts` (served where `pooled`: its pooling reads every token), with
    /// `default` (a name among them) put before every text whose call names none; the error
    /// says which names there are.
    pub fn new(prompts: Prompts, default: Option<String>, pooled: bool) -> Result<Self, String> {
        if let Some(name) = &default {
            if !prompts.prompts.contains_key(name) {
                return Err(format!("--default-prompt-name {name}: {}", unknown(name, &prompts.prompts)));
            }
            if !pooled {
                return Err(format!("--default-prompt-name {name}: {PROMPT_NOT_POOLED}"));
            }
        }
        if let (None, Some(name), true) = (&default, &prompts.default_prompt_name, pooled) {
            tracing::info!(
                "the model's sentence-transformers config names {name:?} its default prompt: it is put \
                 before a text only when a call names it (prompt_name) or with --default-prompt-name \
                 {name}, as TEI does"
            );
        }
        Ok(Self { by_name: prompts.prompts, default, pooled })
    }

    /// The prompts' names, in order.
    pub fn names(&self) -> Vec<&str> {
        self.by_name.keys().map(String::as_str).collect()
    }

    /// The names a call may give: none where the model's pooling leaves a prompt's tokens out.
    pub fn served_names(&self) -> Vec<&str> {
        if self.pooled { self.names() } else { Vec::new() }
    }

    /// The name of the prompt put before a text whose call names none.
    pub fn default_name(&self) -> Option<&str> {
        self.default.as_deref()
    }

    /// `texts` with the default prompt before each (a call that can name none).
    pub(crate) fn by_default(&self, texts: Vec<String>) -> Vec<String> {
        match self.default.as_ref().and_then(|name| self.by_name.get(name)) {
            Some(prompt) => prefixed(prompt, texts),
            None => texts,
        }
    }

    /// `texts` with the prompt Cohere's `input_type` stands for before each: the model's prompt
    /// of that name (nomic's are named so), else of a name sentence-transformers configs give it
    /// ([`INPUT_TYPE_PROMPTS`]), else none (a model with a query prompt only, as BGE, embeds
    /// documents bare); without an `input_type`, the default.
    pub(crate) fn for_input_type(&self, input_type: Option<&str>, texts: Vec<String>) -> Vec<String> {
        let Some(kind) = input_type else { return self.by_default(texts) };
        let aliases = INPUT_TYPE_PROMPTS.iter().filter(|(alias, _)| *alias == kind);
        let mut names = std::iter::once(kind).chain(aliases.flat_map(|(_, names)| names.iter().copied()));
        match names.find_map(|name| self.by_name.get(name)).filter(|_| self.pooled) {
            Some(prompt) => prefixed(prompt, texts),
            None => texts,
        }
    }

    /// `texts` with the prompt `named` (at `field`), or the default, before each.
    pub(crate) fn before_texts(
        &self,
        field: &str,
        named: Option<Text>,
        texts: Vec<String>,
    ) -> Result<Vec<String>, CallError> {
        match named {
            Some(Text(name)) => Ok(prefixed(self.named(field, &name)?, texts)),
            None => Ok(self.by_default(texts)),
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
        match inputs {
            EmbedInputs::Texts(texts) => Ok(EmbedInputs::Texts(self.before_texts(field, named, texts)?)),
            EmbedInputs::Tokens(_) if named.is_some() => Err(CallError::validation(
                field,
                "token ids are embedded as given: send text to have a prompt put before it",
            )),
            other => Ok(other),
        }
    }

    /// The text of the prompt a call names at `field`.
    fn named(&self, field: &str, name: &str) -> Result<&str, CallError> {
        match (self.by_name.get(name), self.pooled) {
            (None, _) => Err(CallError::validation(field, unknown(name, &self.by_name))),
            (Some(_), false) => Err(CallError::validation(field, PROMPT_NOT_POOLED)),
            (Some(prompt), true) => Ok(prompt),
        }
    }
}

/// The names sentence-transformers configs give the prompt of Cohere's input types: E5's and
/// mixedbread's `query`/`passage`, nomic's and BGE's `query`/`document`, `corpus` in some.
const INPUT_TYPE_PROMPTS: [(&str, &[&str]); 2] =
    [("search_query", &["query"]), ("search_document", &["document", "passage", "corpus"])];

fn prefixed(prompt: &str, texts: Vec<String>) -> Vec<String> {
    texts.into_iter().map(|text| format!("{prompt}{text}")).collect()
}

/// Why `name` is not a prompt of `prompts`.
fn unknown(name: &str, prompts: &BTreeMap<String, String>) -> String {
    match prompts.is_empty() {
        true => format!(
            "{name:?}: this model has no prompts (an embedding model's config_sentence_transformers.json \
             names them)"
        ),
        false => {
            let names: Vec<&str> = prompts.keys().map(String::as_str).collect();
            format!("{name:?} is not one of the model's prompts: {}", names.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn served(config: &str, default: Option<&str>, pooled: bool) -> ServedPrompts {
        let prompts = serde_json::from_str(config).expect("prompts");
        ServedPrompts::new(prompts, default.map(str::to_string), pooled).expect("served")
    }

    /// Cohere's `input_type` puts the prompt of its name, else of its usual name, else none.
    #[test]
    fn an_input_type_chooses_its_prompt_by_name_or_by_its_usual_name() {
        let texts = || vec!["a".to_string()];
        let e5 = served(r#"{"prompts": {"query": "query: ", "passage": "passage: "}}"#, None, true);
        assert_eq!(e5.for_input_type(Some("search_query"), texts()), ["query: a"]);
        assert_eq!(e5.for_input_type(Some("search_document"), texts()), ["passage: a"]);
        assert_eq!(e5.for_input_type(Some("clustering"), texts()), ["a"], "no prompt of it, no default");
        assert_eq!(e5.for_input_type(None, texts()), ["a"]);
        let nomic = r#"{"prompts": {"search_query": "search_query: ", "query": "q: ", "clustering": "clustering: "}}"#;
        let nomic = served(nomic, Some("query"), true);
        assert_eq!(
            nomic.for_input_type(Some("search_query"), texts()),
            ["search_query: a"],
            "its own name first"
        );
        assert_eq!(nomic.for_input_type(Some("clustering"), texts()), ["clustering: a"]);
        assert_eq!(nomic.for_input_type(Some("search_document"), texts()), ["a"], "none, not the default");
        assert_eq!(nomic.for_input_type(None, texts()), ["q: a"], "no input_type: the default");
        let unpooled = served(r#"{"prompts": {"query": "query: "}}"#, None, false);
        assert_eq!(
            unpooled.for_input_type(Some("search_query"), texts()),
            ["a"],
            "its pooling leaves prompts out"
        );
    }
}
