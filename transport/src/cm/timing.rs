//! The CM's clocks, as the kernel's cm.c and cma.c set them.

use core::time::Duration;

/// Remote and local CM response timeout rdma_cm puts in a REQ (`CMA_CM_RESPONSE_TIMEOUT`):
/// 4.096 us x 2^20, about 4.3 s.
pub const CMA_CM_RESPONSE_TIMEOUT: u8 = 20;
/// Retries of a REQ, REP or DREQ rdma_cm asks for (`CMA_MAX_CM_RETRIES`).
pub const CMA_MAX_CM_RETRIES: u8 = 15;
/// The packet lifetime rdma_cm gives RoCE paths (`CMA_IBOE_PACKET_LIFETIME`
/// of Linux 6.1, whose REQs carry a local ACK timeout of 19).
pub const CMA_IBOE_PACKET_LIFETIME: u8 = 18;
/// The service timeout of the MRA rdma_cm sends while its consumer decides
/// (`CMA_CM_MRA_SETTING` without its "delay" flag): 4.096 us x 2^24, about 69 s.
pub const CMA_CM_MRA_SERVICE_TIMEOUT: u8 = 24;
/// The local CA ACK delay of rxe (`RXE_LOCAL_CA_ACK_DELAY`), a REP's Target ACK Delay.
pub const RXE_LOCAL_CA_ACK_DELAY: u8 = 15;

/// 4.096 us x 2^t in whole milliseconds, rounded as the kernel does
/// (`cm_convert_to_ms`: 1 << max(t - 8, 0)).
pub fn cm_time(iba_time: u8) -> Duration {
    Duration::from_millis(1u64 << iba_time.saturating_sub(8).min(31))
}

/// The QP's local ACK timeout from the CA's ACK delay and the path's packet
/// lifetime (`cm_ack_timeout`): 4.096 us x 2^t covering the ACK delay and a
/// round trip, the larger of the two rounded up when the other is within 50%.
pub fn ack_timeout(ca_ack_delay: u8, packet_life_time: u8) -> u8 {
    let t = i32::from(packet_life_time) + 1;
    let delay = i32::from(ca_ack_delay);
    let t = if t >= delay { t + i32::from(delay >= t - 1) } else { delay + i32::from(t >= delay - 1) };
    t.min(31) as u8
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn the_kernel_numbers() {
        // REQ timeout: 2 x packet lifetime + remote response time = 6.1 s.
        assert_eq!(
            cm_time(CMA_IBOE_PACKET_LIFETIME) * 2 + cm_time(CMA_CM_RESPONSE_TIMEOUT),
            Duration::from_millis(6144)
        );
        assert_eq!(cm_time(0), Duration::from_millis(1));
        // The capture's REQ: rxe's ack delay 15, lifetime 18 -> 19.
        assert_eq!(ack_timeout(RXE_LOCAL_CA_ACK_DELAY, CMA_IBOE_PACKET_LIFETIME), 19);
        // On the REP the active side recomputes it from the target's delay.
        assert_eq!(ack_timeout(15, 19 - 1), 19);
        assert_eq!(ack_timeout(15, 13), 16);
        assert_eq!(ack_timeout(15, 2), 15);
        assert_eq!(ack_timeout(31, 31), 31);
    }
}
