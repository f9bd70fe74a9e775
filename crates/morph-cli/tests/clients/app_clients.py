"""The clients an application uses, against one several-model server: the openai SDK and
LangChain's OpenAI integration embed and chat (the `model` each names chooses the model), and
Cohere's SDK reranks (v1 and v2) and embeds (v1 and v2, by type); LiteLLM reranks through
Cohere's route, embeds and calls a tool through OpenAI's; llama-index's CohereRerank reorders
nodes. Every check asserts an answer's content.

usage: app_clients.py URL EMBED_ALIAS RERANKER CHAT_MODEL
"""
import json
import os
import sys

# LiteLLM reads its model price list from the network unless told to use its own copy.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import cohere
import litellm
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from llama_index.postprocessor.cohere_rerank import CohereRerank
from langchain_openai import ChatOpenAI, OpenAIEmbeddings
from openai import OpenAI

url, embed_alias, reranker, chat_model = sys.argv[1:5]

client = OpenAI(base_url=f"{url}/v1", api_key="unused")
vectors = client.embeddings.create(model=embed_alias, input=["a panda", "a bear"]).data
assert [len(v.embedding) for v in vectors] == [384, 384], vectors
answer = client.chat.completions.create(
    model=chat_model, messages=[{"role": "user", "content": "What is 2 + 2?"}], max_tokens=8, temperature=0
)
assert answer.model == chat_model and answer.choices[0].message.content, answer

embeddings = OpenAIEmbeddings(
    model=embed_alias, base_url=f"{url}/v1", api_key="unused", check_embedding_ctx_length=False
)
assert len(embeddings.embed_query("what is a panda?")) == 384
chat = ChatOpenAI(model=chat_model, base_url=f"{url}/v1", api_key="unused", max_tokens=8, temperature=0)
assert chat.invoke("Say hello.").content

co = cohere.Client(api_key="unused", base_url=url)
documents = ["The giant panda is a bear.", "Paris is in France.", "Bamboo is what pandas eat."]
ranked = co.rerank(model=reranker, query="what is a panda?", documents=documents, top_n=2)
assert len(ranked.results) == 2, ranked
assert all(0 <= r.index < 3 for r in ranked.results), ranked
assert ranked.results[0].relevance_score >= ranked.results[1].relevance_score, ranked

v2 = cohere.ClientV2(api_key="unused", base_url=url)
again = v2.rerank(model=reranker, query="what is a panda?", documents=documents, top_n=2, max_tokens_per_doc=64)
assert [r.index for r in again.results] == [r.index for r in ranked.results], (again, ranked)
assert all(abs(a.relevance_score - b.relevance_score) < 1e-5 for a, b in zip(again.results, ranked.results)), again
cut = v2.rerank(model=reranker, query="what is a panda?", documents=documents, max_tokens_per_doc=1)
assert len(cut.results) == 3 and cut.results[0].relevance_score != ranked.results[0].relevance_score, cut

openai_vectors = [v.embedding for v in client.embeddings.create(model=embed_alias, input=documents, encoding_format="float").data]
by_type = v2.embed(model=embed_alias, texts=documents, input_type="search_document", embedding_types=["float", "int8", "ubinary"])
floats = by_type.embeddings.float_
assert len(floats) == 3 and all(max(abs(a - b) for a, b in zip(f, o)) < 1e-6 for f, o in zip(floats, openai_vectors)), floats[0][:3]
assert all(len(q) == 384 and max(abs(x) for x in q) == 127 for q in by_type.embeddings.int8), by_type.embeddings.int8[0][:5]
assert all(len(b) == 48 for b in by_type.embeddings.ubinary), by_type.embeddings.ubinary[0][:5]
v1 = co.embed(model=embed_alias, texts=documents, input_type="search_query")
assert [list(e) for e in v1.embeddings] == [list(f) for f in floats], v1.response_type

by_litellm = litellm.rerank(model=f"cohere/{reranker}", query="what is a panda?", documents=documents, top_n=2, api_base=url, api_key="unused")
assert [r["index"] for r in by_litellm.results] == [r.index for r in ranked.results], by_litellm
assert [r["document"]["text"] for r in by_litellm.results] == [documents[r.index] for r in ranked.results], by_litellm
litellm_vectors = litellm.embedding(model=f"openai/{embed_alias}", input=documents, api_base=f"{url}/v1", api_key="unused").data
assert all(max(abs(a - b) for a, b in zip(v["embedding"], o)) < 1e-6 for v, o in zip(litellm_vectors, openai_vectors)), litellm_vectors[0]
weather = {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 30}}, "required": ["city"]}}}
called = litellm.completion(model=f"openai/{chat_model}", api_base=f"{url}/v1", api_key="unused", messages=[{"role": "user", "content": "Weather in Paris?"}], tools=[weather], tool_choice="required", max_tokens=60, temperature=0)
calls = called.choices[0].message.tool_calls
assert called.choices[0].finish_reason == "tool_calls" and calls[0].function.name == "get_weather" and isinstance(json.loads(calls[0].function.arguments)["city"], str), called

nodes = [NodeWithScore(node=TextNode(text=d)) for d in documents]
reordered = CohereRerank(model=reranker, api_key="unused", top_n=2, base_url=url).postprocess_nodes(nodes, query_bundle=QueryBundle("what is a panda?"))
assert [n.node.text for n in reordered] == [documents[r.index] for r in ranked.results], reordered
assert all(abs(n.score - r.relevance_score) < 1e-5 for n, r in zip(reordered, ranked.results)), reordered

print("all client checks passed")
