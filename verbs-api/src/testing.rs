//! What the verbs API's own tests share, unit and integration alike: two
//! connected RC QPs on two devices of a test net of their own. Built with the
//! `testing` feature, which the crate's tests turn on (its Cargo.toml); not
//! for applications.

use crate::{ConnectAttr, Context, Cq, Device, OpenOptions, Pd, Progress, Qp, QpInit, TestNet};
use uroce_stack::link::impair::ImpairConfig;

/// Connects two QPs (of one context or two) to each other over GID 1 of
/// their contexts, with rc_pingpong's defaults.
pub fn connect_pair(a: &Qp, b: &Qp) {
    let gid = |q: &Qp| q.pd().context().query_gid(1).expect("GID 1 of a udp device");
    a.connect(&ConnectAttr::new(b.qp_num(), b.initial_psn(), gid(b))).expect("connect a to b");
    b.connect(&ConnectAttr::new(a.qp_num(), a.initial_psn(), gid(a))).expect("connect b to a");
}

/// How [`RcPair::open`] builds its pair.
#[derive(Debug, Clone)]
pub struct PairSpec {
    /// Gives the QPNs and PSNs.
    pub seed: u64,
    /// Both sides' progress mode.
    pub progress: Progress,
    /// Faults on side a's link only.
    pub impair_a: Option<ImpairConfig>,
    /// Entries of each side's CQ (both QPs' send and receive share it).
    pub cq_depth: usize,
    /// Both QPs' send and receive queue depths, if not the default's.
    pub max_wr: Option<u32>,
    /// Both devices' `shm=` (the same-host path on or off); `None`: as
    /// `UROCE_SHM` says (on unless it is `0`).
    pub same_host: Option<bool>,
}

impl PairSpec {
    /// A pair with small queues, in progress mode `progress`.
    pub fn new(seed: u64, progress: Progress) -> PairSpec {
        PairSpec { seed, progress, impair_a: None, cq_depth: 16, max_wr: None, same_host: None }
    }
}

/// Two RC QPs, `a` on address 1 and `b` on address 2 of a net of their own,
/// connected to each other; each side with its PD and one CQ.
pub struct RcPair {
    /// Side a's context, on address 1.
    pub ctx_a: Context,
    /// Side b's context, on address 2.
    pub ctx_b: Context,
    /// Side a's PD.
    pub pd_a: Pd,
    /// Side b's PD.
    pub pd_b: Pd,
    /// Side a's CQ, for its QP's sends and receives.
    pub cq_a: Cq,
    /// Side b's CQ, for its QP's sends and receives.
    pub cq_b: Cq,
    /// Side a's QP, connected to `b`.
    pub a: Qp,
    /// Side b's QP, connected to `a`.
    pub b: Qp,
    /// Declared last, so the addresses are given back after the devices close.
    pub net: TestNet,
}

impl RcPair {
    /// Opens both devices and connects the QPs; panics (it is for tests) if
    /// any step fails.
    pub fn open(spec: &PairSpec) -> RcPair {
        let net = TestNet::new();
        let dev = |host| match spec.same_host {
            Some(on) => format!("{},shm={}", net.udp(host), u8::from(on)),
            None => net.udp(host),
        };
        let (dev_a, dev_b) = (dev(1), dev(2));
        let open_a = |opts: &OpenOptions| Device::open_with(&dev_a, opts);
        let open_b = |opts: &OpenOptions| Device::open_with(&dev_b, opts);
        RcPair::open_on(spec, net, open_a, open_b)
    }

    /// The same on devices the caller opens with the options given (side
    /// a's carry `spec.impair_a`): another kind of link, or one opened in
    /// a network namespace. `net` is kept for the pair's lifetime.
    pub fn open_on(
        spec: &PairSpec,
        net: TestNet,
        open_a: impl FnOnce(&OpenOptions) -> Result<Context, crate::Error>,
        open_b: impl FnOnce(&OpenOptions) -> Result<Context, crate::Error>,
    ) -> RcPair {
        let opts = OpenOptions { progress: spec.progress, seed: Some(spec.seed), ..OpenOptions::default() };
        let opts_a = OpenOptions { impair: spec.impair_a, ..opts.clone() };
        let ctx_a = open_a(&opts_a).expect("open side a");
        let ctx_b = open_b(&opts).expect("open side b");
        let (pd_a, pd_b) = (ctx_a.alloc_pd(), ctx_b.alloc_pd());
        let cq_a = ctx_a.create_cq(spec.cq_depth, None).expect("side a's CQ");
        let cq_b = ctx_b.create_cq(spec.cq_depth, None).expect("side b's CQ");
        let init = |cq: &Cq| {
            let mut init = QpInit::rc(cq, cq);
            if let Some(n) = spec.max_wr {
                init.cap.max_send_wr = n;
                init.cap.max_recv_wr = n;
            }
            init
        };
        let a = pd_a.create_qp(&init(&cq_a)).expect("side a's QP");
        let b = pd_b.create_qp(&init(&cq_b)).expect("side b's QP");
        connect_pair(&a, &b);
        RcPair { ctx_a, ctx_b, pd_a, pd_b, cq_a, cq_b, a, b, net }
    }
}
