//! Network models: turn a measured [`Snapshot`] into the time the same run
//! would take over a given network.
//!
//! modelled time = client time + server time + rounds x RTT +
//! (bytes up + bytes down) / bandwidth, with RTT twice the one-way delay.
//! The profiles are the seeds' settings: `lan` (no delay, 1 Gbit/s) and
//! `wan103` / `wan197` (10 Mbit/s with 103 ms / 197 ms one-way delay, as in
//! the Aura evaluation, NDSS 2021, and the UEDSSE evaluation's 10 Mbit/s
//! link).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::meter::Snapshot;

/// A network profile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetworkModel {
    /// Profile name.
    pub name: &'static str,
    /// One-way delay.
    pub one_way_delay: Duration,
    /// Bandwidth in bits per second.
    pub bandwidth_bps: u64,
}

impl NetworkModel {
    /// Local network: no delay, 1 Gbit/s.
    pub const LAN: NetworkModel = NetworkModel {
        name: "lan",
        one_way_delay: Duration::ZERO,
        bandwidth_bps: 1_000_000_000,
    };
    /// Wide-area network: 10 Mbit/s, 103 ms one-way delay.
    pub const WAN103: NetworkModel = NetworkModel {
        name: "wan103",
        one_way_delay: Duration::from_millis(103),
        bandwidth_bps: 10_000_000,
    };
    /// Wide-area network: 10 Mbit/s, 197 ms one-way delay.
    pub const WAN197: NetworkModel = NetworkModel {
        name: "wan197",
        one_way_delay: Duration::from_millis(197),
        bandwidth_bps: 10_000_000,
    };

    /// Every built-in profile.
    pub const ALL: [NetworkModel; 3] = [Self::LAN, Self::WAN103, Self::WAN197];

    /// The profile called `name`.
    pub fn by_name(name: &str) -> Result<NetworkModel> {
        Self::ALL
            .into_iter()
            .find(|m| m.name == name)
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "unknown network profile {name:?} (known: lan, wan103, wan197)"
                ))
            })
    }

    /// Round-trip time.
    pub fn rtt(&self) -> Duration {
        self.one_way_delay * 2
    }

    /// Time to transfer `bytes` bytes at this bandwidth.
    pub fn transfer(&self, bytes: u64) -> Duration {
        let nanos = u128::from(bytes) * 8 * 1_000_000_000 / u128::from(self.bandwidth_bps.max(1));
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    /// The modelled time of a measured run.
    pub fn time(&self, s: &Snapshot) -> Duration {
        let rounds = u32::try_from(s.rounds).unwrap_or(u32::MAX);
        Duration::from_nanos(s.client_ns)
            + Duration::from_nanos(s.server_ns)
            + self.rtt() * rounds
            + self.transfer(s.bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wan_adds_round_trips_and_transfer_time() {
        let s = Snapshot {
            client_ns: 1_000_000,
            server_ns: 2_000_000,
            bytes_up: 625_000,
            bytes_down: 625_000,
            rounds: 2,
            ..Snapshot::default()
        };
        // 1.25 MB = 10 Mbit: one second at 10 Mbit/s.
        assert_eq!(
            NetworkModel::WAN103.time(&s),
            Duration::from_millis(3 + 412 + 1000)
        );
        assert_eq!(NetworkModel::LAN.time(&s), Duration::from_millis(3 + 10));
        assert!(NetworkModel::by_name("wan197").is_ok());
        assert!(NetworkModel::by_name("moon").is_err());
    }
}
