"""Hugging Face's own client against a live Morph embedding server, as users point it at a
text-embeddings-inference endpoint: `huggingface_hub.InferenceClient` with the server as its
`base_url` and as its `model` (it posts to the root), each answer checked against the vector
the server's `/embed` gives and against sentence-transformers' reference.

Run by tests/client_sdks.rs: hf_clients.py EMBED_URL
Exits non-zero with the failed assertion; prints one line per check.
"""

import json
import sys
import urllib.request

from huggingface_hub import InferenceClient

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
check("POST /invocations is /embed", post("/invocations", {"inputs": TEXT})[0] == embed)
unversioned = post("/embeddings", {"input": TEXT})["data"][0]["embedding"]
check("POST /embeddings is /v1/embeddings", unversioned == post("/v1/embeddings", {"input": TEXT})["data"][0]["embedding"])
with urllib.request.urlopen(URL + "/ping") as ping:
    check("GET /ping is ready", json.load(ping)["status"] == "ok")
print("all client checks passed")
