//! A binary min-heap of entries by key: what the epoch queue keeps for the events that land in
//! the epoch it is reading and for those past its buckets.

use super::Entry;

/// Entry i's children are 2i + 1 and 2i + 2.
#[derive(Debug, Default)]
pub(super) struct KeyHeap {
    heap: Vec<Entry>,
}

impl KeyHeap {
    pub(super) fn push(&mut self, entry: Entry) {
        self.heap.push(entry);
        self.sift_up(self.heap.len() - 1, entry);
    }

    /// Moves `entry` up from the free place `hole` to where its parent is not later.
    fn sift_up(&mut self, mut hole: usize, entry: Entry) {
        while hole > 0 {
            let parent = (hole - 1) / 2;
            if self.heap[parent].key <= entry.key {
                break;
            }
            self.heap[hole] = self.heap[parent];
            hole = parent;
        }
        self.heap[hole] = entry;
    }

    /// The earliest entry. The hole its leaving makes goes down to a leaf by the earlier child,
    /// chosen without a branch (which child is earlier is a coin toss a branch predictor misses
    /// half the time), and the last entry climbs back from there: it belongs near the bottom.
    pub(super) fn pop(&mut self) -> Option<Entry> {
        let last = self.heap.pop()?;
        let Some(&first) = self.heap.first() else { return Some(last) };
        let len = self.heap.len();
        let (mut hole, mut child) = (0, 1);
        while child + 1 < len {
            child += usize::from(self.heap[child + 1].key < self.heap[child].key);
            self.heap[hole] = self.heap[child];
            (hole, child) = (child, 2 * child + 1);
        }
        if child < len {
            self.heap[hole] = self.heap[child];
            hole = child;
        }
        self.sift_up(hole, last);
        Some(first)
    }

    pub(super) fn first(&self) -> Option<&Entry> {
        self.heap.first()
    }

    /// The entry after the first: the first's earlier child.
    pub(super) fn second(&self) -> Option<&Entry> {
        self.heap.get(1..self.heap.len().min(3)).and_then(|children| children.iter().min_by_key(|e| e.key))
    }

    pub(super) fn len(&self) -> usize {
        self.heap.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Every entry, in no order, leaving the heap empty.
    pub(super) fn drain(&mut self) -> std::vec::Drain<'_, Entry> {
        self.heap.drain(..)
    }
}
