//! A small etcd v3 client over etcd's own JSON gateway (`POST /v3/...` on the client port,
//! keys and values base64-encoded, a watch streamed as one JSON object per line). It needs
//! nothing at build time (the gRPC client crates generate code with `protoc`), and Morph uses
//! six calls: lease grant, keep-alive and revoke, put, prefix range, and watch.

use std::io::{BufRead, BufReader};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Value, json};

use super::ClusterError;

/// One etcd endpoint, such as `http://10.0.0.1:2379`.
#[derive(Debug, Clone)]
pub struct Etcd {
    base: String,
    agent: ureq::Agent,
}

/// A lease granted by etcd: keys put under it vanish `ttl` after its last keep-alive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    pub id: i64,
    pub ttl: Duration,
}

/// Keys with their values, and the store's revision they were read at.
pub type Snapshot = (Vec<(String, Vec<u8>)>, i64);

/// A change to a key under a watched prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Put { key: String, value: Vec<u8> },
    Delete { key: String },
}

impl Etcd {
    /// A client of the etcd at `url` (`http://HOST:PORT`); every call gives up after `timeout`.
    pub fn new(url: &str, timeout: Duration) -> Self {
        let agent = ureq::AgentBuilder::new().timeout_connect(timeout).timeout(timeout).build();
        Self { base: url.trim_end_matches('/').to_string(), agent }
    }

    pub fn url(&self) -> &str {
        &self.base
    }

    fn call(&self, path: &str, body: &Value) -> Result<Value, ClusterError> {
        let url = format!("{}/v3/{path}", self.base);
        let answer = self.agent.post(&url).send_string(&body.to_string()).map_err(|e| self.fail(path, e))?;
        let text = answer.into_string().map_err(|e| ClusterError::Etcd(format!("{url}: {e}")))?;
        serde_json::from_str(&text).map_err(|e| ClusterError::Etcd(format!("{url}: {e}: {text}")))
    }

    fn fail(&self, path: &str, e: ureq::Error) -> ClusterError {
        let why = match e {
            ureq::Error::Status(code, answer) => {
                format!("{code} {}", answer.into_string().unwrap_or_default())
            }
            ureq::Error::Transport(t) => t.to_string(),
        };
        ClusterError::Etcd(format!("etcd at {} ({path}): {why}", self.base))
    }

    /// Grants a lease of `ttl` (etcd rounds it up to whole seconds, at least its minimum).
    pub fn grant(&self, ttl: Duration) -> Result<Lease, ClusterError> {
        let answer = self.call("lease/grant", &json!({ "TTL": ttl.as_secs().max(1) }))?;
        let id = int(&answer["ID"]).ok_or_else(|| ClusterError::Etcd(format!("lease grant: {answer}")))?;
        let ttl = Duration::from_secs(int(&answer["TTL"]).unwrap_or(0).max(1) as u64);
        Ok(Lease { id, ttl })
    }

    /// Renews `lease`; `false` when it has expired already (its keys are gone).
    pub fn keep_alive(&self, lease: Lease) -> Result<bool, ClusterError> {
        let answer = self.call("lease/keepalive", &json!({ "ID": lease.id.to_string() }))?;
        Ok(int(&answer["result"]["TTL"]).unwrap_or(0) > 0)
    }

    /// Ends `lease` now: its keys are deleted.
    pub fn revoke(&self, lease: Lease) -> Result<(), ClusterError> {
        self.call("lease/revoke", &json!({ "ID": lease.id.to_string() })).map(drop)
    }

    /// Sets `key` to `value`, under `lease` if given.
    pub fn put(&self, key: &str, value: &[u8], lease: Option<Lease>) -> Result<(), ClusterError> {
        let mut body = json!({ "key": B64.encode(key), "value": B64.encode(value) });
        if let Some(lease) = lease {
            body["lease"] = json!(lease.id.to_string());
        }
        self.call("kv/put", &body).map(drop)
    }

    /// Every key under `prefix` with its value, and the store's revision they were read at.
    pub fn get_prefix(&self, prefix: &str) -> Result<Snapshot, ClusterError> {
        let body = json!({ "key": B64.encode(prefix), "range_end": B64.encode(prefix_end(prefix)) });
        let answer = self.call("kv/range", &body)?;
        let revision = int(&answer["header"]["revision"]).unwrap_or(0);
        let kvs = answer["kvs"].as_array().cloned().unwrap_or_default();
        let pairs = kvs.iter().filter_map(|kv| Some((text(&kv["key"])?, bytes(&kv["value"])))).collect();
        Ok((pairs, revision))
    }

    /// Streams changes under `prefix` from `revision` on, handing each to `on_change` until it
    /// returns `false`; returns an error when the stream breaks (the caller reads again and
    /// watches from there).
    pub fn watch_prefix(
        &self,
        prefix: &str,
        revision: i64,
        mut on_change: impl FnMut(Change) -> bool,
    ) -> Result<(), ClusterError> {
        let create = json!({ "create_request": {
            "key": B64.encode(prefix),
            "range_end": B64.encode(prefix_end(prefix)),
            "start_revision": revision.to_string(),
        }});
        let url = format!("{}/v3/watch", self.base);
        // A watch stays open for as long as it is useful: no read deadline on this one.
        let streaming = ureq::AgentBuilder::new().timeout_connect(Duration::from_secs(5)).build();
        let answer =
            streaming.post(&url).send_string(&create.to_string()).map_err(|e| self.fail("watch", e))?;
        for line in BufReader::new(answer.into_reader()).lines() {
            let line = line.map_err(|e| ClusterError::Etcd(format!("watch on {}: {e}", self.base)))?;
            let Ok(message) = serde_json::from_str::<Value>(&line) else { continue };
            if message["result"]["canceled"].as_bool() == Some(true) {
                return Err(ClusterError::Etcd(format!("watch cancelled: {line}")));
            }
            for event in message["result"]["events"].as_array().into_iter().flatten() {
                let Some(key) = text(&event["kv"]["key"]) else { continue };
                let change = match event["type"].as_str() {
                    Some("DELETE") => Change::Delete { key },
                    _ => Change::Put { key, value: bytes(&event["kv"]["value"]) },
                };
                if !on_change(change) {
                    return Ok(());
                }
            }
        }
        Err(ClusterError::Etcd(format!("watch on {} ended", self.base)))
    }
}

/// The end of the key range holding every key that starts with `prefix` (etcd's convention:
/// the prefix with its last byte plus one).
fn prefix_end(prefix: &str) -> Vec<u8> {
    let mut end = prefix.as_bytes().to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

/// etcd's gateway writes 64-bit integers as strings.
fn int(v: &Value) -> Option<i64> {
    v.as_str().and_then(|s| s.parse().ok()).or_else(|| v.as_i64())
}

fn bytes(v: &Value) -> Vec<u8> {
    v.as_str().and_then(|s| B64.decode(s).ok()).unwrap_or_default()
}

fn text(v: &Value) -> Option<String> {
    String::from_utf8(bytes(v)).ok().filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_range_ends_past_every_key_that_starts_with_it() {
        assert_eq!(prefix_end("/morph/a/"), b"/morph/a0".to_vec());
        assert_eq!(prefix_end("a\u{7f}"), b"a\x80".to_vec());
        assert_eq!(int(&json!("42")), Some(42));
        assert_eq!(int(&json!(7)), Some(7));
        assert_eq!(text(&json!(B64.encode("/morph/x"))).as_deref(), Some("/morph/x"));
    }
}
