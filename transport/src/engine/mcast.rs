//! Multicast groups of one port (IBTA 10.5; rxe's `rxe_mcast.c`): UD QPs
//! attach to a multicast GID, and a UD datagram sent to that GID with
//! destination QPN 0xFFFFFF reaches every QP attached to it, on every host
//! whose port joined the group (the sender's own QPs included, as rxe
//! delivers what the IP layer loops back). On RoCEv2 a multicast GID is an
//! IP multicast address (IPv4-mapped for IPv4, `::ffff:239.x.y.z`); the
//! link joins and leaves the IP group as the first QP attaches and the last
//! detaches ([`McastChange`]).

use super::Gid;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// The destination QPN of a multicast datagram.
pub const MULTICAST_QPN: u32 = 0xff_ffff;
/// Groups a port holds at most (rxe's `RXE_MAX_MCAST_GRP`).
pub const MAX_MCAST_GRP: usize = 8192;
/// QPs one group holds at most (rxe's `RXE_MAX_MCAST_QP_ATTACH`).
pub const MAX_MCAST_QP_ATTACH: usize = 56;

/// What the link must do for the port's groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum McastChange {
    /// The first QP attached: receive the group's datagrams.
    Join(Gid),
    /// The last QP left: stop.
    Leave(Gid),
}

/// Why an attach was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AttachError {
    NotMulticast,
    TooManyGroups,
    GroupFull,
}

/// The QPs of one group (at most [`MAX_MCAST_QP_ATTACH`], as `attach` keeps it).
pub(crate) struct Members {
    qpns: [u32; MAX_MCAST_QP_ATTACH],
    len: usize,
}

impl std::ops::Deref for Members {
    type Target = [u32];
    fn deref(&self) -> &[u32] {
        &self.qpns[..self.len]
    }
}

#[derive(Default)]
pub(crate) struct McastGroups {
    by_gid: BTreeMap<Gid, BTreeSet<u32>>,
    changes: VecDeque<McastChange>,
}

impl Gid {
    /// Whether the GID is a multicast one: an IPv6 multicast address, or
    /// the IPv4-mapped form of an IPv4 multicast address.
    pub fn is_multicast(&self) -> bool {
        self.ip().is_multicast()
    }
}

impl McastGroups {
    /// Attaches `qpn` to `gid` (again: nothing changes).
    pub fn attach(&mut self, qpn: u32, gid: Gid) -> Result<(), AttachError> {
        if !gid.is_multicast() {
            return Err(AttachError::NotMulticast);
        }
        let groups = self.by_gid.len();
        match self.by_gid.get_mut(&gid) {
            Some(qps) if qps.contains(&qpn) => Ok(()),
            Some(qps) if qps.len() >= MAX_MCAST_QP_ATTACH => Err(AttachError::GroupFull),
            Some(qps) => {
                qps.insert(qpn);
                Ok(())
            }
            None if groups >= MAX_MCAST_GRP => Err(AttachError::TooManyGroups),
            None => {
                self.by_gid.insert(gid, BTreeSet::from([qpn]));
                self.changes.push_back(McastChange::Join(gid));
                Ok(())
            }
        }
    }

    /// Detaches `qpn` from `gid`; whether it was attached.
    pub fn detach(&mut self, qpn: u32, gid: Gid) -> bool {
        let Some(qps) = self.by_gid.get_mut(&gid) else { return false };
        if !qps.remove(&qpn) {
            return false;
        }
        if qps.is_empty() {
            self.by_gid.remove(&gid);
            self.changes.push_back(McastChange::Leave(gid));
        }
        true
    }

    /// Detaches `qpn` from every group (the QP is going away).
    pub fn detach_all(&mut self, qpn: u32) {
        let gids: Vec<Gid> = self.by_gid.iter().filter(|(_, q)| q.contains(&qpn)).map(|(g, _)| *g).collect();
        for gid in gids {
            self.detach(qpn, gid);
        }
    }

    /// The QPs attached to `gid`, copied onto the stack: the engine delivers
    /// to each with itself borrowed mutably, and a datagram must not cost an
    /// allocation.
    pub fn members(&self, gid: Gid) -> Members {
        let mut m = Members { qpns: [0; MAX_MCAST_QP_ATTACH], len: 0 };
        for &qpn in self.by_gid.get(&gid).into_iter().flatten() {
            m.qpns[m.len] = qpn;
            m.len += 1;
        }
        m
    }

    pub fn poll_change(&mut self) -> Option<McastChange> {
        self.changes.pop_front()
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn groups_join_on_the_first_qp_and_leave_on_the_last() {
        let mut g = McastGroups::default();
        let group = Gid::from_ipv4([239, 1, 2, 3]);
        assert_eq!(g.attach(1, Gid::from_ipv4([10, 0, 0, 1])), Err(AttachError::NotMulticast));
        g.attach(1, group).unwrap();
        g.attach(2, group).unwrap();
        g.attach(2, group).unwrap();
        assert_eq!(*g.members(group), [1, 2]);
        assert_eq!(g.poll_change(), Some(McastChange::Join(group)));
        assert_eq!(g.poll_change(), None);
        assert!(g.detach(1, group) && !g.detach(1, group));
        g.detach_all(2);
        assert_eq!(g.poll_change(), Some(McastChange::Leave(group)));
        assert!(g.members(group).is_empty());
        let v6: Gid = Gid("ff0e::1".parse::<std::net::Ipv6Addr>().unwrap().octets());
        assert!(v6.is_multicast());
        for q in 0..MAX_MCAST_QP_ATTACH as u32 {
            g.attach(q, group).unwrap();
        }
        assert_eq!(g.attach(999, group), Err(AttachError::GroupFull));
    }
}
