//! The Lua scripts the store runs on a group's master: a batch, a scan and
//! a namespace's first opening.

/// Applies a batch to one group: `KEYS` = values hash, key index; `ARGV` =
/// `1` when the batch only deletes, `2` when it only puts and may not
/// change a held value (a spread shard's entries: answered `-2`, nothing
/// written, if one would change), else `0`; then the number of
/// conditions and `key a ''` (absent) or `key v value` (holds value) for
/// each (answered `-1`, nothing written, if one fails); then `p key value`
/// or `d key`, repeated, each key once. A batch that deletes every key of the
/// group (the server dropping an index) unlinks the group's two Redis keys
/// instead, which Redis frees off its main thread. The shebang makes Redis
/// refuse the whole script up front when it is out of memory, rather than
/// midway.
pub(super) const WRITE_SCRIPT: &str = r"#!lua
local h, z = KEYS[1], KEYS[2]
local n = #ARGV
local i = 3
for _ = 1, tonumber(ARGV[2]) do
  local held = redis.call('HGET', h, ARGV[i])
  if ARGV[i + 1] == 'a' then
    if held then
      return -1
    end
  elseif held ~= ARGV[i + 2] then
    return -1
  end
  i = i + 3
end
if ARGV[1] == '2' then
  local j = i
  while j <= n do
    local held = redis.call('HGET', h, ARGV[j + 1])
    if held and held ~= ARGV[j + 2] then
      return -2
    end
    j = j + 3
  end
end
if ARGV[1] == '1' then
  local len = redis.call('HLEN', h)
  if (n - i + 1) / 2 >= len then
    local present = 0
    for j = i + 1, n, 2 do
      present = present + redis.call('HEXISTS', h, ARGV[j])
    end
    if present == len then
      redis.call('UNLINK', h, z)
      return 1
    end
  end
end
while i <= n do
  if ARGV[i] == 'p' then
    redis.call('HSET', h, ARGV[i + 1], ARGV[i + 2])
    redis.call('ZADD', z, 0, ARGV[i + 1])
    i = i + 3
  else
    redis.call('HDEL', h, ARGV[i + 1])
    redis.call('ZREM', z, ARGV[i + 1])
    i = i + 2
  end
end
return 0
";

/// The pairs of one group whose keys lie in `[ARGV[1], ARGV[2]]` (lex
/// range syntax), as `key, value, key, value, ...` in key order, read in
/// one step.
pub(super) const SCAN_SCRIPT: &str = r"#!lua flags=no-writes
local ks = redis.call('ZRANGEBYLEX', KEYS[2], ARGV[1], ARGV[2])
local out = {}
local chunk = tonumber(ARGV[3])
for i = 1, #ks, chunk do
  local last = math.min(i + chunk - 1, #ks)
  local vs = redis.call('HMGET', KEYS[1], unpack(ks, i, last))
  for j = 1, #vs do
    out[#out + 1] = ks[i + j - 1]
    out[#out + 1] = vs[j]
  end
end
return out
";

/// Writes the format marker of a new namespace, refuses keys of ours that
/// have no marker, and returns the marker (nil for "data but no marker").
/// `KEYS` = marker, group registry, home values, home index.
pub(super) const INIT_SCRIPT: &str = r"#!lua
local m = redis.call('GET', KEYS[1])
if m then return m end
if redis.call('EXISTS', KEYS[2], KEYS[3], KEYS[4]) > 0 then return false end
redis.call('SET', KEYS[1], ARGV[1])
return ARGV[1]
";
