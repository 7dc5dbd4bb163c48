//! Multicast membership: the engine says which groups its QPs attach to,
//! the link joins and leaves the IP groups to match (the udp link: a
//! socket on the group's address).

use super::Core;
use crate::error::Error;
use uroce_transport::engine::{Gid, McastChange};

impl Core {
    /// QP `qpn` receives group `gid`'s datagrams; the link joins the group
    /// if this is its first QP. A link that cannot join undoes the attach.
    pub(crate) fn attach_mcast(&mut self, qpn: u32, gid: Gid) -> Result<(), Error> {
        self.engine.attach_mcast(qpn, gid).map_err(Error::engine("ibv_attach_mcast"))?;
        if let Err(err) = self.follow_groups() {
            let _ = self.engine.detach_mcast(qpn, gid);
            let _ = self.follow_groups();
            return Err(Error::Os { verb: "ibv_attach_mcast", err });
        }
        Ok(())
    }

    /// QP `qpn` leaves group `gid`; the link leaves it with its last QP.
    pub(crate) fn detach_mcast(&mut self, qpn: u32, gid: Gid) -> Result<(), Error> {
        self.engine.detach_mcast(qpn, gid).map_err(Error::engine("ibv_detach_mcast"))?;
        self.follow_groups().map_err(|err| Error::Os { verb: "ibv_detach_mcast", err })
    }

    /// The link joins and leaves the groups the engine asks for (after an
    /// attach, a detach, a destroyed QP).
    pub(crate) fn follow_groups(&mut self) -> std::io::Result<()> {
        let mut result = Ok(());
        while let Some(change) = self.engine.poll_mcast_change() {
            let r = match change {
                McastChange::Join(g) => self.link.join_multicast(g.ip()),
                McastChange::Leave(g) => self.link.leave_multicast(g.ip()),
            };
            result = result.and(r);
            self.note_descriptors();
        }
        result
    }
}
