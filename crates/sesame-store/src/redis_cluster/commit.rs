//! Batches: a batch split by group, one script per group or spread shard,
//! and the `WAIT` that confirms replicas hold it; the registry of groups.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use redis::cluster::ClusterConnection;
use redis::cluster_routing::{
    MultipleNodeRoutingInfo, Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr,
};
use redis::{RedisError, Value};
use sesame_core::{Error, Result};

use super::layout::{Group, GroupKeys};
use super::{RedisClusterStore, DEGRADED_FOR, DEGRADED_WAIT_MS, MAX_EXTRA_WAIT_MS};

/// A batch split by [`RedisClusterStore::plan_write`].
pub(super) struct WritePlan<'k> {
    /// The group of the conditions and of the keys outside spread shards
    /// (`Some(None)`: home), if any.
    pub(super) base: Option<Option<Group<'k>>>,
    pub(super) base_ops: BTreeMap<&'k [u8], Option<&'k [u8]>>,
    /// The spread index's shards and their operations.
    pub(super) shards: BTreeMap<Group<'k>, BTreeMap<&'k [u8], Option<&'k [u8]>>>,
}

/// A shard's keys and the operations of a batch on it.
pub(super) type ShardOps<'a, 'k> = (GroupKeys, Vec<(&'a &'k [u8], &'a Option<&'k [u8]>)>);

impl RedisClusterStore {
    /// `WAIT` for the configured replicas on the master of `slot`, or with
    /// `None` on every master (each answers for itself): each covers this
    /// connection's writes to that master. It waits for `wait_ms`, plus
    /// twice `applied` (how long the master took to apply the batch: a
    /// replica applies it too before it confirms), at most
    /// [`MAX_EXTRA_WAIT_MS`] more.
    ///
    /// **The durability rule.** A master's batch is acknowledged once
    /// `min(wait, live)` replicas confirmed it, where `live` is the number
    /// of that master's replicas that the master itself, asked right after
    /// a `WAIT` fell short, does not see as failing (`CLUSTER NODES`: not
    /// `fail`, not `fail?`, which it sets after the node timeout). So a
    /// shard whose replica died, or whose master died and whose replica took
    /// over, goes on taking writes once the cluster has noticed (the node
    /// timeout) with every copy it still has; a replica that is alive but
    /// has not confirmed in time makes the write fail, as before. A node
    /// that has stopped being the master (it was paused and replaced)
    /// acknowledges nothing. After a master was seen short of replicas,
    /// for [`DEGRADED_FOR`] every `WAIT` first waits only
    /// [`DEGRADED_WAIT_MS`] and then the full time for what the master's
    /// live replicas can give, so that writes to a shard without a replica
    /// do not each wait `wait_ms`.
    pub(super) fn wait_on(
        &self,
        c: &mut ClusterConnection,
        slot: Option<u16>,
        applied: Duration,
    ) -> std::result::Result<std::result::Result<(), Error>, RedisError> {
        if self.wait_replicas == 0 {
            return Ok(Ok(()));
        }
        let extra = u64::try_from(applied.as_millis().saturating_mul(2))
            .unwrap_or(u64::MAX)
            .min(MAX_EXTRA_WAIT_MS);
        let timeout_ms = self.wait_ms + extra;
        let degraded = self.degraded();
        let first_ms = if degraded {
            DEGRADED_WAIT_MS.min(timeout_ms)
        } else {
            timeout_ms
        };
        let wait = |n: u32, ms: u64| {
            let mut cmd = redis::cmd("WAIT");
            cmd.arg(n).arg(ms);
            cmd
        };
        let answers: Vec<(SingleNodeRoutingInfo, Value)> = match slot {
            Some(slot) => {
                self.trip(1);
                let route = SingleNodeRoutingInfo::SpecificNode(Route::new(slot, SlotAddr::Master));
                let reply = c.route_command(
                    &wait(self.wait_replicas, first_ms),
                    RoutingInfo::SingleNode(route.clone()),
                )?;
                vec![(route, reply)]
            }
            None => {
                let reply = c.route_command(
                    &wait(self.wait_replicas, first_ms),
                    RoutingInfo::MultiNode((MultipleNodeRoutingInfo::AllMasters, None)),
                )?;
                match reply {
                    Value::Map(pairs) => {
                        self.trip(pairs.len());
                        let mut answers = Vec::with_capacity(pairs.len());
                        for (addr, reply) in pairs {
                            match by_address(&addr) {
                                Some(route) => answers.push((route, reply)),
                                None => {
                                    return Ok(Err(Error::StoreIo(format!(
                                        "{}: WAIT on every master named a node {addr:?}",
                                        self.label
                                    ))))
                                }
                            }
                        }
                        answers
                    }
                    other => {
                        return Ok(Err(Error::StoreIo(format!(
                            "{}: WAIT on every master answered {other:?}",
                            self.label
                        ))))
                    }
                }
            }
        };
        for (route, reply) in answers {
            let got = match self.replicas_in(reply) {
                Ok(n) => n,
                Err(e) => return Ok(Err(e)),
            };
            if got >= i64::from(self.wait_replicas) {
                continue;
            }
            let whom = match (&route, slot) {
                (_, Some(s)) => format!("the master of slot {s}"),
                (SingleNodeRoutingInfo::ByAddress { host, port }, None) => {
                    format!("the master {host}:{port} of some of an index's shards")
                }
                _ => "a master of an index's shards".to_owned(),
            };
            let live = match self.live_replicas(c, &route)? {
                Ok(n) => n,
                Err(e) => return Ok(Err(e)),
            };
            let need = self.wait_replicas.min(live);
            let mut got = got;
            if got < i64::from(need) && first_ms < timeout_ms {
                self.trip(1);
                let reply = c.route_command(
                    &wait(need, timeout_ms),
                    RoutingInfo::SingleNode(route.clone()),
                )?;
                got = match self.replicas_in(reply) {
                    Ok(n) => n,
                    Err(e) => return Ok(Err(e)),
                };
            }
            if got < i64::from(need) {
                return Ok(Err(Error::StoreUnavailable(format!(
                    "{}: the write reached {whom} but only {got} of its {live} live replicas \
                     (wait={}) confirmed it within {timeout_ms} ms; it may be lost if that \
                     master fails now (retry the request)",
                    self.label, self.wait_replicas
                ))));
            }
            // Fewer live replicas than asked for: the shard is short of
            // copies until its failed node comes back.
            self.mark_degraded();
        }
        Ok(Ok(()))
    }

    /// A `WAIT`'s answer: the replicas that confirmed.
    fn replicas_in(&self, reply: Value) -> Result<i64> {
        match reply {
            Value::Int(n) => Ok(n),
            other => Err(Error::StoreIo(format!(
                "{}: WAIT answered {other:?}",
                self.label
            ))),
        }
    }

    /// The replicas of the master that `route` names that this master
    /// does not see as failing (`CLUSTER NODES`, its own view). A node
    /// that is no longer a master gives [`Error::StoreUnavailable`]: it was
    /// replaced while it could not answer, and what it applied is lost when
    /// it follows its successor.
    fn live_replicas(
        &self,
        c: &mut ClusterConnection,
        route: &SingleNodeRoutingInfo,
    ) -> std::result::Result<std::result::Result<u32, Error>, RedisError> {
        self.trip(1);
        let reply = c.route_command(
            &redis::cmd("CLUSTER").arg("NODES").clone(),
            RoutingInfo::SingleNode(route.clone()),
        )?;
        let text: String = redis::from_redis_value(reply)?;
        Ok(live_replicas_in(&text).ok_or_else(|| {
            Error::StoreUnavailable(format!(
                "{}: a node that took a write is no longer a master (it was replaced by \
                 its replica); retry the request",
                self.label
            ))
        }))
    }

    /// Whether a master was seen short of replicas within [`DEGRADED_FOR`].
    fn degraded(&self) -> bool {
        self.lock_degraded()
            .is_some_and(|at| at.elapsed() < DEGRADED_FOR)
    }

    fn mark_degraded(&self) {
        *self.lock_degraded() = Some(Instant::now());
    }

    /// Splits a collapsed batch by group: at most one group (the home
    /// group, or `A/B`) for the conditions and the keys outside spread
    /// shards, and the shards of at most one spread index, that of `A/B`
    /// when there is a base group. Anything else is refused.
    #[allow(clippy::type_complexity)]
    pub(super) fn plan_write<'k>(
        &self,
        expect: &[(&'k [u8], Option<&'k [u8]>)],
        last: &BTreeMap<&'k [u8], Option<&'k [u8]>>,
    ) -> Result<WritePlan<'k>> {
        let mut plan = WritePlan {
            base: None,
            base_ops: BTreeMap::new(),
            shards: BTreeMap::new(),
        };
        let show = |g: Option<Group<'_>>| {
            g.map_or_else(
                || "the home group".to_owned(),
                |g| format!("group {:?}", String::from_utf8_lossy(&g.bytes())),
            )
        };
        let refuse = |a: Option<Group<'_>>, b: Option<Group<'_>>| {
            Error::Unsupported(format!(
                "{}: a write batch and its conditions must keep to one key group (keys \
                 c/A/B/... form group A/B, other keys the home group), or to one group A/B \
                 and the shards of its spread entries e/A/B/...; this one touches {} and {}",
                self.label,
                show(a),
                show(b)
            ))
        };
        let set_base = |plan: &mut WritePlan<'k>, g: Option<Group<'k>>| match plan.base {
            None => {
                plan.base = Some(g);
                Ok(())
            }
            Some(b) if b == g => Ok(()),
            Some(b) => Err(refuse(b, g)),
        };
        // A condition on a spread key makes its shard the base group: it
        // holds only in a batch that keeps to that shard.
        for (k, _) in expect {
            set_base(&mut plan, self.group(k))?;
        }
        for (&k, &v) in last {
            let g = self.group(k);
            match g {
                Some(s) if s.shard.is_some() && plan.base != Some(g) => {
                    plan.shards.entry(s).or_default().insert(k, v);
                }
                _ => {
                    set_base(&mut plan, g)?;
                    plan.base_ops.insert(k, v);
                }
            }
        }
        // One shard and nothing else: an ordinary one-group batch.
        if plan.base.is_none() && plan.shards.len() == 1 {
            if let Some((g, ops)) = plan.shards.pop_first() {
                plan.base = Some(Some(g));
                plan.base_ops = ops;
            }
        }
        let index = plan.shards.keys().next().map(|g| g.name);
        if let Some(name) = index {
            if let Some(other) = plan.shards.keys().find(|g| g.name != name) {
                return Err(refuse(plan.shards.keys().next().copied(), Some(*other)));
            }
            match plan.base {
                None => {}
                Some(Some(b)) if b.shard.is_none() && b.name == name => {}
                Some(b) => return Err(refuse(b, plan.shards.keys().next().copied())),
            }
        }
        Ok(plan)
    }

    /// Applies `ops` to the group of `keys` in one script on `c`, under
    /// the conditions `expect` (with `write_once`, a put may not change a
    /// held value): `false` when a condition failed and nothing was
    /// written. Waits for no replica.
    pub(super) fn invoke_write(
        &self,
        c: &mut ClusterConnection,
        keys: &GroupKeys,
        write_once: bool,
        expect: &[(&[u8], Option<&[u8]>)],
        ops: &[(&&[u8], &Option<&[u8]>)],
    ) -> std::result::Result<bool, RedisError> {
        self.trip(1);
        let mut invocation = self.write_script.key(&keys.values);
        invocation.key(&keys.index);
        let only_deletes = !ops.is_empty() && ops.iter().all(|(_, v)| v.is_none());
        invocation.arg(match (only_deletes, write_once) {
            (true, _) => "1",
            (false, true) => "2",
            (false, false) => "0",
        });
        invocation.arg(expect.len());
        for (k, v) in expect {
            match v {
                Some(v) => invocation.arg(*k).arg("v").arg(*v),
                None => invocation.arg(*k).arg("a").arg(""),
            };
        }
        for (k, v) in ops {
            match v {
                Some(v) => invocation.arg("p").arg(**k).arg(*v),
                None => invocation.arg("d").arg(**k),
            };
        }
        Ok(invocation.invoke::<i64>(c)? >= 0)
    }

    /// Applies `ops` to each shard in `shards` (puts or deletes), then one
    /// `WAIT` on every master, all on `c`: `Ok(false)` when a put would
    /// change a held value (that shard unwritten; shards before it
    /// written).
    pub(super) fn write_shards(
        &self,
        c: &mut ClusterConnection,
        shards: &[ShardOps<'_, '_>],
        puts: bool,
    ) -> std::result::Result<std::result::Result<bool, Error>, RedisError> {
        let start = Instant::now();
        let mut wrote = false;
        for (keys, ops) in shards.iter().filter(|(_, ops)| !ops.is_empty()) {
            if !self.invoke_write(c, keys, puts, &[], ops)? {
                return Ok(Ok(false));
            }
            wrote = true;
        }
        if !wrote {
            return Ok(Ok(true));
        }
        self.wait_on(c, None, start.elapsed())
            .map(|r| r.map(|()| true))
    }

    /// Adds `group` to the registry (once per handle), durably as a batch.
    pub(super) fn register(&self, group: &[u8]) -> Result<()> {
        if self.lock_registered().contains(group) {
            return Ok(());
        }
        let home_slot = GroupKeys::new(&self.namespace, None).slot;
        self.trip(1);
        self.with_conn(|c| {
            redis::cmd("ZADD")
                .arg(self.registry_key())
                .arg(0)
                .arg(group)
                .query::<i64>(c)?;
            self.wait_on(c, Some(home_slot), Duration::ZERO)
        })??;
        self.lock_registered().insert(group.to_vec());
        Ok(())
    }
}

/// The route to the node `addr` (`host:port`, as a multi-node answer
/// names it).
fn by_address(addr: &Value) -> Option<SingleNodeRoutingInfo> {
    let addr = match addr {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        _ => return None,
    };
    let (host, port) = addr.rsplit_once(':')?;
    Some(SingleNodeRoutingInfo::ByAddress {
        host: host.to_owned(),
        port: port.parse().ok()?,
    })
}

/// From `CLUSTER NODES` as a node sees it: how many replicas of that node
/// it does not see as failing (flags without `fail`, `fail?`, `noaddr`,
/// `handshake`), or `None` when the node is not a master.
pub(super) fn live_replicas_in(nodes: &str) -> Option<u32> {
    let lines: Vec<Vec<&str>> = nodes
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|f| f.len() >= 8)
        .collect();
    let me = lines
        .iter()
        .find(|f| f[2].split(',').any(|x| x == "myself"))?;
    if !me[2].split(',').any(|x| x == "master") {
        return None;
    }
    let live = lines
        .iter()
        .filter(|f| f[3] == me[0])
        .filter(|f| {
            f[2].split(',')
                .all(|x| !matches!(x, "fail" | "fail?" | "noaddr" | "handshake"))
        })
        .count();
    Some(u32::try_from(live).unwrap_or(u32::MAX))
}

#[cfg(test)]
mod tests {
    use super::live_replicas_in;

    const NODES: &str = "\
a1 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-5460
b1 127.0.0.1:7001@17001 master - 0 0 2 connected 5461-10922
a2 127.0.0.1:7003@17003 slave a1 0 0 1 connected
b2 127.0.0.1:7004@17004 slave b1 0 0 2 connected
a3 127.0.0.1:7006@17006 slave,fail? a1 0 0 1 connected
a4 127.0.0.1:7007@17007 slave,fail a1 0 0 1 disconnected
";

    #[test]
    fn live_replicas_are_the_masters_replicas_not_seen_failing() {
        assert_eq!(live_replicas_in(NODES), Some(1));
        let replaced = NODES.replace("myself,master", "myself,slave");
        assert_eq!(live_replicas_in(&replaced), None);
        assert_eq!(live_replicas_in(""), None);
    }
}
