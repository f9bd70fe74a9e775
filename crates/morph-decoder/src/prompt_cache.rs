//! The host-memory prompt cache: the KV state of finished sequences' prompts (llama.cpp's
//! per-sequence state), kept in a bounded LRU and found by the longest prefix a new prompt
//! may reuse, so that a conversation's next round, on whichever instance and place takes it,
//! computes only what its earlier round did not.
//!
//! Which prefixes are reusable is the cache's [`Reuse`] rule (by default a turn start the kept
//! prompt's pieces broke at, which gives the logits computed afresh); the cache indexes every
//! entry at each point where it can be reused by a hash of the tokens before it (the block
//! hashes of vLLM's automatic prefix caching, with a chat turn or a block of tokens as the
//! block), so a lookup hashes the prompt once and probes its points, longest first. An entry
//! that a newer one serves as well (a conversation's earlier round, once the next round is
//! kept) is dropped when the newer one arrives.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::Hasher;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use llama_cpp_2::context::session::SeqState;

use crate::reuse::Reuse;

/// A kept sequence state, as the cache weighs it.
pub trait Snapshot: Send + Sync {
    /// Host memory it takes, in bytes.
    fn bytes(&self) -> usize;
}

impl Snapshot for SeqState {
    fn bytes(&self) -> usize {
        self.byte_len()
    }
}

/// Kept prompt states of a llama.cpp decoder.
pub type LlamaPromptCache = PromptCache<SeqState>;

/// Where an entry's prefix may end, keyed by that length and the hash of the tokens before it.
type PrefixKey = (usize, u64);

/// The hash of `tokens[..s]` for each `s` of `at` (ascending), in one pass over the tokens.
fn prefix_hashes(tokens: &[u32], at: impl IntoIterator<Item = usize>) -> Vec<PrefixKey> {
    let mut hasher = DefaultHasher::new();
    let mut done = 0;
    let mut out = Vec::new();
    for s in at {
        for &t in &tokens[done..s] {
            hasher.write_u32(t);
        }
        done = s;
        out.push((s, hasher.clone().finish()));
    }
    out
}

/// What the cache did since it started, and holds now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Lookups that found a reusable prefix, and the tokens those prefixes held.
    pub hits: u64,
    pub tokens_reused: u64,
    /// Lookups that found none.
    pub misses: u64,
    /// Entries dropped to stay within the bound (or never kept: larger than it alone).
    pub evictions: u64,
    /// Entries and the bytes of their states now.
    pub entries: usize,
    pub bytes: usize,
    /// The bound on `bytes`.
    pub capacity: usize,
}

/// A prefix found in the cache: its state and how many of the prompt's tokens it gives.
#[derive(Debug)]
pub struct Found<S> {
    pub state: Arc<S>,
    /// The state's tokens (at least `reused` of them; the caller keeps the first `reused`).
    pub tokens: Vec<u32>,
    pub reused: usize,
}

struct Entry<S> {
    tokens: Vec<u32>,
    keys: Vec<PrefixKey>,
    /// Whether a prompt may reuse all of `tokens` ([`Reuse::whole_reusable`]).
    whole: bool,
    state: Arc<S>,
    bytes: usize,
    /// Its place in the LRU order.
    used: u64,
}

struct Entries<S> {
    by_id: HashMap<u64, Entry<S>>,
    by_prefix: HashMap<PrefixKey, Vec<u64>>,
    /// Least recently used first: use tick → entry id.
    lru: BTreeMap<u64, u64>,
    next_id: u64,
    tick: u64,
    stats: CacheStats,
}

/// How a decoder's prompt cache is set: its bound in bytes (0: none) and its reuse rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PromptCacheConfig {
    pub bytes: usize,
    pub reuse: Reuse,
}

impl PromptCacheConfig {
    /// No prompt cache.
    pub const OFF: Self = Self { bytes: 0, reuse: Reuse::Turns };
}

/// Kept prompt states within `capacity` bytes, shared by every instance of a decoder.
pub struct PromptCache<S> {
    entries: Mutex<Entries<S>>,
    reuse: Reuse,
}

impl<S: Snapshot> std::fmt::Debug for PromptCache<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PromptCache").field("stats", &self.stats()).finish()
    }
}

impl<S: Snapshot> PromptCache<S> {
    /// An empty cache holding at most `capacity` bytes of states, reused by `reuse`.
    pub fn new(capacity: usize, reuse: Reuse) -> Self {
        let stats = CacheStats { capacity, ..CacheStats::default() };
        let entries = Entries {
            by_id: HashMap::new(),
            by_prefix: HashMap::new(),
            lru: BTreeMap::new(),
            next_id: 0,
            tick: 0,
            stats,
        };
        Self { entries: Mutex::new(entries), reuse }
    }

    /// How much of a kept state a prompt reuses.
    pub fn reuse(&self) -> Reuse {
        self.reuse
    }

    fn lock(&self) -> MutexGuard<'_, Entries<S>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn stats(&self) -> CacheStats {
        self.lock().stats
    }

    /// How many of `prompt`'s first tokens (turn starts `starts`) a kept state gives, without
    /// counting a use: what a scheduler weighs a request by.
    pub fn peek(&self, prompt: &[u32], starts: &[usize]) -> usize {
        self.lock().find(&self.reuse.probes(prompt.len(), starts), prompt).map_or(0, |(_, reused)| reused)
    }

    /// The kept state that gives the most of `prompt`'s first tokens (turn starts `starts`), if
    /// it gives more than `better_than` (what the caller holds already); counted as a hit (and
    /// the entry as just used) or a miss.
    pub fn take(&self, prompt: &[u32], starts: &[usize], better_than: usize) -> Option<Found<S>> {
        let mut entries = self.lock();
        let probes = self.reuse.probes(prompt.len(), starts);
        let found = entries.find(&probes, prompt).filter(|&(_, reused)| reused > better_than);
        let Some((id, reused)) = found else {
            entries.stats.misses += 1;
            return None;
        };
        entries.stats.hits += 1;
        entries.stats.tokens_reused += reused as u64;
        entries.touch(id);
        let entry = &entries.by_id[&id];
        Some(Found { state: entry.state.clone(), tokens: entry.tokens.clone(), reused })
    }

    /// Keeps `state`, the KV state of `tokens` (a prompt fed in pieces, turn starts `starts`),
    /// dropping the entries it serves as well and then the least recently used ones until the cache is
    /// within its bound. A state larger than the bound alone is not kept.
    pub fn put(&self, tokens: Vec<u32>, starts: &[usize], state: S) {
        let bytes = state.bytes();
        let mut entries = self.lock();
        if bytes > entries.stats.capacity {
            entries.stats.evictions += 1;
            return;
        }
        let keys = prefix_hashes(&tokens, self.reuse.ends(tokens.len(), starts));
        entries.drop_served(&tokens, &keys);
        let id = entries.next_id;
        entries.next_id += 1;
        for key in &keys {
            entries.by_prefix.entry(*key).or_default().push(id);
        }
        let whole = self.reuse.whole_reusable(tokens.len(), starts);
        let entry = Entry { tokens, keys, whole, state: Arc::new(state), bytes, used: 0 };
        entries.by_id.insert(id, entry);
        entries.stats.entries += 1;
        entries.stats.bytes += bytes;
        entries.touch(id);
        while entries.stats.bytes > entries.stats.capacity {
            let Some((_, oldest)) = entries.lru.pop_first() else { break };
            entries.remove(oldest);
            entries.stats.evictions += 1;
        }
    }
}

impl<S> Entries<S> {
    /// The entry giving the most of `prompt`, and how many tokens: its `probes` (ascending)
    /// tried longest first by prefix hash, a candidate's tokens compared before it counts.
    fn find(&self, probes: &[usize], prompt: &[u32]) -> Option<(u64, usize)> {
        let keys = prefix_hashes(prompt, probes.iter().copied());
        keys.iter().rev().find_map(|key| {
            let ids = self.by_prefix.get(key)?;
            let s = key.0;
            ids.iter()
                .copied()
                .find(|id| {
                    let entry = &self.by_id[id];
                    (s < entry.tokens.len() || entry.whole) && entry.tokens[..s] == prompt[..s]
                })
                .map(|id| (id, s))
        })
    }

    /// Drops the entries that a new entry of `tokens` (prefix `keys`) serves as well: those
    /// whose every prefix but their whole is one of its prefixes (a conversation's earlier round;
    /// its whole prompt would serve only a prompt with a turn start right after it, which a
    /// chat's next round, the earlier one's reply turn and answer, never has), or whose whole is.
    fn drop_served(&mut self, tokens: &[u32], keys: &[PrefixKey]) {
        let candidates: BTreeSet<u64> =
            keys.iter().filter_map(|key| self.by_prefix.get(key)).flatten().copied().collect();
        let served: Vec<u64> = candidates
            .into_iter()
            .filter(|id| {
                let entry = &self.by_id[id];
                let whole = entry.keys.len() - 1;
                let needed = match whole {
                    0 => &entry.keys[..],
                    _ => &entry.keys[..whole],
                };
                let agreed = needed.last().map_or(0, |key| key.0);
                needed.iter().all(|key| keys.contains(key)) && entry.tokens[..agreed] == tokens[..agreed]
            })
            .collect();
        for id in served {
            self.remove(id);
        }
    }

    fn touch(&mut self, id: u64) {
        self.tick += 1;
        let tick = self.tick;
        if let Some(entry) = self.by_id.get_mut(&id) {
            self.lru.remove(&entry.used);
            entry.used = tick;
            self.lru.insert(tick, id);
        }
    }

    fn remove(&mut self, id: u64) {
        let Some(entry) = self.by_id.remove(&id) else { return };
        self.lru.remove(&entry.used);
        for key in &entry.keys {
            if let Some(ids) = self.by_prefix.get_mut(key) {
                ids.retain(|&other| other != id);
                if ids.is_empty() {
                    self.by_prefix.remove(key);
                }
            }
        }
        self.stats.entries -= 1;
        self.stats.bytes -= entry.bytes;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A state of a given size.
    struct Sized(usize);

    impl Snapshot for Sized {
        fn bytes(&self) -> usize {
            self.0
        }
    }

    const TURN: u32 = 1;

    fn starts(p: &[u32]) -> Vec<usize> {
        crate::pieces::turn_starts(p, Some(TURN))
    }

    /// A chat of `turns` turns, each `[TURN, word, word, word, ...]` of 10 tokens (longer than
    /// a reply's opening) with words from `seed`.
    fn chat(seed: u32, turns: u32) -> Vec<u32> {
        (0..turns).flat_map(|t| [TURN, 10 + seed, 20 + t].into_iter().chain([30 + seed * t; 7])).collect()
    }

    #[test]
    fn the_longest_reusable_prefix_is_found_and_a_longer_round_replaces_its_earlier_one() {
        let cache = PromptCache::new(1 << 20, Reuse::Turns);
        let round1 = chat(1, 2);
        cache.put(round1.clone(), &starts(&round1), Sized(100));
        let round2 = chat(1, 4);
        // Round 2 reuses all of round 1 (its end is a turn start of round 2).
        assert_eq!(cache.peek(&round2, &starts(&round2)), round1.len());
        let found = cache.take(&round2, &starts(&round2), 0).expect("a hit");
        assert_eq!((found.reused, found.tokens), (round1.len(), round1.clone()));
        assert!(cache.take(&round2, &starts(&round2), round1.len()).is_none(), "no better than held");
        cache.put(round2.clone(), &starts(&round2), Sized(200));
        let stats = cache.stats();
        assert_eq!((stats.entries, stats.bytes), (1, 200), "round 1 is within round 2: dropped");
        let round3 = chat(1, 6);
        assert_eq!(cache.peek(&round3, &starts(&round3)), round2.len());
        // Another conversation shares nothing beyond position 0.
        let other = chat(2, 3);
        assert_eq!(cache.peek(&other, &starts(&other)), 0);
        // A prompt ending in a reply's opening gives up to the opening, never all of it.
        let opened = [chat(3, 2).as_slice(), &[TURN, 5]].concat();
        cache.put(opened.clone(), &starts(&opened), Sized(100));
        let after = [opened.as_slice(), &[TURN, 9, 9]].concat();
        assert_eq!(cache.peek(&after, &starts(&after)), opened.len() - 2);
        assert_eq!(
            (cache.stats().hits, cache.stats().misses, cache.stats().tokens_reused),
            (1, 1, round1.len() as u64)
        );
    }

    #[test]
    fn a_flood_of_distinct_prompts_keeps_the_bound_by_evicting_the_least_recently_used() {
        let cache = PromptCache::new(1000, Reuse::Turns);
        let prompts: Vec<Vec<u32>> = (0..50).map(|seed| chat(seed, 3)).collect();
        for (i, p) in prompts.iter().enumerate() {
            cache.put(p.clone(), &starts(p), Sized(300));
            assert!(cache.stats().bytes <= 1000, "after {i}: {:?}", cache.stats());
            // Keep the first prompt in use: it is never the least recently used.
            let first = [prompts[0].as_slice(), &[TURN, 99]].concat();
            assert!(cache.take(&first, &starts(&first), 0).is_some(), "after {i}");
        }
        let stats = cache.stats();
        assert_eq!((stats.entries, stats.bytes, stats.evictions), (3, 900, 47));
        let last = [prompts[49].as_slice(), &[TURN, 99]].concat();
        assert_eq!(cache.peek(&last, &starts(&last)), prompts[49].len());
        let evicted = [prompts[10].as_slice(), &[TURN, 99]].concat();
        assert_eq!(cache.peek(&evicted, &starts(&evicted)), 0);
        // A state larger than the whole bound is not kept, and nothing else is lost for it.
        cache.put(chat(77, 2), &starts(&chat(77, 2)), Sized(5000));
        assert_eq!((cache.stats().entries, cache.stats().evictions), (3, 48));
    }
}
