//! One udp address shared by several processes, as two programs share the
//! kernel's `rxe0` (a server and a client both given the host's IP).
//!
//! The first process to open `udp:IP` listens on the abstract Unix socket
//! `uroce/udp/IP`, then binds `IP:4791`, and is the address's **owner**
//! (the name first: a process that holds it answers joiners even before
//! its port is bound). A later process finds the name taken, binds `IP` on a
//! port of its own (which it sends from: the ICRC covers the port, and
//! receivers take any source port) and joins as a **tenant** through that
//! Unix socket. Peers always send to port 4791, so every packet reaches the
//! owner, which steers each one ([`uroce_transport::cm::steer`]): a packet
//! for a QP, a listener or a connection a tenant claimed goes to that
//! tenant's port, from `IP:4791` (which only the owner can send from), behind
//! a `Forwarded` header that keeps the sender's address and how far the
//! owner checked its ICRC, and carries a secret token the owner gave that
//! tenant. Everything else is the owner's.
//!
//! Tenants claim QPNs and listened-to service IDs as they make them, and the
//! comm IDs their CM messages announce as they send them; a claim of what
//! another process holds is refused, so two processes never own one QPN or
//! listen on one port. The owner counts as a claimant too. A tenant whose
//! owner exits takes the port over or joins whoever did
//! ([`super::udp::UdpLink`]), and claims again what it holds; what the
//! owner forwarded before it went (the last answers of a program that
//! exits at once) is taken from the old socket first.
//!
//! Only processes of one user share: each end checks the other's
//! credentials (`SO_PEERCRED`).

use super::gid::Gid;
use crate::sys::epoll::Epoll;
use crate::sys::unix::{euid, peer_uid};
use std::collections::{HashMap, HashSet, VecDeque};
use std::io::{self, Read, Write};
use std::net::IpAddr;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr as UnixAddr, UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;
use uroce_transport::cm::steer::{sender_comm_id, steer};
pub use uroce_transport::cm::SteerKey;

/// The abstract Unix socket name of the owner of `ip` (`scope_id`: the
/// interface of a link-local address).
pub(crate) fn owner_name(ip: IpAddr, scope_id: u32) -> String {
    match scope_id {
        0 => format!("uroce/udp/{ip}"),
        s => format!("uroce/udp/{ip}%{s}"),
    }
}

/// One control message, either way: an operation, a key's kind and value.
const MSG_LEN: usize = 12;
const HELLO: u8 = 1;
const CLAIM: u8 = 2;
const RELEASE: u8 = 3;
const REPLY: u8 = 4;
/// A reply's status: granted, or held by another process.
const GRANTED: u8 = 0;
const TAKEN: u8 = 1;
/// How long a tenant waits for the owner's answer: the owner's thread
/// answers at once, unless the owner is closing.
const ANSWER_WAIT: Duration = Duration::from_secs(2);
/// The comm IDs a tenant keeps claimed (the oldest are let go beyond).
const MAX_COMM_IDS: usize = 65536;

fn encode(op: u8, key: Option<SteerKey>, value: u64) -> [u8; MSG_LEN] {
    let (kind, value) = match key {
        None => (0, value),
        Some(SteerKey::Qpn(q)) => (1, u64::from(q)),
        Some(SteerKey::Service(s)) => (2, s),
        Some(SteerKey::CommId(c)) => (3, u64::from(c)),
    };
    let mut m = [0u8; MSG_LEN];
    m[0] = op;
    m[1] = kind;
    m[4..].copy_from_slice(&value.to_le_bytes());
    m
}

fn decode(m: &[u8]) -> (u8, Option<SteerKey>, u64) {
    let mut v = [0u8; 8];
    v.copy_from_slice(&m[4..MSG_LEN]);
    let value = u64::from_le_bytes(v);
    let key = match m[1] {
        1 => Some(SteerKey::Qpn(value as u32)),
        2 => Some(SteerKey::Service(value)),
        3 => Some(SteerKey::CommId(value as u32)),
        _ => None,
    };
    (m[0], key, value)
}

/// A udp link's part in sharing its address.
pub(crate) enum Share {
    /// Shares with nobody: the link holds the port but another user's
    /// process holds the owner's name, or a tenant found no owner to join
    /// after its own left.
    Alone,
    Owner(Owner),
    Tenant(Tenant),
}

impl Share {
    /// The owner, if this is an owner's share with tenants (the only case
    /// where a packet may be another process's).
    pub(crate) fn owner_with_tenants(&self) -> Option<&Owner> {
        match self {
            Share::Owner(o) if o.has_tenants() => Some(o),
            _ => None,
        }
    }

    /// The Unix sockets: the owner's listener and tenants, a tenant's link to its owner.
    pub(crate) fn descriptors(&self) -> Vec<RawFd> {
        match self {
            Share::Alone => Vec::new(),
            Share::Owner(o) => o.descriptors(),
            Share::Tenant(t) => vec![t.fd()],
        }
    }
}

/// Who holds a key, for the owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Holder {
    Owner,
    Tenant(u64),
}

/// A tenant as the owner sees it.
struct TenantConn {
    id: u64,
    /// A secret the owner gives the tenant in its hello's answer and puts
    /// in every packet it forwards: a process that got hold of port 4791
    /// while the owner was gone cannot pass packets off as forwarded.
    token: u64,
    stream: UnixStream,
    /// Its UDP port, from its hello: where its packets go.
    port: Option<u16>,
    /// Bytes of a message not yet whole.
    partial: Vec<u8>,
}

/// The owner's side. Its tenants are served by a thread of the link's own
/// (`serve`), so that they get their answers while the owner's program
/// does other things (a program that moves its device by hand, blocked in
/// an out-of-band exchange); the link's receive path reads the table under
/// its lock only while there are tenants.
pub(crate) struct Owner {
    control: Arc<Mutex<Control>>,
    has_tenants: Arc<AtomicBool>,
    /// Written to stop the thread.
    wake: UnixStream,
    thread: Option<JoinHandle<()>>,
    /// The process that made the thread (a forked child's copy has none).
    pid: u32,
}

/// What the owner's thread serves: the listener, the tenants, who holds what.
struct Control {
    listener: UnixListener,
    tenants: Vec<TenantConn>,
    holders: HashMap<SteerKey, Holder>,
    next_id: u64,
    /// Whether `tenants` has any, for the receive path: set before a new
    /// tenant's first answer, so that no packet of a granted claim is taken
    /// for the owner's.
    has_tenants: Arc<AtomicBool>,
}

/// How long the owner's thread sleeps at most between two looks at its stop flag.
const OWNER_IDLE: Duration = Duration::from_millis(500);

impl Owner {
    /// Listens for tenants under `name`; `None` when that cannot be (the
    /// name is held: another network namespace's owner is not ours to
    /// share with, nor is a process's that squats on it).
    pub(crate) fn listen(name: &str) -> Option<Owner> {
        let addr = UnixAddr::from_abstract_name(name.as_bytes()).ok()?;
        let listener = UnixListener::bind_addr(&addr).ok()?;
        listener.set_nonblocking(true).ok()?;
        let (wake, woken) = UnixStream::pair().ok()?;
        let set = Epoll::new().ok()?;
        set.add(listener.as_raw_fd()).ok()?;
        set.add(woken.as_raw_fd()).ok()?;
        let has_tenants = Arc::new(AtomicBool::new(false));
        let tenants = Vec::new();
        let control =
            Control { listener, tenants, holders: HashMap::new(), next_id: 1, has_tenants: has_tenants.clone() };
        let control = Arc::new(Mutex::new(control));
        let c = control.clone();
        let thread =
            std::thread::Builder::new().name("uroce-share".into()).spawn(move || serve(&c, &set, woken)).ok()?;
        Some(Owner { control, has_tenants, wake, thread: Some(thread), pid: std::process::id() })
    }

    fn control(&self) -> MutexGuard<'_, Control> {
        self.control.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn has_tenants(&self) -> bool {
        self.has_tenants.load(Ordering::Acquire)
    }

    /// The port and token of the tenant a received packet belongs to, if
    /// it is not the owner's.
    pub(crate) fn route(&self, roce: &[u8]) -> Option<(u16, u64)> {
        self.control().route(roce)
    }

    /// [`Owner::route`] for a batch, under one take of the table's lock:
    /// `out[i]` for the `i`th packet (`None`: a packet not to route).
    pub(crate) fn route_each<'a>(&self, roces: impl Iterator<Item = Option<&'a [u8]>>, out: &mut [Option<(u16, u64)>]) {
        let c = self.control();
        for (o, roce) in out.iter_mut().zip(roces) {
            *o = roce.and_then(|r| c.route(r));
        }
    }

    /// The owner's own claim: refused if a tenant holds the key.
    pub(crate) fn claim(&mut self, key: SteerKey) -> io::Result<()> {
        let mut c = self.control();
        match c.holders.get(&key) {
            Some(Holder::Tenant(_)) => Err(taken(key)),
            _ => {
                c.holders.insert(key, Holder::Owner);
                Ok(())
            }
        }
    }

    pub(crate) fn release(&mut self, key: SteerKey) {
        let mut c = self.control();
        if c.holders.get(&key) == Some(&Holder::Owner) {
            c.holders.remove(&key);
        }
    }

    /// The listener's and the tenants' sockets, if the table is free to look at.
    fn descriptors(&self) -> Vec<RawFd> {
        let Ok(c) = self.control.try_lock() else { return Vec::new() };
        std::iter::once(c.listener.as_raw_fd()).chain(c.tenants.iter().map(|t| t.stream.as_raw_fd())).collect()
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        let thread = self.thread.take();
        if self.pid != std::process::id() {
            // A forked child's copy: the thread is the parent's.
            std::mem::forget(thread);
            return;
        }
        let _ = (&self.wake).write_all(&[1]);
        if let Some(t) = thread {
            let _ = t.join();
        }
    }
}

/// The owner's thread: serves the tenants as they speak, until woken to stop.
fn serve(control: &Mutex<Control>, set: &Epoll, mut woken: UnixStream) {
    let _ = woken.set_nonblocking(true);
    loop {
        let ready = set.wait(OWNER_IDLE).unwrap_or(false);
        let mut b = [0u8; 1];
        let stop = ready && !matches!(woken.read(&mut b), Err(ref e) if e.kind() == io::ErrorKind::WouldBlock);
        if stop {
            return;
        }
        control.lock().unwrap_or_else(|e| e.into_inner()).serve(set);
    }
}

impl Control {
    /// The port and token of the tenant that claimed what `roce` is for.
    fn route(&self, roce: &[u8]) -> Option<(u16, u64)> {
        let Holder::Tenant(id) = *self.holders.get(&steer(roce)?)? else { return None };
        let t = self.tenants.iter().find(|t| t.id == id)?;
        Some((t.port?, t.token))
    }

    /// Takes in new tenants and their messages, answers them, and forgets
    /// those that left (with all they held).
    fn serve(&mut self, aux: &Epoll) {
        // Bounded: the listener's backlog.
        for _ in 0..64 {
            let Ok((stream, _)) = self.listener.accept() else { break };
            let same_user = peer_uid(stream.as_fd()).is_ok_and(|u| u == euid());
            if !same_user || stream.set_nonblocking(true).is_err() || aux.add(stream.as_raw_fd()).is_err() {
                continue;
            }
            let token = rand::random::<u64>();
            self.tenants.push(TenantConn { id: self.next_id, token, stream, port: None, partial: Vec::new() });
            self.next_id += 1;
            self.has_tenants.store(true, Ordering::Release);
        }
        let mut gone = Vec::new();
        for i in 0..self.tenants.len() {
            if !self.serve_tenant(i) {
                gone.push(i);
            }
        }
        for i in gone.into_iter().rev() {
            let t = self.tenants.remove(i);
            aux.remove(t.stream.as_raw_fd());
            self.holders.retain(|_, h| *h != Holder::Tenant(t.id));
        }
        self.has_tenants.store(!self.tenants.is_empty(), Ordering::Release);
    }

    /// Reads and answers tenant `i`'s messages; `false` once it is gone.
    fn serve_tenant(&mut self, i: usize) -> bool {
        let mut buf = [0u8; 64 * MSG_LEN];
        // Bounded: each pass reads or ends.
        for _ in 0..64 {
            match self.tenants[i].stream.read(&mut buf) {
                Ok(0) => return false,
                Ok(n) => self.tenants[i].partial.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
        let partial = std::mem::take(&mut self.tenants[i].partial);
        let whole = partial.len() / MSG_LEN * MSG_LEN;
        for m in partial[..whole].chunks(MSG_LEN) {
            if !self.answer(i, m) {
                return false;
            }
        }
        self.tenants[i].partial = partial[whole..].to_vec();
        true
    }

    /// Acts on one message of tenant `i`; `false` if it cannot be answered.
    fn answer(&mut self, i: usize, m: &[u8]) -> bool {
        let id = self.tenants[i].id;
        let (op, key, value) = decode(m);
        let mut answer = 0;
        let status = match (op, key) {
            (HELLO, _) => {
                self.tenants[i].port = u16::try_from(value).ok().filter(|p| *p != 0);
                answer = self.tenants[i].token;
                GRANTED
            }
            (CLAIM, Some(k)) => match self.holders.get(&k) {
                Some(h) if *h != Holder::Tenant(id) => TAKEN,
                _ => {
                    self.holders.insert(k, Holder::Tenant(id));
                    GRANTED
                }
            },
            (RELEASE, Some(k)) => {
                if self.holders.get(&k) == Some(&Holder::Tenant(id)) {
                    self.holders.remove(&k);
                }
                return true;
            }
            _ => return false,
        };
        self.tenants[i].stream.write_all(&reply(status, answer)).is_ok()
    }
}

/// An answer: granted or taken, and a value (a hello's token).
fn reply(status: u8, value: u64) -> [u8; MSG_LEN] {
    let mut m = encode(REPLY, None, value);
    m[1] = status;
    m
}

fn taken(key: SteerKey) -> io::Error {
    io::Error::new(io::ErrorKind::AddrInUse, format!("{key} is held by another process on this address"))
}

/// A tenant's side: its connection to the owner and what it claimed.
pub(crate) struct Tenant {
    control: UnixStream,
    /// The owner's secret for this tenant: in every packet it forwards.
    token: u64,
    claims: HashSet<SteerKey>,
    /// The comm IDs claimed, oldest first.
    comm_ids: VecDeque<u32>,
}

impl Tenant {
    /// Joins the owner listening under `name`, the tenant's UDP socket on `port`.
    pub(crate) fn join(name: &str, port: u16) -> io::Result<Tenant> {
        let addr = UnixAddr::from_abstract_name(name.as_bytes())?;
        let control = UnixStream::connect_addr(&addr)?;
        if peer_uid(control.as_fd())? != euid() {
            return Err(io::Error::new(io::ErrorKind::PermissionDenied, "the address is another user's"));
        }
        control.set_read_timeout(Some(ANSWER_WAIT))?;
        let mut t = Tenant { control, token: 0, claims: HashSet::new(), comm_ids: VecDeque::new() };
        t.token = t.ask(encode(HELLO, None, u64::from(port)))?;
        Ok(t)
    }

    pub(crate) fn fd(&self) -> RawFd {
        self.control.as_raw_fd()
    }

    /// What the tenant holds (to claim again from a new owner).
    pub(crate) fn claims(&self) -> impl Iterator<Item = SteerKey> + '_ {
        self.claims.iter().copied()
    }

    /// Whether a forwarded packet's header carries this tenant's token.
    pub(crate) fn is_from_owner(&self, f: &Forwarded) -> bool {
        f.token == self.token
    }

    /// Sends `msg` and waits for the answer: granted (with its value), or an error.
    fn ask(&mut self, msg: [u8; MSG_LEN]) -> io::Result<u64> {
        self.control.write_all(&msg)?;
        let mut reply = [0u8; MSG_LEN];
        self.control.read_exact(&mut reply).map_err(|e| match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => io::Error::new(
                io::ErrorKind::TimedOut,
                "the process that holds this address did not answer (is it closing?)",
            ),
            _ => e,
        })?;
        let (op, _, value) = decode(&reply);
        match (op, reply[1]) {
            (REPLY, GRANTED) => Ok(value),
            (REPLY, TAKEN) => Err(io::Error::from(io::ErrorKind::AddrInUse)),
            _ => Err(io::Error::new(io::ErrorKind::InvalidData, "a garbled answer from the address's owner")),
        }
    }

    pub(crate) fn claim(&mut self, key: SteerKey) -> io::Result<()> {
        if self.claims.contains(&key) {
            return Ok(());
        }
        self.ask(encode(CLAIM, Some(key), 0)).map(drop).map_err(|e| match e.kind() {
            io::ErrorKind::AddrInUse => taken(key),
            _ => e,
        })?;
        self.claims.insert(key);
        Ok(())
    }

    pub(crate) fn release(&mut self, key: SteerKey) {
        if self.claims.remove(&key) {
            let _ = self.control.write_all(&encode(RELEASE, Some(key), 0));
        }
    }

    /// Claims the comm ID a CM message being sent announces, so that its
    /// answers come here: best effort (a refused one, another process's
    /// connection with the same random ID, leaves this one to time out).
    pub(crate) fn note_sent(&mut self, roce: &[u8]) {
        let Some(id) = sender_comm_id(roce) else { return };
        let key = SteerKey::CommId(id);
        if self.claims.contains(&key) || self.claim(key).is_err() {
            return;
        }
        self.comm_ids.push_back(id);
        if self.comm_ids.len() > MAX_COMM_IDS {
            if let Some(old) = self.comm_ids.pop_front() {
                self.release(SteerKey::CommId(old));
            }
        }
    }

    /// Whether the owner has gone (its end of the connection closed). The
    /// owner speaks only when asked, so there is nothing else to read.
    pub(crate) fn owner_gone(&mut self) -> bool {
        let mut b = [0u8; MSG_LEN];
        if self.control.set_nonblocking(true).is_err() {
            return true;
        }
        let r = self.control.read(&mut b);
        let _ = self.control.set_nonblocking(false);
        match r {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => !matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted),
        }
    }
}

/// The header before a packet the owner hands to a tenant: who sent it, to
/// which address, and how far the owner checked its ICRC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Forwarded {
    pub peer: IpAddr,
    pub src_port: u16,
    pub local: IpAddr,
    pub integrity: super::Integrity,
    /// The receiving tenant's token.
    pub token: u64,
}

impl Forwarded {
    pub(crate) const LEN: usize = 52;
    const MAGIC: [u8; 4] = *b"uRfw";

    pub(crate) fn emit(&self) -> [u8; Self::LEN] {
        use super::Integrity;
        let mut h = [0u8; Self::LEN];
        h[..4].copy_from_slice(&Self::MAGIC);
        let (code, ident) = match self.integrity {
            Integrity::Icrc => (0, 0),
            Integrity::IcrcButIpId { ident } => (1, ident),
            Integrity::Mac => (2, 0),
            Integrity::Unchecked => (3, 0),
            Integrity::SameHost => (4, 0),
        };
        h[4] = code;
        h[6..8].copy_from_slice(&ident.to_be_bytes());
        h[8..10].copy_from_slice(&self.src_port.to_be_bytes());
        h[12..28].copy_from_slice(&Gid::from_ip(self.peer).0);
        h[28..44].copy_from_slice(&Gid::from_ip(self.local).0);
        h[44..52].copy_from_slice(&self.token.to_le_bytes());
        h
    }

    pub(crate) fn parse(h: &[u8]) -> Option<Forwarded> {
        use super::Integrity;
        if h.len() < Self::LEN || h[..4] != Self::MAGIC {
            return None;
        }
        let ident = u16::from_be_bytes([h[6], h[7]]);
        let integrity = match h[4] {
            0 => Integrity::Icrc,
            1 => Integrity::IcrcButIpId { ident },
            2 => Integrity::Mac,
            4 => Integrity::SameHost,
            _ => Integrity::Unchecked,
        };
        let ip = |b: &[u8]| Gid(b.try_into().expect("16 bytes")).ip();
        let mut token = [0u8; 8];
        token.copy_from_slice(&h[44..52]);
        Some(Forwarded {
            peer: ip(&h[12..28]),
            src_port: u16::from_be_bytes([h[8], h[9]]),
            local: ip(&h[28..44]),
            integrity,
            token: u64::from_le_bytes(token),
        })
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::link::Integrity;

    #[test]
    fn messages_and_headers_read_back() {
        for key in [SteerKey::Qpn(0xabcdef), SteerKey::Service(0x0106_0000_0000_4e21), SteerKey::CommId(7)] {
            assert_eq!(
                decode(&encode(CLAIM, Some(key), 0)),
                (CLAIM, Some(key), decode(&encode(CLAIM, Some(key), 0)).2)
            );
        }
        let f = Forwarded {
            peer: "10.1.2.3".parse().unwrap(),
            src_port: 49152,
            local: "fd00::5".parse().unwrap(),
            integrity: Integrity::IcrcButIpId { ident: 0x1234 },
            token: 0x0123_4567_89ab_cdef,
        };
        assert_eq!(Forwarded::parse(&f.emit()), Some(f));
        let every = [Integrity::Icrc, Integrity::Mac, Integrity::SameHost, Integrity::Unchecked];
        for integrity in every {
            let g = Forwarded { integrity, ..f };
            assert_eq!(Forwarded::parse(&g.emit()), Some(g));
        }
        assert_eq!(Forwarded::parse(&[0u8; Forwarded::LEN]), None);
    }

    #[test]
    fn tenants_claim_and_are_steered_to() {
        let name = format!("uroce/test/{}-{}", std::process::id(), line!());
        // The owner's thread answers the tenant's questions.
        let mut owner = Owner::listen(&name).unwrap();
        owner.claim(SteerKey::Qpn(0x11)).unwrap();
        let mut t = Tenant::join(&name, 40000).unwrap();
        t.claim(SteerKey::Qpn(0x22)).unwrap();
        assert_eq!(t.claim(SteerKey::Qpn(0x11)).unwrap_err().kind(), io::ErrorKind::AddrInUse);
        assert!(owner.has_tenants());
        let mut p = [0u8; 16];
        p[5..8].copy_from_slice(&[0, 0, 0x22]);
        assert_eq!(owner.route(&p), Some((40000, t.token)));
        // Only a header with the tenant's secret passes for the owner's.
        let local = "127.0.0.1".parse().unwrap();
        let mut f = Forwarded { peer: local, src_port: 4791, local, integrity: Integrity::Icrc, token: t.token };
        assert!(t.is_from_owner(&f));
        f.token ^= 1;
        assert!(!t.is_from_owner(&f));
        p[7] = 0x11;
        assert_eq!(owner.route(&p), None);
        assert_eq!(owner.claim(SteerKey::Qpn(0x22)).unwrap_err().kind(), io::ErrorKind::AddrInUse);
        // A tenant that leaves lets go of all it held (bounded wait for the thread to see it).
        drop(t);
        for _ in 0..500 {
            if !owner.has_tenants() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(!owner.has_tenants());
        owner.claim(SteerKey::Qpn(0x22)).unwrap();
    }
}
