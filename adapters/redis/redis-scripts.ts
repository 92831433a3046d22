import { createHash } from 'node:crypto';
import type { RedisClient } from './redis-client.ts';
import { GCRA_EPOCH_S, GCRA_EPSILON_MS } from '../memory/gcra.ts';

/**
 * A Lua script known by its SHA1. The name (with a version suffix) is the first line of the
 * source, so it shows up in SCRIPT/SLOWLOG output and any change to a script yields a new SHA
 * instead of silently running an old body cached on the server.
 */
export interface LuaScript {
  readonly name: string;
  readonly source: string;
  readonly sha: string;
}

function lua(name: string, body: string): LuaScript {
  const source = `-- ${name}\n${body.trim()}\n`;
  return { name, source, sha: createHash('sha1').update(source).digest('hex') };
}

/** Extra life for keys beyond the moment they become meaningless, so clock skew between calls never drops live state. */
export const KEY_TTL_SLACK_MS = 1_000;

// Doubles must round-trip exactly through Redis strings; Lua's tostring keeps only 14 digits.
const FORMAT = `local function fmt(x) return string.format('%.17g', x) end`;

/**
 * GCRA helpers: the same expressions, in the same order, as adapters/memory/gcra.ts (read that
 * file for the semantics). Time is the server's, counted from GCRA_EPOCH_S, so every replica
 * shares one clock and the client's never matters.
 */
const GCRA_PRELUDE = `
${FORMAT}
local EPS = ${GCRA_EPSILON_MS}
local time = redis.call('TIME')
local now = (tonumber(time[1]) - ${GCRA_EPOCH_S}) * 1000 + tonumber(time[2]) / 1000

-- nil means a full bucket
local function read_tat(key)
  local stored = redis.call('GET', key)
  if not stored then return nil end
  local tat = tonumber(stored)
  if tat and tat > now then return tat end
  return nil
end

local function write_tat(key, tat)
  local ahead = tat - now
  if ahead <= EPS then
    redis.call('DEL', key)
  else
    -- the key lives until its bucket has drained, plus slack
    redis.call('SET', key, fmt(tat), 'PX', math.ceil(ahead) + ${KEY_TTL_SLACK_MS})
  end
end

-- returns fits, base, new_tat, retry_after_ms
local function attempt(tat, limit, period, cost)
  local base = math.max(tat or now, now)
  if limit <= 0 then return false, base, base, 0 end
  if cost > limit then return false, base, base, math.max(0, math.ceil(base - now - EPS)) end
  local interval = period / limit
  local new_tat = base + cost * interval
  local ahead = new_tat - now
  if ahead <= period + EPS then return true, base, new_tat, 0 end
  return false, base, new_tat, math.max(1, math.ceil(ahead - period - EPS))
end

-- returns remaining, reset_ms
local function decision(limit, period, tat_after)
  if limit <= 0 then return 0, 0 end
  local interval = period / limit
  local remaining = math.floor((period - (tat_after - now) + EPS) / interval)
  remaining = math.min(math.max(remaining, 0), math.floor(limit))
  return remaining, math.max(0, math.ceil(tat_after - now - EPS))
end
`;

/**
 * KEYS: bucket keys. ARGV: limit, periodMs, cost per key.
 * Returns { allowed, then remaining, resetMs, retryAfterMs per key }. Writes only when every entry
 * fits; a key named twice sees what its earlier entry took.
 */
export const GCRA_CONSUME = lua('svc_gcra_consume_v1', `
${GCRA_PRELUDE}
local pending = {}
local attempts = {}
local allowed = 1
for i = 1, #KEYS do
  local key = KEYS[i]
  local limit, period, cost = tonumber(ARGV[3 * i - 2]), tonumber(ARGV[3 * i - 1]), tonumber(ARGV[3 * i])
  local tat = pending[key]
  if tat == nil then tat = read_tat(key) end
  local fits, base, new_tat, retry = attempt(tat, limit, period, cost)
  if fits then pending[key] = new_tat else allowed = 0 end
  attempts[i] = { base, new_tat, retry }
end
if allowed == 1 then
  for key, tat in pairs(pending) do write_tat(key, tat) end
end
local out = { allowed }
for i = 1, #KEYS do
  local limit, period = tonumber(ARGV[3 * i - 2]), tonumber(ARGV[3 * i - 1])
  local a = attempts[i]
  local after = a[1]
  if allowed == 1 then after = a[2] end
  local remaining, reset = decision(limit, period, after)
  out[#out + 1] = remaining
  out[#out + 1] = reset
  out[#out + 1] = a[3]
end
return out
`);

/** KEYS: bucket keys. ARGV: limit, periodMs per key. Returns remaining, resetMs, retryAfterMs (for one unit) per key. */
export const GCRA_PEEK = lua('svc_gcra_peek_v1', `
${GCRA_PRELUDE}
local out = {}
for i = 1, #KEYS do
  local limit, period = tonumber(ARGV[2 * i - 1]), tonumber(ARGV[2 * i])
  local _, base, _, retry = attempt(read_tat(KEYS[i]), limit, period, 1)
  local remaining, reset = decision(limit, period, base)
  out[#out + 1] = remaining
  out[#out + 1] = reset
  out[#out + 1] = retry
end
return out
`);

/** KEYS: bucket keys. ARGV: limit, periodMs, cost per key. A charge may go into debt; a refund stops at a full bucket. */
export const GCRA_ADJUST = lua('svc_gcra_adjust_v1', `
${GCRA_PRELUDE}
for i = 1, #KEYS do
  local key = KEYS[i]
  local limit, period, cost = tonumber(ARGV[3 * i - 2]), tonumber(ARGV[3 * i - 1]), tonumber(ARGV[3 * i])
  if limit > 0 and cost ~= 0 then
    local base = math.max(read_tat(key) or now, now)
    local moved = base + cost * (period / limit)
    if cost < 0 then moved = math.max(moved, now) end
    write_tat(key, moved)
  end
end
return 0
`);

/**
 * Leases: one ZSET per key, member = lease id, score = expiry in server milliseconds. A member is
 * alive while its score is strictly after now.
 */
const LEASE_PRELUDE = `
${FORMAT}
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

local function purge(key)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', fmt(now))
end

-- the zset outlives its longest lease by the slack, so an abandoned key vanishes on its own
local function keep_alive(key)
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if last[2] then
    redis.call('PEXPIRE', key, math.max(1, math.ceil(tonumber(last[2]) - now)) + ${KEY_TTL_SLACK_MS})
  end
end
`;

/**
 * KEYS: lease keys. ARGV: leaseId, ttlMs, then the limit per key.
 * Returns { 1, 0 } when granted on every key, { 0, index of the first full key } otherwise.
 */
export const LEASE_ACQUIRE = lua('svc_lease_acquire_v1', `
${LEASE_PRELUDE}
local id = ARGV[1]
local ttl = tonumber(ARGV[2])
for i = 1, #KEYS do
  local key = KEYS[i]
  local limit = tonumber(ARGV[i + 2])
  purge(key)
  if limit <= 0 then return { 0, i } end
  -- a lease already held here occupies its slot already: re-acquiring only refreshes it
  if not redis.call('ZSCORE', key, id) and redis.call('ZCARD', key) >= limit then return { 0, i } end
end
local expires = fmt(now + ttl)
for i = 1, #KEYS do
  redis.call('ZADD', KEYS[i], expires, id)
  keep_alive(KEYS[i])
end
return { 1, 0 }
`);

/** KEYS: lease keys. ARGV: leaseId, ttlMs. Extends the lease where it is still alive; returns 1 only if it was alive under every key. */
export const LEASE_RENEW = lua('svc_lease_renew_v1', `
${LEASE_PRELUDE}
local id = ARGV[1]
local expires = fmt(now + tonumber(ARGV[2]))
local alive = 1
for i = 1, #KEYS do
  local key = KEYS[i]
  purge(key)
  if redis.call('ZSCORE', key, id) then
    redis.call('ZADD', key, 'XX', expires, id)
    keep_alive(key)
  else
    alive = 0
  end
end
return alive
`);

/** KEYS: one lease key. Counts unexpired members without writing. */
export const LEASE_ACTIVE = lua('svc_lease_active_v1', `
${LEASE_PRELUDE}
return redis.call('ZCOUNT', KEYS[1], '(' .. fmt(now), '+inf')
`);

/**
 * KEYS: one key. ARGV: by, ttlMs. A key without expiry can only be one INCRBY just created
 * (set() always writes PX), so that is when the TTL is attached; an existing key keeps its own.
 */
export const CACHE_INCREMENT = lua('svc_cache_incr_v1', `
local value = redis.call('INCRBY', KEYS[1], ARGV[1])
if redis.call('PTTL', KEYS[1]) == -1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return value
`);

/**
 * Allowance take: KEYS are counters, ARGV = ttl, then (amount, shrink) per key. Replies
 * {0, missingIndexes...} when a counter is missing, {-1, index, remaining} when one is short, or
 * {1, taken...}. Checks everything before writing anything: all or nothing.
 */
export const ALLOWANCE_TAKE = lua('svc_allowance_take_v1', `
local ttl = ARGV[1]
local values = {}
local missing = {}
for i = 1, #KEYS do
  local stored = redis.call('GET', KEYS[i])
  if stored == false then missing[#missing + 1] = i else values[i] = tonumber(stored) end
end
if #missing > 0 then
  local reply = {0}
  for _, i in ipairs(missing) do reply[#reply + 1] = i end
  return reply
end
local pending = {}
local taken = {}
for i = 1, #KEYS do
  local amount = tonumber(ARGV[2 * i])
  local shrink = ARGV[2 * i + 1] == '1'
  local left = values[i] - (pending[KEYS[i]] or 0)
  local take = amount
  if shrink then
    if left <= 0 and amount > 0 then return {-1, i, left} end
    if left < amount then take = math.max(left, 0) end
  elseif left < amount then
    return {-1, i, left}
  end
  pending[KEYS[i]] = (pending[KEYS[i]] or 0) + take
  taken[i] = take
end
for key, amount in pairs(pending) do
  redis.call('DECRBY', key, amount)
  redis.call('PEXPIRE', key, ttl)
end
local reply = {1}
for i = 1, #KEYS do reply[#reply + 1] = taken[i] end
return reply
`);

/** Allowance give: ARGV = ttl, then an amount per key; counters that do not exist stay absent. */
export const ALLOWANCE_GIVE = lua('svc_allowance_give_v1', `
for i = 1, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    redis.call('INCRBY', KEYS[i], ARGV[i + 1])
    redis.call('PEXPIRE', KEYS[i], ARGV[1])
  end
end
return 1
`);

export const ALL_SCRIPTS: readonly LuaScript[] = [
  ALLOWANCE_TAKE,
  ALLOWANCE_GIVE,
  GCRA_CONSUME,
  GCRA_PEEK,
  GCRA_ADJUST,
  LEASE_ACQUIRE,
  LEASE_RENEW,
  LEASE_ACTIVE,
  CACHE_INCREMENT,
];

/** Loads every script up front so the first request does not pay for it, and checks our SHA matches the server's. */
export async function loadScripts(client: RedisClient): Promise<void> {
  for (const script of ALL_SCRIPTS) {
    const sha = await client.scriptLoad(script.source);
    if (sha !== script.sha) throw new Error(`Redis returned SHA ${sha} for ${script.name}, expected ${script.sha}`);
  }
}

export async function runScript(client: RedisClient, script: LuaScript, keys: string[], args: string[]): Promise<unknown> {
  try {
    return await client.evalSha(script.sha, { keys, arguments: args });
  } catch (err) {
    // A restart, failover or SCRIPT FLUSH empties the server's script cache; EVAL sends the
    // source and caches it again, so the next call is back on EVALSHA.
    if (err instanceof Error && err.message.startsWith('NOSCRIPT')) {
      return client.eval(script.source, { keys, arguments: args });
    }
    throw err;
  }
}

/** Script replies are arrays of integers; anything else means a script and its caller disagree. */
export function integerReply(reply: unknown, script: LuaScript): number[] {
  if (!Array.isArray(reply) || !reply.every((item) => typeof item === 'number')) {
    throw new Error(`unexpected reply from ${script.name}: ${JSON.stringify(reply)}`);
  }
  return reply as number[];
}
