//! Mutex guards that outlive a panic elsewhere: the state behind Morph's mutexes stays
//! consistent between statements, so a poisoned lock is taken as it is.

use std::sync::{Mutex, MutexGuard};

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
