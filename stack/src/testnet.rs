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

use rand::Rng;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};

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
}
