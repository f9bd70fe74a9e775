//! The JSON types a request field may take, read so that a value of the wrong type is refused
//! with what the field must be (`normalize: must be true or false`), and an element of an array
//! by its index (`inputs[1]: must be a string`). [`parse`] puts the field's path in front.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeOwned, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::error::CallError;

/// The body as a request type: malformed JSON is a 400, a body that is not an object or a field
/// of the wrong type a 422 naming the field, and so is a field the route does not honour (the
/// request types deny unknown fields: nothing sent is silently ignored).
pub fn parse<T: DeserializeOwned>(body: &[u8]) -> Result<T, CallError> {
    let value: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| CallError::MalformedJson(e.to_string()))?;
    if !value.is_object() {
        return Err(CallError::validation("body", "must be a JSON object"));
    }
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let message = e.into_inner().to_string();
        match unknown_field(&message) {
            // The path ends at the unknown field itself.
            Some((name, expected)) => {
                let field = if path == "." { name.to_string() } else { path };
                CallError::validation(field, format!("is not supported by this server ({expected})"))
            }
            None => CallError::validation(if path == "." { "body".to_string() } else { path }, message),
        }
    })
}

/// The field's name and the fields expected, from serde's "unknown field `x`, expected …".
fn unknown_field(message: &str) -> Option<(&str, &str)> {
    let rest = message.strip_prefix("unknown field `")?;
    let (name, expected) = rest.split_once('`')?;
    Some((name, expected.trim_start_matches(", ")))
}

/// Visitor methods that refuse the JSON types a field does not take, saying what it must be.
macro_rules! refuse {
    ($($kind:ident),* $(,)?) => {$( refuse!(@one $kind); )*};
    (@one bool) => { refuse!(@scalar visit_bool: bool); };
    (@one str) => { refuse!(@scalar visit_str: &str); };
    (@one number) => {
        refuse!(@scalar visit_i64: i64);
        refuse!(@scalar visit_u64: u64);
        refuse!(@scalar visit_f64: f64);
    };
    (@one null) => {
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Err(E::custom(format_args!("must be {}", Self::MUST)))
        }
    };
    (@one array) => {
        fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<Self::Value, A::Error> {
            Err(de::Error::custom(format_args!("must be {}", Self::MUST)))
        }
    };
    (@one object) => {
        fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<Self::Value, A::Error> {
            Err(de::Error::custom(format_args!("must be {}", Self::MUST)))
        }
    };
    (@scalar $method:ident: $ty:ty) => {
        fn $method<E: de::Error>(self, _: $ty) -> Result<Self::Value, E> {
            Err(E::custom(format_args!("must be {}", Self::MUST)))
        }
    };
}

pub(crate) use refuse;

/// A visitor whose refusals say "must be {MUST}".
pub(crate) trait Must {
    const MUST: &'static str;
}

/// A string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Text(pub String);

struct TextVisitor;

impl Must for TextVisitor {
    const MUST: &'static str = "a string";
}

impl<'de> Visitor<'de> for TextVisitor {
    type Value = Text;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(Self::MUST)
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Text, E> {
        Ok(Text(text.to_string()))
    }

    refuse!(bool, number, null, array, object);
}

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(TextVisitor)
    }
}

/// A string or an array of strings (`input`, `inputs`, `prompt`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Texts {
    One(String),
    Many(Vec<String>),
}

struct TextsVisitor;

impl Must for TextsVisitor {
    const MUST: &'static str = "a string or an array of strings";
}

impl<'de> Visitor<'de> for TextsVisitor {
    type Value = Texts;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(Self::MUST)
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Texts, E> {
        Ok(Texts::One(text.to_string()))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Texts, A::Error> {
        Ok(Texts::Many(collect::<Text, A>(seq)?.into_iter().map(|Text(t)| t).collect()))
    }

    refuse!(bool, number, null, object);
}

impl<'de> Deserialize<'de> for Texts {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(TextsVisitor)
    }
}

/// true or false.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flag(pub bool);

struct FlagVisitor;

impl Must for FlagVisitor {
    const MUST: &'static str = "true or false";
}

impl<'de> Visitor<'de> for FlagVisitor {
    type Value = Flag;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(Self::MUST)
    }

    fn visit_bool<E: de::Error>(self, b: bool) -> Result<Flag, E> {
        Ok(Flag(b))
    }

    refuse!(str, number, null, array, object);
}

impl<'de> Deserialize<'de> for Flag {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(FlagVisitor)
    }
}

/// A number.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Number(pub f64);

struct NumberVisitor;

impl Must for NumberVisitor {
    const MUST: &'static str = "a number";
}

impl<'de> Visitor<'de> for NumberVisitor {
    type Value = Number;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(Self::MUST)
    }

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<Number, E> {
        Ok(Number(n as f64))
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<Number, E> {
        Ok(Number(n as f64))
    }

    fn visit_f64<E: de::Error>(self, n: f64) -> Result<Number, E> {
        Ok(Number(n))
    }

    refuse!(str, bool, null, array, object);
}

impl<'de> Deserialize<'de> for Number {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(NumberVisitor)
    }
}

/// A token id of the served model's vocabulary (checked against it later).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenId(pub u32);

struct TokenIdVisitor;

impl Must for TokenIdVisitor {
    const MUST: &'static str = "a token id (an integer from 0)";
}

impl<'de> Visitor<'de> for TokenIdVisitor {
    type Value = TokenId;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(Self::MUST)
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<TokenId, E> {
        u32::try_from(n).map(TokenId).map_err(|_| E::custom(format_args!("must be {}", Self::MUST)))
    }

    /// A whole number written with a fraction (`7.0`) is an integer to JSON Schema, so it is one
    /// here too.
    fn visit_f64<E: de::Error>(self, n: f64) -> Result<TokenId, E> {
        match n.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(&n) {
            true => Ok(TokenId(n as u32)),
            false => Err(E::custom(format_args!("must be {}", Self::MUST))),
        }
    }

    refuse!(str, bool, null, array, object);
    refuse!(@scalar visit_i64: i64);
}

impl<'de> Deserialize<'de> for TokenId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(TokenIdVisitor)
    }
}

/// What an embedding call embeds (`input`, `inputs`), or what a completion continues (`prompt`):
/// text, as [`Texts`], or token ids of the served model's tokenizer — one array of ids, or an
/// array of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inputs {
    Texts(Texts),
    /// Token ids; `one` when a single array of ids was sent.
    Tokens {
        ids: Vec<Vec<u32>>,
        one: bool,
    },
}

/// An array's first element, which says what the rest must be.
enum First {
    Text(String),
    Id(u32),
    Ids(Vec<u32>),
}

struct FirstVisitor;

impl Must for FirstVisitor {
    const MUST: &'static str = "a string, a token id or an array of token ids";
}

impl<'de> Visitor<'de> for FirstVisitor {
    type Value = First;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(Self::MUST)
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<First, E> {
        Ok(First::Text(text.to_string()))
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<First, E> {
        TokenIdVisitor.visit_u64(n).map(|TokenId(id)| First::Id(id))
    }

    fn visit_f64<E: de::Error>(self, n: f64) -> Result<First, E> {
        TokenIdVisitor.visit_f64(n).map(|TokenId(id)| First::Id(id))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<First, A::Error> {
        Ok(First::Ids(collect::<TokenId, A>(seq)?.into_iter().map(|TokenId(id)| id).collect()))
    }

    refuse!(bool, null, object);
    refuse!(@scalar visit_i64: i64);
}

impl<'de> Deserialize<'de> for First {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(FirstVisitor)
    }
}

/// The rest of a sequence's elements, each read as a `T`.
pub(super) fn collect<'de, T: Deserialize<'de>, A: SeqAccess<'de>>(mut seq: A) -> Result<Vec<T>, A::Error> {
    let mut out = Vec::new();
    while let Some(item) = seq.next_element()? {
        out.push(item);
    }
    Ok(out)
}

struct InputsVisitor;

impl Must for InputsVisitor {
    const MUST: &'static str =
        "a string, an array of strings, an array of token ids or an array of arrays of token ids";
}

impl<'de> Visitor<'de> for InputsVisitor {
    type Value = Inputs;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(Self::MUST)
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Inputs, E> {
        Ok(Inputs::Texts(Texts::One(text.to_string())))
    }

    /// The first element says what the array holds; a later one of another kind is refused at
    /// its index with what it must be.
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Inputs, A::Error> {
        Ok(match seq.next_element::<First>()? {
            None => Inputs::Texts(Texts::Many(Vec::new())),
            Some(First::Text(text)) => {
                let mut texts = vec![text];
                texts.extend(collect::<Text, A>(seq)?.into_iter().map(|Text(t)| t));
                Inputs::Texts(Texts::Many(texts))
            }
            Some(First::Id(id)) => {
                let mut ids = vec![id];
                ids.extend(collect::<TokenId, A>(seq)?.into_iter().map(|TokenId(id)| id));
                Inputs::Tokens { ids: vec![ids], one: true }
            }
            Some(First::Ids(first)) => {
                let mut ids = vec![first];
                ids.extend(
                    collect::<Vec<TokenId>, A>(seq)?
                        .into_iter()
                        .map(|s| s.into_iter().map(|TokenId(id)| id).collect()),
                );
                Inputs::Tokens { ids, one: false }
            }
        })
    }

    refuse!(bool, number, null, object);
}

impl<'de> Deserialize<'de> for Inputs {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(InputsVisitor)
    }
}

/// A chat message's `content`: a string, or an array of parts (`{"type": "text", "text"}`; a
/// part of any other type is refused when the messages are validated).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content {
    Text(String),
    Parts(Vec<serde_json::Value>),
}

struct ContentVisitor;

impl Must for ContentVisitor {
    const MUST: &'static str = "a string or an array of content parts";
}

impl<'de> Visitor<'de> for ContentVisitor {
    type Value = Content;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(Self::MUST)
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Content, E> {
        Ok(Content::Text(text.to_string()))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Content, A::Error> {
        collect(seq).map(Content::Parts)
    }

    refuse!(bool, number, null, object);
}

impl<'de> Deserialize<'de> for Content {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ContentVisitor)
    }
}

/// Roles a chat message may have (`developer` is OpenAI's newer name for `system`).
pub const ROLES: [&str; 5] = ["system", "developer", "user", "assistant", "tool"];

/// One chat message as sent: each part checked when the messages are validated.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChatMessage {
    pub role: Option<Text>,
    pub content: Option<Content>,
    /// An assistant turn's calls, as a chat answer gave them.
    #[serde(default)]
    pub tool_calls: Option<serde_json::Value>,
    /// A `tool` turn: the call it answers.
    #[serde(default)]
    pub tool_call_id: Option<Text>,
}

/// `messages`: an array of `{role, content}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Messages(pub Vec<ChatMessage>);

struct MessagesVisitor;

impl Must for MessagesVisitor {
    const MUST: &'static str = "an array of {role, content}";
}

impl<'de> Visitor<'de> for MessagesVisitor {
    type Value = Messages;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(Self::MUST)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Messages, A::Error> {
        collect(seq).map(Messages)
    }

    refuse!(str, bool, number, null, object);
}

impl<'de> Deserialize<'de> for Messages {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(MessagesVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    struct Body {
        inputs: Option<Texts>,
        normalize: Option<Flag>,
        n: Option<Number>,
        messages: Option<Messages>,
    }

    fn error(body: &str) -> String {
        parse::<Body>(body.as_bytes()).unwrap_err().to_string()
    }

    #[test]
    fn a_field_of_the_wrong_type_is_named_with_what_it_must_be() {
        let ok = parse::<Body>(
            br#"{"inputs": ["a", "b"], "normalize": false, "n": 2, "messages": [{"role": "user"}], "extra": 1}"#,
        )
        .unwrap();
        assert_eq!(ok.inputs, Some(Texts::Many(vec!["a".into(), "b".into()])));
        assert_eq!(
            ok.messages,
            Some(Messages(vec![ChatMessage {
                role: Some(Text("user".into())),
                content: None,
                tool_calls: None,
                tool_call_id: None
            }]))
        );
        assert_eq!((ok.normalize, ok.n), (Some(Flag(false)), Some(Number(2.0))));
        assert!(parse::<Body>(br#"{"inputs": null}"#).unwrap().inputs.is_none(), "null is absent");
        assert_eq!(error(r#"{"inputs": 7}"#), "inputs: must be a string or an array of strings");
        assert_eq!(error(r#"{"inputs": ["a", 3]}"#), "inputs[1]: must be a string");
        assert_eq!(error(r#"{"normalize": "yes"}"#), "normalize: must be true or false");
        assert_eq!(error(r#"{"n": "2"}"#), "n: must be a number");
        assert_eq!(error(r#"{"messages": "hi"}"#), "messages: must be an array of {role, content}");
        assert_eq!(error(r#"{"messages": [{"role": 1}]}"#), "messages[0].role: must be a string");
        assert_eq!(error("[1]"), "body: must be a JSON object");
        assert!(matches!(parse::<Body>(b"{"), Err(CallError::MalformedJson(_))));
    }
}
