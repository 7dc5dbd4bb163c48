//! The udp link's same-host path (issue 15; on unless `UROCE_SHM=0`): two
//! uroce processes on one host exchange their RoCEv2
//! datagrams, ICRC included, through rings in memory they share instead of
//! the kernel's UDP. Nothing above the link changes: the datagrams are the
//! ones the udp link would send, parsed, captured and steered the same way;
//! the receiver trusts the ICRC they carry (`Integrity::SameHost`) instead
//! of computing it again.
//!
//! A link that owns `IP:4791` listens on the abstract Unix socket
//! `uroce/shm/IP`. Sending to a peer address for the first time, it
//! connects to the peer's name; if someone listens (a uroce process of the
//! same user on this host, in this network namespace), it passes a sealed
//! memfd with two rings, one each way, and the eventfd that wakes it, and
//! the peer answers with its own eventfd. Until that answer, and for peers
//! nobody listens for (asked again after [`RETRY`]), datagrams go by UDP.
//!
//! A reader about to sleep says so in the ring and checks it once more; a
//! writer that finds it asleep writes its eventfd: a busy pair makes no
//! system call per datagram. A peer that goes away closes its end of the
//! Unix socket: the channel is dropped and its datagrams go by UDP again,
//! to an address nobody answers (its QPs' peers time out, as on a network).
//! The processes share only the rings: neither maps the other's memory.

use super::gid::Gid;
use crate::sys::epoll::Epoll;
use crate::sys::shm::{self, RingPair, SharedMap};
use crate::sys::unix::{euid, peer_uid};
use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr as UnixAddr, UnixListener, UnixStream};
use std::time::{Duration, Instant};

/// The environment variable that turns the same-host path off (`0`): every
/// datagram by UDP, as a capture on `lo` (tcpdump) would show them.
pub const SHM_ENV: &str = "UROCE_SHM";

/// Whether the same-host path is on: unless `UROCE_SHM=0`.
pub fn enabled_by_env() -> bool {
    std::env::var(SHM_ENV).map_or(true, |v| v != "0")
}

/// How long after finding no listener for a peer address the link asks again.
pub const RETRY: Duration = Duration::from_secs(1);
/// Receives between two looks at the control sockets (a new peer, an answer,
/// a peer gone): one `epoll_wait` in this many on the hot path.
const LOOK_EVERY: u32 = 64;
const HELLO: &[u8; 8] = b"uroshm1h";
const WELCOME: &[u8; 8] = b"uroshm1w";
/// A control message: its magic and (a hello) the sender's address.
const MSG_LEN: usize = 24;

/// The abstract Unix socket name the link that owns `ip` listens on.
pub(crate) fn shm_name(ip: IpAddr, scope_id: u32) -> String {
    match scope_id {
        0 => format!("uroce/shm/{ip}"),
        s => format!("uroce/shm/{ip}%{s}"),
    }
}

/// One pair of processes.
struct Channel {
    /// The peer's address: known at once when this side connected, from
    /// its hello when the peer did.
    peer: Option<IpAddr>,
    ctl: UnixStream,
    /// `None` until the hello has come (the accepting side).
    rings: Option<RingPair>,
    /// What the peer writes to wake this side.
    mine: OwnedFd,
    /// What this side writes to wake the peer: `None` until it answered.
    theirs: Option<OwnedFd>,
}

impl Channel {
    fn ready(&self) -> bool {
        self.rings.is_some() && self.theirs.is_some()
    }
}

/// What a control socket said.
enum Word {
    Nothing,
    Gone,
    Message(usize, [u8; MSG_LEN], Vec<OwnedFd>),
}

/// The same-host channels of one udp link.
pub(crate) struct ShmPeers {
    local: IpAddr,
    scope_id: u32,
    listener: UnixListener,
    channels: Vec<Channel>,
    /// Peer addresses nobody listened for, and when that was found.
    unheard: HashMap<IpAddr, Instant>,
    /// The listener and the channels' control sockets.
    ctl: Epoll,
    /// The eventfds peers write to wake this side.
    wake: Epoll,
    recvs: u32,
    /// The next channel `pop` reads first (taking turns).
    next: usize,
}

impl ShmPeers {
    /// Listens for the peers of the link that owns `local`, in the link's
    /// wait set `aux`; `None` if the name is taken.
    pub(crate) fn listen(local: IpAddr, scope_id: u32, aux: &Epoll) -> Option<ShmPeers> {
        let addr = UnixAddr::from_abstract_name(shm_name(local, scope_id).as_bytes()).ok()?;
        let listener = UnixListener::bind_addr(&addr).ok()?;
        listener.set_nonblocking(true).ok()?;
        let (ctl, wake) = (Epoll::new().ok()?, Epoll::new().ok()?);
        ctl.add(listener.as_raw_fd()).ok()?;
        aux.add(ctl.fd()).ok()?;
        aux.add(wake.fd()).ok()?;
        let (channels, unheard, recvs, next) = (Vec::new(), HashMap::new(), 0, 0);
        Some(ShmPeers { local, scope_id, listener, channels, unheard, ctl, wake, recvs, next })
    }

    /// The ready channel to `peer`, connecting to it first if it may be on
    /// this host; `None`: send by UDP.
    pub(crate) fn channel_to(&mut self, peer: IpAddr) -> Option<usize> {
        if let Some(i) = self.channels.iter().position(|c| c.peer == Some(peer) && c.ready()) {
            return Some(i);
        }
        // No clock read per datagram: `look` forgets old refusals.
        let asked = self.channels.iter().any(|c| c.peer == Some(peer)) || self.unheard.contains_key(&peer);
        let may_ask = peer != self.local && peer.is_ipv4() == self.local.is_ipv4() && !asked;
        if may_ask && self.connect(peer).is_err() {
            self.unheard.insert(peer, Instant::now());
        }
        None
    }

    /// Connects to the link that owns `peer` and sends it the rings.
    fn connect(&mut self, peer: IpAddr) -> io::Result<()> {
        let ctl = shm::connect_abstract(shm_name(peer, self.scope_id).as_bytes())?;
        if peer_uid(ctl.as_fd())? != euid() {
            return Err(io::Error::new(io::ErrorKind::PermissionDenied, "another user's process"));
        }
        let (map, memfd) = SharedMap::create()?;
        let mine = shm::eventfd()?;
        shm::send_with_fds(ctl.as_fd(), &message(HELLO, Some(self.local)), &[memfd.as_raw_fd(), mine.as_raw_fd()])?;
        self.ctl.add(ctl.as_raw_fd())?;
        self.wake.add(mine.as_raw_fd())?;
        let rings = Some(RingPair::new(map, 0));
        self.channels.push(Channel { peer: Some(peer), ctl, rings, mine, theirs: None });
        Ok(())
    }

    /// Writes a datagram into channel `i`; `false` if its ring is full.
    pub(crate) fn push(&mut self, i: usize, src_port: u16, parts: &[&[u8]]) -> bool {
        self.channels[i].rings.as_mut().is_some_and(|r| r.push(src_port, parts))
    }

    /// Makes what was pushed visible, waking the peers that sleep.
    pub(crate) fn flush(&mut self) {
        for c in &mut self.channels {
            if let (Some(r), Some(theirs)) = (c.rings.as_mut(), c.theirs.as_ref()) {
                if r.publish() {
                    shm::signal(theirs.as_fd());
                }
            }
        }
    }

    /// The next datagram any channel holds, into `dst`: its sender's
    /// address and port and its length (0: a bad one, to skip).
    pub(crate) fn pop(&mut self, dst: &mut [u8]) -> Option<(IpAddr, u16, usize)> {
        let n = self.channels.len();
        for k in 0..n {
            let i = (self.next + k) % n;
            let c = &mut self.channels[i];
            let (Some(peer), Some(rings)) = (c.peer, c.rings.as_mut()) else { continue };
            match rings.pop(dst) {
                Ok(Some((len, port))) => {
                    self.next = i;
                    return Some((peer, port, len));
                }
                Ok(None) => {}
                // Indices no ring has: the peer is broken; forget it.
                Err(shm::Broken) => c.rings = None,
            }
        }
        None
    }

    /// After a receive: gives the slots read back and, now and then, looks
    /// at the control sockets. (The "asleep" flags stay: another thread of
    /// the process may be about to sleep on them; a writer clears each as
    /// it wakes the sleeper, so a busy pair pays one wake-up per sleep.)
    pub(crate) fn received(&mut self) {
        for r in self.channels.iter_mut().filter_map(|c| c.rings.as_mut()) {
            r.release();
        }
        self.recvs += 1;
        if self.recvs >= LOOK_EVERY {
            self.recvs = 0;
            self.look();
        }
    }

    /// Before the link's thread sleeps: whether it may (no datagram waits),
    /// each ring told that a writer must wake it.
    pub(crate) fn prepare_to_sleep(&mut self) -> bool {
        self.look();
        for c in &mut self.channels {
            shm::drain(c.mine.as_fd());
            if c.rings.as_mut().is_some_and(|r| !r.prepare_to_sleep()) {
                return false;
            }
        }
        true
    }

    /// New peers, answers to hellos, and peers gone; peer addresses that
    /// had no listener [`RETRY`] ago may be asked again.
    pub(crate) fn look(&mut self) {
        if !self.unheard.is_empty() {
            self.unheard.retain(|_, since| since.elapsed() < RETRY);
        }
        if !self.ctl.wait(Duration::ZERO).unwrap_or(false) {
            return;
        }
        while let Ok((ctl, _)) = self.listener.accept() {
            let _ = self.accept(ctl);
        }
        let mut i = 0;
        while i < self.channels.len() {
            let keep = match read_word(&self.channels[i].ctl) {
                Word::Nothing => true,
                Word::Gone => false,
                Word::Message(n, msg, fds) => self.take_word(i, n, &msg, fds),
            };
            // A channel whose rings broke (`pop`) goes too.
            let broken = self.channels[i].peer.is_some() && self.channels[i].rings.is_none();
            if keep && !broken {
                i += 1;
            } else {
                let c = self.channels.remove(i);
                self.ctl.remove(c.ctl.as_raw_fd());
                self.wake.remove(c.mine.as_raw_fd());
            }
        }
    }

    fn accept(&mut self, ctl: UnixStream) -> io::Result<()> {
        if peer_uid(ctl.as_fd())? != euid() {
            return Err(io::Error::new(io::ErrorKind::PermissionDenied, "another user's process"));
        }
        ctl.set_nonblocking(true)?;
        let mine = shm::eventfd()?;
        self.ctl.add(ctl.as_raw_fd())?;
        self.channels.push(Channel { peer: None, ctl, rings: None, mine, theirs: None });
        Ok(())
    }

    /// Takes message `msg` (`n` bytes, with `fds`) from channel `i`'s peer;
    /// whether the channel stays.
    fn take_word(&mut self, i: usize, n: usize, msg: &[u8; MSG_LEN], mut fds: Vec<OwnedFd>) -> bool {
        let c = &mut self.channels[i];
        let whole = n == MSG_LEN;
        match (c.rings.is_some(), c.theirs.is_some()) {
            // The accepting side: the hello with the rings and the peer's eventfd.
            (false, _) if c.peer.is_none() && whole && &msg[..8] == HELLO && fds.len() == 2 => {
                let theirs = fds.pop().expect("two descriptors");
                let Ok(map) = SharedMap::open(&fds[0]) else { return false };
                let answered = shm::send_with_fds(c.ctl.as_fd(), &message(WELCOME, None), &[c.mine.as_raw_fd()]);
                let (peer, mine) = (address(msg), c.mine.as_raw_fd());
                (c.peer, c.rings, c.theirs) = (Some(peer), Some(RingPair::new(map, 1)), Some(theirs));
                self.unheard.remove(&peer);
                answered.is_ok() && self.wake.add(mine).is_ok()
            }
            // The connecting side: the answer with the peer's eventfd.
            (true, false) if whole && &msg[..8] == WELCOME && fds.len() == 1 => {
                c.theirs = fds.pop();
                true
            }
            _ => false,
        }
    }

    /// Every descriptor, for a forked child to let go of.
    pub(crate) fn descriptors(&self) -> Vec<RawFd> {
        let mut fds = vec![self.listener.as_raw_fd(), self.ctl.fd(), self.wake.fd()];
        for c in &self.channels {
            fds.extend([c.ctl.as_raw_fd(), c.mine.as_raw_fd()]);
            fds.extend(c.theirs.as_ref().map(|t| t.as_raw_fd()));
        }
        fds
    }

    /// Ready channels (for tests and the stats).
    pub(crate) fn ready_peers(&self) -> usize {
        self.channels.iter().filter(|c| c.ready()).count()
    }
}

/// A control message: `magic`, then (a hello) the sender's address as a GID.
fn message(magic: &[u8; 8], from: Option<IpAddr>) -> [u8; MSG_LEN] {
    let mut m = [0u8; MSG_LEN];
    m[..8].copy_from_slice(magic);
    m[8..].copy_from_slice(&from.map(Gid::from_ip).unwrap_or_default().0);
    m
}

fn address(m: &[u8; MSG_LEN]) -> IpAddr {
    Gid(m[8..].try_into().expect("16 bytes")).ip()
}

fn read_word(ctl: &UnixStream) -> Word {
    let mut msg = [0u8; MSG_LEN];
    match shm::recv_with_fds(ctl.as_fd(), &mut msg) {
        Ok((0, _)) => Word::Gone,
        Ok((n, fds)) => Word::Message(n, msg, fds),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Word::Nothing,
        Err(_) => Word::Gone,
    }
}
