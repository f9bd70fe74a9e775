//! Requests by id, and where each is.

use crate::id_window::IdWindow;
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

/// Requests by id, while they are unanswered.
#[derive(Debug, Default)]
pub(super) struct Book(IdWindow<Entry>);

impl Book {
    pub(super) fn next_id(&self) -> RequestId {
        RequestId(self.0.next_id())
    }

    pub(super) fn insert(&mut self, entry: Entry) {
        debug_assert_eq!(entry.info.id, self.next_id());
        self.0.push(entry);
    }

    pub(super) fn get(&self, id: RequestId) -> Option<&Entry> {
        self.0.get(id.0)
    }

    pub(super) fn prefetch(&self, id: RequestId) {
        self.0.prefetch(id.0);
    }

    pub(super) fn get_mut(&mut self, id: RequestId) -> Option<&mut Entry> {
        self.0.get_mut(id.0)
    }

    /// Takes the request out (it is answered).
    pub(super) fn remove(&mut self, id: RequestId) -> Option<Entry> {
        self.0.remove(id.0)
    }

    /// Requests admitted and not answered.
    pub(super) fn open(&self) -> usize {
        self.0.open()
    }

    pub(super) fn unanswered(&self) -> impl Iterator<Item = &Entry> {
        self.0.iter()
    }
}

#[cfg(test)]
impl Book {
    pub(super) fn slots_len(&self) -> usize {
        self.0.span()
    }
}
