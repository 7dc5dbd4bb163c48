//! `rping_setup_qp` and `rping_setup_buffers`: a PD, a completion channel,
//! a CQ of 32, an RC QP (16 sends, 2 receives, one SGE each), the 16-byte
//! receive and send buffers and the ping buffer(s).

use super::cb::{Cb, Fatal, Res};
use super::ping::INFO_LEN;
use uroce_verbs::rdma_cm::CmId;
use uroce_verbs::*;

/// `RPING_SQ_DEPTH`.
const SQ_DEPTH: u32 = 16;

/// What both ends do once they have their ID: the QP and buffers, the first
/// receive, and rping's messages for each step (failures as rping prints them).
pub fn setup_and_post_recv(cb: &mut Cb, id: &CmId, args: &super::RpingArgs) -> Result<(), Fatal> {
    if let Err(e) = setup(cb, id, args.size as u32, args.self_qp) {
        eprintln!("setup_qp failed: {e}");
        return Err(Fatal::Fail);
    }
    if let Err(e) = cb.post_recv() {
        eprintln!("ibv_post_recv failed: {e}");
        return Err(Fatal::Fail);
    }
    cb.dbg("cq_thread started.");
    Ok(())
}

pub fn setup(cb: &mut Cb, id: &CmId, size: u32, self_qp: bool) -> Result<(), String> {
    let ctx = id.context().ok_or("the ID has no device")?;
    let pd = ctx.alloc_pd();
    cb.dbg("created pd");
    let channel = ctx.create_comp_channel().map_err(|e| format!("ibv_create_comp_channel failed: {e}"))?;
    cb.dbg("created channel");
    let cq = ctx.create_cq(2 * SQ_DEPTH as usize, Some(&channel)).map_err(|e| format!("ibv_create_cq failed: {e}"))?;
    cb.dbg("created cq");
    cq.req_notify(false).map_err(|e| format!("ibv_req_notify_cq failed: {e}"))?;
    let mut init = QpInit::rc(&cq, &cq);
    init.cap = QpCap { max_send_wr: SQ_DEPTH, max_recv_wr: 2, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let qp = if self_qp {
        // -q: the application's own QP, moved to INIT with no remote access.
        let qp = pd.create_qp(&init).map_err(|e| format!("ibv_create_qp: {e}"))?;
        let attr = QpAttr { qp_state: QpState::Init, port_num: 1, ..QpAttr::default() };
        let mask = QpAttrMask::STATE | QpAttrMask::PKEY_INDEX | QpAttrMask::PORT | QpAttrMask::ACCESS_FLAGS;
        qp.modify(&attr, mask).map_err(|e| format!("ibv_modify_qp: {e}"))?;
        qp
    } else {
        id.create_qp(&pd, &init).map_err(|e| format!("rdma_create_qp: {e}"))?
    };
    cb.dbg("created qp");
    cb.dbg("rping_setup_buffers called on cb");
    let rw = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_WRITE;
    let mr = |len: usize, access| pd.reg_mr(len, access).map_err(|e| format!("reg_mr failed: {e}"));
    let recv = mr(INFO_LEN, AccessFlags::LOCAL_WRITE)?;
    let send = mr(INFO_LEN, AccessFlags::default())?;
    let rdma = mr(size as usize, rw)?;
    let start = if cb.server { None } else { Some(mr(size as usize, rw)?) };
    cb.dbg("allocated & registered buffers...");
    cb.res = Some(Res { _pd: pd, channel, cq, qp, recv, send, rdma, start });
    Ok(())
}

/// `rping_init_conn_param`: one READ each way, 7 retries of both kinds.
pub fn conn_param(cb: &Cb, self_qp: bool, args: &super::RpingArgs) -> rdma_cm::ConnParam {
    let qp_num = if self_qp { cb.res.as_ref().map_or(0, |r| r.qp.qp_num()) } else { 0 };
    rdma_cm::ConnParam {
        responder_resources: 1,
        initiator_depth: 1,
        retry_count: 7,
        rnr_retry_count: 7,
        qp_num,
        cm_response_timeout: args.cm_timeout,
        max_cm_retries: args.cm_retries,
        ..rdma_cm::ConnParam::default()
    }
}

/// `rping_self_modify_qp` (-q): INIT, RTR, RTS with `rdma_init_qp_attr`'s attributes.
pub fn self_modify_qp(cb: &Cb, id: &CmId) -> Result<(), Error> {
    let qp = &cb.res.as_ref().expect("set up").qp;
    for state in [QpState::Init, QpState::Rtr, QpState::Rts] {
        let (attr, mask) = id.init_qp_attr(state)?;
        qp.modify(&attr, mask)?;
    }
    Ok(())
}

/// `rping_disconnect`: with -q the application moves its QP to ERR itself.
pub fn disconnect(cb: &Cb, id: &CmId, self_qp: bool) -> Result<(), Error> {
    if self_qp {
        let qp = &cb.res.as_ref().expect("set up").qp;
        qp.modify(&QpAttr { qp_state: QpState::Err, ..QpAttr::default() }, QpAttrMask::STATE)?;
    }
    id.disconnect()
}
