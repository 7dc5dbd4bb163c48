//! `rping_run_server` and `rping_test_server`: bind, listen, take one
//! connection request, accept, then for each ping READ the client's
//! buffer and WRITE it back, until the client disconnects.

use super::cb::{Cb, Fatal, St};
use super::ping::c_str;
use super::setup::{self, conn_param};
use super::RpingArgs;
use std::net::SocketAddr;
use uroce_verbs::*;

/// The process's exit status.
pub fn run(cb: &mut Cb, args: &RpingArgs, bind: SocketAddr) -> u8 {
    match serve(cb, args, bind) {
        Ok(()) => 0,
        Err(_) => 255,
    }
}

fn serve(cb: &mut Cb, args: &RpingArgs, bind: SocketAddr) -> Result<(), Fatal> {
    if let Err(e) = cb.cm_id.bind_addr(bind) {
        eprintln!("rdma_bind_addr: {e}");
        return Err(Fatal::Fail);
    }
    cb.dbg("rdma_bind_addr successful");
    cb.dbg("rdma_listen");
    if let Err(e) = cb.cm_id.listen(3) {
        eprintln!("rdma_listen: {e}");
        return Err(Fatal::Fail);
    }
    cb.sem_wait()?;
    if cb.state != St::ConnectRequest {
        eprintln!("wait for CONNECT_REQUEST state {}", cb.state);
        return Err(Fatal::Fail);
    }
    let child = cb.child.clone().expect("a connect request");
    setup::setup_and_post_recv(cb, &child, args)?;
    accept(cb, args, &child)?;
    let tested = test(cb, args);
    if tested == Err(Fatal::Fail) {
        eprintln!("rping server failed: -1");
    }
    if let Err(e) = setup::disconnect(cb, &child, args.self_qp) {
        eprintln!("rdma_disconnect: {e}");
    }
    cb.join_cq();
    tested
}

/// `rping_accept`.
fn accept(cb: &mut Cb, args: &RpingArgs, child: &rdma_cm::CmId) -> Result<(), Fatal> {
    cb.dbg("accepting client connection request");
    let accepted = if args.self_qp {
        setup::self_modify_qp(cb, child).and_then(|()| child.accept(Some(&conn_param(cb, true, args))))
    } else {
        child.accept(None)
    };
    if let Err(e) = accepted {
        eprintln!("rdma_accept: {e}");
        eprintln!("connect error -1");
        return Err(Fatal::Fail);
    }
    cb.sem_wait()?;
    if cb.state == St::Error {
        eprintln!("wait for CONNECTED state {}", cb.state);
        eprintln!("connect error -1");
        return Err(Fatal::Fail);
    }
    Ok(())
}

/// One wait of the ping loop: the state it must reach, or the loop ends.
fn expect(cb: &mut Cb, want: St, name: &str) -> Result<bool, Fatal> {
    cb.sem_wait()?;
    if cb.state != want {
        eprintln!("wait for {name} state {}", cb.state);
        return Ok(false);
    }
    Ok(true)
}

/// `rping_test_server`: ends well when the client disconnected.
fn test(cb: &mut Cb, args: &RpingArgs) -> Result<(), Fatal> {
    let ok = ping_loop(cb, args)?;
    if ok || cb.state == St::Disconnected {
        Ok(())
    } else {
        Err(Fatal::Fail)
    }
}

fn ping_loop(cb: &mut Cb, args: &RpingArgs) -> Result<bool, Fatal> {
    loop {
        if !expect(cb, St::RdmaReadAdv, "RDMA_READ_ADV")? {
            return Ok(false);
        }
        cb.dbg("server received sink adv");
        let res = cb.res.as_ref().expect("set up");
        let (remote, rdma) = (cb.remote, res.rdma.clone());
        let read = WrOp::RdmaRead { remote_addr: remote.buf, rkey: remote.rkey };
        if let Err(e) = res.qp.post_send(&SendWr::new(0, read, vec![rdma.sge(0, remote.size)])) {
            eprintln!("post send error {e}");
            return Ok(false);
        }
        cb.dbg("server posted rdma read req ");
        if !expect(cb, St::RdmaReadComplete, "RDMA_READ_COMPLETE")? {
            return Ok(false);
        }
        cb.dbg("server received read complete");
        let text = c_str(&rdma.to_vec());
        if args.verbose > 0 {
            println!("server ping data: {text}");
        }
        if let Err(e) = cb.post_send_info() {
            eprintln!("post send error {e}");
            return Ok(false);
        }
        cb.dbg("server posted go ahead");
        if !expect(cb, St::RdmaWriteAdv, "RDMA_WRITE_ADV")? {
            return Ok(false);
        }
        cb.dbg("server received sink adv");
        let remote = cb.remote;
        let len = text.len() as u32 + 1;
        cb.dbg(format!("rdma write from lkey {:x} laddr {:x} len {len}", rdma.lkey(), rdma.addr()));
        let write = WrOp::RdmaWrite { remote_addr: remote.buf, rkey: remote.rkey };
        let qp = cb.res.as_ref().expect("set up").qp.clone();
        if let Err(e) = qp.post_send(&SendWr::new(0, write, vec![rdma.sge(0, len)])) {
            eprintln!("post send error {e}");
            return Ok(false);
        }
        if !expect(cb, St::RdmaWriteComplete, "RDMA_WRITE_COMPLETE")? {
            return Ok(false);
        }
        cb.dbg("server rdma write complete ");
        if let Err(e) = cb.post_send_info() {
            eprintln!("post send error {e}");
            return Ok(false);
        }
        cb.dbg("server posted go ahead");
    }
}
