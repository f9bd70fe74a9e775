//! Values by sequential id. Ids are handed out in order, so the values still open are a window
//! over a deque: the oldest open one bounds its size, and a lookup is an index.

use std::collections::VecDeque;

#[derive(Debug)]
pub struct IdWindow<T> {
    /// Id of `slots[0]`.
    base: u64,
    slots: VecDeque<Option<T>>,
    open: usize,
}

impl<T> Default for IdWindow<T> {
    fn default() -> Self {
        Self { base: 0, slots: VecDeque::new(), open: 0 }
    }
}

impl<T> IdWindow<T> {
    /// The id the next [`IdWindow::push`] gets.
    pub fn next_id(&self) -> u64 {
        self.base + self.slots.len() as u64
    }

    /// Opens `value` under the next id, and returns it.
    pub fn push(&mut self, value: T) -> u64 {
        let id = self.next_id();
        self.slots.push_back(Some(value));
        self.open += 1;
        id
    }

    pub fn get(&self, id: u64) -> Option<&T> {
        let at = id.checked_sub(self.base)?;
        self.slots.get(usize::try_from(at).ok()?)?.as_ref()
    }

    /// Asks the cache for `id`'s slot ahead of a read or a write (a hint: no effect on values).
    pub fn prefetch(&self, id: u64) {
        let at = id.checked_sub(self.base).and_then(|at| usize::try_from(at).ok());
        if let Some(slot) = at.and_then(|at| self.slots.get(at)) {
            crate::prefetch::prefetch(slot);
        }
    }

    pub fn get_mut(&mut self, id: u64) -> Option<&mut T> {
        let at = id.checked_sub(self.base)?;
        self.slots.get_mut(usize::try_from(at).ok()?)?.as_mut()
    }

    /// Closes `id` and takes its value; the window slides past closed ones.
    pub fn remove(&mut self, id: u64) -> Option<T> {
        let at = usize::try_from(id.checked_sub(self.base)?).ok()?;
        let value = self.slots.get_mut(at)?.take()?;
        self.open -= 1;
        while matches!(self.slots.front(), Some(None)) {
            self.slots.pop_front();
            self.base += 1;
        }
        Some(value)
    }

    /// Values open.
    pub fn open(&self) -> usize {
        self.open
    }

    /// The open values, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.slots.iter().flatten()
    }

    /// Ids the window spans (open or closed between open ones).
    pub fn span(&self) -> usize {
        self.slots.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_slides_past_closed_ids_only() {
        let mut w = IdWindow::default();
        let ids: Vec<u64> = (0..4).map(|v| w.push(v * 10)).collect();
        assert_eq!(ids, vec![0, 1, 2, 3]);
        assert_eq!(w.remove(1), Some(10));
        assert_eq!((w.span(), w.open()), (4, 3), "id 0 still open holds the window");
        assert_eq!(w.remove(0), Some(0));
        assert_eq!((w.span(), w.open()), (2, 2));
        assert_eq!(w.get(2), Some(&20));
        assert_eq!(w.remove(1), None, "closed once");
        assert_eq!(w.iter().copied().collect::<Vec<_>>(), vec![20, 30]);
        assert_eq!(w.next_id(), 4);
    }
}
