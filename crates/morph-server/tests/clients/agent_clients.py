"""What agent frameworks send first, against a live Morph decoder: structured outputs and tool
calls through the official `openai` SDK (`chat.completions.parse` with a Pydantic model, a tool
round trip, `tool_choice` required and named, streamed calls; the Responses API's function tools,
`text.format` and `responses.parse`) and LangChain's `bind_tools` and
`with_structured_output`; then 50+ varied JSON schemas, each answer parsed and validated with
`jsonschema` (an implementation independent of the server's grammar engine).

Run by tests/server/structured_outputs.rs: agent_clients.py GENERATE_URL MODEL AT_ONCE [ROUTE] [--tools]
AT_ONCE is how many of the schemas are in flight at once (the server's batch, so the decoder
steps that many grammars together). ROUTE is `chat` (default) or `completions` (a model without a
chat template of its own: the schemas go through /v1/completions); `--tools` adds the tool checks
through chat (the model served with a chat template). Exits non-zero with the failed assertion;
prints one line per check.
"""

import json
import sys
from concurrent.futures import ThreadPoolExecutor

import jsonschema
from openai import OpenAI
from pydantic import BaseModel

URL, MODEL, AT_ONCE = sys.argv[1], sys.argv[2], int(sys.argv[3])
ROUTE = sys.argv[4] if len(sys.argv) > 4 and not sys.argv[4].startswith("--") else "chat"
client = OpenAI(base_url=f"{URL}/v1", api_key="not-checked")


def check(name, ok, detail=""):
    assert ok, f"{name}: {detail}"
    print(f"ok  {name}")


WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 30},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city", "unit"],
            "additionalProperties": False,
        },
    },
}
TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "The local time in a timezone",
        "parameters": {
            "type": "object",
            "properties": {"timezone": {"type": "string", "maxLength": 30}},
            "required": ["timezone"],
        },
    },
}


def valid_call(name, arguments, tools):
    schema = next(t["function"]["parameters"] for t in tools if t["function"]["name"] == name)
    jsonschema.validate(json.loads(arguments), schema)
    return True


class City(BaseModel):
    name: str
    country: str
    population: int
    coastal: bool


def parse_with_pydantic():
    done = client.chat.completions.parse(
        model=MODEL,
        messages=[{"role": "user", "content": "Describe Paris as a city record."}],
        response_format=City,
        max_tokens=200,
        temperature=0,
    )
    city = done.choices[0].message.parsed
    check("chat.completions.parse fills a Pydantic model", isinstance(city, City), done.choices[0].message.content)


def tool_round_trip():
    messages = [{"role": "user", "content": "What is the weather in Paris, in celsius?"}]
    tools = [WEATHER, TIME]
    first = client.chat.completions.create(model=MODEL, messages=messages, tools=tools, tool_choice="required", max_tokens=200, temperature=0)
    choice = first.choices[0]
    calls = choice.message.tool_calls or []
    check("tool_choice required answers with calls", choice.finish_reason == "tool_calls" and len(calls) >= 1, choice)
    check("every call's arguments validate against its tool", all(valid_call(c.function.name, c.function.arguments, tools) for c in calls))
    messages.append(choice.message.model_dump(exclude_none=True))
    for call in calls:
        messages.append({"role": "tool", "tool_call_id": call.id, "content": "18 degrees celsius, sunny"})
    second = client.chat.completions.create(model=MODEL, messages=messages, tools=tools, tool_choice="none", max_tokens=60, temperature=0)
    answer = second.choices[0]
    check("the round trip ends in text", answer.finish_reason in ("stop", "length") and answer.message.content and not answer.message.tool_calls, answer)
    named = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "What time is it in Tokyo?"}],
        tools=tools,
        tool_choice={"type": "function", "function": {"name": "get_time"}},
        parallel_tool_calls=False,
        max_tokens=100,
        temperature=0,
    )
    calls = named.choices[0].message.tool_calls or []
    check("a named tool_choice calls that tool once", [c.function.name for c in calls] == ["get_time"], named)
    stream = client.chat.completions.create(model=MODEL, messages=messages[:1], tools=tools, tool_choice="required", stream=True, max_tokens=200, temperature=0)
    names, arguments, reasons, pieces = {}, {}, [], 0
    for chunk in stream:
        for c in chunk.choices:
            reasons.append(c.finish_reason)
            for d in c.delta.tool_calls or []:
                names[d.index] = names.get(d.index, "") + (d.function.name or "")
                arguments[d.index] = arguments.get(d.index, "") + (d.function.arguments or "")
                pieces += 1
    check("a streamed call carries its name and arguments", names and all(valid_call(names[i], a, tools) for i, a in arguments.items()), (names, arguments))
    check("a required call's arguments stream as they are written", pieces > 2 * len(names), pieces)
    check("a streamed call finishes for tool_calls", "tool_calls" in reasons, reasons)


def auto_stream():
    """A model free to call or write: the stream tells what the whole answer does, its text as it comes."""
    messages = [{"role": "user", "content": "What is the weather in Paris, in celsius? Call a function if one helps."}]
    ask = dict(model=MODEL, messages=messages, tools=[WEATHER, TIME], max_tokens=120, temperature=0)
    whole = client.chat.completions.create(**ask).choices[0]
    content, calls, reasons, text_chunks = "", {}, [], 0
    for chunk in client.chat.completions.create(**ask, stream=True):
        for c in chunk.choices:
            if c.delta.content:
                content += c.delta.content
                text_chunks += 1
            for d in c.delta.tool_calls or []:
                name, arguments = calls.get(d.index, ("", ""))
                calls[d.index] = (name + (d.function.name or ""), arguments + (d.function.arguments or ""))
            if c.finish_reason:
                reasons.append(c.finish_reason)
    whole_calls = [(t.function.name, json.loads(t.function.arguments)) for t in whole.message.tool_calls or []]
    streamed_calls = [(name, json.loads(arguments)) for name, arguments in (calls[k] for k in sorted(calls))]
    check("auto: the stream's calls are the whole answer's", streamed_calls == whole_calls, (streamed_calls, whole))
    check("auto: the stream's text is the whole answer's", content.strip() == (whole.message.content or "").strip(), (content, whole))
    check("auto: one finish reason, the whole answer's", reasons == [whole.finish_reason], (reasons, whole))
    check("auto: text streams as it comes", len(content) < 40 or text_chunks > 1, text_chunks)


def responses_api():
    flat = [{"type": "function", **t["function"]} for t in (WEATHER, TIME)]
    ask = [{"role": "user", "content": "What is the weather in Paris, in celsius?"}]
    first = client.responses.create(model=MODEL, input=ask, tools=flat, tool_choice="required", max_output_tokens=200)
    calls = [item for item in first.output if item.type == "function_call"]
    check("responses: tool_choice required answers with function_call items", calls, first.output)
    for call in calls:
        schema = next(t["parameters"] for t in flat if t["name"] == call.name)
        jsonschema.validate(json.loads(call.arguments), schema)
    check("responses: every call's arguments validate against its tool", True)
    history = ask + [c.model_dump(exclude_none=True) for c in calls]
    history += [{"type": "function_call_output", "call_id": c.call_id, "output": "18 degrees celsius"} for c in calls]
    second = client.responses.create(model=MODEL, input=history, tools=flat, tool_choice="none", max_output_tokens=60)
    check("responses: the round trip ends in text", second.output_text and all(i.type == "message" for i in second.output), second.output)
    parsed = client.responses.parse(model=MODEL, input="Describe Rome as a city record.", text_format=City, max_output_tokens=200, temperature=0)
    check("responses.parse fills a Pydantic model", isinstance(parsed.output_parsed, City), parsed.output_text)
    events = list(client.responses.create(model=MODEL, input=ask, tools=flat, tool_choice="required", stream=True, max_output_tokens=200))
    done = [e for e in events if e.type == "response.function_call_arguments.done"]
    deltas = [e for e in events if e.type == "response.function_call_arguments.delta"]
    streamed = {}
    for e in deltas:
        streamed[e.item_id] = streamed.get(e.item_id, "") + e.delta
    check("responses: a required call's arguments stream in pieces that add up to its arguments", done and len(deltas) > len(done) and all(streamed[e.item_id] == e.arguments and json.loads(e.arguments) is not None for e in done), [e.type for e in events])
    final = [i for i in events[-1].response.output if i.type == "function_call"]
    check("responses: the completed response holds the streamed calls", [(i.id, i.arguments) for i in final] == [(e.item_id, e.arguments) for e in done], final)
    check("responses: the stream ends completed", events[-1].type == "response.completed", events[-1].type)
    free = dict(model=MODEL, input="What is the weather in Paris, in celsius? Call a function if one helps.", tools=flat, max_output_tokens=120, temperature=0)
    whole = client.responses.create(**free)
    with client.responses.stream(**free) as stream:
        texts = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    shape = lambda r: [(i.type, getattr(i, "name", None), json.loads(i.arguments) if i.type == "function_call" else None) for i in r.output]
    check("responses auto: the stream helper's response is the whole answer's", shape(final) == shape(whole) and final.output_text.strip() == whole.output_text.strip(), (final.output, whole.output))
    check("responses auto: text streams as it comes", len("".join(texts)) < 40 or len(texts) > 1, len(texts))


def langchain():
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    @tool
    def multiply(a: int, b: int) -> int:
        """Multiply two integers."""
        return a * b

    llm = ChatOpenAI(base_url=f"{URL}/v1", api_key="not-checked", model=MODEL, max_tokens=120, temperature=0)
    message = llm.bind_tools([multiply], tool_choice="multiply").invoke("What is 6 times 7?")
    calls = message.tool_calls
    check("LangChain bind_tools gets a call with integer arguments", calls and calls[0]["name"] == "multiply" and all(isinstance(calls[0]["args"][k], int) for k in ("a", "b")), message)
    structured = llm.with_structured_output(City, method="json_schema").invoke("Describe Lisbon as a city record.")
    check("LangChain with_structured_output returns the model", isinstance(structured, City), structured)


def schemas():
    """50+ schemas of different shapes: flat, nested, enums, arrays, required and optional fields."""
    text = {"type": "string", "maxLength": 24}
    kinds = [
        {"type": "integer", "minimum": 0, "maximum": 1000},
        {"type": "number"},
        {"type": "boolean"},
        text,
        {"type": "string", "enum": ["red", "green", "blue"]},
        {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3},
        {"type": "array", "items": text, "maxItems": 3},
        {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}}, "required": ["x", "y"]},
        {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{2}$"},
        {"anyOf": [{"type": "integer"}, {"type": "null"}]},
    ]
    fields = ["name", "age", "score", "active", "color", "ids", "tags", "point", "code", "parent"]
    out = []
    for n in range(1, 6):
        for start in range(len(fields)):
            chosen = [(fields[(start + k) % len(fields)], kinds[(start + k) % len(kinds)]) for k in range(n)]
            properties = dict(chosen)
            required = [name for i, (name, _) in enumerate(chosen) if i % 2 == 0 or n < 3]
            schema = {"type": "object", "properties": properties, "required": required}
            if n % 2:
                schema["additionalProperties"] = False
            if n == 5:
                schema = {"type": "object", "properties": {"record": schema, "count": {"type": "integer"}}, "required": ["record"]}
            out.append((f"record_{n}_{start}", schema))
    out.append(("list_of_items", {"type": "array", "items": {"type": "object", "properties": {"id": {"type": "integer"}, "label": text}, "required": ["id", "label"]}, "maxItems": 3}))
    out.append(("choice", {"type": "string", "enum": ["yes", "no", "maybe"]}))
    return out


def one_schema(case):
    """The answer to one schema, or why it fails."""
    name, schema = case
    fmt = {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}
    ask = f"Write a {name.replace('_', ' ')} as JSON."
    if ROUTE == "chat":
        done = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": ask}], response_format=fmt, max_tokens=400, temperature=0.7, seed=len(name))
        text, reason = done.choices[0].message.content, done.choices[0].finish_reason
    else:
        done = client.completions.create(model=MODEL, prompt=f"{ask}\n", extra_body={"response_format": fmt}, max_tokens=400, temperature=0.7, seed=len(name))
        text, reason = done.choices[0].text, done.choices[0].finish_reason
    try:
        jsonschema.validate(json.loads(text), schema)
    except Exception as e:  # the message names the schema and the answer
        return f"{name}: {text!r} ({reason}) does not validate against {schema}: {e}"
    return None


def many_schemas():
    """AT_ONCE schemas in flight at a time."""
    cases = schemas()
    with ThreadPoolExecutor(AT_ONCE) as pool:
        failed = [f for f in pool.map(one_schema, cases) if f]
    check(f"{len(cases)} varied JSON schemas: every answer parses and validates", len(cases) >= 50 and not failed, "\n".join(failed))


if ROUTE == "chat" and "--schemas-only" not in sys.argv:
    parse_with_pydantic()
    tool_round_trip()
    auto_stream()
    responses_api()
    langchain()
elif "--tools" in sys.argv:
    tool_round_trip()
    auto_stream()
many_schemas()
print("all client checks passed")
