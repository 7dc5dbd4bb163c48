//! The GID table as rxe fills it.
//!
//! rxe's table (RoCE v2 entries only): index 0 the link-local GID
//! `fe80::` + the EUI-64 of the interface's MAC, index 1 the IPv4-mapped GID
//! `::ffff:a.b.c.d` of the interface's IPv4 address, then further IPv6
//! addresses. The kernel fills the entries after the default one in the
//! order it finds the addresses (IPv4 first, then IPv6) with no gaps, so on
//! an interface without IPv4 index 1 is the first IPv6 address. So `-g 1` /
//! `-x 1` mean the same on uroce as on rxe.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The GID is the transport's: one type from the wire to the verbs.
pub use uroce_transport::engine::Gid;

/// The GID table of a port: index 0 link-local, then the IPv4-mapped GID
/// (when the link has an IPv4 address), then other IPv6 addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GidTable {
    entries: Vec<Gid>,
    /// Entries kept where rxe has them, so that index N means the same, but
    /// that this link cannot send from (a udp link sends from the one address
    /// its socket is bound to).
    not_sent_from: Vec<usize>,
}

impl GidTable {
    pub fn new(link_local: Gid, ipv4: Option<Ipv4Addr>, other_ipv6: &[Ipv6Addr]) -> GidTable {
        let mut entries = vec![link_local];
        entries.extend(ipv4.map(|a| Gid::from_ip(IpAddr::V4(a))));
        for a in other_ipv6 {
            let g = Gid::from_ip(IpAddr::V6(*a));
            if g != link_local {
                entries.push(g);
            }
        }
        GidTable { entries, not_sent_from: Vec::new() }
    }

    /// The same table, with every entry but `only` marked as one this link
    /// cannot send from.
    pub fn sending_only_from(mut self, only: Gid) -> GidTable {
        self.not_sent_from = self.iter().filter(|(_, g)| *g != only).map(|(i, _)| i).collect();
        self
    }

    /// Whether the link can send packets from entry `index`.
    pub fn sends_from(&self, index: usize) -> bool {
        self.get(index).is_some() && !self.not_sent_from.contains(&index)
    }

    pub fn get(&self, index: usize) -> Option<Gid> {
        self.entries.get(index).copied()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The index of `gid`, if the table holds it.
    pub fn index_of(&self, gid: Gid) -> Option<usize> {
        self.entries.iter().position(|g| *g == gid)
    }

    /// `(index, gid)` of every entry.
    pub fn iter(&self) -> impl Iterator<Item = (usize, Gid)> + '_ {
        self.entries.iter().copied().enumerate()
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn a_table_can_keep_entries_the_link_cannot_send_from() {
        let ll = Gid::link_local([2, 0, 0, 0, 0, 1]);
        let v4 = Gid::from_ip("198.18.0.1".parse().unwrap());
        let t = GidTable::new(ll, Some("198.18.0.1".parse().unwrap()), &[]);
        assert!(t.sends_from(0) && t.sends_from(1) && !t.sends_from(2));
        let t = t.sending_only_from(v4);
        assert_eq!((t.get(0), t.get(1)), (Some(ll), Some(v4)), "indices keep their meaning");
        assert!(!t.sends_from(0) && t.sends_from(1));
    }

    #[test]
    fn table_as_rxe() {
        let mac = [0x02, 0, 0, 0, 0, 0x03];
        let t = GidTable::new(Gid::link_local(mac), Some(Ipv4Addr::new(198, 18, 0, 3)), &[]);
        assert_eq!(t.get(0).unwrap().to_ipv6().to_string(), "fe80::ff:fe00:3");
        assert_eq!(t.get(1).unwrap().to_ipv6().to_string(), "::ffff:198.18.0.3");
        assert_eq!(t.get(1).unwrap().ip(), IpAddr::V4(Ipv4Addr::new(198, 18, 0, 3)));
        assert_eq!(t.index_of(Gid::from_ip("198.18.0.3".parse().unwrap())), Some(1));
        // No IPv4 address: the kernel leaves no gap, the IPv6 address is 1.
        let v6only = GidTable::new(Gid::link_local(mac), None, &["fd00::3".parse().unwrap()]);
        assert_eq!(v6only.get(1).unwrap().ip(), "fd00::3".parse::<IpAddr>().unwrap());
        assert_eq!((v6only.len(), v6only.iter().count()), (2, 2));
    }
}
