//! The JSON types a request field may take, read so that a value of the wrong type is refused
//! with what the field must be (`normalize: must be true or false`), and an element of an array
//! by its index (`inputs[1]: must be a string`). [`parse`] puts the field's path in front.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeOwned, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::error::ApiError;

/// The body as a request type: malformed JSON is a 400, a body that is not an object or a field
/// of the wrong type a 422 naming the field.
pub fn parse<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    let value: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| ApiError::MalformedJson(e.to_string()))?;
    if !value.is_object() {
        return Err(ApiError::validation("body", "must be a JSON object"));
    }
    serde_path_to_error::deserialize(value).map_err(|e| {
        let field = e.path().to_string();
        ApiError::validation(
            if field == "." { "body".to_string() } else { field },
            e.into_inner().to_string(),
        )
    })
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

/// A visitor whose refusals say "must be {MUST}".
trait Must {
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

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Texts, A::Error> {
        let mut texts = Vec::new();
        while let Some(Text(text)) = seq.next_element()? {
            texts.push(text);
        }
        Ok(Texts::Many(texts))
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

/// One chat message as sent: each part checked when the messages are validated.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ChatMessage {
    pub role: Option<Text>,
    pub content: Option<Text>,
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

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Messages, A::Error> {
        let mut messages = Vec::new();
        while let Some(message) = seq.next_element()? {
            messages.push(message);
        }
        Ok(Messages(messages))
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
            Some(Messages(vec![ChatMessage { role: Some(Text("user".into())), content: None }]))
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
        assert!(matches!(parse::<Body>(b"{"), Err(ApiError::MalformedJson(_))));
    }
}
