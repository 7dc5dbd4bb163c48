//! Memory the application owns, touched as a NIC touches it: the stack copies
//! in and out through raw pointers while the application may read and write
//! the same bytes, so no Rust reference to them ever exists. Three promises
//! make that usable, as on hardware:
//! - a write places its bytes in address order and stores its last byte last,
//!   with Release ordering: a thread that sees a WRITE's last byte change
//!   (perftest's write_lat spins on it) sees every byte before it;
//! - the atomics are single atomic operations on the memory itself, so they
//!   also serialise with the application's own atomics on the word;
//! - nothing here frees or moves the memory: whoever registered it keeps it
//!   alive and in place until deregistration has returned (the driver's lock
//!   makes deregistration wait for any access in flight).

use std::alloc::{self, Layout};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use uroce_transport::engine::{AtomicOp, MrStorage};

/// A registered range of application memory: a pointer and a length.
#[derive(Clone)]
pub struct RawRegion {
    ptr: NonNull<u8>,
    len: usize,
    /// Keeps an [`AppBuffer`] alive when the region is one.
    _owner: Option<Arc<AppBuffer>>,
}

// SAFETY: a RawRegion only names memory; every access goes through raw
// pointer copies or atomics (no references), and `RawRegion::new`'s contract
// makes the memory valid from any thread until deregistration.
unsafe impl Send for RawRegion {}
// SAFETY: as for Send: shared access is raw copies and atomics only.
unsafe impl Sync for RawRegion {}

impl RawRegion {
    /// The `len` bytes at `ptr`, as `ibv_reg_mr` takes them.
    ///
    /// # Safety
    /// `ptr..ptr + len` must be memory of this process, valid for reads and
    /// writes from any thread, that stays allocated and in place until the
    /// region that holds it has been deregistered. The application may keep
    /// using the bytes meanwhile, as it may with a NIC.
    pub unsafe fn new(ptr: NonNull<u8>, len: usize) -> RawRegion {
        RawRegion { ptr, len, _owner: None }
    }

    /// The address of byte 0.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    fn at(&self, offset: usize, len: usize) -> *mut u8 {
        assert!(offset.checked_add(len).is_some_and(|end| end <= self.len), "access outside the region");
        // SAFETY: `offset + len <= self.len`, checked above, so the pointer
        // stays inside the allocation `new` was given.
        unsafe { self.ptr.as_ptr().add(offset) }
    }

    /// The 64-bit word at `offset`, when its address is 8-byte aligned.
    fn word(&self, offset: usize) -> Option<&AtomicU64> {
        let p = self.at(offset, 8).cast::<u64>();
        // SAFETY: `p..p + 8` is inside the region (checked by `at`) and
        // aligned (checked here); the memory outlives `self` by `new`'s
        // contract, and every access to it from the stack is atomic or raw.
        p.is_aligned().then(|| unsafe { AtomicU64::from_ptr(p) })
    }
}

impl RawRegion {
    /// Copies bytes out by raw pointer.
    pub fn load(&self, offset: usize, dst: &mut [u8]) {
        let src = self.at(offset, dst.len());
        // SAFETY: `src..src + dst.len()` is inside the region (checked by
        // `at`); `dst` is our own buffer, so the two cannot overlap.
        unsafe { std::ptr::copy_nonoverlapping(src, dst.as_mut_ptr(), dst.len()) }
    }

    /// Copies bytes in by raw pointer, the last byte last with Release.
    pub fn store(&self, offset: usize, src: &[u8]) {
        let Some((&last, body)) = src.split_last() else { return };
        let dst = self.at(offset, src.len());
        // SAFETY: `dst..dst + src.len()` is inside the region (checked by
        // `at`); `src` is our own buffer, so the two cannot overlap.
        unsafe { std::ptr::copy_nonoverlapping(body.as_ptr(), dst, body.len()) };
        // SAFETY: the last byte is inside the region (same check); a byte is
        // always aligned for AtomicU8.
        let last_byte = unsafe { AtomicU8::from_ptr(dst.add(body.len())) };
        last_byte.store(last, Ordering::Release);
    }
}

impl MrStorage for RawRegion {
    fn len(&self) -> usize {
        self.len
    }

    fn read(&self, offset: usize, dst: &mut [u8]) {
        self.load(offset, dst);
    }

    fn write(&mut self, offset: usize, src: &[u8]) {
        self.store(offset, src);
    }

    fn atomic(&mut self, offset: usize, op: AtomicOp) -> u64 {
        // A host address that is not 8-byte aligned (the I/O virtual address
        // peers name is, but `ibv_reg_mr_iova` may map it anywhere): a read and
        // a write, atomic against the stack only, as no CPU offers an atomic
        // on a misaligned word.
        let Some(word) = self.word(offset) else { return op.by_copy(self, offset) };
        match op {
            AtomicOp::CompareSwap { compare, swap } => {
                word.compare_exchange(compare, swap, Ordering::AcqRel, Ordering::Acquire).unwrap_or_else(|v| v)
            }
            AtomicOp::FetchAdd { add } => word.fetch_add(add, Ordering::AcqRel),
        }
    }

    fn atomic_store(&mut self, offset: usize, bytes: [u8; 8]) {
        match self.word(offset) {
            Some(word) => word.store(u64::from_ne_bytes(bytes), Ordering::Release),
            None => self.store(offset, &bytes),
        }
    }
}

/// A zeroed, page-aligned heap buffer the application owns and shares with the
/// stack: the safe way to register memory by pointer. Its accessors follow
/// the same contract as the stack's: raw copies and atomics, no references.
pub struct AppBuffer {
    ptr: NonNull<u8>,
    layout: Layout,
}

// SAFETY: the buffer is only reached through raw copies and atomics.
unsafe impl Send for AppBuffer {}
// SAFETY: as for Send.
unsafe impl Sync for AppBuffer {}

impl AppBuffer {
    /// A zeroed buffer of `len` bytes (at least one), aligned to 4096.
    pub fn new(len: usize) -> Arc<AppBuffer> {
        let layout = Layout::from_size_align(len.max(1), 4096).expect("a buffer smaller than isize::MAX");
        // SAFETY: the layout's size is at least 1.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).unwrap_or_else(|| alloc::handle_alloc_error(layout));
        Arc::new(AppBuffer { ptr, layout })
    }

    /// The buffer's length in bytes.
    pub fn len(&self) -> usize {
        self.layout.size()
    }

    /// Never true: a buffer holds at least one byte.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The address of byte 0.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// The whole buffer as a region to register; it keeps the buffer alive.
    pub fn region(self: &Arc<Self>) -> RawRegion {
        RawRegion { ptr: self.ptr, len: self.len(), _owner: Some(self.clone()) }
    }

    /// Copies bytes out; panics past the end.
    pub fn read(&self, offset: usize, dst: &mut [u8]) {
        self.region_view().load(offset, dst)
    }

    /// Copies bytes in, the last byte last with Release; panics past the end.
    pub fn write(&self, offset: usize, src: &[u8]) {
        self.region_view().store(offset, src)
    }

    /// The byte at `offset`, loaded with Acquire: spin on it to wait for a
    /// WRITE whose last byte lands there.
    pub fn load_acquire(&self, offset: usize) -> u8 {
        let p = self.region_view().at(offset, 1);
        // SAFETY: the byte is inside the buffer (checked by `at`).
        unsafe { AtomicU8::from_ptr(p) }.load(Ordering::Acquire)
    }

    /// The native-endian word at an 8-byte-aligned `offset`, loaded atomically.
    pub fn load_u64(&self, offset: usize) -> u64 {
        let view = self.region_view();
        view.word(offset).expect("an 8-byte-aligned offset").load(Ordering::Acquire)
    }

    /// A copy of the whole buffer.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = vec![0; self.len()];
        self.read(0, &mut v);
        v
    }

    /// A region over the buffer that does not keep it alive: for `&self` use.
    fn region_view(&self) -> RawRegion {
        RawRegion { ptr: self.ptr, len: self.len(), _owner: None }
    }
}

impl Drop for AppBuffer {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout; every RawRegion that
        // could reach it holds an Arc to it, so none is left.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn copies_and_atomics_stay_inside_and_are_exact() {
        let buf = AppBuffer::new(64);
        let mut region = buf.region();
        region.write(3, &[1, 2, 3]);
        let mut out = [0u8; 5];
        region.read(2, &mut out);
        assert_eq!(out, [0, 1, 2, 3, 0]);
        assert_eq!(region.atomic(8, AtomicOp::FetchAdd { add: 5 }), 0);
        assert_eq!(region.atomic(8, AtomicOp::CompareSwap { compare: 5, swap: 9 }), 5);
        assert_eq!(region.atomic(8, AtomicOp::CompareSwap { compare: 5, swap: 1 }), 9);
        assert_eq!(buf.load_u64(8), 9);
        region.atomic_store(16, 7u64.to_ne_bytes());
        assert_eq!(buf.load_u64(16), 7);
        // A misaligned word (offset 33 of a page-aligned buffer) still works.
        region.write(33, &[4]);
        assert_eq!(region.atomic(33, AtomicOp::FetchAdd { add: 1 }), u64::from_ne_bytes([4, 0, 0, 0, 0, 0, 0, 0]));
        assert_eq!(buf.load_acquire(33), 5);
    }

    /// A write big enough to take milliseconds: a thread that sees its last
    /// byte must see the byte before it too.
    #[test]
    fn the_last_byte_of_a_write_lands_last() {
        const LEN: usize = 16 << 20;
        let buf = AppBuffer::new(LEN);
        let spinner = {
            let buf = buf.clone();
            std::thread::spawn(move || {
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
                while buf.load_acquire(LEN - 1) != 2 {
                    assert!(std::time::Instant::now() < deadline, "the last byte never landed");
                    std::hint::spin_loop();
                }
                buf.load_acquire(LEN - 2)
            })
        };
        let mut message = vec![1u8; LEN];
        message[LEN - 1] = 2;
        buf.region().write(0, &message);
        assert_eq!(spinner.join().unwrap(), 1, "the last byte was visible before the one before it");
    }

    #[test]
    #[should_panic(expected = "outside the region")]
    fn an_access_past_the_end_panics_instead_of_writing() {
        AppBuffer::new(16).region().write(10, &[0; 7]);
    }

    #[test]
    fn a_region_keeps_its_buffer_alive() {
        let buf = AppBuffer::new(8);
        let region = buf.region();
        drop(buf);
        let mut b = [9u8; 8];
        region.read(0, &mut b);
        assert_eq!(b, [0; 8]);
    }
}
