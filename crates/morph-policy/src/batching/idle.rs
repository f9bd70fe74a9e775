//! The idle instances, by id, walked lowest first.

use fixedbitset::{Block, FixedBitSet};

/// Bits in one block of the set.
const BLOCK_BITS: usize = Block::BITS as usize;

/// Idle instances by id. Every block below `floor` is known empty, so that a walk at tens of
/// thousands of instances, whose lowest ids are the busiest (they are taken first), starts at
/// the first block that may hold an idle one instead of at id 0.
#[derive(Debug, Default)]
pub(super) struct IdleSet {
    bits: FixedBitSet,
    floor: usize,
}

impl IdleSet {
    pub(super) fn insert(&mut self, id: usize) {
        self.bits.grow_and_insert(id);
        self.floor = self.floor.min(id / BLOCK_BITS);
    }

    pub(super) fn remove(&mut self, id: usize) {
        if id < self.bits.len() {
            self.bits.remove(id);
        }
    }

    /// The idle instances in ascending id order.
    pub(super) fn lowest_first(&mut self) -> impl Iterator<Item = usize> + '_ {
        let blocks = self.bits.as_slice();
        while self.floor < blocks.len() && blocks[self.floor] == 0 {
            self.floor += 1;
        }
        let floor = self.floor;
        blocks[floor..].iter().enumerate().flat_map(move |(i, &block)| {
            let base = (floor + i) * BLOCK_BITS;
            let mut left = block;
            std::iter::from_fn(move || {
                (left != 0).then(|| {
                    let bit = left.trailing_zeros() as usize;
                    left &= left - 1;
                    base + bit
                })
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walks_ascending_across_blocks_and_past_emptied_ones() {
        let mut idle = IdleSet::default();
        for id in [200, 3, 64, 65, 130] {
            idle.insert(id);
        }
        assert_eq!(idle.lowest_first().collect::<Vec<_>>(), vec![3, 64, 65, 130, 200]);
        for id in [3, 64, 65] {
            idle.remove(id);
        }
        assert_eq!(idle.lowest_first().collect::<Vec<_>>(), vec![130, 200]);
        assert_eq!(idle.floor, 2, "the walk moved past the emptied blocks");
        idle.insert(1);
        assert_eq!(idle.lowest_first().collect::<Vec<_>>(), vec![1, 130, 200]);
        idle.remove(999);
        assert_eq!(idle.lowest_first().count(), 3, "removing an id never seen is a no-op");
    }
}
