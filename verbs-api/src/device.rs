//! Devices: what can be opened (links named by their specs), and what a device
//! and its one port look like to `ibv_query_device` / `ibv_query_port`.

use crate::context::{Context, OpenOptions};
use crate::error::Error;
use uroce_stack::link::LinkInfo;
use uroce_transport::engine::{Mtu, MAX_MCAST_GRP, MAX_MCAST_QP_ATTACH, MAX_MSG_SZ, MAX_RD_ATOMIC};

/// A device that can be opened: a link named by its spec, e.g. `udp:127.0.0.1`,
/// `packet:eth0`, `tap:uroce0,ip=10.0.0.1/24`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    /// The device spec, which is also its name.
    pub name: String,
}

/// The devices this machine offers without configuration: the udp link on
/// loopback, and a packet link on every interface but `lo` (which needs
/// CAP_NET_RAW to open).
pub fn devices() -> Vec<Device> {
    let mut out = vec![Device { name: "udp:127.0.0.1".into() }];
    if let Ok(dir) = std::fs::read_dir("/sys/class/net") {
        let mut names: Vec<String> = dir.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        out.extend(names.into_iter().filter(|n| n != "lo").map(|n| Device { name: format!("packet:{n}") }));
    }
    out
}

impl Device {
    /// Opens a device by spec with a blocking progress thread (`ibv_open_device`).
    pub fn open(spec: &str) -> Result<Context, Error> {
        Device::open_with(spec, &OpenOptions::default())
    }

    /// Whether this process has the device open: opening it again gives a
    /// context on the same driver (one engine, one link, one QPN space).
    pub fn is_open(spec: &str) -> bool {
        crate::driver::is_open(spec)
    }

    /// Opens a device with options: progress mode, seed, capture, impairment.
    /// A device this process has open already is shared: the new context
    /// uses its driver, which must have been opened with the same options.
    pub fn open_with(spec: &str, opts: &OpenOptions) -> Result<Context, Error> {
        let ctx = Context::new(crate::driver::open_device(spec, opts)?)?;
        crate::rdma_cm::note_context(&ctx);
        Ok(ctx)
    }
}

/// `struct ibv_device_attr`, with the limits of the kernel rxe where uroce
/// has none of its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceAttr {
    /// uroce's version.
    pub fw_ver: String,
    /// EUI-64 from the link's MAC (or, for udp, its IP).
    pub node_guid: u64,
    /// The same as `node_guid`.
    pub sys_image_guid: u64,
    /// Largest region that can be registered.
    pub max_mr_size: u64,
    /// Page sizes supported.
    pub page_size_cap: u64,
    /// 0xffffff, as rxe.
    pub vendor_id: u32,
    /// 0.
    pub vendor_part_id: u32,
    /// 0.
    pub hw_ver: u32,
    /// Most QPs.
    pub max_qp: u32,
    /// Most outstanding WRs per queue.
    pub max_qp_wr: u32,
    /// Most scatter/gather entries per WR.
    pub max_sge: u32,
    /// Most CQs.
    pub max_cq: u32,
    /// Most entries per CQ.
    pub max_cqe: u32,
    /// Most memory regions.
    pub max_mr: u32,
    /// Most memory windows (not enforced, as `max_mr`).
    pub max_mw: u32,
    /// Most multicast groups (rxe's 8192).
    pub max_mcast_grp: u32,
    /// Most QPs attached to one group (rxe's 56).
    pub max_mcast_qp_attach: u32,
    /// Most attachments in all.
    pub max_total_mcast_qp_attach: u32,
    /// Most protection domains.
    pub max_pd: u32,
    /// Most outstanding RDMA READs/atomics a QP serves as responder.
    pub max_qp_rd_atom: u32,
    /// Most it may have outstanding as requester.
    pub max_qp_init_rd_atom: u32,
    /// "ATOMIC_HCA": atomics are atomic across the whole device.
    pub atomic_cap: &'static str,
    /// Most SRQs.
    pub max_srq: u32,
    /// Most WRs per SRQ.
    pub max_srq_wr: u32,
    /// Most scatter/gather entries per SRQ WR.
    pub max_srq_sge: u32,
    /// Ports: always 1.
    pub phys_port_cnt: u8,
}

impl DeviceAttr {
    pub(crate) fn for_link(info: &LinkInfo) -> DeviceAttr {
        let guid = node_guid(info);
        DeviceAttr {
            fw_ver: env!("CARGO_PKG_VERSION").to_string(),
            node_guid: guid,
            sys_image_guid: guid,
            max_mr_size: u64::MAX,
            page_size_cap: 0xffff_f000,
            vendor_id: 0xffffff,
            vendor_part_id: 0,
            hw_ver: 0,
            max_qp: 0x10000,
            max_qp_wr: 0x4000,
            max_sge: 32,
            max_cq: 0x4000,
            max_cqe: 0x7fff,
            max_mr: 0x4000,
            max_mw: 0x4000,
            max_mcast_grp: MAX_MCAST_GRP as u32,
            max_mcast_qp_attach: MAX_MCAST_QP_ATTACH as u32,
            max_total_mcast_qp_attach: (MAX_MCAST_GRP * MAX_MCAST_QP_ATTACH) as u32,
            max_pd: 0x10000,
            max_qp_rd_atom: u32::from(MAX_RD_ATOMIC),
            max_qp_init_rd_atom: u32::from(MAX_RD_ATOMIC),
            atomic_cap: "ATOMIC_HCA",
            max_srq: 0x4000,
            max_srq_wr: 0x4000,
            max_srq_sge: 32,
            phys_port_cnt: 1,
        }
    }
}

/// A GUID from the link's MAC (EUI-64, as rxe derives it) or, for a udp link
/// with no MAC, from its IP.
fn node_guid(info: &LinkInfo) -> u64 {
    node_guid_of(info.mac, info.ipv4)
}

/// The node GUID of a device with MAC `mac` (EUI-64, as rxe derives it) or,
/// with none (a udp link), with IPv4 address `ipv4`: what
/// `ibv_get_device_guid` can say of a device before it is opened.
pub fn node_guid_of(mac: Option<[u8; 6]>, ipv4: Option<std::net::Ipv4Addr>) -> u64 {
    let mac = mac.unwrap_or_else(|| {
        let ip = ipv4.map(|v| v.octets()).unwrap_or_default();
        [0x02, 0x00, ip[0], ip[1], ip[2], ip[3]]
    });
    let eui = [mac[0] ^ 0x02, mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4], mac[5]];
    u64::from_be_bytes(eui)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
/// `enum ibv_port_state`: a uroce port is always active once opened.
pub enum PortState {
    /// PORT_ACTIVE (4).
    Active,
}

/// `struct ibv_port_attr` for the device's one port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortAttr {
    /// Always active.
    pub state: PortState,
    /// 4096.
    pub max_mtu: Mtu,
    /// The path MTU of the link: the largest IB MTU that fits.
    pub active_mtu: Mtu,
    /// Entries in the GID table.
    pub gid_tbl_len: u32,
    /// The longest message a work request may carry: 2^31 bytes.
    pub max_msg_sz: u32,
    /// 0 on RoCE.
    pub lid: u16,
    /// 0 on RoCE.
    pub sm_lid: u16,
    /// `Ethernet`.
    pub link_layer: &'static str,
}

impl PortAttr {
    pub(crate) fn for_link(info: &LinkInfo) -> PortAttr {
        PortAttr {
            state: PortState::Active,
            max_mtu: Mtu::Mtu4096,
            active_mtu: info.path_mtu,
            gid_tbl_len: info.gids.len() as u32,
            max_msg_sz: MAX_MSG_SZ,
            lid: 0,
            sm_lid: 0,
            link_layer: "Ethernet",
        }
    }
}
