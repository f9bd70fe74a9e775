"""The clients an application uses, against one several-model server: the openai SDK and
LangChain's OpenAI integration embed and chat (the `model` each names chooses the model), and
Cohere's SDK reranks. Every check asserts an answer's content.

usage: app_clients.py URL EMBED_ALIAS RERANKER CHAT_MODEL
"""
import sys

import cohere
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

print("all client checks passed")
