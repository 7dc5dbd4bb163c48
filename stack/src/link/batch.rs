//! The receive batch: slots a link fills and the caller owns.
//!
//! A link's receive writes frames straight into the batch's buffer (one
//! system call's worth), checks them, and keeps the RoCEv2 datagrams as
//! ranges of that buffer; then it lets go. The caller hands the whole batch
//! to the engine at once (one lock, one clock read), with no callback back
//! into the layer above while the link is busy. The buffer is reused from
//! batch to batch: it grows to the largest receive once and is never zeroed
//! again.

use super::{Integrity, RxDatagram};
use std::net::IpAddr;
use std::ops::Range;

/// Where one kept datagram lies in the batch's buffer, and what the link
/// learnt of it.
#[derive(Debug, Clone)]
struct Kept {
    peer: IpAddr,
    src_port: u16,
    local: IpAddr,
    at: Range<usize>,
    integrity: Integrity,
}

/// The fewest datagrams any link's receive asks the kernel for: a receive
/// that brings fewer found the queue empty.
pub const MIN_RECEIVE_BATCH: usize = 4;

/// How many datagrams a link's next receive asks the kernel for: twice
/// what the last receive brought, at least [`RxSizer::MIN`], at most the
/// link's slots. Every message asked for costs a header set up before the
/// system call, found or not, so an idle poll (most polls of a latency
/// test) asks for a few, and a stream grows to the full batch in a few
/// receives.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RxSizer {
    want: usize,
    max: usize,
}

impl RxSizer {
    pub const MIN: usize = MIN_RECEIVE_BATCH;

    pub fn new(max: usize) -> RxSizer {
        RxSizer { want: Self::MIN.min(max), max }
    }

    /// How many to ask for now.
    pub fn want(&self) -> usize {
        self.want
    }

    /// The last receive brought `got`.
    pub fn saw(&mut self, got: usize) {
        self.want = got.saturating_mul(2).clamp(Self::MIN.min(self.max), self.max);
    }
}

/// Received datagrams in slots the batch owns. See the module documentation.
#[derive(Debug, Default)]
pub struct RxBatch {
    /// Received bytes; `buf[..used]` is what this batch holds.
    buf: Vec<u8>,
    used: usize,
    kept: Vec<Kept>,
}

impl RxBatch {
    pub fn new() -> RxBatch {
        RxBatch::default()
    }

    /// How many datagrams the batch holds.
    pub fn len(&self) -> usize {
        self.kept.len()
    }

    pub fn is_empty(&self) -> bool {
        self.kept.is_empty()
    }

    /// Empties the batch, keeping its buffer for the next receive.
    pub fn clear(&mut self) {
        self.used = 0;
        self.kept.clear();
    }

    /// The datagrams, in the order they were received.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = RxDatagram<'_>> + '_ {
        self.kept.iter().map(|k| self.view(k))
    }

    fn view<'a>(&'a self, k: &Kept) -> RxDatagram<'a> {
        RxDatagram {
            peer: k.peer,
            src_port: k.src_port,
            local: k.local,
            roce: &self.buf[k.at.clone()],
            integrity: k.integrity,
        }
    }

    /// Copies a datagram in: for middleware that held it back, and tests.
    pub fn push(&mut self, d: &RxDatagram<'_>) {
        let start = self.used;
        self.area(d.roce.len()).copy_from_slice(d.roce);
        self.commit(d.roce.len());
        self.keep_at(d.peer, d.src_port, d.local, start..start + d.roce.len(), d.integrity);
    }

    /// `len` writable bytes after what the batch holds, for a link's receive
    /// call. They become part of the batch only through [`RxBatch::commit`].
    pub(crate) fn area(&mut self, len: usize) -> &mut [u8] {
        let end = self.used + len;
        if self.buf.len() < end {
            self.buf.resize(end, 0);
        }
        &mut self.buf[self.used..end]
    }

    /// Where the next [`RxBatch::area`] starts: add it to offsets within
    /// that area to get the buffer offsets [`RxBatch::keep_at`] takes.
    pub(crate) fn next_offset(&self) -> usize {
        self.used
    }

    /// Takes the first `len` bytes of the last area into the batch.
    pub(crate) fn commit(&mut self, len: usize) {
        self.used = (self.used + len).min(self.buf.len());
    }

    /// Committed bytes at `at`, for a link to check before it keeps them.
    pub(crate) fn bytes(&self, at: Range<usize>) -> &[u8] {
        &self.buf[at]
    }

    /// Keeps the datagram at `at` (buffer offsets inside committed bytes).
    pub(crate) fn keep_at(
        &mut self,
        peer: IpAddr,
        src_port: u16,
        local: IpAddr,
        at: Range<usize>,
        integrity: Integrity,
    ) {
        debug_assert!(at.end <= self.used, "a kept datagram lies in committed bytes");
        self.kept.push(Kept { peer, src_port, local, at, integrity });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn gram(roce: &[u8]) -> RxDatagram<'_> {
        let ip = IpAddr::V4(Ipv4Addr::LOCALHOST);
        RxDatagram { peer: ip, src_port: 7, local: ip, roce, integrity: Integrity::Unchecked }
    }

    #[test]
    fn pushed_and_kept_datagrams_come_out_in_order_and_clear_keeps_the_buffer() {
        let mut b = RxBatch::new();
        b.push(&gram(b"first"));
        let at = b.next_offset();
        b.area(64)[..6].copy_from_slice(b"second");
        b.commit(64);
        b.keep_at(IpAddr::V4(Ipv4Addr::LOCALHOST), 9, IpAddr::V4(Ipv4Addr::LOCALHOST), at..at + 6, Integrity::Icrc);
        let got: Vec<_> = b.iter().map(|d| (d.roce.to_vec(), d.src_port)).collect();
        assert_eq!(got, [(b"first".to_vec(), 7), (b"second".to_vec(), 9)]);
        let cap = b.buf.len();
        b.clear();
        assert!(b.is_empty() && b.iter().next().is_none());
        b.push(&gram(b"x"));
        assert_eq!((b.buf.len(), b.iter().next().unwrap().roce), (cap, &b"x"[..]));
    }

    #[test]
    fn a_receive_asks_for_twice_what_came_last() {
        let mut z = RxSizer::new(64);
        assert_eq!(z.want(), RxSizer::MIN);
        z.saw(4);
        assert_eq!(z.want(), 8);
        z.saw(8);
        z.saw(16);
        z.saw(32);
        assert_eq!(z.want(), 64, "a stream reaches the full batch");
        z.saw(64);
        assert_eq!(z.want(), 64);
        z.saw(0);
        assert_eq!(z.want(), RxSizer::MIN, "an idle poll asks for few");
        assert_eq!(RxSizer::new(2).want(), 2, "never beyond the slots");
    }
}
