//! Chat prompts by the template a model ships (`tokenizer.chat_template` in its GGUF, Jinja),
//! rendered with minijinja as Hugging Face's `apply_chat_template` renders them: `messages`,
//! `add_generation_prompt`, `bos_token`, `eos_token`, `raise_exception`, and Python's string
//! methods (`.strip()`, `.startswith()`, …), and the `tools` offered, with earlier turns'
//! `tool_calls` and `tool` results, in Hugging Face's shapes.

use minijinja::{Environment, ErrorKind, context};
use serde::{Deserialize, Serialize};

/// The template's name in its environment.
const NAME: &str = "chat";

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub role: String,
    pub content: String,
    /// An assistant turn's calls, each `{"type": "function", "function": {"name", "arguments"}}`
    /// with the arguments as an object (as Hugging Face's templates read them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<serde_json::Value>,
    /// A `tool` turn's answer to this call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl Message {
    pub fn new(role: &str, content: &str) -> Self {
        Self { role: role.to_string(), content: content.to_string(), ..Self::default() }
    }
}

/// Why a conversation has no prompt.
#[derive(Debug, thiserror::Error)]
pub enum ChatError {
    #[error(
        "this model's GGUF has no chat template (tokenizer.chat_template): send a prompt to /v1/completions instead"
    )]
    NoTemplate,
    /// The template refused the conversation (`raise_exception`), or failed on it.
    #[error("the model's chat template refused the messages: {0}")]
    Refused(String),
}

/// A compiled chat template and the special tokens' text it may write.
#[derive(Debug)]
pub struct ChatTemplate {
    env: Environment<'static>,
    bos: String,
    eos: String,
    /// The template's source, for what it knows of tools.
    source: String,
}

impl ChatTemplate {
    /// Compiles `source`; an error says where it does not parse.
    pub fn new(source: String, bos: String, eos: String) -> Result<Self, String> {
        let mut env = Environment::new();
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", |message: String| -> Result<String, minijinja::Error> {
            Err(minijinja::Error::new(ErrorKind::InvalidOperation, message))
        });
        env.add_template_owned(NAME, source.clone()).map_err(|e| e.to_string())?;
        Ok(Self { env, bos, eos, source })
    }

    /// Whether the template writes the `tools` it is given.
    pub fn takes_tools(&self) -> bool {
        self.source.contains("tools")
    }

    /// The template's source.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The prompt text for `messages`, ending where the assistant's reply starts; `tools` (each
    /// `{"type": "function", "function": {…}}`) are the template's to write, where it does.
    pub fn render(
        &self,
        messages: &[Message],
        tools: Option<&[serde_json::Value]>,
    ) -> Result<String, ChatError> {
        let refused = |e: minijinja::Error| {
            ChatError::Refused(e.detail().map_or_else(|| e.to_string(), str::to_string))
        };
        let template = self.env.get_template(NAME).map_err(refused)?;
        template
            .render(context! {
                messages => messages,
                tools => tools,
                add_generation_prompt => true,
                bos_token => &self.bos,
                eos_token => &self.eos,
            })
            .map_err(refused)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SmolLM2's template, as its GGUF carries it.
    const CHATML: &str = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

    fn chatml() -> ChatTemplate {
        ChatTemplate::new(CHATML.into(), "<|im_start|>".into(), "<|im_end|>".into()).expect("compiles")
    }

    #[test]
    fn adds_the_default_system_message_and_the_reply_prompt() {
        let text = chatml().render(&[Message::new("user", "Hi")], None).expect("renders");
        assert_eq!(
            text,
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n\
             <|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        );
        let own = chatml()
            .render(&[Message::new("system", "Be brief."), Message::new("user", "Hi")], None)
            .expect("renders");
        assert!(own.starts_with("<|im_start|>system\nBe brief.<|im_end|>\n") && !own.contains("SmolLM"));
    }

    #[test]
    fn a_template_raising_refuses_the_conversation_with_its_message() {
        let source = "{% if messages[0].role != 'user' %}{{ raise_exception('Conversation must start with a user message') }}{% endif %}{{ bos_token }}{{ messages[0].content.strip() }}";
        let template = ChatTemplate::new(source.into(), "<s>".into(), "</s>".into()).expect("compiles");
        assert_eq!(template.render(&[Message::new("user", "  hi ")], None).expect("renders"), "<s>hi");
        let err = template.render(&[Message::new("assistant", "x")], None).expect_err("refused").to_string();
        assert!(err.contains("Conversation must start with a user message"), "{err}");
    }

    #[test]
    fn a_template_that_does_not_parse_is_an_error_at_load() {
        assert!(ChatTemplate::new("{% for m in messages %}".into(), String::new(), String::new()).is_err());
    }
}
