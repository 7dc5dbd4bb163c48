//! Inline data buffers kept for reuse: a post copies its inline bytes into
//! one and the WR's completion gives it back, so a steady stream of inline
//! posts (a ping-pong's) allocates nothing per message.

/// Buffers kept at most (more WRs than this in flight at once allocate).
const KEEP: usize = 64;
/// A buffer grown past this is let go instead of kept.
const KEEP_CAPACITY: usize = 1024;

#[derive(Debug, Default)]
pub(crate) struct InlineBufs(Vec<Vec<u8>>);

impl InlineBufs {
    /// A buffer holding a copy of `data`.
    pub fn copy_of(&mut self, data: &[u8]) -> Vec<u8> {
        let mut buf = self.take_empty();
        buf.extend_from_slice(data);
        buf
    }

    /// A buffer of `len` zeroed bytes, for the caller to fill.
    pub fn zeroed(&mut self, len: usize) -> Vec<u8> {
        let mut buf = self.take_empty();
        buf.resize(len, 0);
        buf
    }

    /// A kept buffer, emptied, or a new one.
    fn take_empty(&mut self) -> Vec<u8> {
        let mut buf = self.0.pop().unwrap_or_default();
        buf.clear();
        buf
    }

    /// Takes back a WR's buffer when the WR is done with it.
    pub fn give_back(&mut self, buf: Vec<u8>) {
        if self.0.len() < KEEP && buf.capacity() <= KEEP_CAPACITY {
            self.0.push(buf);
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn a_buffer_given_back_is_handed_out_again() {
        let mut bufs = InlineBufs::default();
        let first = bufs.copy_of(b"hello");
        let at = first.as_ptr();
        bufs.give_back(first);
        let again = bufs.zeroed(3);
        assert_eq!((again.as_ptr(), again.as_slice()), (at, &[0u8; 3][..]), "the same allocation, refilled");
        bufs.give_back(again);
        assert_eq!(bufs.copy_of(b"ab"), b"ab");
        bufs.give_back(Vec::with_capacity(KEEP_CAPACITY + 1));
        assert!(bufs.0.is_empty(), "an oversized buffer is let go");
    }
}
