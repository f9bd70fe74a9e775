//! Requests by id. Ids are handed out in order, so the book is a window over a deque: the
//! oldest unanswered request bounds its size, and a lookup is an index.

use std::collections::VecDeque;

use crate::instance::InstanceId;
use crate::request::{RequestId, RequestInfo};

/// Where a request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// With the policy, to run at pipeline stage `stage` (0: the first, or the whole model).
    Waiting { stage: u16 },
    /// In the batch on this instance.
    Running(InstanceId),
}

#[derive(Debug, Clone)]
pub(super) struct Entry {
    pub(super) info: RequestInfo,
    pub(super) place: Place,
    /// Its client left while it ran; it is answered `Cancelled` when its batch lets it go.
    pub(super) cancelled: bool,
    /// It was in a batch whose worker was lost and is running again: a second loss fails it.
    pub(super) retried: bool,
}

#[derive(Debug, Default)]
pub(super) struct Book {
    /// Id of `slots[0]`.
    base: u64,
    slots: VecDeque<Option<Entry>>,
    open: usize,
}

impl Book {
    pub(super) fn next_id(&self) -> RequestId {
        RequestId(self.base + self.slots.len() as u64)
    }

    pub(super) fn insert(&mut self, entry: Entry) {
        debug_assert_eq!(entry.info.id, self.next_id());
        self.slots.push_back(Some(entry));
        self.open += 1;
    }

    pub(super) fn get(&self, id: RequestId) -> Option<&Entry> {
        let at = id.0.checked_sub(self.base)?;
        self.slots.get(usize::try_from(at).ok()?)?.as_ref()
    }

    pub(super) fn get_mut(&mut self, id: RequestId) -> Option<&mut Entry> {
        let at = id.0.checked_sub(self.base)?;
        self.slots.get_mut(usize::try_from(at).ok()?)?.as_mut()
    }

    /// Takes the request out (it is answered); the window slides past answered ones.
    pub(super) fn remove(&mut self, id: RequestId) -> Option<Entry> {
        let at = usize::try_from(id.0.checked_sub(self.base)?).ok()?;
        let entry = self.slots.get_mut(at)?.take()?;
        self.open -= 1;
        while matches!(self.slots.front(), Some(None)) {
            self.slots.pop_front();
            self.base += 1;
        }
        Some(entry)
    }

    /// Requests admitted and not answered.
    pub(super) fn open(&self) -> usize {
        self.open
    }

    pub(super) fn unanswered(&self) -> impl Iterator<Item = &Entry> {
        self.slots.iter().flatten()
    }
}

#[cfg(test)]
impl Book {
    pub(super) fn slots_len(&self) -> usize {
        self.slots.len()
    }
}
