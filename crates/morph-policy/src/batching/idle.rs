//! The idle instances, walked most recently idle first.

/// No instance: the end of the list.
const NONE: u32 = u32::MAX;

/// An idle instance's neighbours in the walk's order.
#[derive(Debug, Clone, Copy)]
struct Link {
    prev: u32,
    next: u32,
    idle: bool,
}

const APART: Link = Link { prev: NONE, next: NONE, idle: false };

/// Idle instances as a list linked through their ids: an instance its batch just freed goes
/// first, one that just came up goes last (a fresh cluster is walked lowest id first). The
/// instance a batch starts on is then the one whose records the last batch end left in the
/// cache; at tens of thousands of instances the lowest idle id's records have mostly left it.
/// Insertion, removal and the walk's next step are each O(1).
#[derive(Debug)]
pub(super) struct IdleSet {
    links: Vec<Link>,
    first: u32,
    last: u32,
}

impl Default for IdleSet {
    fn default() -> Self {
        Self { links: Vec::new(), first: NONE, last: NONE }
    }
}

impl IdleSet {
    /// `id` just became idle: it is walked first.
    pub(super) fn push_first(&mut self, id: usize) {
        self.remove(id);
        self.link(id, NONE, self.first);
    }

    /// `id` just came up: it is walked after every instance already idle.
    pub(super) fn push_last(&mut self, id: usize) {
        self.remove(id);
        self.link(id, self.last, NONE);
    }

    pub(super) fn remove(&mut self, id: usize) {
        let Some(&Link { prev, next, idle: true }) = self.links.get(id) else { return };
        self.join(prev, next);
        self.links[id] = APART;
    }

    /// Puts `id` between `prev` and `next`, which are neighbours (or the list's ends).
    fn link(&mut self, id: usize, prev: u32, next: u32) {
        if self.links.len() <= id {
            self.links.resize(id + 1, APART);
        }
        let key = u32::try_from(id).expect("instance ids fit in u32");
        self.links[id] = Link { prev, next, idle: true };
        self.join(prev, key);
        self.join(key, next);
    }

    /// Makes `prev` and `next` neighbours; either may be the list's end (`NONE`).
    fn join(&mut self, prev: u32, next: u32) {
        match prev {
            NONE => self.first = next,
            p => self.links[p as usize].next = next,
        }
        match next {
            NONE => self.last = prev,
            n => self.links[n as usize].prev = prev,
        }
    }

    /// No instance is idle.
    pub(super) fn is_empty(&self) -> bool {
        self.first == NONE
    }

    /// The idle instances, most recently idle first.
    pub(super) fn walk(&self) -> impl Iterator<Item = usize> + '_ {
        let mut at = self.first;
        std::iter::from_fn(move || {
            (at != NONE).then(|| {
                let id = at as usize;
                at = self.links[id].next;
                id
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn walked(idle: &IdleSet) -> Vec<usize> {
        idle.walk().collect()
    }

    #[test]
    fn freed_instances_go_first_and_instances_up_go_last() {
        let mut idle = IdleSet::default();
        for id in [0, 1, 2, 3] {
            idle.push_last(id);
        }
        assert_eq!(walked(&idle), vec![0, 1, 2, 3], "a fresh cluster: lowest id first");
        for id in [0, 2] {
            idle.remove(id);
        }
        assert_eq!(walked(&idle), vec![1, 3]);
        idle.push_first(2);
        idle.push_first(0);
        assert_eq!(walked(&idle), vec![0, 2, 1, 3], "the last freed first");
        idle.push_last(7);
        assert_eq!(walked(&idle), vec![0, 2, 1, 3, 7]);
        idle.push_first(3);
        assert_eq!(walked(&idle), vec![3, 0, 2, 1, 7], "an idle instance pushed again moves, once");
        for id in [3, 7, 999] {
            idle.remove(id);
        }
        assert_eq!(walked(&idle), vec![0, 2, 1], "both ends removed; an id never seen is a no-op");
        for id in [0, 2, 1] {
            idle.remove(id);
        }
        assert!(walked(&idle).is_empty());
        idle.push_first(5);
        assert_eq!(walked(&idle), vec![5]);
    }
}
