//! The Kubernetes deployment in `deploy/k8s`, checked offline: every manifest the kustomization
//! lists passes the Kubernetes OpenAPI schema strictly (kubernetes-validate, from PyPI; `.ci/run`
//! installs it), the server and agent answer health probes where the manifests point them, and
//! every `morph` command line in them is one `morph` accepts (flag names and values).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn deploy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/k8s")
}

/// The manifests the kustomization lists.
fn manifests() -> Vec<PathBuf> {
    let text = std::fs::read_to_string(deploy().join("kustomization.yaml")).expect("kustomization.yaml");
    let listed: Vec<PathBuf> = text
        .lines()
        .skip_while(|l| !l.starts_with("resources:"))
        .skip(1)
        .map_while(|l| l.trim().strip_prefix("- "))
        .map(|f| deploy().join(f))
        .collect();
    assert!(listed.len() >= 4, "namespace, etcd, server, agent: {listed:?}");
    listed
}

fn python(args: &[&str]) -> std::process::Output {
    Command::new("python3").args(args).output().expect("python3")
}

/// Every document of every manifest, as JSON (PyYAML comes with kubernetes-validate).
fn documents() -> Vec<Value> {
    let files: Vec<String> = manifests().iter().map(|p| p.display().to_string()).collect();
    let script = "import json, sys, yaml\nprint(json.dumps([d for f in sys.argv[1:] for d in yaml.safe_load_all(open(f)) if d]))";
    let mut args = vec!["-c", script];
    args.extend(files.iter().map(String::as_str));
    let out = python(&args);
    assert!(out.status.success(), "reading the manifests: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice::<Vec<Value>>(&out.stdout).expect("JSON")
}

fn containers(doc: &Value) -> Vec<Value> {
    let spec = &doc["spec"]["template"]["spec"];
    ["initContainers", "containers"]
        .iter()
        .flat_map(|k| spec[k].as_array().cloned().unwrap_or_default())
        .collect()
}

#[test]
fn the_manifests_pass_the_kubernetes_schema_strictly() {
    let check = python(&["-c", "import kubernetes_validate"]);
    assert!(
        check.status.success(),
        "kubernetes-validate is needed: python3 -m pip install kubernetes-validate (.ci/run does)"
    );
    let files: Vec<String> = manifests().iter().map(|p| p.display().to_string()).collect();
    let mut args = vec!["-m", "kubernetes_validate", "--strict", "--quiet"];
    args.extend(files.iter().map(String::as_str));
    let out = python(&args);
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "schema check failed:\n{said}");
    let kinds: Vec<String> =
        documents().iter().map(|d| d["kind"].as_str().unwrap_or("").to_string()).collect();
    for kind in ["Namespace", "StatefulSet", "Deployment", "DaemonSet", "Service"] {
        assert!(kinds.iter().any(|k| k == kind), "a {kind}: {kinds:?}");
    }
}

#[test]
fn every_morph_command_line_in_the_manifests_parses_and_probes_hit_health() {
    let mut checked = 0;
    for doc in documents() {
        for container in containers(&doc) {
            if !container["image"].as_str().is_some_and(|i| i.starts_with("morph")) {
                continue;
            }
            let args: Vec<String> = container["args"]
                .as_array()
                .expect("args")
                .iter()
                .map(|a| {
                    a.as_str()
                        .expect("text")
                        .replace("$(POD_IP)", "10.0.0.7")
                        .replace("$(NODE_NAME)", "node-1")
                })
                .collect();
            let out =
                Command::new(env!("CARGO_BIN_EXE_morph")).args(&args).arg("--help").output().expect("morph");
            assert!(
                out.status.success(),
                "{} {args:?}: {}",
                container["name"],
                String::from_utf8_lossy(&out.stderr)
            );
            checked += 1;
            // The server's probes: started and ready on /ready, live on /live; the agent's on /health.
            let probes: &[(&str, &str)] = match args.first().map(String::as_str) {
                Some("serve") => {
                    &[("startupProbe", "/ready"), ("readinessProbe", "/ready"), ("livenessProbe", "/live")]
                }
                Some("agent") => &[("readinessProbe", "/health"), ("livenessProbe", "/health")],
                _ => &[],
            };
            if !probes.is_empty() {
                let port = container["ports"][0]["containerPort"].as_u64().expect("a port");
                assert!(args.iter().any(|a| a == &format!("--port={port}")), "{args:?} listens on {port}");
                for (probe, path) in probes {
                    assert_eq!(
                        container[*probe]["httpGet"]["path"], *path,
                        "{probe} of {}",
                        container["name"]
                    );
                    assert_eq!(container[probe]["httpGet"]["port"], port, "{probe} of {}", container["name"]);
                }
            }
        }
    }
    assert_eq!(checked, 3, "the server, the agent and its fetch");
}
