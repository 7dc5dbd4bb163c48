//! Where a verbs user gets only a status, uroce also logs one line saying what
//! happened and what to do. Alone in its binary: it installs the global logger.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use uroce_verbs::*;

#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<u8>>>);

impl Write for Lines {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_send_nobody_receives_is_explained() {
    let lines = Lines::default();
    let sink = lines.clone();
    tracing_subscriber::fmt().with_writer(move || sink.clone()).with_ansi(false).init();

    let net = TestNet::new();
    let (ctx_a, ctx_b) = (Device::open(&net.udp(1)).unwrap(), Device::open(&net.udp(2)).unwrap());
    let (pd_a, pd_b) = (ctx_a.alloc_pd(), ctx_b.alloc_pd());
    let (cq_a, cq_b) = (ctx_a.create_cq(8, None).unwrap(), ctx_b.create_cq(8, None).unwrap());
    let a = pd_a.create_qp(&QpInit::rc(&cq_a, &cq_a)).unwrap();
    let b = pd_b.create_qp(&QpInit::rc(&cq_b, &cq_b)).unwrap();
    let mut to_b = ConnectAttr::new(b.qp_num(), b.initial_psn(), ctx_b.query_gid(1).unwrap());
    to_b.rnr_retry = 1; // give up after one RNR retry
    to_b.min_rnr_timer = 1;
    a.connect(&to_b).unwrap();
    let mut to_a = ConnectAttr::new(a.qp_num(), a.initial_psn(), ctx_a.query_gid(1).unwrap());
    to_a.min_rnr_timer = 1; // B asks A to come back after 0.01 ms
    b.connect(&to_a).unwrap();

    let mr = pd_a.reg_mr(16, AccessFlags::LOCAL_WRITE).unwrap();
    a.post_send(&SendWr::new(9, WrOp::Send, vec![mr.sge(0, 16)])).unwrap();
    let wc = cq_a.wait_one(Duration::from_secs(20)).unwrap();
    assert_eq!(wc.status, WcStatus::RnrRetryExcErr);
    let text = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
    let line = text.lines().find(|l| l.contains("RNR retry counter exceeded")).expect("a log line");
    assert!(line.contains("no receive posted") && line.contains("post receives"), "{line}");
}
