//! The formats' grammars, readings and openings.

use serde_json::json;

use super::*;

fn weather() -> Tool {
    Tool {
        name: "get_weather".into(),
        description: Some("The weather in a city".into()),
        parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
        strict: false,
    }
}

#[test]
fn calls_are_read_in_each_format_and_text_without_one_is_not_a_call() {
    let hermes = "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Oslo\\\"}\"}";
    let (calls, rest) = ToolFormat::Hermes.parse(hermes).expect("two calls");
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0], ToolCall { name: "get_weather".into(), arguments: json!({"city": "Paris"}) });
    assert_eq!(calls[1].arguments, json!({"city": "Oslo"}));
    assert_eq!(rest, "Let me look.");
    let mistral = "[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}]";
    assert_eq!(ToolFormat::Mistral.parse(mistral).expect("a call").0[0].arguments, json!({"city": "Rome"}));
    let llama = "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Lima\"}}";
    assert_eq!(ToolFormat::Llama3.parse(llama).expect("a call").0[0].name, "get_weather");
    for text in ["It is sunny.", "<tool_call>\n{\"name\": 3}\n</tool_call>", "{\"city\": 1}"] {
        assert!(
            ToolFormat::Hermes.parse(text).is_none() && ToolFormat::Llama3.parse(text).is_none(),
            "{text}"
        );
    }
}

#[test]
fn a_hermes_tag_inside_an_argument_does_not_close_the_call() {
    // A sampled call once wrote the closing tag inside its argument string; an escaped quote
    // before it keeps it inside. A block that is not JSON still closes at its first tag.
    let tagged = "<tool_call>{\"name\": \"note\", \"arguments\": {\"text\": \"a \\\"b</tool_call>\"}}</tool_call> after";
    let (calls, rest) = ToolFormat::Hermes.parse(tagged).expect("one call");
    assert_eq!(calls[0].arguments, json!({"text": "a \"b</tool_call>"}));
    assert_eq!(rest, "after");
    let (calls, rest) = ToolFormat::Hermes
        .parse("<tool_call>not \"json</tool_call> <tool_call>{\"name\": \"f\"}</tool_call>")
        .expect("the second block's call");
    assert_eq!((calls.len(), rest.as_str()), (1, "<tool_call>not \"json"));
}

#[test]
fn a_template_s_format_is_read_from_what_it_writes() {
    assert_eq!(ToolFormat::of_template("{{ '[TOOL_CALLS]' }}"), ToolFormat::Mistral);
    assert_eq!(ToolFormat::of_template("<|start_header_id|>ipython"), ToolFormat::Llama3);
    assert_eq!(ToolFormat::of_template("<tool_call>"), ToolFormat::Hermes);
    assert_eq!(ToolFormat::folded_into("<start_of_turn>user"), ToolFormat::Gemma);
    assert_eq!(ToolFormat::folded_into("<|im_start|>user"), ToolFormat::Hermes);
}

#[test]
fn the_calls_grammar_names_every_tool_in_the_format_s_frame() {
    let GrammarSource::Lark(lark) = ToolFormat::Hermes.grammar(&[weather()], false) else { panic!() };
    assert!(lark.starts_with("start: \"<tool_call>\" \"\\n\" call \"\\n</tool_call>\"\n"), "{lark}");
    assert!(lark.contains(r#""{\"name\":\"get_weather\",\"arguments\":" %json {"#), "{lark}");
    let GrammarSource::Lark(lark) = ToolFormat::Mistral.grammar(&[weather()], true) else { panic!() };
    assert!(lark.contains(r#"("," call)*"#), "{lark}");
}

#[test]
fn a_call_opens_where_its_format_s_marker_starts_and_may_open_where_the_text_is_cut() {
    let cases = [
        (ToolFormat::Hermes, "See <b> then <tool_call>{", Some((13, true))),
        (ToolFormat::Hermes, "See <tool_c", Some((4, false))),
        (ToolFormat::Mistral, "[1] [TOOL_CALLS][", Some((4, true))),
        (ToolFormat::Gemma, "[1, 2] and [get_time(", Some((11, true))),
        (ToolFormat::Gemma, "So: ```tool", Some((4, false))),
        (ToolFormat::Llama3, "  {\"name\"", Some((0, true))),
        (ToolFormat::Llama3, "Sure {\"name\"", None),
        (ToolFormat::Hermes, "Plain text.", None),
    ];
    for (format, text, expected) in cases {
        assert_eq!(format.call_opening(text, 0), expected, "{format:?} {text}");
    }
}
