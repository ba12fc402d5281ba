//! Batches: a batch split by group, one script per group or spread shard,
//! and the `WAIT` that confirms replicas hold it; the registry of groups.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use redis::cluster::ClusterConnection;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::{RedisError, Value};
use sesame_core::{Error, Result};

use super::layout::{Group, GroupKeys};
use super::{RedisClusterStore, MAX_EXTRA_WAIT_MS};

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
    /// `None` on every master (the least of their answers counts): each
    /// covers this connection's writes to that master. It waits for
    /// `wait_ms`, plus twice `applied` (how long the master took to apply
    /// the batch: a replica applies it too before it confirms), at most
    /// [`MAX_EXTRA_WAIT_MS`] more.
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
        let mut wait = redis::cmd("WAIT");
        wait.arg(self.wait_replicas).arg(timeout_ms);
        let reply = match slot {
            Some(slot) => c.route_command(
                &wait,
                RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(Route::new(
                    slot,
                    SlotAddr::Master,
                ))),
            )?,
            // Redis's own routing of WAIT: every master, the minimum.
            None => wait.query(c)?,
        };
        let got = match reply {
            Value::Int(n) => n,
            other => {
                return Ok(Err(Error::StoreIo(format!(
                    "{}: WAIT answered {other:?}",
                    self.label
                ))))
            }
        };
        if got < i64::from(self.wait_replicas) {
            let whom = slot.map_or_else(
                || "the masters of an index's shards".to_owned(),
                |s| format!("the master of slot {s}"),
            );
            return Ok(Err(Error::StoreUnavailable(format!(
                "{}: the write reached {whom} but only {got} of {} replicas within {} ms; it \
                 may be lost if that master fails now (retry the request, or lower wait=)",
                self.label, self.wait_replicas, timeout_ms
            ))));
        }
        Ok(Ok(()))
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
