//! Memory windows in the simulation: every rule of `engine/window.rs`.
//! Node 1 owns a region registered with MW_BIND and binds windows on it
//! through its QP `b`; node 0 reaches them through `a`, as a peer would.

use core::time::Duration;
use uroce_transport::engine::{
    AccessFlags, Counter, Engine, Error, Mtu, MwBind, MwType, QpType, RecvWr, SendWr, Sge, WcFlags, WcOpcode, WcStatus,
    WorkCompletion, WrOp,
};
use uroce_transport::sim::probe::{poll_all, read_mr};
use uroce_transport::sim::{connect, create_endpoint, Endpoint, LinkConfig, Pair, QpOptions, REGION_ACCESS};

/// Where node 1's region lies, and its length.
const BASE: u64 = 0x20_0000;
const LEN: u64 = 4096;
/// The window's range inside it.
const WIN: u64 = BASE + 1024;
const WIN_LEN: u64 = 256;

const READ: AccessFlags = AccessFlags::REMOTE_READ;
const WRITE: AccessFlags = AccessFlags::REMOTE_WRITE;
const ALL: AccessFlags =
    AccessFlags(AccessFlags::REMOTE_READ.0 | AccessFlags::REMOTE_WRITE.0 | AccessFlags::REMOTE_ATOMIC.0);

struct Setup {
    p: Pair,
    /// Node 1's region with MW_BIND.
    region: u32,
}

fn setup_on(link: LinkConfig) -> Setup {
    let mut p = Pair::with_link(7, link, &QpOptions::new(QpType::Rc, Mtu::Mtu1024))
        .with_regions((0..=255).cycle().take(4096).collect(), vec![0; 64]);
    let region = p.reg_mr(1, BASE, vec![0x11; LEN as usize], REGION_ACCESS | AccessFlags::MW_BIND);
    Setup { p, region }
}

fn setup() -> Setup {
    setup_on(LinkConfig::clean())
}

fn run(p: &mut Pair) {
    p.sim.run_until(2_000_000, Duration::from_secs(5), |_| false);
}

/// `ibv_inc_rkey`: the next key byte.
fn inc_rkey(k: u32) -> u32 {
    (k & !0xff) | (k.wrapping_add(1) & 0xff)
}

impl Setup {
    fn alloc(&mut self, kind: MwType) -> u32 {
        let pd = self.p.b.pd;
        self.p.sim.engines[1].alloc_mw(pd, kind).unwrap()
    }

    fn bind_with(&self, addr: u64, length: u64, access: AccessFlags) -> MwBind {
        MwBind { mr_lkey: self.region, addr, length, access }
    }

    /// Posts BIND_MW (new key byte: the next one) on node 1's QP `qp` and
    /// runs: the completion, and the window's rkey after it.
    fn bind_on(&mut self, qp: &Endpoint, mw: u32, bind: MwBind) -> (WorkCompletion, u32) {
        let op = WrOp::BindMw { mw_rkey: mw, rkey: inc_rkey(mw), bind };
        self.p.sim.engines[1].post_send(qp.qpn, SendWr::new(50, op, vec![])).unwrap();
        run(&mut self.p);
        let wc = poll_all(&mut self.p.sim.engines[1], qp.send_cq).pop().expect("a completion");
        (wc, self.p.sim.engines[1].mw_rkey(mw).unwrap())
    }

    fn bind(&mut self, mw: u32, bind: MwBind) -> (WorkCompletion, u32) {
        let b = self.p.b;
        self.bind_on(&b, mw, bind)
    }

    /// Posts `op` with `len` bytes of node 0's source on QP `a` and runs:
    /// the status.
    fn remote(&mut self, op: WrOp, len: u32) -> WcStatus {
        let a = self.p.a;
        self.remote_on(&a, op, len)
    }

    fn remote_on(&mut self, qp: &Endpoint, op: WrOp, len: u32) -> WcStatus {
        let sge = Sge { addr: Pair::SRC_ADDR, length: len, lkey: self.p.src };
        self.p.sim.engines[0].post_send(qp.qpn, SendWr::new(60, op, vec![sge])).unwrap();
        run(&mut self.p);
        poll_all(&mut self.p.sim.engines[0], qp.send_cq).pop().expect("a completion").status
    }

    fn write(&mut self, rkey: u32, va: u64, len: u32) -> WcStatus {
        self.remote(WrOp::RdmaWrite { remote_addr: va, rkey }, len)
    }

    fn region_bytes(&self, at: u64, len: usize) -> Vec<u8> {
        read_mr(&self.p.sim.engines[1], self.region, (at - BASE) as usize, len)
    }

    /// A second QP on each node, of the same PDs, connected to each other.
    fn second_connection(&mut self) -> (Endpoint, Endpoint) {
        let o = QpOptions::new(QpType::Rc, Mtu::Mtu1024);
        let a2 = create_endpoint(&mut self.p.sim.engines[0], &o, Some(self.p.a.pd), None);
        let b2 = create_endpoint(&mut self.p.sim.engines[1], &o, Some(self.p.b.pd), None);
        connect(&mut self.p.sim, &a2, &b2, &o);
        (a2, b2)
    }

    fn post_recv(&mut self, node: usize, qp: &Endpoint) {
        let at = 0x70_0000 + qp.qpn as u64 * 0x1000;
        let key = self.p.reg_mr(node, at, vec![0; 64], REGION_ACCESS);
        let wr = RecvWr { wr_id: 70, sg_list: Sge { addr: at, length: 64, lkey: key }.into() };
        self.p.sim.engines[node].post_recv(qp.qpn, wr).unwrap();
    }

    /// A SEND_WITH_INV of `rkey` from node 0's `from` to node 1's `to`: the
    /// sender's and the receiver's completions.
    fn send_with_inv(&mut self, from: &Endpoint, to: &Endpoint, rkey: u32) -> (WorkCompletion, WorkCompletion) {
        self.post_recv(1, to);
        let sge = Sge { addr: Pair::SRC_ADDR, length: 8, lkey: self.p.src };
        let wr = SendWr::new(80, WrOp::SendWithInv { invalidate_rkey: rkey }, vec![sge]);
        self.p.sim.engines[0].post_send(from.qpn, wr).unwrap();
        run(&mut self.p);
        let sent = poll_all(&mut self.p.sim.engines[0], from.send_cq).pop().expect("a send completion");
        let got = poll_all(&mut self.p.sim.engines[1], to.recv_cq).pop().expect("a receive completion");
        (sent, got)
    }

    fn local_inv(&mut self, rkey: u32) -> WorkCompletion {
        let b = self.p.b;
        self.p.sim.engines[1].post_send(b.qpn, SendWr::new(90, WrOp::LocalInv { rkey }, vec![])).unwrap();
        run(&mut self.p);
        poll_all(&mut self.p.sim.engines[1], b.send_cq).pop().expect("a completion")
    }
}

/// A type 2 window bound by a work request: WRITE, READ and atomics within
/// its range work and land in the region; the completion is BIND_MW.
#[test]
fn a_bound_type2_window_serves_writes_reads_and_atomics_within_its_range() {
    let mut s = setup();
    let mw = s.alloc(MwType::Type2);
    let (wc, rkey) = s.bind(mw, s.bind_with(WIN, WIN_LEN, ALL));
    assert_eq!((wc.status, wc.opcode, wc.byte_len), (WcStatus::Success, WcOpcode::BindMw, 0));
    assert_eq!(rkey, inc_rkey(mw), "the key byte the WR named, the index the window's");
    assert_eq!(s.write(rkey, WIN + 16, 32), WcStatus::Success);
    assert_eq!(s.region_bytes(WIN + 16, 32), (0..32).collect::<Vec<u8>>());
    assert_eq!(s.region_bytes(WIN, 16), vec![0x11; 16], "nothing before the WRITE's range");
    let read = WrOp::RdmaRead { remote_addr: WIN + WIN_LEN - 64, rkey };
    assert_eq!(s.remote(read, 64), WcStatus::Success);
    let add = WrOp::AtomicFetchAdd { remote_addr: WIN + 8, rkey, add: 1 };
    assert_eq!(s.remote(add, 8), WcStatus::Success);
    assert_eq!(s.region_bytes(WIN + 8, 8), (0x1111_1111_1111_1111u64 + 1).to_ne_bytes());
    assert_eq!(s.p.sim.engines[1].counters().get(Counter::MwLocalOps), 1);
}

/// One byte beyond the window (still inside the region) is a remote access
/// error, and so is one byte before it.
#[test]
fn access_outside_the_window_is_refused_though_inside_the_region() {
    for (va, len) in [(WIN + WIN_LEN - 8, 9), (WIN - 1, 8)] {
        let mut s = setup();
        let mw = s.alloc(MwType::Type2);
        let (_, rkey) = s.bind(mw, s.bind_with(WIN, WIN_LEN, ALL));
        assert_eq!(s.write(rkey, va, len), WcStatus::RemAccessErr, "{len} bytes at {va:#x}");
        assert_eq!(s.region_bytes(BASE, LEN as usize), vec![0x11; LEN as usize], "nothing written");
        assert_eq!(s.p.sim.engines[1].counters().get(Counter::RkeyViolation), 1);
    }
}

/// A window granting only REMOTE_READ on a region that allows everything:
/// READ works, WRITE and atomics do not.
#[test]
fn a_window_grants_only_its_own_rights_narrower_than_the_regions() {
    for (op, want) in [
        (WrOp::RdmaRead { remote_addr: WIN, rkey: 0 }, WcStatus::Success),
        (WrOp::RdmaWrite { remote_addr: WIN, rkey: 0 }, WcStatus::RemAccessErr),
        (WrOp::AtomicFetchAdd { remote_addr: WIN, rkey: 0, add: 1 }, WcStatus::RemAccessErr),
    ] {
        let mut s = setup();
        let mw = s.alloc(MwType::Type2);
        let (_, rkey) = s.bind(mw, s.bind_with(WIN, WIN_LEN, READ));
        let op = match op {
            WrOp::RdmaRead { remote_addr, .. } => WrOp::RdmaRead { remote_addr, rkey },
            WrOp::RdmaWrite { remote_addr, .. } => WrOp::RdmaWrite { remote_addr, rkey },
            WrOp::AtomicFetchAdd { remote_addr, add, .. } => WrOp::AtomicFetchAdd { remote_addr, rkey, add },
            _ => unreachable!(),
        };
        assert_eq!(s.remote(op, 8), want, "{op:?}");
        assert_eq!(s.region_bytes(WIN, 8), vec![0x11; 8]);
    }
}

/// A window's rights need not be the region's: a region without remote
/// rights is reachable through a window that grants them.
#[test]
fn a_region_without_remote_rights_is_reachable_only_through_its_window() {
    let mut s = setup();
    s.region = s.p.reg_mr(1, 0x40_0000, vec![0; 512], AccessFlags::LOCAL_WRITE | AccessFlags::MW_BIND);
    let mw = s.alloc(MwType::Type2);
    let (wc, rkey) = s.bind(mw, s.bind_with(0x40_0000, 512, WRITE));
    assert_eq!(wc.status, WcStatus::Success);
    assert_eq!(s.write(rkey, 0x40_0000, 64), WcStatus::Success);
    assert_eq!(s.write(s.region, 0x40_0000, 8), WcStatus::RemAccessErr, "the region's own key grants nothing");
}

/// SEND_WITH_INV naming a bound type 2 window frees it (the receive says
/// so); its key then reaches nothing; bound again it answers its new key
/// and not the stale one.
#[test]
fn send_with_invalidate_frees_a_type2_window_and_a_stale_key_fails() {
    let mut s = setup();
    let mw = s.alloc(MwType::Type2);
    let (_, rkey) = s.bind(mw, s.bind_with(WIN, WIN_LEN, ALL));
    let (a, b) = (s.p.a, s.p.b);
    let (sent, got) = s.send_with_inv(&a, &b, rkey);
    assert_eq!(sent.status, WcStatus::Success);
    assert_eq!((got.status, got.wc_flags, got.imm_data), (WcStatus::Success, WcFlags::WITH_INV, rkey));
    let (wc, new) = s.bind(rkey, s.bind_with(WIN, WIN_LEN, ALL));
    assert_eq!(wc.status, WcStatus::Success, "free again, so bound again");
    assert_ne!(new, rkey);
    assert_eq!(s.write(new, WIN, 8), WcStatus::Success);
    assert_eq!(s.write(rkey, WIN, 8), WcStatus::RemAccessErr, "the stale key");
}

/// After SEND_WITH_INV the old key fails at once.
#[test]
fn an_invalidated_window_key_is_a_remote_access_error() {
    let mut s = setup();
    let mw = s.alloc(MwType::Type2);
    let (_, rkey) = s.bind(mw, s.bind_with(WIN, WIN_LEN, ALL));
    let (a, b) = (s.p.a, s.p.b);
    s.send_with_inv(&a, &b, rkey);
    assert_eq!(s.write(rkey, WIN, 8), WcStatus::RemAccessErr);
    assert_eq!(s.region_bytes(WIN, 8), vec![0x11; 8]);
}

/// LOCAL_INV by the window's QP frees it (completion LOCAL_INV); a type 1
/// window cannot be invalidated (LOC_QP_OP_ERR, the QP to ERR).
#[test]
fn local_invalidate_frees_a_type2_window_and_refuses_a_type1() {
    let mut s = setup();
    let mw = s.alloc(MwType::Type2);
    let (_, rkey) = s.bind(mw, s.bind_with(WIN, WIN_LEN, ALL));
    let wc = s.local_inv(rkey);
    assert_eq!((wc.status, wc.opcode), (WcStatus::Success, WcOpcode::LocalInv));
    assert_eq!(s.write(rkey, WIN, 8), WcStatus::RemAccessErr);

    let mut s = setup();
    let mw1 = s.alloc(MwType::Type1);
    let (wc, rkey) = s.bind(mw1, s.bind_with(WIN, WIN_LEN, ALL));
    assert_eq!(wc.status, WcStatus::Success);
    assert_eq!(s.local_inv(rkey).status, WcStatus::LocQpOpErr);
    assert_eq!(s.p.sim.engines[1].counters().get(Counter::LocalInvRefused), 1);
    // The refusal took QP b to ERR; a type 1 window serves any QP of its PD.
    let (a2, _b2) = s.second_connection();
    let write = WrOp::RdmaWrite { remote_addr: WIN, rkey };
    assert_eq!(s.remote_on(&a2, write, 8), WcStatus::Success, "the window stays bound");
}

/// A type 2 window answers only the QP that bound it: a second connection
/// of the same PD can neither use nor invalidate it.
#[test]
fn a_type2_window_answers_only_the_qp_that_bound_it() {
    let mut s = setup();
    let mw = s.alloc(MwType::Type2);
    let (_, rkey) = s.bind(mw, s.bind_with(WIN, WIN_LEN, ALL));
    let (a2, b2) = s.second_connection();
    let write = WrOp::RdmaWrite { remote_addr: WIN, rkey };
    assert_eq!(s.remote_on(&a2, write, 8), WcStatus::RemAccessErr);
    let (a3, b3) = s.second_connection();
    let (sent, got) = s.send_with_inv(&a3, &b3, rkey);
    assert_eq!((sent.status, got.status), (WcStatus::RemInvReqErr, WcStatus::RemInvReqErr));
    assert_eq!(s.write(rkey, WIN, 8), WcStatus::Success, "still bound for its own QP");
    let _ = b2;
}

/// A type 1 window answers every QP of its PD; a bind of length 0 unbinds it.
#[test]
fn a_type1_window_serves_every_qp_of_its_pd_until_unbound() {
    let mut s = setup();
    let mw = s.alloc(MwType::Type1);
    let (_, rkey) = s.bind(mw, s.bind_with(WIN, WIN_LEN, WRITE));
    let (a2, _b2) = s.second_connection();
    assert_eq!(s.remote_on(&a2, WrOp::RdmaWrite { remote_addr: WIN, rkey }, 8), WcStatus::Success);
    let (wc, unbound) = s.bind(rkey, s.bind_with(0, 0, WRITE));
    assert_eq!(wc.status, WcStatus::Success);
    assert_eq!(s.write(unbound, WIN, 8), WcStatus::RemAccessErr);
}

/// Deallocating a bound window: its key reaches nothing, the region can be
/// deregistered, and the window is gone.
#[test]
fn dealloc_while_bound_revokes_the_key() {
    let mut s = setup();
    let mw = s.alloc(MwType::Type2);
    let (_, rkey) = s.bind(mw, s.bind_with(WIN, WIN_LEN, ALL));
    assert_eq!(s.p.sim.engines[1].dereg_mr(s.region).err(), Some(Error::MrHasWindows(s.region)));
    s.p.sim.engines[1].dealloc_mw(rkey).unwrap();
    assert_eq!(s.p.sim.engines[1].dealloc_mw(rkey), Err(Error::NoSuchMw(rkey)));
    assert_eq!(s.write(rkey, WIN, 8), WcStatus::RemAccessErr);
    assert!(s.p.sim.engines[1].dereg_mr(s.region).is_ok());
}

/// Every refused bind completes with MW_BIND_ERR, counted, and moves the RC
/// QP to ERR; the window stays as it was.
#[test]
fn refused_binds_complete_with_mw_bind_err() {
    type Case = (&'static str, MwType, fn(&mut Setup) -> MwBind);
    let cases: [Case; 7] = [
        ("a region without MW_BIND", MwType::Type2, |s| MwBind {
            mr_lkey: s.p.reg_mr(1, 0x40_0000, vec![0; 64], REGION_ACCESS),
            addr: 0x40_0000,
            length: 64,
            access: READ,
        }),
        ("a range beyond the region", MwType::Type2, |s| s.bind_with(BASE + LEN - 8, 16, READ)),
        ("a range before the region", MwType::Type2, |s| s.bind_with(BASE - 8, 16, READ)),
        ("a writable window on a region without local write", MwType::Type2, |s| {
            let access = AccessFlags::REMOTE_READ | AccessFlags::MW_BIND;
            MwBind {
                mr_lkey: s.p.reg_mr(1, 0x40_0000, vec![0; 64], access),
                addr: 0x40_0000,
                length: 64,
                access: WRITE,
            }
        }),
        ("a zero-based type 1 window", MwType::Type1, |s| s.bind_with(WIN, 8, READ | AccessFlags::ZERO_BASED)),
        ("a type 2 window of length 0", MwType::Type2, |s| s.bind_with(WIN, 0, READ)),
        ("a region of another PD", MwType::Type2, |s| {
            let pd = s.p.sim.engines[1].alloc_pd();
            let access = REGION_ACCESS | AccessFlags::MW_BIND;
            let key = s.p.sim.engines[1].reg_mr(pd, 0x40_0000, Box::new(vec![0u8; 64]), access).unwrap().lkey;
            MwBind { mr_lkey: key, addr: 0x40_0000, length: 64, access: READ }
        }),
    ];
    for (what, kind, bind) in cases {
        let mut s = setup();
        let mw = s.alloc(kind);
        let bind = bind(&mut s);
        let (wc, rkey) = s.bind(mw, bind);
        assert_eq!((wc.status, wc.opcode), (WcStatus::MwBindErr, WcOpcode::BindMw), "{what}");
        assert_eq!(rkey, mw, "{what}: the window keeps its key");
        assert_eq!(s.p.sim.engines[1].counters().get(Counter::MwBindRefused), 1, "{what}");
        assert_eq!(s.p.sim.engines[1].query_qp(s.p.b.qpn).unwrap().qp_state, uroce_transport::engine::QpState::Err);
    }
}

/// A type 2 window must be invalidated before it is bound again.
#[test]
fn a_bound_type2_window_is_not_bound_again() {
    let mut s = setup();
    let mw = s.alloc(MwType::Type2);
    let (_, rkey) = s.bind(mw, s.bind_with(WIN, WIN_LEN, ALL));
    let (wc, after) = s.bind(rkey, s.bind_with(WIN, 8, ALL));
    assert_eq!(wc.status, WcStatus::MwBindErr);
    assert_eq!(after, rkey);
    // A BIND_MW naming a key the window no longer has is refused too.
    let mut s = setup();
    let mw = s.alloc(MwType::Type1);
    let (_, rkey) = s.bind(mw, s.bind_with(WIN, WIN_LEN, ALL));
    assert_eq!(s.bind(mw, s.bind_with(WIN, 8, ALL)).0.status, WcStatus::MwBindErr, "stale mw_rkey");
    let (a2, _b2) = s.second_connection();
    let write = WrOp::RdmaWrite { remote_addr: WIN + 128, rkey };
    assert_eq!(s.remote_on(&a2, write, 8), WcStatus::Success, "still bound as before, all 256 bytes");
}

/// A zero-based type 2 window: peers name its bytes from address 0.
#[test]
fn a_zero_based_window_starts_at_address_zero() {
    let mut s = setup();
    let mw = s.alloc(MwType::Type2);
    let (_, rkey) = s.bind(mw, s.bind_with(WIN, WIN_LEN, WRITE | AccessFlags::ZERO_BASED));
    assert_eq!(s.write(rkey, 4, 4), WcStatus::Success);
    assert_eq!(s.region_bytes(WIN, 8), [0x11, 0x11, 0x11, 0x11, 0, 1, 2, 3]);
    assert_eq!(s.write(rkey, WIN_LEN - 4, 8), WcStatus::RemAccessErr);
}

/// A destroyed QP's type 2 windows are freed: a QP made later reaches
/// nothing through them.
#[test]
fn destroying_the_qp_frees_its_type2_windows() {
    let mut s = setup();
    let mw = s.alloc(MwType::Type2);
    let (_, rkey) = s.bind(mw, s.bind_with(WIN, WIN_LEN, ALL));
    s.p.sim.engines[1].destroy_qp(s.p.b.qpn).unwrap();
    assert_eq!(s.p.sim.engines[1].mw_rkey(mw), Some(rkey), "the window itself lives on, unbound");
    assert!(s.p.sim.engines[1].dereg_mr(s.region).is_ok(), "no window bound any more");
}

/// BIND_MW waits for the WRs before it and the WRs after it see the new
/// binding: node 1 posts WRITE, BIND_MW and SEND at once; when the SEND
/// arrives, node 0 writes through the new key. Then LOCAL_INV, and the key
/// fails. Twenty rounds (each on a new connection of the same PDs: the
/// refused WRITE takes both QPs to ERR) over a link that loses, duplicates
/// and reorders packets.
#[test]
fn binds_and_invalidations_keep_their_order_under_loss() {
    let link = LinkConfig { loss: 0.1, duplicate: 0.05, reorder: 0.05, ..LinkConfig::clean() };
    let mut s = setup_on(link);
    let mut rkey = s.alloc(MwType::Type2);
    for round in 0..20u64 {
        let (a, b) = (s.p.a, s.p.b);
        s.post_recv(0, &a);
        let new = inc_rkey(rkey);
        let from_region = vec![Sge { addr: BASE, length: 8, lkey: s.region }];
        let wrs = [
            SendWr::new(1, WrOp::RdmaWrite { remote_addr: Pair::SRC_ADDR, rkey: s.p.src }, from_region.clone()),
            SendWr::new(2, WrOp::BindMw { mw_rkey: rkey, rkey: new, bind: s.bind_with(WIN, WIN_LEN, ALL) }, vec![]),
            SendWr::new(3, WrOp::Send, from_region),
        ];
        for wr in wrs {
            s.p.sim.engines[1].post_send(b.qpn, wr).unwrap();
        }
        run(&mut s.p);
        let wcs = poll_all(&mut s.p.sim.engines[1], b.send_cq);
        let got: Vec<_> = wcs.iter().map(|w| (w.wr_id, w.opcode, w.status)).collect();
        let want = [
            (1, WcOpcode::RdmaWrite, WcStatus::Success),
            (2, WcOpcode::BindMw, WcStatus::Success),
            (3, WcOpcode::Send, WcStatus::Success),
        ];
        assert_eq!(got, want, "round {round}");
        assert_eq!(poll_all(&mut s.p.sim.engines[0], a.recv_cq).len(), 1, "round {round}: the SEND arrived");
        assert_eq!(s.write(new, WIN + round, 8), WcStatus::Success, "round {round}");
        assert_eq!(s.local_inv(new).status, WcStatus::Success, "round {round}");
        assert_eq!(s.write(new, WIN, 8), WcStatus::RemAccessErr, "round {round}: invalidated");
        (s.p.a, s.p.b) = s.second_connection();
        rkey = new;
    }
    assert!(s.p.sim.stats.lost > 0 && s.p.sim.stats.duplicated > 0, "the link was impaired");
}

/// No region's key falls in a window's 256-key block, whatever the order.
#[test]
fn window_blocks_and_region_keys_never_collide() {
    let mut e = Engine::new(Default::default());
    let pd = e.alloc_pd();
    let mut windows = Vec::new();
    let mut keys = Vec::new();
    for i in 0..20_000 {
        if i % 3 == 0 {
            windows.push(e.alloc_mw(pd, MwType::Type2).unwrap() >> 8);
        } else {
            keys.push(e.reg_mr(pd, 0, Box::new(Vec::new()), REGION_ACCESS).unwrap().lkey >> 8);
        }
    }
    windows.sort_unstable();
    let n = windows.len();
    windows.dedup();
    assert_eq!(windows.len(), n, "two windows share an index");
    assert!(keys.iter().all(|k| windows.binary_search(k).is_err()), "a region key in a window's block");
}
