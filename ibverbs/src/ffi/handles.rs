//! The objects C holds pointers to, boxed with the uroce handle behind them
//! (the C struct first, so the pointer C holds is the box's), and the set of
//! those alive: a pointer that is not among them is refused with EINVAL
//! instead of followed, and none is freed twice.

use crate::explain::explain;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

/// Whether an object that `users` other objects still use may go: EBUSY
/// (as the kernel answers) while any does. `what` names the users.
pub fn unused(users: &AtomicUsize, verb: &str, what: &str) -> Result<(), i32> {
    match users.load(Ordering::Acquire) {
        0 => Ok(()),
        n => {
            explain(verb, &format!("{n} {what} still use it: destroy them first"));
            Err(libc::EBUSY)
        }
    }
}

/// The addresses of the live objects of one kind, and the numbers they are
/// given (`handle`, as the kernel numbers each kind's objects).
pub struct Live {
    set: Mutex<BTreeSet<usize>>,
    handles: AtomicU32,
}

impl Live {
    pub const fn new() -> Live {
        Live { set: Mutex::new(BTreeSet::new()), handles: AtomicU32::new(0) }
    }

    fn set(&self) -> MutexGuard<'_, BTreeSet<usize>> {
        self.set.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The `handle` of the next object of this kind.
    pub fn next_handle(&self) -> u32 {
        self.handles.fetch_add(1, Ordering::Relaxed)
    }

    /// Leaks `object` into the set and returns the pointer C will hold.
    pub fn adopt<T>(&self, object: Box<T>) -> *mut T {
        let raw = Box::into_raw(object);
        self.set().insert(raw as usize);
        raw
    }

    /// The object at `ptr`, if it is alive.
    pub fn get<T>(&self, ptr: *const T) -> Option<&'static T> {
        if ptr.is_null() || !self.set().contains(&(ptr as usize)) {
            return None;
        }
        // SAFETY: ptr was made by `adopt` from a Box<T> of this set's kind
        // and has not been released (it is in the set); it stays allocated
        // until `release`, which C calls only when it no longer uses it.
        Some(unsafe { &*ptr })
    }

    /// [`Live::get`], with `enter` run on the object under the set's lock,
    /// so that a [`Live::release`] after it sees what `enter` did (a thread
    /// counted in as the object's user, which the release then honours).
    pub fn get_entered<T>(&self, ptr: *const T, enter: impl FnOnce(&T)) -> Option<&'static T> {
        let set = self.set();
        if ptr.is_null() || !set.contains(&(ptr as usize)) {
            return None;
        }
        // SAFETY: as in `get`; the set's lock is held, so it is not released meanwhile.
        let object = unsafe { &*ptr };
        enter(object);
        Some(object)
    }

    /// Every live object (for what the process does at exit).
    pub fn all<T>(&self) -> Vec<&'static T> {
        let set = self.set();
        // SAFETY: as in `find`; the references outlive the lock only as far
        // as the objects' own lifetimes, which C ends by releasing them.
        set.iter().map(|&a| unsafe { &*(a as *const T) }).collect()
    }

    /// The first live object for which `pred` holds (a walk over them all:
    /// for rare lookups, such as the object an asynchronous event names).
    pub fn find<T>(&self, pred: impl Fn(&T) -> bool) -> Option<&'static T> {
        let set = self.set();
        // SAFETY: each address was made by `adopt` from a Box<T> of this
        // set's kind and is not released while the set's lock is held.
        set.iter().map(|&a| unsafe { &*(a as *const T) }).find(|o| pred(o))
    }

    /// The object at `ptr` on the data path (`ibv_poll_cq`, `ibv_post_send`,
    /// ...), where rdma-core follows the pointer with no check and a lock
    /// shared by every thread would cost each call: NULL is refused, any
    /// other pointer is taken to be a live object of this kind.
    ///
    /// # Safety
    /// `ptr` is NULL or was made by [`Live::adopt`] of this set and not yet
    /// released: rdma-core's contract for the inline verbs, which reach
    /// these through the ops of the context that made the object.
    pub unsafe fn on_data_path<T>(&self, ptr: *const T) -> Option<&'static T> {
        // SAFETY: the caller's contract above.
        unsafe { ptr.as_ref() }
    }

    /// Takes the object at `ptr` back out of the set, if it is alive and
    /// `may_release` says so (e.g. no QP still uses this CQ).
    pub fn release<T>(&self, ptr: *mut T, may_release: impl FnOnce(&T) -> Result<(), i32>) -> Result<Box<T>, i32> {
        let mut set = self.set();
        if ptr.is_null() || !set.contains(&(ptr as usize)) {
            return Err(libc::EINVAL);
        }
        // SAFETY: as in `get`; the set's lock is held, so no release races this one.
        may_release(unsafe { &*ptr })?;
        set.remove(&(ptr as usize));
        // SAFETY: made by `adopt` from a Box<T>, now out of the set: this is its one release.
        Ok(unsafe { Box::from_raw(ptr) })
    }
}
