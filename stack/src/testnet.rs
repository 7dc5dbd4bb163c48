//! Loopback addresses for tests, handed out so that any number of test
//! processes can run at once without two of them binding the same address.
//!
//! Every RoCEv2 endpoint listens on UDP port 4791, so two tests that pick the
//! same loopback address collide. A [`TestNet`] is a /24 of loopback space,
//! `127.A.B.0/24` with `A` in 100..=254 (hand-written addresses in `127.0/16`
//! stay clear of it), reserved for as long as the value lives by a socket
//! bound to its host 0 on port 4791, which no endpoint uses. Another process
//! asking for a net tries that same bind, fails, and moves on to another net.
//! Users' own CI can use it the same way.
//!
//! Tests that need a real interface (a veth, a bridge) make network
//! namespaces of their own instead, with [`Namespaces`] (root only).
//!
//! A test of the *default* device (no `-d`: the first free address from
//! `127.0.0.1` up, which the tools and rdma_cm pick) cannot move to a net of
//! its own. It holds a [`default_loopback_guard`] instead: a socket bound to
//! `127.0.0.1:4790`, a port no endpoint uses, so such tests run one at a time
//! across all test processes while the others keep running in parallel.

mod namespaces;

pub use namespaces::Namespaces;
use rand::Rng;
use std::io::ErrorKind;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

/// How many random nets to try before giving up: with 39,000 of them, failing
/// means something other than a busy neighbour is wrong.
const TRIES: usize = 1000;

/// A reserved `127.A.B.0/24`; dropping it frees the net.
#[derive(Debug)]
pub struct TestNet {
    a: u8,
    b: u8,
    _reservation: UdpSocket,
}

impl TestNet {
    /// Reserves a free net. Panics, saying why, when none can be reserved
    /// (loopback down, or no socket can be bound at all).
    pub fn new() -> TestNet {
        let mut rng = rand::thread_rng();
        let mut last_error = None;
        for _ in 0..TRIES {
            let (a, b) = (rng.gen_range(100..=254u8), rng.gen::<u8>());
            let host0 = SocketAddr::from((Ipv4Addr::new(127, a, b, 0), 4791));
            match UdpSocket::bind(host0) {
                Ok(socket) => return TestNet { a, b, _reservation: socket },
                Err(e) => last_error = Some(e),
            }
        }
        panic!("no free loopback net in 127.100-254.x.0/24 after {TRIES} tries (last: {last_error:?}); is lo up?");
    }

    /// The address of `host` (1..=254) in this net.
    pub fn ip(&self, host: u8) -> Ipv4Addr {
        assert!((1..=254).contains(&host), "host {host} is not in 1..=254");
        Ipv4Addr::new(127, self.a, self.b, host)
    }

    /// The udp device spec of `host`: `udp:127.A.B.host`.
    pub fn udp(&self, host: u8) -> String {
        format!("udp:{}", self.ip(host))
    }

    /// The net's first three octets, `127.A.B`, for building addresses.
    pub fn prefix(&self) -> String {
        format!("127.{}.{}", self.a, self.b)
    }
}

impl Default for TestNet {
    fn default() -> TestNet {
        TestNet::new()
    }
}

/// The lock of the default loopback addresses: one port beside RoCEv2's, on
/// the first default address, which no endpoint binds.
const DEFAULT_LOOPBACK_LOCK: (Ipv4Addr, u16) = (Ipv4Addr::new(127, 0, 0, 1), 4790);

/// How long to wait for the other holders: longer than any one test that
/// holds it runs, so that a wait this long means a holder is stuck.
const DEFAULT_LOOPBACK_WAIT: Duration = Duration::from_secs(120);

/// The default loopback addresses (`127.0.0.1` up), held by one test at a
/// time across processes; dropping it lets the next holder in.
#[derive(Debug)]
pub struct DefaultLoopbackGuard {
    _lock: UdpSocket,
}

/// Waits (polling every 20 ms) until no other test holds the default loopback
/// addresses, and holds them. Panics, saying why, after two minutes, or at
/// once when the lock cannot be bound for another reason than its being held.
pub fn default_loopback_guard() -> DefaultLoopbackGuard {
    let (ip, port) = DEFAULT_LOOPBACK_LOCK;
    let deadline = Instant::now() + DEFAULT_LOOPBACK_WAIT;
    loop {
        match UdpSocket::bind((ip, port)) {
            Ok(lock) => return DefaultLoopbackGuard { _lock: lock },
            Err(e) if e.kind() != ErrorKind::AddrInUse => {
                panic!("cannot hold the default loopback addresses: binding UDP {ip}:{port} failed: {e}; is lo up?")
            }
            Err(_) if Instant::now() >= deadline => panic!(
                "the default loopback addresses stayed held for {DEFAULT_LOOPBACK_WAIT:?}: a test holding them \
                 is stuck, or another program has UDP {ip}:{port}"
            ),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn two_nets_alive_at_once_differ_and_a_dropped_one_is_free_again() {
        let one = TestNet::new();
        let two = TestNet::new();
        assert_ne!(one.prefix(), two.prefix());
        assert_eq!(one.udp(3), format!("udp:{}.3", one.prefix()));
        let taken = SocketAddr::from((Ipv4Addr::new(127, one.a, one.b, 0), 4791));
        assert!(UdpSocket::bind(taken).is_err(), "a live net must stay reserved");
        drop(one);
        assert!(UdpSocket::bind(taken).is_ok(), "a dropped net must be free again");
    }

    #[test]
    fn the_default_loopback_guard_has_one_holder_at_a_time() {
        let first = default_loopback_guard();
        let (got, second) = std::sync::mpsc::channel();
        let waiter = std::thread::spawn(move || {
            let guard = default_loopback_guard();
            got.send(()).unwrap();
            drop(guard);
        });
        assert!(second.recv_timeout(Duration::from_millis(200)).is_err(), "a second holder must wait for the first");
        drop(first);
        // Another process's test may hold it in between: the waiter's own limit bounds this.
        waiter.join().unwrap();
        assert!(second.try_recv().is_ok(), "the second holder got it once the first was dropped");
    }
}
