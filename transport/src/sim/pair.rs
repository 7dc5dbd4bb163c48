//! Two connected QPs, one on each engine of a simulation: where the tests of
//! one QP pair start, so that each says only what it does differently (its
//! seed, its QP options, its regions).

use super::{connect, create_endpoint, Endpoint, LinkConfig, QpOptions, Sim};
use crate::engine::{AccessFlags, SrqAttr, SrqHandle};

/// Local write and remote write, read and atomics, no FLUSH: what a test's
/// region allows unless access is what the test is about.
pub const REGION_ACCESS: AccessFlags = AccessFlags(
    AccessFlags::LOCAL_WRITE.0
        | AccessFlags::REMOTE_WRITE.0
        | AccessFlags::REMOTE_READ.0
        | AccessFlags::REMOTE_ATOMIC.0,
);

/// QP `a` on node 0 and QP `b` on node 1, in RTS and aimed at each other,
/// and the regions [`Pair::with_regions`] registered for them to use.
pub struct Pair {
    pub sim: Sim,
    pub a: Endpoint,
    pub b: Endpoint,
    /// The key of node 0's source region at [`Pair::SRC_ADDR`], or
    /// [`Pair::NO_REGION`].
    pub src: u32,
    /// The key of node 1's destination region at [`Pair::DST_ADDR`], or
    /// [`Pair::NO_REGION`].
    pub dst: u32,
}

impl Pair {
    /// Where [`Pair::with_regions`] puts node 0's source region.
    pub const SRC_ADDR: u64 = 0x1000;
    /// Where [`Pair::with_regions`] puts node 1's destination region.
    pub const DST_ADDR: u64 = 0x8000;
    /// `src` and `dst` of a pair without regions. It is no key (the engine's
    /// keys have bit 8 set), so a work request that uses it fails.
    pub const NO_REGION: u32 = 0;

    /// Both QPs made with `o`, over a clean link.
    pub fn new(seed: u64, o: &QpOptions) -> Pair {
        Pair::with_link(seed, LinkConfig::clean(), o)
    }

    /// Both QPs made with `o`, over `link`.
    pub fn with_link(seed: u64, link: LinkConfig, o: &QpOptions) -> Pair {
        let mut sim = Sim::new(seed, link);
        let a = create_endpoint(&mut sim.engines[0], o, None, None);
        let b = create_endpoint(&mut sim.engines[1], o, None, None);
        Pair::connect(sim, a, b, o)
    }

    /// Node 1's QP takes its receives from a new SRQ of `attr` in the QP's
    /// PD; a clean link.
    pub fn with_srq(seed: u64, o: &QpOptions, attr: SrqAttr) -> (Pair, SrqHandle) {
        let mut sim = Sim::new(seed, LinkConfig::clean());
        let a = create_endpoint(&mut sim.engines[0], o, None, None);
        let pd = sim.engines[1].alloc_pd();
        let srq = sim.engines[1].create_srq(pd, attr).expect("valid SRQ attributes");
        let b = create_endpoint(&mut sim.engines[1], o, Some(pd), Some(srq));
        (Pair::connect(sim, a, b, o), srq)
    }

    /// Connects `a` of node 0 and `b` of node 1, which the caller made (with
    /// options of their own, say), with the attributes of `o`.
    pub fn connect(mut sim: Sim, a: Endpoint, b: Endpoint, o: &QpOptions) -> Pair {
        connect(&mut sim, &a, &b, o);
        Pair { sim, a, b, src: Pair::NO_REGION, dst: Pair::NO_REGION }
    }

    /// Registers `src` on node 0 at [`Pair::SRC_ADDR`] and `dst` on node 1 at
    /// [`Pair::DST_ADDR`], both with [`REGION_ACCESS`].
    pub fn with_regions(mut self, src: Vec<u8>, dst: Vec<u8>) -> Pair {
        self.src = self.reg_mr(0, Pair::SRC_ADDR, src, REGION_ACCESS);
        self.dst = self.reg_mr(1, Pair::DST_ADDR, dst, REGION_ACCESS);
        self
    }

    /// Registers `bytes` at `addr` on `node`, in its QP's PD. Returns the key,
    /// lkey and rkey alike.
    pub fn reg_mr(&mut self, node: usize, addr: u64, bytes: Vec<u8>, access: AccessFlags) -> u32 {
        let pd = self.endpoint(node).pd;
        self.sim.engines[node].reg_mr(pd, addr, Box::new(bytes), access).expect("the QP's PD exists").lkey
    }

    /// The QP of `node`: `a` on 0, `b` on 1.
    pub fn endpoint(&self, node: usize) -> &Endpoint {
        [&self.a, &self.b][node]
    }
}
