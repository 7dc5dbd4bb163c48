//! Work requests and completions, and the nouns they carry (SGEs, access and
//! send flags, GIDs), as plain Rust values. Numeric values are libibverbs'
//! so they can be shown and compared with what a C verbs user sees.

use super::status::WcStatus;
use super::window::MwBind;
use core::fmt;

/// Defines a set of flags over an integer with libibverbs' bit values.
macro_rules! flags {
    ($(#[$m:meta])* $name:ident($ty:ty) { $($(#[$fm:meta])* $flag:ident = $v:expr,)+ }) => {
        $(#[$m])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
        pub struct $name(pub $ty);
        impl $name {
            pub const EMPTY: $name = $name(0);
            $( $(#[$fm])* pub const $flag: $name = $name($v); )+
            const NAMES: &'static [(&'static str, $ty)] = &[$((stringify!($flag), $v)),+];
            pub const fn contains(self, other: $name) -> bool {
                self.0 & other.0 == other.0
            }
            pub const fn bits(self) -> $ty {
                self.0
            }
            pub const fn is_empty(self) -> bool {
                self.0 == 0
            }
        }
        impl core::ops::BitOr for $name {
            type Output = $name;
            fn bitor(self, o: $name) -> $name {
                $name(self.0 | o.0)
            }
        }
        impl core::ops::BitOrAssign for $name {
            fn bitor_assign(&mut self, o: $name) {
                self.0 |= o.0;
            }
        }
        impl core::ops::BitAnd for $name {
            type Output = $name;
            fn bitand(self, o: $name) -> $name {
                $name(self.0 & o.0)
            }
        }
        impl core::ops::Not for $name {
            type Output = $name;
            fn not(self) -> $name {
                $name(!self.0)
            }
        }
        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
                let mut first = true;
                for (n, v) in Self::NAMES {
                    if self.0 & v != 0 {
                        if !first {
                            f.write_str(" | ")?;
                        }
                        f.write_str(n)?;
                        first = false;
                    }
                }
                if first {
                    f.write_str("EMPTY")?;
                }
                Ok(())
            }
        }
    };
}
pub(crate) use flags;

flags! {
    /// Memory region and QP access flags (`enum ibv_access_flags`).
    AccessFlags(u32) {
        LOCAL_WRITE = 1 << 0,
        REMOTE_WRITE = 1 << 1,
        REMOTE_READ = 1 << 2,
        REMOTE_ATOMIC = 1 << 3,
        MW_BIND = 1 << 4,
        ZERO_BASED = 1 << 5,
        ON_DEMAND = 1 << 6,
        HUGETLB = 1 << 7,
        FLUSH_GLOBAL = 1 << 8,
        FLUSH_PERSISTENT = 1 << 9,
        RELAXED_ORDERING = 1 << 20,
        /// uroce's own (not in `ibv_access_flags`): a peer's SEND_WITH_INV
        /// may invalidate the region's key. Without it a remote invalidate
        /// of the region is refused (rxe allows it only for memory windows
        /// and fast-registration MRs, which this engine does not have yet).
        REMOTE_INVALIDATE = 1 << 31,
    }
}

flags! {
    /// Send work request flags (`enum ibv_send_flags`).
    SendFlags(u32) {
        FENCE = 1 << 0,
        SIGNALED = 1 << 1,
        SOLICITED = 1 << 2,
        INLINE = 1 << 3,
        IP_CSUM = 1 << 4,
    }
}

flags! {
    /// Work completion flags (`enum ibv_wc_flags`).
    WcFlags(u32) {
        GRH = 1 << 0,
        WITH_IMM = 1 << 1,
        IP_CSUM_OK = 1 << 2,
        WITH_INV = 1 << 3,
    }
}

/// A 16-byte GID: an IPv6 address, or an IPv4-mapped one (`::ffff:a.b.c.d`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct Gid(pub [u8; 16]);

impl Gid {
    /// The IPv4-mapped GID of `a.b.c.d`, as rxe's GID index 1.
    pub const fn from_ipv4(ip: [u8; 4]) -> Gid {
        Gid([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, ip[0], ip[1], ip[2], ip[3]])
    }
    /// The GID of an IP address: IPv4-mapped for IPv4.
    pub fn from_ip(ip: core::net::IpAddr) -> Gid {
        match ip {
            core::net::IpAddr::V4(v4) => Gid::from_ipv4(v4.octets()),
            core::net::IpAddr::V6(v6) => Gid(v6.octets()),
        }
    }
    /// The IP address packets to this GID go to: IPv4 for a mapped GID.
    pub fn ip(&self) -> core::net::IpAddr {
        let v6 = self.to_ipv6();
        match v6.to_ipv4_mapped() {
            Some(v4) => core::net::IpAddr::V4(v4),
            None => core::net::IpAddr::V6(v6),
        }
    }
    /// `fe80::` + the modified EUI-64 of `mac`, as the kernel forms an
    /// interface's link-local address (rxe's GID index 0).
    pub const fn link_local(mac: [u8; 6]) -> Gid {
        let m = mac;
        Gid([0xfe, 0x80, 0, 0, 0, 0, 0, 0, m[0] ^ 0x02, m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]])
    }
    /// The GID as an IPv6 address, mapped or not: its `Display` is the text
    /// `inet_ntop` gives (`::ffff:198.18.0.11`), which rc_pingpong prints,
    /// where [`Gid`]'s own `Display` is `ibv_devinfo`'s.
    pub fn to_ipv6(self) -> core::net::Ipv6Addr {
        core::net::Ipv6Addr::from(self.0)
    }
    /// The IPv4 address when this GID is IPv4-mapped.
    pub fn ipv4(&self) -> Option<[u8; 4]> {
        self.to_ipv6().to_ipv4_mapped().map(|v4| v4.octets())
    }
}

impl fmt::Debug for Gid {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for Gid {
    /// `0000:0000:0000:0000:0000:ffff:c612:000b`, as `ibv_devinfo -v` prints GIDs.
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        for (i, pair) in self.0.chunks(2).enumerate() {
            if i > 0 {
                f.write_str(":")?;
            }
            write!(f, "{:02x}{:02x}", pair[0], pair[1])?;
        }
        Ok(())
    }
}

/// One scatter/gather element (`struct ibv_sge`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Sge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}

/// Where a UD send goes (the address handle plus `wr.ud` of `ibv_send_wr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdDest {
    pub dgid: Gid,
    pub remote_qpn: u32,
    /// When the most significant bit is set, the QP's own Q_Key is sent instead.
    pub remote_qkey: u32,
}

/// The operation of a send work request, carrying its operands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WrOp {
    Send,
    SendWithImm {
        imm: u32,
    },
    SendWithInv {
        invalidate_rkey: u32,
    },
    RdmaWrite {
        remote_addr: u64,
        rkey: u32,
    },
    RdmaWriteWithImm {
        remote_addr: u64,
        rkey: u32,
        imm: u32,
    },
    RdmaRead {
        remote_addr: u64,
        rkey: u32,
    },
    AtomicCmpSwp {
        remote_addr: u64,
        rkey: u32,
        compare: u64,
        swap: u64,
    },
    AtomicFetchAdd {
        remote_addr: u64,
        rkey: u32,
        add: u64,
    },
    /// `IBV_WR_ATOMIC_WRITE` (IBTA 1.5): the 8 bytes of `data` land at once at
    /// the 8-byte aligned `remote_addr`, as `ibv_wr_atomic_write` gives them.
    AtomicWrite {
        remote_addr: u64,
        rkey: u32,
        data: [u8; 8],
    },
    /// `IBV_WR_FLUSH` (IBTA 1.5): what was written before is made globally
    /// visible (`placement` bit 0, `IBV_FLUSH_GLOBAL`) and/or persistent
    /// (bit 1, `IBV_FLUSH_PERSISTENT`), for `len` bytes at `remote_addr`, or
    /// for the whole region when `whole_region` (`IBV_FLUSH_MR`).
    Flush {
        remote_addr: u64,
        rkey: u32,
        len: u32,
        placement: u8,
        whole_region: bool,
    },
    /// `IBV_WR_BIND_MW`: binds the memory window whose current rkey is
    /// `mw_rkey`, giving it the key byte of `rkey` (`ibv_inc_rkey` of the
    /// old one, usually). A local operation: nothing goes on the wire.
    BindMw {
        mw_rkey: u32,
        rkey: u32,
        bind: MwBind,
    },
    /// `IBV_WR_LOCAL_INV`: invalidates the type 2 window (or invalidatable
    /// region) of `rkey`. A local operation.
    LocalInv {
        rkey: u32,
    },
}

impl WrOp {
    /// The completion opcode a requester reports for this operation.
    pub fn wc_opcode(self) -> WcOpcode {
        match self {
            WrOp::Send | WrOp::SendWithImm { .. } | WrOp::SendWithInv { .. } => WcOpcode::Send,
            WrOp::RdmaWrite { .. } | WrOp::RdmaWriteWithImm { .. } => WcOpcode::RdmaWrite,
            WrOp::RdmaRead { .. } => WcOpcode::RdmaRead,
            WrOp::AtomicCmpSwp { .. } => WcOpcode::CompSwap,
            WrOp::AtomicFetchAdd { .. } => WcOpcode::FetchAdd,
            WrOp::AtomicWrite { .. } => WcOpcode::AtomicWrite,
            WrOp::Flush { .. } => WcOpcode::Flush,
            WrOp::BindMw { .. } => WcOpcode::BindMw,
            WrOp::LocalInv { .. } => WcOpcode::LocalInv,
        }
    }
    /// BIND_MW and LOCAL_INV: run by the requester in order, sending nothing.
    pub fn is_local(self) -> bool {
        matches!(self, WrOp::BindMw { .. } | WrOp::LocalInv { .. })
    }
    pub fn is_send(self) -> bool {
        matches!(self, WrOp::Send | WrOp::SendWithImm { .. } | WrOp::SendWithInv { .. })
    }
    pub fn is_write(self) -> bool {
        matches!(self, WrOp::RdmaWrite { .. } | WrOp::RdmaWriteWithImm { .. })
    }
    pub fn is_read(self) -> bool {
        matches!(self, WrOp::RdmaRead { .. })
    }
    /// CMP_SWAP and FETCH_ADD (not ATOMIC_WRITE, which returns nothing).
    pub fn is_atomic(self) -> bool {
        matches!(self, WrOp::AtomicCmpSwp { .. } | WrOp::AtomicFetchAdd { .. })
    }
    pub fn is_atomic_write(self) -> bool {
        matches!(self, WrOp::AtomicWrite { .. })
    }
    pub fn is_flush(self) -> bool {
        matches!(self, WrOp::Flush { .. })
    }
    /// The operations that take a responder resource and count against
    /// `max_rd_atomic`: READ, the atomics, ATOMIC_WRITE and FLUSH.
    pub fn is_rd_atomic(self) -> bool {
        self.is_read() || self.is_atomic() || self.is_atomic_write() || self.is_flush()
    }
    /// Whether the message carries data from local buffers (SEND, WRITE).
    pub fn carries_local_data(self) -> bool {
        self.is_send() || self.is_write()
    }
    pub fn imm(self) -> Option<u32> {
        match self {
            WrOp::SendWithImm { imm } | WrOp::RdmaWriteWithImm { imm, .. } => Some(imm),
            _ => None,
        }
    }
    /// Remote address and rkey for RDMA and atomic operations.
    pub fn remote(self) -> Option<(u64, u32)> {
        match self {
            WrOp::RdmaWrite { remote_addr, rkey }
            | WrOp::RdmaWriteWithImm { remote_addr, rkey, .. }
            | WrOp::RdmaRead { remote_addr, rkey }
            | WrOp::AtomicCmpSwp { remote_addr, rkey, .. }
            | WrOp::AtomicFetchAdd { remote_addr, rkey, .. }
            | WrOp::AtomicWrite { remote_addr, rkey, .. }
            | WrOp::Flush { remote_addr, rkey, .. } => Some((remote_addr, rkey)),
            _ => None,
        }
    }
}

/// SGEs a work request holds in place before its list goes to the heap:
/// most requests have one, and a post should allocate nothing.
const INLINE_SGES: usize = 2;

/// A work request's scatter/gather list: `sge.into()` for one,
/// `vec![..].into()` for several; reads as a slice.
pub type SgList = smallvec::SmallVec<[Sge; INLINE_SGES]>;

/// A list of one SGE, with no allocation: `sg_list: mr.sge(0, 64).into()`.
impl From<Sge> for SgList {
    fn from(sge: Sge) -> SgList {
        smallvec::smallvec![sge]
    }
}

/// A send work request (`struct ibv_send_wr`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendWr {
    pub wr_id: u64,
    pub sg_list: SgList,
    pub op: WrOp,
    pub flags: SendFlags,
    /// Destination of a UD send; ignored on RC and UC.
    pub ud: Option<UdDest>,
}

impl SendWr {
    /// A signaled work request with no UD destination.
    pub fn new(wr_id: u64, op: WrOp, sg_list: impl Into<SgList>) -> SendWr {
        SendWr { wr_id, sg_list: sg_list.into(), op, flags: SendFlags::SIGNALED, ud: None }
    }
}

/// A receive work request (`struct ibv_recv_wr`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RecvWr {
    pub wr_id: u64,
    pub sg_list: SgList,
}

/// `enum ibv_wc_opcode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum WcOpcode {
    Send = 0,
    RdmaWrite = 1,
    RdmaRead = 2,
    CompSwap = 3,
    FetchAdd = 4,
    BindMw = 5,
    LocalInv = 6,
    Tso = 7,
    Flush = 8,
    AtomicWrite = 9,
    Recv = 128,
    RecvRdmaWithImm = 129,
}

/// A work completion (`struct ibv_wc`), a plain value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkCompletion {
    pub wr_id: u64,
    pub status: WcStatus,
    pub opcode: WcOpcode,
    pub vendor_err: u32,
    pub byte_len: u32,
    /// The immediate data (host order) when `wc_flags` has `WITH_IMM`; the
    /// invalidated rkey when it has `WITH_INV`.
    pub imm_data: u32,
    pub qp_num: u32,
    pub src_qp: u32,
    pub wc_flags: WcFlags,
    pub pkey_index: u16,
    /// The network header a UD datagram came with (the kernel's
    /// `ib_wc.network_hdr_type`); `None` for every other completion.
    pub network_hdr: NetworkHdr,
}

/// The network header of a received RoCEv2 datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NetworkHdr {
    /// Not a UD receive.
    #[default]
    None,
    Ipv6,
    Ipv4,
}

impl Default for WorkCompletion {
    /// An all-zero completion (status GENERAL_ERR), to poll into.
    fn default() -> WorkCompletion {
        WorkCompletion::new(0, WcStatus::GeneralErr, WcOpcode::Send, 0)
    }
}

impl WorkCompletion {
    pub(crate) fn new(wr_id: u64, status: WcStatus, opcode: WcOpcode, qp_num: u32) -> WorkCompletion {
        WorkCompletion {
            wr_id,
            status,
            opcode,
            vendor_err: 0,
            byte_len: 0,
            imm_data: 0,
            qp_num,
            src_qp: 0,
            wc_flags: WcFlags::EMPTY,
            pkey_index: 0,
            network_hdr: NetworkHdr::None,
        }
    }
}

#[cfg(test)]
mod test {
    use super::Gid;
    use core::net::IpAddr;

    #[test]
    fn gid_and_ip_convert_both_ways() {
        let v4: IpAddr = "198.18.0.11".parse().unwrap();
        let g = Gid::from_ip(v4);
        assert_eq!(g, Gid::from_ipv4([198, 18, 0, 11]));
        assert_eq!((g.ip(), g.ipv4()), (v4, Some([198, 18, 0, 11])));
        assert_eq!(g.to_string(), "0000:0000:0000:0000:0000:ffff:c612:000b", "ibv_devinfo's form");
        assert_eq!(g.to_ipv6().to_string(), "::ffff:198.18.0.11", "inet_ntop's form");
        let v6: IpAddr = "fd00::3".parse().unwrap();
        assert_eq!((Gid::from_ip(v6).ip(), Gid::from_ip(v6).ipv4()), (v6, None));
    }

    #[test]
    fn link_local_is_the_kernels_eui64_address() {
        let g = Gid::link_local([0x02, 0, 0, 0, 0, 0x03]);
        assert_eq!(g.to_ipv6().to_string(), "fe80::ff:fe00:3");
        assert_eq!(Gid::link_local([0x52, 0x54, 0, 0x12, 0x34, 0x56]).to_ipv6().to_string(), "fe80::5054:ff:fe12:3456");
    }
}
