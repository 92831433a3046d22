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
 * One reading of the server's clock per script, so every replica shares one clock and the
 * client's never matters. GCRA counts fractional milliseconds from GCRA_EPOCH_S (see gcra.ts);
 * leases use whole milliseconds since 1970.
 */
const CLOCK = `
local time = redis.call('TIME')
local now = (tonumber(time[1]) - ${GCRA_EPOCH_S}) * 1000 + tonumber(time[2]) / 1000
local now_ms = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
`;

/**
 * GCRA helpers: the same expressions, in the same order, as adapters/memory/gcra.ts (read that
 * file for the semantics). Entries are ranges of KEYS with (limit, periodMs, cost) triples in ARGV.
 */
const GCRA_FUNCTIONS = `
local EPS = ${GCRA_EPSILON_MS}

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

-- Works out count entries from KEYS[first] (triples from ARGV[arg]) without writing; a key named
-- twice sees what its earlier entry took. Returns allowed, pending (key -> TAT), attempts.
local function gcra_check(first, count, arg)
  local pending, attempts, allowed = {}, {}, true
  for j = 1, count do
    local key = KEYS[first + j - 1]
    local o = arg + 3 * (j - 1)
    local limit, period, cost = tonumber(ARGV[o]), tonumber(ARGV[o + 1]), tonumber(ARGV[o + 2])
    local tat = pending[key]
    if tat == nil then tat = read_tat(key) end
    local fits, base, new_tat, retry = attempt(tat, limit, period, cost)
    if fits then pending[key] = new_tat else allowed = false end
    attempts[j] = { base, new_tat, retry, limit, period }
  end
  return allowed, pending, attempts
end

local function gcra_commit(pending)
  for key, tat in pairs(pending) do write_tat(key, tat) end
end

-- Appends remaining, resetMs, retryAfterMs per entry: the bucket after the call when taken, as it is otherwise.
local function gcra_report(out, attempts, taken)
  for j = 1, #attempts do
    local a = attempts[j]
    local after = a[1]
    if taken then after = a[2] end
    local remaining, reset = decision(a[4], a[5], after)
    out[#out + 1] = remaining
    out[#out + 1] = reset
    out[#out + 1] = a[3]
  end
end

-- A charge may go into debt; a refund stops at a full bucket.
local function gcra_adjust(first, count, arg)
  for j = 1, count do
    local key = KEYS[first + j - 1]
    local o = arg + 3 * (j - 1)
    local limit, period, cost = tonumber(ARGV[o]), tonumber(ARGV[o + 1]), tonumber(ARGV[o + 2])
    if limit > 0 and cost ~= 0 then
      local base = math.max(read_tat(key) or now, now)
      local moved = base + cost * (period / limit)
      if cost < 0 then moved = math.max(moved, now) end
      write_tat(key, moved)
    end
  end
end
`;

const GCRA_PRELUDE = FORMAT + CLOCK + GCRA_FUNCTIONS;

/**
 * KEYS: bucket keys. ARGV: limit, periodMs, cost per key.
 * Returns { allowed, then remaining, resetMs, retryAfterMs per key }. Writes only when every entry fits.
 */
export const GCRA_CONSUME = lua(
  'svc_gcra_consume_v2',
  `
${GCRA_PRELUDE}
local allowed, pending, attempts = gcra_check(1, #KEYS, 1)
if allowed then gcra_commit(pending) end
local out = { allowed and 1 or 0 }
gcra_report(out, attempts, allowed)
return out
`,
);

/** KEYS: bucket keys. ARGV: limit, periodMs per key. Returns remaining, resetMs, retryAfterMs (for one unit) per key. */
export const GCRA_PEEK = lua(
  'svc_gcra_peek_v2',
  `
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
`,
);

/** KEYS: bucket keys. ARGV: limit, periodMs, cost per key. */
export const GCRA_ADJUST = lua(
  'svc_gcra_adjust_v2',
  `
${GCRA_PRELUDE}
gcra_adjust(1, #KEYS, 1)
return 0
`,
);

/**
 * Leases: one ZSET per key, member = lease id, score = expiry in server milliseconds. A member is
 * alive while its score is strictly after now_ms.
 */
const LEASE_FUNCTIONS = `
local function purge(key)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', fmt(now_ms))
end

-- the zset outlives its longest lease by the slack, so an abandoned key vanishes on its own
local function keep_alive(key)
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if last[2] then
    redis.call('PEXPIRE', key, math.max(1, math.ceil(tonumber(last[2]) - now_ms)) + ${KEY_TTL_SLACK_MS})
  end
end

-- Position (from 1) of the first of count keys from KEYS[first] without room for lease id, or 0.
-- Limits are in ARGV from limit_arg. A lease already held under a key occupies its slot already.
local function lease_first_full(first, count, id, limit_arg)
  for j = 1, count do
    local key = KEYS[first + j - 1]
    local limit = tonumber(ARGV[limit_arg + j - 1])
    purge(key)
    if limit <= 0 then return j end
    if not redis.call('ZSCORE', key, id) and redis.call('ZCARD', key) >= limit then return j end
  end
  return 0
end

local function lease_grant(first, count, id, ttl)
  local expires = fmt(now_ms + ttl)
  for j = 1, count do
    local key = KEYS[first + j - 1]
    redis.call('ZADD', key, expires, id)
    keep_alive(key)
  end
end
`;

const LEASE_PRELUDE = FORMAT + CLOCK + LEASE_FUNCTIONS;

/**
 * KEYS: lease keys. ARGV: leaseId, ttlMs, then the limit per key.
 * Returns { 1, 0 } when granted on every key, { 0, index of the first full key } otherwise.
 */
export const LEASE_ACQUIRE = lua(
  'svc_lease_acquire_v2',
  `
${LEASE_PRELUDE}
local id = ARGV[1]
local full = lease_first_full(1, #KEYS, id, 3)
if full > 0 then return { 0, full } end
lease_grant(1, #KEYS, id, tonumber(ARGV[2]))
return { 1, 0 }
`,
);

/** KEYS: lease keys. ARGV: leaseId, ttlMs. Extends the lease where it is still alive; returns 1 only if it was alive under every key. */
export const LEASE_RENEW = lua(
  'svc_lease_renew_v2',
  `
${LEASE_PRELUDE}
local id = ARGV[1]
local expires = fmt(now_ms + tonumber(ARGV[2]))
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
`,
);

/** KEYS: one lease key. Counts unexpired members without writing. */
export const LEASE_ACTIVE = lua(
  'svc_lease_active_v2',
  `
${LEASE_PRELUDE}
return redis.call('ZCOUNT', KEYS[1], '(' .. fmt(now_ms), '+inf')
`,
);

/**
 * KEYS: one key. ARGV: by, ttlMs. A key without expiry can only be one INCRBY just created
 * (set() always writes PX), so that is when the TTL is attached; an existing key keeps its own.
 */
export const CACHE_INCREMENT = lua(
  'svc_cache_incr_v1',
  `
local value = redis.call('INCRBY', KEYS[1], ARGV[1])
if redis.call('PTTL', KEYS[1]) == -1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return value
`,
);

/** Allowance counters: integer strings; a missing counter must be seeded from the durable store first. */
const ALLOWANCE_FUNCTIONS = `
-- Works out count takes from KEYS[first] with (amount, shrink, headroom) triples from ARGV[arg],
-- writing nothing. What is left is the counter plus its headroom (a spend cap's counter holds minus
-- the period's spend, and the cap comes as headroom). Returns 'missing', positions |
-- 'short', position, left | 'ok', pending (key -> amount), taken.
local function allowance_check(first, count, arg)
  local values, missing = {}, {}
  for j = 1, count do
    local stored = redis.call('GET', KEYS[first + j - 1])
    if stored == false then missing[#missing + 1] = j else values[j] = tonumber(stored) end
  end
  if #missing > 0 then return 'missing', missing end
  local pending, taken = {}, {}
  for j = 1, count do
    local key = KEYS[first + j - 1]
    local amount = tonumber(ARGV[arg + 3 * (j - 1)])
    local shrink = ARGV[arg + 3 * (j - 1) + 1] == '1'
    local left = values[j] + tonumber(ARGV[arg + 3 * (j - 1) + 2]) - (pending[key] or 0)
    local take = amount
    if shrink then
      if left <= 0 and amount > 0 then return 'short', j, left end
      if left < amount then take = math.max(left, 0) end
    elseif left < amount then
      return 'short', j, left
    end
    pending[key] = (pending[key] or 0) + take
    taken[j] = take
  end
  return 'ok', pending, taken
end

local function allowance_commit(pending, ttl)
  for key, amount in pairs(pending) do
    redis.call('DECRBY', key, amount)
    redis.call('PEXPIRE', key, ttl)
  end
end

-- Adds ARGV[arg..] to count counters from KEYS[first]; counters that do not exist stay absent.
local function allowance_give(first, count, arg, ttl)
  for j = 1, count do
    local key = KEYS[first + j - 1]
    if redis.call('EXISTS', key) == 1 then
      redis.call('INCRBY', key, ARGV[arg + j - 1])
      redis.call('PEXPIRE', key, ttl)
    end
  end
end
`;

/**
 * Allowance take: KEYS are counters, ARGV = ttl, then (amount, shrink, headroom) per key. Replies
 * {0, missingIndexes...} when a counter is missing, {-1, index, remaining} when one is short, or
 * {1, taken...}. Checks everything before writing anything: all or nothing.
 */
export const ALLOWANCE_TAKE = lua(
  'svc_allowance_take_v3',
  `
${ALLOWANCE_FUNCTIONS}
local status, a, b = allowance_check(1, #KEYS, 2)
if status == 'missing' then
  local reply = {0}
  for _, i in ipairs(a) do reply[#reply + 1] = i end
  return reply
end
if status == 'short' then return {-1, a, b} end
allowance_commit(a, ARGV[1])
local reply = {1}
for j = 1, #KEYS do reply[#reply + 1] = b[j] end
return reply
`,
);

/** Allowance give: ARGV = ttl, then an amount per key; counters that do not exist stay absent. */
export const ALLOWANCE_GIVE = lua(
  'svc_allowance_give_v3',
  `
${ALLOWANCE_FUNCTIONS}
allowance_give(1, #KEYS, 2, ARGV[1])
return 1
`,
);

/** Gate replies: the first word. */
export const GATE_STATUS = { admitted: 1, requests: 2, concurrency: 3, tokens: 4, missing: 5, short: 6, reset: 7 } as const;

/**
 * The store's epoch: a value set once and never expiring, so its absence means the server lost its
 * data (restarted without persistence, failed over to an empty replica, evicted keys) or is new.
 * Which of the two, and what the new epoch is, the replicas decide with the database
 * (redis-epoch.ts); the scripts only fence on it.
 */
const EPOCH_FUNCTIONS = `
local function epoch_changed(epoch_key, known)
  return redis.call('GET', epoch_key) ~= known
end
`;

/** KEYS: epoch. ARGV: the caller's epoch. Replies {0} while it is the store's, {1} otherwise. */
export const EPOCH_CHECK = lua(
  'svc_epoch_check_v2',
  `
${EPOCH_FUNCTIONS}
if epoch_changed(KEYS[1], ARGV[1]) then return { 1 } end
return { 0 }
`,
);

/** How long the mark of a loss (and the reports after it) outlive it: far beyond any recovery window. */
export const EPOCH_LOSS_TTL_MS = 60 * 60_000;

/**
 * KEYS: epoch, lost. ARGV: the epoch the database recorded, '1' if it was begun after a loss.
 * Writes the epoch unless the store has one (replicas establishing together: the same value),
 * with the server time of the loss under `lost` when there was one. Replies {1} when written.
 */
export const EPOCH_ESTABLISH = lua(
  'svc_epoch_establish_v1',
  `
${CLOCK}
if redis.call('SET', KEYS[1], ARGV[1], 'NX') == false then return { 0 } end
if ARGV[2] == '1' then
  redis.call('SET', KEYS[2], now_ms, 'PX', ${EPOCH_LOSS_TTL_MS})
else
  redis.call('DEL', KEYS[2])
end
return { 1 }
`,
);

/**
 * Whether admissions may resume in the epoch. KEYS: epoch, lost, reported (a set of replica ids).
 * ARGV: the epoch, the recovery window, then the live replicas. Replies {-1} when the epoch is no
 * longer the store's, {1} when it began without a loss, every live replica has reported, or the
 * window since the loss has passed; {0} otherwise.
 */
export const EPOCH_READY = lua(
  'svc_epoch_ready_v1',
  `
${CLOCK}
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return { -1 } end
local lost = redis.call('GET', KEYS[2])
if not lost or tonumber(lost) + tonumber(ARGV[2]) <= now_ms then return { 1 } end
for i = 3, #ARGV do
  if redis.call('SISMEMBER', KEYS[3], ARGV[i]) == 0 then return { 0 } end
end
return { 1 }
`,
);

/**
 * Re-seeds a rate bucket after a loss. KEYS: the bucket, its seed mark. ARGV: the epoch, limit,
 * periodMs, units, the mark's ttlMs. The first seeder in the epoch charges the units (the bucket
 * may go into debt) and marks it; later ones change nothing. Replies {1} when it seeded.
 */
export const WINDOW_SEED = lua(
  'svc_window_seed_v1',
  `
${GCRA_PRELUDE}
if redis.call('GET', KEYS[2]) == ARGV[1] then return { 0 } end
local limit, period, units = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
if limit > 0 and units > 0 then
  write_tat(KEYS[1], math.max(read_tat(KEYS[1]) or now, now) + units * (period / limit))
end
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[5])
return { 1 }
`,
);

/** KEYS: lease keys. ARGV: leaseId, ttlMs. Puts a lease of a call in flight back after a loss, whatever the limits. */
export const LEASE_RESTORE = lua(
  'svc_lease_restore_v1',
  `
${LEASE_PRELUDE}
lease_grant(1, #KEYS, ARGV[1], tonumber(ARGV[2]))
return { 1 }
`,
);

/**
 * The admission gate in one script. KEYS: request buckets, token buckets, lease keys, allowance
 * counters, then the epoch. ARGV: the four counts, leaseId, lease ttlMs, counter ttlMs, the
 * caller's epoch, then (limit, periodMs, cost) per request and token bucket, the limit per lease
 * key, (amount, shrink, headroom) per counter.
 * Fences on the epoch first (reset: { status }), then checks in the order
 * requests, concurrency, tokens, money and writes only when all pass.
 * Replies { status, detail, detail, (remaining, resetMs, retryAfterMs) per bucket, tail... } with
 * the statuses of GATE_STATUS: admitted (tail: taken per counter), concurrency (detail: position
 * of the full lease key), missing (tail: positions of missing counters), short (details: position
 * and what is left).
 */
export const GATE_ADMIT = lua(
  'svc_gate_admit_v3',
  `
${FORMAT}
${CLOCK}
${GCRA_FUNCTIONS}
${LEASE_FUNCTIONS}
${ALLOWANCE_FUNCTIONS}
${EPOCH_FUNCTIONS}
if epoch_changed(KEYS[#KEYS], ARGV[8]) then return { ${GATE_STATUS.reset} } end
local nr, nt, nl, na = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local id, lease_ttl, counter_ttl = ARGV[5], tonumber(ARGV[6]), ARGV[7]
local tok_arg = 9 + 3 * nr
local lease_arg = tok_arg + 3 * nt
local allow_arg = lease_arg + nl
local tok_key = 1 + nr
local lease_key = tok_key + nt
local allow_key = lease_key + nl
local req_ok, req_pending, req_attempts = gcra_check(1, nr, 9)
local tok_ok, tok_pending, tok_attempts = gcra_check(tok_key, nt, tok_arg)
local function reply(status, a, b, taken, tail)
  local out = { status, a, b }
  gcra_report(out, req_attempts, taken)
  gcra_report(out, tok_attempts, taken)
  if tail then for j = 1, #tail do out[#out + 1] = tail[j] end end
  return out
end
if not req_ok then return reply(${GATE_STATUS.requests}, 0, 0, false) end
local full = lease_first_full(lease_key, nl, id, lease_arg)
if full > 0 then return reply(${GATE_STATUS.concurrency}, full, 0, false) end
if not tok_ok then return reply(${GATE_STATUS.tokens}, 0, 0, false) end
local status, a, b = allowance_check(allow_key, na, allow_arg)
if status == 'missing' then return reply(${GATE_STATUS.missing}, 0, 0, false, a) end
if status == 'short' then return reply(${GATE_STATUS.short}, a, b, false) end
gcra_commit(req_pending)
gcra_commit(tok_pending)
lease_grant(lease_key, nl, id, lease_ttl)
allowance_commit(a, counter_ttl)
return reply(${GATE_STATUS.admitted}, 0, 0, true, b)
`,
);

/**
 * Settles a call. KEYS: lease keys, allowance counters, token buckets. ARGV: the three counts,
 * leaseId, counter ttlMs, an amount per counter, (limit, periodMs, cost) per token bucket.
 */
export const GATE_SETTLE = lua(
  'svc_gate_settle_v1',
  `
${FORMAT}
${CLOCK}
${GCRA_FUNCTIONS}
${ALLOWANCE_FUNCTIONS}
local nl, na, nt = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
for j = 1, nl do redis.call('ZREM', KEYS[j], ARGV[4]) end
allowance_give(nl + 1, na, 6, ARGV[5])
gcra_adjust(nl + na + 1, nt, 6 + na)
return 1
`,
);

export const ALL_SCRIPTS: readonly LuaScript[] = [
  GATE_ADMIT,
  EPOCH_CHECK,
  EPOCH_ESTABLISH,
  EPOCH_READY,
  WINDOW_SEED,
  LEASE_RESTORE,
  GATE_SETTLE,
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
  // One pipelined round of SCRIPT LOADs at start-up, not one round trip per script.
  const shas = await Promise.all(ALL_SCRIPTS.map((script) => client.scriptLoad(script.source)));
  ALL_SCRIPTS.forEach((script, i) => {
    if (shas[i] !== script.sha) throw new Error(`Redis returned SHA ${shas[i]} for ${script.name}, expected ${script.sha}`);
  });
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
