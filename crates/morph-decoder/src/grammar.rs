//! Constrained decoding: a JSON schema or a grammar compiled by llguidance (the grammar engine
//! llama.cpp and vLLM use) over a GGUF's own vocabulary, and each generation's matcher, which
//! lets through only the tokens that can continue a text the grammar accepts, and the
//! end-of-generation token once the text is complete.

use std::sync::Arc;

use llguidance::api::TopLevelGrammar;
use llguidance::toktrie::{SimpleVob, TokEnv};
use llguidance::{Matcher, ParserFactory, TokenParser};

/// What a generation's text must match.
#[derive(Debug, Clone, PartialEq)]
pub enum GrammarSource {
    /// A JSON schema: the text is one JSON value valid against it, written compactly, its
    /// objects closed and numbers bounded ([`close_objects`]). A keyword llguidance does not
    /// implement is refused by name (never ignored).
    JsonSchema(serde_json::Value),
    /// A grammar in llguidance's Lark syntax, where `%json {…}` stands for a value of a schema.
    Lark(String),
}

/// How every schema's JSON is written: compact, with no optional whitespace (a model free to
/// write any amount of whitespace can write it forever).
const JSON_LAYOUT: &str = "x-guidance";

impl GrammarSource {
    /// `schema` with Morph's layout options set, for a `%json` inside a Lark grammar.
    pub fn json_in_lark(schema: &serde_json::Value) -> String {
        with_layout(schema.clone()).to_string()
    }

    fn top_level(&self) -> TopLevelGrammar {
        match self {
            Self::JsonSchema(schema) => TopLevelGrammar::from_json_schema(with_layout(schema.clone())),
            Self::Lark(lark) => TopLevelGrammar::from_lark(lark.clone()),
        }
    }
}

fn with_layout(mut schema: serde_json::Value) -> serde_json::Value {
    close_objects(&mut schema);
    if let Some(object) = schema.as_object_mut() {
        object.insert(JSON_LAYOUT.into(), serde_json::json!({"whitespace_flexible": false}));
    }
    schema
}

/// The largest integer every JSON parser reads exactly (JavaScript's `Number.MAX_SAFE_INTEGER`).
const SAFE_INTEGER: i64 = (1 << 53) - 1;

/// The most digits after the point of a number whose schema sets no `multipleOf` of its own
/// (llguidance counts a `multipleOf`'s digits in `u32`, so it may be at most 8).
const FRACTION_DIGITS: i32 = 6;

/// The schema narrowed to values a model can finish writing, every one of them still valid
/// against it: objects with `properties` and no `additionalProperties` get none (JSON Schema
/// allows any other property there, and a small model adds properties forever; xgrammar and
/// OpenAI's strict mode read such schemas the same way), and numbers are bounded
/// ([`bound_number`]).
/// Walks only the places that hold schemas, never `const`, `enum` or `default` values.
fn close_objects(schema: &mut serde_json::Value) {
    let Some(object) = schema.as_object_mut() else { return };
    if object.contains_key("properties") && !object.contains_key("additionalProperties") {
        object.insert("additionalProperties".into(), serde_json::Value::Bool(false));
    }
    let enumerated = object.contains_key("enum") || object.contains_key("const");
    if types(object).any(|t| t == "integer" || t == "number") && !enumerated {
        bound_number(object);
    }
    for (key, value) in object.iter_mut() {
        match key.as_str() {
            "properties" | "patternProperties" | "$defs" | "definitions" | "dependentSchemas" => {
                value.as_object_mut().into_iter().flat_map(|m| m.values_mut()).for_each(close_objects);
            }
            "anyOf" | "oneOf" | "allOf" | "prefixItems" => {
                value.as_array_mut().into_iter().flatten().for_each(close_objects);
            }
            "items" | "additionalProperties" | "not" | "contains" | "propertyNames" => close_objects(value),
            _ => {}
        }
    }
}

/// The names in a schema's `type`, a single name or a list of them.
fn types(object: &serde_json::Map<String, serde_json::Value>) -> impl Iterator<Item = &str> {
    let single = object.get("type").and_then(|t| t.as_str());
    let listed =
        object.get("type").and_then(|t| t.as_array()).into_iter().flatten().filter_map(|t| t.as_str());
    single.into_iter().chain(listed)
}

/// A number that is not one of listed values (`enum`, `const`) and has no bounds gets the range
/// of integers every JSON parser reads exactly, ±(2^53 − 1), and one without a `multipleOf`
/// gets at most [`FRACTION_DIGITS`] decimals where its range holds such numbers: without both
/// a model can write digits forever.
fn bound_number(object: &mut serde_json::Map<String, serde_json::Value>) {
    let bound = |object: &serde_json::Map<String, serde_json::Value>, inclusive: &str, exclusive: &str| {
        object.get(inclusive).or_else(|| object.get(exclusive)).and_then(|b| b.as_f64())
    };
    if !object.contains_key("minimum") && !object.contains_key("exclusiveMinimum") {
        object.insert("minimum".into(), (-SAFE_INTEGER).into());
    }
    if !object.contains_key("maximum") && !object.contains_key("exclusiveMaximum") {
        object.insert("maximum".into(), SAFE_INTEGER.into());
    }
    let step = 10f64.powi(-FRACTION_DIGITS);
    let (low, high) =
        (bound(object, "minimum", "exclusiveMinimum"), bound(object, "maximum", "exclusiveMaximum"));
    // Two steps apart, the open range holds a multiple of the step whatever its bounds.
    let holds_a_step = matches!((low, high), (Some(low), Some(high)) if high - low >= 2.0 * step);
    if types(object).any(|t| t == "number") && !object.contains_key("multipleOf") && holds_a_step {
        object.insert("multipleOf".into(), step.into());
    }
}

/// The parser factory of one vocabulary (built once: it walks every token).
pub struct Grammars {
    factory: ParserFactory,
}

impl std::fmt::Debug for Grammars {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grammars")
            .field("vocabulary", &self.factory.tok_env().tok_trie().vocab_size())
            .finish()
    }
}

impl Grammars {
    pub fn new(env: &TokEnv) -> Result<Self, String> {
        let mut factory = ParserFactory::new_simple(env).map_err(|e| e.to_string())?;
        factory.quiet();
        Ok(Self { factory })
    }

    /// `source` compiled for this vocabulary; the error names what the grammar or schema has
    /// wrong, or the keyword that is not supported.
    pub fn compile(&self, source: GrammarSource) -> Result<Grammar, String> {
        let parser = self.factory.create_parser(source.top_level()).map_err(|e| e.to_string())?;
        Ok(Grammar { source, parser: Arc::new(parser) })
    }
}

/// A grammar compiled for one vocabulary, from which each generation starts its own matcher.
#[derive(Clone)]
pub struct Grammar {
    source: GrammarSource,
    parser: Arc<TokenParser>,
}

impl std::fmt::Debug for Grammar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.source.fmt(f)
    }
}

impl PartialEq for Grammar {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl Grammar {
    /// A matcher at the start of the text.
    pub fn start(&self) -> Constraint {
        Constraint { matcher: Matcher::new(Ok(self.parser.deep_clone())) }
    }
}

/// One generation's place in its grammar.
pub struct Constraint {
    matcher: Matcher,
}

impl std::fmt::Debug for Constraint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Constraint").field("stopped", &self.matcher.is_stopped()).finish()
    }
}

impl Constraint {
    /// The tokens allowed next: those that continue the text within the grammar, or only the
    /// end-of-generation token once it is complete (or should the matcher ever fail).
    pub fn allowed(&mut self) -> SimpleVob {
        match self.matcher.compute_mask_or_eos() {
            Ok(mask) => mask,
            Err(_) => self.end_only(),
        }
    }

    fn end_only(&self) -> SimpleVob {
        match self.matcher.tok_env() {
            Ok(env) => env.tok_trie().eos_token_set(),
            Err(_) => SimpleVob::new(),
        }
    }

    /// Moves past `token` (one [`Self::allowed`] let through).
    pub fn accept(&mut self, token: u32) {
        // A token refused here ends the matcher in its error state, where only the end is allowed.
        let _ = self.matcher.consume_token(token);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn objects_are_closed_where_they_hold_schemas_and_values_are_left_alone() {
        let mut schema = json!({
            "type": "object",
            "properties": {
                "a": {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer", "minimum": 0}}},
                "properties": {"type": "array", "items": {"properties": {}}},
                "open": {"type": "object", "properties": {}, "additionalProperties": true},
                "c": {"const": {"properties": 1}},
            },
            "$defs": {"d": {"anyOf": [{"properties": {}}]}},
        });
        close_objects(&mut schema);
        assert_eq!(schema["additionalProperties"], json!(false));
        assert_eq!(schema["properties"]["a"]["additionalProperties"], json!(false));
        let x = &schema["properties"]["a"]["properties"]["x"];
        assert_eq!((&x["minimum"], &x["maximum"]), (&json!(-SAFE_INTEGER), &json!(SAFE_INTEGER)));
        let y = &schema["properties"]["a"]["properties"]["y"];
        assert_eq!((&y["minimum"], &y["maximum"]), (&json!(0), &json!(SAFE_INTEGER)));
        assert_eq!(schema["properties"]["properties"]["items"]["additionalProperties"], json!(false));
        assert_eq!(schema["properties"]["open"]["additionalProperties"], json!(true));
        assert_eq!(schema["properties"]["c"], json!({"const": {"properties": 1}}));
        assert_eq!(schema["$defs"]["d"]["anyOf"][0]["additionalProperties"], json!(false));
        assert!(schema["properties"].get("additionalProperties").is_none());
    }

    /// Whether a matcher over single bytes lets `text` through, one byte at a time.
    fn writes(schema: serde_json::Value, text: &str) -> bool {
        let grammars = Grammars::new(&toktrie::ApproximateTokEnv::single_byte_env()).expect("a vocabulary");
        let mut constraint = grammars.compile(GrammarSource::JsonSchema(schema)).expect("a schema").start();
        text.bytes().all(|byte| {
            let allowed = constraint.allowed().is_allowed(byte.into());
            constraint.accept(byte.into());
            allowed
        })
    }

    #[test]
    fn numbers_end_within_their_fraction_digits_unless_their_step_says_otherwise() {
        let number = json!({"type": "number"});
        assert!(writes(number.clone(), "-12.345678"));
        assert!(!writes(number, "0.1244061"), "a seventh decimal is refused");
        assert!(!writes(json!({"type": ["number", "null"]}), "0.1244061"), "so in a list of types");
        assert!(writes(json!({"type": "number", "multipleOf": 1e-8}), "0.12345678"));
        assert!(writes(json!({"type": "number", "minimum": 0, "exclusiveMaximum": 1e-7}), "0.00000005"));
        assert!(writes(json!({"type": "integer"}), "9007199254740991"));
        assert!(!writes(json!({"type": "integer"}), "9007199254740992"));
        let listed = json!({"type": "number", "enum": [0.1234567, 1u64 << 60]});
        assert!(
            writes(listed.clone(), "0.1234567") && writes(listed, "1152921504606846976"),
            "listed values stay"
        );
    }
}
