//! The verbs resources of a test and their layout, as perftest makes them
//! (`alloc_ctx`, `ctx_init`, `set_up_connection`, `ctx_connect`): one buffer
//! registered once, its first half for what each QP sends, its second half
//! for what it receives; QPs taken through INIT, RTR and RTS with perftest's
//! attributes.

use super::dest::Dest;
use super::params::{AtomicType, Conn, Params, Tst, Verb};
use uroce_verbs::{
    AccessFlags, AddressVector, Ah, CompChannel, Context, Cq, Gid, Mr, Mtu, Pd, Qp, QpAttr, QpAttrMask, QpCap, QpInit,
    QpState, QpType, RecvWr, SendFlags, SendWr, Sge, UdDest, WrOp,
};

/// `UD_ADDITION`: the GRH in front of a UD receive.
pub const UD_ADDITION: u64 = 40;
/// `DEFF_QKEY`.
pub const DEF_QKEY: u32 = 0x1111_1111;
/// `MIN_RNR_TIMER`.
const MIN_RNR_TIMER: u8 = 12;
/// Buffers start on a page, as perftest's `memalign(page)`, so atomics land
/// 8-byte aligned.
const ALIGN: u64 = 4096;

/// `INC`: a message's slot, at least a cache line.
pub fn inc(size: u64, line: u64) -> u64 {
    if size > line {
        size.div_ceil(line) * line
    } else {
        line
    }
}

/// Where in the buffer each QP's messages go (`BUFF_SIZE`, `INC`, and the
/// cycling of `increase_loc_addr`/`increase_rem_addr`).
#[derive(Debug, Clone, Copy)]
pub struct Layout {
    /// The size the buffer was made for (`ctx->size`; 8 MiB with -a).
    pub alloc_size: u64,
    pub cycle: u64,
    pub line: u64,
    pub nqps: u64,
    pub ud: bool,
}

impl Layout {
    /// `BUFF_SIZE(size, cycle_buffer)`.
    pub fn buff(&self) -> u64 {
        self.alloc_size.max(self.cycle)
    }
    /// `ctx->buff_size`.
    pub fn total(&self) -> u64 {
        inc(self.buff(), self.line) * 2 * self.nqps + if self.ud { self.line } else { 0 }
    }
    /// What QP `i` sends from (`ctx->buf[i]`).
    pub fn send_off(&self, i: usize) -> u64 {
        i as u64 * self.buff()
    }
    /// Where the peer's RDMA lands for QP `i` (the `vaddr` we announce).
    pub fn target_off(&self, i: usize) -> u64 {
        (self.nqps + i as u64) * self.buff()
    }
    /// Where QP `i` receives SENDs (`ctx_set_recv_wqes`).
    pub fn recv_off(&self, i: usize) -> u64 {
        let ud = if self.ud { self.line - UD_ADDITION } else { 0 };
        (self.nqps + i as u64) * inc(self.buff(), self.line) + ud
    }
    /// The offset of message `k` of `size` bytes within a QP's area: BW tests
    /// cycle through the page in cache-line steps.
    pub fn slot(&self, size: u64, k: u64) -> u64 {
        if size > self.cycle / 2 {
            return 0;
        }
        let step = inc(size, self.line);
        (k % (self.cycle / step)) * step
    }
}

/// Everything a test posts to.
pub struct Resources {
    pub ctx: Context,
    pub pd: Pd,
    pub mr: Mr,
    /// The aligned address of byte 0 of the layout, and its offset in the MR.
    pub base: u64,
    base_off: u64,
    pub layout: Layout,
    pub send_cq: Cq,
    pub recv_cq: Cq,
    pub channel: Option<CompChannel>,
    pub qps: Vec<Qp>,
    pub ahs: Vec<Ah>,
    /// `-R` with UD: where each QP's sends go, as rdma_cm resolved it
    /// (the service's QPN and Q_Key; the server learns the client's QPN
    /// from its first datagram).
    pub ud_peers: Vec<UdDest>,
}

fn verb_access(verb: Verb) -> AccessFlags {
    match verb {
        Verb::Write => AccessFlags::REMOTE_WRITE,
        Verb::Read => AccessFlags::REMOTE_READ,
        Verb::Atomic => AccessFlags::REMOTE_ATOMIC,
        Verb::Send => AccessFlags::EMPTY,
    }
}

fn qp_type(conn: Conn) -> QpType {
    match conn {
        Conn::Rc => QpType::Rc,
        Conn::Uc => QpType::Uc,
        Conn::Ud => QpType::Ud,
    }
}

impl Resources {
    /// `ctx_init`: PD, the buffer and its MR, CQs (and a channel with -e),
    /// QPs moved to INIT.
    pub fn new(ctx: &Context, p: &Params) -> Result<Resources, String> {
        let layout = Layout {
            alloc_size: p.size,
            cycle: p.cycle_buffer,
            line: p.cache_line,
            nqps: p.num_qps.into(),
            ud: p.conn == Conn::Ud,
        };
        let pd = ctx.alloc_pd();
        let len = usize::try_from(layout.total() + ALIGN).map_err(|_| "the buffer is too large".to_string())?;
        let mr = pd.reg_mr(len, AccessFlags::LOCAL_WRITE | verb_access(p.verb)).map_err(|e| e.to_string())?;
        let base_off = (ALIGN - mr.addr() % ALIGN) % ALIGN;
        let channel = if p.use_event { Some(ctx.create_comp_channel().map_err(|e| e.to_string())?) } else { None };
        let nq = p.num_qps as usize;
        let send_cq = ctx.create_cq(p.tx_depth as usize * nq, channel.as_ref()).map_err(|e| e.to_string())?;
        let recv_cq = if p.verb == Verb::Send {
            ctx.create_cq(p.rx_depth as usize * nq, channel.as_ref()).map_err(|e| e.to_string())?
        } else {
            send_cq.clone()
        };
        let mut r = Resources {
            ctx: ctx.clone(),
            pd,
            base: mr.addr() + base_off,
            mr,
            base_off,
            layout,
            send_cq,
            recv_cq,
            channel,
            qps: Vec::new(),
            ahs: Vec::new(),
            ud_peers: Vec::new(),
        };
        // With -R, rdma_cm creates them (rdma_cm::connect_qps).
        for _ in 0..if p.rdma_cm { 0 } else { nq } {
            let qp = r.create_qp(p)?;
            r.qps.push(qp);
        }
        Ok(r)
    }

    /// What each QP is created with.
    pub fn qp_init(&self, p: &Params) -> QpInit {
        let mut init = QpInit::new(qp_type(p.conn), &self.send_cq, &self.recv_cq);
        init.cap = QpCap {
            max_send_wr: p.tx_depth,
            max_recv_wr: p.rx_depth,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: p.inline_size,
        };
        init
    }

    fn create_qp(&self, p: &Params) -> Result<Qp, String> {
        let qp = self.pd.create_qp(&self.qp_init(p)).map_err(|e| e.to_string())?;
        set_auth_key(&qp, p)?;
        let mut attr = QpAttr { qp_state: QpState::Init, pkey_index: 0, port_num: 1, ..QpAttr::default() };
        let mut mask = QpAttrMask::STATE | QpAttrMask::PKEY_INDEX | QpAttrMask::PORT;
        if p.conn == Conn::Ud {
            attr.qkey = DEF_QKEY;
            mask |= QpAttrMask::QKEY;
        } else {
            attr.qp_access_flags = match p.verb {
                Verb::Send => AccessFlags::REMOTE_WRITE | AccessFlags::LOCAL_WRITE,
                v => verb_access(v),
            };
            mask |= QpAttrMask::ACCESS_FLAGS;
        }
        qp.modify(&attr, mask).map_err(|e| format!("Failed to modify QP to INIT: {e}"))?;
        Ok(qp)
    }

    /// An SGE at `off` bytes into the layout.
    pub fn sge(&self, off: u64, len: u64) -> Sge {
        Sge { addr: self.base + off, length: len as u32, lkey: self.mr.lkey() }
    }

    pub fn read_byte(&self, off: u64) -> u8 {
        let mut b = [0u8];
        self.mr.read((self.base_off + off) as usize, &mut b);
        b[0]
    }

    pub fn write_byte(&self, off: u64, v: u8) {
        self.mr.write((self.base_off + off) as usize, &[v]);
    }

    /// `set_up_connection`: what each QP tells the peer.
    pub fn my_dests(&self, p: &Params, gid: Gid) -> Vec<Dest> {
        self.qps
            .iter()
            .enumerate()
            .map(|(i, qp)| Dest {
                lid: self.ctx.query_port().lid,
                out_reads: p.out_reads,
                qpn: qp.qp_num(),
                psn: qp.initial_psn() & 0xff_ffff,
                rkey: self.mr.rkey(),
                vaddr: self.base + self.layout.target_off(i),
                gid: gid.0,
                srqn: 0,
            })
            .collect()
    }

    /// `ctx_connect`: every QP to RTR, and to RTS on the side that sends.
    pub fn connect(&mut self, p: &Params, mtu: Mtu, sgid_index: u8, my: &[Dest], rem: &[Dest]) -> Result<(), String> {
        let sends = p.tst == Tst::Lat || !p.is_server();
        for (i, qp) in self.qps.iter().enumerate() {
            let (me, peer) = (&my[i], &rem[i]);
            to_rtr(qp, p, mtu, sgid_index, me, peer)
                .map_err(|e| format!("Failed to modify QP {:#x} to RTR: {e}", qp.qp_num()))?;
            if sends {
                to_rts(qp, p, me, peer).map_err(|e| format!("Failed to modify QP to RTS: {e}"))?;
            }
            if p.conn == Conn::Ud && sends {
                self.ahs.push(self.pd.create_ah(Gid(peer.gid)));
            }
        }
        Ok(())
    }

    /// Where a UD send of QP `i` goes.
    pub fn ud_dest(&self, i: usize, rem: &Dest) -> Option<UdDest> {
        if let Some(d) = self.ud_peers.get(i) {
            return Some(*d);
        }
        self.ahs.get(i).map(|ah| ah.dest(rem.qpn, DEF_QKEY))
    }

    /// Message `k` of QP `i` (`ctx_set_send_wqes`; BW tests cycle the
    /// addresses through a page).
    pub fn send_wr(&self, p: &Params, i: usize, rem: &Dest, size: u64, k: u64, signaled: bool) -> SendWr {
        let slot = if p.tst == Tst::Bw { self.layout.slot(size, k) } else { 0 };
        let sge = self.sge(self.layout.send_off(i) + slot, size);
        let (remote_addr, rkey) = (rem.vaddr + slot, rem.rkey);
        let op = match (p.verb, p.atomic) {
            (Verb::Send, _) => WrOp::Send,
            (Verb::Write, _) => WrOp::RdmaWrite { remote_addr, rkey },
            (Verb::Read, _) => WrOp::RdmaRead { remote_addr, rkey },
            (Verb::Atomic, AtomicType::FetchAndAdd) => WrOp::AtomicFetchAdd { remote_addr, rkey, add: 1 },
            (Verb::Atomic, AtomicType::CmpAndSwap) => WrOp::AtomicCmpSwp { remote_addr, rkey, compare: 0, swap: 0 },
        };
        let mut flags = if signaled { SendFlags::SIGNALED } else { SendFlags::EMPTY };
        if matches!(p.verb, Verb::Send | Verb::Write) && size <= u64::from(p.inline_size) {
            flags |= SendFlags::INLINE;
        }
        SendWr { wr_id: i as u64, sg_list: sge.into(), op, flags, ud: self.ud_dest(i, rem) }
    }

    /// Receive `k` of QP `i` (`ctx_set_recv_wqes`); UD receives take the GRH too.
    pub fn recv_wr(&self, p: &Params, i: usize, size: u64, k: u64) -> RecvWr {
        let slot = if p.tst == Tst::Bw { self.layout.slot(size, k) } else { 0 };
        let len = size + if p.conn == Conn::Ud { UD_ADDITION } else { 0 };
        RecvWr { wr_id: i as u64, sg_list: self.sge(self.layout.recv_off(i) + slot, len).into() }
    }

    /// Posts `count` receives on every QP.
    pub fn post_recvs(&self, p: &Params, size: u64, count: u64) -> Result<(), String> {
        for (i, qp) in self.qps.iter().enumerate() {
            for k in 0..count {
                qp.post_recv(&self.recv_wr(p, i, size, k))
                    .map_err(|e| format!("Couldn't post recv Qp = {i}: counter={k}: {e}"))?;
            }
        }
        Ok(())
    }
}

/// `ctx_modify_qp_to_rtr`.
fn to_rtr(qp: &Qp, p: &Params, mtu: Mtu, sgid_index: u8, me: &Dest, peer: &Dest) -> Result<(), uroce_verbs::Error> {
    if p.conn == Conn::Ud {
        return qp.modify(&QpAttr { qp_state: QpState::Rtr, ..QpAttr::default() }, QpAttrMask::STATE);
    }
    let ah_attr = AddressVector {
        dgid: Gid(peer.gid),
        sgid_index,
        hop_limit: 0xff,
        traffic_class: 0,
        port_num: 1,
        flow_label: 0,
    };
    let attr = QpAttr {
        qp_state: QpState::Rtr,
        ah_attr,
        path_mtu: mtu,
        dest_qp_num: peer.qpn,
        rq_psn: peer.psn,
        max_dest_rd_atomic: me.out_reads.min(255) as u8,
        min_rnr_timer: MIN_RNR_TIMER,
        ..QpAttr::default()
    };
    let mut mask = QpAttrMask::STATE | QpAttrMask::AV | QpAttrMask::PATH_MTU | QpAttrMask::DEST_QPN;
    mask |= QpAttrMask::RQ_PSN;
    if p.conn == Conn::Rc {
        mask |= QpAttrMask::MIN_RNR_TIMER | QpAttrMask::MAX_DEST_RD_ATOMIC;
    }
    qp.modify(&attr, mask)
}

/// `ctx_modify_qp_to_rts`.
fn to_rts(qp: &Qp, p: &Params, me: &Dest, peer: &Dest) -> Result<(), uroce_verbs::Error> {
    let attr = QpAttr {
        qp_state: QpState::Rts,
        sq_psn: me.psn,
        timeout: p.qp_timeout,
        retry_cnt: 7,
        rnr_retry: 7,
        max_rd_atomic: peer.out_reads.min(255) as u8,
        ..QpAttr::default()
    };
    let mut mask = QpAttrMask::STATE | QpAttrMask::SQ_PSN;
    if p.conn == Conn::Rc {
        mask =
            mask | QpAttrMask::TIMEOUT | QpAttrMask::RETRY_CNT | QpAttrMask::RNR_RETRY | QpAttrMask::MAX_QP_RD_ATOMIC;
    }
    qp.modify(&attr, mask)
}

/// `--auth-key`: the QP, just created (RESET, or INIT under rdma_cm), goes
/// into the authenticated mode before it connects.
pub(super) fn set_auth_key(qp: &Qp, p: &Params) -> Result<(), String> {
    match p.auth_key {
        Some(key) => qp.set_auth_key(key).map_err(|e| format!("--auth-key: {e}")),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_is_perftests() {
        let l = Layout { alloc_size: 65536, cycle: 4096, line: 64, nqps: 2, ud: false };
        assert_eq!((l.buff(), l.total(), l.target_off(1), l.recv_off(0)), (65536, 262144, 196608, 131072));
        assert_eq!(l.slot(65536, 7), 0);
        let small = Layout { alloc_size: 2, ..l };
        assert_eq!((small.buff(), small.slot(2, 0), small.slot(2, 1), small.slot(2, 64)), (4096, 0, 64, 0));
        assert_eq!(inc(100, 64), 128);
        let ud = Layout { alloc_size: 1024, cycle: 4096, line: 64, nqps: 1, ud: true };
        assert_eq!((ud.total(), ud.recv_off(0)), (8192 + 64, 4096 + 24));
    }
}
