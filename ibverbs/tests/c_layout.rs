//! The drop-in's C structures against rdma-core's installed headers: a C
//! program compiled with gcc against `<infiniband/verbs.h>` prints the size
//! of each structure and the offset of each field uroce lays out, and they
//! must equal the Rust side's. (src/ffi/abi.rs asserts the same numbers at
//! compile time; this catches a header that disagrees with them.)

use std::fmt::Write as _;
use std::mem::{offset_of, size_of};
use std::process::Command;
use uroce_ibverbs::ffi::abi::*;
use uroce_ibverbs::ffi::cm_abi::*;
use uroce_ibverbs::ffi::cm_addrinfo::RdmaAddrinfo;

/// For each (C struct, Rust type, fields named alike in both): the C lines
/// that print them and the lines the Rust side expects.
macro_rules! layouts {
    ($( $c:literal => $rust:ty { $($field:ident $(= $cfield:literal)?),* } )*) => {{
        let mut c = String::new();
        let mut want = String::new();
        $(
            writeln!(c, r#"printf("{} size %zu\n", sizeof(struct {}));"#, $c, $c).unwrap();
            writeln!(want, "{} size {}", $c, size_of::<$rust>()).unwrap();
            $(
                let cfield = layouts!(@name $field $($cfield)?);
                writeln!(c, r#"printf("{}.{} %zu\n", offsetof(struct {}, {}));"#, $c, cfield, $c, cfield).unwrap();
                writeln!(want, "{}.{} {}", $c, cfield, offset_of!($rust, $field)).unwrap();
            )*
        )*
        (c, want)
    }};
    (@name $field:ident) => { stringify!($field) };
    (@name $field:ident $cfield:literal) => { $cfield };
}

#[test]
fn the_structures_match_rdma_cores_headers() {
    let headers = ["/usr/include/infiniband/verbs.h", "/usr/include/rdma/rdma_cma.h"];
    let gcc = Command::new("gcc").arg("--version").output().is_ok_and(|o| o.status.success());
    if !headers.iter().all(|h| std::path::Path::new(h).exists()) || !gcc {
        println!(
            "SKIP: needs gcc and rdma-core's headers (libibverbs-dev, librdmacm-dev; bash scripts/install-deps as root)"
        );
        return;
    }
    let (body, want) = layouts! {
        "ibv_device" => IbvDevice { node_type, transport_type, name, dev_name, dev_path, ibdev_path }
        "ibv_context_ops" => IbvContextOps {
            compat_query_device = "_compat_query_device", compat_query_port = "_compat_query_port",
            alloc_mw, bind_mw, dealloc_mw, poll_cq, req_notify_cq, post_srq_recv, post_send, post_recv
        }
        "ibv_context" => IbvContext { device, ops, cmd_fd, async_fd, num_comp_vectors, mutex, abi_compat }
        "verbs_context" => VerbsContext {
            query_port, advise_mr, alloc_null_mr, read_counters, reg_dm_mr, alloc_dm, free_dm, alloc_parent_domain,
            alloc_td, modify_cq, create_wq, create_cq_ex, priv_ = "priv", query_device_ex, open_qp, create_qp_ex,
            get_srq_num, create_srq_ex, open_xrcd, close_xrcd, sz, context
        }
        "ibv_device_attr" => IbvDeviceAttr {
            fw_ver, node_guid, sys_image_guid, max_mr_size, page_size_cap, vendor_id, vendor_part_id, hw_ver, max_qp,
            max_qp_wr, device_cap_flags, max_sge, max_sge_rd, max_cq, max_cqe, max_mr, max_pd, max_qp_rd_atom,
            max_ee_rd_atom, max_res_rd_atom, max_qp_init_rd_atom, max_ee_init_rd_atom, atomic_cap, max_ee, max_rdd,
            max_mw, max_raw_ipv6_qp, max_raw_ethy_qp, max_mcast_grp, max_mcast_qp_attach, max_total_mcast_qp_attach,
            max_ah, max_fmr, max_map_per_fmr, max_srq, max_srq_wr, max_srq_sge, max_pkeys, local_ca_ack_delay,
            phys_port_cnt
        }
        "ibv_port_attr" => IbvPortAttr {
            state, max_mtu, active_mtu, gid_tbl_len, port_cap_flags, max_msg_sz, bad_pkey_cntr, qkey_viol_cntr,
            pkey_tbl_len, lid, sm_lid, lmc, max_vl_num, sm_sl, subnet_timeout, init_type_reply, active_width,
            active_speed, phys_state, link_layer, flags, port_cap_flags2
        }
        "ibv_gid_entry" => IbvGidEntry { gid, gid_index, port_num, gid_type, ndev_ifindex }
        "ibv_pd" => IbvPd { context, handle }
        "ibv_async_event" => IbvAsyncEvent { element, event_type }
        "ibv_ah" => IbvAh { context, pd, handle }
        "ibv_srq_attr" => IbvSrqAttr { max_wr, max_sge, srq_limit }
        "ibv_srq_init_attr" => IbvSrqInitAttr { srq_context, attr }
        "ibv_srq" => IbvSrq { context, srq_context, pd, handle, mutex, cond, events_completed }
        "ibv_mr" => IbvMr { context, pd, addr, length, handle, lkey, rkey }
        "ibv_comp_channel" => IbvCompChannel { context, fd, refcnt }
        "ibv_cq" => IbvCq {
            context, channel, cq_context, handle, cqe, mutex, cond, comp_events_completed, async_events_completed
        }
        "ibv_cq_ex" => IbvCqEx {
            base = "context", comp_mask, status, wr_id, start_poll, next_poll, end_poll, read_opcode,
            read_vendor_err, read_byte_len, read_imm_data, read_qp_num, read_src_qp, read_wc_flags, read_slid,
            read_sl, read_dlid_path_bits, read_completion_ts, read_cvlan, read_flow_tag, read_tm_info,
            read_completion_wallclock_ns
        }
        "ibv_cq_init_attr_ex" => IbvCqInitAttrEx {
            cqe, cq_context, channel, comp_vector, wc_flags, comp_mask, flags, parent_domain
        }
        "ibv_poll_cq_attr" => IbvPollCqAttr { comp_mask }
        "ibv_wc" => IbvWc {
            wr_id, status, opcode, vendor_err, byte_len, imm_data, qp_num, src_qp, wc_flags, pkey_index, slid, sl,
            dlid_path_bits
        }
        "ibv_qp_cap" => IbvQpCap { max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline_data }
        "ibv_qp_init_attr" => IbvQpInitAttr { qp_context, send_cq, recv_cq, srq, cap, qp_type, sq_sig_all }
        "ibv_global_route" => IbvGlobalRoute { dgid, flow_label, sgid_index, hop_limit, traffic_class }
        "ibv_ah_attr" => IbvAhAttr { grh, dlid, sl, src_path_bits, static_rate, is_global, port_num }
        "ibv_qp_attr" => IbvQpAttr {
            qp_state, cur_qp_state, path_mtu, path_mig_state, qkey, rq_psn, sq_psn, dest_qp_num, qp_access_flags, cap,
            ah_attr, alt_ah_attr, pkey_index, alt_pkey_index, en_sqd_async_notify, sq_draining, max_rd_atomic,
            max_dest_rd_atomic, min_rnr_timer, port_num, timeout, retry_cnt, rnr_retry, alt_port_num, alt_timeout,
            rate_limit
        }
        "ibv_qp" => IbvQp {
            context, qp_context, pd, send_cq, recv_cq, srq, handle, qp_num, state, qp_type, mutex, cond,
            events_completed
        }
        "ibv_qp_ex" => IbvQpEx {
            qp_base, comp_mask, wr_id, wr_flags, wr_atomic_cmp_swp, wr_atomic_fetch_add, wr_bind_mw, wr_local_inv,
            wr_rdma_read, wr_rdma_write, wr_rdma_write_imm, wr_send, wr_send_imm, wr_send_inv, wr_send_tso,
            wr_set_ud_addr, wr_set_xrc_srqn, wr_set_inline_data, wr_set_inline_data_list, wr_set_sge,
            wr_set_sge_list, wr_start, wr_complete, wr_abort, wr_atomic_write
        }
        "ibv_data_buf" => IbvDataBuf { addr, length }
        "ibv_rx_hash_conf" => IbvRxHashConf { rx_hash_function, rx_hash_key_len, rx_hash_key, rx_hash_fields_mask }
        "ibv_qp_init_attr_ex" => IbvQpInitAttrEx {
            qp_context, send_cq, recv_cq, srq, cap, qp_type, sq_sig_all, comp_mask, pd, xrcd, create_flags,
            max_tso_header, rwq_ind_tbl, rx_hash_conf, source_qpn, send_ops_flags
        }
        "ibv_sge" => IbvSge { addr, length, lkey }
        "ibv_send_wr" => IbvSendWr { wr_id, next, sg_list, num_sge, opcode, send_flags, wr_0 = "wr" }
        "ibv_recv_wr" => IbvRecvWr { wr_id, next, sg_list, num_sge }
        "rdma_event_channel" => RdmaEventChannel { fd }
        "rdma_ib_addr" => RdmaIbAddr { sgid, dgid, pkey }
        "rdma_addr" => RdmaAddr { src = "src_storage", dst = "dst_storage", ibaddr = "addr.ibaddr" }
        "rdma_route" => RdmaRoute { addr, path_rec, num_paths }
        "rdma_cm_id" => RdmaCmId {
            verbs, channel, context, qp, route, ps, port_num, event, send_cq_channel, send_cq, recv_cq_channel,
            recv_cq, srq, pd, qp_type
        }
        "rdma_conn_param" => RdmaConnParam {
            private_data, private_data_len, responder_resources, initiator_depth, flow_control, retry_count,
            rnr_retry_count, srq, qp_num
        }
        "rdma_ud_param" => RdmaUdParam { private_data, private_data_len, ah_attr, qp_num, qkey }
        "rdma_cm_event" => RdmaCmEvent { id, listen_id, event, status, param }
        "rdma_addrinfo" => RdmaAddrinfo {
            ai_flags, ai_family, ai_qp_type, ai_port_space, ai_src_len, ai_dst_len, ai_src_addr, ai_dst_addr,
            ai_src_canonname, ai_dst_canonname, ai_route_len, ai_route, ai_connect_len, ai_connect, ai_next
        }
    };
    let dir = std::env::temp_dir().join(format!("uroce-c-layout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("layout.c");
    let exe = dir.join("layout");
    let program = format!(
        "#include <stddef.h>\n#include <stdio.h>\n#include <infiniband/verbs.h>\n#include <rdma/rdma_cma.h>\nint main(void) {{\n{body}return 0;\n}}\n"
    );
    std::fs::write(&src, program).unwrap();
    let cc = Command::new("gcc").arg("-o").arg(&exe).arg(&src).output().expect("gcc");
    assert!(cc.status.success(), "gcc: {}", String::from_utf8_lossy(&cc.stderr));
    let run = Command::new(&exe).output().expect("run the layout program");
    let _ = std::fs::remove_dir_all(&dir);
    let got = String::from_utf8_lossy(&run.stdout);
    let diff: Vec<(&str, &str)> = got.lines().zip(want.lines()).filter(|(g, w)| g != w).collect();
    assert!(diff.is_empty() && got.lines().count() == want.lines().count(), "C (header) vs Rust: {diff:#?}");
}
