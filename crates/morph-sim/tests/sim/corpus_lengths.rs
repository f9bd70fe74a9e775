//! A scenario whose lengths come from a tokenized corpus.

use morph_sim::Scenario;
use morph_sim::workload::Lengths;

#[test]
fn corpus_lengths_are_tokenized_at_load() {
    let dir = std::env::temp_dir().join(format!("morph-sim-corpus-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("texts.txt"), "one two three\nfour five\n").unwrap();
    let profile = morph_assets::path("profiles/minilm_candle_cpu_2core.json");
    std::fs::write(
        dir.join("s.toml"),
        format!(
            r#"name = "corpus"
duration_s = 10
[workload]
arrivals = {{ kind = "poisson", rate = 20 }}
lengths = {{ kind = "corpus", path = "texts.txt" }}
[cluster]
profile = "{}"
runtimes = [{{ runtime = "dynamic:512x4", instances = 1 }}]
[[policies]]
name = "dynamic-batching"
"#,
            profile.display()
        ),
    )
    .unwrap();
    // A whitespace "tokenizer" with [CLS] and [SEP]: 5 and 4 tokens.
    let words = |t: &str| Ok(t.split_whitespace().count() as u32 + 2);
    let scenario = Scenario::load(&dir.join("s.toml"), &words).unwrap();
    assert_eq!(scenario.workload.lengths, Lengths::Empirical { values: vec![5, 4] });
    let requests = scenario.workload.generate(10.0, 1).unwrap();
    assert!(requests.iter().all(|r| r.input_len == 4 || r.input_len == 5));
    assert!(requests.iter().any(|r| r.input_len == 4) && requests.iter().any(|r| r.input_len == 5));
    let failing = |_: &str| Err("no tokenizer here".to_string());
    let err = Scenario::load(&dir.join("s.toml"), &failing).unwrap_err().to_string();
    assert!(err.contains("tokenizing corpus") && err.contains("no tokenizer here"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
