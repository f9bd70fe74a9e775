//! ChatML, as SmolLM2's GGUF chat template writes it: `<|im_start|>ROLE\nCONTENT<|im_end|>\n`
//! per message, the model's default system message first when the conversation has none,
//! and `<|im_start|>assistant\n` to prompt the reply.

use serde::{Deserialize, Serialize};

/// The system message SmolLM2's template adds when a conversation starts without one.
const DEFAULT_SYSTEM: &str = "You are a helpful AI assistant named SmolLM, trained by Hugging Face";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub role: String,
    pub content: String,
}

impl Message {
    pub fn new(role: &str, content: &str) -> Self {
        Self { role: role.to_string(), content: content.to_string() }
    }
}

/// The prompt text for `messages`, ending where the assistant's reply starts.
pub fn chatml_prompt(messages: &[Message]) -> String {
    let mut text = String::new();
    if messages.first().is_none_or(|m| m.role != "system") {
        text.push_str(&format!("<|im_start|>system\n{DEFAULT_SYSTEM}<|im_end|>\n"));
    }
    for m in messages {
        text.push_str(&format!("<|im_start|>{}\n{}<|im_end|>\n", m.role, m.content));
    }
    text.push_str("<|im_start|>assistant\n");
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_the_default_system_message_and_the_reply_prompt() {
        let text = chatml_prompt(&[Message::new("user", "Hi")]);
        assert_eq!(
            text,
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n\
             <|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        );
        let own = chatml_prompt(&[Message::new("system", "Be brief."), Message::new("user", "Hi")]);
        assert!(own.starts_with("<|im_start|>system\nBe brief.<|im_end|>\n") && !own.contains("SmolLM"));
    }
}
