"""Hugging Face's own client against a live Morph server of a sequence-classification
checkpoint, as users point it at a text-embeddings-inference endpoint:
`huggingface_hub.InferenceClient(base_url=URL).text_classification` posts to the root, which
answers as `/predict` for a classifier; its labels and scores must be `/predict`'s.

Run by tests/cli/classifiers.rs: hf_classify.py URL TEXT
Exits non-zero with the failed assertion; prints one line per check.
"""

import json
import sys
import urllib.request

from huggingface_hub import InferenceClient

URL, TEXT = sys.argv[1], sys.argv[2]


def check(name, ok, detail=""):
    assert ok, f"{name}: {detail}"
    print(f"ok  {name}")


def post(path, body):
    request = urllib.request.Request(URL + path, json.dumps(body).encode(), {"content-type": "application/json"})
    with urllib.request.urlopen(request) as answer:
        return json.load(answer)


want = post("/predict", {"inputs": TEXT})
got = InferenceClient(base_url=URL).text_classification(TEXT)
pairs = [(element.label, element.score) for element in got]
check(
    "InferenceClient.text_classification gives /predict's labels, best first",
    [label for label, _ in pairs] == [w["label"] for w in want]
    and max(abs(score - w["score"]) for (_, score), w in zip(pairs, want)) < 1e-6,
    f"{pairs} vs {want}",
)
top = InferenceClient(base_url=URL).text_classification(TEXT, top_k=1)
check("top_k=1 gives the best label alone", [e.label for e in top] == [want[0]["label"]], top)
print("all client checks passed")
