//! Every token plan the shipped assets name is in the readable form (`exit:1`, not `-101`):
//! profiles, the accuracy table, the task heads' metadata and the scenarios' plan lists.

use std::path::Path;

fn files(dir: &Path, ext: &str) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("an assets folder") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            out.extend(files(&path, ext));
        } else if path.extension().is_some_and(|e| e == ext) {
            out.push(path);
        }
    }
    out
}

fn readable(value: &serde_json::Value, what: &str) {
    assert!(
        value.as_str().is_some_and(|s| s.parse::<i64>().is_err()),
        "{what}: plan {value} is not readable"
    );
}

#[test]
fn profiles_accuracy_tables_and_heads_name_their_plans_readably() {
    let json = files(&morph_assets::path("profiles"), "json");
    assert!(json.len() > 10, "{json:?}");
    let heads_meta = ["weights/tasks/tasks.json", "weights/tasks_mpnet/tasks.json"].map(morph_assets::path);
    for path in json.iter().chain(&heads_meta) {
        let what = path.display().to_string();
        let file: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        if let Some(plan) = file.get("plan") {
            readable(plan, &what);
        }
        for plan in file.get("plans").and_then(|p| p.as_array()).into_iter().flatten() {
            readable(plan, &what);
        }
        for split in ["profiling", "test"] {
            for key in file.get(split).and_then(|s| s.as_object()).into_iter().flat_map(|m| m.keys()) {
                readable(&serde_json::json!(key), &what);
            }
        }
        for head in file.get("heads").and_then(|h| h.as_object()).into_iter().flat_map(|m| m.keys()) {
            let plan = head.rsplit_once('.').map_or(head.as_str(), |(_, p)| p);
            readable(&serde_json::json!(plan), &what);
        }
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if let Some(plan) = name.strip_prefix("latency_").and_then(|n| n.strip_suffix(".json")) {
            assert_eq!(file.get("plan").and_then(|p| p.as_str()).unwrap_or("plain"), plan, "{what}");
        }
    }
}

#[test]
fn scenarios_list_their_plans_readably() {
    let scenarios = files(&morph_assets::path("scenarios"), "toml");
    let mut lists = 0;
    for path in &scenarios {
        let file: toml::Value = toml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let policies = file.get("policies").and_then(|p| p.as_array()).cloned().unwrap_or_default();
        for plans in policies.iter().filter_map(|p| p.get("plans").and_then(|p| p.as_array())) {
            lists += 1;
            for plan in plans {
                let plan = serde_json::json!(plan.as_str());
                readable(&plan, &path.display().to_string());
            }
        }
    }
    assert!(lists > 10, "{lists} plan lists in {} scenarios", scenarios.len());
}
