"""The clients people point at a server, against live Morph servers: the official `openai` SDK
and `langchain-openai`, each answer's content checked (vectors against sentence-transformers'
reference and against each other, stop strings and token limits honoured, seeds repeating).

Run by tests/server/client_sdks.rs: openai_clients.py EMBED_URL EMBED_MODEL GENERATE_URL GENERATE_MODEL ALIAS
Exits non-zero with the failed assertion; prints one line per check.
"""

import base64
import math
import struct
import sys

from langchain_openai import ChatOpenAI, OpenAIEmbeddings
from openai import OpenAI

EMBED_URL, EMBED_MODEL, GENERATE_URL, GENERATE_MODEL, ALIAS = sys.argv[1:6]
KEY = "not-checked"
# all-MiniLM-L6-v2 on "This is an example sentence" in sentence-transformers (first values), and
# the cosine of two sentences about eating (the same figures the Rust tests hold Morph to).
REFERENCE = [0.0677, 0.0635, 0.0487, 0.0793, 0.0374]
EATING = ("A man is eating food.", "A man is eating a piece of bread.", 0.755)
QUESTION = "Count from 1 to 20, separated by commas."


def check(name, ok, detail=""):
    assert ok, f"{name}: {detail}"
    print(f"ok  {name}")


def cosine(a, b):
    dot = sum(x * y for x, y in zip(a, b))
    return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def close(a, b, tol):
    return len(a) == len(b) and max(abs(x - y) for x, y in zip(a, b)) <= tol


def openai_embeddings():
    client = OpenAI(base_url=f"{EMBED_URL}/v1", api_key=KEY)
    check("models.list names the served model", [m.id for m in client.models.list().data] == [EMBED_MODEL])
    # Default arguments: the SDK asks for base64 and decodes it.
    default = client.embeddings.create(model=EMBED_MODEL, input="This is an example sentence")
    vector = default.data[0].embedding
    check("embeddings, default arguments, match the reference", len(vector) == 384 and close(vector[:5], REFERENCE, 1e-3), vector[:5])
    floats = client.embeddings.create(model=EMBED_MODEL, input=list(EATING[:2]), encoding_format="float")
    raw = client.embeddings.create(model=EMBED_MODEL, input=list(EATING[:2]), encoding_format="base64")
    decoded = [list(struct.unpack("<384f", base64.b64decode(d.embedding))) for d in raw.data]
    # JSON carries the shortest decimal that reads back as the same f32.
    as_f32 = [list(struct.unpack("<384f", struct.pack("<384f", *d.embedding))) for d in floats.data]
    check("base64 holds the float vectors bit for bit", decoded == as_f32)
    cos = cosine(*(d.embedding for d in floats.data))
    check("two sentences about eating are as close as the reference says", abs(cos - EATING[2]) < 0.002, cos)
    check("usage counts the tokens", floats.usage.prompt_tokens == floats.usage.total_tokens > 0)
    return client


def langchain_embeddings(client):
    # A server other than OpenAI's takes text, not OpenAI's token ids: LangChain's documented switch.
    texts = [f"Sentence {i}: the {['cat', 'dog', 'bird'][i % 3]} sat on mat number {i}." for i in range(1500)]
    embeddings = OpenAIEmbeddings(model=EMBED_MODEL, base_url=f"{EMBED_URL}/v1", api_key=KEY, check_embedding_ctx_length=False)
    vectors = embeddings.embed_documents(texts)
    check("langchain embed_documents on 1,500 texts (chunks of 1,000)", len(vectors) == 1500 and all(len(v) == 384 for v in vectors))
    for i in (0, 999, 1000, 1499):
        alone = client.embeddings.create(model=EMBED_MODEL, input=texts[i], encoding_format="float").data[0].embedding
        check(f"langchain's vector {i} is the one the text gets alone", close(vectors[i], alone, 1e-5))


def chat(client, **kwargs):
    args = dict(model=GENERATE_MODEL, messages=[{"role": "user", "content": QUESTION}], temperature=0)
    args.update(kwargs)
    return client.chat.completions.create(**args)


def openai_generation():
    client = OpenAI(base_url=f"{GENERATE_URL}/v1", api_key=KEY)
    check("models.list names the served model and its alias", [m.id for m in client.models.list().data] == [GENERATE_MODEL, ALIAS])
    check("models.retrieve finds it", client.models.retrieve(GENERATE_MODEL).id == GENERATE_MODEL)
    check("models.list gives one created time", len({m.created for m in client.models.list().data}) == 1)
    whole = chat(client, max_completion_tokens=40)
    answer = whole.choices[0].message.content
    check("chat answers greedily", whole.choices[0].finish_reason in ("stop", "length") and len(answer) > 10, answer)
    check("a chat completion's id is OpenAI's kind", whole.id.startswith("chatcmpl-"), whole.id)
    aliased = chat(client, model=ALIAS, max_completion_tokens=40)
    check("the alias is served, the answer names the model", aliased.choices[0].message.content == answer and aliased.model == GENERATE_MODEL, aliased.model)
    limited = chat(client, max_completion_tokens=3)
    check("max_completion_tokens caps the answer", limited.usage.completion_tokens == 3 and limited.choices[0].finish_reason == "length", limited.usage)
    stop = answer[len(answer) // 2 : len(answer) // 2 + 2]
    cut = answer[: answer.index(stop)]
    stopped = chat(client, max_completion_tokens=40, stop=[stop])
    check(f"stop {stop!r} cuts the text there", stopped.choices[0].message.content == cut and stopped.choices[0].finish_reason == "stop", stopped.choices[0])
    # The SDK's stream() helper builds the message from the chunks: it needs the role (and an
    # answer cut by the token limit is an error to it, so this one ends at a stop string).
    with client.chat.completions.stream(model=GENERATE_MODEL, messages=[{"role": "user", "content": QUESTION}], temperature=0, max_completion_tokens=40, stop=[stop]) as stream:
        final = stream.get_final_completion()
    message = final.choices[0].message
    check("stream() helper: the role and the whole answer", message.role == "assistant" and message.content == cut, message)
    # Without a token limit the answer runs to the model's end of turn, as OpenAI's do (not to a
    # fixed default, which the helper would take for a cut answer).
    with client.chat.completions.stream(model=GENERATE_MODEL, messages=[{"role": "user", "content": "What is 2 + 2?"}], temperature=0) as stream:
        final = stream.get_final_completion()
    check("stream() helper without max_tokens ends at the end of turn", final.choices[0].finish_reason == "stop" and "4" in final.choices[0].message.content, final.choices[0])
    history = [{"role": "user", "content": QUESTION}, message.model_dump(exclude_none=True), {"role": "user", "content": "Again."}]
    again = client.chat.completions.create(model=GENERATE_MODEL, messages=history, max_completion_tokens=4, temperature=0)
    check("the streamed message sent back as history is taken", again.choices[0].message.content != "", again)
    pieces = list(chat(client, max_completion_tokens=40, stop=stop, stream=True, stream_options={"include_usage": True}))
    streamed = "".join(c.choices[0].delta.content or "" for c in pieces if c.choices)
    check("streamed with stop: the same text, finish_reason stop", streamed == cut and pieces[-2].choices[0].finish_reason == "stop", streamed)
    check("include_usage: a last chunk with the usage and no choices", pieces[-1].choices == [] and pieces[-1].usage.completion_tokens > 0)
    roles = [c.choices[0].delta.role for c in pieces if c.choices]
    check("the first chunk names the role, the others do not", roles[0] == "assistant" and not any(roles[1:]), roles[:3])
    check("every chunk has the call's id and created time", len({(c.id, c.created) for c in pieces}) == 1)
    seeded = [chat(client, max_completion_tokens=12, temperature=1, seed=7).choices[0].message.content for _ in range(2)]
    check("a seed repeats its sample", seeded[0] == seeded[1], seeded)
    two = chat(client, max_completion_tokens=12, temperature=1, seed=7, n=2)
    check("n=2 gives two choices, the first the seed's own", [c.index for c in two.choices] == [0, 1] and two.choices[0].message.content == seeded[0])
    scored = chat(client, max_completion_tokens=8, logprobs=True, top_logprobs=2).choices[0]
    content = scored.logprobs.content
    greedy = all(t.top_logprobs[0].token == t.token and abs(t.top_logprobs[0].logprob - t.logprob) < 1e-6 for t in content)
    check("logprobs: one per token, greedy takes the most likely", len(content) == 8 and greedy and all(t.logprob <= 0 for t in content), content[:2])
    response = client.responses.create(model=GENERATE_MODEL, input=QUESTION, max_output_tokens=40, temperature=0)
    check("responses.create gives the chat's answer, with its usage", response.output_text == answer and response.usage.output_tokens == whole.usage.completion_tokens, response.output_text)
    briefed = client.responses.create(model=ALIAS, instructions="Answer in one word.", input=[{"role": "user", "content": [{"type": "input_text", "text": "Name a colour."}]}], max_output_tokens=8, temperature=0)
    check("responses.create with instructions and input parts", briefed.output_text != "" and briefed.model == GENERATE_MODEL, briefed)
    events = list(client.responses.create(model=GENERATE_MODEL, input=QUESTION, max_output_tokens=40, temperature=0, stream=True))
    kinds = [e.type for e in events]
    order = ["response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"]
    check("a streamed response opens as the API's event sequence", kinds[:4] == order, kinds[:5])
    closing = ["response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed"]
    check("and closes so", kinds[-4:] == closing and [e.sequence_number for e in events] == list(range(len(events))), kinds[-5:])
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    done = events[-1].response
    check("its deltas join to the whole response's text, with its status and usage", deltas == answer and done.output_text == answer and done.status == response.status and done.usage.output_tokens == response.usage.output_tokens, deltas)
    with client.responses.stream(model=GENERATE_MODEL, input=QUESTION, max_output_tokens=40, temperature=0) as stream:
        final = stream.get_final_response()
    check("the SDK's responses.stream() helper builds the same response", final.output_text == answer and final.status == response.status, final.output_text)
    completion = client.completions.create(model=GENERATE_MODEL, prompt="The capital of France is", max_tokens=5, temperature=0)
    check("completions", completion.choices[0].text != "" and completion.usage.completion_tokens <= 5, completion.choices[0])
    # lm-evaluation-harness' loglikelihood call: the prompt echoed and scored, one token drawn.
    scored = client.completions.create(model=GENERATE_MODEL, prompt="The capital of France is", max_tokens=1, temperature=0, logprobs=1, echo=True).choices[0]
    lp = scored.logprobs
    check("echo with logprobs scores the prompt, its first token unscored", scored.text.startswith("The capital of France is") and lp.token_logprobs[0] is None and all(x <= 0 for x in lp.token_logprobs[1:]) and len(lp.tokens) == len(lp.top_logprobs), lp)
    ids = client.completions.create(model=GENERATE_MODEL, prompt=[[504, 3575]], max_tokens=0, logprobs=0, echo=True).choices[0]
    check("a prompt of token ids, only scored", ids.text != "" and len(ids.logprobs.tokens) == 2 and ids.finish_reason == "length", ids)
    return answer, stop, cut


def langchain_chat(answer, stop, cut):
    model = ChatOpenAI(model=GENERATE_MODEL, base_url=f"{GENERATE_URL}/v1", api_key=KEY, temperature=0, max_tokens=40)
    check("langchain invoke gives the SDK's answer", model.invoke(QUESTION).content == answer)
    check("langchain stream joins to it", "".join(c.content for c in model.stream(QUESTION)) == answer)
    check("langchain stop", model.invoke(QUESTION, stop=[stop]).content == cut)


client = openai_embeddings()
langchain_embeddings(client)
langchain_chat(*openai_generation())
print("all client checks passed")
