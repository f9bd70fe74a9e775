//! SSJF's length cache (§6): a prompt seen before gets its earlier prediction without running
//! the predictor. Keyed by a hash of the predictor's input text; the oldest entry leaves when
//! it is full. An oracle is this cache filled with the true lengths and no predictor behind it.

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};

#[derive(Debug, Clone)]
pub struct LengthCache {
    lengths: HashMap<u64, u32>,
    order: VecDeque<u64>,
    capacity: usize,
}

impl LengthCache {
    pub fn new(capacity: usize) -> Self {
        Self { lengths: HashMap::new(), order: VecDeque::new(), capacity: capacity.max(1) }
    }

    /// A cache holding every one of `known` (text, length) pairs and nothing else.
    pub fn filled(known: impl IntoIterator<Item = (String, u32)>) -> Self {
        let known: Vec<(String, u32)> = known.into_iter().collect();
        let mut cache = Self::new(known.len());
        for (text, len) in known {
            cache.insert(&text, len);
        }
        cache
    }

    fn key(text: &str) -> u64 {
        let mut h = DefaultHasher::new();
        text.hash(&mut h);
        h.finish()
    }

    pub fn get(&self, text: &str) -> Option<u32> {
        self.lengths.get(&Self::key(text)).copied()
    }

    pub fn insert(&mut self, text: &str, len: u32) {
        let key = Self::key(text);
        if self.lengths.insert(key, len).is_none() {
            self.order.push_back(key);
            if self.order.len() > self.capacity
                && let Some(oldest) = self.order.pop_front()
            {
                self.lengths.remove(&oldest);
            }
        }
    }

    pub fn len(&self) -> usize {
        self.lengths.len()
    }

    pub fn is_empty(&self) -> bool {
        self.lengths.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_and_forgets_the_oldest() {
        let mut cache = LengthCache::new(2);
        cache.insert("a", 1);
        cache.insert("b", 2);
        cache.insert("a", 3);
        assert_eq!((cache.get("a"), cache.get("b"), cache.len()), (Some(3), Some(2), 2));
        cache.insert("c", 4);
        assert_eq!((cache.get("a"), cache.get("c"), cache.len()), (None, Some(4), 2));
        let oracle = LengthCache::filled([("x".to_string(), 7), ("y".to_string(), 9)]);
        assert_eq!((oracle.get("x"), oracle.get("y"), oracle.get("z")), (Some(7), Some(9), None));
    }
}
