//! UD over rdma_cm as perftest does it (`rdma_cm_establish_ud_connection`,
//! `rdma_cm_request_ud_connection_parameters`,
//! `rdma_cm_initialize_ud_connection_parameters`,
//! `rdma_cm_send_ud_connection_parameters`): the client learns the server
//! QP's number and Q_Key from ESTABLISHED (rdma_cm's SIDR), and in a latency
//! test, where both ends send, tells the server its own QP's number in a
//! first datagram, SEND with immediate, before the test starts.

use super::super::params::{Params, Tst};
use super::super::resources::{Resources, UD_ADDITION};
use super::super::waiting::STALL;
use uroce_verbs::rdma_cm::{CmEvent, CmId};
use uroce_verbs::{AccessFlags, Mr, Qp, RecvWr, SendWr, UdDest, WcStatus, WrOp};

/// The 4 bytes of the client's datagram, after the GRH.
const HELLO_LEN: usize = UD_ADDITION as usize + 4;

/// Whether the server must hear the client's QP number: both ends send.
pub fn needs_hello(p: &Params) -> bool {
    p.tst == Tst::Lat
}

/// The buffer of the first datagram.
pub struct Hello(Mr);

impl Hello {
    pub fn new(res: &Resources) -> Result<Hello, String> {
        let mr = res.pd.reg_mr(HELLO_LEN, AccessFlags::LOCAL_WRITE).map_err(|e| e.to_string())?;
        Ok(Hello(mr))
    }

    /// Server, before it accepts: a receive for the client's datagram.
    pub fn expect(&self, qp: &Qp) -> Result<(), String> {
        let wr = RecvWr { wr_id: 0, sg_list: self.0.sge(0, HELLO_LEN as u32).into() };
        qp.post_recv(&wr)
            .map_err(|e| format!("Failed to post receive for RDMA CM UD request connection parameters: {e}"))
    }

    /// Server, after it accepts: where this QP's sends go, from the
    /// client's datagram (its QP number in the immediate data) and the
    /// request's address; the Q_Key is this QP's own (rdma_cm's).
    pub fn take(&self, res: &Resources, id: &CmId, qp: &Qp) -> Result<UdDest, String> {
        let wc = res.recv_cq.wait_one(STALL).map_err(|e| format!("the client's UD parameters: {e}"))?;
        if wc.status != WcStatus::Success || wc.imm_data == 0 {
            return Err(format!(
                "Bad WQE status when trying to create AH for UD connection in RDMA CM: Status: {} ; ID: {}.",
                wc.status as u32, wc.wr_id
            ));
        }
        let dgid = id.address_vector().ok_or("the request's ID has no route")?.dgid;
        Ok(UdDest { dgid, remote_qpn: wc.imm_data, remote_qkey: qp.query().qkey })
    }

    /// Client, on ESTABLISHED: this QP's number to the server.
    pub fn send(&self, res: &Resources, qp: &Qp, to: UdDest) -> Result<(), String> {
        let mut wr = SendWr::new(0, WrOp::SendWithImm { imm: qp.qp_num() }, vec![self.0.sge(0, 4)]);
        wr.ud = Some(to);
        qp.post_send(&wr).map_err(|e| format!("Failed to post send for RDMA CM UD send connection parameters: {e}"))?;
        let wc = res.send_cq.wait_one(STALL).map_err(|e| format!("sending the UD parameters: {e}"))?;
        match wc.status {
            WcStatus::Success => Ok(()),
            s => Err(format!(
                "Bad WQE status when trying to send UD connection parameters in RDMA CM: Status: {}",
                s as u32
            )),
        }
    }
}

/// Client: where sends go, from ESTABLISHED (the server QP's number and
/// Q_Key) and the route.
pub fn dest_of(ev: &CmEvent) -> Result<UdDest, String> {
    let dgid = ev.id.address_vector().ok_or("the connected ID has no route")?.dgid;
    Ok(UdDest { dgid, remote_qpn: ev.param.qp_num, remote_qkey: ev.param.qkey })
}
