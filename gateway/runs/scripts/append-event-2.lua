--[[
  Appends one event to a run's log, taking its seq in the same step, so the log
  is dense and in order whichever replica appends.

  Input:
    KEYS[1] the run's seq counter   (runplane:events-seq:<run_id>)
    KEYS[2] the run's event list    (runplane:events:<run_id>)

    ARGV[1] the event as a JSON object without seq: '{"run_id":...,"data":...}'
    ARGV[2] most events kept in the list
    ARGV[3] TTL of both keys, seconds
    ARGV[4] pub/sub channel the event is published on

  Output:
    the stored event as JSON text, seq first: '{"seq":N,"run_id":...}'

  The event text is spliced, not decoded and encoded again: cjson would round
  numbers to 14 digits and turn empty arrays into objects.
]]
local seq = redis.call('INCR', KEYS[1])
local event = '{"seq":' .. seq .. ',' .. string.sub(ARGV[1], 2)
redis.call('RPUSH', KEYS[2], event)
redis.call('LTRIM', KEYS[2], -tonumber(ARGV[2]), -1)
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('EXPIRE', KEYS[2], ARGV[3])
redis.call('PUBLISH', ARGV[4], event)
return event
