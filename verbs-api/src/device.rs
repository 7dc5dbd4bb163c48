//! Devices: what can be opened (links named by their specs), and what a device
//! and its one port look like to `ibv_query_device` / `ibv_query_port`.

use crate::context::{Context, OpenOptions};
use crate::error::Error;
use uroce_stack::link::{spec, Capture, Impair, LinkInfo};
use uroce_transport::engine::{Mtu, MAX_RD_ATOMIC};

/// A device that can be opened: a link named by its spec, e.g. `udp:127.0.0.1`,
/// `packet:eth0`, `tap:uroce0,ip=10.0.0.1/24`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
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

    /// Opens a device with options: progress mode, seed, capture, impairment.
    pub fn open_with(spec: &str, opts: &OpenOptions) -> Result<Context, Error> {
        let mut link = spec::open(spec).map_err(Error::Device)?;
        if let Some(cfg) = opts.impair {
            link = Box::new(Impair::new(link, cfg));
        }
        if let Some(path) = &opts.pcap {
            let captured = Capture::to_file(link, path).map_err(|err| Error::Os { verb: "pcap capture", err })?;
            link = Box::new(captured);
        }
        Ok(Context::start(link, opts))
    }
}

/// The engine's MTU enum for a path MTU in bytes.
pub(crate) fn engine_mtu(bytes: usize) -> Mtu {
    Mtu::from_bytes(bytes as u32).unwrap_or(Mtu::Mtu1024)
}

/// `struct ibv_device_attr`, with the limits of the kernel rxe where uroce
/// has none of its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceAttr {
    pub fw_ver: String,
    pub node_guid: u64,
    pub sys_image_guid: u64,
    pub max_mr_size: u64,
    pub page_size_cap: u64,
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub hw_ver: u32,
    pub max_qp: u32,
    pub max_qp_wr: u32,
    pub max_sge: u32,
    pub max_cq: u32,
    pub max_cqe: u32,
    pub max_mr: u32,
    pub max_pd: u32,
    pub max_qp_rd_atom: u32,
    pub max_qp_init_rd_atom: u32,
    /// "ATOMIC_HCA": atomics are atomic across the whole device.
    pub atomic_cap: &'static str,
    pub max_srq: u32,
    pub max_srq_wr: u32,
    pub max_srq_sge: u32,
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
    let mac = info.mac.unwrap_or_else(|| {
        let ip = info.ipv4.map(|v| v.octets()).unwrap_or_default();
        [0x02, 0x00, ip[0], ip[1], ip[2], ip[3]]
    });
    let eui = [mac[0] ^ 0x02, mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4], mac[5]];
    u64::from_be_bytes(eui)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortState {
    Active,
}

/// `struct ibv_port_attr` for the device's one port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortAttr {
    pub state: PortState,
    pub max_mtu: Mtu,
    pub active_mtu: Mtu,
    pub gid_tbl_len: u32,
    pub lid: u16,
    pub sm_lid: u16,
    pub link_layer: &'static str,
}

impl PortAttr {
    pub(crate) fn for_link(info: &LinkInfo) -> PortAttr {
        PortAttr {
            state: PortState::Active,
            max_mtu: Mtu::Mtu4096,
            active_mtu: engine_mtu(info.path_mtu.bytes()),
            gid_tbl_len: info.gids.len() as u32,
            lid: 0,
            sm_lid: 0,
            link_layer: "Ethernet",
        }
    }
}
