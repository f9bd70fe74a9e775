"""Hugging Face's own clients against a live Morph embedding server, as users point them at a
text-embeddings-inference endpoint: `huggingface_hub.InferenceClient` with the server as its
`base_url` and as its `model` (it posts to the root), and LangChain's
`HuggingFaceEndpointEmbeddings(model=URL)`, each answer checked against the vector the server's
`/embed` gives and against sentence-transformers' reference; TEI's `/similarity` against the
vectors' cosines.

Run by tests/server/client_sdks.rs: hf_clients.py EMBED_URL
Exits non-zero with the failed assertion; prints one line per check.
"""

import json
import sys
import urllib.error
import urllib.request

from huggingface_hub import InferenceClient
from langchain_huggingface import HuggingFaceEndpointEmbeddings

URL = sys.argv[1]
TEXT = "This is an example sentence"
# all-MiniLM-L6-v2 on TEXT in sentence-transformers (first values), as openai_clients.py holds.
REFERENCE = [0.0677, 0.0635, 0.0487, 0.0793, 0.0374]


def check(name, ok, detail=""):
    assert ok, f"{name}: {detail}"
    print(f"ok  {name}")


def post(path, body):
    request = urllib.request.Request(URL + path, json.dumps(body).encode(), {"content-type": "application/json"})
    with urllib.request.urlopen(request) as answer:
        return json.load(answer)


embed = post("/embed", {"inputs": TEXT})[0]
check("/embed matches the reference", max(abs(a - b) for a, b in zip(embed[:5], REFERENCE)) < 1e-3, embed[:5])
for name, client in (("base_url", InferenceClient(base_url=URL)), ("model=URL", InferenceClient(model=URL))):
    vector = client.feature_extraction(TEXT)
    check(f"InferenceClient({name}).feature_extraction is /embed's vector", vector.shape == (1, 384) and max(abs(a - b) for a, b in zip(vector[0], embed)) < 1e-6, vector.shape)
langchain = HuggingFaceEndpointEmbeddings(model=URL)
query, documents = langchain.embed_query(TEXT), langchain.embed_documents([TEXT, "another"])
check("langchain HuggingFaceEndpointEmbeddings gives /embed's vectors", len(documents) == 2 and max(abs(a - b) for a, b in zip(query, embed)) < 1e-6 and max(abs(a - b) for a, b in zip(documents[0], embed)) < 1e-6, query[:3])
others = ["This is an example sentence", "Bananas are yellow."]
similar = post("/similarity", {"inputs": {"source_sentence": TEXT, "sentences": others}})
vectors = post("/embed", {"inputs": others})
check("/similarity is the cosine of the unit vectors", len(similar) == 2 and all(abs(s - sum(a * b for a, b in zip(embed, v))) < 1e-5 for s, v in zip(similar, vectors)) and similar[0] > similar[1], similar)
for name, client in (("base_url", InferenceClient(base_url=URL)), ("model=URL", InferenceClient(model=URL))):
    scores = client.sentence_similarity(TEXT, other_sentences=others)
    check(f"InferenceClient({name}).sentence_similarity is /similarity's cosines", len(scores) == 2 and max(abs(a - b) for a, b in zip(scores, similar)) < 1e-6, scores)
check("POST / with a similarity body is /similarity", post("/", {"inputs": {"source_sentence": TEXT, "sentences": others}}) == similar)
with_parameters = post("/similarity", {"inputs": {"source_sentence": TEXT, "sentences": others}, "parameters": {"truncate": True, "truncation_direction": "right", "prompt_name": None}})
check("/similarity takes TEI's parameters", with_parameters == similar, with_parameters)
refused = urllib.request.Request(URL + "/rerank", json.dumps({"query": "q", "texts": ["a"]}).encode(), {"content-type": "application/json"})
try:
    urllib.request.urlopen(refused)
    status, message = 200, ""
except urllib.error.HTTPError as error:
    status, message = error.code, error.read().decode()
check("an embedding server's /rerank is a 404 that names its routes", status == 404 and "use /embed" in message, message)
check("POST /invocations is /embed", post("/invocations", {"inputs": TEXT})[0] == embed)
unversioned = post("/embeddings", {"input": TEXT})["data"][0]["embedding"]
check("POST /embeddings is /v1/embeddings", unversioned == post("/v1/embeddings", {"input": TEXT})["data"][0]["embedding"])
with urllib.request.urlopen(URL + "/ping") as ping:
    check("GET /ping is ready", json.load(ping)["status"] == "ok")
print("all client checks passed")
