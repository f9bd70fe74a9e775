//! QUART's KeysManager on one host: prepared artefacts (a stage's optimised graphs, ready to
//! run) kept in host memory (a tmpfs such as /dev/shm), least recently used evicted once the
//! cache holds more than 85% of its budget.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// QUART: evict once the cache is above this share of its memory budget.
pub const EVICT_ABOVE: f64 = 0.85;

/// What the cache holds, by unit key, with sizes and recency.
#[derive(Debug)]
pub struct HostCache {
    dir: PathBuf,
    budget: u64,
    entries: HashMap<String, Entry>,
    clock: u64,
    evictions: u64,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    bytes: u64,
    used: u64,
}

/// One cached artefact, for `/info`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CachedArtefact {
    pub key: String,
    pub bytes: u64,
}

impl HostCache {
    /// A cache in `dir` (created) of at most `budget` bytes.
    pub fn new(dir: PathBuf, budget: u64) -> std::io::Result<Self> {
        std::fs::create_dir_all(&dir)?;
        Ok(Self { dir, budget, entries: HashMap::new(), clock: 0, evictions: 0 })
    }

    /// Where the artefact of `key` lives once admitted.
    pub fn path(&self, key: &str) -> PathBuf {
        self.dir.join(key)
    }

    /// A fresh folder for a cold start to prepare an artefact in, before [`HostCache::admit`].
    pub fn staging(&self, key: &str, n: u32) -> PathBuf {
        self.dir.join(format!("{key}.staging{n}"))
    }

    /// The artefact of `key`, marked just used, if cached.
    pub fn get(&mut self, key: &str) -> Option<PathBuf> {
        self.clock += 1;
        let entry = self.entries.get_mut(key)?;
        entry.used = self.clock;
        Some(self.path(key))
    }

    /// Takes the artefact prepared in `staging` in as `key`, then evicts the least recently
    /// used others while the cache is above 85% of its budget. An artefact too big to stay
    /// under that alone is not kept. Returns whether it was kept.
    pub fn admit(&mut self, key: &str, staging: &Path) -> bool {
        let bytes = dir_bytes(staging);
        let limit = (self.budget as f64 * EVICT_ABOVE) as u64;
        if bytes > limit
            || self.entries.contains_key(key)
            || std::fs::rename(staging, self.path(key)).is_err()
        {
            let _ = std::fs::remove_dir_all(staging);
            return self.entries.contains_key(key);
        }
        self.clock += 1;
        self.entries.insert(key.to_string(), Entry { bytes, used: self.clock });
        while self.bytes() > limit {
            let Some(oldest) = self.entries.iter().filter(|(k, _)| *k != key).min_by_key(|(_, e)| e.used)
            else {
                break;
            };
            let oldest = oldest.0.clone();
            self.entries.remove(&oldest);
            let _ = std::fs::remove_dir_all(self.path(&oldest));
            self.evictions += 1;
        }
        true
    }

    pub fn bytes(&self) -> u64 {
        self.entries.values().map(|e| e.bytes).sum()
    }

    pub fn budget(&self) -> u64 {
        self.budget
    }

    pub fn evictions(&self) -> u64 {
        self.evictions
    }

    /// The cached artefacts, largest first.
    pub fn contents(&self) -> Vec<CachedArtefact> {
        let mut all: Vec<CachedArtefact> =
            self.entries.iter().map(|(k, e)| CachedArtefact { key: k.clone(), bytes: e.bytes }).collect();
        all.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.key.cmp(&b.key)));
        all
    }
}

impl HostCache {
    /// Removes every artefact: host memory is given back.
    pub fn clear(&mut self) {
        self.entries.clear();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Drop for HostCache {
    /// The artefacts live only as long as the server.
    fn drop(&mut self) {
        self.clear();
    }
}

/// Bytes of the files directly in `dir`.
fn dir_bytes(dir: &Path) -> u64 {
    let Ok(read) = std::fs::read_dir(dir) else { return 0 };
    read.filter_map(Result::ok).filter_map(|e| e.metadata().ok()).map(|m| m.len()).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn artefact(cache: &HostCache, key: &str, n: u32, bytes: usize) -> PathBuf {
        let staging = cache.staging(key, n);
        std::fs::create_dir_all(&staging).expect("staging");
        std::fs::write(staging.join("plan0.onnx"), vec![0u8; bytes]).expect("write");
        staging
    }

    #[test]
    fn least_recently_used_goes_first_once_above_85_percent_and_oversize_is_not_kept() {
        let root = tempfile::tempdir().expect("tmp");
        let mut cache = HostCache::new(root.path().join("cache"), 1000).expect("cache");
        for (n, key) in ["a", "b", "c"].into_iter().enumerate() {
            let staging = artefact(&cache, key, n as u32, 250);
            assert!(cache.admit(key, &staging));
        }
        assert_eq!(cache.bytes(), 750);
        assert!(cache.get("a").is_some(), "a is used again: b is now the oldest");
        let staging = artefact(&cache, "d", 9, 250);
        assert!(cache.admit("d", &staging));
        let kept: Vec<String> = cache.contents().into_iter().map(|c| c.key).collect();
        assert!(!kept.contains(&"b".to_string()), "{kept:?}");
        assert_eq!(kept.len(), 3);
        assert!(cache.bytes() <= 850);
        assert!(!cache.path("b").exists(), "an evicted artefact leaves host memory");
        assert!(cache.path("d").join("plan0.onnx").is_file());
        assert_eq!(cache.evictions(), 1);

        let huge = artefact(&cache, "huge", 10, 900);
        assert!(!cache.admit("huge", &huge), "over 85% of the budget alone");
        assert!(!huge.exists() && !cache.path("huge").exists());
        assert_eq!(cache.evictions(), 1, "nothing evicted for an artefact that is not kept");
    }
}
