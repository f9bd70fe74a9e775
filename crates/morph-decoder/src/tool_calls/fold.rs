//! Tools for a chat template that writes none: described in the system turn, earlier calls
//! written into their assistant turns and results into user turns, in the format the model is
//! then asked to call in (Hermes' or Gemma's).

use serde_json::{Value, json};

use super::{HERMES_CLOSE, HERMES_OPEN, Tool, ToolFormat, pythonic};
use crate::chat::Message;

/// The turns of `messages` with `tools` folded in, in `format` (Hermes' or Gemma's): the
/// instructions in the system message (the conversation's own first, if it has one), each
/// earlier call in its assistant turn, the results of one round in one user turn.
pub fn fold_into_turns(format: ToolFormat, messages: &[Message], tools: &[Tool]) -> Vec<Message> {
    let instructions = instructions(format, tools);
    let mut out = Vec::with_capacity(messages.len() + 1);
    match messages.first() {
        Some(first) if first.role == "system" => {
            out.push(Message::new("system", &format!("{}\n\n{instructions}", first.content)));
        }
        _ => out.push(Message::new("system", &instructions)),
    }
    let skip = usize::from(messages.first().is_some_and(|m| m.role == "system"));
    let (result_open, result_close) = result_frame(format);
    for message in &messages[skip..] {
        match message.role.as_str() {
            "tool" => {
                let result = format!("{result_open}\n{}\n{result_close}", message.content);
                match out.last_mut() {
                    // Results of one round go in one user turn.
                    Some(last) if last.role == "user" && last.content.ends_with(result_close) => {
                        last.content = format!("{}\n{result}", last.content);
                    }
                    _ => out.push(Message::new("user", &result)),
                }
            }
            "assistant" if !message.tool_calls.is_empty() => {
                let calls = written_calls(format, &message.tool_calls);
                let text = [message.content.clone(), calls].into_iter().filter(|t| !t.is_empty());
                out.push(Message::new("assistant", &text.collect::<Vec<_>>().join("\n")));
            }
            _ => out.push(Message { tool_calls: Vec::new(), tool_call_id: None, ..message.clone() }),
        }
    }
    out
}

/// What the model is told of the tools and how to call them.
fn instructions(format: ToolFormat, tools: &[Tool]) -> String {
    let listed: Vec<String> = tools.iter().map(|t| t.as_json().to_string()).collect();
    let listed = listed.join("\n");
    match format {
        ToolFormat::Gemma => format!(
            "You can call functions to answer. The functions, as JSON schemas:\n{listed}\n\
             To call them, answer with nothing but a Python list of calls, each with keyword arguments:\n\
             [function_name(argument=\"value\"), other_function(number=1)]"
        ),
        _ => format!(
            "You can call functions to answer. The functions, as JSON schemas:\n<tools>\n{listed}\n</tools>\n\
             To call one, answer with a JSON object of its name and arguments inside <tool_call></tool_call> tags:\n\
             <tool_call>\n{{\"name\": \"function name\", \"arguments\": {{\"argument\": \"value\"}}}}\n</tool_call>"
        ),
    }
}

/// What a tool's result is written between.
fn result_frame(format: ToolFormat) -> (&'static str, &'static str) {
    match format {
        ToolFormat::Gemma => ("```tool_output", "```"),
        _ => ("<tool_response>", "</tool_response>"),
    }
}

/// An assistant turn's `calls` (each `{"function": {"name", "arguments"}}`) as the model writes
/// them.
fn written_calls(format: ToolFormat, calls: &[Value]) -> String {
    let functions = calls.iter().map(|c| (&c["function"]["name"], &c["function"]["arguments"]));
    match format {
        ToolFormat::Gemma => {
            let written: Vec<String> = functions
                .map(|(name, arguments)| pythonic::written(name.as_str().unwrap_or_default(), arguments))
                .collect();
            format!("[{}]", written.join(", "))
        }
        _ => functions
            .map(|(name, arguments)| {
                let call = json!({"name": name, "arguments": arguments});
                format!("{HERMES_OPEN}\n{call}\n{HERMES_CLOSE}")
            })
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn weather() -> Tool {
        Tool {
            name: "get_weather".into(),
            description: Some("The weather in a city".into()),
            parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
            strict: false,
        }
    }

    fn round_trip() -> Vec<Message> {
        let mut call = Message::new("assistant", "");
        call.tool_calls = vec![
            json!({"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}),
        ];
        let mut result = Message::new("tool", "18 C");
        result.tool_call_id = Some("call_0".into());
        vec![Message::new("system", "Be brief."), Message::new("user", "Weather?"), call, result]
    }

    #[test]
    fn a_template_without_tools_gets_them_in_the_system_turn_and_results_in_user_turns() {
        let turns = fold_into_turns(ToolFormat::Hermes, &round_trip(), &[weather()]);
        let roles: Vec<&str> = turns.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(roles, ["system", "user", "assistant", "user"]);
        assert!(
            turns[0].content.starts_with("Be brief.\n\n") && turns[0].content.contains("\"get_weather\"")
        );
        assert_eq!(
            turns[2].content,
            "<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}\n</tool_call>"
        );
        assert_eq!(turns[3].content, "<tool_response>\n18 C\n</tool_response>");
    }

    #[test]
    fn gemma_s_turns_get_python_calls_and_tool_output_blocks() {
        let turns = fold_into_turns(ToolFormat::Gemma, &round_trip(), &[weather()]);
        assert!(turns[0].content.contains("Python list of calls"), "{}", turns[0].content);
        assert_eq!(turns[2].content, "[get_weather(city=\"Paris\")]");
        assert_eq!(turns[3].content, "```tool_output\n18 C\n```");
    }
}
