//! Event queues behind a real descriptor with the kernel's `read()` semantics:
//! completion channels, the async event descriptor and rdma_cm's event
//! channel. One record per event, in order, none lost or merged; the
//! descriptor is blocking unless the application sets O_NONBLOCK, and ready
//! for poll/epoll while a record waits.
//!
//! The descriptor is one end of a `socketpair(AF_UNIX, SOCK_SEQPACKET)`:
//! datagram boundaries give one record per `read()`, and a reader gets
//! EAGAIN, EINTR and readiness from the kernel as with any socket. Each
//! record is an 8-byte sequence number; the event itself waits in process
//! memory under that number, so whoever reads the record gets exactly that
//! event. The library writes with MSG_DONTWAIT: when the socket's buffer is
//! full, sequence numbers wait in an overflow queue and go out, in order, as
//! records are taken.

use crate::error::Error;
use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{recv, send, socketpair, AddressFamily, MsgFlags, SockFlag, SockType};
use std::collections::{BTreeMap, VecDeque};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::Mutex;
use std::time::Duration;

/// A queue of `T`s whose arrivals are records on a descriptor.
pub(crate) struct EventQueue<T> {
    /// The application's end: read, polled, maybe set O_NONBLOCK.
    reader: OwnedFd,
    /// The library's end, written with MSG_DONTWAIT.
    writer: OwnedFd,
    pending: Mutex<Pending<T>>,
}

struct Pending<T> {
    next_seq: u64,
    /// Events whose record was written or waits in `overflow`.
    by_seq: BTreeMap<u64, T>,
    /// Records the socket had no room for yet, oldest first.
    overflow: VecDeque<u64>,
}

impl<T> EventQueue<T> {
    /// A new, empty queue; `verb` names the call in an error.
    pub fn new(verb: &'static str) -> Result<EventQueue<T>, Error> {
        let (reader, writer) = socketpair(AddressFamily::Unix, SockType::SeqPacket, None, SockFlag::SOCK_CLOEXEC)
            .map_err(|e| Error::Os { verb, err: e.into() })?;
        let pending = Pending { next_seq: 0, by_seq: BTreeMap::new(), overflow: VecDeque::new() };
        Ok(EventQueue { reader, writer, pending: Mutex::new(pending) })
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, Pending<T>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `event` and writes its record.
    pub fn push(&self, event: T) {
        let mut pending = self.pending();
        let seq = pending.next_seq;
        pending.next_seq += 1;
        pending.by_seq.insert(seq, event);
        pending.overflow.push_back(seq);
        self.write_overflow(&mut pending);
    }

    /// Writes waiting records until the socket is full.
    fn write_overflow(&self, pending: &mut Pending<T>) {
        while let Some(&seq) = pending.overflow.front() {
            match send(self.writer.as_raw_fd(), &seq.to_ne_bytes(), MsgFlags::MSG_DONTWAIT) {
                Ok(_) => {
                    pending.overflow.pop_front();
                }
                Err(Errno::EINTR) => continue,
                // Full (EAGAIN/ENOBUFS): the next take writes it. The reader
                // end cannot be closed while `self` lives.
                Err(_) => return,
            }
        }
    }

    /// Takes the next event whose record can be read, waiting up to `wait`
    /// for one. Several threads may take at once; each gets its own events.
    pub fn take(&self, wait: Duration) -> Option<T> {
        if let Some(event) = self.try_take() {
            return Some(event);
        }
        if wait.is_zero() {
            return None;
        }
        let ms = u16::try_from(wait.as_micros().div_ceil(1000)).unwrap_or(u16::MAX);
        let mut fds = [PollFd::new(self.reader.as_fd(), PollFlags::POLLIN)];
        // EINTR or a timeout: the caller's deadline decides what comes next.
        let _ = poll(&mut fds, PollTimeout::from(ms));
        self.try_take()
    }

    /// Takes the next event without waiting (whatever O_NONBLOCK says).
    pub fn try_take(&self) -> Option<T> {
        let mut record = [0u8; 8];
        let seq = loop {
            match recv(self.reader.as_raw_fd(), &mut record, MsgFlags::MSG_DONTWAIT) {
                Ok(8) => break u64::from_ne_bytes(record),
                Err(Errno::EINTR) => continue,
                // Empty (EAGAIN), or a stray short record: nothing taken.
                _ => return None,
            }
        };
        let mut pending = self.pending();
        self.write_overflow(&mut pending);
        pending.by_seq.remove(&seq)
    }

    /// The event whose record the application read from the descriptor
    /// itself (a C program's `read(channel->fd)`), if it is one of ours.
    pub fn take_record(&self, record: &[u8]) -> Option<T> {
        let seq = u64::from_ne_bytes(record.try_into().ok()?);
        let mut pending = self.pending();
        self.write_overflow(&mut pending);
        pending.by_seq.remove(&seq)
    }

    /// Takes back the events not yet read for which `unwanted` holds, with
    /// their records, so that the descriptor is readable only while a
    /// wanted event waits: as the kernel's rdma_cm drops the events of an
    /// ID it destroys, and a program polling the descriptor must not wake
    /// for them (a read that then blocks would never return). Returns how
    /// many went. A record another thread reads meanwhile is still
    /// honoured: it names its event, or none (taken back), which readers
    /// skip.
    pub fn retract(&self, unwanted: impl Fn(&T) -> bool) -> usize {
        let mut pending = self.pending();
        let before = pending.by_seq.len();
        pending.by_seq.retain(|_, e| !unwanted(e));
        let gone = before - pending.by_seq.len();
        if gone == 0 {
            return 0;
        }
        // The records in the socket, in order: those of kept events go back
        // in front of the ones still waiting to be written.
        let mut in_socket = VecDeque::new();
        let mut record = [0u8; 8];
        while let Ok(8) = recv(self.reader.as_raw_fd(), &mut record, MsgFlags::MSG_DONTWAIT) {
            in_socket.push_back(u64::from_ne_bytes(record));
        }
        in_socket.extend(pending.overflow.drain(..));
        in_socket.retain(|s| pending.by_seq.contains_key(s));
        pending.overflow = in_socket;
        self.write_overflow(&mut pending);
        gone
    }

    /// Events queued and not yet taken.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.pending().by_seq.len()
    }
}

impl<T> AsFd for EventQueue<T> {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.reader.as_fd()
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use nix::fcntl::{fcntl, FcntlArg, OFlag};
    use nix::unistd::read;
    use std::sync::Arc;

    fn readable(q: &EventQueue<u32>) -> bool {
        let mut fds = [PollFd::new(q.as_fd(), PollFlags::POLLIN)];
        poll(&mut fds, PollTimeout::ZERO).unwrap() == 1
    }

    #[test]
    fn one_record_per_event_in_order_and_ready_only_while_one_waits() {
        let q = EventQueue::new("test").unwrap();
        assert!(!readable(&q));
        for v in 0..3000u32 {
            q.push(v);
        }
        // More events than the socket holds: the rest wait in the overflow
        // queue and none is lost or merged.
        assert!(!q.pending().overflow.is_empty(), "the socket took every record: make the test push more");
        for v in 0..3000u32 {
            assert!(readable(&q));
            assert_eq!(q.take(Duration::ZERO), Some(v));
        }
        assert!(!readable(&q));
        assert_eq!(q.take(Duration::from_millis(5)), None);
        assert_eq!(q.len(), 0);
    }

    #[test]
    fn events_taken_back_leave_no_record_and_the_rest_in_order() {
        let q = EventQueue::new("test").unwrap();
        for v in 0..3000u32 {
            q.push(v);
        }
        // Odd ones taken back, some of whose records are in the socket and
        // some still waiting for room.
        assert_eq!(q.retract(|v| v % 2 == 1), 1500);
        for v in (0..3000u32).step_by(2) {
            assert_eq!(q.take(Duration::ZERO), Some(v));
        }
        assert!(!readable(&q), "a record of an event taken back is still readable");
        q.push(9);
        assert_eq!(q.retract(|&v| v == 9), 1);
        assert!(!readable(&q));
        assert_eq!(q.retract(|_| true), 0);
    }

    #[test]
    fn the_descriptor_blocks_until_an_event_unless_set_nonblocking() {
        let q = Arc::new(EventQueue::new("test").unwrap());
        let pusher = {
            let q = q.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                q.push(7u32);
            })
        };
        // A blocking read, as a C program's read(channel->fd) does.
        let mut record = [0u8; 8];
        assert_eq!(read(q.as_fd().as_raw_fd(), &mut record), Ok(8));
        pusher.join().unwrap();
        assert_eq!(q.pending().by_seq.remove(&u64::from_ne_bytes(record)), Some(7));

        fcntl(q.as_fd().as_raw_fd(), FcntlArg::F_SETFL(OFlag::O_NONBLOCK)).unwrap();
        assert_eq!(read(q.as_fd().as_raw_fd(), &mut record), Err(Errno::EAGAIN));
    }
}
