//! Sequence-classification checkpoints served from the user's own files, in three families, on
//! tiny random checkpoints of their real configurations (Hugging Face's tensor names, the head's
//! own): a BERT cross-encoder (one output, two token types, as ms-marco-MiniLM is) reranks and an
//! XLM-R classifier (three labels from `id2label`, as bge-reranker's family is) and a DistilBERT
//! one (two labels, its own `pre_classifier` head) label texts and pairs, each answer checked against candle-transformers' implementation of that architecture
//! (BERT's with the pooler and classifier Hugging Face puts on it), with the pairs' token types
//! as the model's tokenizer gives them: scores within 1e-4, and ranked as the reference ranks
//! them. Hugging Face's `InferenceClient.text_classification` gets `/predict`'s labels.

use std::path::Path;

use candle_core::{IndexOp, Tensor};
use candle_nn::Module;
use candle_transformers::models::{bert, distilbert, xlm_roberta};
use morph_encoder::TextTokenizer;
use morph_fetch::ModelFiles;
use serde_json::json;

use crate::common;

use common::tiny::{
    self, BERT_LAYER, DISTILBERT_LAYER, HIDDEN, INNER, LAYERS, VOCAB, embeddings, head_tensors,
    layer_tensors, padded, weights, write_model,
};
use common::{Served, post, python_client, quick_profile, serve_with};

/// A reference: the logits of each (text, optional second text).
type Reference = Box<dyn Fn(&[(&str, Option<&str>)]) -> Vec<Vec<f32>>>;

const QUERY: &str = "how do cross-encoders rank documents";
const DOCUMENTS: [&str; 4] = [
    "A cross-encoder reads the query and the document together.",
    "Bananas are rich in potassium.",
    "Rankers score each pair; the highest comes first.",
    "short",
];

/// Each input's ids (padded) and token types, as the model's tokenizer gives them.
fn encoded(tokenizer: &TextTokenizer, inputs: &[(&str, Option<&str>)]) -> (Tensor, Tensor, Tensor) {
    let pairs: Vec<(Vec<u32>, Vec<u32>)> = inputs
        .iter()
        .map(|(a, b)| match b {
            Some(b) => tokenizer.encode_pair(a, b).expect("a pair"),
            None => {
                let ids = tokenizer.encode(a).expect("a text");
                let types = vec![0; ids.len()];
                (ids, types)
            }
        })
        .collect();
    let ids: Vec<Vec<u32>> = pairs.iter().map(|(ids, _)| ids.clone()).collect();
    let types: Vec<Vec<u32>> = pairs.iter().map(|(_, types)| types.clone()).collect();
    let (ids, mask) = padded(&ids, 0);
    let (types, _) = padded(&types, 0);
    (ids, mask, types)
}

/// A tiny BERT cross-encoder in `dir` ([`tiny::bert_cross_encoder`]), and candle-transformers'
/// BERT with the pooler and classifier for reference.
fn bert_cross_encoder(dir: &Path) -> (ModelFiles, Reference) {
    let (files, config) = tiny::bert_cross_encoder(dir);
    let cfg: bert::Config = serde_json::from_value(config).expect("candle-transformers' config");
    let vb = weights(&files);
    let model = bert::BertModel::load(vb.pp("bert"), &cfg).expect("candle-transformers' BERT");
    let pooler = candle_nn::linear(HIDDEN, HIDDEN, vb.pp("bert.pooler.dense")).expect("pooler");
    let classifier = candle_nn::linear(HIDDEN, 1, vb.pp("classifier")).expect("classifier");
    let tokenizer = TextTokenizer::load(&files.tokenizer).expect("tokenizer");
    let reference = Box::new(move |inputs: &[(&str, Option<&str>)]| {
        let (ids, mask, types) = encoded(&tokenizer, inputs);
        let hidden = model.forward(&ids, &types, Some(&mask)).expect("forward");
        let first = hidden.i((.., 0, ..)).expect("first token");
        let pooled = pooler.forward(&first).and_then(|p| p.tanh()).expect("pooler");
        classifier.forward(&pooled).and_then(|l| l.to_vec2()).expect("logits")
    });
    (files, reference)
}

/// A tiny XLM-R classifier (`XLMRobertaForSequenceClassification`, three labels) in `dir`, and
/// candle-transformers' own class of it for reference.
fn xlm_r_classifier(dir: &Path) -> (ModelFiles, Reference) {
    let config = json!({
        "model_type": "xlm-roberta", "architectures": ["XLMRobertaForSequenceClassification"],
        "vocab_size": VOCAB, "hidden_size": HIDDEN, "num_hidden_layers": LAYERS, "num_attention_heads": 4,
        "intermediate_size": INNER, "hidden_act": "gelu", "max_position_embeddings": 514,
        "type_vocab_size": 1, "pad_token_id": 1, "layer_norm_eps": 1e-5,
        "position_embedding_type": "absolute", "attention_probs_dropout_prob": 0.1, "hidden_dropout_prob": 0.1,
        "id2label": {"0": "negative", "1": "neutral", "2": "positive"},
        "problem_type": "single_label_classification",
    });
    let mut tensors = embeddings("roberta.", 514, 1);
    for i in 0..LAYERS {
        tensors.extend(layer_tensors(&format!("roberta.encoder.layer.{i}"), BERT_LAYER));
    }
    tensors.extend(head_tensors("classifier.dense", "classifier.out_proj", 3));
    let files = write_model(dir, &config, &tensors);
    let cfg: xlm_roberta::Config = serde_json::from_value(config).expect("candle-transformers' config");
    let model = xlm_roberta::XLMRobertaForSequenceClassification::new(3, &cfg, weights(&files))
        .expect("candle-transformers' XLM-R classifier");
    let tokenizer = TextTokenizer::load(&files.tokenizer).expect("tokenizer");
    let reference = Box::new(move |inputs: &[(&str, Option<&str>)]| {
        let (ids, mask, _) = encoded(&tokenizer, inputs);
        // XLM-R has one token type: its segments are told apart by the separators alone.
        let types = ids.zeros_like().expect("a tensor op");
        model.forward(&ids, &mask, &types).and_then(|l| l.to_vec2()).expect("logits")
    });
    (files, reference)
}

/// A tiny DistilBERT classifier (`DistilBertForSequenceClassification`, two labels, no token
/// types) in `dir`, and candle-transformers' DistilBERT with the head Hugging Face puts on it
/// (`pre_classifier` with ReLU, then `classifier`) for reference.
fn distilbert_classifier(dir: &Path) -> (ModelFiles, Reference) {
    let config = json!({
        "model_type": "distilbert", "architectures": ["DistilBertForSequenceClassification"],
        "vocab_size": VOCAB, "dim": HIDDEN, "n_layers": LAYERS, "n_heads": 4, "hidden_dim": INNER,
        "activation": "gelu", "max_position_embeddings": 512, "initializer_range": 0.02, "pad_token_id": 0,
        "id2label": {"0": "NEGATIVE", "1": "POSITIVE"},
    });
    let mut tensors = embeddings("distilbert.", 512, 0);
    for i in 0..LAYERS {
        tensors.extend(layer_tensors(&format!("distilbert.transformer.layer.{i}"), DISTILBERT_LAYER));
    }
    tensors.extend(head_tensors("pre_classifier", "classifier", 2));
    let files = write_model(dir, &config, &tensors);
    let cfg: distilbert::Config = serde_json::from_value(config).expect("candle-transformers' config");
    let vb = weights(&files);
    let model = distilbert::DistilBertModel::load(vb.clone(), &cfg).expect("candle-transformers' DistilBERT");
    let pre = candle_nn::linear(HIDDEN, HIDDEN, vb.pp("pre_classifier")).expect("pre_classifier");
    let classifier = candle_nn::linear(HIDDEN, 2, vb.pp("classifier")).expect("classifier");
    let tokenizer = TextTokenizer::load(&files.tokenizer).expect("tokenizer");
    let reference = Box::new(move |inputs: &[(&str, Option<&str>)]| {
        let (ids, mask, _) = encoded(&tokenizer, inputs);
        // candle-transformers' DistilBERT masks the keys where its mask is 1.
        let padding = mask.eq(0u32).and_then(|m| m.unsqueeze(1)?.unsqueeze(1)).expect("a tensor op");
        let hidden = model.forward(&ids, &padding).expect("forward");
        let first = hidden.i((.., 0, ..)).expect("first token");
        let inner = pre.forward(&first).and_then(|x| x.relu()).expect("pre_classifier");
        classifier.forward(&inner).and_then(|l| l.to_vec2()).expect("logits")
    });
    (files, reference)
}

fn sigmoid(z: f32) -> f32 {
    1.0 / (1.0 + (-z).exp())
}

fn softmax(logits: &[f32]) -> Vec<f32> {
    let total: f32 = logits.iter().map(|z| z.exp()).sum();
    logits.iter().map(|z| z.exp() / total).collect()
}

fn close(got: f64, want: f32, what: &str) {
    assert!((got as f32 - want).abs() <= 1e-4, "{what}: {got} served, {want} the reference");
}

/// The documents' indices, best first, by `scores`.
fn best_first(scores: &[f32]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    order
}

/// Every reranking route of `served` against the reference's sigmoid scores `want`.
async fn assert_reranks(served: &Served, want: &[f32], logits: &[f32], how: &str) {
    let url = &served.url;
    let texts: Vec<&str> = DOCUMENTS.to_vec();
    let (status, ranks) =
        post(url, "/rerank", json!({"query": QUERY, "texts": texts, "return_text": true})).await;
    assert_eq!(status, 200, "{how}: {ranks}");
    let ranks = ranks.as_array().expect("ranks");
    let order: Vec<usize> = ranks.iter().map(|r| r["index"].as_u64().expect("index") as usize).collect();
    assert_eq!(order, best_first(want), "{how}: /rerank's order");
    for r in ranks {
        let i = r["index"].as_u64().expect("index") as usize;
        close(r["score"].as_f64().expect("score"), want[i], &format!("{how}: /rerank text {i}"));
        assert_eq!(r["text"], DOCUMENTS[i], "{how}: return_text");
    }
    let raw = json!({"query": QUERY, "texts": texts, "raw_scores": true});
    let (_, raw) = post(url, "/rerank", raw).await;
    for r in raw.as_array().expect("ranks") {
        let i = r["index"].as_u64().expect("index") as usize;
        close(r["score"].as_f64().expect("logit"), logits[i], &format!("{how}: raw score {i}"));
        assert!(r.get("text").is_none(), "{how}: no text unless asked: {r}");
    }
    // Cohere's shape: documents as strings or {text}, the best two, with their documents.
    let documents = json!([DOCUMENTS[0], {"text": DOCUMENTS[1]}, DOCUMENTS[2], {"text": DOCUMENTS[3]}]);
    let body = json!({"query": QUERY, "documents": documents, "top_n": 2, "return_documents": true});
    let (status, answer) = post(url, "/v1/rerank", body).await;
    assert_eq!(status, 200, "{how}: {answer}");
    let results = answer["results"].as_array().expect("results");
    assert_eq!(results.len(), 2, "{how}: top_n");
    for (r, &i) in results.iter().zip(&best_first(want)) {
        assert_eq!(r["index"], i, "{how}: /v1/rerank's order");
        close(r["relevance_score"].as_f64().expect("score"), want[i], &format!("{how}: /v1/rerank {i}"));
        assert_eq!(r["document"]["text"], DOCUMENTS[i]);
    }
    assert!(answer["usage"]["total_tokens"].as_u64().expect("usage") > 0);
    // TEI's root answers a reranker's body as /rerank does.
    let (status, root) = post(url, "/", json!({"query": QUERY, "texts": texts})).await;
    assert_eq!(status, 200, "{how}: {root}");
    assert_eq!(root[0]["index"], best_first(want)[0], "{how}: POST /");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bert_cross_encoder_reranks_as_candle_transformers_scores_it_by_default_and_by_arlo() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (files, reference) = bert_cross_encoder(dir.path());
    let pairs: Vec<(&str, Option<&str>)> = DOCUMENTS.iter().map(|d| (QUERY, Some(*d))).collect();
    let logits: Vec<f32> = reference(&pairs).into_iter().map(|l| l[0]).collect();
    let want: Vec<f32> = logits.iter().map(|&z| sigmoid(z)).collect();
    // The second segment's token type matters: the same pair without it scores otherwise.
    let tokenizer = TextTokenizer::load(&files.tokenizer).expect("tokenizer");
    let (_, types) = tokenizer.encode_pair(QUERY, DOCUMENTS[0]).expect("a pair");
    assert!(types.contains(&1), "BERT's pair template gives the second segment type 1");

    let model = files.dir.to_str().expect("utf-8 path");
    let profile = dir.path().join("profile.json");
    quick_profile(model, "16,32", &profile);
    let profile = profile.to_str().expect("utf-8 path");
    let policies: [&[&str]; 2] =
        [&["--runtime", "dynamic:64x4"], &["--policy", "arlo", "--slo-ms", "2000", "--profile", profile]];
    for policy in policies {
        let served =
            serve_with(&[&["--model", model, "--engine", "ort", "--dtype", "fp32"][..], policy].concat());
        assert_reranks(&served, &want, &logits, &format!("{policy:?}")).await;
        // /predict on a pair gives the one label's score; the reranker does not embed.
        let (status, predicted) =
            post(&served.url, "/predict", json!({"inputs": [QUERY, DOCUMENTS[2]]})).await;
        assert_eq!(status, 200, "{predicted}");
        assert_eq!(predicted[0]["label"], "LABEL_0");
        close(predicted[0]["score"].as_f64().expect("score"), want[2], "/predict on a pair");
        let (status, refused) = post(&served.url, "/embed", json!({"inputs": "a text"})).await;
        assert_eq!(status, 404, "{refused}");
        assert!(refused.to_string().contains("/rerank"), "{refused}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_xlm_r_classifier_labels_texts_and_pairs_as_candle_transformers_on_both_engines() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (files, reference) = xlm_r_classifier(dir.path());
    let labels = ["negative", "neutral", "positive"];
    let text = DOCUMENTS[0];
    let (pair_a, pair_b) = (QUERY, DOCUMENTS[2]);
    let logits = reference(&[(text, None), (pair_a, Some(pair_b))]);
    let model = files.dir.to_str().expect("utf-8 path");
    for engine in ["ort", "candle"] {
        let served = serve_with(&[
            "--model",
            model,
            "--engine",
            engine,
            "--dtype",
            "fp32",
            "--runtime",
            "dynamic:64x4",
        ]);
        let url = &served.url;
        // One text: every label, best first, with the softmax of the reference's logits.
        let (status, one) = post(url, "/predict", json!({"inputs": text})).await;
        assert_eq!(status, 200, "{engine}: {one}");
        let want = softmax(&logits[0]);
        let got = one.as_array().expect("labels");
        assert_eq!(got.len(), 3);
        for (rank, &i) in got.iter().zip(&best_first(&want)) {
            assert_eq!(rank["label"], labels[i], "{engine}: labels best first");
            close(rank["score"].as_f64().expect("score"), want[i], &format!("{engine}: label {}", labels[i]));
        }
        // A batch of a text and a pair, the best label of each, as logits.
        let body =
            json!({"inputs": [[text], [pair_a, pair_b]], "raw_scores": true, "parameters": {"top_k": 1}});
        // With `parameters` (the Hugging Face inference API's call), one input is answered as a list too.
        let (_, listed) = post(url, "/predict", json!({"inputs": text, "parameters": {}})).await;
        assert_eq!(listed, json!([one]), "{engine}: the inference API's shape");
        let (status, batch) = post(url, "/predict", body).await;
        assert_eq!(status, 200, "{engine}: {batch}");
        for (row, want) in batch.as_array().expect("a list per input").iter().zip(&logits) {
            let best = best_first(want)[0];
            assert_eq!(row.as_array().expect("labels").len(), 1, "top_k");
            assert_eq!(row[0]["label"], labels[best]);
            close(row[0]["score"].as_f64().expect("logit"), want[best], &format!("{engine}: raw"));
        }
        // TEI's root and Vertex's instances answer as /predict; a classifier does not rerank.
        let (status, root) = post(url, "/", json!({"inputs": text})).await;
        assert_eq!((status, &root), (200, &one), "{engine}: POST /");
        let instances = json!({"instances": [{"inputs": text}, {"inputs": [pair_a, pair_b]}]});
        let (status, vertex) = post(url, "/vertex", instances).await;
        assert_eq!(status, 200, "{engine}: {vertex}");
        assert_eq!(vertex["predictions"][0], one, "{engine}: /vertex");
        let (status, refused) = post(url, "/rerank", json!({"query": QUERY, "texts": ["a"]})).await;
        assert_eq!(status, 404, "{engine}: {refused}");
        assert!(
            refused.to_string().contains("no reranker (a cross-encoder has one output): use /predict"),
            "{refused}"
        );
        let (status, refused) = post(url, "/predict", json!({"inputs": ["a", "b", "c"]})).await;
        assert_eq!(status, 422, "{engine}: three strings are no text and no pair: {refused}");
        if engine == "ort" {
            hf_client(url, text).await;
        }
    }
}

/// `clients/hf_classify.py`: huggingface_hub's `InferenceClient.text_classification` against
/// the server.
async fn hf_client(url: &str, text: &str) {
    python_client("hf_classify.py", &[url, text], "pip install huggingface_hub").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_distilbert_classifier_labels_texts_and_pairs_as_candle_transformers() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (files, reference) = distilbert_classifier(dir.path());
    let inputs = [(DOCUMENTS[1], None), (QUERY, Some(DOCUMENTS[0]))];
    let logits = reference(&inputs);
    let model = files.dir.to_str().expect("utf-8 path");
    let served =
        serve_with(&["--model", model, "--engine", "ort", "--dtype", "fp32", "--runtime", "dynamic:64x4"]);
    let (status, batch) =
        post(&served.url, "/predict", json!({"inputs": [[DOCUMENTS[1]], [QUERY, DOCUMENTS[0]]]})).await;
    assert_eq!(status, 200, "{batch}");
    for (row, logits) in batch.as_array().expect("a list per input").iter().zip(&logits) {
        let want = softmax(logits);
        for (rank, &i) in row.as_array().expect("labels").iter().zip(&best_first(&want)) {
            assert_eq!(rank["label"], ["NEGATIVE", "POSITIVE"][i]);
            close(rank["score"].as_f64().expect("score"), want[i], "DistilBERT");
        }
    }
}

#[test]
fn the_head_reads_the_checkpoints_labels_and_pooling_is_refused_by_name() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (files, _) = xlm_r_classifier(dir.path());
    let head = morph_encoder::SequenceClassifier::load(&files).expect("load").expect("a classifier");
    assert_eq!(head.labels(), ["negative", "neutral", "positive"]);
    assert!(!head.is_reranker());
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_morph"))
        .args(["serve", "--port", "0", "--model", files.dir.to_str().expect("utf-8"), "--pooling", "mean"])
        .output()
        .expect("morph serve");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("--pooling mean"), "{stderr}");
}
