--[[
  A run's write on Redis in one step: its row (with its head and the indexes of
  a runs list and of the recovery sweep), its next event, or both, only
  while the write's guard holds, so that of two replicas racing (a runner and a
  recovery, two endings) one writes and the other nothing, and a runner that
  lost its lease never writes again. The seq is taken in the same step as the
  append, so the log is dense and in order whichever replica appends.

  Input:
    KEYS[1] the run's row           (runplane:runs:<run_id>, keyv's '{"value":{...}}')
    KEYS[2] the runner's lease      (runplane:kv:runner:<run_id>)
    KEYS[3] the run's seq counter   (runplane:events-seq:<run_id>)
    KEYS[4] the run's event list    (runplane:events:<run_id>)
    KEYS[5] the tenant's runs       (runplane:runs-by-tenant:<tenant_id>, members '<created_at> <run_id>', score 0)
    KEYS[6] the unfinished runs     (runplane:runs-unfinished, run ids)
    KEYS[7] the run's head          (runplane:runs-head:<run_id>, its view: what polls and lists read)

    ARGV[1] the guard: 'none'; 'unended' (no row yet, or its status unfinished);
            'leased' (the row exists and is unfinished, and the lease is ARGV[2]'s)
    ARGV[2] the lease's owner ('leased' only)
    ARGV[3] the row's new text, or '' to leave the row as it is
    ARGV[4] the event as a JSON object without seq, or '' for no event
    ARGV[5] most events kept in the list
    ARGV[6] TTL of the seq and list keys, seconds
    ARGV[7] pub/sub channel the event is published on
    ARGV[8] the unfinished statuses, comma separated
    ARGV[9] the run's member in the tenant's runs (with a row)
    ARGV[10] '1' when the row's new status is unfinished, else '0' (with a row)
    ARGV[11] the run id
    ARGV[12] the head's new text (with a row)

  Output:
    0 when the guard refused (nothing written); else the stored event as JSON
    text, seq first ('{"seq":N,"run_id":...}'), or 1 when there was no event.

  Only the row's status is decoded. The texts are spliced, not decoded and
  encoded again: cjson would round numbers to 14 digits and turn empty arrays
  into objects.
]]
local guard = ARGV[1]
-- the lease first: it is one GET, where the row's status costs a decode of the row
if guard == 'leased' and redis.call('GET', KEYS[2]) ~= ARGV[2] then return 0 end
if guard ~= 'none' then
  local row = redis.call('GET', KEYS[1])
  if row then
    local ok, doc = pcall(cjson.decode, row)
    local status = ok and type(doc) == 'table' and type(doc.value) == 'table' and doc.value.status
    if type(status) ~= 'string' then return redis.error_reply('run row ' .. KEYS[1] .. ' has no status') end
    if not string.find(',' .. ARGV[8] .. ',', ',' .. status .. ',', 1, true) then return 0 end
  elseif guard == 'leased' then
    return 0
  end
end
if ARGV[3] ~= '' then
  redis.call('SET', KEYS[1], ARGV[3])
  redis.call('SET', KEYS[7], ARGV[12])
  -- the indexes a runs list and the recovery sweep read, kept in the row's step
  redis.call('ZADD', KEYS[5], 0, ARGV[9])
  if ARGV[10] == '1' then redis.call('SADD', KEYS[6], ARGV[11]) else redis.call('SREM', KEYS[6], ARGV[11]) end
end
if ARGV[4] == '' then return 1 end
local seq = redis.call('INCR', KEYS[3])
local event = '{"seq":' .. seq .. ',' .. string.sub(ARGV[4], 2)
redis.call('RPUSH', KEYS[4], event)
redis.call('LTRIM', KEYS[4], -tonumber(ARGV[5]), -1)
redis.call('EXPIRE', KEYS[3], ARGV[6])
redis.call('EXPIRE', KEYS[4], ARGV[6])
redis.call('PUBLISH', ARGV[7], event)
return event
