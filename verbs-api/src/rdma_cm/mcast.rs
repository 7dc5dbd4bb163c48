//! `rdma_join_multicast` and `rdma_leave_multicast` on RoCE (the kernel's
//! `cma_iboe_join_multicast`, with librdmacm's attach of the ID's QP): a
//! group's GID is its IP address (IPv4-mapped for IPv4); the join completes
//! at once (there is no subnet manager to ask), MULTICAST_JOIN saying where
//! to send: the group's GID, QPN 0xFFFFFF, rdma_cm's Q_Key.

use super::event::libc_errno::EINVAL;
use super::event::{CmEvent, CmEventType, ConnParam};
use super::id::{cm_err, CmId, CmaState, IdState};
use super::ud::RDMA_UDP_QKEY;
use crate::error::Error;
use std::net::IpAddr;
use uroce_transport::engine::{AddressVector, Gid, MULTICAST_QPN};

/// Hop limit of a multicast route (the IPv4 TTL), as the kernel's IPv6 default.
const MCAST_HOP_LIMIT: u8 = 64;

impl CmId {
    /// `rdma_join_multicast` (`send_only`: `rdma_join_multicast_ex` with
    /// RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER): a bound or resolved ID joins
    /// `group`, its UD QP (if it has one, and unless send-only) attached;
    /// MULTICAST_JOIN follows. Joining a group twice is EADDRINUSE, as
    /// librdmacm's kernel says.
    pub fn join_multicast(&self, group: IpAddr, send_only: bool) -> Result<(), Error> {
        const VERB: &str = "rdma_join_multicast";
        if !group.is_multicast() {
            return Err(cm_err(VERB, EINVAL, format!("{group} is not a multicast address")));
        }
        let mut st = self.state();
        if !matches!(st.cma, CmaState::AddrBound | CmaState::AddrResolved) || st.ctx.is_none() {
            return Err(cm_err(
                VERB,
                EINVAL,
                format!("the ID is in state {:?}: bind or resolve an address first", st.cma),
            ));
        }
        if st.groups.iter().any(|(g, _)| *g == group) {
            return Err(cm_err(VERB, super::event::libc_errno::EADDRINUSE, format!("{group} is joined already")));
        }
        let attach = !send_only && st.qp.is_some();
        if let (true, Some(qp)) = (attach, &st.qp) {
            qp.attach_mcast(Gid::from_ip(group))?;
        }
        st.groups.push((group, attach));
        drop(st);
        if let Some(ch) = self.0.channel() {
            let param = ConnParam { qp_num: MULTICAST_QPN, qkey: RDMA_UDP_QKEY, ..ConnParam::default() };
            let event = CmEventType::MulticastJoin;
            ch.push(CmEvent { id: self.clone(), listen_id: None, event, status: 0, param, group: Some(group) });
        }
        Ok(())
    }

    /// `rdma_leave_multicast`: the QP detached, the group left. EADDRNOTAVAIL
    /// for a group the ID did not join.
    pub fn leave_multicast(&self, group: IpAddr) -> Result<(), Error> {
        let mut st = self.state();
        let Some(i) = st.groups.iter().position(|(g, _)| *g == group) else {
            let what = format!("{group} was not joined");
            return Err(cm_err("rdma_leave_multicast", super::event::libc_errno::EADDRNOTAVAIL, what));
        };
        let (_, attached) = st.groups.remove(i);
        if let (true, Some(qp)) = (attached, &st.qp) {
            let _ = qp.detach_mcast(Gid::from_ip(group));
        }
        Ok(())
    }

    /// Where to send to `group` from this ID: the group's GID from the
    /// ID's source GID (`ibv_ah_attr` of MULTICAST_JOIN).
    pub fn multicast_address_vector(&self, group: IpAddr) -> Option<AddressVector> {
        let st = self.state();
        let (ctx, src) = (st.ctx.as_ref()?, st.src?);
        Some(AddressVector {
            dgid: Gid::from_ip(group),
            sgid_index: super::addr::gid_index(ctx, Gid::from_ip(src.ip())),
            hop_limit: MCAST_HOP_LIMIT,
            port_num: 1,
            ..Default::default()
        })
    }
}

/// The ID is going: its QP leaves every group it joined.
pub(crate) fn leave_all(st: &mut IdState) {
    for (group, attached) in std::mem::take(&mut st.groups) {
        if let (true, Some(qp)) = (attached, &st.qp) {
            let _ = qp.detach_mcast(Gid::from_ip(group));
        }
    }
}
